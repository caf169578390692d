# bench_lib.sh - what every bench script sets up once it has read its
# options, sourced with `top` set to the source tree: the plain build
# (build, T), Debian's python3 with numpy (PY), the model cache (cache:
# TPLOAD_BENCH_DIR, default /tmp/tpload-bench) and, as root, Open MPI's
# consent to run as root.  Not a test.
build=$("$top/scripts/build.sh" plain) || exit 1
T="$build/tpload"
PY=/usr/bin/python3
cache=${TPLOAD_BENCH_DIR:-/tmp/tpload-bench}
mkdir -p "$cache"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
