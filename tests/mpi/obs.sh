#!/bin/sh
# obs.sh - what a user of `tpload serve` can observe: with the default
# --log-level (info) every rank logs start, rank 0 ready, an attaching
# client's pid (attach and detach) and shutdown, one timestamped line each
# on stderr; `tpload status --json` gives rank 0's uptime, clients
# connected and attaches served; --log-level quiet logs none of it.
# `load --progress=auto` draws the bar when mpirun's stderr is a terminal
# (script(1) gives it a pty), not through a pipe; --progress=never never.
# Contents are asserted, never timing; every wait is for a condition.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

# serve_obs NAME LEVEL: a 2-rank serve of $M/m on $T_TMP/NAME.sock with
# --log-level LEVEL, ready (one TAP line); its output is $T_TMP/NAME.*.
serve_obs() {
  SOCK=$T_TMP/$1.sock
  serve_start "$T_TMP/$1" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
    "$M/m" --plan "$M/m/plan.json" --socket-dir "$SOCK" \
    --ready-file "$T_TMP/$1.ready" --quiet --log-level "$2"
  t_serve_ready "serve --log-level $2 is ready" "$T_TMP/$1.ready"
}

# attach_once: `tpload dump` of rank 0; DUMP_PID is the client's pid.
attach_once() {
  rm -f "$T_TMP/dump.safetensors"
  "$TPLOAD" dump "$SOCK/rank0.sock" --out "$T_TMP/dump.safetensors" &
  DUMP_PID=$!
  wait "$DUMP_PID"
}

# stop_job NAME: --shutdown through rank 0, then the job ends with 0.
stop_job() {
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown >/dev/null
  serve_end
  if [ "$SERVE_RC" = 0 ]; then t_ok "$1: the job ends with 0"
  else t_fail "$1: the job ends with 0" "exit $SERVE_RC"; fi
}

# t_line NAME FILE REGEX: FILE has a log line "STAMP rank ...REGEX".
t_line() {
  if grep -Eq "^$STAMP rank $3" "$2"; then t_ok "$1"
  else t_fail "$1" "no line matching 'STAMP rank $3' in:" \
    "$(head -c 1500 "$2")"; fi
}

gen m --seed 31 --layout single

serve_obs info info
t_check "dump attaches to rank 0" attach_once
"$TPLOAD" status "$SOCK/rank0.sock" --json >"$T_TMP/status.json"
t_check "status --json: uptime >= 0, clients >= 0, attaches >= 1" \
  "$ORACLE" -c 'import json, sys
d = json.load(open(sys.argv[1]))["daemon"]
assert d["uptime_seconds"] >= 0, d
assert d["clients_connected"] >= 0, d
assert d["attaches_served"] >= 1, d' "$T_TMP/status.json"
DAEMON_LINE='^daemon: up [0-9.]+ s, [0-9]+ client\(s\) connected, [1-9]'
t_check "status shows the daemon line" sh -c \
  '"$1" status "$2" | grep -Eq "$3"' sh "$TPLOAD" "$SOCK/rank0.sock" \
  "$DAEMON_LINE"
stop_job info
LOG=$T_TMP/info.err
t_line "rank 0 logs its start with socket and pid" "$LOG" \
  "0: start: listening on .*/rank0\.sock \(pid [0-9]+\)$"
t_line "rank 1 logs its start" "$LOG" "1: start: listening on .*/rank1\.sock"
t_line "rank 0 logs ready" "$LOG" "0: ready: all 2 rank\(s\) serving$"
t_line "rank 0 logs the attach with the client's pid" "$LOG" \
  "0: client attached \(pid $DUMP_PID\)$"
t_line "rank 0 logs the detach with the client's pid" "$LOG" \
  "0: client detached \(pid $DUMP_PID\)$"
t_line "rank 0 logs shutdown" "$LOG" "0: shutdown: "
t_line "rank 1 logs shutdown" "$LOG" "1: shutdown: "
if grep -Eq "^$STAMP rank [0-9]+: request " "$LOG"; then
  t_fail "info has no per-request lines" "$(grep -E 'request ' "$LOG")"
else t_ok "info has no per-request lines"; fi

serve_obs quiet quiet
t_check "dump attaches under quiet" attach_once
stop_job quiet
if grep -Eq "^$STAMP rank " "$T_TMP/quiet.err"; then
  t_fail "--log-level quiet logs nothing" "$(head -c 1500 "$T_TMP/quiet.err")"
else t_ok "--log-level quiet logs nothing"; fi

t_exit "--log-level loud is a usage error" 64 \
  "$TPLOAD" serve "$M/m" --socket-dir "$T_TMP/x" --log-level loud
t_exit "--log-level is for serve only" 64 \
  "$TPLOAD" load "$M/m" --log-level info

# bars FILE: how many progress bars (rank 0's "GiB/s ETA", or MiB/s,
# KiB/s) FILE shows.
bars() { grep -c -E '[KMG]iB/s ETA' "$1"; }

# Progress under mpirun: rank 0's stderr is a pipe to mpirun; with
# --progress=auto the bar follows whether mpirun's stderr is a terminal
# (a pty from script(1) here).
t_bars() {
  local name=$1 want=$2 got
  got=$(bars "$3")
  if [ "$got" -ge "$want" ] && { [ "$want" -gt 0 ] || [ "$got" -eq 0 ]; }
  then t_ok "$name"
  else t_fail "$name" "expected $want bar(s) or more (0: none), found $got:" \
    "$(head -c 1500 "$3")"; fi
}
"$MPIRUN" --oversubscribe -np 2 "$TPLOAD" load "$M/m" \
  --plan "$M/m/plan.json" --progress=auto >/dev/null 2>"$T_TMP/pipe.err"
t_bars "--progress=auto off a terminal draws no bar" 0 "$T_TMP/pipe.err"
if command -v script >/dev/null; then
  for mode in auto never; do
    script -qec "'$MPIRUN' --oversubscribe -np 2 '$TPLOAD' load '$M/m' \
      --plan '$M/m/plan.json' --progress=$mode" /dev/null \
      >"$T_TMP/pty-$mode.out" 2>&1
  done
  t_bars "--progress=auto with mpirun on a terminal draws the bar" 1 \
    "$T_TMP/pty-auto.out"
  t_bars "--progress=never draws none on a terminal" 0 "$T_TMP/pty-never.out"
else
  echo "ok $((T_COUNT += 1)) # SKIP script(1) missing: no pty for mpirun"
fi

t_done
