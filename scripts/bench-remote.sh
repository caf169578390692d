#!/bin/bash
# bench-remote.sh - `tpload load` of a MODEL URL against the same load
# from the page cache (not a test).  Synthesizes once (cached in
# $TPLOAD_BENCH_DIR, default /tmp/tpload-bench) a ~1 GiB Llama-shaped bf16
# checkpoint (the one scripts/bench.sh uses), warms the page cache, starts
# nginx (Debian's) on a free loopback port serving it with sendfile, and
# runs, alternated run by run: `load DIR` (page cache), `load URL`, `load
# URL --read local`, and `load URL` through a location with nginx's
# limit_rate (per connection; --http-connections of them in flight make
# the aggregate the server allows).  Prints the medians of the job's own
# time (the report's seconds), the ratios to the page-cache load, and the
# rate-limited load's rate against the aggregate limit.
# Usage: scripts/bench-remote.sh [--gib X] [--runs R] [--ranks N]
#                                [--limit-mib M] [--connections C]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1
runs=3
ranks=2
limit_mib=32
conns=8
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --limit-mib) limit_mib=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench-remote.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
model=$(synth_llama "$gib")
cat "$model"/*.safetensors >/dev/null # the page cache, for both sides

bench_nginx "location /m/ { alias $model/; }" \
  "location /limited/ { alias $model/; limit_rate ${limit_mib}m; }"

job() { # the report's seconds of `load "$@"`
  mpirun --oversubscribe -np "$ranks" "$T" load "$@" --json --quiet \
    2>/dev/null | $PY -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1}
  END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

bytes=$(cat "$model"/*.safetensors | wc -c)
local_t="" url_t="" urll_t="" lim_t=""
for _ in $(seq "$runs"); do
  local_t="$local_t $(job "$model")"
  url_t="$url_t $(job "$url/m/" --http-connections "$conns")"
  urll_t="$urll_t $(job "$url/m/" --read local --http-connections "$conns")"
  lim_t="$lim_t $(job "$url/limited/" --http-connections "$conns")"
done
lt=$(echo "$local_t" | median)
ut=$(echo "$url_t" | median)
ult=$(echo "$urll_t" | median)
mt=$(echo "$lim_t" | median)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ranks ranks, $(echo "$bytes / 1073741824" | bc -l | cut -c1-5) GiB," \
  "$runs runs, --http-connections $conns"
$PY - "$bytes" "$lt" "$ut" "$ult" "$mt" "$limit_mib" "$conns" <<'PY'
import sys
b, lt, ut, ult, mt = (float(x) for x in sys.argv[1:6])
limit, conns = int(sys.argv[6]), int(sys.argv[7])
gib = b / 2**30
def line(name, t):
    print("  %-40s %7.3f s %6.2f GiB/s" % (name, t, gib / t))
line("load DIR (page cache)", lt)
line("load URL (nginx, loopback)", ut)
line("load URL --read local", ult)
line("load URL, limit_rate %d MiB/s x %d" % (limit, conns), mt)
print("  URL / page cache: x%.2f the time (the URL at %.0f %% of the page"
      " cache's rate)" % (ut / lt, 100 * lt / ut))
print("  URL --read local / page cache: x%.2f the time" % (ult / lt))
agg = limit * conns / 1024.0
print("  rate-limited: %.3f GiB/s against the server's %.3f GiB/s aggregate"
      " (%.0f %%)" % (gib / mt, agg, 100 * gib / mt / agg))
PY
