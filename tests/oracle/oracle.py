#!/usr/bin/python3
"""oracle.py - the independent numpy oracle for tpload's tests.

It computes what every rank must receive without sharing any code or
formula with src/shard.c: `shard` follows MLC LLM's TIR (slice each
segment, reshape its dim into [N, seg/N], move the N axis to the front,
concatenate along axis 1+dim, take row r), while shard.c uses the closed
form.  `scale_bias` is the bias-scaling scope (DESIGN.md section 2).

Import it from other tests with
    sys.path.insert(0, TESTS_DIR); import oracle
Run it under /usr/bin/python3 (Debian's python3-numpy).

CLI (used by tests/shard_oracle.sh):
    oracle.py selftest
        checks the oracle itself against DESIGN.md's worked examples and
        hand-derived bias-scaling values; prints TAP lines, no plan line.
    oracle.py gen-shard DIR --seed S --count K
        writes DIR/cases.txt (one case a line, see write_cases) and
        DIR/input.bin (every case's input tensor, back to back).
    oracle.py check-shard DIR OUT STATUS
        recomputes every case and compares with what tests/shard_exec
        wrote (OUT: each case's rank outputs back to back; STATUS: one
        "ok" or "err CODE" line a case); prints mismatches, exits 1 on any.

CLI (used by tests/mpi/kv_replicas.sh):
    oracle.py kv-plan MODEL N OUT
        writes OUT, the plan vLLM's loaders cut MODEL (a `tpload synth`
        HF llama, qwen2 or phi3) by at N shards, kv heads replicated
        when N exceeds them, for check-preshard.

CLI (used by tests/mpi/expert_parallel.sh):
    oracle.py check-ep MODEL PLAN N DIR [--shift K] [--tp T] [--ep-size G]
        checks `-np N preshard --ep` output DIR: every rank holds its
        experts (vLLM's determine_expert_map, see expected_ep) whole,
        stacked expert tensors sliced to them, every other tensor cut as
        PLAN's TP rules say; shard-info.json's expert_parallel map and
        each param's holders with their bytes and XXH3.  --shift K
        expects rank 0's experts moved by K (a negative control); --tp T
        a grid of N / T replicas, --ep-size G (T or N) its group.

CLI (used by tests/mpi_load.sh and tests/mpi_failures.sh):
    oracle.py gen-model OUT --seed S [--layout single|index|mlc]
                        [--tensors K] [--big-mib M] [--mlc-files F]
        writes a random model into directory OUT (model.safetensors; or
        model-*.safetensors + model.safetensors.index.json; or
        tensor-cache.json + params_shard_*.bin with f32-to-bf16 records)
        and OUT/plan.json: every dtype, shard dims 0..3, fused segments
        (multiples of 12, so N = 1..4 divide), replicated, scale_bias
        (F16/BF16/F32/F64, special values) and zero-size tensors, scalars,
        first-match and '?' globs; K tiny tensors under three glob rules;
        two tensors of about M MiB (dim 0 with segments, dim 1 strided).
    oracle.py check-preshard MODEL PLAN N DIR [--no-bias-scaling]
        reads MODEL with its own readers, computes every rank's tensors
        with shard()/scale_bias() and checks DIR/rank{r}.safetensors
        (names, data order, dtype, shape, bytes, __metadata__) and
        DIR/shard-info.json (shapes, preprocs, dim, segs, bias_scale,
        per-rank nbytes and XXH3 from the system libxxhash) and that DIR
        holds nothing else.  Exits 1 at the first mismatch, naming rank
        and tensor on stderr ("# ..." lines).
    oracle.py check-report MODEL PLAN N REPORT [--no-bias-scaling]
        checks `tpload load --json` output: seconds, bytes_read (at least
        the stored tensor bytes), bytes_delivered (= the oracle's total),
        ranks[].rank/host/bytes/peak_rss_bytes/phases.
    oracle.py check-grid MODEL PLAN N TP PP LAYERS DIR [--tied]
        checks the rank files of `-np N preshard --tp TP --pp PP`: every
        global rank (every replica) holds exactly expected_grid's tensors
        of its stage, cut as shard t of TP (names, order, dtype, shape,
        bytes, __metadata__ with its place in the grid).
"""
import argparse
import ctypes
import ctypes.util
import hashlib
import json
import os
import random
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402  (tests/npst.py, the safetensors oracle)

TPL_EPLAN = -10003
TPL_EINDIVISIBLE = -10004

ITEM_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def shard(arr, dim, segs, n, kv=None):
    """Returns the n rank slices of `arr` sharded along `dim` by full
    segment lengths `segs` (None or [] = one segment), MLC's TIR way.
    `kv` (None, or one entry a segment: 0 or None = cut n ways) gives the
    kv heads P of a segment whose heads are replicated, as vLLM's
    QKVParallelLinear (vllm/model_executor/layers/linear.py) does when
    tp_size >= total_num_kv_heads: num_kv_head_replicas = n // P, and
    weight_loader narrows the loaded "k"/"v" weight at shard_rank *
    shard_size with shard_rank = tp_rank // num_kv_head_replicas."""
    if dim < 0 or dim >= arr.ndim:
        raise ValueError("dim %d outside rank %d" % (dim, arr.ndim))
    if not segs:
        segs = [arr.shape[dim]]
    if sum(segs) != arr.shape[dim]:
        raise ValueError("segs %r do not sum to %d" % (segs, arr.shape[dim]))
    kv = list(kv or []) + [0] * len(segs)
    parts = []
    start = 0
    for seg, heads in zip(segs, kv):
        if heads:
            parts.append(_replicated(arr, dim, start, seg, heads, n))
            start += seg
            continue
        if seg % n:
            raise ValueError("segment %d not divisible by %d" % (seg, n))
        piece = np.take(arr, np.arange(start, start + seg), axis=dim)
        shape = arr.shape[:dim] + (n, seg // n) + arr.shape[dim + 1:]
        piece = piece.reshape(shape)
        parts.append(np.moveaxis(piece, dim, 0))
        start += seg
    full = np.concatenate(parts, axis=1 + dim)
    return [np.ascontiguousarray(full[r]) for r in range(n)]


def _replicated(arr, dim, start, seg, heads, n):
    """Segment [start, start + seg) of `arr` along `dim` as [n, ...]: its
    `heads` kv heads, each repeated for the n // heads consecutive ranks
    of vLLM's shard_rank = tp_rank // num_kv_head_replicas."""
    if n % heads or seg % heads:
        raise ValueError("segment %d: %d kv heads do not divide it or N=%d"
                         % (seg, heads, n))
    replicas = n // heads
    ranks = []
    for tp_rank in range(n):
        shard_rank = tp_rank // replicas
        size = seg // heads
        idx = np.arange(start + shard_rank * size, start + (shard_rank + 1)
                        * size)
        ranks.append(np.take(arr, idx, axis=dim))
    return np.stack(ranks, axis=0)


def _bf16_round(f32):
    """float32 array -> bf16 bit patterns (uint16), round to nearest even;
    NaN keeps its sign and upper payload and is made quiet."""
    bits = f32.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16) & 0xFFFF
    nan = np.isnan(f32)
    quiet = ((bits >> 16) | 0x0040) & 0xFFFF
    return np.where(nan, quiet, rounded).astype(np.uint16)


DTYPE_ALIASES = {
    "F32": "F32", "float32": "F32",
    "F64": "F64", "float64": "F64",
    "F16": "F16", "float16": "F16",
    "BF16": "BF16", "bfloat16": "BF16",
}


def scale_bias(raw_bytes, dtype, n):
    """Returns `raw_bytes` (little-endian elements of `dtype`, safetensors
    or MLC name) divided by n as bytes: F32/F64 in their own precision,
    F16 via float32 then rounded to nearest even, BF16 via float32 with
    round-to-nearest-even by bit manipulation.  n == 1: unchanged."""
    dt = DTYPE_ALIASES.get(dtype)
    if dt is None:
        raise ValueError("scale_bias: unsupported dtype %r" % (dtype,))
    raw_bytes = bytes(raw_bytes)
    if n == 1:
        return raw_bytes
    if dt == "F32":
        a = np.frombuffer(raw_bytes, dtype="<f4")
        return (a / np.float32(n)).astype("<f4").tobytes()
    if dt == "F64":
        a = np.frombuffer(raw_bytes, dtype="<f8")
        return (a / np.float64(n)).astype("<f8").tobytes()
    if dt == "F16":
        a = np.frombuffer(raw_bytes, dtype="<f2").astype(np.float32)
        return (a / np.float32(n)).astype("<f2").tobytes()
    u = np.frombuffer(raw_bytes, dtype="<u2").astype(np.uint32) << 16
    f = u.view(np.float32) / np.float32(n)
    return _bf16_round(f.astype(np.float32)).astype("<u2").tobytes()


# ---------------------------------------------------------------- selftest

WORKED = [  # DESIGN.md section 2's table
    ([12], 0, [4, 4, 4], 2, [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]]),
    ([8, 2], 0, [4, 2, 2], 2,
     [[0, 1, 2, 3, 8, 9, 12, 13], [4, 5, 6, 7, 10, 11, 14, 15]]),
    ([3, 4], 1, None, 2, [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]]),
    ([2, 8, 3], 1, [4, 4], 2,
     [list(range(0, 6)) + list(range(12, 18)) + list(range(24, 30))
      + list(range(36, 42)),
      list(range(6, 12)) + list(range(18, 24)) + list(range(30, 36))
      + list(range(42, 48))]),
    ([12], 0, [6, 3, 3], 3, [[0, 1, 6, 9], [2, 3, 7, 10], [4, 5, 8, 11]]),
    ([3, 2], 1, None, 1, [list(range(6))]),
    # kv heads replicated (vLLM), the rows written out by hand: q 8 rows
    # cut 4 ways, k and v 2 kv heads of one row each, every head held by
    # 2 ranks; a separate k_proj [4, 2] of 2 kv heads (2 rows each) at N
    # = 4; one kv head (MQA) at N = 4 = 4 x kv.
    ([12], 0, [8, 2, 2], 4, [[0, 1, 8, 10], [2, 3, 8, 10], [4, 5, 9, 11],
                             [6, 7, 9, 11]], [0, 2, 2]),
    ([4, 2], 0, None, 4, [[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7],
                          [4, 5, 6, 7]], [2]),
    ([6], 0, [4, 1, 1], 4, [[0, 4, 5], [1, 4, 5], [2, 4, 5], [3, 4, 5]],
     [0, 1, 1]),
]

# (dtype, input bit patterns, n, expected bit patterns), derived by hand:
#  bf16 1.0 = 0x3f80; /3 in f32 = 0x3eaaaaab -> low half 0xaaab > 0x8000,
#  round up -> 0x3eab.  bf16 0x3f81 (1.0078125) /2 = 0x3f010000 exactly
#  -> 0x3f01.  0x4040 (3.0) / 2 = 1.5 = 0x3fc0.  bf16 0x3f83 / 3 in f32:
#  1.0234375/3 = 0.341145833.. = 0x3eaeaaab -> 0x3eaf.  Ties: bf16 0x0001
#  (denormal) / 2 = f32 0x00008000, a tie, to even -> 0x0000; 0x0003 / 2 =
#  0x00018000, tie, to even -> 0x0002.  NaN 0x7fc1 stays 0x7fc1, -inf
#  stays -inf (0xff80).
#  f16 1.0 = 0x3c00; /3 = 0.33325195 (f16 0x3555).  f16 0x0001 / 2 is
#  2^-25, a tie between 0 and 2^-24 -> even -> 0x0000.
SCALE_CASES = [
    ("BF16", [0x3F80], 3, [0x3EAB]),
    ("BF16", [0x3F81, 0x4040, 0x0001, 0x0003, 0x7FC1, 0xFF80], 2,
     [0x3F01, 0x3FC0, 0x0000, 0x0002, 0x7FC1, 0xFF80]),
    ("BF16", [0x3F83], 3, [0x3EAF]),
    ("F16", [0x3C00], 3, [0x3555]),
    ("F16", [0x0001, 0x4000], 2, [0x0000, 0x3C00]),
]


def _tap(ok, name, detail=""):
    print("%s - %s" % ("ok" if ok else "not ok", name))
    if not ok and detail:
        print("# " + detail)
    return ok


def selftest():
    """Checks the oracle itself; prints TAP lines.  Returns 0 or 1."""
    good = True
    for shape, dim, segs, n, want, *kv in WORKED:
        kv = kv[0] if kv else None
        arr = np.arange(int(np.prod(shape))).reshape(shape)
        got = [list(map(int, s.ravel()))
               for s in shard(arr, dim, segs, n, kv)]
        good &= _tap(got == want, "oracle shard %r dim %d segs %r N=%d%s"
                     % (shape, dim, segs, n,
                        " kv %r" % (kv,) if kv else ""), "got %r" % (got,))
    for dt, bits, n, want in SCALE_CASES:
        raw = np.array(bits, dtype="<u2").tobytes()
        got = list(map(int, np.frombuffer(scale_bias(raw, dt, n), "<u2")))
        good &= _tap(got == want, "oracle scale_bias %s %s /%d"
                     % (dt, " ".join("%04x" % b for b in bits), n),
                     "got %s" % [hex(g) for g in got])
    raw = np.array([1.0, -3.0, 1e-300], dtype="<f8").tobytes()
    got = np.frombuffer(scale_bias(raw, "F64", 4), "<f8")
    good &= _tap(list(got) == [0.25, -0.75, 2.5e-301], "oracle scale F64")
    raw = np.array([0x7FC1], "<u2").tobytes()
    good &= _tap(scale_bias(raw, "BF16", 1) == raw, "oracle N=1 unchanged")
    good &= grid_selftest()
    return 0 if good else 1


# ---------------------------------------------------------- shard batches

def _rand_case(rng):
    """One random case: valid most of the time, sometimes indivisible or
    with segs not summing, so shard_exec's refusals are checked too."""
    itemsize = rng.choice([1, 2, 4, 8])
    n = rng.randint(1, 8)
    ndim = rng.randint(1, 4)
    shape = [rng.randint(1, 6) for _ in range(ndim)]
    dim = rng.randrange(ndim)
    nsegs = rng.choice([0, 0, 1, 2, 3, 4])
    segs = [n * rng.randint(1, 4) for _ in range(nsegs)]
    if segs:
        shape[dim] = sum(segs)
    else:
        shape[dim] = n * rng.randint(0, 6)
    if rng.random() < 0.05 and ndim > 1:
        shape[rng.choice([i for i in range(ndim) if i != dim])] = 0
    kv = _rand_kv(rng, n, segs, shape, dim)
    roll = rng.random()
    if roll < 0.08 and n > 1:  # indivisible
        if segs:
            j = rng.randrange(len(segs))
            segs[j] += 1
            shape[dim] += 1
        else:
            shape[dim] = n * rng.randint(0, 5) + rng.randint(1, n - 1)
    elif roll < 0.12 and segs:  # segs not summing to shape[dim]
        shape[dim] += n
    nbytes = itemsize * int(np.prod(shape))
    chunk = rng.randint(1, max(1, nbytes)) if nbytes else 1
    if rng.random() < 0.3:
        chunk = rng.randint(1, 7)
    return {"shape": shape, "itemsize": itemsize, "dim": dim, "segs": segs,
            "n": n, "chunk": chunk, "kv": kv}


def _rand_kv(rng, n, segs, shape, dim):
    """A quarter of the cases at N > 1 replicate one segment's heads: P
    a proper divisor of N (rarely one that is not, to be refused), the
    segment P times 1..3 rows (segs and shape[dim] adjusted)."""
    if n == 1 or rng.random() >= 0.25:
        return []
    kv = [0] * max(1, len(segs))
    j = rng.randrange(len(kv))
    heads = rng.choice([d for d in range(1, n) if n % d == 0])
    if rng.random() < 0.05:
        heads = rng.choice([d for d in range(2, n + 2) if n % d] or [heads])
    kv[j] = heads
    seg = heads * rng.randint(1, 3)
    if segs:
        shape[dim] += seg - segs[j]
        segs[j] = seg
    else:
        shape[dim] = seg
    return kv


def write_cases(d, seed, count):
    """Writes DIR/cases.txt and DIR/input.bin.  Each line of cases.txt:
      ndim s0 .. s{ndim-1} itemsize dim nsegs seg0 .. nkv kv0 .. N chunk
      offset nbytes
    where offset/nbytes locate the case's input tensor in input.bin and
    chunk is the window size shard_exec gathers with."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    os.makedirs(d, exist_ok=True)
    offset = 0
    with open(os.path.join(d, "cases.txt"), "w") as ct, \
            open(os.path.join(d, "input.bin"), "wb") as ib:
        for _ in range(count):
            c = _rand_case(rng)
            nbytes = c["itemsize"] * int(np.prod(c["shape"]))
            ib.write(nrng.integers(0, 256, nbytes, dtype=np.uint8).tobytes())
            fields = ([len(c["shape"])] + c["shape"]
                      + [c["itemsize"], c["dim"], len(c["segs"])] + c["segs"]
                      + [len(c["kv"])] + c["kv"]
                      + [c["n"], c["chunk"], offset, nbytes])
            ct.write(" ".join(map(str, fields)) + "\n")
            offset += nbytes


def read_cases(d):
    """Parses DIR/cases.txt back into dicts (see write_cases)."""
    cases = []
    with open(os.path.join(d, "cases.txt")) as ct:
        for line in ct:
            v = list(map(int, line.split()))
            ndim = v[0]
            shape, rest = v[1:1 + ndim], v[1 + ndim:]
            itemsize, dim, nsegs = rest[0], rest[1], rest[2]
            segs, rest = rest[3:3 + nsegs], rest[3 + nsegs:]
            kv, rest = rest[1:1 + rest[0]], rest[1 + rest[0]:]
            cases.append({"shape": shape, "itemsize": itemsize, "dim": dim,
                          "segs": segs, "kv": kv, "n": rest[0],
                          "chunk": rest[1], "offset": rest[2],
                          "nbytes": rest[3]})
    return cases


def _expected_status(c):
    segs = c["segs"] or [c["shape"][c["dim"]]]
    kv = list(c["kv"]) + [0] * len(segs)
    if c["segs"] and sum(segs) != c["shape"][c["dim"]]:
        return TPL_EPLAN
    if any(h and c["n"] % h for h in kv[:len(segs)]):
        return TPL_EPLAN
    if any(s % (h or c["n"]) for s, h in zip(segs, kv)):
        return TPL_EINDIVISIBLE
    return 0


def check_cases(d, out_path, status_path):
    """Compares shard_exec's output with the oracle; returns mismatches."""
    cases = read_cases(d)
    inp = open(os.path.join(d, "input.bin"), "rb").read()
    out = open(out_path, "rb").read()
    status = open(status_path).read().split("\n")
    pos, bad = 0, 0
    for i, c in enumerate(cases):
        want = _expected_status(c)
        got = status[i].split() if i < len(status) else ["missing"]
        desc = ("case %d: shape %r itemsize %d dim %d segs %r kv %r N=%d "
                "chunk %d" % (i, c["shape"], c["itemsize"], c["dim"],
                              c["segs"], c["kv"], c["n"], c["chunk"]))
        if want != 0:
            if got != ["err", str(want)]:
                print("# %s: expected err %d, shard_exec said %r"
                      % (desc, want, got))
                bad += 1
            continue
        if got != ["ok"]:
            print("# %s: shard_exec said %r" % (desc, got))
            bad += 1
            continue
        raw = inp[c["offset"]:c["offset"] + c["nbytes"]]
        arr = np.frombuffer(raw, ITEM_DTYPES[c["itemsize"]]).reshape(
            c["shape"])
        for r, s in enumerate(shard(arr, c["dim"], c["segs"], c["n"],
                                    c["kv"])):
            exp = s.tobytes()
            gotb = out[pos:pos + len(exp)]
            pos += len(exp)
            if gotb != exp:
                print("# %s: rank %d differs (%d bytes expected, got %r...)"
                      % (desc, r, len(exp), gotb[:16]))
                bad += 1
                break
    if bad == 0 and pos != len(out):
        print("# shard_exec wrote %d bytes, expected %d" % (len(out), pos))
        bad += 1
    return bad


# ------------------------------------------------------ whole-model oracle
#
# gen-model writes a random checkpoint in one of three layouts plus a
# plan.json naming every tensor's strategy; check-preshard reads the model
# back with its own readers (npst for safetensors, plain json for the index
# and the MLC cache), applies the plan with its own glob, shard() and
# scale_bias(), and compares a preshard output directory with that;
# check-report does the same for `load --json`'s byte counts.

ST_ITEM = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
           "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4,
           "F32": 4, "F64": 8, "I64": 8, "U64": 8}
# DESIGN.md section 2's MLC dtype names.
MLC_NAME = {"F16": "float16", "BF16": "bfloat16", "F32": "float32",
            "F64": "float64", "I8": "int8", "U8": "uint8", "I16": "int16",
            "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64",
            "U64": "uint64", "BOOL": "bool", "F8_E4M3": "float8_e4m3fn",
            "F8_E5M2": "float8_e5m2"}
ST_FROM_MLC = {v: k for k, v in MLC_NAME.items()}

# (name, dtype, shape, strategy) of the fixed part of every generated
# model.  Strategy: ("shard", dim, segs or None, func_name or None),
# ("scale",), ("rep",) (an explicit replicate rule) or None (no rule
# matches: replicated).  Every segment is a multiple of 12, so N = 1, 2,
# 3, 4 all divide.  "X" in a shape is a free extent drawn from the seed.
CORE = [
    ("model.layers.0.attn.qkv.weight", "BF16", [48, "X"],
     ("shard", 0, [24, 12, 12], "_shard_qkv")),
    ("model.layers.0.attn.o.weight", "F16", ["X", 24],
     ("shard", 1, None, "_shard_o")),
    ("model.layers.0.mlp.gate_up.weight", "F32", [48, "X"],
     ("shard", 0, [24, 24], "_shard_gate_up")),
    ("model.layers.0.mlp.down.weight", "F64", ["X", 36],
     ("shard", 1, [12, 24], None)),
    ("t.i8.d2", "I8", [3, "X", 24], ("shard", 2, [12, 12], None)),
    ("t.u8.d0", "U8", [36], ("shard", 0, None, None)),
    ("t.i16.d1", "I16", [2, 12, "X"], ("shard", 1, None, "_shard_i16")),
    ("t.u16.d0", "U16", [12, "X"], ("shard", 0, [12], None)),
    ("t.i32.d3", "I32", [2, "X", 2, 24], ("shard", 3, [12, 12], None)),
    ("t.u32.d1", "U32", ["X", 24], ("shard", 1, [12, 12], None)),
    ("t.i64.d0", "I64", [24, "X"], ("shard", 0, None, None)),
    ("t.u64.d2", "U64", [2, "X", 12], ("shard", 2, None, None)),
    ("t.bool.d1", "BOOL", ["X", 36], ("shard", 1, [12, 12, 12], None)),
    ("t.f8e4m3.d0", "F8_E4M3", [24, "X"], ("shard", 0, [12, 12], None)),
    ("t.f8e5m2.d1", "F8_E5M2", ["X", 24], ("shard", 1, None, None)),
    ("t.qkv.bias", "F32", [48], ("shard", 0, [24, 12, 12], "_shard_qkv")),
    ("t.manysegs", "F16", ["X", 120], ("shard", 1, [12] * 10, None)),
    ("t.empty.rows", "F32", [0, 24], ("shard", 1, None, None)),
    ("t.empty.d0", "BF16", [0], ("shard", 0, None, None)),
    ("t.empty.mid", "I32", [12, 0, 2], ("shard", 0, [12], None)),
    ("t.empty.segs", "F16", [24, 0], ("shard", 0, [12, 12], None)),
    ("model.norm.weight", "BF16", [16], ("rep",)),
    ("lm_head.weight", "F16", [24, "X"], ("rep",)),
    ("t.f32.rep", "F32", ["X", 5], ("rep",)),
    ("t.scalar.f64", "F64", [], ("rep",)),
    ("t.scalar.i8", "I8", [], None),
    ("t.odd", "U8", [7, 5], None),
    ("t.empty.rep", "U16", [3, 0], None),
    ("\u5c42.0.\u504f\u7f6e", "F32", [3], None),
    ("b.f32", "F32", [24], ("scale",)),
    ("b.f64", "F64", [7], ("scale",)),
    ("b.f16", "F16", [13], ("scale",)),
    ("b.bf16", "BF16", [12], ("scale",)),
    ("b.empty", "F32", [0], ("scale",)),
    ("b.scalar", "BF16", [], ("scale",)),
    # first match wins: "g.first" meets its replicate rule before "g.*"
    ("g.first", "F32", [12], ("rep",)),
    ("g.second", "F32", [12, 2], ("glob",)),
    ("g.x", "U8", [24], ("glob",)),
    # '?' is one character: "q1.w" matches "q?.w", "q12.w" does not
    ("q1.w", "I16", [2, 12], ("glob",)),
    ("q12.w", "I16", [3, 5], None),
]
GLOB_RULES = [{"match": "g.*", "dim": 0, "name": "_shard_g"},
              {"match": "q?.w", "dim": 1}]
# Stored as "f32-to-bf16" in the MLC layout (bf16 values either way).
F32_TO_BF16 = ("model.layers.0.mlp.gate_up.weight", "b.f32", "t.f32.rep")

# Hand-picked bias values (bit patterns): ties, subnormals, quiet NaNs
# with payloads, infinities, extremes; the rest of a bias is random.
SPECIAL_BITS = {
    "F16": ("<u2", [0x0001, 0x0003, 0x3C00, 0x3555, 0x7BFF, 0x7C00, 0xFC00,
                    0x7E01, 0xFE00, 0x8001, 0x0400, 0x0000, 0x8000]),
    "BF16": ("<u2", [0x0001, 0x0003, 0x3F80, 0x3F81, 0x3F83, 0x7FC1, 0xFF80,
                     0x7F7F, 0x8001, 0x0080, 0x0000, 0x8000]),
    "F32": ("<u4", [0x00000001, 0x00000003, 0x3F800000, 0x7F7FFFFF,
                    0x7F800000, 0xFF800000, 0x7FC00001, 0x80000001,
                    0x00800000, 0x00000000, 0x80000000, 0x40400000]),
    "F64": ("<u8", [0x0000000000000001, 0x3FF0000000000000,
                    0x7FF8000000000001, 0xFFF0000000000000,
                    0x7FEFFFFFFFFFFFFF, 0x8000000000000000,
                    0x4008000000000000]),
}


def _numel(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def _random_raw(rng, dtype, shape):
    """Random bytes for a tensor (booleans are 0 or 1)."""
    n = _numel(shape) * ST_ITEM[dtype]
    if dtype == "BOOL":
        return rng.integers(0, 2, n, dtype=np.uint8).tobytes()
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


def _bias_raw(rng, dtype, count):
    """A bias: the special values first, then random normal values."""
    npdt, bits = SPECIAL_BITS[dtype]
    head = np.array(bits[:count], dtype=npdt).tobytes()
    rest = count - min(count, len(bits))
    vals = (rng.standard_normal(rest) * 10).astype(np.float32)
    if dtype == "F16":
        tail = vals.astype("<f2").tobytes()
    elif dtype == "BF16":
        tail = _bf16_round(vals).astype("<u2").tobytes()
    elif dtype == "F32":
        tail = vals.astype("<f4").tobytes()
    else:
        tail = (rng.standard_normal(rest) * 10).astype("<f8").tobytes()
    return head + tail


def _bf16_as_f32(u16_bytes):
    """Decodes bf16 bit patterns to float32 bytes (f32 bits = u16 << 16)."""
    u = np.frombuffer(u16_bytes, dtype="<u2").astype("<u4") << 16
    return u.astype("<u4").tobytes()


def _core_tensor(rng, name, dtype, shape, how):
    """One tensor dict: name, dtype, shape, raw (decoded bytes), bf16 (the
    bf16 bit patterns when the MLC layout stores it as f32-to-bf16)."""
    shape = [int(rng.integers(1, 4)) if d == "X" else d for d in shape]
    t = {"name": name, "dtype": dtype, "shape": shape, "bf16": None}
    if name in F32_TO_BF16:
        if how == ("scale",):
            f = np.frombuffer(_bias_raw(rng, "F32", _numel(shape)), "<f4")
            t["bf16"] = _bf16_round(f.copy()).astype("<u2").tobytes()
        else:
            t["bf16"] = _random_raw(rng, "BF16", shape)
        t["raw"] = _bf16_as_f32(t["bf16"])
    elif how == ("scale",):
        t["raw"] = _bias_raw(rng, dtype, _numel(shape))
    else:
        t["raw"] = _random_raw(rng, dtype, shape)
    return t


def _rule_for(name, how):
    if how is None or how == ("glob",):
        return None
    if how == ("rep",):
        return {"match": name, "replicate": True}
    if how == ("scale",):
        return {"match": name, "scale_bias": True}
    _, dim, segs, fname = how
    rule = {"match": name, "dim": dim}
    if segs:
        rule["segs"] = segs
    if fname:
        rule["name"] = fname
    return rule


def _big_tensors(rng, mib):
    """Two tensors of about `mib` MiB each: rows of BF16 sharded along
    dim 0 with segments, and F32 sharded along dim 1 (strided rows of
    4800 bytes, so window boundaries fall inside rows; bf16 values, so
    the MLC layout stores it as f32-to-bf16, half the size)."""
    rows = max(48, (mib << 20) // (960 * 2) // 48 * 48)
    r2 = max(1, (mib << 20) // (1200 * 4))
    out = []
    for name, dt, shape, how in (
            ("big.rows", "BF16", [rows, 960],
             ("shard", 0, [rows // 2, rows // 4, rows // 4], "_shard_big")),
            ("big.cols", "F32", [r2, 1200],
             ("shard", 1, [600, 300, 300], None))):
        t = {"name": name, "dtype": dt, "shape": shape, "bf16": None,
             "raw": _random_raw(rng, dt, shape)}
        if dt == "F32":
            t["bf16"] = _random_raw(rng, "BF16", shape)
            t["raw"] = _bf16_as_f32(t["bf16"])
        out.append((t, _rule_for(name, how)))
    return out


def _tiny_tensors(rng, count):
    """`count` tiny tensors cycling through shard / replicate / scale_bias,
    covered by three glob rules."""
    data = rng.integers(0, 256, 24 * count, dtype=np.uint8).tobytes()
    out = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            t = {"name": "tiny.%d.s" % i, "dtype": "F16", "shape": [12],
                 "raw": data[24 * i:24 * i + 24]}
        elif kind == 1:
            t = {"name": "tiny.%d.r" % i, "dtype": "U8", "shape": [3],
                 "raw": data[24 * i:24 * i + 3]}
        else:
            t = {"name": "tiny.%d.b" % i, "dtype": "BF16", "shape": [2],
                 "raw": np.array([0x3F80 + i % 64, 0x0003],
                                 "<u2").tobytes()}
        t["bf16"] = None
        out.append(t)
    rules = [{"match": "tiny.*.s", "dim": 0, "name": "_shard_tiny"},
             {"match": "tiny.*.r", "replicate": True},
             {"match": "tiny.*.b", "scale_bias": True}] if count else []
    return out, rules


def make_model(seed, ntiny=0, big_mib=0):
    """(tensors, rules): the tensor dicts of a random model and its plan."""
    rng = np.random.default_rng(seed)
    tensors, rules = [], []
    for name, dtype, shape, how in CORE:
        tensors.append(_core_tensor(rng, name, dtype, shape, how))
        rule = _rule_for(name, how)
        if rule is not None:
            rules.append(rule)
    rules.extend(GLOB_RULES)
    for t, rule in _big_tensors(rng, big_mib) if big_mib else []:
        tensors.append(t)
        rules.append(rule)
    tiny, tiny_rules = _tiny_tensors(rng, ntiny)
    tensors.extend(tiny)
    rules.extend(tiny_rules)
    return tensors, rules


def _st_dict(tensors):
    return {t["name"]: (t["dtype"], t["shape"], t["raw"]) for t in tensors}


def _write_single(out, tensors, rng):
    names = [t["name"] for t in tensors]
    rng.shuffle(names)
    npst.write(os.path.join(out, "model.safetensors"), _st_dict(tensors),
               metadata={"format": "pt"}, header_order=names)


def _write_index(out, tensors, rng):
    nfiles = 3
    fname = "model-%05d-of-%05d.safetensors"
    groups = [[] for _ in range(nfiles)]
    for i, t in enumerate(tensors):
        groups[int(rng.integers(0, nfiles)) if i >= nfiles else i].append(t)
    wmap = {}
    for k, g in enumerate(groups):
        name = fname % (nfiles - k, nfiles)  # written out of sorted order
        npst.write(os.path.join(out, name), _st_dict(g))
        for t in g:
            wmap[t["name"]] = name
    keys = list(wmap)
    rng.shuffle(keys)
    total = sum(len(t["raw"]) for t in tensors)
    with open(os.path.join(out, "model.safetensors.index.json"), "w",
              encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": {k: wmap[k] for k in keys}}, f,
                  ensure_ascii=False)


def mlc_data_file(out, k, blob, recs):
    """Writes OUT/params_shard_K.bin (`blob`) and returns its record in
    tensor-cache.json, holding `recs`."""
    path = "params_shard_%d.bin" % k
    with open(os.path.join(out, path), "wb") as f:
        f.write(blob)
    # As TVM's writer records it: the whole file's MD5, hexdigest.
    return {"dataPath": path, "format": "raw-shard", "nbytes": len(blob),
            "records": recs, "md5sum": hashlib.md5(blob).hexdigest()}


def _write_mlc(out, tensors, rng, nfiles=2):
    files = []
    for k in range(nfiles):
        group = tensors[k::nfiles]
        blob, recs = bytearray(), []
        for t in group:
            blob += b"\0" * int(rng.integers(0, 2) * rng.integers(1, 64))
            stored = t["bf16"] if t["bf16"] is not None else t["raw"]
            # As MLC writes it: f32-to-bf16 on every record, float32 ones
            # stored as bf16; "raw" (also legal) for the other float32s.
            raw_f32 = t["bf16"] is None and t["dtype"] == "F32"
            recs.append({"name": t["name"], "shape": t["shape"],
                         "dtype": MLC_NAME[t["dtype"]],
                         "format": "raw" if raw_f32 else "f32-to-bf16",
                         "nbytes": len(stored), "byteOffset": len(blob)})
            blob += stored
        files.append(mlc_data_file(out, k, blob, recs))
    with open(os.path.join(out, "tensor-cache.json"), "w",
              encoding="utf-8") as f:
        json.dump({"metadata": {"ParamSize": len(tensors),
                                "ParamBytes": 0, "BitsPerParam": 0},
                   "records": files}, f, ensure_ascii=False)


def gen_model(out, seed, layout, ntiny=0, big_mib=0, mlc_files=2):
    """Writes the model in `layout` (single, index, mlc: over `mlc_files`
    params_shard_*.bin files, tensor i in file i mod mlc_files) and
    plan.json to directory `out`."""
    tensors, rules = make_model(seed, ntiny, big_mib)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed + 1)
    if layout == "mlc":
        _write_mlc(out, tensors, rng, mlc_files)
    else:
        {"single": _write_single, "index": _write_index}[layout](
            out, tensors, rng)
    with open(os.path.join(out, "plan.json"), "w", encoding="utf-8") as f:
        json.dump({"rules": rules}, f, ensure_ascii=False, indent=1)


# --- reading a model back, independently of the generator's tables ---

def _read_st_file(path):
    """[(name, dtype, shape, decoded bytes, stored bytes)] in offset order."""
    tensors, _, order = npst.read(path)
    return [(n, tensors[n][0], list(tensors[n][1]), tensors[n][2],
             len(tensors[n][2])) for n in order]


def _read_index(d):
    with open(os.path.join(d, "model.safetensors.index.json"),
              encoding="utf-8") as f:
        wmap = json.load(f)["weight_map"]
    out = []
    for fname in sorted(set(wmap.values())):
        out.extend(_read_st_file(os.path.join(d, fname)))
    return out


def _read_mlc(d, cache):
    with open(os.path.join(d, cache), encoding="utf-8") as f:
        root = json.load(f)
    out = []
    for frec in root["records"]:
        with open(os.path.join(d, frec["dataPath"]), "rb") as f:
            blob = f.read()
        recs = sorted(frec["records"], key=lambda r: (
            r["byteOffset"], r["nbytes"], r["name"].encode("utf-8")))
        for r in recs:
            raw = blob[r["byteOffset"]:r["byteOffset"] + r["nbytes"]]
            # TVM's loaders decode only float32 records in f32-to-bf16;
            # MLC stamps that format on every record of a cache.
            if r["format"] == "f32-to-bf16" and r["dtype"] == "float32":
                raw = _bf16_as_f32(raw)
            out.append((r["name"], ST_FROM_MLC[r["dtype"]], list(r["shape"]),
                        raw, r["nbytes"]))
    return out


def read_model(path):
    """Every tensor of MODEL in checkpoint order, as (name, dtype, shape,
    decoded bytes, stored bytes)."""
    if os.path.isfile(path):
        return _read_st_file(path)
    if os.path.exists(os.path.join(path, "model.safetensors.index.json")):
        return _read_index(path)
    if os.path.exists(os.path.join(path, "model.safetensors")):
        return _read_st_file(os.path.join(path, "model.safetensors"))
    for cache in ("tensor-cache.json", "ndarray-cache.json"):
        if os.path.exists(os.path.join(path, cache)):
            return _read_mlc(path, cache)
    raise ValueError("%s: not a model this oracle reads" % path)


def glob_match(pattern, name):
    """DESIGN.md section 3's glob: '*' any run (dots too), '?' one
    character, everything else literal."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                 for c in pattern)
    return re.fullmatch(rx, name, re.DOTALL) is not None


def _first_rule(rules, name):
    return next((r for r in rules if glob_match(r["match"], name)), None)


# MLC's quantized params and the func_name suffix each one's shard
# function gets (None: never sharded).
QUANT_SUFFIX = {"q_weight": "_q_weight", "q_scale": "_q_scale",
                "q_calibration_scale": None, "weight_scale_inv": "_scale_inv",
                "activation_scale": "_activation_scale"}


def quant_rule(name, shape, rules, shapes, block):
    """The rule MLC gives quantized param `name` from its base weight's
    rule ("<base>.weight"), or None when `name` is not one or no rule
    names its base.  From mlc-llm python/mlc_llm/quantization/: utils.py
    apply_sharding (same dim and segs, func "<name><suffix>");
    per_tensor_quantization.py (q_scale [1], q_calibration_scale: not
    sharded); block_scale_quantization.py (weight_scale_inv: segs in
    units of weight_block_size[dim]; activation_scale [in / block]: cut
    with a row-parallel weight, whole otherwise).  `shapes`: name -> full
    shape of every tensor; `block`: weight_block_size."""
    stem, _, suffix = name.rpartition(".")
    if not stem or suffix not in QUANT_SUFFIX:
        return None
    base = stem + ".weight"
    rule = _first_rule(rules, base)
    if rule is None:
        return None
    whole = {"match": name, "replicate": True}
    if "dim" not in rule or suffix == "q_calibration_scale" or \
            (suffix == "q_scale" and _numel(shape) == 1):
        return whole
    dim, segs = rule["dim"], rule.get("segs")
    func = rule.get("name", "_shard_%d" % dim) + QUANT_SUFFIX[suffix]
    if suffix in ("weight_scale_inv", "activation_scale"):
        in_dim = len(shapes[base]) - 1 if base in shapes else 1
        unit = block[1] if dim == in_dim else block[0]
        segs = [s // unit for s in segs] if segs else None
        if suffix == "activation_scale":
            if dim != in_dim:
                return whole
            dim = 0
    out = {"match": name, "dim": dim, "name": func}
    if segs:
        out["segs"] = segs
    if rule.get("kv"):  # a kv head's scale rows go where its rows go
        out["kv"] = rule["kv"]
    return out


def mlc_block_size(model):
    """model_config.weight_block_size of an MLC directory (MLC's default
    [128, 128] when absent)."""
    path = os.path.join(model, "mlc-chat-config.json")
    if not os.path.isfile(path):
        return (128, 128)
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    return tuple(cfg.get("model_config", {}).get("weight_block_size",
                                                 (128, 128)))


def bias_family(bias_scaling):
    """A load's bias family from the old boolean (True: mlc, False: the
    --no-bias-scaling alias, whole) or the --bias-policy name."""
    if bias_scaling is True:
        return "mlc"
    if bias_scaling is False:
        return "whole"
    return bias_scaling


def bias_policy(rule, family):
    """What a row-parallel bias matching plan-file `rule` becomes under
    `family` (DESIGN.md's bias scope): whole under whole, else the rule's
    "bias", else mlc's scale (bias / N on every rank, MLC's graph adds each
    copy) or vLLM's whole (RowParallelLinear loads the full bias on every
    rank and adds it on tp_rank 0 only: model_executor/layers/linear.py,
    RowParallelLinear.weight_loader and forward)."""
    if family == "whole":
        return "whole"
    return rule.get("bias") or ("scale" if family == "mlc" else "whole")


def bias_ranks(raw, dtype, n, policy):
    """The n byte strings the ranks hold of a bias under `policy`."""
    if policy == "scale":
        return [scale_bias(raw, dtype, n)] * n
    if policy == "rank0":
        return [bytes(raw)] + [bytes(len(raw))] * (n - 1)
    return [bytes(raw)] * n


def expected_shards(model, rules, n, bias_scaling=True, block=(128, 128)):
    """For every tensor of `model` (read_model's list) under `rules`: a dict
    with name, dtype, full shape, kind (shard / scale / rep), rule,
    rank_shape and ranks (n byte strings: what each rank must hold), and
    for a row-parallel bias its policy.  `bias_scaling` is the family
    (bias_family).  Quantized MLC params take their rule from their base
    weight's (quant_rule)."""
    family = bias_family(bias_scaling)
    out = []
    shapes = {t[0]: t[2] for t in model}
    for name, dtype, shape, raw, stored in model:
        rule = quant_rule(name, shape, rules, shapes, block) or \
            _first_rule(rules, name)
        if rule is not None and rule.get("skip"):
            continue  # expected absent: a layer left out (--skip-mtp)
        e = {"name": name, "dtype": dtype, "shape": shape, "rule": rule,
             "rank_shape": list(shape), "stored": stored}
        if rule is not None and "dim" in rule:
            arr = np.frombuffer(raw, ITEM_DTYPES[ST_ITEM[dtype]])
            parts = shard(arr.reshape(shape), rule["dim"], rule.get("segs"),
                          n, rule.get("kv"))
            e["kind"] = "shard"
            e["rank_shape"] = list(parts[0].shape)
            e["ranks"] = [p.tobytes() for p in parts]
        elif rule is not None and (rule.get("scale_bias") or "bias" in rule):
            e["kind"] = "scale"
            e["policy"] = bias_policy(rule, family)
            e["ranks"] = bias_ranks(raw, dtype, n, e["policy"])
        else:
            e["kind"] = "rep"
            e["ranks"] = [raw] * n
        out.append(e)
    return out


# ------------------------------------- vLLM's plan for kv heads < N
#
# The rules vLLM's loaders cut `tpload synth`'s HF llama, qwen2 and phi3
# checkpoints by (vllm/model_executor/models/llama.py, qwen2.py, phi3.py
# build on llama's LlamaAttention / LlamaMLP): q/k/v through
# QKVParallelLinear (layers/linear.py), o_proj and down_proj
# RowParallelLinear (cut along their inputs), gate/up through
# MergedColumnParallelLinear, embeddings, norms and lm_head whole here
# (tpload does not cut the vocabulary).  When N >= the kv heads, each k
# and v head goes to N / kv consecutive ranks ("kv": the heads of each
# replicated segment, see shard()).  The func_names are the ones
# tpload's presets give (DESIGN.md section 3), checked in shard-info.


def vllm_kv_rules(cfg, n):
    """Oracle rules for a synth llama / qwen2 / phi3 config at N = n."""
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // h
    inter = cfg["intermediate_size"]
    rep_kv = kv if n > kv else 0  # tp_size >= total_num_kv_heads
    a = "*.self_attn."
    rules = [{"match": a + "qkv_proj.weight", "name": "_shard_qkv", "dim": 0,
              "segs": [h * d, kv * d, kv * d], "kv": [0, rep_kv, rep_kv]},
             {"match": a + "o_proj.weight", "name": "_shard_o", "dim": 1},
             {"match": "*.mlp.gate_up_proj.weight", "name": "_shard_mlp_up",
              "dim": 0, "segs": [inter, inter]},
             {"match": "*.mlp.down_proj.weight", "name": "_shard_mlp_down",
              "dim": 1}]
    if cfg["model_type"] != "phi3":
        rules = rules[1:2]
        for p in ("q", "k", "v"):
            k = [rep_kv] if p != "q" else None
            rules += [{"match": a + p + "_proj.weight", "name": "_shard_" + p,
                       "dim": 0, "kv": k},
                      {"match": a + p + "_proj.bias",
                       "name": "_shard_" + p + "_bias", "dim": 0, "kv": k}]
        rules += [{"match": "*.mlp.%s_proj.weight" % p,
                   "name": "_shard_" + p, "dim": dim}
                  for p, dim in (("gate", 0), ("up", 0), ("down", 1))]
    return rules


def write_kv_plan(model, n, out):
    """Writes vllm_kv_rules for MODEL's config.json at N = n as a plan
    file for check-preshard."""
    with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"rules": vllm_kv_rules(cfg, n)}, f, indent=1)


# ------------------------------------------------- grid (TP x PP x DP)
#
# Written from MLC LLM's source, not from src/topology.c:
# mlc-llm python/mlc_llm/model/llama/llama_model.py, LlamaForCausalLM
# _set_pp (layer i -> [i // (L // P)], model.norm.weight -> [P - 1],
# model.embed_tokens.weight and untied lm_head.weight -> list(range(P)));
# LlamaConfig.__post_init__ (refuses P <= 0 or P > L); and
# python/mlc_llm/interface/compile.py
# _apply_preproc_to_params_and_check_pipeline ([0] for every param when
# P == 1, an assertion for a param without stages otherwise).  A P that
# does not divide L is refused: _set_pp would name stage P for the last
# layers, which no worker group has.

def mlc_pipeline_stages(name, layers, pp, tied):
    """The "pipeline_stages" list MLC writes for param `name`; raises
    ValueError where MLC (or tpload, for P not dividing L) refuses."""
    if pp < 1 or pp > layers:
        raise ValueError("pipeline_parallel_stages %d outside 1..%d"
                         % (pp, layers))
    if layers % pp:
        raise ValueError("%d layers do not split over %d stages"
                         % (layers, pp))
    if pp == 1:
        return [0]
    m = re.fullmatch(r"model\.layers\.([0-9]+)\..*", name, re.DOTALL)
    stage_of_layer = np.repeat(np.arange(pp), layers // pp)
    if m and int(m.group(1)) < layers:
        return [int(stage_of_layer[int(m.group(1))])]
    if name == "model.norm.weight":
        return [pp - 1]
    if name == "model.embed_tokens.weight" or \
            (name == "lm_head.weight" and not tied):
        return list(range(pp))
    raise ValueError("%s: MLC assigns no pipeline stage" % name)


def grid_coords(n, tp, pp):
    """(d, p, t) of every global rank 0..n-1: rank = (d * P + p) * T + t,
    i.e. row-major over the shape (D, P, T)."""
    if tp < 1 or pp < 1 or n % (tp * pp):
        raise ValueError("-np %d is not a multiple of --tp %d x --pp %d"
                         % (n, tp, pp))
    idx = np.unravel_index(np.arange(n), (n // (tp * pp), pp, tp))
    return [tuple(int(a[r]) for a in idx) for r in range(n)]


def expected_grid(model, rules, tp, pp, dp, layers, tied=False,
                  bias_scaling=True, block=(128, 128)):
    """What every global rank of a world of tp * pp * dp ranks must hold:
    a list (one per rank) of (name, dtype, rank_shape, bytes) in
    checkpoint order -- the tensors of its stage (mlc_pipeline_stages),
    each cut as shard t of tp (expected_shards with n = tp)."""
    exp = expected_shards(model, rules, tp, bias_scaling, block)
    stages = {e["name"]: mlc_pipeline_stages(e["name"], layers, pp, tied)
              for e in exp}
    out = []
    for d, p, t in grid_coords(tp * pp * dp, tp, pp):
        out.append([(e["name"], e["dtype"], e["rank_shape"], e["ranks"][t])
                    for e in exp if p in stages[e["name"]]])
    return out


def _grid_model():
    """A 4-layer llama-like model of uint8 tensors filled 0,1,2,...:
    embed [4,2], per layer w [4] (sharded dim 0) and n [2] (replicated),
    norm [2], lm_head [4,2]."""
    names = ["model.embed_tokens.weight"]
    for i in range(4):
        names += ["model.layers.%d.w" % i, "model.layers.%d.n" % i]
    names += ["model.norm.weight", "lm_head.weight"]
    model = []
    for k, name in enumerate(names):
        shape = [2] if name.endswith((".n", "norm.weight")) else \
            [4] if name.endswith(".w") else [4, 2]
        raw = (np.arange(_numel(shape), dtype=np.uint8) + 16 * k).tobytes()
        model.append((name, "U8", shape, raw, len(raw)))
    return model


def grid_selftest():
    """Checks grid_coords, mlc_pipeline_stages and expected_grid on hand
    tables (TAP lines).  Returns True when all pass."""
    good = _tap(grid_coords(8, 2, 2) == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1),
        (1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1)], "oracle grid TP2xPP2xDP2")
    good &= _tap(grid_coords(4, 1, 4) == [(0, p, 0) for p in range(4)],
                 "oracle grid TP1xPP4")
    good &= _tap([mlc_pipeline_stages("model.layers.%d.x" % i, 32, 4, False)
                  for i in (0, 7, 8, 31)] == [[0], [0], [1], [3]],
                 "oracle stages L=32 P=4")
    for layers, pp in ((30, 4), (3, 4)):
        try:
            mlc_pipeline_stages("model.norm.weight", layers, pp, False)
            good &= _tap(False, "oracle refuses L=%d P=%d" % (layers, pp))
        except ValueError:
            good &= _tap(True, "oracle refuses L=%d P=%d" % (layers, pp))
    rules = [{"match": "*.w", "dim": 0}, {"match": "*_head.weight", "dim": 0},
             {"match": "*embed*", "dim": 0}]
    held = expected_grid(_grid_model(), rules, 2, 2, 2, 4)
    names = [[h[0] for h in rank] for rank in held]
    stage1 = ["model.embed_tokens.weight", "model.layers.2.w",
              "model.layers.2.n", "model.layers.3.w", "model.layers.3.n",
              "model.norm.weight", "lm_head.weight"]
    good &= _tap(names[3] == stage1, "oracle grid rank 3 holds stage 1",
                 "got %r" % names[3])
    # rank 5 = (d1, p0, t1): layer 0's w (tensor 1) is 16..19 -> shard 1
    # of 2 is 18 19
    w0 = next(h for h in held[5] if h[0] == "model.layers.0.w")
    good &= _tap(list(w0[3]) == [18, 19] and w0[2] == [2],
                 "oracle grid rank 5 holds shard 1 of layer 0",
                 "got %r" % (w0,))
    good &= _tap(held[:4] == held[4:], "oracle grid replicas identical")
    return bool(good)


_XXH = None


def xxh3_hex(data):
    """XXH3-64 of `data` as 16 lowercase hex digits, from the system's
    reference libxxhash (not tpload's code)."""
    global _XXH
    if _XXH is None:
        lib = ctypes.CDLL(ctypes.util.find_library("xxhash")
                          or "libxxhash.so.0")
        _XXH = lib.XXH3_64bits
        _XXH.restype = ctypes.c_uint64
        _XXH.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return "%016x" % _XXH(bytes(data), len(data))


class Mismatch(Exception):
    """The first difference found; its message names rank and tensor."""


def _same(what, want, got):
    if want != got:
        raise Mismatch("%s: expected %r, found %r" % (what, want, got))


def _check_rank_file(path, r, meta_want, held):
    """Rank r's file holds exactly `held` ((name, dtype, rank_shape,
    bytes) in order) with __metadata__ `meta_want` and a "fingerprint",
    whose value _check_fingerprint holds to the other files'.  Returns
    the fingerprint."""
    try:
        tensors, meta, order = npst.read(path)
    except (OSError, ValueError) as e:
        raise Mismatch("rank %d: %s: unreadable: %s" % (r, path, e))
    meta = dict(meta or {})
    fp = meta.pop("fingerprint", None)
    if not isinstance(fp, str) or not fp:
        raise Mismatch("rank %d: %s: __metadata__: expected a "
                       "\"fingerprint\", found %r" % (r, path, fp))
    _same("rank %d: %s: __metadata__" % (r, path), meta_want, meta)
    for i, (name, dt, rank_shape, want) in enumerate(held):
        where = "rank %d: tensor '%s'" % (r, name)
        if i >= len(order) or order[i] != name:
            raise Mismatch("%s: expected at position %d of the data, found "
                           "%r" % (where, i, order[i] if i < len(order)
                                   else "end of file"))
        dtype, shape, raw = tensors[name]
        _same(where + ": dtype", dt, dtype)
        _same(where + ": shape", rank_shape, list(shape))
        if raw != want:
            diff = next(k for k in range(min(len(raw), len(want)))
                        if raw[k] != want[k]) \
                if len(raw) == len(want) else -1
            raise Mismatch("%s: bytes differ (%d expected, %d found, first "
                           "difference at byte %d)"
                           % (where, len(want), len(raw), diff))
    _same("rank %d: tensor count" % r, len(held), len(order))
    return fp


def _check_fingerprint(d, fps):
    """Every rank file of output `d` records the one fingerprint (`fps`,
    rank order), and shard-info.json records it too (the reader refuses
    files of two jobs by it).  Its value is tpload's; only its presence
    and equality are checked."""
    for r, fp in enumerate(fps):
        _same("rank %d: __metadata__ fingerprint (rank 0's)" % r, fps[0], fp)
    path = os.path.join(d, "shard-info.json")
    try:
        with open(path, encoding="utf-8") as f:
            got = json.load(f).get("fingerprint")
    except (OSError, ValueError) as e:
        raise Mismatch("%s: unreadable: %s" % (path, e))
    _same("shard-info.json: fingerprint (the rank files')", fps[0], got)


def _check_param(p, e, n):
    where = "shard-info.json: tensor '%s'" % e["name"]
    _same(where + ": name", e["name"], p.get("name"))
    _same(where + ": dtype", MLC_NAME[e["dtype"]], p.get("dtype"))
    _same(where + ": shape", e["rank_shape"], p.get("shape"))
    _same(where + ": pipeline_stages", [0], p.get("pipeline_stages"))
    _same(where + ": bias", e.get("policy"), p.get("bias"))
    scale = 1.0
    if e.get("policy") == "scale" and n > 1:
        scale = 1.0 / n
    got = p.get("bias_scale")
    if not isinstance(got, (int, float)) or abs(got - scale) > 1e-12:
        raise Mismatch("%s: bias_scale: expected %r, found %r"
                       % (where, scale, got))
    if e["kind"] == "shard":
        rule = e["rule"]
        pre = {"func_name": rule.get("name", "_shard_%d" % rule["dim"]),
               "in_shape": e["shape"], "out_shape": [n] + e["rank_shape"],
               "out_dtype": MLC_NAME[e["dtype"]]}
        segs = rule.get("segs") or [e["shape"][rule["dim"]]]
        kv = list(rule.get("kv") or []) + [0] * len(segs)
        # MLC's compile.py adds the shard preproc only when N > 1.
        _same(where + ": preprocs", [pre] if n > 1 else [], p.get("preprocs"))
        _same(where + ": dim", rule["dim"], p.get("dim"))
        _same(where + ": segs", [s // (h or n) for s, h in zip(segs, kv)],
              p.get("segs"))
        heads = [h for h in kv if h and h < n]
        _same(where + ": kv_replicas", n // min(heads) if heads else None,
              p.get("kv_replicas"))
    else:
        _same(where + ": preprocs", [], p.get("preprocs"))
        _same(where + ": keys dim/segs", [], [k for k in ("dim", "segs")
                                              if k in p])
    ranks = p.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != n:
        raise Mismatch("%s: ranks: expected a list of %d, found %r"
                       % (where, n, ranks))
    for r, rk in enumerate(ranks):
        _same(where + ": ranks[%d].rank" % r, r, rk.get("rank"))
        _same(where + ": ranks[%d].nbytes" % r, len(e["ranks"][r]),
              rk.get("nbytes"))
        _same(where + ": ranks[%d].xxh3" % r, xxh3_hex(e["ranks"][r]),
              rk.get("xxh3"))


def _check_shard_info(path, exp, n, bias_scaling):
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        raise Mismatch("%s: unreadable: %s" % (path, e))
    _same("shard-info.json: tensor_parallel_shards", n,
          info.get("tensor_parallel_shards"))
    family = bias_family(bias_scaling)
    _same("shard-info.json: bias_scaling", family == "mlc",
          info.get("bias_scaling"))
    _same("shard-info.json: bias_policy", family, info.get("bias_policy"))
    params = info.get("params")
    if not isinstance(params, list):
        raise Mismatch("shard-info.json: params: expected a list")
    for i, e in enumerate(exp):
        if i >= len(params):
            raise Mismatch("shard-info.json: tensor '%s': expected at params"
                           "[%d], found the end of the list" % (e["name"], i))
        _check_param(params[i], e, n)
    _same("shard-info.json: params count", len(exp), len(params))


def copied_config(model):
    """What preshard copies beside its rank files: MODEL's config (an MLC
    directory's mlc-chat-config.json, else config.json), when its
    directory has one (the output is a MODEL of its own)."""
    base = model if os.path.isdir(model) else os.path.dirname(model)
    mlc = any(os.path.isfile(os.path.join(base, n))
              for n in ("tensor-cache.json", "ndarray-cache.json"))
    name = "mlc-chat-config.json" if mlc else "config.json"
    return [name] if os.path.isfile(os.path.join(base, name)) else []


def check_preshard(model, plan, n, d, bias_scaling=True):
    """Checks preshard output directory `d`; raises Mismatch."""
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    exp = expected_shards(read_model(model), rules, n, bias_scaling,
                          mlc_block_size(model) if os.path.isdir(model)
                          else (128, 128))
    want = sorted(["rank%d.safetensors" % r for r in range(n)]
                  + ["shard-info.json"] + copied_config(model))
    _same("%s: files" % d, want, sorted(os.listdir(d)))
    _check_fingerprint(d, [
        _check_rank_file(os.path.join(d, "rank%d.safetensors" % r), r,
                         {"tp_rank": str(r), "tp_size": str(n)},
                         [(e["name"], e["dtype"], e["rank_shape"],
                           e["ranks"][r]) for e in exp])
        for r in range(n)])
    _check_shard_info(os.path.join(d, "shard-info.json"), exp, n,
                      bias_scaling)
    return len(exp)


def grid_meta(n, tp, pp, r):
    """A rank file's __metadata__ on a grid: tp_rank / tp_size, and with
    P x D > 1 the global rank and every coordinate (docs/TOPOLOGY.md)."""
    d, p, t = grid_coords(n, tp, pp)[r]
    meta = {"tp_rank": str(t), "tp_size": str(tp)}
    if n // tp > 1:
        meta.update({"rank": str(r), "world_size": str(n),
                     "pp_rank": str(p), "pp_size": str(pp),
                     "dp_rank": str(d), "dp_size": str(n // (tp * pp))})
    return meta


def check_grid(model, plan, n, tp, pp, layers, d, tied=False):
    """Checks every rank file (every replica) of preshard output `d` of an
    -np n --tp tp --pp pp run against expected_grid; raises Mismatch.
    Returns the number of (rank, tensor) pairs checked."""
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    held = expected_grid(read_model(model), rules, tp, pp, n // (tp * pp),
                         layers, tied,
                         block=mlc_block_size(model) if os.path.isdir(model)
                         else (128, 128))
    have = sorted(x for x in os.listdir(d) if x.endswith(".safetensors"))
    _same("%s: rank files" % d,
          sorted("rank%d.safetensors" % r for r in range(n)), have)
    fps = [_check_rank_file(os.path.join(d, "rank%d.safetensors" % r), r,
                            grid_meta(n, tp, pp, r), held[r])
           for r in range(n)]
    if os.path.exists(os.path.join(d, "shard-info.json")):
        _check_fingerprint(d, fps)
    return sum(len(h) for h in held)


def one_layer_frame(rng, hidden, vocab=64):
    """The float32 tensors around the one layer of a hand-made llama-style
    checkpoint: embeddings, final norm, lm_head and layer 0's two norms
    (name -> array, for npst.write)."""
    t = {"model.embed_tokens.weight": rng.random((vocab, hidden), np.float32),
         "model.norm.weight": rng.random(hidden, np.float32),
         "lm_head.weight": rng.random((vocab, hidden), np.float32)}
    for n in ("input_layernorm", "post_attention_layernorm"):
        t["model.layers.0.%s.weight" % n] = rng.random(hidden, np.float32)
    return t


# ------------------------------------------------ expert parallelism
#
# Written from vLLM, not from src/experts.c: vllm-project/vllm
# vllm/model_executor/layers/fused_moe/expert_map_manager.py (54f88b20),
# determine_expert_map with the default "linear" placement: E // size
# experts a rank, the remainder one more each to the first ranks, rank r
# from r * base + min(r, remainder); and FusedMoEParallelConfig, which
# sets the experts' tp_size to 1 under EP: an expert is never cut.  The
# EP group is the TP group (ep_rank = tp_rank) or, with `size` = T x D,
# every replica's TP group: FusedMoEParallelConfig.make (fused_moe/
# config.py) flattens TP across DP, ep_size = dp_size * tp_size and
# ep_rank = dp_rank * tp_size + tp_rank.  A tensor of expert e
# (".experts.<e>." in its name) is held whole by e's owner only; a
# stacked [E, ...] tensor (the names below, from MLC's and HF's model
# files) is sliced along dim 0 to the rank's experts; every other tensor
# is cut as PLAN (the TP rules) says.

EP_STACKED = (r".*\.moe\.e1_e3\..*", r".*\.moe\.e2\..*", r".*\.mlp\.e1_e3\..*",
              r".*\.mlp\.e2\..*", r".*\.mlp\.moe_gate_up_proj\..*",
              r".*\.mlp\.moe_down_proj\..*",
              r".*\.(feed_forward|mlp)\.experts\.(gate_up|down)_proj.*")


def vllm_expert_map(size, rank, experts):
    """determine_expert_map's expert_map: global id -> local id, -1 for
    the experts of other ranks."""
    base, rem = divmod(experts, size)
    local = base + 1 if rank < rem else base
    start = rank * base + min(rank, rem)
    emap = np.full(experts, -1, dtype=np.int32)
    emap[start:start + local] = np.arange(local, dtype=np.int32)
    return emap


def config_experts(model):
    """E from MODEL's config.json or mlc-chat-config.json."""
    for name in ("config.json", "mlc-chat-config.json"):
        path = os.path.join(model, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            for c in (cfg, cfg.get("text_config") or {},
                      cfg.get("model_config") or {}):
                for k in ("n_routed_experts", "num_local_experts",
                          "num_experts"):
                    if isinstance(c.get(k), int) and c[k] > 0:
                        return c[k]
    raise ValueError("%s: no expert count in its config" % model)


def _ep_class(name, rules=()):
    """What --ep makes of tensor `name`: ("whole", e) for expert e's,
    ("stacked", None) for a stack of every expert, None for the rest.  A
    plan rule's "expert" (the first rule matching `name`) decides over
    the names: true, the id the digits its last '*' stands for;
    "stacked".  Written from the plan-file format (DESIGN.md section 3),
    not from src/experts.c."""
    rule = _first_rule(rules, name)
    kind = rule.get("expert") if rule else None
    if kind is True:
        head, _, tail = rule["match"].rpartition("*")
        rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                     for c in head)
        m = re.fullmatch(rx + "([0-9]+)" + re.escape(tail).replace(
            r"\?", "."), name, re.DOTALL)
        return ("whole", int(m.group(1)))
    if kind == "stacked":
        return ("stacked", None)
    m = re.search(r"\.experts\.([0-9]+)\.", name)
    if m:
        return ("whole", int(m.group(1)))
    if any(re.fullmatch(p, name) for p in EP_STACKED):
        return ("stacked", None)
    return None


def _ep_expert(name, rules=()):
    return _ep_class(name, rules) is not None


def ep_rank(r, tp, size):
    """(vLLM's ep_rank, tp_rank) of global rank r (r = d * tp + t, one
    stage) in a group of `size` ranks: tp_rank, or dp_rank * tp_size +
    tp_rank when the group spans the replicas."""
    d, t = divmod(r, tp)
    return (d * tp + t if size > tp else t), t


def expected_ep(model, rules, n, experts, shift=0, tp=None, size=None):
    """What every rank of an --ep job of n ranks (--tp `tp`, default n;
    a group of `size` ranks, default tp) must hold: per rank a list of
    (name, dtype, rank_shape, bytes, raw of the whole) in checkpoint
    order.  `shift` moves rank 0's experts by one (a wrong map, for the
    negative controls)."""
    tp = tp or n
    size = size or tp
    tensors = read_model(model)
    # The experts are never cut under --ep: the plan's rules for them are
    # set aside, so only the other tensors go through the TP oracle.
    exp = {e["name"]: e for e in expected_shards(
        [t for t in tensors if not _ep_expert(t[0], rules)], rules, tp)}
    held = [[] for _ in range(n)]
    for r in range(n):
        er, t = ep_rank(r, tp, size)
        ids = np.nonzero(vllm_expert_map(size, er, experts) >= 0)[0]
        if r == 0 and shift:
            ids = (ids + shift) % experts
        for name, dtype, shape, raw, _ in tensors:
            c = _ep_class(name, rules)
            if c and c[0] == "whole":
                if c[1] in ids:
                    held[r].append((name, dtype, list(shape), raw))
            elif c:
                arr = np.frombuffer(raw, ITEM_DTYPES[ST_ITEM[dtype]])
                part = arr.reshape(shape)[ids]
                held[r].append((name, dtype, list(part.shape),
                                part.tobytes()))
            else:
                e = exp[name]
                held[r].append((name, e["dtype"], e["rank_shape"],
                                e["ranks"][t]))
    return held


def _check_ep_info(path, held, n, experts, order, tp, size):
    with open(path, encoding="utf-8") as f:
        info = json.load(f)
    ep = info.get("expert_parallel") or {}
    _same("shard-info.json: expert_parallel.size", size, ep.get("size"))
    _same("shard-info.json: expert_parallel.experts", experts,
          ep.get("experts"))
    want = []
    for r in range(n):
        er, t = ep_rank(r, tp, size)
        ids = np.nonzero(vllm_expert_map(size, er, experts) >= 0)[0]
        want.append({"rank": r, "shard": t,
                     "experts": [int(ids[0]), len(ids)]})
    _same("shard-info.json: expert_parallel.ranks", want, ep.get("ranks"))
    holders = {}
    for r in range(n):
        for name, _, shape, raw in held[r]:
            holders.setdefault(name, []).append((r, shape, raw))
    params = info.get("params") or []
    _same("shard-info.json: params", [x for x in order if x in holders],
          [p.get("name") for p in params])
    for p in params:
        where = "shard-info.json: tensor '%s'" % p["name"]
        h = holders[p["name"]]
        _same(where + ": shape", h[0][1], p.get("shape"))
        _same(where + ": ranks",
              [(r, len(raw), xxh3_hex(raw)) for r, _, raw in h],
              [(k.get("rank"), k.get("nbytes"), k.get("xxh3"))
               for k in p.get("ranks") or []])


def check_ep(model, plan, n, d, shift=0, tp=None, size=None):
    """Checks preshard --ep output `d` of n ranks (--tp `tp`, default n;
    --ep-size `size`, default tp); raises Mismatch.  Returns the number
    of (rank, tensor) pairs checked."""
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    tp = tp or n
    size = size or tp
    experts = config_experts(model)
    held = expected_ep(model, rules, n, experts, shift, tp, size)
    want = sorted(["rank%d.safetensors" % r for r in range(n)]
                  + ["shard-info.json"] + copied_config(model))
    _same("%s: files" % d, want, sorted(os.listdir(d)))
    _check_fingerprint(d, [
        _check_rank_file(os.path.join(d, "rank%d.safetensors" % r), r,
                         grid_meta(n, tp, 1, r), held[r])
        for r in range(n)])
    _check_ep_info(os.path.join(d, "shard-info.json"), held, n, experts,
                   [t[0] for t in read_model(model)], tp, size)
    return sum(len(h) for h in held)


def _num(obj, key, where, positive=False):
    v = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            (positive and v <= 0) or v < 0:
        raise Mismatch("%s: %s: expected a %s number, found %r"
                       % (where, key, "positive" if positive
                          else "non-negative", v))
    return v


def _check_rounding(text, rep):
    """Durations are rounded to the microsecond and no number is printed
    with more than 15 significant digits (17 digits of binary noise, as
    jansson prints by default, is not what a reader wants)."""
    noisy = re.search(r"[0-9]*\.[0-9]{16,}", text)
    if noisy:
        raise Mismatch("report: a number printed with 16 or more decimals: "
                       "%s" % noisy.group(0))
    durations = [("seconds", rep.get("seconds"))]
    for rk in rep.get("ranks") or []:
        durations.append(("ranks[].seconds", rk.get("seconds")))
        durations += [("phases." + k, v)
                      for k, v in (rk.get("phases") or {}).items()]
    for what, v in durations:
        if isinstance(v, float) and round(v, 6) != v:
            raise Mismatch("report: %s: expected microseconds, found %r"
                           % (what, v))


def check_report(model, plan, n, report, bias_scaling=True):
    """Checks `load --json` output (file `report`); raises Mismatch."""
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    exp = expected_shards(read_model(model), rules, n, bias_scaling)
    per_rank = [sum(len(e["ranks"][r]) for e in exp) for r in range(n)]
    stored = sum(e["stored"] for e in exp)
    try:
        with open(report, encoding="utf-8") as f:
            text = f.read()
        rep = json.loads(text)
    except (OSError, ValueError) as e:
        raise Mismatch("report: not JSON: %s" % e)
    _check_rounding(text, rep)
    _num(rep, "seconds", "report", positive=True)
    _same("report: bytes_delivered", sum(per_rank),
          _num(rep, "bytes_delivered", "report"))
    got = _num(rep, "bytes_read", "report")
    if got < stored:
        raise Mismatch("report: bytes_read: expected at least the %d stored "
                       "tensor bytes, found %d" % (stored, got))
    _same("report: tensor_parallel_shards", n,
          rep.get("tensor_parallel_shards"))
    ranks = rep.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != n:
        raise Mismatch("report: ranks: expected %d entries, found %r"
                       % (n, ranks if not isinstance(ranks, list)
                          else len(ranks)))
    for r, rk in enumerate(ranks):
        where = "report: ranks[%d]" % r
        _same(where + ".rank", r, rk.get("rank"))
        host = rk.get("host")
        if not isinstance(host, str) or not host:
            raise Mismatch("%s.host: expected a name, found %r"
                           % (where, host))
        _same(where + ".bytes", per_rank[r], _num(rk, "bytes", where))
        _num(rk, "peak_rss_bytes", where, positive=True)
        ph = rk.get("phases")
        if not isinstance(ph, dict) or not ph:
            raise Mismatch("%s.phases: expected an object of timings, "
                           "found %r" % (where, ph))
        for k in ph:
            _num(ph, k, where + ".phases")
    return sum(per_rank)


def model_cli(argv):
    """gen-model / check-preshard / check-report / check-grid; returns an
    exit code."""
    ap = argparse.ArgumentParser(prog="oracle.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen-model")
    g.add_argument("out")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--layout", choices=("single", "index", "mlc"),
                   default="single")
    g.add_argument("--tensors", type=int, default=0)
    g.add_argument("--big-mib", type=int, default=0)
    g.add_argument("--mlc-files", type=int, default=2)
    c = sub.add_parser("check-grid")
    for arg in ("model", "plan"):
        c.add_argument(arg)
    for arg in ("n", "tp", "pp", "layers"):
        c.add_argument(arg, type=int)
    c.add_argument("target")
    c.add_argument("--tied", action="store_true")
    c = sub.add_parser("check-ep")
    for arg in ("model", "plan"):
        c.add_argument(arg)
    c.add_argument("n", type=int)
    c.add_argument("target")
    c.add_argument("--shift", type=int, default=0)
    c.add_argument("--tp", type=int, default=0)
    c.add_argument("--ep-size", type=int, default=0)
    for name in ("check-preshard", "check-report"):
        c = sub.add_parser(name)
        c.add_argument("model")
        c.add_argument("plan")
        c.add_argument("n", type=int)
        c.add_argument("target")
        c.add_argument("--no-bias-scaling", action="store_true")
        c.add_argument("--bias-policy", choices=("mlc", "vllm", "whole"))
    a = ap.parse_args(argv)
    if a.cmd == "gen-model":
        gen_model(a.out, a.seed, a.layout, a.tensors, a.big_mib,
                  a.mlc_files)
        return 0
    try:
        if a.cmd == "check-ep":
            k = check_ep(a.model, a.plan, a.n, a.target, a.shift,
                         a.tp or None, a.ep_size or None)
            print("# %s: %d tensors held, over %d ranks, match vLLM's "
                  "expert map" % (a.target, k, a.n))
        elif a.cmd == "check-grid":
            k = check_grid(a.model, a.plan, a.n, a.tp, a.pp, a.layers,
                           a.target, a.tied)
            print("# %s: %d tensors held, over %d ranks, match the oracle"
                  % (a.target, k, a.n))
        elif a.cmd == "check-preshard":
            k = check_preshard(a.model, a.plan, a.n, a.target,
                               a.bias_policy or not a.no_bias_scaling)
            print("# %s: %d tensors x %d ranks match the oracle"
                  % (a.target, k, a.n))
        else:
            k = check_report(a.model, a.plan, a.n, a.target,
                             a.bias_policy or not a.no_bias_scaling)
            print("# report: %d bytes delivered, as the oracle expects" % k)
    except (Mismatch, OSError, ValueError, KeyError) as e:
        sys.stderr.write("# %s: %s\n" % (type(e).__name__, e)
                         if not isinstance(e, Mismatch) else "# %s\n" % e)
        return 1
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] == "selftest":
        return selftest()
    if len(argv) == 6 and argv[0] == "gen-shard" and argv[2] == "--seed" \
            and argv[4] == "--count":
        write_cases(argv[1], int(argv[3]), int(argv[5]))
        return 0
    if len(argv) == 4 and argv[0] == "kv-plan":
        write_kv_plan(argv[1], int(argv[2]), argv[3])
        return 0
    if len(argv) == 4 and argv[0] == "check-shard":
        return 1 if check_cases(argv[1], argv[2], argv[3]) else 0
    if len(argv) >= 1 and argv[0] in ("gen-model", "check-preshard",
                                      "check-report", "check-grid",
                                      "check-ep"):
        return model_cli(argv)
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
