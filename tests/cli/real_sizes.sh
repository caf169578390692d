#!/bin/sh
# real_sizes.sh - `tpload plan --shards N`, N = 2..32, on header-only
# checkpoints at the real sizes of DeepSeek-V3 (FP8 blocks, MLA, its MTP
# layer), Qwen3-30B-A3B-FP8, Qwen3-235B-A22B-FP8, gpt-oss-120b (MXFP4)
# and Llama-3.1-70B (tests/oracle/real_sizes.py): every N is accepted
# or refused as the table written from vLLM's rules says, refusals with
# exit 65.  Where vLLM pads an uneven split (gpt-oss's 90 MXFP4 blocks)
# tpload's equal cut refuses; the table marks those.  Then the same with
# --ep (expert parallelism, EP size = N) for the MoE models: the routed
# experts go whole, so only the rules of what is still cut apply.
. "$TESTS_SRCDIR/lib/lib.sh"

R="$T_TMP/real"
"$ORACLE" "$TESTS_SRCDIR/oracle/real_sizes.py" write "$R" ||
  { echo "Bail out! real_sizes.py write failed"; exit 99; }
# accepted COLUMN: the N the table accepts for $model in COLUMN.
accepted() {
  awk -v m="$model" -v c="$1" '$1 == m && $c == "accept" {
    printf "%s%s", s, $2; s = ","}' "$R/expect.txt"
}
# check_model MODEL VLLM_COL WANT_COL [--ep]: one check, every N of
# MODEL planned, against the table's columns.
check_model() {
  local model=$1 vcol=$2 wcol=$3 wrong="" n vllm want rc got
  shift 3
  awk -v m="$model" -v v="$vcol" -v w="$wcol" '$1 == m { print $2, $v, $w }' \
    "$R/expect.txt" >"$T_TMP/rows"
  while read -r n vllm want; do
    "$TPLOAD" plan "$R/$model" --shards "$n" "$@" >/dev/null 2>"$T_TMP/err"
    rc=$?
    case $rc in 0) got=accept ;; 65) got=refuse ;; *) got="exit $rc" ;; esac
    [ "$got" = "$want" ] ||
      wrong="$wrong N=$n: expected $want (vLLM: $vllm), got $got: $(head -c 300 "$T_TMP/err");"
  done <"$T_TMP/rows"
  if [ -z "$wrong" ]; then
    t_ok "$model${1:+ $1}: N = 2..32 as vLLM's rules say: accepted at $(
      accepted "$wcol"), vLLM at $(accepted "$vcol")"
  else
    t_fail "$model${1:+ $1}: N = 2..32 as vLLM's rules say" "$wrong"
  fi
}
for model in $(cut -d' ' -f1 "$R/expect.txt" | uniq); do
  check_model "$model" 3 4
  [ "$(awk -v m="$model" '$1 == m { print $5; exit }' "$R/expect.txt")" = - ] ||
    check_model "$model" 5 6 --ep
done
t_done
