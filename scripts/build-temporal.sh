#!/usr/bin/env bash
# Builds the pinned Temporal CLI (its `server start-dev` is the real Temporal
# server the Temporal-engine end-to-end test runs against) into the user's
# cache folder, once per machine:
#   ${XDG_CACHE_HOME:-~/.cache}/hxd/temporal-cli-v1.5.1/temporal
# Prints the binary path. A cached build is reused. About 4 minutes cold.
set -euo pipefail
version=v1.5.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hxd/temporal-cli-$version"
bin="$cache/temporal"
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building the Temporal CLI $version into $cache (about 4 minutes, once)…" >&2
GOBIN="$work" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath "github.com/temporalio/cli/cmd/temporal@$version" >&2
mv "$work/temporal" "$bin"
echo "$bin"
