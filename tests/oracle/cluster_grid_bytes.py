"""cluster_grid_bytes.py - what each node of a cluster must receive for a
TP x PP x DP grid, from the numpy oracle (oracle.expected_shards for the
cut, oracle.mlc_pipeline_stages for the stages, oracle.grid_coords for
the numbering), never from tpload.

    cluster_grid_bytes.py MODEL PLAN N TP PP LAYERS NODES

N ranks, rank = (d * PP + p) * TP + t (docs/TOPOLOGY.md), placed on
NODES nodes in block order (ranks 0..N/NODES-1 on node 0, ...).  Prints
the JSON object cluster_bytes.py prints (held, unique, others, model,
files; its docstring says what each is), so that `cluster_bytes.py
check` reads it as it reads its own:

  held[k]   the bytes node k's ranks hold, summed over its ranks;
  unique[k] the distinct bytes they hold (a replicated tensor, a tensor
            held by several stages, shard t of several replicas: once);
  others    the distinct bytes nodes 1.. hold together;
  model     the bytes of the model's tensors;
  files     the bytes of MODEL's .safetensors files.

With PP = 1 it is cluster_bytes.py's figure for block placement.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_bytes  # noqa: E402
import oracle  # noqa: E402


def keys_of_rank(exp, stages, coord):
    """The (name, piece) keys rank (d, p, t) holds: piece t of a cut
    tensor, piece 0 of one every rank holds alike."""
    _, p, t = coord
    return {(e["name"], t if e["kind"] == "shard" else 0)
            for e in exp if p in stages[e["name"]]}


def per_node(exp, stages, n, tp, pp, nodes):
    sizes = {e["name"]: [len(b) for b in e["ranks"]] for e in exp}
    held = [0] * nodes
    seen = [set() for _ in range(nodes)]
    for r, coord in enumerate(oracle.grid_coords(n, tp, pp)):
        k = r // (n // nodes)
        keys = keys_of_rank(exp, stages, coord)
        held[k] += sum(sizes[name][t] for name, t in keys)
        seen[k] |= keys

    def size(keys):
        return sum(sizes[name][t] for name, t in keys)
    return held, [size(s) for s in seen], size(set().union(*seen[1:]))


def main(argv):
    if len(argv) != 7:
        sys.stderr.write(__doc__)
        return 64
    model, plan = argv[0], argv[1]
    n, tp, pp, layers, nodes = (int(x) for x in argv[2:])
    if n % (tp * pp) or n % nodes:
        sys.stderr.write("-np %d: not a multiple of TP x PP %d and of %d "
                         "nodes\n" % (n, tp * pp, nodes))
        return 64
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    tensors = oracle.read_model(model)
    exp = oracle.expected_shards(tensors, rules, tp)
    stages = {e["name"]: oracle.mlc_pipeline_stages(e["name"], layers, pp,
                                                    False) for e in exp}
    cluster_bytes.dump(model, tensors, n,
                       *per_node(exp, stages, n, tp, pp, nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
