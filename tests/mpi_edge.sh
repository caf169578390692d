#!/bin/bash
# mpi_edge.sh - layouts that stress rank 0's file walk: MLC shard files
# with large gaps between records and an empty record lying inside another
# record's byte range (it must neither end the read early nor count).
# Shards are checked against the numpy oracle and with `tpload verify`.
. "$TESTS_SRCDIR/lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"

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
  t_exit "np $n: preshard a gappy MLC file" 0 timeout 60 \
    "$MPIRUN" --oversubscribe -np "$n" "$TPLOAD" preshard "$model" \
    --plan "$model/plan.json" --out "$out" --chunk-mib 1 --progress
  size=$(wc -c <"$T_TMP/err")
  if [ "$size" -lt 4000 ]; then t_ok "np $n: progress output stays small"
  else t_fail "np $n: progress output stays small" "stderr was $size bytes"; fi
  t_check "np $n: shards match the numpy oracle" \
    "$ORACLE" "$TESTS_SRCDIR/oracle.py" check-preshard "$model" \
    "$model/plan.json" "$n" "$out"
  t_exit "np $n: tpload verify agrees" 0 "$TPLOAD" verify "$model" "$out" \
    --plan "$model/plan.json"
done
t_done
