#!/bin/sh
# interleaved.sh - fused tensors stored interleaved (gpt-oss's MXFP4
# experts: gate and up rows alternate; GPT-NeoX's per-head q/k/v) against
# plan files: segs, which
# assume consecutive parts, are refused before any byte moves (they gave
# every rank the wrong rows with exit 0), as is a slice that splits a
# gate/up pair; `"interleave": 2` delivers each rank what vLLM's
# gpt_oss.py gives it, checked by tests/oracle/gpt_oss.py, and so does
# the gpt_oss preset for the whole layer, its row-parallel biases under
# --bias-policy vllm too; the experts' forward pass over each rank's
# dequantized MXFP4 blocks (gpt_oss.py forward) equals the full one's.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

# msg_has NAME ERE: the last command's stderr matches ERE.
msg_has() {
  if grep -qE -- "$2" "$T_TMP/err"; then t_ok "$1"
  else t_fail "$1" "expected /$2/ in:" "$(head -c 2000 "$T_TMP/err")"; fi
}

G="$TESTS_SRCDIR/oracle/gpt_oss.py"
D="$T_TMP/gpt-oss"
"$ORACLE" "$G" write "$D" 64 ||
  { echo "Bail out! gpt_oss.py write failed"; exit 99; }

t_exit "gpt-oss gate_up under segs [I, I]: exit 65" 65 \
  "$TPLOAD" plan "$D" --shards 2 --plan "$D/plan-segs.json"
msg_has "gpt-oss segs: the message names the layout and the fix" \
  'gate_up_proj_(blocks|scales|bias).*interleaves gate and up rows.*"interleave": 2'
t_exit "gpt-oss segs: preshard refused before any output" 65 \
  mpi 2 preshard "$D" --plan "$D/plan-segs.json" --out "$T_TMP/segs" --quiet
t_check "gpt-oss segs: no output written" \
  test ! -e "$T_TMP/segs/rank0.safetensors"

for plan in interleave plain; do
  out="$T_TMP/out-$plan"
  t_exit "gpt-oss plan-$plan N=2: preshard exits 0" 0 \
    mpi 2 preshard "$D" --plan "$D/plan-$plan.json" --out "$out" --quiet
  if "$ORACLE" "$G" check "$D" "$out" 2 2>"$T_TMP/oerr"; then
    t_ok "gpt-oss plan-$plan N=2: every rank holds vLLM's rows, gate/up paired"
  else
    t_fail "gpt-oss plan-$plan N=2: every rank holds vLLM's rows, gate/up paired" \
      "$(head -c 2000 "$T_TMP/oerr")"
  fi
done

# The gpt_oss preset (--plan auto from GptOssForCausalLM): attention by
# heads (sinks too), the router whole, the MXFP4 experts as above, the
# row-parallel biases summing back to the bias.
t_exit "gpt-oss --plan auto N=2: preshard exits 0" 0 \
  mpi 2 preshard "$D" --out "$T_TMP/out-auto" --quiet
if "$ORACLE" "$G" check-all "$D" "$T_TMP/out-auto" 2 2>"$T_TMP/oerr"; then
  t_ok "gpt-oss --plan auto N=2: every tensor as vLLM's gpt_oss.py loads it"
else
  t_fail "gpt-oss --plan auto N=2: every tensor as vLLM's gpt_oss.py loads it" \
    "$(head -c 2000 "$T_TMP/oerr")"
fi
# --bias-policy vllm: o_proj's bias whole on both ranks, the experts' down
# bias on rank 0 only (the preset's rank0 rule, vLLM's loader).
t_exit "gpt-oss --plan auto N=2 --bias-policy vllm: preshard exits 0" 0 \
  mpi 2 preshard "$D" --out "$T_TMP/out-vllm" --bias-policy vllm --quiet
if "$ORACLE" "$G" check-all "$D" "$T_TMP/out-vllm" 2 vllm 2>"$T_TMP/oerr"
then
  t_ok "gpt-oss --bias-policy vllm N=2: biases as vLLM's gpt_oss.py holds them"
else
  t_fail "gpt-oss --bias-policy vllm N=2: biases as vLLM's gpt_oss.py holds them" \
    "$(head -c 2000 "$T_TMP/oerr")"
fi
t_exit "gpt-oss check-all vllm refuses the default (scaled) biases" 1 \
  "$ORACLE" "$G" check-all "$D" "$T_TMP/out-auto" 2 vllm
# The MoE MLP's forward pass: each rank's MXFP4 blocks dequantized with
# the scales it received, summed over the ranks = the full checkpoint's.
for out in out-auto out-vllm; do
  t_check "gpt-oss $out N=2: the MXFP4 experts' forward pass over the shards" \
    "$ORACLE" "$G" forward "$D" "$T_TMP/$out" 2
done
t_exit "gpt-oss N=2 with another rank's scales: NO match" 1 \
  "$ORACLE" "$G" forward "$D" "$T_TMP/out-auto" 2 --swap-scales
# Negative control: the interleave plan replicates attention and sinks.
t_exit "gpt-oss check-all refuses a plan that leaves the heads whole" 1 \
  "$ORACLE" "$G" check-all "$D" "$T_TMP/out-interleave" 2

# An odd intermediate size: 6 interleaved rows cut 2 ways would split a
# pair, with or without "interleave" (the architecture says so).
"$ORACLE" "$G" write "$T_TMP/odd" 3 ||
  { echo "Bail out! gpt_oss.py write failed"; exit 99; }
echo '{"rules": [{"match": "*.gate_up_proj_bias", "dim": 1}]}' \
  >"$T_TMP/odd/p.json"
t_exit "gpt-oss 3 gate/up pairs over 2 shards: exit 65" 65 \
  "$TPLOAD" plan "$T_TMP/odd" --shards 2 --plan "$T_TMP/odd/p.json"
msg_has "gpt-oss odd pairs: the message names the groups" \
  "3 rows along dim 1 to be whole groups of 2"
# GPT-NeoX's HF query_key_value is [heads, 3, head_dim] flattened: segs
# [q, k, v] would take one head's q, k and v for "q"; refused (MLC's
# converter de-interleaves it, so MLC directories take MLC's segs).
"$ORACLE" "$TESTS_SRCDIR/oracle/mlc_archs.py" write gpt_neox hf "$T_TMP/neox" ||
  { echo "Bail out! mlc_archs.py write failed"; exit 99; }
"$ORACLE" -c '
import json, sys
d = sys.argv[1]
rows = json.load(open(d + "/expect.json"))[
    "gpt_neox.layers.0.attention.query_key_value.weight"][0][0]
json.dump({"rules": [{"match": "*.attention.query_key_value.weight",
                      "dim": 0, "segs": [rows // 3] * 3}]},
          open(d + "/segs.json", "w"))' "$T_TMP/neox"
t_exit "gpt_neox hf query_key_value under segs: exit 65" 65 \
  "$TPLOAD" plan "$T_TMP/neox" --shards 2 --plan "$T_TMP/neox/segs.json"
msg_has "gpt_neox segs: the message says q, k, v are fused per head" \
  "query_key_value.weight': expected no segs.*fuses q, k and v per head"
t_done
