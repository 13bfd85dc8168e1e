#!/usr/bin/env bash
# Builds the pinned versitygw (an Apache-2.0 S3-compatible gateway; its posix
# backend serves a local folder as buckets) for the Temporal-engine
# end-to-end test's artifact store, into the user's cache folder, once:
#   ${XDG_CACHE_HOME:-~/.cache}/hxd/versitygw-v1.8.0/versitygw
# Prints the binary path. A cached build is reused. Under 2 minutes cold.
set -euo pipefail
version=v1.8.0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hxd/versitygw-$version"
bin="$cache/versitygw"
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building versitygw $version into $cache (under 2 minutes, once)…" >&2
GOBIN="$work" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath "github.com/versity/versitygw/cmd/versitygw@$version" >&2
mv "$work/versitygw" "$bin"
echo "$bin"
