#!/bin/bash
# bench-latency.sh - the latencies a user of `tpload serve` waits for, which
# the tests deliberately do not assert (their verdicts must not depend on
# the machine's speed): for N = 2 and 3 ranks, the seconds from
#   - `tpload status --shutdown` to mpirun's exit,
#   - SIGTERM to rank 0, and to rank N-1 only, to mpirun's exit,
#   - starting a second serve on a live socket directory to its refusal
#     (exit 73; it includes that job's start-up),
# each the median of R runs (default 5) on a small synthesized model
# (plain build; cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench).
# First, what a consumer waits for on a 2-rank serve of 20,001 small
# tensors (tests/bench/attach_bench, R rounds of 20): attach + lookup of every
# tensor (the process's first, cold, and best and median of 20, wall and
# the client's CPU time), the
# summary status round trip (`tpload status`) and the whole report's
# (`status --json`), with their ratios to issue 9's goals (2 ms, 5 ms).
# --against DIR runs DIR/tpload and DIR/attach_bench (an older build) side
# by side, alternated round by round, each against its own serve.
# Usage: scripts/bench-latency.sh [--runs R] [--ranks "2 3"] [--against DIR]
#        [--attach-only]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=5
ranks="2 3"
against=""
attach_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    --attach-only) attach_only=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "bench-latency.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
. "$top/scripts/bench_lib.sh"
model="$cache/latency-model-6h"
[ -f "$model/config.json" ] || "$T" synth --arch llama --out "$model" \
  --layers 4 --hidden 384 --heads 6 --kv-heads 6 --intermediate 768 \
  --vocab 1536 --force --quiet || exit 1
small="$cache/small-20k"
# 9 tensors per llama layer + 3: 2222 layers of tiny tensors ~ 20,000
# (the model scripts/bench.sh uses).
[ -f "$small/config.json" ] || "$T" synth --arch llama --out "$small" \
  --layers 2222 --hidden 64 --heads 4 --kv-heads 4 --intermediate 128 \
  --vocab 256 --force --quiet || exit 1
make -C "$build" tests/bench/attach_bench >/dev/null || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/tpload-latency.XXXXXX")
job=""
side_jobs=""
cleanup() {
  [ -n "$job" ] && kill -KILL "$job" 2>/dev/null
  for p in $side_jobs; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

# wait_ready PID READY OUT WHAT: 0 once READY exists; 1 (and OUT's tail)
# when job PID ends first.
wait_ready() {
  for _ in $(seq 3000); do
    [ -f "$2" ] && return 0
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-latency: $4 did not start:" >&2
  tail -n 5 "$3" >&2
  return 1
}

# serve N: a job on $work/sock, its mpirun's pid in $job, once every rank
# serves (the ready file is written); 1 when it does not start.
serve() {
  rm -rf "$work/sock" "$work/ready"
  mpirun --oversubscribe -np "$1" "$T" serve "$model" \
    --socket-dir "$work/sock" --ready-file "$work/ready" --quiet \
    >"$work/serve.out" 2>&1 &
  job=$!
  wait_ready "$job" "$work/ready" "$work/serve.out" "serve -np $1"
}

# ended MEASURE T0: prints MEASURE and the seconds from T0 until job $job
# has exited.
ended() {
  wait "$job"
  job=""
  echo "$1 $(since "$2")"
}

# rank_pid R: the pid of rank R of job $job.
rank_pid() {
  local p
  for p in $(pgrep -P "$job"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
        grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
  done
}

# one_run N: one figure per measure, as "MEASURE SECONDS" lines.
one_run() {
  local n=$1 t0 rc
  serve "$n" || return 1
  t0=$(now)
  mpirun --oversubscribe -np "$n" "$T" serve "$model" \
    --socket-dir "$work/sock" --ready-file "$work/ready2" --quiet \
    >/dev/null 2>&1
  rc=$?
  echo "refuse_second_serve $(since "$t0")"
  [ "$rc" -eq 73 ] || echo "bench-latency: the second serve exited $rc" >&2
  t0=$(now)
  "$T" status "$work/sock/rank0.sock" --shutdown >/dev/null
  ended status_shutdown "$t0"
  serve "$n" || return 1
  t0=$(now)
  kill -TERM "$(rank_pid 0)"
  ended sigterm_rank0 "$t0"
  serve "$n" || return 1
  t0=$(now)
  kill -TERM "$(rank_pid $((n - 1)))"
  ended "sigterm_rank$((n - 1))_only" "$t0"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# serve_small NAME TPLOAD: a 2-rank serve of $small on $work/NAME, left
# running (its pid in $side_jobs) once its ready file exists.
serve_small() {
  mpirun --oversubscribe -np 2 "$2" serve "$small" --socket-dir "$work/$1" \
    --ready-file "$work/$1.ready" --quiet >"$work/$1.out" 2>&1 &
  side_jobs="$side_jobs $!"
  wait_ready "$!" "$work/$1.ready" "$work/$1.out" "serve of $small ($1)"
}

# attach_figures: the consumer's latencies, this build (and --against's)
# alternated round by round; medians over the rounds.
attach_figures() {
  local names="new" r n m all
  serve_small new "$T" || return 1
  if [ -n "$against" ]; then
    serve_small old "$against/tpload" || return 1
    names="new old"
  fi
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
  : >"$work/attach"
  for r in $(seq "$runs"); do
    for n in $names; do
      if [ "$n" = new ]; then b="$build/tests/bench/attach_bench"
      else b="$against/attach_bench"; fi
      "$b" "$work/$n/rank0.sock" 20 --all | sed "s/^/$n /" >>"$work/attach" ||
        return 1
    done
  done
  echo "consumer latency, 20,001 tensors, 2 ranks (ms; median of $runs" \
    "rounds of 20; all rounds in brackets):"
  for n in $names; do
    for m in first attach attach_median cpu cpu_median status \
        status_median full full_median; do
      all=$(awk -v n="$n" -v m="$m" '$1 == n && $2 == m { print $3 }' \
        "$work/attach")
      [ -n "$all" ] || continue
      printf '  %-3s %-14s %9.3f ms  [%s]\n' "$n" "$m" \
        "$(echo "$all" | median)" "$(echo $all)"
    done
  done
  for n in $names; do
    a=$(awk -v n="$n" '$1 == n && $2 == "attach" { print $3 }' \
      "$work/attach" | median)
    s=$(awk -v n="$n" '$1 == n && $2 == "status" { print $3 }' \
      "$work/attach" | median)
    awk -v n="$n" -v a="$a" -v s="$s" 'BEGIN { printf "  %-3s goal ratios:" \
      " attach + lookup of all / 2 ms = %.2f, status / 5 ms = %.2f\n",
      n, a / 2, s / 5 }'
  done
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
  for p in $side_jobs; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  side_jobs=""
}

attach_figures || exit 1
[ "$attach_only" -eq 1 ] && exit 0

echo "latency (seconds, median of $runs runs; all runs in brackets):"
for n in $ranks; do
  : >"$work/figures"
  for _ in $(seq "$runs"); do one_run "$n" >>"$work/figures" || exit 1; done
  for m in $(awk '{ print $1 }' "$work/figures" | uniq | sort -u); do
    all=$(awk -v m="$m" '$1 == m { print $2 }' "$work/figures")
    printf '  N=%s %-24s %8.3f s  [%s]\n' "$n" "$m" \
      "$(echo "$all" | median)" "$(echo $all)"
  done
done
