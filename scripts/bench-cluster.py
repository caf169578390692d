"""bench-cluster.py - the table of scripts/bench-cluster.sh (not a test).

    bench-cluster.py [--json FILE] --work DIR --runs R --rate RATE --nodes K
                     --links TEXT --model DIR --commit C NAME...

DIR holds, per contestant NAME and run r: NAME.r.out (the load's --json
report), NAME.r.{b0,b1} (lines "NODE RX TX" of the links' counters
before and after), NAME.r.wall; download-first also NAME-dl.r.*;
tp8.want and dp4.want are tests/oracle/cluster_grid_bytes.py's figures.
Each link's least bytes follow from them (least_bytes); the floor is
the largest of least bytes / the link's rate (nodes at RATE, the store
at 4 x RATE), each way on its own (the links are full duplex).
"""
import argparse
import json
import statistics
import sys

GIB = float(1 << 30)
MIB = float(1 << 20)


def rate_bytes(rate):
    """tc's rate ("400mbit", "1gbit") in bytes per second."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[:-len(u)]) * f / 8
    raise ValueError("rate %s: expected NNNkbit, mbit or gbit" % rate)


def least_bytes(name, w, k):
    """{link: least bytes} for contestant NAME: "nK in", "n0 out", "st
    out"; w the oracle's figures (unique, others, files); NAME@base is
    NAME run by another build."""
    name = name.split("@")[0]
    u, files = w["unique"], w["files"]
    if name == "download-first":
        d = {"n%d in" % i: files for i in range(k)}
        d["st out"] = k * files
        return d
    if name.endswith("-local"):
        d = {"n%d in" % i: u[i] for i in range(k)}
        d["st out"] = sum(u)
        return d
    d = {"n%d in" % i: u[i] for i in range(1, k)}
    d["n0 out"] = w["others"]
    if "-url" in name:
        d["n0 in"] = files
        d["st out"] = files
    return d


def counts(path):
    with open(path, encoding="utf-8") as f:
        return {ln.split()[0]: [int(x) for x in ln.split()[1:]] for ln in f}


def moved(prefix):
    """{link: bytes} a run's counters moved ("nK in", "nK out", "st out")."""
    a, b = counts(prefix + ".b0"), counts(prefix + ".b1")
    d = {}
    for node in b:
        d[node + " in"] = b[node][0] - a[node][0]
        d[node + " out"] = b[node][1] - a[node][1]
    return d


def one_run(work, name, r, k):
    """A run's figures: seconds, wall, bytes per link, CPU per rank."""
    base = "%s/%s.%d" % (work, name, r)
    with open(base + ".out", encoding="utf-8") as f:
        rep = json.load(f)
    links = moved(base)
    secs = rep["seconds"]
    wall = float(open(base + ".wall").read())
    if name.split("@")[0] == "download-first":
        dl = "%s/%s-dl.%d" % (work, name, r)
        got = moved(dl)
        links = {x: links[x] + got[x] for x in links}
        secs += float(open(dl + ".wall").read())
        wall += float(open(dl + ".wall").read())
    cpu = [x["cpu_user_seconds"] + x["cpu_sys_seconds"] for x in rep["ranks"]]
    per = len(cpu) // k
    node_cpu = [sum(cpu[i * per:(i + 1) * per]) for i in range(k)]
    through = [links["n%d in" % i] + links["n%d out" % i] for i in range(k)]
    return {"seconds": secs, "wall": wall, "links": links, "cpu": cpu,
            "cpu_per_gib": max(c / (t / GIB) for c, t in
                               zip(node_cpu, through) if t > 0)}


def contestant(a, name, want):
    """The medians of NAME's runs beside its floor and least bytes."""
    w = want["dp4" if name.startswith("dp4") else "tp8"]
    least = least_bytes(name, w, a.nodes)
    rate = rate_bytes(a.rate)

    def link_rate(link):
        return 4 * rate if link.startswith("st") else rate
    busy = max(least, key=lambda x: least[x] / link_rate(x))
    floor = least[busy] / link_rate(busy)
    runs = [one_run(a.work, name, r, a.nodes) for r in range(1, a.runs + 1)]
    med = statistics.median

    def med_link(x):
        return med(run["links"][x] for run in runs)
    nodes_in = sum(med_link("n%d in" % i) for i in range(a.nodes))
    nodes_least = sum(least.get("n%d in" % i, 0) for i in range(a.nodes))
    secs = med(r["seconds"] for r in runs)
    return {
        "name": name, "seconds": secs,
        "runs": [r["seconds"] for r in runs],
        "wall": med(r["wall"] for r in runs),
        "floor": floor, "floor_over_time": floor / secs,
        "busiest": {"link": busy, "bytes": med_link(busy),
                    "least": least[busy]},
        "links": {x: {"bytes": med_link(x), "least": least.get(x, 0)}
                  for x in sorted(runs[0]["links"])},
        "nodes_in_over_least": nodes_in / nodes_least if nodes_least else
        None,
        "store_over_least": med_link("st out") / least["st out"]
        if least.get("st out") else None,
        "rank0_cpu": med(r["cpu"][0] for r in runs),
        "other_cpu": med(med(r["cpu"][1:]) for r in runs),
        "cpu_per_gib": med(r["cpu_per_gib"] for r in runs)}


def ratio(x):
    return "-" if x is None else "%.2f x" % x


def table(res):
    print("| contestant | time (s) | floor (s) | floor / time | busiest "
          "link: MiB (least) | nodes in / least | store out / least | "
          "CPU-s rank 0 / others | CPU-s per GiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in res["contestants"]:
        b = c["busiest"]
        print("| %s | %.2f | %.2f | %.2f | %s %.0f (%.0f) | %s | %s | "
              "%.2f / %.2f | %.2f |"
              % (c["name"], c["seconds"], c["floor"], c["floor_over_time"],
                 b["link"], b["bytes"] / MIB, b["least"] / MIB,
                 ratio(c["nodes_in_over_least"]),
                 ratio(c["store_over_least"]), c["rank0_cpu"],
                 c["other_cpu"], c["cpu_per_gib"]))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="also write the figures to this file")
    for opt in ("work", "rate", "links", "model", "commit"):
        ap.add_argument("--" + opt, required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("names", nargs="+")
    a = ap.parse_args(argv)
    want = {}
    for g in ("tp8", "dp4"):
        with open("%s/%s.want" % (a.work, g), encoding="utf-8") as f:
            want[g] = json.load(f)
    res = {"commit": a.commit, "rate": a.rate, "store_rate": "4 x",
           "nodes": a.nodes, "ranks": 8, "runs": a.runs, "links": a.links,
           "model": a.model, "model_bytes": want["tp8"]["model"],
           "file_bytes": want["tp8"]["files"],
           "contestants": [contestant(a, n, want) for n in a.names]}
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    print("%d nodes x 2 ranks, links %s each way, store link 4 x; model "
          "%.0f MiB in files; commit %s; medians of %d; %s"
          % (a.nodes, a.rate, res["file_bytes"] / MIB, a.commit, a.runs,
             a.links))
    table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
