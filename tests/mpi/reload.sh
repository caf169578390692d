#!/bin/sh
# reload.sh - `tpload reload` and SIGHUP on a running `tpload serve`:
# the job loads a new version while it serves, and switches whole.
# Consumers (tests/unit/reload_consumer) attach, read and checksum in a
# loop on every rank all along: each attachment must be one generation's
# bytes whole, the same for every attachment of that generation, and
# those bytes are checked against the numpy oracle's shards of the model
# that generation came from (tests/oracle/consumer_check.py); the first
# attachment, held open, reads the same after every switch.  tpl_watch
# wakes on the switch.  Then the failures that keep the old generation
# (a broken model, a plan that does not fit, a file changed during the
# read, no memory for a second store, a second reload meanwhile), SIGHUP
# after a symbolic link is repointed, --read local, a TP x DP grid, no
# checkpoint file held open while serving, and a rank stopped during a
# reload (the job ends under --stall-timeout, nothing left behind).
# Every wait is for a condition (a file, a line, a process state).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"
. "$TESTS_SRCDIR/lib/reload_lib.sh"

RC=$TESTS_BUILDDIR/unit/reload_consumer
CHECK=$TESTS_SRCDIR/oracle/consumer_check.py
CONSUMERS=""

# perturb SRC DST: DST is SRC (single-file layout) with every data byte
# changed (+1): the same tensors, names and shapes, other bytes.
perturb() {
  mkdir -p "$2"
  cp "$1/plan.json" "$2/"
  "$ORACLE" - "$1/model.safetensors" "$2/model.safetensors" <<'EOF'
import sys
sys.path.insert(0, __import__("os").environ["TESTS_SRCDIR"] + "/oracle")
import npst
start, _ = npst.layout(sys.argv[1])
data = bytearray(open(sys.argv[1], "rb").read())
for i in range(start, len(data)):
    data[i] = (data[i] + 1) & 0xFF
open(sys.argv[2], "wb").write(data)
EOF
}

# consumers_start NP: one looping consumer per rank of $SOCK, and one
# watcher per rank waiting for a generation after 1; wait until every
# consumer has read generation 1.
consumers_start() {
  local r
  rm -f "$T_TMP/stop" "$T_TMP"/c*.gen*
  for r in $(seq 0 $(($1 - 1))); do
    "$RC" loop "$SOCK/rank$r.sock" "$T_TMP/c$r" "$T_TMP/stop" \
      >"$T_TMP/c$r.out" 2>"$T_TMP/c$r.err" &
    CONSUMERS="$CONSUMERS $!"
    eval "CPID$r=$!"
    "$RC" watch "$SOCK/rank$r.sock" 1 -1 >"$T_TMP/w$r.out" \
      2>"$T_TMP/w$r.err" &
    eval "WPID$r=$!"
  done
  for r in $(seq 0 $(($1 - 1))); do
    wait_until test -f "$T_TMP/c$r.gen1"
  done
}

# t_consumers_see NAME NP G: every consumer has read generation G (or
# stopped, which fails).
t_consumers_see() {
  local r ok=1 p
  for r in $(seq 0 $(($2 - 1))); do
    eval "p=\$CPID$r"
    wait_until sh -c "test -f '$T_TMP/c$r.gen$3' || ! kill -0 $p" || ok=0
    test -f "$T_TMP/c$r.gen$3" || ok=0
  done
  if [ $ok = 1 ]; then t_ok "$1"
  else t_fail "$1" "$(cat "$T_TMP"/c*.err | head -c 1500)"; fi
}

# t_consumers_end NAME NP: the consumers stop cleanly: no torn or
# changing attachment in any of their loops.
t_consumers_end() {
  local r ok=1 p
  touch "$T_TMP/stop"
  for r in $(seq 0 $(($2 - 1))); do
    eval "p=\$CPID$r"
    wait "$p" || ok=0
  done
  CONSUMERS=""
  if [ $ok = 1 ]; then t_ok "$1"
  else t_fail "$1" "$(cat "$T_TMP"/c*.err | head -c 1500)"; fi
}

# t_oracle_gen NAME NP TP G MODEL: every consumer's listing of generation
# G holds the numpy oracle's shards of MODEL (rank r holds shard r % TP).
t_oracle_gen() {
  local r ok=1 why=""
  for r in $(seq 0 $(($2 - 1))); do
    if ! "$ORACLE" "$CHECK" "$5" "$5/plan.json" "$3" $((r % $3)) \
      "$T_TMP/c$r.gen$4" 2>"$T_TMP/chk.err"; then
      ok=0; why="rank $r: $(head -c 500 "$T_TMP/chk.err")"
    fi
  done
  if [ $ok = 1 ]; then t_ok "$1"; else t_fail "$1" "$why"; fi
}

# t_no_model_open NAME: no rank holds a file under $M open.
t_no_model_open() {
  local p ok=1 why=""
  for p in $PIDS; do
    if ls -l "/proc/$p/fd" 2>/dev/null | grep -qF "$M/"; then
      ok=0; why="$why pid $p: $(ls -l "/proc/$p/fd" | grep -F "$M/" | head -3)"
    fi
  done
  if [ $ok = 1 ]; then t_ok "$1"; else t_fail "$1" "$why"; fi
}

cleanup() {
  local p
  touch "$T_TMP/stop" 2>/dev/null
  for p in $CONSUMERS; do kill "$p" 2>/dev/null; done
  serve_cleanup
}
trap cleanup EXIT

gen a --seed 31
gen b --seed 32 # other tensors and shapes
perturb "$M/a" "$M/a2"

# --- reload while consumers read, on every rank ---------------------------
serve_job main 2 "$M/a"
t_no_model_open "main: once loaded, no rank holds a checkpoint file open"
consumers_start 2
t_exit "reload to the same tensors with other bytes exits 0" 0 \
  "$TPLOAD" reload "$SOCK/rank1.sock" "$M/a2"
keep
t_check "... and prints generation 2" grep -qx "generation 2: $M/a2" \
  "$T_TMP/last.out"
t_generation_is "status and the ready file name generation 2 of a2" 2 "$M/a2"
t_consumers_see "every rank's consumer reads generation 2" 2 2
for r in 0 1; do
  eval "wp=\$WPID$r"
  if wait "$wp" && [ "$(cat "$T_TMP/w$r.out")" = 2 ]; then
    t_ok "tpl_watch on rank $r woke with generation 2"
  else t_fail "tpl_watch on rank $r" "$(cat "$T_TMP/w$r.out" "$T_TMP/w$r.err")"
  fi
done
t_one_store "after the switch each daemon holds only the new store"
t_no_model_open "after the reload no rank holds a checkpoint file open"
t_exit "reload to other tensors and shapes (its own plan) exits 0" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/b" --plan "$M/b/plan.json"
t_generation_is "status names generation 3 of b" 3 "$M/b"
t_consumers_see "every rank's consumer reads generation 3" 2 3
t_exit "a watch after generation 3 times out (75)" 75 \
  "$RC" watch "$SOCK/rank1.sock" 3 200
t_exit "a watch after generation 1 returns at once" 0 \
  "$RC" watch "$SOCK/rank1.sock" 1 -1
keep
t_check "... with generation 3" grep -qx 3 "$T_TMP/last.out"

# --- failures keep the generation served ----------------------------------
mkdir -p "$M/broken"
head -c 100 "$M/a/model.safetensors" >"$M/broken/model.safetensors"
cp "$M/a/plan.json" "$M/broken/"
t_exit "reload to a truncated model exits 65" 65 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/broken"
keep
t_check "... naming the file" grep -q "broken/model.safetensors" "$T_TMP/last.err"
t_exit "reload to a missing model exits 66" 66 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/none"
echo '{"rules": [{"match": "*", "dim": 9}]}' >"$T_TMP/bad-plan.json"
t_exit "reload with a plan that does not fit exits 65" 65 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/a" --plan "$T_TMP/bad-plan.json"
t_generation_is "after the failures generation 3 of b is still served" 3 "$M/b"
t_one_store "... and nothing of the failed reloads is left on any rank"
# A second reload while one runs: rank 1 stopped holds the first one.
set -- $PIDS
kill -STOP "$2"
"$TPLOAD" reload "$SOCK/rank0.sock" "$M/a" >"$T_TMP/r1.out" \
  2>"$T_TMP/r1.err" &
R1=$!
wait_until grep -q "reload: asked by pid $R1" "$SERVE_LOG.err"
t_exit "a second reload meanwhile is refused: busy (75)" 75 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/a2"
keep
t_check "... saying so" grep -q "busy" "$T_TMP/last.err"
t_check "rank 0 answers status during the reload" \
  "$TPLOAD" status "$SOCK/rank0.sock"
kill -CONT "$2"
if wait "$R1"; then t_ok "the first reload then switches (exit 0)"
else t_fail "the first reload" "$(cat "$T_TMP/r1.err")"; fi
t_consumers_see "every rank's consumer reads generation 4" 2 4
t_consumers_end "no consumer saw a torn or changing attachment" 2
t_oracle_gen "generation 1: every rank's consumer read the oracle's a" \
  2 2 1 "$M/a"
t_oracle_gen "generation 2: the oracle's a2 (same tensors, other bytes)" \
  2 2 2 "$M/a2"
t_oracle_gen "generation 3: the oracle's b (other tensors)" 2 2 3 "$M/b"
t_oracle_gen "generation 4: the oracle's a again" 2 2 4 "$M/a"
t_job_ends "main: shutdown after reloads ends the job cleanly"

# --- SIGHUP reloads the same path, repointed ------------------------------
ln -s "$M/a" "$T_TMP/current"
serve_job hup 2 "$T_TMP/current"
consumers_start 2
# Python (python/tpload.py): attached to generation 1, a watch that
# times out, then one that wakes on the switch; the old arrays still
# read generation 1's bytes after it.
# (Not under the sanitizers: python3 would need libasan preloaded.)
export TPLOAD_LIBRARY="$TPL_BUILDDIR/.libs/libtpload.so.0"
export PYTHONPATH="$TESTS_SRCDIR/../python:$TESTS_SRCDIR/oracle"
[ -n "$SAN_CFLAGS" ] || "$ORACLE" -c 'import sys, tpload
sock, mark = sys.argv[1], sys.argv[2]
old = tpload.attach(sock)
before = [a.tobytes() for _, a in old.items()]
assert old.generation == 1, old.generation
assert tpload.watch(sock, 1, 10) is None, "a watch with nothing new"
open(mark, "w").close()
g = tpload.watch(sock, old.generation)
new = tpload.attach(sock)
assert (g, new.generation) == (2, 2), (g, new.generation)
assert [a.tobytes() for _, a in old.items()] == before, "old arrays changed"
assert [a.tobytes() for _, a in new.items()] != before, "no new bytes"
print(g)' "$SOCK/rank1.sock" "$T_TMP/py-mark" >"$T_TMP/py.out" \
  2>"$T_TMP/py.err" &
PY=$!
[ -n "$SAN_CFLAGS" ] ||
  wait_until sh -c "test -f '$T_TMP/py-mark' || ! kill -0 $PY"
ln -sfn "$M/a2" "$T_TMP/current"
set -- $PIDS
kill -HUP "$1"
if [ -n "$SAN_CFLAGS" ]; then
  t_ok "Python watch # SKIP libtpload.so is built with sanitizers"
elif wait "$PY" && [ "$(cat "$T_TMP/py.out")" = 2 ]; then
  t_ok "Python: generation 1, a watch that times out, one that wakes on 2"
else t_fail "Python watch" "$(cat "$T_TMP/py.out" "$T_TMP/py.err")"; fi
t_consumers_see "SIGHUP to rank 0: every consumer reads generation 2" 2 2
t_generation_is "... of the same path" 2 "$T_TMP/current"
t_consumers_end "SIGHUP: no torn attachment" 2
t_oracle_gen "SIGHUP: generation 2 holds the oracle's a2" 2 2 2 "$M/a2"
t_job_ends "hup: the job ends cleanly"

# --- --read local ----------------------------------------------------------
serve_job local 2 "$M/a" --read local
consumers_start 2
t_exit "--read local: reload exits 0" 0 "$TPLOAD" reload "$SOCK/rank0.sock" \
  "$M/b"
t_consumers_see "--read local: every consumer reads generation 2" 2 2
t_consumers_end "--read local: no torn attachment" 2
t_oracle_gen "--read local: generation 2 holds the oracle's b" 2 2 2 "$M/b"
t_no_model_open "--read local: no rank holds a checkpoint file open"
t_job_ends "local: the job ends cleanly"

# --- a TP x DP grid: 4 ranks, tp 2, two replicas ---------------------------
serve_job grid 4 "$M/a" --tp 2
consumers_start 4
t_exit "tp 2 x dp 2: reload exits 0" 0 "$TPLOAD" reload "$SOCK/rank3.sock" \
  "$M/a2"
t_consumers_see "tp 2 x dp 2: every consumer reads generation 2" 4 2
t_consumers_end "tp 2 x dp 2: no torn attachment" 4
t_oracle_gen "tp 2 x dp 2: generation 1 holds the oracle's a" 4 2 1 "$M/a"
t_oracle_gen "tp 2 x dp 2: generation 2 holds the oracle's a2" 4 2 2 "$M/a2"
t_job_ends "grid: the job ends cleanly"

# --- no memory for a second store on rank 1 --------------------------------
export TPLOAD_TEST_MEM_AVAILABLE=1:1
MPI_ARGS="-x TPLOAD_TEST_MEM_AVAILABLE" serve_job mem 2 "$M/a"
unset TPLOAD_TEST_MEM_AVAILABLE
t_exit "rank 1 without room for a second store: reload exits 70" 70 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/a2"
keep
t_check "... with rank 1's message" grep -q "rank 1: no room for a second" \
  "$T_TMP/last.err"
t_generation_is "... generation 1 is still served" 1 "$M/a"
t_one_store "... and no rank holds a second store"
t_job_ends "mem: the job ends cleanly"

# --- a file that changes during the reload's read (--read mpi) -------------
perturb "$M/a" "$M/c"
export TPLOAD_TEST_SIGSTOP_AT=reload TPLOAD_TEST_SIGSTOP_RANK=1
MPI_ARGS="-x TPLOAD_TEST_SIGSTOP_AT -x TPLOAD_TEST_SIGSTOP_RANK"
serve_job change 2 "$M/a"
set -- $PIDS
"$TPLOAD" reload "$SOCK/rank0.sock" "$M/c" >"$T_TMP/r1.out" \
  2>"$T_TMP/r1.err" &
R1=$!
wait_until stopped "$2" # rank 0 validated c; no byte moved yet
t_check "status during the reload: its model and both stores' sizes" \
  "$ORACLE" -c 'import json, subprocess, sys
st = json.loads(subprocess.run([sys.argv[1], "status", sys.argv[2], "--json",
                "--summary"], capture_output=True, check=True).stdout)
rl = st["daemon"].get("reload")
if rl is None or rl["model"] != sys.argv[3]:
    sys.exit("reload: %r, expected model %r" % (rl, sys.argv[3]))
# c is a with other bytes: the same layout, so the same store size
if rl["store_bytes"] == 0 or rl["store_bytes"] != rl["current_store_bytes"]:
    sys.exit("sizes: %r" % rl)' "$TPLOAD" "$SOCK/rank0.sock" "$M/c"
touch -d '2001-01-01' "$M/c/model.safetensors"
kill -CONT "$2"
wait "$R1"
R1RC=$?
if [ "$R1RC" = 74 ] && grep -q "changed while loading" "$T_TMP/r1.err"; then
  t_ok "a file changed during the reload: exit 74, named"
else t_fail "a file changed during the reload" "exit $R1RC" \
  "$(cat "$T_TMP/r1.err")"; fi
t_generation_is "... generation 1 is still served" 1 "$M/a"
t_one_store "... and no rank holds a second store"
t_job_ends "change: the job ends cleanly"

# --- a rank stopped during a reload ends the job ---------------------------
serve_job stall 2 "$M/a" --stall-timeout 2
MPI_ARGS=
unset TPLOAD_TEST_SIGSTOP_AT TPLOAD_TEST_SIGSTOP_RANK
t_exit "a rank stopped during the reload: reload exits 69" 69 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/a2"
serve_end
if [ "$SERVE_RC" != 0 ] && [ "$SERVE_RC" != hung ] &&
  messages "$SERVE_LOG.err" | grep -q "waiting for rank 1"; then
  t_ok "... the job ends (--stall-timeout), naming rank 1"
else t_fail "the stalled job" "rc $SERVE_RC" \
  "$(messages "$SERVE_LOG.err" | tail -5)"; fi
# Rank 0, whose deadline passed, removed its socket and the ready file
# before it ended the job (coord.h's on_abort); the stopped rank's socket,
# if left, answers nobody, and the next serve on the directory replaces it.
set -- $PIDS
if gone "$@"; then t_ok "... no rank of the job is left"
else t_fail "no rank of the job is left" "pids $PIDS"; fi
if [ ! -e "$SOCK/rank0.sock" ] && [ ! -e "$READY" ]; then
  t_ok "... rank 0 removed its socket and the ready file"
else t_fail "rank 0 removed its socket and the ready file" \
  "$(ls -A "$SOCK" "$READY" 2>&1)"; fi
t_exit "... the sockets answer nobody (status exits 69)" 69 \
  "$TPLOAD" status "$SOCK/rank1.sock"
t_done
