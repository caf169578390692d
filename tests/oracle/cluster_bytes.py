"""cluster_bytes.py - what each node of a cluster test must receive, from
the numpy oracle's shards (oracle.expected_shards), never from tpload.

    cluster_bytes.py MODEL PLAN N TP NODES [--map-by node]

N ranks, TP tensor-parallel shards (N / TP replicas, rank = d * TP + t),
placed on NODES nodes in block order (ranks 0..N/NODES-1 on node 0, ...)
or round-robin (rank r on node r % NODES).  Prints one JSON object:

  held[k]   the bytes node k's ranks hold, summed over its ranks: what
            crosses node k's link when every rank receives its own copy;
  unique[k] the distinct bytes node k's ranks hold (a replicated tensor,
            or the same shard t of two replicas, counted once): the least
            that must enter node k when its ranks share what arrives;
  others    the distinct bytes the nodes but node 0 hold, together: the
            least node 0 (rank 0's) must send when nodes relay;
  model     the bytes of the model's tensors;
  files     the bytes of MODEL's files (what one reader fetches whole).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402


def node_of(r, n, nodes, round_robin):
    return r % nodes if round_robin else r // (n // nodes)


def per_node(exp, n, tp, nodes, round_robin):
    held = [0] * nodes
    seen = [set() for _ in range(nodes)]
    for r in range(n):
        k, t = node_of(r, n, nodes, round_robin), r % tp
        for e in exp:
            held[k] += len(e["ranks"][t])
            # every rank of a replicated (or scaled) tensor holds the same
            # bytes; shard t is the same in every replica
            seen[k].add((e["name"], t if e["kind"] == "shard" else 0))
    index = {e["name"]: e for e in exp}

    def size(keys):
        return sum(len(index[name]["ranks"][t]) for name, t in keys)
    unique = [size(seen[k]) for k in range(nodes)]
    return held, unique, size(set().union(*seen[1:]))


def main(argv):
    round_robin = argv[5:] == ["--map-by", "node"]
    if len(argv) not in (5, 7) or (len(argv) == 7 and not round_robin):
        sys.stderr.write(__doc__)
        return 64
    model, plan = argv[0], argv[1]
    n, tp, nodes = int(argv[2]), int(argv[3]), int(argv[4])
    with open(plan, encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    tensors = oracle.read_model(model)
    exp = oracle.expected_shards(tensors, rules, tp)
    held, unique, others = per_node(exp, n, tp, nodes, round_robin)
    files = sum(os.path.getsize(os.path.join(model, f))
                for f in os.listdir(model) if f.endswith(".safetensors"))
    json.dump({"held": held, "unique": unique, "others": others,
               "files": files,
               "model": sum(len(t[3]) for t in tensors)}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
