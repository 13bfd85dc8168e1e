#!/usr/bin/env bash
# Builds the pinned Ory Hydra (a real OpenID provider for the OIDC
# end-to-end test) into the user's cache folder, once per machine:
#   ${XDG_CACHE_HOME:-~/.cache}/hxd/hydra-v2.3.0/hydra
# Prints the binary path. A cached build is reused. With --path it only
# prints where the binary is (or will be), building nothing.
set -euo pipefail
version=v2.3.0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hxd/hydra-$version"
bin="$cache/hydra"
if [[ "${1:-}" == --path || -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
echo "building Ory Hydra $version into $cache (a few minutes, once)…" >&2
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/ory/hydra/v2@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
# The released go.mod replaces the client module with a local folder that
# is not part of the module zip; drop that line.
sed -i '/^replace github.com\/ory\/hydra-client-go\/v2/d' go.mod
GOFLAGS=-mod=mod go build -trimpath -tags sqlite,sqlite_omit_load_extension -o "$work/hydra" . >&2
mv "$work/hydra" "$bin"
echo "$bin"
