#!/bin/bash
# bench-cluster.sh - tpload across shaped links against the bytes' floor
# (not a test).  Builds the tests' cluster (tests/lib/cluster_lib.sh: K=4
# node namespaces, 2 ranks each, tbf links at --rate each way, a store
# namespace running nginx on a link 4 x as fast), synthesizes once
# (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench) a Llama-shaped
# bf16 checkpoint of about --mib M (512) in 2 files, and runs, alternated run
# by run (8 ranks, the llama rules of tests/lib/mpi_lib.sh):
#   tp8-disk        TP 8 across the nodes, rank 0 reads its disk
#   tp8-url         TP 8, rank 0 reads the store's URL
#   tp8-url-local   TP 8, every rank reads the URL (--read local)
#   dp4-url         TP 2 x DP 4 (one replica a node) from the URL
#   dp4-url-local   the same, --read local
#   download-first  every node curls every file from the store at once,
#                   then TP 8 `load --read local` of a local copy (the
#                   time is the download's wall + the load's own)
# For each: the median job time (the report's seconds), the floor (the
# bytes the busiest link must carry / its rate: each link's least bytes
# from tests/oracle/cluster_grid_bytes.py, the numpy oracle) and
# floor / time; bytes per link (the /sys counters of every node's veth)
# against that minimum; per-rank CPU seconds per GiB.  Prints a markdown
# table, and with --json FILE writes the figures to FILE as one JSON
# object (scripts/bench-cluster.py).
# Usage: scripts/bench-cluster.sh [--mib M] [--runs R] [--rate 400mbit |
#                                 --gbit] [--only "NAME ..."] [--json FILE]
#                                 [--extra "LOAD OPTIONS"] [--base TPLOAD]
# --extra: more `tpload load` options for every contestant (a tuning run:
# --extra "--chunk-mib 192").  --base: every contestant runs a second
# time as NAME@base with another build's binary (main's, for a before /
# after), the two alternated run by run.
# Must run as root (network namespaces).  CL_DELAY / CL_LOSS (netem's
# "delay 2ms", "loss 0.1%") shape the links too where the kernel has netem;
# the output's first line says whether it does (this one has none).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mib=512
runs=3
rate=400mbit
json=""
extra=""
base=""
only="tp8-disk tp8-url tp8-url-local dp4-url dp4-url-local download-first"
while [ $# -gt 0 ]; do
  case "$1" in
    --mib) mib=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --gbit) rate=1gbit; shift ;;
    --only) only=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    --base) base=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-cluster.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
K=4
NP=8
. "$top/scripts/bench_lib.sh"
# A Llama shape with a small vocabulary, so that --mib 128 is 128 MiB
# (bench_lib.sh's 32,000 tokens alone take 250 MiB).
model=$cache/cluster-llama-${mib}m
[ -f "$model/config.json" ] || "$T" synth --arch llama --out "$model" \
  --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 --vocab 8000 \
  --gib "$(echo "scale=4; $mib / 1024" | bc)" --files 2 --force --quiet

# What cluster_lib.sh needs of the tests' lib.sh and http_lib.sh, as
# scripts/cluster.sh gives it.
wait_until() {
  local i
  for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done
  return 1
}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
MPIRUN=mpirun
TPLOAD=$T
CL_ID=bench$$
work=$(mktemp -d /tmp/tpload-bench-cluster.XXXXXX)
CL_DIR=$work/cluster
. "$top/tests/lib/cluster_lib.sh"
eval "$(sed -n '/^nginx_conf() {/,/^CONF$/p' "$top/tests/lib/http_lib.sh"
  echo '}')"
eval "$(sed -n '/^llama_grid_plan() {/,/^}/p' "$top/tests/lib/mpi_lib.sh")"
if why=$(cl_unable); then
  echo "bench-cluster.sh: no cluster: $why" >&2
  exit 1
fi
trap 'cl_down; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

plan=$work/plan.json
llama_grid_plan "$plan"
rate_n=${rate%%[a-z]*}
cl_up $K "$rate" >"$work/up.out"
cl_store_up "$(dirname "$model")" "$((rate_n * 4))${rate#"$rate_n"}"
url=$CL_URL/$(basename "$model")
links=$(cl_links_line | sed 's/^# //')${extra:+; load options: $extra}

# The least bytes each link must carry: the oracle's figures for TP 8 and
# TP 2 x DP 4 in block order.
"$PY" "$top/tests/oracle/cluster_grid_bytes.py" "$model" "$plan" $NP 8 1 1 \
  $K >"$work/tp8.want"
"$PY" "$top/tests/oracle/cluster_grid_bytes.py" "$model" "$plan" $NP 2 1 1 \
  $K >"$work/dp4.want"

# timed NAME RUN CMD...: CMD's wall seconds and the links' counters
# before and after, into $work/NAME.RUN.{b0,b1,wall}; its stdout in .out.
timed() {
  local f=$work/$1.$2 t0 t1; shift 2
  cl_bytes_all "$f.b0"
  t0=$(date +%s.%N)
  "$@" >"$f.out" 2>"$f.err" || { echo "$f: exit $?" >&2; cat "$f.err" >&2; }
  t1=$(date +%s.%N)
  cl_bytes_all "$f.b1"
  echo "$t1 - $t0" | bc >"$f.wall"
}

# download NODES_DIR: every node fetches every file of the model from
# the store into its own directory, all nodes and files at once.
download() {
  local k f pids=""
  for k in $(seq 0 $((K - 1))); do
    rm -rf "$1/n$k" && mkdir -p "$1/n$k"
    for f in $(cd "$model" && ls); do
      cl_exec "n$k" curl -sf -o "$1/n$k/$f" "$url/$f" &
      pids="$pids $!"
    done
  done
  # shellcheck disable=SC2086
  wait $pids
}

# contestant NAME RUN: one timed run of NAME (NAME@base: with $base).
contestant() {
  local tp8="$plan --json --quiet $extra" dp4
  dp4="$plan --tp 2 --json --quiet $extra"
  TPLOAD=$T
  case $1 in *@base) TPLOAD=$base ;; esac
  # shellcheck disable=SC2086
  case ${1%@base} in
  tp8-disk) timed "$@" cl_mpi $NP load "$model" --plan $tp8 ;;
  tp8-url) timed "$@" cl_mpi $NP load "$url" --plan $tp8 ;;
  tp8-url-local) timed "$@" cl_mpi $NP load "$url" --read local --plan $tp8 ;;
  dp4-url) timed "$@" cl_mpi $NP load "$url" --plan $dp4 ;;
  dp4-url-local) timed "$@" cl_mpi $NP load "$url" --read local --plan $dp4 ;;
  download-first)
    timed "$1-dl" "$2" download "$work/dl"
    timed "$@" cl_mpi $NP load "$work/dl/n0" --read local --plan $tp8
    # Its 4 copies written back now, untimed, not during the contestants
    # after it (2 GiB of dirty pages flushed under them cost tp8-url-local
    # 0.74 against 0.83 of its floor alone).
    sync
    ;;
  *) echo "bench-cluster.sh: no contestant $1" >&2; exit 64 ;;
  esac
}

cat "$model"/*.safetensors >/dev/null # the page cache, for every side
# order R: the contestants of run R; with --base each beside its base
# build, which goes first every other run: a run leaves the machine's
# memory and caches in a state the next one meets (on a VM whose free
# memory returns to the host, its store's pages cost the next 1-3 CPU-s a
# rank), so neither build always follows the other.
order() {
  local c
  for c in $only; do
    if [ -z "$base" ]; then echo "$c"
    elif [ $(($1 % 2)) = 1 ]; then echo "$c $c@base"
    else echo "$c@base $c"; fi
  done
}
for r in $(seq "$runs"); do
  for c in $(order "$r"); do
    contestant "$c" "$r"
    echo "run $r: $c $(cat "$work/$c.$r.wall") s wall" >&2
  done
done
# shellcheck disable=SC2086
"$PY" "$top/scripts/bench-cluster.py" ${json:+--json "$json"} \
  --work "$work" --runs "$runs" --rate "$rate" --nodes $K --links "$links" \
  --model "$model" --commit "$(git -C "$top" rev-parse --short HEAD)" $(order 1)
