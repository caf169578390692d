#!/bin/bash
# bench-hf.sh - what the hub's protocol costs: `tpload load` of one
# checkpoint from one nginx as hf://org/m (HF_ENDPOINT the nginx: the
# revision API as a file, main pinned to a commit, every ranged GET of
# /org/m/resolve/COMMIT/FILE answered 302 to /cdn/FILE on the same
# server, as the hub redirects to its content server) and as a plain
# http:// URL of /cdn/, alternated run by run (not a test).  The
# checkpoint is bench-s3.sh's (synth_llama, cached in $TPLOAD_BENCH_DIR,
# default /tmp/tpload-bench): Llama-shaped bf16, --gib X (default 0.25)
# in 2 files, page cache warm, one load of each untimed first.  Prints the
# medians of the job's own time (the report's seconds) and the ratio.
# Usage: scripts/bench-hf.sh [--gib X] [--runs R] [--ranks N]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=0.25
runs=5
ranks=2
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bench-hf.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
model=$(synth_llama "$gib")
cat "$model"/* >/dev/null # the page cache, for both sides

commit=0123456789abcdef0123456789abcdef01234567
hub=$(mktemp -d /tmp/tpload-bench-hub.XXXXXX)
mkdir -p "$hub/api/models/org/m/revision"
printf '{"id": "org/m", "sha": "%s"}\n' "$commit" \
  >"$hub/api/models/org/m/revision/main"
bench_nginx "location /api/ { root $hub; default_type application/json; }" \
  "location ~ \"^/org/m/resolve/$commit/(.+)\$\" {" \
  "  return 302 http://127.0.0.1:@PORT@/cdn/\$1; }" \
  "location /cdn/ { alias $model/; }"
trap 'kill $npid 2>/dev/null; wait $npid 2>/dev/null; rm -rf "$ngx" "$hub"' EXIT

# seconds MODEL: the job's own time of one load, from its JSON report.
seconds() {
  HF_ENDPOINT=$url mpirun --oversubscribe -np "$ranks" "$T" load "$1" \
    --json --quiet |
    $PY -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
}
# One load of each first, untimed: the first load after a pause is slow
# whichever it is (measured: 2.6 s, then 0.7-1.0 s).  Then the pairs
# alternate their order (plain first in odd runs, hf:// in even ones), so
# that neither always follows the other.
seconds "$url/cdn/" >/dev/null
seconds hf://org/m >/dev/null
plain=() hub_t=()
for r in $(seq "$runs"); do
  if [ $((r % 2)) -eq 1 ]; then
    plain+=("$(seconds "$url/cdn/")")
    hub_t+=("$(seconds hf://org/m)")
  else
    hub_t+=("$(seconds hf://org/m)")
    plain+=("$(seconds "$url/cdn/")")
  fi
  echo "run $r: plain ${plain[-1]} s, hf:// ${hub_t[-1]} s"
done
bytes=$(cat "$model"/* | wc -c)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ranks ranks, $bytes bytes"
$PY - "${plain[*]}" "${hub_t[*]}" "$bytes" <<'PY'
import statistics, sys
p = statistics.median(map(float, sys.argv[1].split()))
h = statistics.median(map(float, sys.argv[2].split()))
gib = int(sys.argv[3]) / 2**30
print("median: plain http %.3f s (%.2f GiB/s), hf:// through the hub %.3f s "
      "(%.2f GiB/s); hub / plain = %.3f" % (p, gib / p, h, gib / h, h / p))
PY
