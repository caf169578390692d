#!/bin/sh
# real_sizes.sh - `tpload plan --shards N`, N = 2..32, on header-only
# checkpoints at the real sizes of DeepSeek-V3 (FP8 blocks, MLA, its MTP
# layer), Qwen3-30B-A3B-FP8, Qwen3-235B-A22B-FP8, gpt-oss-120b (MXFP4)
# and Llama-3.1-70B (tests/oracle/real_sizes.py): every N is accepted
# or refused as the table written from vLLM's rules says, refusals with
# exit 65.  Where vLLM pads an uneven split (gpt-oss's 90 MXFP4 blocks)
# tpload's equal cut refuses; the table marks those.
. "$TESTS_SRCDIR/lib/lib.sh"

R="$T_TMP/real"
"$ORACLE" "$TESTS_SRCDIR/oracle/real_sizes.py" write "$R" ||
  { echo "Bail out! real_sizes.py write failed"; exit 99; }
# accepted COLUMN: the N the table accepts for $model in COLUMN.
accepted() {
  awk -v m="$model" -v c="$1" '$1 == m && $c == "accept" {
    printf "%s%s", s, $2; s = ","}' "$R/expect.txt"
}
# One check per model: every N in one line of output.
for model in $(cut -d' ' -f1 "$R/expect.txt" | uniq); do
  wrong=""
  while read -r m n vllm want; do
    [ "$m" = "$model" ] || continue
    "$TPLOAD" plan "$R/$m" --shards "$n" >/dev/null 2>"$T_TMP/err"
    rc=$?
    case $rc in 0) got=accept ;; 65) got=refuse ;; *) got="exit $rc" ;; esac
    [ "$got" = "$want" ] ||
      wrong="$wrong N=$n: expected $want (vLLM: $vllm), got $got: $(head -c 300 "$T_TMP/err");"
  done <"$R/expect.txt"
  if [ -z "$wrong" ]; then
    t_ok "$model: N = 2..32 as vLLM's rules say: accepted at $(
      accepted 4), vLLM at $(accepted 3)"
  else
    t_fail "$model: N = 2..32 as vLLM's rules say" "$wrong"
  fi
done
t_done
