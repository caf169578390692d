#!/usr/bin/python3
"""reshard.py - what a re-sharded checkpoint must hold (issue 40),
independently of src/: the full tensors a presharded directory stands
for, and the biases a 1/N-scaled shard can give back.

A row-parallel bias stored as bias / N (oracle.scale_bias, MLC's
scale_bias) is rebuilt as shard x N computed in float32 (float64 for
F64) and rounded once to the dtype (round to nearest even).  That is
exact when N is a power of two (the division and the product only move
the exponent) and otherwise within 1 ulp of the original: bias / N is
within half an ulp of the true quotient, the product in float32 is
exact to far more bits than bf16 / f16 keep, so the one rounding lands
on the original or its neighbour.

CLI:
    reshard.py full MODEL FILE [--scaled N INFO]
        FILE (safetensors: rank0.safetensors of a -np 1 preshard of a
        re-sharded input) holds exactly MODEL's tensors (oracle.read_model:
        names, dtypes, shapes, decoded bytes).  With --scaled, the
        tensors INFO (the N-way input's shard-info.json) records with a
        bias_scale other than 1 must instead be the rebuilt bias above,
        byte for byte, and within 1 ulp of MODEL's; prints "scaled K
        exact E max-ulp U" (K such tensors, E of them equal to MODEL's).
    reshard.py same-info A B
        two shard-info.json files record the same grid and the same
        params (every field of every record, holders and XXH3 included):
        reshard.sh's diagnostic where the two files' bytes differ.
Exits 1 at the first mismatch, naming the tensor on stderr.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

BITS = {"BF16": "<u2", "F16": "<u2", "F32": "<u4", "F64": "<u8"}


def _as_float(raw, dtype):
    if dtype == "BF16":
        u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return u.view(np.float32)
    return np.frombuffer(raw, dtype={"F16": "<f2", "F32": "<f4",
                                     "F64": "<f8"}[dtype])


def rebuilt(raw, dtype, n):
    """The bias whose 1/n-scaled shard is scale_bias(raw): shard x n in
    float32 (float64 for F64), rounded once to dtype."""
    shard = oracle.scale_bias(raw, dtype, n)
    if dtype == "F64":
        return (_as_float(shard, dtype) * np.float64(n)).tobytes()
    f = (_as_float(shard, dtype).astype(np.float32) * np.float32(n))
    if dtype == "BF16":
        return oracle._bf16_round(f.astype(np.float32)).tobytes()
    return f.astype({"F16": "<f2", "F32": "<f4"}[dtype]).tobytes()


def ulps(a, b, dtype):
    """Largest distance in ulps between two same-signed arrays' elements
    (the biases a test draws are non-zero; a sign change counts big)."""
    x = np.frombuffer(a, dtype=BITS[dtype]).astype(np.int64)
    y = np.frombuffer(b, dtype=BITS[dtype]).astype(np.int64)
    return int(np.max(np.abs(x - y))) if len(x) else 0


def _scaled(info_path):
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    return {p["name"] for p in info["params"] if p["bias_scale"] != 1.0}


def full(model, path, n=None, info=None):
    want = {t[0]: t for t in oracle.read_model(model)}
    got = {t[0]: t for t in oracle.read_model(path)}
    if set(want) != set(got):
        raise ValueError("tensors differ: missing %s, extra %s" % (
            sorted(set(want) - set(got))[:5], sorted(set(got) - set(want))[:5]))
    scaled = _scaled(info) if info else set()
    exact, worst = 0, 0
    for name, (_, dtype, shape, raw, _) in want.items():
        _, gdt, gshape, graw, _ = got[name]
        if (gdt, gshape) != (dtype, shape):
            raise ValueError("%s: %s %s, expected %s %s"
                             % (name, gdt, gshape, dtype, shape))
        expect = rebuilt(raw, dtype, n) if name in scaled else raw
        if graw != expect:
            raise ValueError("%s: bytes differ from the %s" % (
                name, "rebuilt bias" if name in scaled else "original"))
        if name in scaled:
            u = ulps(raw, graw, dtype)
            worst = max(worst, u)
            exact += u == 0
            if u > 1:
                raise ValueError("%s: %d ulps from the original" % (name, u))
    if info:
        print("scaled %d exact %d max-ulp %d" % (len(scaled), exact, worst))
    return 0


def same_info(a, b):
    docs = []
    for path in (a, b):
        with open(path, encoding="utf-8") as f:
            docs.append(json.load(f))
    for key in ("tensor_parallel_shards", "pipeline_parallel_stages",
                "data_parallel_replicas", "bias_policy"):
        if docs[0].get(key) != docs[1].get(key):
            raise ValueError("%s: %r and %r" % (key, docs[0].get(key),
                                                docs[1].get(key)))
    pa, pb = docs[0]["params"], docs[1]["params"]
    if [p["name"] for p in pa] != [p["name"] for p in pb]:
        raise ValueError("the params' names or order differ")
    for x, y in zip(pa, pb):
        if x != y:
            raise ValueError("%s: the records differ" % x["name"])
    return 0


def main(argv):
    try:
        if len(argv) == 4 and argv[1] == "full":
            return full(argv[2], argv[3])
        if len(argv) == 7 and argv[1] == "full" and argv[4] == "--scaled":
            return full(argv[2], argv[3], int(argv[5]), argv[6])
        if len(argv) == 4 and argv[1] == "same-info":
            return same_info(argv[2], argv[3])
    except (ValueError, KeyError, OSError) as e:
        sys.stderr.write("# %s\n" % e)
        return 1
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
