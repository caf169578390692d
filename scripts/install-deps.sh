#!/bin/sh
# Installs the Debian packages tpload needs to build, test and fuzz, then
# the npm package the S3 test runs (install-s3rver.sh, into the project's
# .local/; a failure there is a warning: that test says it skips).
# Idempotent: does nothing when everything is present. Needs root (apt-get)
# only when something is missing; says so clearly otherwise.
set -eu

PACKAGES="build-essential libopenmpi-dev openmpi-bin libuv1-dev libprotobuf-c-dev
protobuf-c-compiler libjansson-dev libxxhash-dev nettle-dev liburing-dev autoconf automake libtool
pkg-config python3-numpy clang libclang-rt-14-dev bc
slurm-wlm python3-mpi4py clang-format libcurl4-openssl-dev nginx openssl"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
    missing="$missing $p"
  fi
done
# Node.js may come from elsewhere (nodesource bundles npm): only when npm
# is missing are Debian's nodejs and npm wanted
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"

s3rver() {
  "$(dirname "$0")/install-s3rver.sh" >/dev/null ||
    echo "install-deps: could not install s3rver (npm); the S3 test skips" >&2
}
if [ -z "$missing" ]; then
  s3rver
  exit 0
fi

echo "install-deps: installing:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
  else
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run as root: apt-get install -y$missing" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
s3rver
