#!/bin/sh
# test.sh [plain|sanitizers|fuzzing|distcheck] - builds tpload (see
# build.sh) and runs the whole test suite (`make check`); with `fuzzing`,
# runs every fuzz target briefly over its corpus instead; with `distcheck`,
# checks the release tarball.  Ends with "N passed, N failed".
set -u
kind=${1:-plain}
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$("$top/scripts/build.sh" "$kind") || { echo "0 passed, 1 failed"; exit 1; }
cd "$dir" || exit 1
if [ "$kind" = distcheck ]; then
  # a tarball that builds out of tree and passes the whole suite
  if make distcheck >distcheck.out 2>&1; then echo "1 passed, 0 failed"; exit 0
  fi
  grep -E '^(FAIL|ERROR)' distcheck.out | head -20; tail -n 20 distcheck.out
  echo "0 passed, 1 failed"; exit 1
fi
if [ "$kind" = fuzzing ]; then
  make fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-15}" >fuzz.out 2>&1
  status=$?
  grep '^fuzz-smoke:' fuzz.out
  pass=$(grep -c '^fuzz-smoke: PASS' fuzz.out)
  fail=$(grep -c '^fuzz-smoke: FAIL' fuzz.out)
  if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then
    tail -n 30 fuzz.out; fail=1
  fi
  echo "$pass passed, $fail failed"
  [ "$status" -eq 0 ]; exit
fi
rm -f test-suite.log
make -j"$(nproc)" check >check.out 2>&1
status=$?
if [ ! -f test-suite.log ]; then
  tail -n 30 check.out
  echo "0 passed, 1 failed"
  exit 1
fi
grep -h '^FAIL\|^ERROR\|^XPASS' test-suite.log 2>/dev/null | head -40
pass=$(awk '/^# PASS:/ {print $3}' test-suite.log)
fail=$(awk '/^# (FAIL|ERROR|XPASS):/ {n += $3} END {print n + 0}' test-suite.log)
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
echo "${pass:-0} passed, $fail failed"
[ "$status" -eq 0 ]
