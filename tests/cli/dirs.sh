#!/bin/sh
# dirs.sh - valid model directories end to end: numpy writes a sharded
# safetensors checkpoint (model.safetensors.index.json + 3 files) and an
# MLC weight directory (2 shard files, one f32-to-bf16 record), records
# what it wrote, and `tpload inspect DIR --json` must report exactly that:
# names in checkpoint order, dtypes, shapes, decoded bytes, files, offsets.
# An MLC directory of more files than the open-file limit is inspected
# under it; a limit too low even for a few files is refused (74) naming
# it.
. "$TESTS_SRCDIR/lib/lib.sh"

cat >"$T_TMP/gen.py" <<'EOF'
import json, os, struct, sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)

# inspect --json names dtypes as MLC does, like every JSON tpload prints
MLC_NAMES = {"F16": "float16", "F32": "float32", "BF16": "bfloat16",
             "I64": "int64", "U8": "uint8"}

def st_write(path, tensors):
    """tensors: list of (name, st_dtype, ndarray) in data order."""
    header, blobs, off = {}, [], 0
    for name, dt, a in tensors:
        b = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    # Keys sorted so header order differs from data order.
    h = json.dumps(dict(sorted(header.items())), separators=(",", ":"))
    h = h.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return 8 + len(h)

def index_dir(d):
    os.makedirs(d)
    files = {
        "model-00002-of-00003.safetensors": [
            ("model.layers.1.mlp.down_proj.weight", "F16",
             rng.standard_normal((4, 6)).astype(np.float16)),
            ("model.layers.1.input_layernorm.weight", "F32",
             rng.standard_normal(4).astype(np.float32))],
        "model-00001-of-00003.safetensors": [
            ("model.embed_tokens.weight", "BF16",
             rng.integers(0, 65535, (10, 4), dtype=np.uint16)),
            ("model.layers.0.self_attn.q_proj.weight", "F16",
             rng.standard_normal((4, 4)).astype(np.float16)),
            ("model.layers.0.mlp.gate_proj.bias", "I64",
             np.arange(6, dtype=np.int64))],
        "model-00003-of-00003.safetensors": [
            ("lm_head.weight", "F32",
             rng.standard_normal((10, 4)).astype(np.float32)),
            ("model.norm.weight", "U8", np.arange(4, dtype=np.uint8))],
    }
    expected, wmap = [], {}
    for fname in sorted(files):
        base = st_write(os.path.join(d, fname), files[fname])
        off = 0
        for name, dt, a in files[fname]:
            expected.append({"name": name, "dtype": MLC_NAMES[dt],
                             "shape": list(a.shape), "bytes": a.nbytes,
                             "file": fname, "offset": base + off})
            off += a.nbytes
            wmap[name] = fname
    total = sum(e["bytes"] for e in expected)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(wmap.items()))}, f)
    return expected

def mlc_dir(d):
    os.makedirs(d)
    shards = [
        [("embed.weight", "float16", "raw",
          rng.standard_normal((8, 4)).astype(np.float16)),
         ("norm.weight", "float32", "f32-to-bf16",
          rng.standard_normal(6).astype(np.float32)),
         ("qkv_proj.weight", "int32", "raw",
          rng.integers(-9, 9, (3, 4), dtype=np.int32))],
        [("lm_head.weight", "bfloat16", "raw",
          rng.integers(0, 65535, (8, 4), dtype=np.uint16)),
         ("scale", "float32", "raw", np.array(1.5, dtype=np.float32))],
    ]
    expected, file_recs = [], []
    for i, recs in enumerate(shards):
        fname = "params_shard_%d.bin" % i
        data, recj = b"", []
        for name, dt, fmt, a in recs:
            if fmt == "f32-to-bf16":
                b = (a.view(np.uint32) >> 16).astype(np.uint16).tobytes()
            else:
                b = a.tobytes()
            recj.append({"name": name, "shape": list(a.shape), "dtype": dt,
                         "format": fmt, "nbytes": len(b),
                         "byteOffset": len(data)})
            expected.append({"name": name, "dtype": dt,
                             "shape": list(a.shape), "bytes": a.nbytes,
                             "file": fname, "offset": len(data)})
            data += b + b"\0" * 4  # a gap between records is allowed
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)
        recj.reverse()  # records listed out of offset order
        file_recs.append({"dataPath": fname, "format": "raw-shard",
                          "nbytes": len(data), "records": recj})
    with open(os.path.join(d, "tensor-cache.json"), "w") as f:
        json.dump({"metadata": {"ParamSize": len(expected)},
                   "records": file_recs}, f)
    return expected

exp = {"idx": index_dir(os.path.join(out, "idx")),
       "mlc": mlc_dir(os.path.join(out, "mlc"))}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(exp, f)
EOF

cat >"$T_TMP/cmp.py" <<'EOF'
import json, sys
exp = json.load(open(sys.argv[1]))[sys.argv[2]]
got = json.load(open(sys.argv[3]))
keys = ("name", "dtype", "shape", "bytes", "file", "offset")
rows = [{k: t[k] for k in keys} for t in got["tensors"]]
bad = []
if rows != exp:
    bad.append("tensors differ:\n got %s\nwant %s" % (rows, exp))
if got["tensor_count"] != len(exp):
    bad.append("tensor_count %d != %d" % (got["tensor_count"], len(exp)))
nfiles = len({e["file"] for e in exp})
if got["file_count"] != nfiles:
    bad.append("file_count %d != %d" % (got["file_count"], nfiles))
total = sum(e["bytes"] for e in exp)
if got["total_bytes"] != total:
    bad.append("total_bytes %d != %d" % (got["total_bytes"], total))
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF

if ! "$ORACLE" "$T_TMP/gen.py" "$T_TMP/m"; then
  t_fail "numpy generator ran"
  t_done
  exit 1
fi

# check_inspect NAME DIR KIND: inspect DIR and compare with what the
# generator recorded for KIND.
check_inspect() {
  t_exit "inspect $1" 0 "$TPLOAD" inspect --json "$2"
  cp "$T_TMP/out" "$T_TMP/$3.json"
  if ! [ -s "$T_TMP/$3.json" ]; then
    t_fail "$1: names, dtypes, shapes, bytes, files, offsets as written" \
      "inspect printed nothing"
  elif "$ORACLE" "$T_TMP/cmp.py" "$T_TMP/m/expected.json" "$3" \
    "$T_TMP/$3.json" >"$T_TMP/cmp.out" 2>&1; then
    t_ok "$1: names, dtypes, shapes, bytes, files, offsets as written"
  else
    t_fail "$1: names, dtypes, shapes, bytes, files, offsets as written" \
      "$(head -c 2000 "$T_TMP/cmp.out")"
  fi
}

check_inspect "sharded index directory" "$T_TMP/m/idx" idx
check_inspect "MLC tensor-cache.json directory" "$T_TMP/m/mlc" mlc
grep -q '"format": "safetensors-index"' "$T_TMP/idx.json" &&
  t_ok "idx reported as safetensors-index" ||
  t_fail "idx reported as safetensors-index"
grep -q '"format": "mlc"' "$T_TMP/mlc.json" &&
  t_ok "mlc reported as mlc" || t_fail "mlc reported as mlc"

# The same MLC directory under the older cache name.
mv "$T_TMP/m/mlc/tensor-cache.json" "$T_TMP/m/mlc/ndarray-cache.json"
check_inspect "MLC ndarray-cache.json directory" "$T_TMP/m/mlc" mlc

# An MLC directory of more shard files than the open-file limit (issue
# 41): files are open only while read, a bounded number at once, so it
# is inspected under the limit; a limit too low even for a few of them
# is refused (74) naming the limit instead of a bare "Too many open
# files".  (mpi/many_files.sh loads such directories.)
"$ORACLE" - "$T_TMP/many" <<'PY' || { echo "Bail out! many shards"; exit 99; }
import json, os, sys
d = sys.argv[1]
os.makedirs(d)
files = []
for i in range(40):
    name = "params_shard_%d.bin" % i
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"\0" * 4)
    files.append({"dataPath": name, "format": "raw-shard", "nbytes": 4,
                  "records": [{"name": "w%d" % i, "shape": [1],
                               "dtype": "float32", "format": "raw",
                               "nbytes": 4, "byteOffset": 0}]})
json.dump({"metadata": {}, "records": files},
          open(os.path.join(d, "tensor-cache.json"), "w"))
PY
t_exit "40 shard files under a hard limit of 24 open files: exit 0" 0 \
  sh -c 'ulimit -n 24 && exec "$0" inspect "$1" --json' "$TPLOAD" "$T_TMP/many"
cp "$T_TMP/out" "$T_TMP/many.json"
t_check "... all 40 files and their tensors listed" "$ORACLE" -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [t["name"] for t in d["tensors"]]
want = ["w%d" % i for i in range(40)]
if d["file_count"] != 40 or names != want:
    sys.exit("files %r, tensors %r" % (d["file_count"], names))' \
  "$T_TMP/many.json"
# Only stdin, stdout and stderr open (what the harness passes down is
# closed): the loader's one descriptor at a time fits, two files do not.
t_exit "... under a hard limit of 4: 74" 74 "$ORACLE" -c '
import os, resource, sys
os.closerange(3, 65536)
resource.setrlimit(resource.RLIMIT_NOFILE, (4, 4))
os.execv(sys.argv[1], sys.argv[1:])' "$TPLOAD" inspect "$T_TMP/many"
want="params_shard_[0-9]*\.bin: cannot open: Too many open files"
want="$want (the limit is 4 open files, hard limit 4"
if grep -q "$want" "$T_TMP/err"; then
  t_ok "... the message names the file and the limit"
else
  t_fail "names the limit" "$(cat "$T_TMP/err")"
fi
t_done
