#!/bin/sh
# install-s3rver.sh - s3rver (the npm registry's S3 server, pinned), which
# tests/mpi/s3_mpi.sh runs behind its verifying proxy, into the project's
# own prefix .local/s3rver (never globally).  Called by install-deps.sh;
# idempotent.  Prints the path of the s3rver command.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/.local/s3rver"
bin="$dir/node_modules/.bin/s3rver"
if [ ! -x "$bin" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-s3rver: npm not found (install-deps.sh installs nodejs" \
      "and npm)" >&2
    exit 1
  fi
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    s3rver@3.7.1 >/dev/null
fi
echo "$bin"
