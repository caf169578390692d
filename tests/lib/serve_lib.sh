# serve_lib.sh - one `tpload serve` job in the background for the tests
# that act as its consumers (install.sh, python_client.sh): start it, wait
# until it is ready, wait for its end, and end it by pid however the test
# ends.  Sourced after lib.sh and mpi_lib.sh; the launcher is "$@" so a
# test can run it under mpirun, srun or with its own options.
# shellcheck shell=bash

SERVE_PID=""
WAIT_SECS=${WAIT_SECS:-300}  # catches hangs only: start-up or an end

# alive PID: the process exists and is not a zombie.
alive() {
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# serve_start LOG CMD...: runs CMD (a launcher and `tpload serve ...`) in
# the background with its output in LOG.out / LOG.err.
serve_start() {
  SERVE_LOG=$1; shift
  "$@" >"$SERVE_LOG.out" 2>"$SERVE_LOG.err" &
  SERVE_PID=$!
}

# wait_for SECS CMD...: until CMD succeeds (0) or SECS pass (1), while the
# job runs (2 when it ended first).
wait_for() {
  local end=$(($(date +%s) + $1)); shift
  until "$@"; do
    [ -n "$SERVE_PID" ] && ! alive "$SERVE_PID" && return 2
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.1
  done
}

# t_serve_ready NAME READY: one TAP line: the ready file READY appears
# while the job runs (its stderr, LOG.err of serve_start, says why not).
t_serve_ready() {
  if wait_for "$WAIT_SECS" test -f "$2"; then t_ok "$1"
  else t_fail "$1" "$(messages "$SERVE_LOG.err" | head -c 1500)"; fi
}

# serve_two_ranks SEED LAYOUT: a 2-rank serve of an oracle model $M/m on
# socket directory $SOCK, ready (one TAP line).
serve_two_ranks() {
  gen m --seed "$1" --layout "$2"
  SOCK=$T_TMP/sock
  serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" \
    serve "$M/m" --plan "$M/m/plan.json" --socket-dir "$SOCK" \
    --ready-file "$T_TMP/ready" --quiet
  t_serve_ready "serve -np 2 is ready" "$T_TMP/ready"
}

# serve_end: waits (at most WAIT_SECS) for the job to end; SERVE_RC is
# its exit code, or "hung" after killing it.
serve_end() {
  local end=$(($(date +%s) + WAIT_SECS))
  while alive "$SERVE_PID" && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
  if alive "$SERVE_PID"; then
    kill -KILL "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null; SERVE_RC=hung
  else
    wait "$SERVE_PID"; SERVE_RC=$?
  fi
  SERVE_PID=""
}

# t_dumps_match NAME N DUMPS PRESHARD: for every rank r < N, the dump
# DUMPS/rank{r}.safetensors holds exactly the tensors, shapes and bytes of
# PRESHARD/rank{r}.safetensors (a checked preshard output).
t_dumps_match() {
  t_check "$1" "$ORACLE" -c 'import sys
sys.path.insert(0, sys.argv[1])
import npst
for r in range(int(sys.argv[4])):
    a = npst.read("%s/rank%d.safetensors" % (sys.argv[2], r))
    b = npst.read("%s/rank%d.safetensors" % (sys.argv[3], r))
    if (a[0], a[2]) != (b[0], b[2]):
        sys.exit("rank %d: dump %r, preshard %r" % (r, a[2], b[2]))' \
    "$TESTS_SRCDIR/oracle" "$3" "$4" "$2"
}

# serve_cleanup: the EXIT trap: a job still running gets SIGTERM, then
# SIGKILL after 10 s.
serve_cleanup() {
  if [ -n "$SERVE_PID" ] && alive "$SERVE_PID"; then
    kill -TERM "$SERVE_PID" 2>/dev/null
    WAIT_SECS=10 serve_end
  fi
  rm -rf "$T_TMP"
}
trap serve_cleanup EXIT
