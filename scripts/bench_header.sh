#!/bin/bash
# bench_header.sh - what a header with very many tensors costs (not a
# test): writes a safetensors file of N one-byte U8 tensors (default
# 1,048,576 = TPL_MAX_TENSORS, the cap) and one of N+2 (beyond the cap
# even with a __metadata__ entry, so refused on the raw header before it
# is parsed), then runs `mpirun -np R tpload load` on each and prints the
# exit code, wall seconds and, for a load, every rank's peak memory (from
# the --json report); for a refusal, its message.
# Usage: scripts/bench_header.sh [--tensors N] [--ranks R]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=1048576
ranks=2
while [ $# -gt 0 ]; do
  case "$1" in
    --tensors) n=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "bench_header.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
build=$("$top/scripts/build.sh" plain)
T="$build/tpload"
work=$(mktemp -d /tmp/tpload-bench-header.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

gen() {  # gen FILE COUNT
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
parts = ['"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (i, i, i + 1)
         for i in range(n)]
hdr = ("{" + ",".join(parts) + "}").encode()
hdr += b" " * (-len(hdr) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr + bytes(n))
PY
}
echo '{"rules": []}' >"$work/plan.json"

run() {  # run LABEL FILE
  local t0 t1 rc
  t0=$(date +%s.%N)
  set +e
  mpirun --oversubscribe -np "$ranks" \
    "$T" load "$2" --plan "$work/plan.json" --json --quiet \
    >"$work/report.json" 2>"$work/err"
  rc=$?
  set -e
  t1=$(date +%s.%N)
  printf '%s: exit %d, %.1f s' "$1" "$rc" "$(echo "$t1 - $t0" | bc)"
  if [ "$rc" -eq 0 ]; then
    /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("".join(", rank %d peak %.0f MiB" % (k["rank"], k["peak_rss_bytes"] / 2**20)
              for k in r["ranks"]))' "$work/report.json"
  else
    echo "; $(grep '^tpload' "$work/err" | head -1 | cut -c1-160)"
  fi
}

gen "$work/at_cap.safetensors" "$n"
gen "$work/over_cap.safetensors" $((n + 2))
echo "header bench: $ranks ranks, $(du -h "$work/at_cap.safetensors" | cut -f1) file"
run "$n tensors" "$work/at_cap.safetensors"
run "$((n + 2)) tensors" "$work/over_cap.safetensors"
