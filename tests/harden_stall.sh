#!/bin/sh
# harden_stall.sh - the progress deadline (--stall-timeout): a rank that
# stops (SIGSTOP, raised by the rank itself just before it receives, via
# the test-only TPLOAD_TEST_SIGSTOP_RANK) ends the job with exit 69 and
# one message naming the stopped rank, instead of hanging with its peer
# spinning; no process of the job is left.  The bound is generous (it
# only catches a hang); the measured stall-to-exit time is printed as a
# TAP comment.
. "$TESTS_SRCDIR/lib.sh"
. "$TESTS_SRCDIR/mpi_lib.sh"
. "$TESTS_SRCDIR/harden_lib.sh"

BOUND_SECS=120
STALL_SECS=2

# The big tensor (8 MiB) travels in messages far above any eager limit, so
# rank 0 must wait for the stopped rank to take them.
gen m --seed 6101 --layout single --big-mib 8

t_exit "--stall-timeout takes seconds (64)" 64 \
  mpi 2 load "$M/m" --plan "$M/m/plan.json" --stall-timeout soon

t0=$(ms)
TPLOAD_TEST_SIGSTOP_RANK=1 timeout -s KILL $BOUND_SECS \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" \
  load "$M/m" --plan "$M/m/plan.json" --quiet \
  --stall-timeout $STALL_SECS >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
el=$(($(ms) - t0))
if [ $rc -eq 69 ]; then t_ok "a stopped rank ends the job with 69"
else t_fail "a stopped rank ends the job with 69" "exit $rc after $el ms" \
  "$(messages "$T_TMP/err" | head -c 1500)"; fi
echo "# stall-to-exit: $el ms with --stall-timeout $STALL_SECS"
messages "$T_TMP/err" | grep '^tpload' >"$T_TMP/msgs"
if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] &&
   grep -q "waiting for rank 1: rank 1 stopped or hangs" "$T_TMP/msgs"; then
  t_ok "one message names rank 1"
else t_fail "one message names rank 1" "$(cat "$T_TMP/msgs")"; fi
left=$(pgrep -f -- "$M/m/plan.json")
if [ -z "$left" ]; then t_ok "no process of the job is left"
else
  t_fail "no process of the job is left" "$(pgrep -a -f -- "$M/m/plan.json")"
  kill -KILL $left
fi
t_done
