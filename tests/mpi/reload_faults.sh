#!/bin/sh
# reload_faults.sh - a reload that fails in its reading never ends the
# job that serves, and a lost rank leaves nothing of the survivors
# (issue 41).  The faults are the test-only hooks on the real read paths:
# TPLOAD_TEST_EIO_OFFSET=N fails byte N of every file with EIO (a bad
# sector, a FUSE filesystem failing a read: fileio.c's pread), and
# TPLOAD_TEST_DIRECT_EINVAL=N fails every O_DIRECT request reaching byte
# N with EINVAL (a filesystem that takes O_DIRECT opens, not the reads,
# as libfuse's passthrough example does: source.c's io_uring reads).
# N lies past the end of the model served and inside the next one, so
# the first load reads clean and only the reload meets the fault.
# - EIO, and EINVAL from a direct read past a file's first, during
#   `tpload reload` and during SIGHUP's reload: the reload fails with 74
#   and one message naming the file, every rank still serves generation
#   1 with one store, and a later reload switches; so does EIO under
#   --read local (already agreed: every rank reads its own slices).
# - EINVAL from every direct read (0): `--io direct` and `--io auto` (the
#   file evicted from the page cache), `--read mpi` and `--read local`,
#   fall back to buffered with one note, the shards the numpy oracle's;
#   a serve on it reloads.
# - SIGKILL of rank 1, then of rank 0, held mid-stream of a reload (the
#   SIGSTOP point reload-stream): the survivor removes its socket (rank 0
#   its ready file too) before the job ends.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"
. "$TESTS_SRCDIR/lib/reload_lib.sh"

gen a --seed 4101
gen b --seed 4102 --big-mib 2 # larger than a: its last bytes lie past a's
BAD=$("$ORACLE" -c 'import os, sys
a, b = (os.path.getsize(p + "/model.safetensors") for p in sys.argv[1:])
if b - 100 <= a:
    sys.exit("b (%d bytes) is not larger than a (%d)" % (b, a))
print(b - 100)' "$M/a" "$M/b") ||
  { echo "Bail out! the models' sizes: $BAD"; exit 99; }

# t_serves NAME G MODEL: generation G of MODEL, every rank healthy, one
# store each.
t_serves() {
  local r ok=1
  t_generation_is "$1: generation $2 is served" "$2" "$3"
  for r in 0 1; do
    "$TPLOAD" status "$SOCK/rank$r.sock" --health >/dev/null 2>&1 || ok=0
  done
  if [ $ok = 1 ]; then t_ok "$1: both ranks answer --health"
  else t_fail "$1: both ranks answer --health"; fi
  t_one_store "$1: each rank holds one store"
}

# t_sighup_fails NAME WHY: SIGHUP to rank 0 (its pid first in $PIDS)
# reloads and fails; its log says "reload failed" with WHY.
t_sighup_fails() {
  local n
  n=$(grep -c "reload failed" "$SERVE_LOG.err")
  set -- "$1" "$2" $PIDS
  kill -HUP "$3"
  wait_for "$T_HANG_SECS" sh -c \
    "[ \$(grep -c 'reload failed' '$SERVE_LOG.err') -gt $n ]"
  if grep "reload failed" "$SERVE_LOG.err" | tail -1 | grep -q "$2"; then
    t_ok "$1: SIGHUP's reload fails, saying so"
  else t_fail "$1: SIGHUP's reload fails, saying so" \
    "$(messages "$SERVE_LOG.err" | tail -5)"; fi
}

# faulty_reload LABEL HOW HOOK WHY ARGS...: a serve of $T_TMP/cur-LABEL
# (a link to a) with HOOK=$BAD and tpload's ARGS; HOW (reload: `tpload
# reload` to b; sighup: SIGHUP with the link on b) fails with 74 and WHY,
# keeping generation 1; then a reload to a switches.
faulty_reload() {
  local label=$1 how=$2 hook=$3 why=$4 cur=$T_TMP/cur-$1
  shift 4
  ln -sfn "$M/a" "$cur"
  export "$hook=$BAD"
  MPI_ARGS="-x $hook" serve_job "$label" 2 "$cur" "$@"
  unset "$hook"
  if [ "$how" = reload ]; then
    t_exit "$label: reload to b exits 74" 74 \
      "$TPLOAD" reload "$SOCK/rank0.sock" "$M/b" --plan "$M/b/plan.json"
    keep
    t_check "$label: ... naming b's file and the error" grep -q \
      "reload failed: $M/b/model.safetensors: I/O error.*: $why" \
      "$T_TMP/last.err"
  else
    ln -sfn "$M/b" "$cur"
    t_sighup_fails "$label" "cur-$label/model.safetensors: I/O error.*: $why"
    ln -sfn "$M/a" "$cur"
  fi
  t_serves "$label: after it" 1 "$cur"
  t_exit "$label: a reload then switches" 0 \
    "$TPLOAD" reload "$SOCK/rank1.sock" "$cur"
  t_serves "$label: then" 2 "$cur"
  t_job_ends "$label: the job ends cleanly"
}

cleanup() { serve_cleanup; }
trap cleanup EXIT

# --- read errors while a reload reads ----------------------------------------
for how in reload sighup; do
  faulty_reload "eio-$how" $how TPLOAD_TEST_EIO_OFFSET "Input/output error" \
    --io buffered
  faulty_reload "einval-$how" $how TPLOAD_TEST_DIRECT_EINVAL \
    "Invalid argument" --io direct --chunk-mib 1
done
# --read local: the ranks that read the bad byte fail, all agree.
faulty_reload eio-local reload TPLOAD_TEST_EIO_OFFSET "Input/output error" \
  --io buffered --read local

# --- a filesystem that fails every direct read -------------------------------
export TPLOAD_TEST_DIRECT_EINVAL=0
# t_fallback NAME READ IO: preshard of b reads buffered, one note, the
# oracle's shards.
t_fallback() {
  local out=$T_TMP/o-$2-$3
  t_exit "$1: preshard exits 0" 0 "$MPIRUN" --oversubscribe -np 2 \
    -x TPLOAD_TEST_DIRECT_EINVAL "$TPLOAD" preshard "$M/b" \
    --plan "$M/b/plan.json" --out "$out" --read "$2" --io "$3"
  messages "$T_TMP/err" | grep 'O_DIRECT' >"$T_TMP/notes"
  t_check "$1: one note says the file is read buffered and why" \
    sh -c "[ \$(grep -c . '$T_TMP/notes') = 1 ] &&
      grep -q 'b/model.safetensors: read buffered: its file system refuses O_DIRECT reads' '$T_TMP/notes'"
  t_oracle "$1: every rank's tensors match the oracle" \
    check-preshard "$M/b" "$M/b/plan.json" 2 "$out"
}
t_fallback "EINVAL, --io direct" mpi direct
t_fallback "EINVAL, --read local --io direct" local direct
"$ORACLE" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$M/b/model.safetensors"
t_fallback "EINVAL, --io auto on an evicted file" mpi auto
MPI_ARGS="-x TPLOAD_TEST_DIRECT_EINVAL" serve_job dio0 2 "$M/a" --io direct
t_exit "EINVAL on every direct read: a reload to b switches" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/b" --plan "$M/b/plan.json"
t_serves "EINVAL on every direct read: then" 2 "$M/b"
t_check "... rank 0 said b is read buffered" grep -q \
  "b/model.safetensors: read buffered: its file system refuses O_DIRECT" \
  "$SERVE_LOG.err"
t_job_ends "dio0: the job ends cleanly"
unset TPLOAD_TEST_DIRECT_EINVAL MPI_ARGS

# --- a rank SIGKILLed during a reload ----------------------------------------
export TPLOAD_TEST_SIGSTOP_AT=reload-stream
for k in 1 0; do
  export TPLOAD_TEST_SIGSTOP_RANK=$k
  MPI_ARGS="-x TPLOAD_TEST_SIGSTOP_AT -x TPLOAD_TEST_SIGSTOP_RANK" \
    serve_job kill$k 2 "$M/a"
  set -- $PIDS
  if [ $k = 1 ]; then victim=$2 survivor=0; else victim=$1 survivor=1; fi
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/b" --plan "$M/b/plan.json" \
    >"$T_TMP/r.out" 2>"$T_TMP/r.err" &
  RL=$!
  wait_until stopped "$victim" # held mid-stream, the survivor in it
  kill -KILL "$victim"
  serve_end
  wait "$RL"
  # mpirun may end before a rank it killed has (a sanitizer build's rank
  # runs its leak check on the way out): wait for them, bounded.
  if [ "$SERVE_RC" != 0 ] && [ "$SERVE_RC" != hung ] &&
     wait_until gone $PIDS; then
    t_ok "SIGKILL of rank $k mid-reload: the job ends"
  else t_fail "SIGKILL of rank $k mid-reload: the job ends" "rc $SERVE_RC"; fi
  t_check "... the survivor (rank $survivor) removed its socket" \
    test ! -e "$SOCK/rank$survivor.sock"
  if [ $k = 1 ]; then
    t_check "... rank 0 removed the ready file" test ! -e "$READY"
  fi
done
unset TPLOAD_TEST_SIGSTOP_AT TPLOAD_TEST_SIGSTOP_RANK MPI_ARGS
t_done
