#!/usr/bin/env bash
# Builds the pinned Temporal CLI (its `server start-dev` is the real Temporal
# server the Temporal-engine end-to-end test runs against) into the user's
# cache folder, once per machine:
#   ${XDG_CACHE_HOME:-~/.cache}/hxd/temporal-cli-v1.5.1/temporal
# Prints the binary path. A cached build is reused; --path only prints
# where the binary is (or will be). About 4 minutes cold.
set -euo pipefail
exec "$(dirname "$0")/go-install-cached.sh" "$@" temporal-cli v1.5.1 \
	github.com/temporalio/cli/cmd/temporal temporal "the Temporal CLI v1.5.1 (about 4 minutes)"
