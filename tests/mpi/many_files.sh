#!/bin/sh
# many_files.sh - a model of more files than the descriptor limit (issue
# 41 item 10): MLC directories of 40 params_shard_*.bin files load with
# every rank under `ulimit -n 24` (files are open only while read, at most
# a quarter of the limit at once: src/fdcache.h), by --read mpi (with
# --io direct and --verify-md5's pass) and by --read local (--io
# direct), each rank's bytes against the numpy oracle; `verify` checks
# the output under the same limit, and a serve under `ulimit -n 64` (16
# files open at most) reloads the other model and serves its bytes.  A
# file replaced (another renamed over it) after validation, while the
# file was closed, is refused at its re-open with 74 naming it.
# (cli/dirs.sh: inspect under the limit, and a limit too low for even a
# few files named.)
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

gen a --seed 4141 --layout mlc --tensors 30 --mlc-files 40
gen b --seed 4242 --layout mlc --tensors 30 --mlc-files 40
n=$(ls "$M/a" | grep -c '^params_shard_.*\.bin$')
t_check "the models have 40 shard files each" [ "$n" = 40 ]

# lim ARGS...: tpload ARGS on 2 ranks, each under `ulimit -n 24` (not
# mpirun, which needs more for its pipes).
LIM='ulimit -n 24 && exec "$0" "$@"'
lim() {
  "$MPIRUN" --oversubscribe -np 2 sh -c "$LIM" "$TPLOAD" "$@"
}

t_exit "--read mpi --io direct --verify-md5 under ulimit -n 24: exit 0" 0 \
  lim preshard "$M/a" --plan "$M/a/plan.json" --out "$T_TMP/oa" \
  --read mpi --io direct --verify-md5 --quiet
t_oracle "... every rank's tensors match the oracle" \
  check-preshard "$M/a" "$M/a/plan.json" 2 "$T_TMP/oa"
t_exit "--read local --io direct under ulimit -n 24: exit 0" 0 \
  lim preshard "$M/b" --plan "$M/b/plan.json" --out "$T_TMP/ob" \
  --read local --io direct --quiet
t_oracle "... every rank's tensors match the oracle" \
  check-preshard "$M/b" "$M/b/plan.json" 2 "$T_TMP/ob"
t_exit "verify under ulimit -n 24: exit 0" 0 \
  sh -c "$LIM" "$TPLOAD" verify "$M/a" "$T_TMP/oa" --plan "$M/a/plan.json"

# --- serve, reloaded to the other 40-file model ---------------------------
# The daemon (libuv, its sockets and threads) needs more than 24: 64
# still holds at most 16 of the 40 files open.
SOCK=$T_TMP/sock
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 \
  sh -c 'ulimit -n 64 && exec "$0" "$@"' \
  "$TPLOAD" serve "$M/a" --plan "$M/a/plan.json" --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve under ulimit -n 64 is ready" "$T_TMP/ready"
t_exit "reload to the other 40-file model: exit 0" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/b" --plan "$M/b/plan.json"
mkdir -p "$T_TMP/dump"
for r in 0 1; do
  "$TPLOAD" dump "$SOCK/rank$r.sock" --out "$T_TMP/dump/rank$r.safetensors" \
    >/dev/null 2>&1
done
t_dumps_match "after the reload every rank serves what preshard gave" \
  2 "$T_TMP/dump" "$T_TMP/ob"
"$TPLOAD" status "$SOCK/rank0.sock" --shutdown >/dev/null 2>&1
serve_end
t_check "the serve ends with exit 0" [ "$SERVE_RC" = 0 ]

# --- a file replaced after validation, found at its re-open --------------
# Rank 0 stops with its files validated and the source open (the
# test-only SIGSTOP at "deliver"): of 40 files only the last few are open
# then, so params_shard_0.bin is opened again when it is read.
cp -r "$M/a" "$T_TMP/c"
TPLOAD_TEST_SIGSTOP_RANK=0 "$MPIRUN" --oversubscribe -np 2 \
  -x TPLOAD_TEST_SIGSTOP_RANK sh -c "$LIM" "$TPLOAD" load "$T_TMP/c" \
  --plan "$T_TMP/c/plan.json" --read local --stall-timeout 0 --quiet \
  >"$T_TMP/job.out" 2>"$T_TMP/job.err" &
JOB=$!
PIDS="$PIDS $JOB"
p=$(stopped_pid 0)
if [ -z "$p" ]; then
  t_fail "rank 0 stopped with its files validated" "$(cat "$T_TMP/job.err")"
  kill -KILL "$JOB"
fi
cp "$T_TMP/c/params_shard_0.bin" "$T_TMP/c/new"
mv "$T_TMP/c/new" "$T_TMP/c/params_shard_0.bin"
[ -z "$p" ] || kill -CONT "$p"
wait "$JOB"
rc=$?
t_check "a file renamed over after validation: exit 74 (got $rc)" [ $rc = 74 ]
want="params_shard_0.bin: changed while loading (another file took its place)"
if messages "$T_TMP/job.err" | grep -q -F "$want"; then
  t_ok "... the message names the file and what changed"
else
  t_fail "... the message names the file and what changed" \
    "$(messages "$T_TMP/job.err")"
fi
t_done
