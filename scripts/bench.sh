#!/bin/bash
# bench.sh - measures tpload's load speed and memory (not a test).
#
# Synthesizes once (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench)
# a ~1 GiB Llama-shaped bf16 checkpoint and a 20,000-small-tensor one,
# warms the page cache, and prints for 1, 2 and 4 ranks: `cat` time of the
# same files (the read bound), `tpload load` seconds and GiB/s, the ratio
# to `cat`, rank 0 memory beyond its shard, and per-tensor overhead; then
# the daemon's attach + lookup-all and status round-trip latencies, and
# the memory floor (faulting in fresh memory of rank 0's shard size).  Each
# figure is compared with the previous run (bench-last.txt in the cache).
# Usage: scripts/bench.sh [--gib X] [--runs R] [--ranks "1 2 4"]
# Needs bc and python3 (scripts/install-deps.sh installs what is missing).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1
runs=3
ranks="1 2 4"
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
build=$("$top/scripts/build.sh" plain)
T="$build/tpload"
cache=${TPLOAD_BENCH_DIR:-/tmp/tpload-bench}
mkdir -p "$cache"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
big="$cache/llama-${gib}g"
small="$cache/small-20k"
[ -f "$big/config.json" ] || "$T" synth --arch llama --out "$big" \
  --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 --vocab 32000 \
  --gib "$gib" --files 2 --force --quiet
# 9 tensors per llama layer + 3: 2222 layers of tiny tensors ~ 20,000.
[ -f "$small/config.json" ] || "$T" synth --arch llama --out "$small" \
  --layers 2222 --hidden 64 --heads 4 --kv-heads 4 --intermediate 128 \
  --vocab 256 --force --quiet

last="$cache/bench-last.txt"
now_file="$cache/bench-now.txt"
: >"$now_file"

files_of() { ls "$1"/*.safetensors; }
bytes_of() { cat $(files_of "$1") | wc -c; }
best_time() { # best wall time in seconds of R runs of "$@"
  local best=
  for _ in $(seq "$runs"); do
    local s e t
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
  done
  echo "$best"
}
record() { # key value unit
  local prev=
  [ -f "$last" ] && prev=$(awk -v k="$1" '$1 == k {print $2}' "$last")
  echo "$1 $2" >>"$now_file"
  if [ -n "$prev" ] && [ "$(echo "$prev > 0" | bc -l)" = 1 ]; then
    printf '  %-34s %12.4f %-6s (previous %.4f, x%.2f)\n' "$1" "$2" "$3" \
      "$prev" "$(echo "$2 / $prev" | bc -l)"
  else
    printf '  %-34s %12.4f %-6s\n' "$1" "$2" "$3"
  fi
}
load_json() { # ranks model -> JSON report of the best of R runs
  local n=$1 model=$2 best= out=
  for _ in $(seq "$runs"); do
    local j s
    j=$(mpirun --oversubscribe -np "$n" "$T" load "$model" --json --quiet)
    s=$(echo "$j" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
    if [ -z "$best" ] || [ "$(echo "$s < $best" | bc -l)" = 1 ]; then
      best=$s; out=$j
    fi
  done
  echo "$out"
}
field() { /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"; }

for m in "$big" "$small"; do cat $(files_of "$m") >/dev/null; done
big_bytes=$(bytes_of "$big")
small_tensors=$("$T" inspect --json "$small" | field 'r["tensor_count"]')
cat_big=$(best_time sh -c "cat $(files_of "$big" | tr '\n' ' ') >/dev/null")
cat_small=$(best_time sh -c "cat $(files_of "$small" | tr '\n' ' ') >/dev/null")
echo "model: $big ($(echo "$big_bytes / 1073741824" | bc -l | cut -c1-5) GiB)"
echo "small: $small ($small_tensors tensors)"
record cat_seconds "$cat_big" s
record cat_gib_per_s "$(echo "$big_bytes / 1073741824 / $cat_big" | bc -l)" GiB/s

for n in $ranks; do
  echo "ranks: $n"
  j=$(load_json "$n" "$big")
  secs=$(echo "$j" | field 'r["seconds"]')
  gibs=$(echo "$j" | field 'r["bytes_read"] / r["seconds"] / 2**30')
  shard=$(echo "$j" | field 'r["ranks"][0]["bytes"]')
  rss=$(echo "$j" | field 'r["ranks"][0]["peak_rss_bytes"]')
  record "load_seconds_np$n" "$secs" s
  record "load_gib_per_s_np$n" "$gibs" GiB/s
  record "load_over_cat_np$n" "$(echo "$secs / $cat_big" | bc -l)" x
  record "rank0_over_shard_mib_np$n" "$(echo "($rss - $shard) / 1048576" | bc -l)" MiB
  # The memory floor: faulting in fresh memory the size of rank 0's shard,
  # which any loader pays and `cat` does not.
  floor=$(/usr/bin/python3 -c "
import mmap, time
n = $shard
t = time.perf_counter(); m = mmap.mmap(-1, n)
m[::4096] = b'\\x01' * ((n + 4095) // 4096)  # touch every page once
print(time.perf_counter() - t)")
  record "memory_floor_seconds_np$n" "$floor" s
  record "load_over_cat_plus_floor_np$n" \
    "$(echo "$secs / ($cat_big + $floor)" | bc -l)" x
  js=$(load_json "$n" "$small")
  ssecs=$(echo "$js" | field 'r["seconds"]')
  record "small_load_seconds_np$n" "$ssecs" s
  record "per_tensor_us_np$n" \
    "$(echo "($ssecs - $cat_small) * 1000000 / $small_tensors" | bc -l)" us
done

if make -C "$build" tests/attach_bench >/dev/null 2>&1; then
  for m in "$small" "$big"; do
    name=$(basename "$m")
    sock="$cache/sock-$name"
    ready="$cache/ready-$name"
    rm -f "$ready"
    mpirun --oversubscribe -np 2 "$T" serve "$m" --socket-dir "$sock" \
      --ready-file "$ready" --quiet &
    pid=$!
    for _ in $(seq 600); do [ -f "$ready" ] && break; sleep 0.1; done
    out=$("$build/tests/attach_bench" "$sock/rank0.sock" 20)
    record "attach_lookup_all_ms_$name" "$(echo "$out" | awk '/attach/ {print $2}')" ms
    record "status_roundtrip_ms_$name" "$(echo "$out" | awk '/status/ {print $2}')" ms
    "$T" status "$sock/rank0.sock" --shutdown >/dev/null
    wait "$pid" || true
  done
fi
cp "$now_file" "$last"
"$top/scripts/bench-latency.sh" --runs "$runs"
