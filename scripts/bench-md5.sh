#!/bin/bash
# bench-md5.sh - the cost of --verify-md5 (not a test).  Synthesizes once
# (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench) a ~1 GiB
# Llama-shaped bf16 MLC weight directory (tpload synth --format mlc, which
# records every file's md5sum as TVM's writer does), warms the page cache,
# and runs, alternated run by run, `load DIR` and `load DIR --verify-md5`.
# Prints the medians of each run's wall time (mpirun included), of the
# job's own time (the report's seconds) and of the md5 pass's (the
# report's md5.seconds), their ratios, and coreutils' md5sum over the
# same files (one core) for scale.
# Usage: scripts/bench-md5.sh [--gib X] [--runs R] [--ranks N]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1
runs=5
ranks=2
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench-md5.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
model="$cache/llama-mlc-md5-${gib}g"
[ -f "$model/tensor-cache.json" ] || "$T" synth --arch llama --format mlc \
  --out "$model" --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 \
  --vocab 32000 --gib "$gib" --force --quiet
cat "$model"/params_shard_*.bin >/dev/null # warm: both sides from the cache
out=$(mktemp /tmp/tpload-bench-md5.XXXXXX)
trap 'rm -f "$out"' EXIT

# run ARGS...: "wall job md5" seconds of one `load DIR ARGS`.
run() {
  local t0 t1
  t0=$(date +%s.%N)
  mpirun --oversubscribe -np "$ranks" "$T" load "$model" --json --quiet \
    "$@" >"$out" 2>/dev/null
  t1=$(date +%s.%N)
  $PY -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(float(sys.argv[3]) - float(sys.argv[2]), r["seconds"],
      r.get("md5", {}).get("seconds", 0))' "$out" "$t0" "$t1"
}
plain="" check=""
run >/dev/null # a first run, not counted
for _ in $(seq "$runs"); do
  plain="$plain;$(run)"
  check="$check;$(run --verify-md5)"
done
t0=$(date +%s.%N)
md5sum "$model"/params_shard_*.bin >/dev/null
t1=$(date +%s.%N)
bytes=$(cat "$model"/params_shard_*.bin | wc -c)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ranks ranks, $(echo "$bytes / 1073741824" | bc -l | cut -c1-5) GiB in" \
  "$(ls "$model"/params_shard_*.bin | wc -l) files, $runs runs each, alternated"
$PY - "$bytes" "$plain" "$check" "$t0" "$t1" <<'PY'
import statistics, sys
b = float(sys.argv[1])
def runs(s):
    return [tuple(float(x) for x in r.split()) for r in s.split(";") if r]
p, c = runs(sys.argv[2]), runs(sys.argv[3])
med = lambda rs, k: statistics.median(r[k] for r in rs)
gib = b / 2**30
for name, rs in (("load DIR", p), ("load DIR --verify-md5", c)):
    print("  %-24s wall %6.3f s, job %6.3f s, md5 pass %6.3f s" %
          (name, med(rs, 0), med(rs, 1), med(rs, 2)))
    print("  %-24s walls %s" % ("", " ".join("%.2f" % r[0] for r in rs)))
print("  md5 pass: %.2f GB/s (%.2f GiB/s) on rank 0" %
      (b / 1e9 / med(c, 2), gib / med(c, 2)))
print("  wall with / without: x%.2f; (job + md5 pass) / job: x%.2f" %
      (med(c, 0) / med(p, 0), (med(c, 1) + med(c, 2)) / med(p, 1)))
md5 = float(sys.argv[5]) - float(sys.argv[4])
print("  coreutils md5sum, same files, one core: %.3f s (%.2f GB/s)" %
      (md5, b / 1e9 / md5))
PY
