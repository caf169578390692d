#!/bin/bash
# bench-reload.sh - times `tpload reload` of a second ~1 GiB model while
# consumers attach and read in a loop, against a fresh `tpload load` of
# the same model, and the consumers' attach latency before and during
# the reloads (not a test).
#
# Synthesizes (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench) two
# Llama-shaped bf16 checkpoints of the same shapes and other bytes (seeds
# 0 and 1), warms the page cache, then:
#   load    R times `mpirun -np N tpload load B`: the job's own time (the
#           slowest rank's) and the wall time of the whole process;
#   reload  a serve of A with C consumers (attach_bench --loop: attach,
#           look up every tensor, read its first 4 KiB, detach, 1 ms
#           apart; spread over the ranks), then R reloads alternating
#           B, A, B...: the reload's job time (its report on rank 0's
#           stderr) and the wall time of `tpload reload` (asked to
#           switched on every rank), and every consumer attach's latency
#           before the first reload and while one runs.
# Usage: scripts/bench-reload.sh [--gib X] [--runs R] [--np N] [--consumers C]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1 runs=3 np=2 consumers=8
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --consumers) consumers=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-reload.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
make -C "$build" tests/bench/attach_bench >/dev/null
AB="$build/tests/bench/attach_bench"
work=$(mktemp -d /tmp/tpload-bench-reload.XXXXXX)
MPIRUN="mpirun --oversubscribe"
synth() { # SEED -> model directory
  local d="$cache/llama-${gib}g-seed$1"
  [ -f "$d/config.json" ] || "$T" synth --arch llama --out "$d" \
    --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 --vocab 32000 \
    --gib "$gib" --files 2 --seed "$1" --force --quiet
  echo "$d"
}
A=$(synth 0) B=$(synth 1)
cat "$A"/*.safetensors "$B"/*.safetensors >/dev/null # warm the page cache
serve_pid=""
cleanup() {
  touch "$work/stop"
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid"
  rm -rf "$work"
}
trap cleanup EXIT
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1}
  END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ms() { date +%s%3N; }

load_job="" load_wall=""
for _ in $(seq "$runs"); do
  t0=$(ms)
  job=$($MPIRUN -np "$np" "$T" load "$B" --json --quiet |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin)["seconds"])')
  load_wall="$load_wall $((($(ms) - t0)))"
  load_job="$load_job $job"
done

$MPIRUN -np "$np" "$T" serve "$A" --socket-dir "$work/sock" \
  --ready-file "$work/ready" --log-level quiet >"$work/serve.out" \
  2>"$work/serve.err" &
serve_pid=$!
until [ -f "$work/ready" ]; do sleep 0.1; done
for c in $(seq 0 $((consumers - 1))); do
  "$AB" "$work/sock/rank$((c % np)).sock" --loop "$work/stop" \
    "$work/c$c.txt" &
done
sleep 2 # a baseline of attaches before the first reload
windows="" reload_wall=""
for i in $(seq "$runs"); do
  model=$B
  [ $((i % 2)) = 0 ] && model=$A
  t0=$(date +%s.%3N)
  "$T" reload "$work/sock/rank0.sock" "$model" >/dev/null
  t1=$(date +%s.%3N)
  windows="$windows $t0:$t1"
  reload_wall="$reload_wall $(echo "($t1 - $t0) * 1000" | bc)"
  sleep 1
done
touch "$work/stop"
wait_consumers() { while pgrep -f -- "$work/stop" >/dev/null; do sleep 0.1; done; }
wait_consumers
"$T" status "$work/sock/rank0.sock" --shutdown >/dev/null
wait "$serve_pid" || true
serve_pid=""
# The reloads' job times: every summary line of rank 0 but the first load's.
reload_job=$(grep -o 'delivered to [0-9]* ranks in [0-9.]* s' "$work/serve.err" |
  awk 'NR > 1 {print $6}' | tr '\n' ' ')

"$PY" - "$work" "$consumers" "$windows" <<'EOF'
import sys
work, n, windows = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
spans = [tuple(float(x) * 1000 for x in w.split(":")) for w in windows]
first = spans[0][0]
base, during = [], []
for c in range(n):
    for line in open("%s/c%d.txt" % (work, c)):
        at, lat, _ = line.split()
        at, lat = float(at), float(lat)
        if at < first:
            base.append(lat)
        elif any(a <= at <= b for a, b in spans):
            during.append(lat)
def stats(v):
    v = sorted(v)
    if not v:
        return "none"
    return "median %.3f ms, p99 %.3f ms, max %.3f ms (%d attaches)" % (
        v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))], v[-1], len(v))
print("attach latency before the reloads: " + stats(base))
print("attach latency during the reloads: " + stats(during))
EOF
echo "load of B ($np ranks, fresh job): job $(echo "$load_job" | median) s," \
  "wall $(echo "$load_wall" | median) ms (medians of $runs)"
echo "reload ($np ranks, $consumers consumers reading): job" \
  "$(echo "$reload_job" | median) s, tpload reload wall" \
  "$(echo "$reload_wall" | median) ms (medians of $runs)"
