#!/bin/bash
# bench-reshard.sh - re-shard against preshard from the original (issue
# 40's goal: <= 1.1x), not a test.
#
# Synthesizes once (cached in $TPLOAD_BENCH_DIR, default /tmp/tpload-bench)
# the ~1 GiB Llama-shaped bf16 checkpoint (hf) and an MLC weight
# directory of the same shape (synth --format mlc), cuts each at 4
# (`preshard --layout rank` of the hf one, `--layout mlc` of the MLC one),
# then, alternated run by run, `preshard` at 2 ranks of:
#   orig      the hf original
#   rank4     its N=4 rank layout as MODEL
#   mlc-orig  the MLC original
#   mlc4      its N=4 MLC presharded cache as MODEL
#   cat       the floor: `cat` of each input's files (the hf original's,
#             the rank layout's) to /dev/null
# warm (every input's files read once before) and, as root, cold (the
# page cache dropped before every timed run: sync; echo 3 >
# /proc/sys/vm/drop_caches), each timed run after the memory warm step of
# bench.sh (bench-peers.py warm: twice the model's bytes touched and
# freed, so no contestant pays this VM's cold-memory faults).  Prints medians of wall seconds and of the
# report's seconds ("job", the slowest rank's), the ratios to the goal,
# and rank 0's read mode/alignment per run kind, then a Markdown table
# (what docs/PERFORMANCE.md shows).
# Usage: scripts/bench-reshard.sh [--gib X] [--runs R] [--no-cold]
#                                 [--tpload BIN]
#   --tpload BIN  time another build's tpload (e.g. main's) instead
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
gib=1
runs=3
cold=1
bin=
while [ $# -gt 0 ]; do
  case $1 in
  --gib) gib=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --no-cold) cold=; shift ;;
  --tpload) bin=$2; shift 2 ;;
  *) echo "usage: $0 [--gib X] [--runs R] [--no-cold] [--tpload BIN]" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench_lib.sh
. "$top/scripts/bench_lib.sh"
[ -z "$bin" ] || T=$bin
[ "$(id -u)" -eq 0 ] || cold=
MPIRUN="mpirun --oversubscribe"
calc() { echo "$1" | bc -l; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1}
  END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { $PY -c "import json,sys; r=json.load(sys.stdin); print($1)"; }
files_of() { find "$1" -maxdepth 1 -type f \( -name '*.safetensors' \
  -o -name '*.bin' \) | sort; }

# inputs: the originals and their cuts at 4, made the first time.
orig=$(synth_llama "$gib")
mlc="$cache/llama-${gib}g-mlc"
[ -f "$mlc/mlc-chat-config.json" ] || "$T" synth --arch llama --format mlc \
  --hidden 2048 --heads 16 --kv-heads 8 --intermediate 5632 --vocab 32000 \
  --gib "$gib" --out "$mlc" --force --quiet
rank4="$cache/llama-${gib}g-rank4"
[ -f "$rank4/shard-info.json" ] || $MPIRUN -np 4 "$T" preshard "$orig" \
  --out "$rank4" --force --quiet
mlc4="$cache/llama-${gib}g-mlc4"
[ -f "$mlc4/mlc-chat-config.json" ] || $MPIRUN -np 4 "$T" preshard "$mlc" \
  --out "$mlc4" --layout mlc --force --quiet
out="$cache/reshard-out"
warm_bytes=$((2 * $(du -sb "$orig" | cut -f1)))
kinds="orig rank4 mlc-orig mlc4"
input_of() {
  case $1 in
  orig) echo "$orig" ;;
  rank4) echo "$rank4" ;;
  mlc-orig) echo "$mlc" ;;
  mlc4) echo "$mlc4" ;;
  esac
}

# drop TEMP: the page cache dropped when cold; the memory warmed.
drop() {
  if [ "$1" = cold ]; then
    sync
    echo 3 >/proc/sys/vm/drop_caches
  fi
  $PY "$top/scripts/bench-peers.py" warm "$warm_bytes"
}

# one TEMP KIND: "wall job modes" of a preshard at 2 of KIND's input.
one() {
  local s e j
  drop "$1"
  rm -rf "$out"
  s=$(date +%s.%N)
  j=$($MPIRUN -np 2 "$T" preshard "$(input_of "$2")" --out "$out" --json \
    --quiet)
  e=$(date +%s.%N)
  echo "$(calc "$e - $s") $(echo "$j" | field 'r["seconds"]') $(echo "$j" |
    field '",".join(sorted(set("%s/%d" % (x["mode"], x.get("align", 0)) for x in r["ranks"][0]["reads"])))')"
}

# cat_floor TEMP MODEL: seconds `cat` of MODEL's files takes.
cat_floor() {
  local s e
  drop "$1"
  s=$(date +%s.%N)
  # shellcheck disable=SC2046
  cat $(files_of "$2") >/dev/null
  e=$(date +%s.%N)
  calc "$e - $s"
}

rows=()
bench() { # TEMP
  local temp=$1 k r o cw=() cr=() wall job ratio_w ratio_j
  declare -A W J M
  for _ in $(seq "$runs"); do
    for k in $kinds; do
      o=$(one "$temp" "$k")
      W[$k]="${W[$k]:-} ${o%% *}"
      r=${o#* }
      J[$k]="${J[$k]:-} ${r%% *}"
      M[$k]=${r#* }
    done
    cw+=("$(cat_floor "$temp" "$orig")")
    cr+=("$(cat_floor "$temp" "$rank4")")
  done
  echo "$temp: preshard at 2, median of $runs, wall / job seconds:"
  for k in $kinds; do
    wall=$(echo "${W[$k]}" | median) job=$(echo "${J[$k]}" | median)
    printf '  %-9s %7.2f / %5.2f   rank 0 read %s\n' "$k" "$wall" "$job" \
      "${M[$k]}"
    W[$k]=$wall J[$k]=$job
  done
  printf '  %-9s %7.2f (original) %5.2f (rank layout)\n' cat \
    "$(echo "${cw[*]}" | median)" "$(echo "${cr[*]}" | median)"
  ratio_w=$(calc "${W[rank4]} / ${W[orig]}")
  ratio_j=$(calc "${J[rank4]} / ${J[orig]}")
  printf '  rank4 / orig: wall %.2fx, job %.2fx [<=1.1]\n' "$ratio_w" "$ratio_j"
  printf '  mlc4 / mlc-orig: wall %.2fx, job %.2fx [<=1.1]\n' \
    "$(calc "${W[mlc4]} / ${W[mlc-orig]}")" \
    "$(calc "${J[mlc4]} / ${J[mlc-orig]}")"
  rows+=("$(printf '| %s | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2fx / %.2fx | %.2fx / %.2fx |' \
    "$temp" "${W[orig]}" "${J[orig]}" "${W[rank4]}" "${J[rank4]}" \
    "${W[mlc-orig]}" "${J[mlc-orig]}" "${W[mlc4]}" "${J[mlc4]}" \
    "$(echo "${cw[*]}" | median)" "$(echo "${cr[*]}" | median)" \
    "$ratio_w" "$ratio_j" "$(calc "${W[mlc4]} / ${W[mlc-orig]}")" \
    "$(calc "${J[mlc4]} / ${J[mlc-orig]}")")")
}

echo "re-shard bench: ${gib} GiB llama bf16, preshard at 2 ranks; page" \
  "size $(getconf PAGESIZE) bytes; $(date -u '+%Y-%m-%d %H:%M UTC'), load" \
  "average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2046
cat $(files_of "$orig") $(files_of "$rank4") $(files_of "$mlc") \
  $(files_of "$mlc4") >/dev/null 2>&1 || true
bench warm
[ -z "$cold" ] || bench cold
echo
echo "| cache | from original wall / job | from N=4 rank layout | from MLC original | from N=4 MLC cache | cat original / rank layout | rank4 / orig wall / job | mlc4 / mlc-orig wall / job |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "load average now $(cut -d' ' -f1-3 /proc/loadavg)"
