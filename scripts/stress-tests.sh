#!/bin/sh
# stress-tests.sh [--plain] [--all | --tests "T..."] [N] - runs the tests
# most exposed to a slow machine (the mpirun scripts and test_daemon;
# with --tests, the ones named, as `make check TESTS=` takes them, e.g.
# "tests/mpi/reload_faults.sh tests/cli/http_cli.sh"; with --all, the
# whole suite) N times (default 5) in the sanitizer build, as
# `scripts/test.sh sanitizers` does (--plain: in the plain build), while a
# CPU hog (`yes`) runs on every core, the tests themselves nproc at a time
# as `scripts/test.sh` runs them.  Prints each round's result and time,
# then every test case (script, TAP number, description) that failed even
# once, with how often; exits 1 if any did.  A deterministic suite shows
# none: no verdict may depend on the speed of the machine.
set -u
tests="tests/unit/test_daemon tests/mpi/mpi_load.sh tests/mpi/mpi_failures.sh \
tests/mpi/mpi_edge.sh tests/mpi/verify.sh tests/mpi/mpi_serve.sh"
kind=sanitizers
usage() {
  echo "usage: stress-tests.sh [--plain] [--all | --tests \"T...\"]" \
    "[ROUNDS]" >&2
  exit 64
}
while [ $# -gt 0 ]; do
  case $1 in
    --plain) kind=plain ;;
    --all) tests="" ;;
    --tests) [ $# -ge 2 ] && [ -n "$2" ] || usage; tests=$2; shift ;;
    -*) usage ;;
    *) break ;;
  esac
  shift
done
rounds=${1:-5}
case $rounds in '' | *[!0-9]*) usage ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$("$top/scripts/build.sh" "$kind") || exit 1
cd "$dir" || exit 1
failures="$dir/stress-failures.txt"
: >"$failures"

hogs=""
stop_hogs() { [ -z "$hogs" ] || kill $hogs 2>/dev/null; hogs=""; }
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for _ in $(seq "$(nproc)"); do
  yes >/dev/null &
  hogs="$hogs $!"
done
echo "stress: $rounds rounds ($kind build), a CPU hog on each of $(nproc)" \
  "cores (pids$hogs)"

total=$(date +%s)
for round in $(seq "$rounds"); do
  start=$(date +%s)
  rm -f test-suite.log
  if [ -n "$tests" ]; then
    make -j"$(nproc)" check TESTS="$tests" >"stress-round$round.out" 2>&1
  else
    make -j"$(nproc)" check >"stress-round$round.out" 2>&1
  fi
  # FAIL/ERROR/XPASS lines name the script, the TAP number and the case
  # (a line naming only the script heads that script's log)
  if [ -f test-suite.log ]; then
    grep -E '^(FAIL|ERROR|XPASS): ' test-suite.log |
      grep -vE '^[A-Z]+: [^ ]+$'
  else echo "ERROR: make check - no test-suite.log (see stress-round$round.out)"
  fi >"stress-round$round.fail"
  cat "stress-round$round.fail" >>"$failures"
  pass=$(awk '/^# PASS:/ {print $3}' test-suite.log 2>/dev/null)
  echo "round $round: ${pass:-0} passed, $(grep -c . \
    "stress-round$round.fail") failed, $(($(date +%s) - start)) s"
  sed 's/^/  /' "stress-round$round.fail"
done
stop_hogs

echo "stress: $rounds rounds in $(($(date +%s) - total)) s"
if [ ! -s "$failures" ]; then
  echo "stress: no test case failed"
  exit 0
fi
echo "stress: test cases that failed at least once (count, case):"
sort "$failures" | uniq -c | sort -rn
exit 1
