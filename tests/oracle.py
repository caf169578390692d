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
"""
import os
import random
import sys

import numpy as np

TPL_EPLAN = -10003
TPL_EINDIVISIBLE = -10004

ITEM_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def shard(arr, dim, segs, n):
    """Returns the n rank slices of `arr` sharded along `dim` by full
    segment lengths `segs` (None or [] = one segment), MLC's TIR way."""
    if dim < 0 or dim >= arr.ndim:
        raise ValueError("dim %d outside rank %d" % (dim, arr.ndim))
    if not segs:
        segs = [arr.shape[dim]]
    if sum(segs) != arr.shape[dim]:
        raise ValueError("segs %r do not sum to %d" % (segs, arr.shape[dim]))
    parts = []
    start = 0
    for seg in segs:
        if seg % n:
            raise ValueError("segment %d not divisible by %d" % (seg, n))
        piece = np.take(arr, np.arange(start, start + seg), axis=dim)
        shape = arr.shape[:dim] + (n, seg // n) + arr.shape[dim + 1:]
        piece = piece.reshape(shape)
        parts.append(np.moveaxis(piece, dim, 0))
        start += seg
    full = np.concatenate(parts, axis=1 + dim)
    return [np.ascontiguousarray(full[r]) for r in range(n)]


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
    for shape, dim, segs, n, want in WORKED:
        arr = np.arange(int(np.prod(shape))).reshape(shape)
        got = [list(map(int, s.ravel())) for s in shard(arr, dim, segs, n)]
        good &= _tap(got == want, "oracle shard %r dim %d segs %r N=%d"
                     % (shape, dim, segs, n), "got %r" % (got,))
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
            "n": n, "chunk": chunk}


def write_cases(d, seed, count):
    """Writes DIR/cases.txt and DIR/input.bin.  Each line of cases.txt:
      ndim s0 .. s{ndim-1} itemsize dim nsegs seg0 .. N chunk offset nbytes
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
            cases.append({"shape": shape, "itemsize": itemsize, "dim": dim,
                          "segs": segs, "n": rest[0], "chunk": rest[1],
                          "offset": rest[2], "nbytes": rest[3]})
    return cases


def _expected_status(c):
    segs = c["segs"] or [c["shape"][c["dim"]]]
    if c["segs"] and sum(segs) != c["shape"][c["dim"]]:
        return TPL_EPLAN
    if any(s % c["n"] for s in segs):
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
        desc = ("case %d: shape %r itemsize %d dim %d segs %r N=%d chunk %d"
                % (i, c["shape"], c["itemsize"], c["dim"], c["segs"],
                   c["n"], c["chunk"]))
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
        for r, s in enumerate(shard(arr, c["dim"], c["segs"], c["n"])):
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


def main(argv):
    if len(argv) >= 1 and argv[0] == "selftest":
        return selftest()
    if len(argv) == 6 and argv[0] == "gen-shard" and argv[2] == "--seed" \
            and argv[4] == "--count":
        write_cases(argv[1], int(argv[3]), int(argv[5]))
        return 0
    if len(argv) == 4 and argv[0] == "check-shard":
        return 1 if check_cases(argv[1], argv[2], argv[3]) else 0
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
