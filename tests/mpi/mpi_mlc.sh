#!/bin/sh
# mpi_mlc.sh - quantized MLC weight directories end to end: `tpload synth
# --format mlc --quant Q` writes what MLC's convert_weight writes (records
# in f32-to-bf16, uint32 q_weight, fp8 weights, float32 scales stored as
# bf16), `mpirun tpload preshard` cuts it under a plan written from MLC's
# model file (rules on "<base>.weight" only: the quantized params take
# theirs by derivation), and tests/oracle.py checks every rank's bytes and
# shard-info.json against its own reading of the cache and its own
# derivation of MLC's rules (quant_rule).  Three mpirun launches.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

# mlc_plan QKV FUNC BIAS Q KV I: the _set_tp of MLC's llama_model.py
# (QKV self_attn.qkv_proj, FUNC _shard_qkv, no BIAS) or qwen2_model.py
# (self_attn.c_attn, _shard_qkv_weight, bias _shard_qkv_bias), for q = Q,
# k = v = KV, intermediate I.
mlc_plan() {
  local bias=""
  [ "$3" = - ] || bias="{\"match\": \"*.$1.bias\", \"name\": \"$3\",
  \"dim\": 0, \"segs\": [$4, $5, $5]},"
  cat <<JSON
{"rules": [
 {"match": "*.$1.weight", "name": "$2", "dim": 0, "segs": [$4, $5, $5]},
 $bias
 {"match": "*.self_attn.o_proj.weight", "name": "_shard_o", "dim": 1},
 {"match": "*.mlp.gate_up_proj.weight", "name": "_shard_mlp_up", "dim": 0,
  "segs": [$6, $6]},
 {"match": "*.mlp.down_proj.weight", "name": "_shard_mlp_down", "dim": 1}]}
JSON
}
llama_plan() { mlc_plan self_attn.qkv_proj _shard_qkv - "$@"; }
qwen2_plan() {
  mlc_plan self_attn.c_attn _shard_qkv_weight _shard_qkv_bias "$@"
}

# case NAME N ARCH PLANFN Q KV I SYNTH-ARGS...
case_quant() {
  local name=$1 n=$2 arch=$3 planfn=$4 q=$5 kv=$6 inter=$7
  shift 7
  local dir="$M/$name"
  if ! "$TPLOAD" synth --arch "$arch" --format mlc --layers 2 --out "$dir" \
    --quiet "$@" >"$T_TMP/err" 2>&1; then
    t_fail "$name: synth" "$(head -c 2000 "$T_TMP/err")"
    return
  fi
  "$planfn" "$q" "$kv" "$inter" >"$dir.plan.json"
  t_exit "$name: preshard N=$n exits 0" 0 \
    mpi "$n" preshard "$dir" --plan "$dir.plan.json" --out "$T_TMP/$name" \
    --quiet
  if "$ORACLE" "$O" check-preshard "$dir" "$dir.plan.json" "$n" \
    "$T_TMP/$name" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then
    t_ok "$name: every rank's tensors and shard info match the oracle"
  else
    t_fail "$name: every rank's tensors and shard info match the oracle" \
      "$(head -c 3000 "$T_TMP/oerr")"
  fi
  rm -rf "$dir" "$T_TMP/$name"
}

# E 256, 8 heads of 32, 4 kv heads: q 256, kv 128; I 512.
case_quant "llama q4f16_1" 2 llama llama_plan 256 128 512 \
  --hidden 256 --intermediate 512 --quant q4f16_1
case_quant "llama e4m3_e4m3_f16" 2 llama llama_plan 256 128 512 \
  --hidden 256 --intermediate 512 --quant e4m3_e4m3_f16
# E 1024, heads of 128: kv 512 = 4 blocks of 128, so N = 4 cuts whole ones.
case_quant "qwen2 fp8 block-scale, static activation" 4 qwen2 qwen2_plan \
  1024 512 1024 --hidden 1024 --intermediate 1024 --vocab 256 \
  --quant fp8_e4m3fn_bf16_block_scale_static_activation
t_done
