#!/usr/bin/env bash
# Builds the pinned versitygw (an Apache-2.0 S3-compatible gateway; its posix
# backend serves a local folder as buckets) for the Temporal-engine
# end-to-end test's artifact store, into the user's cache folder, once:
#   ${XDG_CACHE_HOME:-~/.cache}/hxd/versitygw-v1.8.0/versitygw
# Prints the binary path. A cached build is reused; --path only prints
# where the binary is (or will be). Under 2 minutes cold.
set -euo pipefail
exec "$(dirname "$0")/go-install-cached.sh" "$@" versitygw v1.8.0 \
	github.com/versity/versitygw/cmd/versitygw versitygw "versitygw v1.8.0 (under 2 minutes)"
