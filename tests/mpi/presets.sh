#!/bin/sh
# presets.sh - every preset against checkpoints shaped as MLC LLM writes its
# weight directories and as Hugging Face names its tensors
# (tests/mlc_archs.py, whose tables are written from each MLC model file's
# _set_tp): for every architecture x {HF, MLC} x N in {1, 2, 4},
# `tpload plan --plan auto` must pick the architecture's preset and give
# every tensor MLC's func_name, dim, segs and shard shape; a representative
# subset is presharded and checked byte for byte by tests/oracle.py; and a
# test per refusal (a layer missing a tensor the preset must shard, a layer
# projection no rule names, a model of another architecture, indivisible or
# out-of-range sizes).  Gemma-3 comes in both transformers namings
# (language_model.model.* and, since 4.52, model.language_model.*).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

A="$TESTS_SRCDIR/oracle/mlc_archs.py"
F="$T_TMP/fixtures"
"$ORACLE" "$A" write-all "$F" && "$ORACLE" "$A" list >"$T_TMP/list" ||
  { echo "Bail out! mlc_archs.py write-all failed"; exit 99; }

# --- plans: every architecture x format x N ---------------------------------
while read -r arch fmt; do
  for n in 1 2 4; do
    if ! "$TPLOAD" plan "$F/$arch-$fmt" --shards "$n" \
      >"$F/$arch-$fmt/plan$n.json" 2>"$T_TMP/err"; then
      rm -f "$F/$arch-$fmt/plan$n.json"
      t_fail "$arch ($fmt) auto plan, $n shards" "$(head -c 2000 "$T_TMP/err")"
    fi
  done
done <"$T_TMP/list"
"$ORACLE" "$A" check-all "$F" >"$T_TMP/checks"
while read -r verdict name; do
  case "$verdict" in
  ok) t_ok "$name" ;;
  fail) t_fail "$name" "$(sed -n "/^fail $name\$/,/^[of]/p" "$T_TMP/checks" |
    grep '^#' | head -20)" ;;
  esac
done <"$T_TMP/checks"

# --- preshard bytes against the oracle (a representative subset) -----------
# The oracle reads plan.json: the expectations as one exact rule a tensor.
# tpload uses its preset (--plan auto), the oracle the table.
for case in "qwen2-mlc 2" "deepseek_v2-mlc 4" "llama4-hf 2" "gemma3+new-hf 2" \
  "deepseek_v2+mtp-hf 2"; do
  set -- $case
  t_exit "$1 N=$2: preshard --plan auto exits 0" 0 \
    mpi "$2" preshard "$F/$1" --plan auto --out "$T_TMP/out-$1" --quiet
  if "$ORACLE" "$O" check-preshard "$F/$1" "$F/$1/plan.json" "$2" \
    "$T_TMP/out-$1" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then
    t_ok "$1 N=$2: every rank's tensors match the oracle"
  else
    t_fail "$1 N=$2: every rank's tensors match the oracle" \
      "$(head -c 3000 "$T_TMP/oerr")"
  fi
done

# DeepSeek-V3's MTP layer (layer num_hidden_layers) runs after the last
# decoder layer: under --pp it is the last stage's, as vLLM runs its
# drafter there; the decoder layers keep MLC's layer // (L / P).
"$TPLOAD" plan "$F/deepseek_v2+mtp-hf" --shards 2 --tp 1 --pp 2 \
  >"$T_TMP/mtp-pp.json" 2>"$T_TMP/err"
if "$ORACLE" -c '
import json, sys
st = {p["name"]: p["pipeline_stages"] for p in json.load(open(sys.argv[1]))["params"]}
want = {"model.layers.0.input_layernorm.weight": [0],
        "model.layers.1.input_layernorm.weight": [1],
        "model.layers.2.eh_proj.weight": [1],
        "model.layers.2.mlp.experts.0.up_proj.weight": [1]}
bad = {k: st.get(k) for k, v in want.items() if st.get(k) != v}
sys.exit("stages differ: %r" % bad if bad else 0)' "$T_TMP/mtp-pp.json" \
  2>"$T_TMP/oerr"; then
  t_ok "deepseek_v3 MTP layer: on the last of 2 pipeline stages"
else
  t_fail "deepseek_v3 MTP layer: on the last of 2 pipeline stages" \
    "$(cat "$T_TMP/err" "$T_TMP/oerr")"
fi

# --skip-mtp: the main model only, as vLLM's main model loads it; the
# oracle's expectation leaves layer 2 (the MTP layer) out.
MTP="$F/deepseek_v2+mtp-hf"
"$ORACLE" -c '
import json, sys
p = json.load(open(sys.argv[1]))
p["rules"].insert(0, {"match": "model.layers.2.*", "skip": True})
json.dump(p, open(sys.argv[2], "w"))' "$MTP/plan.json" "$T_TMP/mtp-skip.json"
t_exit "deepseek_v3 --skip-mtp N=2: preshard exits 0" 0 \
  mpi 2 preshard "$MTP" --skip-mtp --out "$T_TMP/out-skip" --quiet
t_check "deepseek_v3 --skip-mtp N=2: every rank holds the main model only" \
  "$ORACLE" "$O" check-preshard "$MTP" "$T_TMP/mtp-skip.json" 2 \
  "$T_TMP/out-skip"
t_exit "deepseek_v3 --skip-mtp: verify --skip-mtp agrees" 0 \
  "$TPLOAD" verify "$MTP" "$T_TMP/out-skip" --skip-mtp --quiet
t_exit "deepseek_v3 --skip-mtp: verify without it finds the layer missing" \
  65 "$TPLOAD" verify "$MTP" "$T_TMP/out-skip" --quiet
for model in "$MTP" "$F/llama-hf"; do
  "$TPLOAD" plan "$model" --shards 2 --skip-mtp >"$T_TMP/skip.json" &&
    "$TPLOAD" plan "$model" --shards 2 >"$T_TMP/all.json" ||
    t_fail "plan --skip-mtp: $(basename "$model")" "plan failed"
  n_skip=$("$ORACLE" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["params"]))' "$T_TMP/skip.json")
  n_all=$("$ORACLE" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["params"]))' "$T_TMP/all.json")
  echo "# plan --skip-mtp $(basename "$model"): $n_skip of $n_all params"
  # the MTP layer's tensors, as the fixture lists them (none for llama)
  want=$("$ORACLE" -c 'import json,sys; print(sum(k.startswith("model.layers.2.") and "mtp" in sys.argv[2] for k in json.load(open(sys.argv[1]))))' "$model/expect.json" "$model")
  [ "$((n_all - n_skip))" = "$want" ] && ok=1 || ok=0
  if [ "$ok" = 1 ]; then t_ok "plan --skip-mtp: $(basename "$model") as expected"
  else t_fail "plan --skip-mtp: $(basename "$model")" "$n_skip of $n_all"; fi
done

# --- refusals ---------------------------------------------------------------
# refused NAME ARCH FMT FRAGMENT N [write options...]: a fixture changed by
# the write options must be refused (exit 65) with FRAGMENT in the message.
refused() {
  local name=$1 arch=$2 fmt=$3 frag=$4 n=$5 dir
  shift 5
  dir="$T_TMP/r-$(echo "$name" | tr -c 'a-z0-9' '_')"
  "$ORACLE" "$A" write "$arch" "$fmt" "$dir" "$@" ||
    { t_fail "$name: fixture" "mlc_archs.py write failed"; return; }
  t_exit "$name: exit 65" 65 "$TPLOAD" plan "$dir" --shards "$n"
  if grep -qF -- "$frag" "$T_TMP/err"; then
    t_ok "$name: message names $frag"
  else
    t_fail "$name: message names $frag" "$(cat "$T_TMP/err")"
  fi
}

refused "deepseek_v3 layers past its MTP layers" deepseek_v2+mtp hf \
  "expected layers 0..0, or 0..1 with the multi-token-prediction layers" 2 \
  --set num_hidden_layers=1
refused "deepseek_v3 MTP layer without num_nextn_predict_layers" \
  deepseek_v2+mtp hf "tensor 'model.layers.2." 2 \
  --set num_nextn_predict_layers=0
refused "llama hf quantized with awq" llama hf \
  "quant_method 'awq': expected a method tpload shards" 2 \
  --set 'quantization_config={"quant_method": "awq"}'
refused "qwen2 mlc without layer 1's c_attn" qwen2 mlc \
  "layer 1: expected a tensor matching '*.self_attn.c_attn.weight'" 2 \
  --drop model.layers.1.self_attn.c_attn.weight
refused "phi3 mlc with an unknown layer projection" phi3 mlc \
  "tensor 'transformer.h.0.mixer.extra_proj.weight'" 2 \
  --add transformer.h.0.mixer.extra_proj.weight=16x16
# The silent mis-shard of issue 8: a qwen2 MLC directory under llama's
# qkv_proj names would have gone out unsharded; now it is refused.
refused "qwen2 mlc under llama's qkv_proj" qwen2 mlc \
  "tensor 'model.layers.0.self_attn.qkv_proj.weight'" 2 \
  --add model.layers.0.self_attn.qkv_proj.weight=32x16
refused "deepseek_v2 mlc MoE layer without moe_down_proj" deepseek_v2 mlc \
  "layer 1: expected a tensor matching '*.mlp.moe_down_proj.weight'" 2 \
  --drop model.layers.1.mlp.moe_down_proj.weight
# Dense vs MoE layers as the config places them: with
# first_k_dense_replace 0 layer 0 must be a MoE layer, but it holds a dense
# MLP.
refused "deepseek_v2 mlc layer 0 dense against first_k_dense_replace 0" \
  deepseek_v2 mlc \
  "layer 0: expected a tensor matching '*.mlp.shared_experts.gate_up_proj" 2 \
  --set first_k_dense_replace=0
refused "llama4 hf layer 0 dense against interleave_moe_layer_step 1" \
  llama4 hf "layer 0: expected a tensor matching '*.feed_forward.experts" 2 \
  --set interleave_moe_layer_step=1
refused "llama4 hf MoE layer without the shared expert" llama4 hf \
  "'*.feed_forward.shared_expert.gate_proj.weight'" 2 \
  --drop language_model.model.layers.1.feed_forward.shared_expert.gate_proj.weight
refused "preset names the file" gpt2 hf "preset gpt2 (" 2 \
  --drop transformer.h.1.mlp.c_fc.weight
refused "kv heads of 2^32" llama hf \
  "'num_key_value_heads' to be a positive integer below 2^32" 1 \
  --set num_key_value_heads=4294967296
refused "deepseek_v2 heads not divisible by 3" deepseek_v2 mlc \
  "num_attention_heads = 8: expected a multiple of the 3 shards" 3
refused "qwen3_moe moe_intermediate_size not divisible by 4" qwen3_moe hf \
  "moe_intermediate_size = 6: expected a multiple of the 4 shards" 4 \
  --set moe_intermediate_size=6
refused "qwen2_moe shared expert size not divisible by 4" qwen2_moe mlc \
  "shared_expert_intermediate_size = 10: expected a multiple" 4 \
  --set shared_expert_intermediate_size=10
refused "qwen odd intermediate_size" qwen mlc \
  "'intermediate_size' = 47 to be even" 1 --set intermediate_size=47
refused "chatglm3 kv groups not divisible by 3" chatglm3 mlc \
  "multi_query_group_num = 4: expected a multiple of the 3 shards" 3 \
  --set num_attention_heads=12

# No layer at all matches the preset: refused, naming a glob it expected.
mkdir "$T_TMP/nolayers"
"$ORACLE" - "$T_TMP/nolayers" "$TESTS_SRCDIR/oracle" <<'EOF'
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import npst
d = sys.argv[1]
npst.write(os.path.join(d, "model.safetensors"),
           {"model.embed_tokens.weight": np.zeros((40, 16), np.float16),
            "model.norm.weight": np.zeros(16, np.float16)})
json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 16,
           "num_attention_heads": 4, "intermediate_size": 24},
          open(os.path.join(d, "config.json"), "w"))
EOF
t_exit "a llama without layers: exit 65" 65 \
  "$TPLOAD" plan "$T_TMP/nolayers" --shards 2
grep -qF "expected layer tensors such as '*.self_attn.q_proj.weight'" \
  "$T_TMP/err" && t_ok "a llama without layers: message names a glob" ||
  t_fail "a llama without layers: message names a glob" "$(cat "$T_TMP/err")"

# Another architecture's checkpoint under a preset: nothing matches.
"$ORACLE" "$A" write gpt2 hf "$T_TMP/gpt2-as-llama" \
  --set intermediate_size=64
t_exit "gpt2 checkpoint under --plan llama: exit 65" 65 \
  "$TPLOAD" plan "$T_TMP/gpt2-as-llama" --shards 2 --plan llama
grep -qF "preset llama" "$T_TMP/err" &&
  grep -qF "tensor 'transformer.h." "$T_TMP/err" &&
  t_ok "gpt2 under llama: message names the preset and a tensor" ||
  t_fail "gpt2 under llama: message names the preset and a tensor" \
    "$(cat "$T_TMP/err")"
# A plan file is not a preset: no per-layer check.
t_exit "a plan file is not checked as a preset" 0 \
  "$TPLOAD" plan "$T_TMP/gpt2-as-llama" --shards 2 \
  --plan "$F/gpt2-hf/plan.json"
t_done
