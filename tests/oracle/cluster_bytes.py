"""cluster_bytes.py - what each node of a cluster test must receive, from
the numpy oracle's shards (oracle.expected_shards), never from tpload,
and the check of a job's link counters against it.

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
  files     the bytes of MODEL's files (what one reader fetches whole);
  ranks     N.

    cluster_bytes.py check NAME MODE BEFORE AFTER WANT [STORE_LOG]

BEFORE and AFTER: lines "NODE RX TX" (n0.., st) of the link counters
around job NAME; WANT: the JSON above.  Prints each link's figures as TAP
comments and exits 1 (the reasons on stderr) unless MODE holds:

  mpi       rank 0 reads: every other node takes in at least its
            distinct bytes and at most 1.03 x them (+256 KiB of MPI's
            and TCP's own); node 0 sends at least `others` and at most
            1.03 x them (+256 KiB): a byte enters a node once;
  mpi-rr    the same, ranks placed round-robin (the chains run node by
            node, so placement changes nothing);
  local     every rank reads its own disk: no other node takes in more
            than 256 KiB;
  url-local every rank fetches from the store: it sends at least what
            the nodes hold, distinct per node; given STORE_LOG (the
            store's nginx access log lines of the job, http_lib.sh's
            format), the payload of its GETs (the bytes their Ranges
            asked, up to 128 ranges a multi-range GET) is at most 1.05
            x what the nodes hold, distinct per node (bytes several
            ranks of a node hold are fetched once there), + every rank's
            read of the files' headers, the multipart framing of the
            rest of their bodies under PART_FRAMING a part, and the
            store's link carried at most the log's bytes (bodies and
            response headers) and their segments' headers (66 bytes a
            1448) + FRAMING a GET + 256 KiB.

A job named url-* with MODE mpi* must have the store send the files once
(1 to 1.03 x); any other job, nothing.

    cluster_bytes.py report NAME REPORT BEFORE AFTER [--want WANT] HOST...

REPORT: job NAME's `load --json`; HOST k: node k's host name.  Its
nodes[] (bytes in and out per host, as the ranks counted them) against
the link counters: each node's link carried at least what the report
says, and no more than that plus 5 % of the link's traffic both ways
(headers, acknowledgements, MPI's own messages) + 256 KiB.  With --want
(the JSON above, rank 0 reading), every node but node 0 also reports
taking in its distinct bytes (1 to 1.03 x), node 0 sending `others`
(1 to 1.03 x).  Exits 1 (the reasons on stderr) when a node breaks it
or is missing.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

SLACK = 256 << 10  # MPI's and TCP's own bytes
FRAMING = 160  # a short answer's packet or two: 66 bytes of Ethernet,
#                IP and TCP headers each
PART_FRAMING = 128  # a multipart part's delimiter and headers (nginx: 113)
# A full TCP segment at MTU 1500 carries 1448 bytes (timestamps on) in a
# 1514-byte frame, and the veth counters count frames: 66 / 1448 of the
# bytes a long answer carries are headers (4.6 %, above the 3 % that
# short answers plus FRAMING had covered).
SEGMENT_HEADERS = 66.0 / 1448


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


def want(argv):
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
    dump(model, tensors, n, *per_node(exp, n, tp, nodes, round_robin))
    return 0


def dump(model, tensors, n, held, unique, others):
    """Prints the JSON object above for MODEL's directory, TENSORS
    (oracle.read_model's) and N ranks from the per-node figures."""
    files = sum(os.path.getsize(os.path.join(model, f))
                for f in os.listdir(model) if f.endswith(".safetensors"))
    json.dump({"held": held, "unique": unique, "others": others,
               "files": files, "ranks": n,
               "model": sum(len(t[3]) for t in tensors)}, sys.stdout)
    print()


def mib(x):
    return "%.2f MiB" % (x / 1048576.0)


def counts(path):
    with open(path, encoding="utf-8") as f:
        return {ln.split()[0]: [int(x) for x in ln.split()[1:]] for ln in f}


def show(name, d, w):
    for k in range(len(w["held"])):
        rx, tx = d["n%d" % k]
        print("# %s: node %d in %s, out %s; its ranks hold %s, %s distinct"
              % (name, k, mib(rx), mib(tx), mib(w["held"][k]),
                 mib(w["unique"][k])))
    if "st" in d:
        print("# %s: store out %s (model files %s: %.2f x)"
              % (name, mib(d["st"][1]), mib(w["files"]),
                 d["st"][1] / float(w["files"])))


def check_relayed(name, mode, d, w):
    """mpi / mpi-rr: the reasons the nodes' intake breaks MODE."""
    bad = []
    for k in range(1, len(w["held"])):
        rx, u = d["n%d" % k][0], w["unique"][k]
        if rx > u + SLACK:
            print("# %s: node %d took in %.2f x its distinct bytes"
                  % (name, k, rx / float(u)))
        if rx < u:
            bad.append("node %d took in %d < its %d distinct bytes"
                       % (k, rx, u))
        if rx > 1.03 * u + SLACK:
            bad.append("node %d took in %d > %d (its distinct bytes)"
                       % (k, rx, u))
    bad += sent_once("node 0 sent", d["n0"][1], w["others"])
    return bad


def ranges(g):
    """The byte ranges an access log line's Range asked for (none: [])"""
    if g[3] == '"-"':
        return []
    return [tuple(int(x) for x in p.split("-"))
            for p in g[3].strip('"')[len("bytes="):].split(",")]


def payload(g):
    """The bytes GET g asked for that it got: a multipart answer's
    ranges, else its body."""
    rs = ranges(g)
    if len(rs) > 1 and g[2] == "206":
        return sum(y - x + 1 for x, y in rs)
    return int(g[4]) if len(rs) < 2 or g[2] != "200" else 0


def check_gets(name, out, w, log):
    """url-local with the store's access log: the reasons its GETs fetch
    more than the ranks' own bytes, or its link more than the GETs."""
    with open(log, encoding="utf-8") as f:
        gets = [ln.split() for ln in f if ln.startswith("GET ")]
    body = sum(int(g[4]) for g in gets)
    sent = sum(int(g[8]) for g in gets)
    pay = sum(payload(g) for g in gets)
    multi = [g for g in gets if len(ranges(g)) > 1 and g[2] == "206"]
    parts = sum(len(ranges(g)) for g in multi)
    framing = sum(int(g[4]) - payload(g) for g in multi)
    need = sum(w["unique"])
    top = 1.05 * need + w["ranks"] * (w["files"] - w["model"]) + SLACK
    print("# %s: the store's GETs: %d (%d multi-range, %d parts), payload "
          "%s (%.3f x the nodes' %s), bodies %s, with headers %s"
          % (name, len(gets), len(multi), parts, mib(pay),
             pay / float(need), mib(need), mib(body), mib(sent)))
    bad = []
    if pay > top:
        bad.append("the GETs' payload %d > 1.05 x the nodes' %d + headers"
                   % (pay, need))
    if framing > PART_FRAMING * parts:
        bad.append("the multipart framing %d > %d x %d parts"
                   % (framing, PART_FRAMING, parts))
    if out > (1 + SEGMENT_HEADERS) * sent + FRAMING * len(gets) + SLACK:
        bad.append("the store's link sent %d > %.3f x its GETs' %d + "
                   "framing" % (out, 1 + SEGMENT_HEADERS, sent))
    return bad


def sent_once(what, got, need):
    """The reasons `got` bytes are not `need` once (3 % + SLACK over)."""
    if got < need:
        return ["%s %d < the %d the others need" % (what, got, need)]
    if got > 1.03 * need + SLACK:
        return ["%s %d > the %d the others need, once" % (what, got, need)]
    return []


def check_store(name, mode, d, w, log=None):
    """The reasons the store's output breaks what job NAME expects."""
    out = d["st"][1] if "st" in d else 0
    if mode == "url-local":
        need = sum(w["unique"])
        bad = [] if out >= need else [
            "the store sent %d < the %d the nodes need" % (out, need)]
        return bad + (check_gets(name, out, w, log) if log else [])
    if name.startswith("url"):
        ok = w["files"] <= out <= 1.03 * w["files"] + SLACK
        return [] if ok else ["the store sent %d bytes, not the model's "
                              "%d once" % (out, w["files"])]
    return [] if out <= SLACK else [
        "the store sent %d bytes to a job reading disks" % out]


def check(argv):
    if len(argv) not in (5, 6):
        sys.stderr.write(__doc__)
        return 64
    name, mode = argv[0], argv[1]
    a, b = counts(argv[2]), counts(argv[3])
    d = {n: (b[n][0] - a[n][0], b[n][1] - a[n][1]) for n in b}
    with open(argv[4], encoding="utf-8") as f:
        w = json.load(f)
    show(name, d, w)
    bad = check_store(name, mode, d, w, argv[5] if len(argv) == 6 else None)
    if mode in ("mpi", "mpi-rr"):
        bad += check_relayed(name, mode, d, w)
    elif mode == "local":
        bad += ["node %d took in %d bytes reading its own disk"
                % (k, d["n%d" % k][0]) for k in range(1, len(w["held"]))
                if d["n%d" % k][0] > SLACK]
    for m in bad:
        sys.stderr.write(m + "\n")
    return 1 if bad else 0


def report_nodes(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 64
    name, hosts, w = argv[0], argv[4:], None
    if hosts[:1] == ["--want"] and len(hosts) > 2:
        with open(hosts[1], encoding="utf-8") as f:
            w = json.load(f)
        hosts = hosts[2:]
    with open(argv[1], encoding="utf-8") as f:
        nodes = {n["host"]: n for n in json.load(f).get("nodes", [])}
    a, b = counts(argv[2]), counts(argv[3])
    bad = []
    for k, host in enumerate(hosts):
        rx, tx = (b["n%d" % k][i] - a["n%d" % k][i] for i in (0, 1))
        n = nodes.get(host)
        if n is None:
            bad.append("node %d (%s) is not in the report" % (k, host))
            continue
        print("# %s: node %d reports in %s, out %s (ranks %s); its link "
              "%s, %s" % (name, k, mib(n["bytes_in"]), mib(n["bytes_out"]),
                          n["ranks"], mib(rx), mib(tx)))
        top = 0.05 * (rx + tx) + SLACK
        for what, got, said in (("in", rx, n["bytes_in"]),
                                ("out", tx, n["bytes_out"])):
            if not said <= got <= said + top:
                bad.append("node %d %s: the report says %d, the link %d "
                           "(allowed %d more)" % (k, what, said, got, top))
        if w is not None:
            bad += reported_once(k, n, w)
    if len(nodes) != len(hosts):
        bad.append("the report has %d nodes, the cluster %d"
                   % (len(nodes), len(hosts)))
    for m in bad:
        sys.stderr.write(m + "\n")
    return 1 if bad else 0


def reported_once(k, n, w):
    """The reasons node k's reported bytes are not the topology's least."""
    if k == 0:
        return sent_once("node 0 reports sending", n["bytes_out"],
                         w["others"])
    u = w["unique"][k]
    if u <= n["bytes_in"] <= 1.03 * u + SLACK:
        return []
    return ["node %d reports taking in %d, its distinct bytes are %d"
            % (k, n["bytes_in"], u)]


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        sys.exit(check(sys.argv[2:]))
    if sys.argv[1:2] == ["report"]:
        sys.exit(report_nodes(sys.argv[2:]))
    sys.exit(want(sys.argv[1:]))
