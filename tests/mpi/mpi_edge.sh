#!/bin/bash
# mpi_edge.sh - layouts that stress rank 0's file walk: MLC shard files
# with large gaps between records and an empty record lying inside another
# record's byte range (it must neither end the read early nor count).
# Shards are checked against the numpy oracle and with `tpload verify`.
# Then SIGTERM in the middle of a preshard: the job ends, nothing is left.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

model="$T_TMP/gappy"
mkdir -p "$model"
"$ORACLE" - "$model" <<'PY'
import json, os, sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
w = rng.standard_normal((64, 48)).astype(np.float32)   # 12 KiB
v = rng.standard_normal((96,)).astype(np.float32)
blob = bytearray(b"\0" * (3 << 20))                      # 3 MiB gap
recs = [{"name": "w", "shape": [64, 48], "dtype": "float32",
         "format": "raw", "nbytes": w.nbytes, "byteOffset": len(blob)}]
# an empty record whose offset lies inside w's bytes, sorting after it
recs.append({"name": "e", "shape": [0, 4], "dtype": "float32",
             "format": "raw", "nbytes": 0, "byteOffset": len(blob) + 128})
blob += w.tobytes() + b"\0" * (2 << 20)                  # 2 MiB gap
recs.append({"name": "v", "shape": [96], "dtype": "float32",
             "format": "raw", "nbytes": v.nbytes, "byteOffset": len(blob)})
blob += v.tobytes()
with open(os.path.join(out, "params_shard_0.bin"), "wb") as f:
    f.write(blob)
cache = {"metadata": {}, "records": [{"dataPath": "params_shard_0.bin",
         "format": "raw-shard", "nbytes": len(blob), "records": recs}]}
with open(os.path.join(out, "tensor-cache.json"), "w") as f:
    json.dump(cache, f)
plan = {"rules": [{"match": "w", "dim": 1}, {"match": "v", "dim": 0}]}
with open(os.path.join(out, "plan.json"), "w") as f:
    json.dump(plan, f)
PY

for n in 1 2 3; do
  out="$T_TMP/out$n"
  t_exit "np $n: preshard a gappy MLC file" 0 timeout -k 10 "$T_HANG_SECS" \
    "$MPIRUN" --oversubscribe -np "$n" "$TPLOAD" preshard "$model" \
    --plan "$model/plan.json" --out "$out" --chunk-mib 1 --progress
  size=$(wc -c <"$T_TMP/err")
  if [ "$size" -lt 4000 ]; then t_ok "np $n: progress output stays small"
  else t_fail "np $n: progress output stays small" "stderr was $size bytes"; fi
  t_check "np $n: shards match the numpy oracle" \
    "$ORACLE" "$TESTS_SRCDIR/oracle/oracle.py" check-preshard "$model" \
    "$model/plan.json" "$n" "$out"
  t_exit "np $n: tpload verify agrees" 0 "$TPLOAD" verify "$model" "$out" \
    --plan "$model/plan.json"
done
# --- SIGTERM to the job while rank 0 streams: rank 1 stops itself before
# it receives (the stall test hook "deliver"), so rank 0 is held
# mid-stream and the load cannot finish first whatever the machine's
# speed; then mpirun's SIGTERM reaches every rank and rank 1 resumes.
big="$T_TMP/big"
"$TPLOAD" synth --arch llama --out "$big" --hidden 512 --heads 8 \
  --kv-heads 8 --intermediate 1024 --vocab 4096 --layers 24 --quiet
out="$T_TMP/term-out"
# mpirun itself in the background (not the mpi function, whose subshell
# would stand between this script and the ranks)
TPLOAD_TEST_SIGSTOP_RANK=1 TPLOAD_TEST_SIGSTOP_AT=deliver \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SIGSTOP_RANK \
  -x TPLOAD_TEST_SIGSTOP_AT "$TPLOAD" preshard "$big" --out "$out" \
  --chunk-mib 1 --progress >/dev/null 2>"$T_TMP/term.err" &
job=$!
# held_or_ended: a rank of the job stopped itself, or the job has ended.
held_or_ended() {
  for p in $(pgrep -P "$job"); do
    grep -q '^State:[[:space:]]*T' "/proc/$p/status" 2>/dev/null && return 0
  done
  ! alive "$job"
}
wait_until held_or_ended
ranks=$(pgrep -P "$job" -d ' ')
if [ -e "$out/shard-info.json" ] || [ -z "$ranks" ]; then
  kill -CONT $ranks 2>/dev/null; wait "$job"
  t_fail "SIGTERM mid-load: rank 1 held the load" \
    "the job ended although rank 1 stops before it receives" \
    "$(head -c 1000 "$T_TMP/term.err")"
else
  start=$(date +%s)
  # what mpirun does on SIGTERM, without its grace period in which the
  # resumed ranks could finish the (short) job
  kill -TERM "$job" $ranks
  kill -CONT $ranks
  if wait_until gone "$job"; then
    wait "$job"; rc=$?
    echo "# SIGTERM mid-load: the job ended after $(($(date +%s) - start)) s"
    if [ "$rc" -ne 0 ]; then t_ok "SIGTERM mid-load: the job exits non-zero"
    else t_fail "SIGTERM mid-load: the job exits non-zero" "exit 0"; fi
    t_ok "SIGTERM mid-load: the job ends"
  else
    kill -KILL "$job" $ranks 2>/dev/null
    wait "$job"
    t_fail "SIGTERM mid-load: the job exits non-zero" "it had to be killed"
    t_fail "SIGTERM mid-load: the job ends" "still running after" \
      "$T_HANG_SECS s"
  fi
  # a zombie waiting for its reaper has ended
  if wait_until gone $ranks; then t_ok "SIGTERM mid-load: no rank left running"
  else
    t_fail "SIGTERM mid-load: no rank left running" "$ranks"
    kill -KILL $ranks 2>/dev/null
  fi
  files=$(ls -A "$out" 2>/dev/null | tr '\n' ' ')
  if [ -z "$files" ]; then t_ok "SIGTERM mid-load: no output or temp file"
  else t_fail "SIGTERM mid-load: no output or temp file" "found: $files"; fi
fi
t_done
