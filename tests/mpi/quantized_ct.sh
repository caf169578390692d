#!/bin/sh
# quantized_ct.sh - compressed-tensors checkpoints (llm-compressor's
# W4A16 with and without zero points, W8A8 int8, FP8 per channel, FP8
# static, FP8 blocks), native FP8 blocks (quant_method fp8,
# weight_scale_inv: DeepSeek-V3's and Qwen3-FP8's form) and NVIDIA
# ModelOpt's (NVFP4, in config.json or hf_quant_config.json, and FP8,
# also with an FP8 kv cache's k_scale / v_scale scalars, whole)
# under the llama preset: every rank's packed
# weights, scales, zero points and shapes are what vLLM's
# compressed-tensors schemes give it, and dequantized with the scales it
# received they equal its slice of the dequantized weight
# (tests/oracle/ct_quant.py), and a tensor-parallel forward pass over
# those dequantized shards (tests/oracle/forward.py) equals the full
# dequantized model's.  Schemes and cuts tpload cannot serve are
# refused before any byte moves.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

C="$TESTS_SRCDIR/oracle/ct_quant.py"

FWD="$TESTS_SRCDIR/oracle/forward.py"

# forward NAME D N [--swap-scales --mismatch]: each rank's weights
# dequantized with the scales it received (ct_quant.py dequant), then
# forward.py's tensor-parallel pass over them against the full
# dequantized model's (relative error below 1e-5; with --mismatch the
# negative control: another rank's scales must give a wrong answer).
forward() {
  local name=$1 d=$2 n=$3 swap=${4:-} want=${5:-} q="$2.fwd"
  rm -rf "$q"
  if "$ORACLE" "$C" dequant "$d" "$d.out" "$n" "$q" $swap &&
    "$ORACLE" "$FWD" ref "$q/full" "$q/ref.npy" &&
    "$MPIRUN" --oversubscribe -np "$n" "$ORACLE" "$FWD" tp "$q/full" \
      "$q/shards" "$q/ref.npy" --tp "$n" $want >"$T_TMP/fwd" 2>&1; then
    t_ok "$name ($(grep -m1 'relative error' "$T_TMP/fwd" | sed 's/^# //'))"
  else
    t_fail "$name" "$(tail -n 5 "$T_TMP/fwd")"
  fi
}

# loads SCHEME N [KV]: preshard --plan auto, then the oracle's check.
loads() {
  local scheme=$1 n=$2 d="$T_TMP/$1-$2"
  "$ORACLE" "$C" write "$scheme" "$d" ${3:-} ||
    { t_fail "$scheme N=$n: fixture" "ct_quant.py write failed"; return; }
  t_exit "$scheme N=$n: preshard exits 0" 0 \
    mpi "$n" preshard "$d" --out "$d.out" --quiet
  if "$ORACLE" "$C" check "$d" "$d.out" "$n" 2>"$T_TMP/oerr"; then
    t_ok "$scheme N=$n: vLLM's slices; each rank dequantizes to its slice"
  else
    t_fail "$scheme N=$n: vLLM's slices; each rank dequantizes to its slice" \
      "$(head -c 2000 "$T_TMP/oerr")"
  fi
  forward "$scheme N=$n: the forward pass over the dequantized shards" \
    "$d" "$n"
}

for scheme in w4a16 w4a16-asym w8a8-int8 fp8-channel fp8-static fp8-block fp8-native \
  modelopt-nvfp4 modelopt-nvfp4-hfq modelopt-fp8 modelopt-fp8-kv; do
  loads "$scheme" 2
done
for scheme in w4a16-asym fp8-block fp8-native modelopt-nvfp4; do
  forward "$scheme N=2: another rank's scales give another answer" \
    "$T_TMP/$scheme-2" 2 --swap-scales --mismatch
done

# refused NAME FRAGMENT SCHEME KV N [JSON EDIT]: exit 65 naming FRAGMENT.
refused() {
  local name=$1 frag=$2 d="$T_TMP/r-$(echo "$1" | tr -c 'a-z0-9' '_')"
  "$ORACLE" "$C" write "$3" "$d" "$4" || { t_fail "$name: fixture"; return; }
  if [ -n "${6:-}" ]; then
    "$ORACLE" -c "
import json, sys
p = sys.argv[1] + '/config.json'
c = json.load(open(p)); q = c['quantization_config']
$6
json.dump(c, open(p, 'w'))" "$d"
  fi
  t_exit "$name: exit 65" 65 "$TPLOAD" plan "$d" --shards "$5"
  if grep -qF -- "$frag" "$T_TMP/err"; then t_ok "$name: the message says why"
  else t_fail "$name: the message says why" "$(cat "$T_TMP/err")"; fi
}

refused "fp8 blocks split by the kv cut" \
  "compressed-tensors block [128, 128]: tensor '" \
  fp8-block 2 2
refused "a sparse 2:4 format" "compressed-tensors format 'marlin-24'" \
  w4a16 2 2 "q['format'] = 'marlin-24'"
refused "groups with two weight schemes" "different weight schemes" \
  w4a16 2 2 "g = dict(q['config_groups']['group_0']); g['weights'] = dict(g['weights'], group_size=64); q['config_groups']['group_1'] = g"
refused "a ModelOpt algorithm without rules" \
  "ModelOpt quantization: expected a scheme tpload can shard, found quant_algo 'W4A8_AWQ'" \
  modelopt-nvfp4 2 2 "q['quant_algo'] = 'W4A8_AWQ'"
# o_proj's 64 inputs are 2 groups of 32: 4 ranks would split a group
# (vLLM refuses an input partition that is no whole number of groups).
refused "4 ranks over 2 input groups" \
  "o_proj.weight_zero_point': dim 1 has length 2, not divisible by 4" \
  w4a16-asym 4 4
t_done
