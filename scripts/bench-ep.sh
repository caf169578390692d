#!/bin/bash
# bench-ep.sh - what --ep (expert parallelism, issue 37) costs and saves
# (not a test).  Synthesizes once (cached in $TPLOAD_BENCH_DIR, default
# /tmp/tpload-bench) a ~1 GiB mixtral-shaped bf16 checkpoint of 64
# experts per layer, warms the page cache, and for each rank count runs,
# alternated run by run (each on warmed memory, scripts/bench-peers.py's
# warm step): `load`, `load --ep`, `load --read local` and `load --ep
# --read local`.  Prints per configuration the medians of the wall time
# (mpirun included) and of the job's own time (the report's seconds), the
# bytes a rank holds (the largest), the routed experts' bytes a rank
# holds (from `tpload plan`: its experts whole under --ep, 1/N of each
# otherwise) against 1/N of all experts, and what the ranks read from the
# files (the report's ranks[].bytes_read: rank 0's under --read mpi; the
# largest read / held of a rank under --read local).
# Usage: scripts/bench-ep.sh [--gib X] [--runs R] [--ranks "2 4"]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1
runs=5
ranks="2 4"
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench-ep.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
PEERS="$top/scripts/bench-peers.py"
model="$cache/mixtral-64x-${gib}g"
[ -f "$model/config.json" ] || "$T" synth --arch mixtral --out "$model" \
  --hidden 512 --heads 8 --intermediate 1024 --experts 64 --vocab 32000 \
  --gib "$gib" --force --quiet
cat "$model"/*.safetensors >/dev/null # warm: every run from the cache
bytes=$(cat "$model"/*.safetensors | wc -c)
out=$(mktemp -d /tmp/tpload-bench-ep.XXXXXX)
trap 'rm -rf "$out"' EXIT

# run N NAME ARGS...: one warmed `load` of N ranks; appends
# "wall job held read read_over_held" to $out/N-NAME.
run() {
  local n=$1 name=$2 t0 t1
  shift 2
  $PY "$PEERS" warm "$((2 * bytes))"
  t0=$(date +%s.%N)
  mpirun --oversubscribe -np "$n" "$T" load "$model" --json --quiet "$@" \
    >"$out/rep.json" 2>/dev/null
  t1=$(date +%s.%N)
  $PY - "$out/rep.json" "$t0" "$t1" >>"$out/$n-$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
k = r["ranks"]
print(float(sys.argv[3]) - float(sys.argv[2]), r["seconds"],
      max(x["bytes"] for x in k), max(x["bytes_read"] for x in k),
      max(x["bytes_read"] / x["bytes"] for x in k))
PY
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$model: $(echo "$bytes / 1073741824" | bc -l | cut -c1-5) GiB," \
  "$runs runs each, alternated, medians"
for n in $ranks; do
  "$T" plan "$model" --shards "$n" >"$out/plan-$n.json"
  "$T" plan "$model" --shards "$n" --ep >"$out/plan-ep-$n.json"
  run "$n" tp --read mpi # a first run, not counted
  : >"$out/$n-tp"
  for _ in $(seq "$runs"); do
    run "$n" tp --read mpi
    run "$n" ep --read mpi --ep
    run "$n" tp-local --read local
    run "$n" ep-local --read local --ep
  done
  $PY - "$out" "$n" "$model" <<'PY'
import json, math, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
E = json.load(open(sys.argv[3] + "/config.json"))["num_local_experts"]
MIB = 2.0 ** 20


def experts_held(plan):
    """(the routed experts' bytes of the rank holding the most of them,
    their bytes in a rank's shape summed over every expert tensor):
    plan's params give each tensor's shape on a rank."""
    p = json.load(open(plan))
    size = {"bfloat16": 2, "float16": 2, "float32": 4}
    each = {q["name"]: size[q["dtype"]] * math.prod(q["shape"])
            for q in p["params"] if ".experts." in q["name"]}
    return max(sum(each.get(t, 0) for t in r["tensors"])
               for r in p["ranks"]), sum(each.values())


rows, jobs = {}, {}
for name in ("tp", "ep", "tp-local", "ep-local"):
    runs = [[float(x) for x in line.split()] for line in open("%s/%d-%s" %
                                                              (d, n, name))]
    rows[name] = [statistics.median(r[k] for r in runs) for k in range(5)]
    jobs[name] = " ".join("%.2f" % r[1] for r in runs)
tp_x, _ = experts_held("%s/plan-%d.json" % (d, n))
ep_x, total = experts_held("%s/plan-ep-%d.json" % (d, n))
print("ranks %d: routed experts %.1f MiB in all (%d per layer), 1/N = "
      "%.1f MiB, one expert of every layer %.1f MiB" %
      (n, total / MIB, E, total / n / MIB, total / E / MIB))
print("  %-24s %7s %7s %9s %9s %9s %6s" % ("", "wall s", "job s",
                                          "held MiB", "exp. MiB", "read MiB",
                                          "rd/own"))
for name, label, x in (("tp", "load", tp_x), ("ep", "load --ep", ep_x),
                       ("tp-local", "load --read local", tp_x),
                       ("ep-local", "load --ep --read local", ep_x)):
    w, j, held, rd, ratio = rows[name]
    print("  %-24s %7.3f %7.3f %9.1f %9.1f %9.1f %6.3f" %
          (label, w, j, held / MIB, x / MIB, rd / MIB, ratio))
    print("  %-24s jobs %s" % ("", jobs[name]))
print("  job --ep / without: mpi x%.2f, local x%.2f" %
      (rows["ep"][1] / rows["tp"][1], rows["ep-local"][1] /
       rows["tp-local"][1]))
PY
done
