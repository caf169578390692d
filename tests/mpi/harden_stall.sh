#!/bin/sh
# harden_stall.sh - the progress deadline (--stall-timeout): a rank that
# stops (SIGSTOP, raised by the rank itself at a known point via the
# test-only TPLOAD_TEST_SIGSTOP_RANK / _AT: before it receives, with
# --read local before it reads, before rank 0 validates, after the
# delivery, before preshard writes) ends the job with exit 69 and one
# message naming the stopped rank (or, with 3 ranks, saying one of the
# others stopped), instead of hanging with its peers waiting; no process
# of the job, and no preshard file, is left.  A rank stopped while
# serving ends the job once --shutdown stops the others, and by itself,
# --stall-timeout later, when nobody asks (serve's watch): rank 0's
# socket and the ready file are gone.  One stopped and let go inside the
# deadline is named before it passes (status, --health 69, a reload
# refused) and served with again once it beats.  A rank that
# reads slowly with --read local, or writes its preshard file slowly, but
# keeps going is waited for (its heartbeats move the deadline).  The
# bound is generous (it only catches a hang); the measured stall-to-exit
# time is printed as a TAP comment.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"

BOUND_SECS=120
STALL_SECS=2

# The big tensor (8 MiB) travels in messages far above any eager limit, so
# rank 0 must wait for the stopped rank to take them.
gen m --seed 6101 --layout single --big-mib 8

t_exit "--stall-timeout takes seconds (64)" 64 \
  mpi 2 load "$M/m" --plan "$M/m/plan.json" --stall-timeout soon

# stopped_rank LABEL NP AT RANK WORDS ARGS...: rank RANK stops (SIGSTOP)
# at point AT (stall.h) of an NP-rank load of "$M/m" with ARGS; the job
# must end with 69, one message containing WORDS (with 3 ranks or more,
# at least one: every waiter may time out before the first abort lands),
# and no process left.
stopped_rank() {
  local label=$1 np=$2 at=$3 rank=$4 words=$5; shift 5
  local t0 rc el left n
  t0=$(ms)
  TPLOAD_TEST_SIGSTOP_AT=$at TPLOAD_TEST_SIGSTOP_RANK=$rank \
    timeout -s KILL $BOUND_SECS "$MPIRUN" --oversubscribe -np "$np" \
    -x TPLOAD_TEST_SIGSTOP_AT -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" \
    load "$M/m" --plan "$M/m/plan.json" --quiet \
    --stall-timeout $STALL_SECS "$@" >"$T_TMP/out" 2>"$T_TMP/err"
  rc=$?
  el=$(($(ms) - t0))
  if [ $rc -eq 69 ]; then t_ok "$label: a stopped rank ends the job with 69"
  else t_fail "$label: a stopped rank ends the job with 69" \
    "exit $rc after $el ms" "$(messages "$T_TMP/err" | head -c 1500)"; fi
  echo "# $label: stall-to-exit: $el ms with --stall-timeout $STALL_SECS"
  messages "$T_TMP/err" | grep '^tpload' >"$T_TMP/msgs"
  n=$(grep -c . "$T_TMP/msgs")
  if { [ "$n" -eq 1 ] || { [ "$np" -gt 2 ] && [ "$n" -ge 1 ]; }; } &&
     [ "$(grep -c -F -e "$words" "$T_TMP/msgs")" -eq "$n" ]; then
    t_ok "$label: one message: $words"
  else t_fail "$label: one message: $words" "$(cat "$T_TMP/msgs")"; fi
  left=$(pgrep -f -- "$M/m/plan.json")
  if [ -z "$left" ]; then t_ok "$label: no process of the job is left"
  else
    t_fail "$label: no process of the job is left" \
      "$(pgrep -a -f -- "$M/m/plan.json")"
    kill -KILL $left
  fi
}

R1="waiting for rank 1: rank 1 stopped or hangs"
# Rank 1 stops just before it receives.
stopped_rank "--read mpi" 2 deliver 1 "$R1"
# --read local: rank 1 stops with its files open, before it reads; rank 0
# reads its own slices, then waits for rank 1's heartbeats in vain.
stopped_rank "--read local" 2 deliver 1 "$R1" --read local
# Rank 0 stops before it validates: the others wait for its verdict.
stopped_rank "rank 0 stopped in validation" 2 validate 0 \
  "waiting for rank 0: rank 0 stopped or hangs"
# After the delivery, before the reports: rank 0 gathers from all, rank 1
# agrees with all; neither knows which of the others is missing.
stopped_rank "a rank stopped after the delivery" 3 report 2 \
  "one of them stopped or hangs"

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

# --- preshard: the write is under the deadline too -----------------------
# Rank 1 stops before it writes its file: rank 0, done writing, waits for
# the agreement in vain; the job ends naming rank 1 and leaves no file.
rm -rf "$T_TMP/ps"
TPLOAD_TEST_SIGSTOP_AT=write TPLOAD_TEST_SIGSTOP_RANK=1 \
  timeout -s KILL $BOUND_SECS "$MPIRUN" --oversubscribe -np 2 \
  -x TPLOAD_TEST_SIGSTOP_AT -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" \
  preshard "$M/m" --plan "$M/m/plan.json" --out "$T_TMP/ps" --quiet \
  --stall-timeout $STALL_SECS >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 69 ]; then t_ok "preshard: a rank stopped before writing ends the job with 69"
else t_fail "preshard: a rank stopped before writing ends the job with 69" \
  "exit $rc" "$(messages "$T_TMP/err" | head -c 1500)"; fi
messages "$T_TMP/err" | grep '^tpload' >"$T_TMP/msgs"
if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] && grep -q -F "$R1" "$T_TMP/msgs"
then t_ok "preshard: one message names rank 1"
else t_fail "preshard: one message names rank 1" "$(cat "$T_TMP/msgs")"; fi
if [ -z "$(ls -A "$T_TMP/ps")" ]; then t_ok "preshard: the stopped job leaves no file"
else t_fail "preshard: the stopped job leaves no file" "$(ls -la "$T_TMP/ps")"; fi
left=$(pgrep -f -- "$M/m/plan.json")
if [ -z "$left" ]; then t_ok "preshard: no process of the job is left"
else t_fail "preshard: no process of the job is left" "$(pgrep -a -f -- "$M/m/plan.json")"
  kill -KILL $left; fi

# Rank 1 writes slowly (50 ms per 1 MiB step: about 3.2 s for its 64 MiB)
# but keeps going: its beats keep rank 0 waiting past the 2 s deadline.
gen slowp --seed 6103 --layout single --big-mib 64
rm -rf "$T_TMP/ps"
t0=$(ms)
TPLOAD_TEST_SLOW_RANK=1 timeout -s KILL $BOUND_SECS \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SLOW_RANK "$TPLOAD" \
  preshard "$M/slowp" --plan "$M/slowp/plan.json" --out "$T_TMP/ps" \
  --quiet --stall-timeout $STALL_SECS >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
el=$(($(ms) - t0))
echo "# preshard with a slow writer: $el ms"
if [ $rc -eq 0 ]; then t_ok "preshard: a slow writer that keeps going is waited for"
else t_fail "preshard: a slow writer that keeps going is waited for" \
  "exit $rc after $el ms" "$(messages "$T_TMP/err" | head -c 1500)"; fi
t_check "preshard: the slow writer took longer than the stall deadline" \
  [ "$el" -gt $((STALL_SECS * 1000 + 500)) ]
t_check "preshard: the slow writer's job wrote both rank files" \
  [ -s "$T_TMP/ps/rank0.safetensors" -a -s "$T_TMP/ps/rank1.safetensors" ]

# --- serve: the ranks meet once more after --shutdown ---------------------
# Rank 1 is stopped while serving; --shutdown to rank 0 must still end the
# job (69, naming rank 1) instead of holding rank 0 in MPI_Finalize.
. "$TESTS_SRCDIR/lib/serve_lib.sh"
# serve_2 NAME SOCK READY: a 2-rank serve of "$M/m" under --stall-timeout,
# ready (one TAP line); r1 is rank 1's pid.
serve_2() {
  local p
  serve_start "$T_TMP/$1" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
    "$M/m" --plan "$M/m/plan.json" --socket-dir "$2" --ready-file "$3" \
    --quiet --stall-timeout $STALL_SECS
  PIDS="$PIDS $SERVE_PID"
  t_serve_ready "serve ($1): ready" "$3"
  r1=""
  for p in $(pgrep -P "$SERVE_PID"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
       grep -qx OMPI_COMM_WORLD_RANK=1; then r1=$p; fi
  done
}
serve_2 sv "$T_TMP/sock" "$T_TMP/ready"
if [ -n "$r1" ] && kill -STOP "$r1"; then t_ok "serve: rank 1 stopped while serving"
else t_fail "serve: rank 1 stopped while serving" "no rank 1 among $(pgrep -P "$SERVE_PID")"; fi
t_exit "serve: --shutdown asked of rank 0" 0 \
  "$TPLOAD" status "$T_TMP/sock/rank0.sock" --shutdown
serve_end
t_check "serve: the job ends with 69" [ "$SERVE_RC" = 69 ]
messages "$T_TMP/sv.err" | grep '^tpload' >"$T_TMP/msgs"
if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] && grep -q -F "$R1" "$T_TMP/msgs"
then t_ok "serve: one message names rank 1"
else t_fail "serve: one message names rank 1" "$(cat "$T_TMP/msgs")"; fi
left=$(pgrep -f -- "$M/m/plan.json")
if [ -z "$left" ]; then t_ok "serve: no process of the job is left"
else t_fail "serve: no process of the job is left" "$(pgrep -a -f -- "$M/m/plan.json")"
  kill -KILL $left; fi

# --- serve: the watch ends the job when a rank stops, unasked ---------------
serve_2 sw "$T_TMP/sockw" "$T_TMP/readyw"
t0=$(ms)
if [ -n "$r1" ] && kill -STOP "$r1"; then t_ok "serve (watch): rank 1 stopped"
else t_fail "serve (watch): rank 1 stopped" "no rank 1"; fi
serve_end
echo "# serve (watch): stop-to-exit $(($(ms) - t0)) ms, --stall-timeout $STALL_SECS"
t_check "serve (watch): the job ends with 69, unasked" [ "$SERVE_RC" = 69 ]
if messages "$T_TMP/sw.err" | grep -q "^tpload: rank 0: no word from rank 1 "
then t_ok "serve (watch): rank 0 names rank 1"
else t_fail "serve (watch): rank 0 names rank 1" "$(messages "$T_TMP/sw.err")"
fi
if [ ! -e "$T_TMP/sockw/rank0.sock" ] && [ ! -e "$T_TMP/readyw" ]; then
  t_ok "serve (watch): rank 0's socket and the ready file are removed"
else t_fail "serve (watch): socket and ready file removed" \
  "$(ls -A "$T_TMP/sockw" "$T_TMP/readyw" 2>&1)"; fi

# --- serve: a silent rank is named before the deadline ---------------------
# Rank 2 of 3 is stopped while serving under a deadline long enough to
# look before it passes.  Once rank 2 has missed two beats (half the
# deadline), status on rank 0 names it (text and JSON), --health says 69
# on rank 0 and rank 1, and a reload is refused (69) naming it instead of
# waiting for it.  Let go before the deadline, it is heard from again:
# status clean, health 0, a reload switches, --shutdown ends the job
# with 0.
. "$TESTS_SRCDIR/lib/reload_lib.sh"
SILENT_SECS=$((6 + 2 * ${TPL_TEST_SLOWDOWN:-1}))
HOST=$(hostname)
# status_says PATTERN: rank 0's status succeeds and a line matches PATTERN
# (an extended regular expression); its output is in $T_TMP/st.
status_says() {
  "$TPLOAD" status "$SOCK/rank0.sock" >"$T_TMP/st" 2>&1 &&
    grep -q -E -e "$1" "$T_TMP/st"
}
status_clean() {
  "$TPLOAD" status "$SOCK/rank0.sock" >"$T_TMP/st" 2>&1 &&
    ! grep -q "no heartbeat" "$T_TMP/st"
}
# health_says NAME CODE R: `status --health` on rank R exits with CODE
# (it prints nothing).
health_says() {
  local rc
  "$TPLOAD" status "$SOCK/rank$3.sock" --health >"$T_TMP/h.out" 2>&1
  rc=$?
  if [ $rc -eq "$2" ] && [ ! -s "$T_TMP/h.out" ]; then t_ok "$1"
  else t_fail "$1" "exit $rc" "$(head -c 500 "$T_TMP/h.out")"; fi
}
serve_job silent 3 "$M/m" --log-level info --stall-timeout $SILENT_SECS
set -- $PIDS
r2=${3:-}
t_check "serve (silent rank): rank 0's status names no rank at first" \
  status_clean
t0=$(ms)
if [ -n "$r2" ] && kill -STOP "$r2"; then t_ok "serve (silent rank): rank 2 stopped"
else t_fail "serve (silent rank): rank 2 stopped" "ranks' pids: $PIDS"; fi
NAMED="^rank 2 \(host $HOST\): no heartbeat for [0-9.]+ s of the $SILENT_SECS s deadline$"
if wait_for "$WAIT_SECS" status_says "$NAMED"; then
  t_ok "serve (silent rank): rank 0's status names rank 2 and its host"
else t_fail "serve (silent rank): rank 0's status names rank 2 and its host" \
  "$(cat "$T_TMP/st")" "$(messages "$SERVE_LOG.err" | head -c 1500)"; fi
echo "# serve (silent rank): named $(($(ms) - t0)) ms after the stop," \
  "--stall-timeout $SILENT_SECS"
t_py "serve (silent rank): named after half the deadline, before all of it" '
import re, sys
s = float(re.search(r"^rank 2 .*no heartbeat for ([0-9.]+) s", open(sys.argv[1]).read(), re.M).group(1))
if not float(sys.argv[2]) / 2 <= s < float(sys.argv[2]):  # shown to 0.1 s
    sys.exit("silent for %.1f s" % s)
' "$T_TMP/st" "$SILENT_SECS"
health_says "serve (silent rank): --health on rank 0 says 69" 69 0
health_says "serve (silent rank): --health on rank 1 says 69" 69 1
"$TPLOAD" reload "$SOCK/rank0.sock" >"$T_TMP/rl.out" 2>"$T_TMP/rl.err"
rc=$?
if [ $rc -eq 69 ] && grep -q -E "reload failed: refused: a rank is silent: rank 2 \(host $HOST\): no heartbeat" "$T_TMP/rl.err"
then t_ok "serve (silent rank): a reload is refused (69) naming rank 2"
else t_fail "serve (silent rank): a reload is refused (69) naming rank 2" \
  "exit $rc" "$(cat "$T_TMP/rl.err")"; fi
"$TPLOAD" status "$SOCK/rank0.sock" --json --summary >"$T_TMP/st.json"
t_py "serve (silent rank): status --json: silent_ranks and the deadline" '
import json, sys
d = json.load(open(sys.argv[1]))["daemon"]
s = d["silent_ranks"]
if [(p["rank"], p["host"]) for p in s] != [(2, sys.argv[2])]:
    sys.exit("silent_ranks %r" % s)
if d["stall_timeout_seconds"] != float(sys.argv[3]):
    sys.exit("daemon %r" % d)
' "$T_TMP/st.json" "$HOST" "$SILENT_SECS"
t_generation_is "serve (silent rank): generation 1 is still served" 1 "$M/m"
t_check "serve (silent rank): the job still runs, inside the deadline" \
  alive "$SERVE_PID"
echo "# serve (silent rank): let go $(($(ms) - t0)) ms after the stop"
kill -CONT "$r2"
if wait_for "$WAIT_SECS" status_clean; then
  t_ok "serve (silent rank): let go, rank 2 is heard from again"
else t_fail "serve (silent rank): let go, rank 2 is heard from again" \
  "$(cat "$T_TMP/st")" "$(messages "$SERVE_LOG.err" | head -c 1500)"; fi
health_says "serve (silent rank): --health on rank 0 says 0 again" 0 0
health_says "serve (silent rank): --health on rank 2 says 0" 0 2
t_exit "serve (silent rank): a reload switches" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock"
t_generation_is "serve (silent rank): generation 2 is served" 2 "$M/m"
t_job_ends "serve (silent rank): --shutdown ends the job with 0, nothing left"
# The daemons' logs: rank 0 said so once, and that it heard rank 2 again;
# rank 2, back from its pause, took no peer for silent (the beats that
# came meanwhile are not all taken at its first look).
grep -c "rank 0: watch: 1 rank(s) silent: rank 2 (host $HOST)" \
  "$SERVE_LOG.err" >"$T_TMP/n0"
grep -c "rank 0: watch: every rank heard from again" "$SERVE_LOG.err" >>"$T_TMP/n0"
t_check "serve (silent rank): rank 0 logged rank 2 silent, then heard" \
  [ "$(tr '\n' ' ' <"$T_TMP/n0")" = "1 1 " ]
if grep -q "rank 2: watch: .*silent" "$SERVE_LOG.err"; then
  t_fail "serve (silent rank): rank 2, back from its pause, names no peer" \
    "$(grep "rank 2: watch" "$SERVE_LOG.err")"
else t_ok "serve (silent rank): rank 2, back from its pause, names no peer"; fi
t_done
