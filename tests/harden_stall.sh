#!/bin/sh
# harden_stall.sh - the progress deadline (--stall-timeout): a rank that
# stops (SIGSTOP, raised by the rank itself just before it receives, or
# with --read local before it reads, via the test-only
# TPLOAD_TEST_SIGSTOP_RANK) ends the job with exit 69 and one message
# naming the stopped rank, instead of hanging with its peer spinning; no
# process of the job is left.  With --read local a rank that reads slowly
# but keeps going is waited for (its heartbeats move the deadline).  The
# bound is generous (it only catches a hang); the measured stall-to-exit
# time is printed as a TAP comment.
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

# stopped_rank LABEL ARGS...: rank 1 stops (SIGSTOP) in a 2-rank load of
# "$M/m" with ARGS; the job must end with 69, one message naming rank 1,
# and no process left.
stopped_rank() {
  local label=$1; shift
  local t0 rc el left
  t0=$(ms)
  TPLOAD_TEST_SIGSTOP_RANK=1 timeout -s KILL $BOUND_SECS \
    "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" \
    load "$M/m" --plan "$M/m/plan.json" --quiet \
    --stall-timeout $STALL_SECS "$@" >"$T_TMP/out" 2>"$T_TMP/err"
  rc=$?
  el=$(($(ms) - t0))
  if [ $rc -eq 69 ]; then t_ok "$label: a stopped rank ends the job with 69"
  else t_fail "$label: a stopped rank ends the job with 69" \
    "exit $rc after $el ms" "$(messages "$T_TMP/err" | head -c 1500)"; fi
  echo "# $label: stall-to-exit: $el ms with --stall-timeout $STALL_SECS"
  messages "$T_TMP/err" | grep '^tpload' >"$T_TMP/msgs"
  if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] &&
     grep -q "waiting for rank 1: rank 1 stopped or hangs" "$T_TMP/msgs"; then
    t_ok "$label: one message names rank 1"
  else t_fail "$label: one message names rank 1" "$(cat "$T_TMP/msgs")"; fi
  left=$(pgrep -f -- "$M/m/plan.json")
  if [ -z "$left" ]; then t_ok "$label: no process of the job is left"
  else
    t_fail "$label: no process of the job is left" \
      "$(pgrep -a -f -- "$M/m/plan.json")"
    kill -KILL $left
  fi
}

# Rank 1 stops just before it receives.
stopped_rank "--read mpi"
# --read local: rank 1 stops with its files open, before reading; rank 0
# reads its own slices, then waits for rank 1's heartbeats in vain.
stopped_rank "--read local" --read local

# --read local: rank 1 reads slowly (50 ms per 512 KiB step, the
# test-only TPLOAD_TEST_SLOW_RANK: about 5 s for its 48 MiB) but keeps
# going; its heartbeats (every 0.5 s) keep rank 0 waiting past the 2 s
# stall deadline.
gen slow --seed 6102 --layout single --big-mib 48
TPLOAD_TEST_SLOW_RANK=1 timeout -s KILL $BOUND_SECS \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SLOW_RANK "$TPLOAD" \
  load "$M/slow" --plan "$M/slow/plan.json" --read local --json \
  --stall-timeout $STALL_SECS >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 0 ]; then t_ok "--read local: a slow rank that keeps reading is waited for"
else t_fail "--read local: a slow rank that keeps reading is waited for" \
  "exit $rc" "$(messages "$T_TMP/err" | head -c 1500)"; fi
t_py "--read local: the slow rank read for longer than the stall deadline" '
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][1]
if r["seconds"] <= 3:
    sys.exit("rank 1 took %.2f s: too fast to test the heartbeats" % r["seconds"])
' "$T_TMP/out"
t_done
