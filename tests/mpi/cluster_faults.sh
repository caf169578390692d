#!/bin/bash
# cluster_faults.sh - node faults on the cluster of tests/lib/cluster_lib.sh
# (3 nodes x 2 ranks, 400 Mbit/s links, tcp_retries2 lowered inside the
# namespaces only).  The load is held mid-stream with the stall test hook
# (TPLOAD_TEST_SIGSTOP_AT, stall.h) instead of racing it: a rank raises
# SIGSTOP at a known point, the test sees it stopped, makes the fault and
# lets the rank go on.  Each fault is a `preshard` on a fresh cluster,
# so "no partial output" is checked too:
# - node 2's link cut (at the bridge) while rank 4 is about to receive;
# - node 2's two ranks SIGSTOPped while rank 4 is about to receive;
# - the store's link cut while rank 0 streams a URL model and rank 2 is
#   about to receive (--retries 1 --http-timeout 2): rank 0's GETs are
#   retried, then the job ends with 69 naming the URL.
# For each: mpirun's exit code (69), one message naming the rank waited
# for, no rank file left, and no process left on any node; the time from
# the fault to the end is printed (the bound only catches a hang).
# Then faults a job must survive, each ending with 0, rank files = the
# numpy oracle's, no stall reported, nothing left:
# - node 2's link cut and restored once a segment was retransmitted,
#   inside --stall-timeout 10;
# - node 2's link slowed from 400 to 40 Mbit/s (tc on the bridge's side)
#   while its ranks take in ~11 MiB, longer than --stall-timeout 2.
# And a serve job whose node 2 loses its link while the ranks only serve:
# from half the deadline rank 0's status names rank 4 or 5 and node 2's
# host, --health says 69 and a reload is refused naming it; then the
# watch's beats end the job (69 naming rank 4 or 5 and node 2's host, no
# socket or ready file left, no process on any node).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"
. "$TESTS_SRCDIR/lib/cluster_lib.sh"

cl_test_begin
K=3
NP=6
# The held rank is let go well inside the deadline (a few polls of
# 50 ms), so the fault, not the hold, is what the others stall on.
STALL_SECS=$((3 * ${TPL_TEST_SLOWDOWN:-1}))
BOUND_SECS=$((90 * ${TPL_TEST_SLOWDOWN:-1}))
# fresh [store]: a new cluster for the next fault (nothing of the last
# one's processes, links or neighbour tables carries over), with the
# store when asked.
fresh() {
  cl_down
  cl_up $K 400mbit || { echo "Bail out! the cluster did not come up"; exit 99; }
  [ -z "${1:-}" ] || cl_store_up "$M" 1600mbit ||
    { echo "Bail out! the store did not come up"; exit 99; }
}
# 8 MiB tensors: far above any eager limit, so a sender waits for its
# receiver to take them.
gen m --seed 3802 --layout single --big-mib 8
MODEL=$M/m
PLAN=$MODEL/plan.json
export TPLOAD_TEST_SIGSTOP_AT TPLOAD_TEST_SIGSTOP_RANK
CL_MPI_EXTRA="-x TPLOAD_TEST_SIGSTOP_AT -x TPLOAD_TEST_SIGSTOP_RANK"

# rank_pid NODE RANK: the pid of tpload rank RANK on NODE, if any.
rank_pid() {
  local p
  for p in $(cl_ranks "$1"); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" |
      grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
}

# stopped NODE RANK: rank RANK on NODE exists and is stopped (state T);
# sets HELD to its pid.
stopped() {
  HELD=$(rank_pid "$1" "$2")
  [ -n "$HELD" ] && [ "$(sed 's/.*) //; s/ .*//' "/proc/$HELD/stat")" = T ]
}

# held_job NAME NODE RANK AT SOURCE ARGS...: starts a preshard of SOURCE
# with ARGS whose rank RANK (on NODE) stops at point AT, and waits until it
# has; JOB is mpirun's pid.  One TAP line if the rank never stops.
held_job() {
  local name=$1 node=$2 rank=$3 at=$4 src=$5; shift 5
  rm -rf "$T_TMP/$name.ps"
  TPLOAD_TEST_SIGSTOP_AT=$at TPLOAD_TEST_SIGSTOP_RANK=$rank \
    cl_mpi $NP preshard "$src" --plan "$PLAN" --out "$T_TMP/$name.ps" \
    --quiet --stall-timeout "${JOB_STALL:-$STALL_SECS}" "$@" \
    >"$T_TMP/$name.out" 2>"$T_TMP/$name.err" &
  JOB=$!
  PIDS="$PIDS $JOB"
  if wait_until stopped "$node" "$rank"; then HOLD_T0=$(ms); return 0; fi
  cl_down
  t_fail "$name: rank $rank stops at $at" \
    "$(messages "$T_TMP/$name.err" | head -c 1500)"
  return 1
}

# job_end NAME T0: waits for job NAME (mpirun, $JOB; the fault at T0 ms)
# to end, killing node 0's processes after BOUND_SECS; its exit code in
# JOB_RC, the time from the fault printed.
job_end() {
  if ! wait_for "$BOUND_SECS" gone "$JOB"; then
    echo "# $1: still running after $BOUND_SECS s: killed"
    kill -KILL $(ip netns pids "$(cl_ns n0)") 2>/dev/null
  fi
  wait "$JOB"
  JOB_RC=$?
  echo "# $1: fault-to-exit: $(($(ms) - $2)) ms with --stall-timeout" \
    "${JOB_STALL:-$STALL_SECS}"
}

# ends NAME T0 EVERY SOME: job NAME (started at T0 ms, the fault) ends
# with 69, every message of tpload matching EVERY and one at least SOME
# (egrep patterns; the others are counted in a comment: today a rank
# waiting for rank 0 may blame rank 0 for a lost node), and leaves no
# file in $T_TMP/NAME.ps (rank files; LEFT_WHAT names them otherwise) and
# no process on any node.
ends() {
  local name=$1 t0=$2 every=$3 some=$4 rc left n
  job_end "$name" "$t0"
  rc=$JOB_RC
  if [ $rc -eq 69 ]; then t_ok "$name: the job ends with 69"
  else t_fail "$name: the job ends with 69" "exit $rc" \
    "$(messages "$T_TMP/$name.err" | head -c 1500)"; fi
  messages "$T_TMP/$name.err" | grep '^tpload' >"$T_TMP/msgs"
  sed 's/^/# /' "$T_TMP/msgs"
  n=$(grep -c . "$T_TMP/msgs")
  if [ "$n" -ge 1 ] && [ "$(grep -c -E -e "$every" "$T_TMP/msgs")" -eq "$n" ] &&
     grep -q -E -e "$some" "$T_TMP/msgs"
  then t_ok "$name: every message says $every, one $some"
  else t_fail "$name: every message says $every, one $some" \
    "$(cat "$T_TMP/msgs")"; fi
  echo "# $name: $(grep -c -v -E -e "$some" "$T_TMP/msgs") of $n messages" \
    "do not say $some"
  if [ -z "$(ls -A "$T_TMP/$name.ps" 2>/dev/null)" ]; then
    t_ok "$name: no ${LEFT_WHAT:-rank file} left"
  else t_fail "$name: no ${LEFT_WHAT:-rank file} left" \
    "$(ls -la "$T_TMP/$name.ps")"; fi
  t0=$(ms)
  if wait_until cl_empty; then
    t_ok "$name: no process left on any node"
    echo "# $name: the last node emptied $(($(ms) - t0)) ms after mpirun's end"
  else
    left=$(cl_left)
    t_fail "$name: no process left on any node" \
      "$(ps -o pid,stat,args -p "$(echo $left | tr ' ' ,)" 2>&1)"
    [ -z "$left" ] || kill -KILL $left
  fi
}

# finishes NAME T0: job NAME (the fault at T0 ms) ends with 0, its rank
# files = the numpy oracle's, no message says a rank stalled, and no
# process is left on any node.
finishes() {
  local name=$1 t0=$2 rc
  job_end "$name" "$t0"
  rc=$JOB_RC
  if [ $rc -eq 0 ]; then t_ok "$name: the job ends with 0"
  else t_fail "$name: the job ends with 0" "exit $rc" \
    "$(messages "$T_TMP/$name.err" | head -c 1500)"; fi
  t_oracle "$name: every rank's file = numpy oracle" check-preshard \
    "$MODEL" "$PLAN" $NP "$T_TMP/$name.ps"
  if grep -q "no progress" "$T_TMP/$name.err"; then
    t_fail "$name: no rank reports a stall" "$(grep "no progress" \
      "$T_TMP/$name.err")"
  else t_ok "$name: no rank reports a stall"; fi
  if wait_until cl_empty; then t_ok "$name: no process left on any node"
  else t_fail "$name: no process left on any node" "$(cl_left)"; fi
}

# retransmitted N: more than N TCP segments retransmitted on the nodes.
retransmitted() { [ "$(cl_retrans)" -gt "$1" ]; }

# before T0: a comment saying whether the fault (at T0 ms) came while
# the job still ran and how long after the hold began.
before() {
  if alive "$JOB"; then
    echo "# the fault came $(($1 - HOLD_T0)) ms after the hold, the job running"
  else echo "# the job ended before the fault: the hold outlasted the deadline"
  fi
}

# A rank the test stopped may be continued by Open MPI's teardown and
# report its own quiet spell, which includes the time it was stopped:
# the figure is at least the deadline, not equal to it.
STALLED="no progress for [0-9]+ s waiting for"
NODE2="waiting for rank [45]: rank [45] stopped or hangs"

# --- node 2's link cut while rank 4 is about to receive -------------------
fresh
cl_links_line
if held_job cut n2 4 deliver "$MODEL"; then
  cl_cut n2
  t0=$(ms)
  kill -CONT "$HELD"
  before "$t0"
  ends cut "$t0" "$STALLED" "$NODE2"
fi

# --- node 2's ranks stopped: rank 4 at the hook, then rank 5 ------------
fresh
if held_job stop n2 4 deliver "$MODEL"; then
  kill -STOP "$(rank_pid n2 5)"
  t0=$(ms)
  before "$t0"
  ends stop "$t0" "$STALLED" "$NODE2"
fi

# --- node 2's link cut, restored inside --stall-timeout -------------------
# Cut while rank 4 is held, rank 4 let go, the link restored once a TCP
# segment had to be sent again (the cut met traffic): TCP's
# retransmissions carry the job over it (tcp_retries2 4 gives up after
# ~3 s, the deadline is 10 s).
fresh
if JOB_STALL=$((10 * ${TPL_TEST_SLOWDOWN:-1})) held_job blip n2 4 deliver \
  "$MODEL"; then
  r0=$(cl_retrans)
  cl_cut n2
  t0=$(ms)
  kill -CONT "$HELD"
  wait_until retransmitted "$r0" ||
    echo "# blip: no segment retransmitted while the link was down"
  cl_restore n2
  echo "# blip: the link was down $(($(ms) - t0)) ms," \
    "$(($(cl_retrans) - r0)) segments retransmitted"
  finishes blip "$t0"
fi

# --- node 2's link slowed to a tenth mid-load -----------------------------
# 400 to 40 Mbit/s into node 2 while rank 4 is held, the big tensor
# replicated so that node 2 takes in ~11 MiB: ~2.2 s at 5 MB/s, longer
# than the deadline (2 s), yet every message moves, so the job ends with
# 0 and no rank mistakes the slow link for a stall.
cl_rep_plan "$PLAN" "$T_TMP/rep.json"
fresh
if PLAN=$T_TMP/rep.json JOB_STALL=$((2 * ${TPL_TEST_SLOWDOWN:-1})) \
  held_job slow n2 4 deliver "$MODEL"; then
  b0=$(cl_bytes n2)
  cl_rate n2 40mbit
  t0=$(ms)
  kill -CONT "$HELD"
  PLAN=$T_TMP/rep.json finishes slow "$t0"
  b1=$(cl_bytes n2)
  echo "# slow: node 2 took in $(((${b1%% *} - ${b0%% *}) >> 10)) KiB at" \
    "40 Mbit/s (5 MB/s), --stall-timeout 2"
fi

# --- node 2's link cut while the ranks only serve -------------------------
# Serving ranks exchange nothing but the watch's beats (one every
# --stall-timeout / 4).  After half the deadline without a beat from
# node 2 its ranks are silent: rank 0's status names rank 4 or 5 and
# node 2's host, --health says 69 on node 0 and node 1, and a reload is
# refused naming them; after --stall-timeout every survivor removes its
# socket (rank 0 the ready file too) and the job ends with 69, naming
# rank 4 or 5 and node 2's host.  A longer deadline than the loads':
# the survivors are asked three times inside it.
fresh
SOCK=$T_TMP/serve.ps
SERVE_STALL=$((6 + 2 * ${TPL_TEST_SLOWDOWN:-1}))
N2=$(cl_host n2)
# silent_or_gone: the job ended, or rank 0's status ($T_TMP/st) names a
# rank of node 2 as silent.
silent_or_gone() {
  gone "$JOB" && return 0
  cl_exec 0 "$TPLOAD" status "$SOCK/rank0.sock" >"$T_TMP/st" 2>&1 &&
    grep -q -E "^rank [45] \(host $N2\): no heartbeat for [0-9.]+ s of the $SERVE_STALL s deadline$" "$T_TMP/st"
}
cl_mpi $NP serve "$MODEL" --plan "$PLAN" --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet --stall-timeout "$SERVE_STALL" \
  >"$T_TMP/serve.out" 2>"$T_TMP/serve.err" &
JOB=$!
PIDS="$PIDS $JOB"
if wait_until test -f "$T_TMP/ready"; then
  cl_cut n2
  t0=$(ms)
  t_exit "serve: rank 0 still answers --health at the cut" 0 \
    cl_exec 0 "$TPLOAD" status "$SOCK/rank0.sock" --health
  if wait_until silent_or_gone && ! gone "$JOB"; then
    t_ok "serve: rank 0's status names a rank of node 2 before the deadline"
  else t_fail "serve: rank 0's status names a rank of node 2 before the deadline" \
    "$(cat "$T_TMP/st")"; fi
  echo "# serve: named $(($(ms) - t0)) ms after the cut," \
    "--stall-timeout $SERVE_STALL"
  cl_exec 0 "$TPLOAD" status "$SOCK/rank0.sock" --health
  t_check "serve: --health on node 0 says 69" [ $? = 69 ]
  cl_exec 1 "$TPLOAD" status "$SOCK/rank2.sock" --health
  t_check "serve: --health on node 1 says 69" [ $? = 69 ]
  cl_exec 0 "$TPLOAD" reload "$SOCK/rank0.sock" >/dev/null 2>"$T_TMP/rl.err"
  rc=$?
  if [ $rc = 69 ] && grep -q -E "refused: a rank is silent: rank [45] \(host $N2\)" "$T_TMP/rl.err"
  then t_ok "serve: a reload is refused (69) naming a rank of node 2"
  else t_fail "serve: a reload is refused (69) naming a rank of node 2" \
    "exit $rc" "$(cat "$T_TMP/rl.err")"; fi
  LEFT_WHAT=socket JOB_STALL=$SERVE_STALL ends serve "$t0" \
    "no word from rank [0-9] \(.*\) for [0-9]+ s while serving" \
    "no word from rank [45] \($(cl_host n2)\)"
  if [ -e "$T_TMP/ready" ]; then t_fail "serve: the ready file is removed"
  else t_ok "serve: the ready file is removed"; fi
else t_fail "serve: ready" "$(messages "$T_TMP/serve.err" | head -c 1500)"
fi

# --- the store's link cut mid-stream -------------------------------------
# Rank 0 has validated the URL model and streams it through a small
# window (--chunk-mib 1: most of the 16 MiB still on the store) while
# rank 2 is held before it receives; the store's link goes down, rank 2
# goes on, and rank 0's next ranged GETs fail, are retried once, then 69.
fresh store
if JOB_STALL=60 held_job store n1 2 deliver "$CL_URL/m" --retries 1 \
  --http-timeout 2 --chunk-mib 1; then
  cl_cut st
  t0=$(ms)
  kill -CONT "$HELD"
  before "$t0"
  ends store "$t0" "$CL_URL/m/model.safetensors.*after 1 retries" "$CL_URL"
fi
t_done
