#!/bin/bash
# bench-s3.sh - what SigV4 signing costs: `tpload load` of one checkpoint
# from one s3rver (the npm registry's S3 server, scripts/install-s3rver.sh)
# as a plain http:// URL of its path-style objects (unsigned: s3rver
# does not check signatures) and as s3://bucket/prefix/ with every
# request signed, alternated run by run (not a test).  Synthesizes once
# (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench) a Llama-shaped
# bf16 checkpoint of --gib X (default 0.25) in 2 files.  Prints the
# medians of the job's own time (the report's seconds) and the ratio.
# Usage: scripts/bench-s3.sh [--gib X] [--runs R] [--ranks N]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=0.25
runs=3
ranks=2
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench-s3.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
s3rver=$("$top/scripts/install-s3rver.sh")
model=$(synth_llama "$gib")

work=$(mktemp -d)
port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$s3rver" -d "$work/data" -a 127.0.0.1 -p "$port" -s \
  --configure-bucket bench >"$work/s3rver.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  $PY -c "import socket; socket.create_connection(('127.0.0.1', $port))" \
    2>/dev/null && break
  sleep 0.1
done
$PY - "$port" "$model" <<'PY'
import http.client, os, sys
port, d = int(sys.argv[1]), sys.argv[2]
for name in sorted(os.listdir(d)):
    c = http.client.HTTPConnection("127.0.0.1", port)
    with open(os.path.join(d, name), "rb") as f:
        c.request("PUT", "/bench/m/%s" % name, body=f)
    r = c.getresponse()
    r.read()
    assert r.status == 200, (name, r.status)
PY

# seconds MODEL: the job's own time of one load, from its JSON report.
seconds() {
  mpirun --oversubscribe -np "$ranks" "$T" load "$1" --json --quiet |
    $PY -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
}
# s3rver knows one key pair, S3RVER / S3RVER (it checks the id only)
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
  AWS_REGION=us-east-1 AWS_ENDPOINT_URL="http://127.0.0.1:$port"
plain=() signed=()
for r in $(seq "$runs"); do
  plain+=("$(seconds "http://127.0.0.1:$port/bench/m/")")
  signed+=("$(seconds "s3://bench/m/")")
  echo "run $r: plain ${plain[-1]} s, signed ${signed[-1]} s"
done
$PY - "${plain[*]}" "${signed[*]}" "$gib" <<'PY'
import statistics, sys
p = statistics.median(map(float, sys.argv[1].split()))
s = statistics.median(map(float, sys.argv[2].split()))
gib = float(sys.argv[3])
print("median: plain http %.3f s (%.2f GiB/s), s3:// signed %.3f s "
      "(%.2f GiB/s); signed / plain = %.3f" % (p, gib / p, s, gib / s, s / p))
PY
