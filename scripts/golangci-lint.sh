#!/usr/bin/env bash
# Runs golangci-lint at the version pinned by the `tool` line of
# tools/golangci-lint/go.mod (its own module, so that the linter's large
# dependency graph stays out of hxd's go.mod), with the arguments given:
#   bash scripts/golangci-lint.sh run ./...
#   bash scripts/golangci-lint.sh run --concurrency 1 ./internal/http/...
# `make lint` calls it. The first build on a machine compiles over a
# thousand packages (minutes on 2 cores); `go tool` would do it silently,
# so the packages are compiled here first with a progress line every
# PROGRESS_EVERY packages. Once built, the step takes about a second and
# prints nothing. It needs the network only to fetch the modules the
# first time (GOFLAGS=-mod=mod is not needed: go.sum pins every module).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

GO=${GO:-go}
modfile=tools/golangci-lint/go.mod
# commands holds every package of the linter except its tiny main package,
# so building it compiles (and caches) what `go tool` then only links.
pkg=github.com/golangci/golangci-lint/v2/pkg/commands
every=${PROGRESS_EVERY:-100}

start=$SECONDS
# -v names each package as it is compiled; cached packages are not named.
"$GO" build -modfile="$modfile" -v "$pkg" 2>&1 | awk -v every="$every" '
	# A line that is not an import path (an error, a download) is shown.
	!/^[A-Za-z0-9._~\/+-]+$/ { print; next }
	{
		n++
		if (n == 1) { printf "golangci-lint: first build on this machine, compiling its packages (minutes)…\n" > "/dev/stderr" }
		if (n % every == 0) { printf "golangci-lint: %d packages compiled…\n", n > "/dev/stderr" }
	}
	END { if (n > 0) { printf "golangci-lint: %d packages compiled\n", n > "/dev/stderr" } }
' >&2
if ((SECONDS - start > 10)); then
	echo "golangci-lint: built in $((SECONDS - start))s; linking it…" >&2
fi
exec "$GO" tool -modfile="$modfile" golangci-lint "$@"
