# lib.sh - shared helpers for the shell tests: TAP output, temp dirs,
# and running tpload / mpirun with expected exit codes.
# shellcheck shell=bash
: "${TPLOAD:?run via make check}"
T_COUNT=0
T_FAILED=0
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tpload-test.XXXXXX")
trap 'rm -rf "$T_TMP"' EXIT
ORACLE=${PYTHON_ORACLE:-/usr/bin/python3}
# --read's default for the suite: every test's files sit warm in the one
# page cache all its ranks (and the cluster's nodes) share, where auto
# would have every rank read its own slices; a test means rank 0's
# stream unless it says --read (tests/mpi/read_auto.sh tests auto's
# choice).  TPLOAD_READ=auto make check runs the whole suite that way.
export TPLOAD_READ=${TPLOAD_READ-mpi}
# Scripts use the numpy oracle unless they set T_NO_NUMPY=1 before sourcing
# this file; without numpy (configure says so) they SKIP as a whole.
if [ "${TPL_HAVE_NUMPY:-yes}" = no ] && [ "${T_NO_NUMPY:-0}" != 1 ]; then
  echo "1..0 # SKIP python3 with numpy not found by configure" \
    "(scripts/install-deps.sh installs python3-numpy)"
  exit 0
fi

t_ok() { T_COUNT=$((T_COUNT + 1)); echo "ok $T_COUNT - $1"; }
t_fail() {
  T_COUNT=$((T_COUNT + 1)); T_FAILED=$((T_FAILED + 1))
  echo "not ok $T_COUNT - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
# t_check NAME CMD...: passes when CMD succeeds.
t_check() {
  local name=$1; shift
  if "$@" >"$T_TMP/out" 2>"$T_TMP/err"; then t_ok "$name"
  else t_fail "$name" "command failed: $*" "$(head -c 2000 "$T_TMP/err")"; fi
}
# t_exit NAME CODE CMD...: passes when CMD exits with CODE and, for a
# non-zero CODE, prints exactly one line to stderr.
t_exit() {
  local name=$1 want=$2; shift 2
  "$@" >"$T_TMP/out" 2>"$T_TMP/err"
  local got=$?
  local lines
  lines=$(grep -c . "$T_TMP/err")
  if [ "$got" -ne "$want" ]; then
    t_fail "$name" "expected exit $want, got $got: $*" \
      "$(head -c 2000 "$T_TMP/err")"
  elif [ "$want" -ne 0 ] && [ "$lines" -lt 1 ]; then
    t_fail "$name" "expected an error message, stderr was empty"
  else
    t_ok "$name"
  fi
}
t_done() { echo "1..$T_COUNT"; [ "$T_FAILED" -eq 0 ]; }

# Waits end on a condition, never on elapsed time; their one bound only
# catches a hang (T_HANG_SECS, default 120 s), scaled by TPL_TEST_SLOWDOWN
# (the sanitizer build exports 4, see Makefile.am).  A test never asserts
# how fast something happened.
T_HANG_SECS=$((${T_HANG_SECS:-120} * ${TPL_TEST_SLOWDOWN:-1}))

# wait_for SECS CMD...: runs CMD until it succeeds; 1 when it still fails
# after SECS.
wait_for() {
  local end=$(($(date +%s) + $1)); shift
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# wait_until CMD...: wait_for with the hang bound.
wait_until() { wait_for "$T_HANG_SECS" "$@"; }

# alive PID: the process exists and is not a zombie.
alive() {
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# gone PID...: none of the PIDs is alive.
gone() {
  local p
  for p in "$@"; do ! alive "$p" || return 1; done
}
