#!/usr/bin/python3
"""http_check.py - what `tpload inspect --json` and `tpload plan` must say
about a model, from the files themselves (oracle.py's reader and shard
math), for the tests that read the same files over HTTP.

    http_check.py inspect MODEL INSPECT_JSON
    http_check.py plan MODEL PLAN N PLAN_JSON

inspect: every tensor in checkpoint order with its name, dtype (MLC's
name), shape and decoded bytes, and the tensor count.  plan: every param
in order with its name and per-rank shape under the rules of PLAN (a plan
file) on N shards.  Exit 0 when they match, else 1 with the first
difference on stderr."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402


def fail(msg):
    sys.stderr.write("# %s\n" % msg)
    return 1


def check_inspect(model, path):
    want = oracle.read_model(model)
    with open(path, encoding="utf-8") as f:
        got = json.load(f)
    if got.get("tensor_count") != len(want):
        return fail("tensor_count: expected %d, found %r"
                    % (len(want), got.get("tensor_count")))
    for w, g in zip(want, got["tensors"]):
        exp = {"name": w[0], "dtype": oracle.MLC_NAME[w[1]],
               "shape": w[2], "bytes": len(w[3])}
        have = {k: g.get(k) for k in exp}
        if have != exp:
            return fail("expected %r, found %r" % (exp, have))
    print("# %d tensors as the files say" % len(want))
    return 0


def check_plan(model, plan, n, path):
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    want = oracle.expected_shards(oracle.read_model(model), rules, n)
    with open(path, encoding="utf-8") as f:
        got = json.load(f)["params"]
    if len(got) != len(want):
        return fail("params: expected %d, found %d" % (len(want), len(got)))
    for w, g in zip(want, got):
        exp = {"name": w["name"], "shape": w["rank_shape"]}
        have = {"name": g.get("name"), "shape": g.get("shape")}
        if have != exp:
            return fail("expected %r, found %r" % (exp, have))
    print("# %d params, per-rank shapes as the oracle cuts them" % len(want))
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "inspect":
        return check_inspect(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "plan":
        return check_plan(argv[1], argv[2], int(argv[3]), argv[4])
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
