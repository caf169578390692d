#!/bin/sh
# kv_replicas.sh - kv heads fewer than the shards (issue 36): each rank's
# bytes of HF llama (separate k/v), qwen2 (k/v biases) and phi3 (fused
# qkv_proj) checkpoints against the numpy oracle's expectation of vLLM's
# loaders (oracle.py kv-plan: QKVParallelLinear's shard_rank = tp_rank //
# num_kv_head_replicas), at N = 2 x and 4 x the kv heads, by rank 0's
# stream and by --read local, then `verify` (an FP8 block checkpoint's
# quantization named by load's summary and report and by inspect); the
# k/v slices are large
# enough (>= 64 KiB a rank) for rank 0 to read its own ones straight
# into its store, which a replicated head's other holders must not miss.
# Refusals: kv heads that neither divide N nor are divided by it, with
# both numbers; an MLC directory (MLC's rule), naming MLC.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

SIZES="--layers 1 --hidden 512 --heads 8 --intermediate 512 --vocab 64"
SIZES="$SIZES --dtype f32 --quiet"

# kv_case NAME ARCH KV N [preshard options...]: a synth checkpoint with KV
# kv heads, presharded N ways, checked byte for byte against the oracle.
kv_case() {
  local name=$1 arch=$2 kv=$3 n=$4 key
  key=$(echo "$name" | tr -c 'a-zA-Z0-9' '_')
  local out="$T_TMP/out-$key" plan="$T_TMP/plan-$key.json"
  shift 4
  # shellcheck disable=SC2086
  [ -d "$M/$arch-$kv" ] || "$TPLOAD" synth --arch "$arch" --out "$M/$arch-$kv" \
    --kv-heads "$kv" $SIZES ||
    { echo "Bail out! synth $arch --kv-heads $kv failed"; exit 99; }
  "$ORACLE" "$O" kv-plan "$M/$arch-$kv" "$n" "$plan" ||
    { echo "Bail out! oracle.py kv-plan $name failed"; exit 99; }
  t_exit "$name: preshard exits 0" 0 \
    mpi "$n" preshard "$M/$arch-$kv" --out "$out" --quiet "$@"
  t_oracle "$name: every rank's tensors match vLLM's cut (oracle)" \
    check-preshard "$M/$arch-$kv" "$plan" "$n" "$out"
}

kv_case "llama 2 kv heads N=4" llama 2 4
kv_case "llama 1 kv head N=4" llama 1 4
kv_case "qwen2 2 kv heads N=4 (k/v biases)" qwen2 2 4
kv_case "phi3 2 kv heads N=4 (fused qkv_proj)" phi3 2 4
kv_case "phi3 1 kv head N=4 (fused qkv_proj)" phi3 1 4
kv_case "llama 2 kv heads N=4 --read local" llama 2 4 --read local
# FP8 block scales (Qwen3-30B-A3B-FP8's layout: head_dim 128 = one
# block): a rank's k_proj / v_proj weight_scale_inv rows are its kv
# head's.
"$ORACLE" - "$M/fp8" "$TESTS_SRCDIR/oracle" <<'PY' ||
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import npst
import oracle
d, (E, H, KV, D, I) = sys.argv[1], (512, 4, 2, 128, 512)
rng = np.random.default_rng(36)
t = oracle.one_layer_frame(rng, E)
p = "model.layers.0."
for n, rows, cols in (("self_attn.q_proj", H * D, E),
                      ("self_attn.k_proj", KV * D, E),
                      ("self_attn.v_proj", KV * D, E),
                      ("self_attn.o_proj", E, H * D), ("mlp.gate_proj", I, E),
                      ("mlp.up_proj", I, E), ("mlp.down_proj", E, I)):
    t[p + n + ".weight"] = rng.integers(0, 256, (rows, cols), np.uint8)
    t[p + n + ".weight_scale_inv"] = rng.random((rows // 128, cols // 128),
                                                np.float32)
os.makedirs(d)
npst.write(os.path.join(d, "model.safetensors"), t)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": E, "num_attention_heads": H,
           "num_key_value_heads": KV, "head_dim": D, "intermediate_size": I,
           "num_hidden_layers": 1, "quantization_config": {
               "quant_method": "fp8", "weight_block_size": [128, 128]}},
          open(os.path.join(d, "config.json"), "w"))
PY
  { echo "Bail out! the fp8 checkpoint failed"; exit 99; }
"$ORACLE" "$O" kv-plan "$M/fp8" 4 "$T_TMP/plan-fp8.json" ||
  { echo "Bail out! oracle.py kv-plan fp8 failed"; exit 99; }
t_exit "fp8 block, 2 kv heads N=4: preshard exits 0" 0 \
  mpi 4 preshard "$M/fp8" --out "$T_TMP/out-fp8" --quiet
t_oracle "fp8 block, 2 kv heads N=4: weights and scales match (oracle)" \
  check-preshard "$M/fp8" "$T_TMP/plan-fp8.json" 4 "$T_TMP/out-fp8"
# The quantization as `plan` says it (plan.config), in the load's summary
# and --json report and in inspect's totals and --json.
FP8='fp8, weight_block_size [128, 128]'
t_exit "fp8 block N=2: load --json exits 0" 0 mpi 2 load "$M/fp8" --json
grep -qF "tpload load: quantization: $FP8" "$T_TMP/err" &&
  t_ok "fp8 load: the summary names the method and block" ||
  t_fail "fp8 load: the summary names the method and block" \
    "$(head -c 2000 "$T_TMP/err")"
cp "$T_TMP/out" "$T_TMP/report.json"
t_check "fp8 load --json: quant as plan's config" "$ORACLE" -c '
import json, sys
q = json.load(open(sys.argv[1]))["quant"]
sys.exit(q != {"quantization": "", "quant_method": "fp8",
               "weight_block_size": [128, 128]})' "$T_TMP/report.json"
t_exit "fp8 inspect --shards 2 exits 0" 0 "$TPLOAD" inspect "$M/fp8" --shards 2
grep -qF "; quantization: $FP8" "$T_TMP/out" &&
  t_ok "fp8 inspect: the totals name the method and block" ||
  t_fail "fp8 inspect: the totals name the method and block" \
    "$(tail -c 600 "$T_TMP/out")"
t_exit "fp8 inspect (no grid) exits 0" 0 "$TPLOAD" inspect "$M/fp8"
grep -qF "; quantization: $FP8" "$T_TMP/out" &&
  t_ok "fp8 inspect without a grid: the totals name it too" ||
  t_fail "fp8 inspect without a grid: the totals name it too" \
    "$(tail -c 600 "$T_TMP/out")"
t_exit "fp8 inspect --shards 2 --json exits 0" 0 \
  "$TPLOAD" inspect "$M/fp8" --shards 2 --json
cp "$T_TMP/out" "$T_TMP/inspect.json"
t_check "fp8 inspect --json: quant as plan's config" "$ORACLE" -c '
import json, sys
q = json.load(open(sys.argv[1]))["quant"]
sys.exit(q["quant_method"] != "fp8" or q["weight_block_size"] != [128, 128])
' "$T_TMP/inspect.json"

t_exit "verify recomputes the replicated shards" 0 \
  "$TPLOAD" verify "$M/phi3-2" "$T_TMP"/out-phi3_2_kv_heads_N_4_*
grep -q "all match" "$T_TMP/out" && t_ok "verify says all match" ||
  t_fail "verify says all match" "$(cat "$T_TMP/out" "$T_TMP/err")"

# --- refusals ---------------------------------------------------------------
"$TPLOAD" synth --arch llama --out "$M/h6" --layers 1 --hidden 48 --heads 6 \
  --kv-heads 2 --vocab 64 --quiet
t_exit "6 heads, 2 kv heads, N=3: exit 65" 65 \
  "$TPLOAD" plan "$M/h6" --shards 3
grep -qF "num_key_value_heads = 2: expected a multiple of the 3 shards or a \
divisor of them" "$T_TMP/err" &&
  t_ok "the message names both numbers" ||
  t_fail "the message names both numbers" "$(cat "$T_TMP/err")"
t_exit "6 heads, 2 kv heads, N=3: preshard exits 65" 65 \
  mpi 3 preshard "$M/h6" --out "$T_TMP/h6" --quiet
t_exit "6 heads, 2 kv heads, N=6: plan exits 0" 0 \
  "$TPLOAD" plan "$M/h6" --shards 6
"$TPLOAD" synth --arch llama --format mlc --out "$M/mlc" --layers 1 \
  --hidden 64 --heads 8 --kv-heads 2 --vocab 64 --quiet
t_exit "MLC llama, 2 kv heads, N=4: exit 65" 65 \
  "$TPLOAD" plan "$M/mlc" --shards 4
grep -qF "num_key_value_heads = 2: expected a multiple of the 4 shards (MLC \
LLM refuses" "$T_TMP/err" && t_ok "the message names MLC's rule" ||
  t_fail "the message names MLC's rule" "$(cat "$T_TMP/err")"
t_done
