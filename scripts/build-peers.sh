#!/usr/bin/env bash
# `make peers`: builds the pinned test peers one at a time, before any
# `go test` runs (`make test` and `make test-temporal` depend on it), so
# that a cold build (minutes each on a fresh 2-core machine) never counts
# against a test package's timeout:
#   Ory Hydra          scripts/build-hydra.sh      TestServeOIDCHydra
#   the Temporal CLI   scripts/build-temporal.sh   the Temporal engine's tests
#   versitygw          scripts/build-versitygw.sh  the Temporal engine's tests
# Each lands in ${XDG_CACHE_HOME:-~/.cache}/hxd/ once per machine; the tests
# still call the same scripts, which then answer at once. One line per peer
# says which peer, cached or built, and the time it took (a build first
# says it starts, and go's own output follows on stderr). A peer named by
# HXD_TEMPORAL_CLI or HXD_VERSITYGW is not built (the tests use that one).
#
# A failed build fails this script under CI=true; elsewhere it is reported,
# the other peers are still built, and the tests needing it skip or fail
# as they do on their own (they say why).
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)

# elapsed formats seconds as 7s or 3m05s.
elapsed() {
	local s=$1
	if ((s >= 60)); then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

# script:environment variable naming a prebuilt binary (none for Hydra).
peers=(build-hydra.sh: build-temporal.sh:HXD_TEMPORAL_CLI build-versitygw.sh:HXD_VERSITYGW)
n=${#peers[@]} i=0 failed=() all=$SECONDS
for peer in "${peers[@]}"; do
	script=${peer%%:*} override=${peer#*:}
	i=$((i + 1))
	if [[ -n "$override" && -n "${!override:-}" ]]; then
		echo "peers [$i/$n] $script: not built, $override=${!override}"
		continue
	fi
	bin=$(bash "$dir/$script" --path)
	name=$(basename "$(dirname "$bin")") # e.g. hydra-v2.3.0
	start=$SECONDS
	state=cached
	if [[ ! -x "$bin" ]]; then
		state=built
		echo "peers [$i/$n] $name: building into $(dirname "$bin") (minutes, once per machine)…"
	fi
	if ! bash "$dir/$script" >/dev/null; then
		echo "peers [$i/$n] $name: build FAILED after $(elapsed $((SECONDS - start))) (scripts/$script)" >&2
		if [[ "${CI:-}" == true ]]; then
			exit 1
		fi
		failed+=("$name")
		continue
	fi
	echo "peers [$i/$n] $name: $state, $(elapsed $((SECONDS - start))): $bin"
done
if ((${#failed[@]} > 0)); then
	echo "peers: not built: ${failed[*]}; the tests needing them will skip or fail and say why" >&2
fi
echo "peers: ready in $(elapsed $((SECONDS - all)))"
