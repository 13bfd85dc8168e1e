#!/usr/bin/env bash
# Usage: go-install-cached.sh [--path] NAME VERSION PACKAGE BINARY "WHAT (how long)"
# `go install`s PACKAGE@VERSION (pure Go, from the module proxy) once per
# machine into ${XDG_CACHE_HOME:-~/.cache}/hxd/NAME-VERSION/BINARY and
# prints the binary's path; a cached build is reused. With --path it only
# prints that path, building nothing. The build-*.sh scripts pin what the
# tests run against.
set -euo pipefail
path_only=false
if [[ "${1:-}" == --path ]]; then
	path_only=true
	shift
fi
name=$1 version=$2 pkg=$3 binary=$4 what=$5
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hxd/$name-$version"
bin="$cache/$binary"
if $path_only || [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building $what into $cache, once…" >&2
GOBIN="$work" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath "$pkg@$version" >&2
mv "$work/$binary" "$bin"
echo "$bin"
