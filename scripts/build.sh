#!/bin/sh
# build.sh [plain|sanitizers|fuzzing] - installs missing Debian packages,
# regenerates the build system when needed, and builds tpload out of tree
# in build/, build-san/ or build-fuzz/, every kind with --enable-werror.
# Prints the build directory.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-plain}
"$top/scripts/install-deps.sh"
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || \
   [ Makefile.am -nt Makefile.in ]; then
  autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
case "$kind" in
  plain|distcheck) dir=build; flags= ;;
  sanitizers) dir=build-san; flags=--enable-sanitizers ;;
  fuzzing) dir=build-fuzz; flags="--enable-fuzzing --enable-sanitizers CC=clang" ;;
  *) echo "build.sh: unknown build kind '$kind'" >&2; exit 64 ;;
esac
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || ! grep -q -e --enable-werror config.status; then
  # shellcheck disable=SC2086
  ../configure -q --enable-werror $flags >&2
fi
make -j"$(nproc)" >&2
echo "$top/$dir"
