#!/bin/sh
# test.sh [plain|sanitizers|fuzzing|distcheck] - builds tpload (see
# build.sh) and runs the whole test suite (`make check`); with `fuzzing`,
# runs every fuzz target briefly over its corpus instead; with `distcheck`,
# checks the release tarball.  `plain` also checks that every C file under
# src/ tests/ fuzz/ include/ is as clang-format (14) writes it, and counts
# that as one test.  Ends with "N passed, N failed".
set -u
kind=${1:-plain}
top=$(cd "$(dirname "$0")/.." && pwd)
# the S3 test's server, installed by install-deps.sh (distcheck's copy of
# the tree has no .local/)
TPLOAD_S3RVER=${TPLOAD_S3RVER:-$top/.local/s3rver/node_modules/.bin/s3rver}
export TPLOAD_S3RVER
dir=$("$top/scripts/build.sh" "$kind") || { echo "0 passed, 1 failed"; exit 1; }
cd "$dir" || exit 1
if [ "$kind" = distcheck ]; then
  # a tarball that builds out of tree and passes the whole suite
  if make -j"$(nproc)" distcheck >distcheck.out 2>&1; then echo "1 passed, 0 failed"; exit 0
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
# format_check: prints the files clang-format would change; 1 if any.
format_check() {
  if ! command -v clang-format >/dev/null 2>&1; then
    echo "test.sh: SKIP the clang-format check: clang-format is not" \
      "installed (scripts/install-deps.sh installs it)" >&2
    return 0
  fi
  bad=$(cd "$top" && find src tests fuzz include -name '*.[ch]' | sort |
    while read -r f; do
      clang-format "$f" | cmp -s - "$f" || echo "$f"
    done)
  [ -z "$bad" ] && return 0
  echo "FAIL: these files differ from clang-format (run clang-format -i):"
  printf '  %s\n' $bad
  return 1
}
format_pass=0 format_fail=0
if [ "$kind" = plain ]; then
  if format_check; then format_pass=1; else format_fail=1; fi
fi
rm -f test-suite.log
make -j"$(nproc)" check >check.out 2>&1
status=$?
if [ ! -f test-suite.log ]; then
  tail -n 30 check.out
  echo "$format_pass passed, $((format_fail + 1)) failed"
  exit 1
fi
grep -h '^FAIL\|^ERROR\|^XPASS' test-suite.log 2>/dev/null | head -40
pass=$(awk '/^# PASS:/ {print $3}' test-suite.log)
fail=$(awk '/^# (FAIL|ERROR|XPASS):/ {n += $3} END {print n + 0}' test-suite.log)
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
echo "$((${pass:-0} + format_pass)) passed, $((fail + format_fail)) failed"
[ "$status" -eq 0 ] && [ "$format_fail" -eq 0 ]
