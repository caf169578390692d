#!/usr/bin/python3
"""mlc_preshard.py - reads a presharded MLC tensor cache the way MLC LLM's
runtime does and checks it against MLC's shard functions, independently of
tpload's writer.

The reader follows LoadMultiGPUPresharded (mlc-ai/mlc-llm
cpp/multi_gpu/multi_gpu_loader.cc): worker w = group g (pipeline stage)
x group_size + local k walks the model's params in order, skips those
whose pipeline_stages lack g, looks up "<name>_shard-<k>" for a param with
preprocs and "<name>" otherwise among every file record of
tensor-cache.json, loads the whole .bin when the record's file is not the
one it loaded last, and reads the record through TVM's rules
(src/runtime/vm/tensor_cache_support.cc: float32 with format
"f32-to-bf16" is decoded from bf16, everything else is raw).

The expected bytes are a numpy transcription of ShardSingleDim.gen_tir
(mlc-ai/mlc-llm python/mlc_llm/support/tensor_parallel.py) applied to the
source directory: for each segment j of per-shard length s_j, the slice of
n * s_j along dim, reshaped to [n, s_j] there, the n axis moved to the
front, the segments concatenated along 1 + dim; worker k gets row k.
The params list (name, preprocs, dim, segs, pipeline_stages) is the
metadata MLC compiles into the model, which `tpload plan` prints (its
agreement with MLC's model files is checked by presets.sh and
mlc_archs.py).

MLC's own presharded layout, for the bytes comparison, is what its
converter writes with MLC_INTERNAL_PRESHARD_NUM (support/preshard.py and
tvm.contrib.tvmjs.dump_tensor_cache): for each param in the source's
order its n shards one after another (or the param), packed into files of
32 MiB, a record of at least 16 MiB that would overflow the file going
alone.

CLI:
    mlc_preshard.py check SRC OUT PLAN.json   TAP-free: prints "ok" or
        "fail: ..." lines, one check per line, and the bytes each worker
        reads under OUT's layout and under MLC's own
    mlc_preshard.py bytes SRC OUT PLAN.json   only those bytes, from the
        JSON alone (no .bin is read): "stage shard this-layout mlc-own"
    mlc_preshard.py write SRC OUT PLAN.json   writes OUT, the cache MLC's
        own converter makes of SRC with MLC_INTERNAL_PRESHARD_NUM =
        PLAN's tensor_parallel_shards (one stage): mlc_own_files' packing
        of gen_tir's rows, records named "<name>_shard-<k>" (or "<name>"
        unsharded), float32 re-encoded to bf16 as the source stored it,
        md5sums, mlc-chat-config.json with tensor_parallel_shards N and
        SRC's other files copied (a re-shard test's input)
"""
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402  (mlc_data_file, for `write`)

UINT = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}
SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
        "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
        "uint32": 4, "int64": 8, "uint64": 8, "bool": 1,
        "float8_e4m3fn": 1, "float8_e5m2": 1}
CAP = 32 << 20


def read_cache(d):
    """{name: (file record, param record)} and the file records."""
    with open(os.path.join(d, "tensor-cache.json")) as f:
        cache = json.load(f)
    where = {}
    for frec in cache["records"]:
        for rec in frec["records"]:
            where[rec["name"]] = (frec, rec)
    return cache, where


def record_bytes(raw, rec):
    """A record's bytes as TVM's ParamRecord::Load hands them over."""
    data = raw[rec["byteOffset"]:rec["byteOffset"] + rec["nbytes"]]
    if rec["dtype"] == "float32" and rec["format"] == "f32-to-bf16":
        u16 = np.frombuffer(data, dtype="<u2").astype("<u4") << 16
        return u16.tobytes()
    return data


def source_tensor(d, where, name):
    frec, rec = where[name]
    with open(os.path.join(d, frec["dataPath"]), "rb") as f:
        raw = f.read()
    data = record_bytes(raw, rec)
    return np.frombuffer(data, dtype=UINT[SIZE[rec["dtype"]]]).reshape(
        rec["shape"])


def gen_tir(full, dim, segs, n):
    """ShardSingleDim(dim, segs).gen_tir(shards=n): [n, *shard shape]."""
    parts, at = [], 0
    for s in segs:
        piece = np.take(full, np.arange(at, at + n * s), axis=dim)
        shape = list(full.shape)
        piece = piece.reshape(shape[:dim] + [n, s] + shape[dim + 1:])
        parts.append(np.moveaxis(piece, dim, 0))
        at += n * s
    return np.concatenate(parts, axis=1 + dim)


def load_worker(out, where, params, g, k):
    """LoadMultiGPUPresharded for worker (g, k): {param: bytes}, the files
    it loaded (in order, repeats included) and the bytes it read."""
    got, files, read = {}, [], 0
    current, raw = None, b""
    for p in params:
        if g not in p["pipeline_stages"]:
            continue
        name = p["name"] + ("_shard-%d" % k if p["preprocs"] else "")
        if name not in where:
            raise KeyError("worker (%d, %d): cannot find parameter %s"
                           % (g, k, name))
        frec, rec = where[name]
        if frec["dataPath"] != current:
            current = frec["dataPath"]
            with open(os.path.join(out, current), "rb") as f:
                raw = f.read()
            if len(raw) != frec["nbytes"]:
                raise ValueError("%s: %d bytes, the cache says %d"
                                 % (current, len(raw), frec["nbytes"]))
            files.append(current)
            read += len(raw)
        got[p["name"]] = record_bytes(raw, rec)
    return got, files, read


def expected(src, swhere, p, n, k):
    full = source_tensor(src, swhere, p["name"])
    if not p["preprocs"]:
        return full.tobytes()
    return gen_tir(full, p["dim"], p["segs"], n)[k].tobytes()


def mlc_own_files(params, swhere, n):
    """MLC's converter's files with MLC_INTERNAL_PRESHARD_NUM=n: [(nbytes,
    names)], records in the source's order, each param's shards side by
    side (TensorCacheShardingManager.append_or_update's packing), float32
    stored as bf16 (encode_format f32-to-bf16)."""
    order = {name: i for i, name in enumerate(swhere)}
    files, cur, size = [], [], 0
    for p in sorted(params, key=lambda q: order[q["name"]]):
        nb = int(np.prod(p["shape"], dtype=np.int64)) * SIZE[p["dtype"]]
        if p["dtype"] == "float32":
            nb //= 2  # encode_format f32-to-bf16
        names = (["%s_shard-%d" % (p["name"], k) for k in range(n)]
                 if p["preprocs"] else [p["name"]])
        for name in names:
            if size + nb >= CAP:
                if nb * 2 >= CAP:
                    files.append((nb, [name]))
                    continue
                files.append((size, cur))
                cur, size = [], 0
            cur.append(name)
            size += nb
    if size:
        files.append((size, cur))
    return files


def mlc_own_read(files, params, g, k):
    """Bytes worker (g, k) reads from MLC's own layout."""
    at = {name: i for i, (_, names) in enumerate(files) for name in names}
    current, read = None, 0
    for p in params:
        if g not in p["pipeline_stages"]:
            continue
        f = at[p["name"] + ("_shard-%d" % k if p["preprocs"] else "")]
        if f != current:
            current = f
            read += files[f][0]
    return read


def walk_bytes(cache, params, g, k):
    """Bytes worker (g, k) reads from a cache, from its JSON alone."""
    at = {rec["name"]: frec for frec in cache["records"]
          for rec in frec["records"]}
    current, read = None, 0
    for p in params:
        if g not in p["pipeline_stages"]:
            continue
        frec = at[p["name"] + ("_shard-%d" % k if p["preprocs"] else "")]
        if frec["dataPath"] != current:
            current = frec["dataPath"]
            read += frec["nbytes"]
    return read


def report(src, out, plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    tp, pp = plan["tensor_parallel_shards"], plan["pipeline_parallel_stages"]
    _, swhere = read_cache(src)
    cache, _ = read_cache(out)
    own = mlc_own_files(plan["params"], swhere, tp)
    for g in range(pp):
        for k in range(tp):
            print(g, k, walk_bytes(cache, plan["params"], g, k),
                  mlc_own_read(own, plan["params"], g, k))
    return 0


def check(src, out, plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    tp, pp = plan["tensor_parallel_shards"], plan["pipeline_parallel_stages"]
    params = plan["params"]
    _, swhere = read_cache(src)
    cache, where = read_cache(out)
    fails = []
    for frec in cache["records"]:
        with open(os.path.join(out, frec["dataPath"]), "rb") as f:
            if hashlib.md5(f.read()).hexdigest() != frec["md5sum"]:
                fails.append("%s: md5sum differs" % frec["dataPath"])
        if frec["nbytes"] > CAP and len(frec["records"]) != 1:
            fails.append("%s: %d bytes in %d records (over 32 MiB: one "
                         "tensor alone)" % (frec["dataPath"], frec["nbytes"],
                                           len(frec["records"])))
    own_layout = mlc_own_files(params, swhere, tp)
    for g in range(pp):
        for k in range(tp):
            who = "worker (stage %d, shard %d)" % (g, k)
            try:
                got, files, read = load_worker(out, where, params, g, k)
            except (KeyError, ValueError) as e:
                fails.append(str(e))
                continue
            for p in params:
                if p["name"] in got and \
                        got[p["name"]] != expected(src, swhere, p, tp, k):
                    fails.append("%s: %s differs from gen_tir's row %d"
                                 % (who, p["name"], k))
            if len(files) != len(set(files)):
                fails.append("%s: loads a file twice: %s" % (who, files))
            for fname in set(files):
                frec = next(r for r in cache["records"]
                            if r["dataPath"] == fname)
                for rec in frec["records"]:
                    tail = rec["name"].rsplit("_shard-", 1)
                    if len(tail) == 2 and tail[1].isdigit() and \
                            int(tail[1]) != k:
                        fails.append("%s: its file %s holds %s" %
                                     (who, fname, rec["name"]))
            print("bytes %s: this layout %d, MLC's own %d" %
                  (who, read, mlc_own_read(own_layout, params, g, k)))
    for f in fails:
        print("fail: " + f)
    if not fails:
        print("ok")
    return 1 if fails else 0


def _encode(rec, arr):
    """A record's stored bytes: float32 in f32-to-bf16 kept as bf16 (the
    source's values are bf16 already, so the high halves are exact)."""
    if rec["dtype"] == "float32" and rec["format"] == "f32-to-bf16":
        return (arr.astype("<u4") >> 16).astype("<u2").tobytes()
    return arr.tobytes()


def _own_record(src, swhere, p, n, name):
    """(record, bytes) of `name` (p's shard k, or p whole) in MLC's own
    presharded cache."""
    _, srec = swhere[p["name"]]
    full = source_tensor(src, swhere, p["name"])
    arr = full
    if name != p["name"]:
        k = int(name.rsplit("_shard-", 1)[1])
        arr = gen_tir(full, p["dim"], p["segs"], n)[k]
    data = _encode(srec, np.ascontiguousarray(arr))
    rec = {"name": name, "shape": list(arr.shape), "dtype": srec["dtype"],
           "format": srec["format"], "nbytes": len(data)}
    return rec, data


def write_own(src, out, plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    n = plan["tensor_parallel_shards"]
    by_name = {p["name"]: p for p in plan["params"]}
    scache, swhere = read_cache(src)
    os.makedirs(out)
    frecs = []
    for i, (_, names) in enumerate(mlc_own_files(plan["params"], swhere, n)):
        blob, recs = b"", []
        for name in names:
            param = by_name.get(name) or by_name[name.rsplit("_shard-", 1)[0]]
            rec, data = _own_record(src, swhere, param, n, name)
            rec["byteOffset"] = len(blob)
            recs.append(rec)
            blob += data
        frecs.append(oracle.mlc_data_file(out, i, blob, recs))
    with open(os.path.join(out, "tensor-cache.json"), "w") as f:
        json.dump({"metadata": scache.get("metadata", {}),
                   "records": frecs}, f, indent=2)
    for fname in os.listdir(src):
        if fname == "tensor-cache.json" or fname.endswith(".bin"):
            continue
        with open(os.path.join(src, fname), "rb") as f:
            data = f.read()
        if fname == "mlc-chat-config.json":
            cfg = json.loads(data)
            cfg["tensor_parallel_shards"] = n
            cfg.get("model_config", {})["tensor_parallel_shards"] = n
            data = json.dumps(cfg, indent=2).encode()
        with open(os.path.join(out, fname), "wb") as f:
            f.write(data)
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], argv[4])
    if len(argv) == 5 and argv[1] == "bytes":
        return report(argv[2], argv[3], argv[4])
    if len(argv) == 5 and argv[1] == "write":
        return write_own(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
