#!/usr/bin/python3
"""consumer_check.py MODEL PLAN N RANK LIST - checks what tests/lib/consumer.c
wrote for rank RANK of an N-rank `tpload serve` of MODEL under PLAN (LIST:
one "name dtype dtype_id shape nbytes xxh3" line a tensor, tab-separated,
and LIST.bin: the bytes) against the numpy oracle (tests/oracle.py): the
same tensors in checkpoint order, MLC dtype names and their numbers, the
rank's shapes, the bytes, and XXH3 from the system's libxxhash.  Exits 1
at the first mismatch."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

# enum tpl_dtype's values, as include/tpload.h documents them (the ABI).
DTYPE_ID = {"bool": 0, "uint8": 1, "int8": 2, "int16": 3, "uint16": 4,
            "float16": 5, "bfloat16": 6, "int32": 7, "uint32": 8,
            "float32": 9, "float64": 10, "int64": 11, "uint64": 12,
            "float8_e4m3fn": 13, "float8_e5m2": 14}


def main(model, plan, n, rank, listing):
    rules = json.load(open(plan))["rules"]
    exp = oracle.expected_shards(oracle.read_model(model), rules, int(n))
    rank = int(rank)
    lines = open(listing).read().splitlines()
    data = open(listing + ".bin", "rb").read()
    if len(lines) != len(exp):
        sys.exit("expected %d tensors, found %d" % (len(exp), len(lines)))
    pos = 0
    for e, line in zip(exp, lines):
        name, dtype, dtype_id, shape, nbytes, xxh = line.split("\t")
        want = e["ranks"][rank]
        got_shape = [] if shape == "-" else [int(d) for d in shape.split(",")]
        checks = [("name", e["name"], name),
                  ("dtype", oracle.MLC_NAME[e["dtype"]], dtype),
                  ("dtype_id", DTYPE_ID[oracle.MLC_NAME[e["dtype"]]],
                   int(dtype_id)),
                  ("shape", e["rank_shape"], got_shape),
                  ("nbytes", len(want), int(nbytes)),
                  ("bytes", want, data[pos:pos + len(want)]),
                  ("xxh3", oracle.xxh3_hex(want), xxh)]
        for what, w, g in checks:
            if w != g:
                sys.exit("rank %d: tensor '%s': %s: expected %.200r, found "
                         "%.200r" % (rank, e["name"], what, w, g))
        pos += len(want)
    if pos != len(data):
        sys.exit("%d bytes beyond the last tensor" % (len(data) - pos))


if __name__ == "__main__":
    main(*sys.argv[1:])
