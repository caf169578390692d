#!/bin/sh
# forward.sh - tpload's shards compute the right answer: for every
# architecture `tpload synth` writes (HF names; MLC's fused names, one of
# them quantized q4f16_1) and hand-made cohere, qwen3 and olmo2 (three
# kinds of q/k norms), qwen2_moe and internlm2 checkpoints, the logits of
# a tensor-parallel forward pass over the shards (oracle/forward.py under
# mpirun, mpi4py all-reducing after the row-parallel layers) equal those
# of the full checkpoint in one process, float32, relative error below
# 1e-5: N = 1, 2 and 4 preshard files (and N = 4 over 2 kv heads and
# over 1, each kv head replicated), a TP x PP grid whose stages each
# run their own layers, mixtral, qwen2_moe, qwen3_moe (6 experts: E
# not divisible by 4), deepseek_v2 and deepseek_v3 (MLA, dense then MoE
# layers, shared experts) under --ep (each rank its experts whole), and
# a `serve` job read through python/tpload.py.
# The negative control: gpt2's row-parallel biases delivered unscaled
# (--no-bias-scaling) are summed N times by the all-reduce, and the test
# asserts the logits do NOT match; so must an --ep forward whose rank 0
# takes the experts one further than vLLM's map.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

need_mpi4py
FWD="$TESTS_SRCDIR/oracle/forward.py"
SIZES="--layers 2 --hidden 64 --heads 8 --vocab 128 --dtype f32 --quiet"

# model NAME SYNTH-OPTIONS...: a synth checkpoint in $M/NAME and its
# reference logits in $M/NAME.ref.npy.
model() {
  local name=$1; shift
  # shellcheck disable=SC2086
  "$TPLOAD" synth --out "$M/$name" $SIZES "$@" &&
    "$ORACLE" "$FWD" ref "$M/$name" "$M/$name.ref.npy" ||
    { echo "Bail out! $name: synth or the reference forward failed"; exit 99; }
}

# forward NAME N SRC TP PP [--dp D] [--mismatch ...]: one TAP line for
# the tensor-parallel forward of $M/NAME over SRC (D replicas of TP x PP
# ranks, default 1) against its reference.
forward() {
  local what=$1 name=$2 src=$3 tp=$4 pp=$5 n=$(($4 * $5))
  shift 5
  if [ "${1:-}" = --dp ]; then
    n=$((n * $2))
    shift 2
  fi
  if "$MPIRUN" --oversubscribe -np "$n" "$ORACLE" "$FWD" tp "$M/$name" \
    "$src" "$M/$name.ref.npy" --tp "$tp" --pp "$pp" "$@" \
    >"$T_TMP/fout" 2>"$T_TMP/ferr"; then
    t_ok "$what"
  else
    t_fail "$what" "$(messages "$T_TMP/ferr" | head -c 2000)"
  fi
}

# sharded NAME N [preshard options...]: preshard $M/NAME with N ranks into
# $T_TMP/NAME-N, one TAP line, then its forward at TP N.
sharded() {
  local name=$1 n=$2 out="$T_TMP/$1-$2"
  shift 2
  t_exit "$name N=$n: preshard exits 0" 0 \
    mpi "$n" preshard "$M/$name" --out "$out" --quiet "$@"
  forward "$name N=$n: logits of the shards = logits of the checkpoint" \
    "$name" "$out" "$n" 1
}

# --- every arch synth writes, HF names, N = 2 and 4 -------------------------
for arch in llama mistral qwen2 gemma mixtral phi3 gpt2 gpt_neox; do
  model "$arch" --arch "$arch"
  for n in 2 4; do sharded "$arch" "$n"; done
done
sharded llama 1
# kv heads fewer than the ranks: each rank holds one kv head, shared with
# N / kv - 1 other ranks (vLLM's num_kv_head_replicas)
model llama-kv2 --arch llama --kv-heads 2
sharded llama-kv2 4
model phi3-kv1 --arch phi3 --kv-heads 1
sharded phi3-kv1 4

# --- MLC weight directories (fused qkv / gate_up, bf16 records) -------------
model llama-mlc --arch llama --format mlc
model qwen2-mlc --arch qwen2 --format mlc
model phi3-mlc --arch phi3 --format mlc
model gemma-mlc --arch gemma --format mlc
model llama-q4 --arch llama --format mlc --quant q4f16_1
sharded llama-mlc 2
sharded qwen2-mlc 4
sharded phi3-mlc 2
sharded gemma-mlc 4
sharded llama-q4 2

# --- TP x PP: each stage's ranks run the layers they hold --------------------
t_exit "llama --tp 2 --pp 2: preshard exits 0" 0 \
  mpi 4 preshard "$M/llama" --tp 2 --pp 2 --out "$T_TMP/grid" --quiet
forward "llama --tp 2 --pp 2: stages hold 0..L-1 in order; logits match" \
  llama "$T_TMP/grid" 2 2

# --- the negative control: row-parallel biases left unscaled -----------------
t_exit "gpt2 N=2 --no-bias-scaling: preshard exits 0" 0 \
  mpi 2 preshard "$M/gpt2" --out "$T_TMP/noscale" --no-bias-scaling --quiet
forward "gpt2 N=2 --no-bias-scaling: the logits do NOT match (error > 1e-3)" \
  gpt2 "$T_TMP/noscale" 2 1 --mismatch

# --- hand-made checkpoints (synth cannot write them): q/k norms of three
# kinds, cohere's per head (cut with the heads), qwen3's shared by every
# head and olmo2's over all heads (both whole, the ranks all-gather q for
# olmo2's); qwen2_moe's experts, shared expert and its gate; internlm2's
# wqkv grouped per kv head ---------------------------------------------------
for arch in cohere qwen3 olmo2 qwen2_moe internlm2; do
  "$ORACLE" "$FWD" write "$arch" "$M/$arch" &&
    "$ORACLE" "$FWD" ref "$M/$arch" "$M/$arch.ref.npy" ||
    { echo "Bail out! forward.py write $arch failed"; exit 99; }
  for n in 2 4; do sharded "$arch" "$n"; done
done

# --- --ep: each rank computes its experts' routed contributions (vLLM's
# expert map, top-k over the replicated router) and its TP share of the
# rest, one all-reduce per MoE layer; the negative controls move rank 0's
# experts by one.  Hand-made: qwen3_moe with 6 experts (3 each at N=2;
# 2, 2, 1, 1 at N=4), deepseek_v2 and deepseek_v3 (MLA, layer 0 dense,
# 8 routed experts and a shared expert cut by TP; v3's sigmoid router
# with e_score_correction_bias and groups) ------------------------------
for arch in qwen3_moe deepseek_v2 deepseek_v3; do
  "$ORACLE" "$FWD" write "$arch" "$M/$arch" &&
    "$ORACLE" "$FWD" ref "$M/$arch" "$M/$arch.ref.npy" ||
    { echo "Bail out! forward.py write $arch failed"; exit 99; }
done
sharded deepseek_v3 4
for arch in mixtral qwen2_moe qwen3_moe deepseek_v2 deepseek_v3; do
  for n in 2 4; do
    t_exit "$arch N=$n --ep: preshard exits 0" 0 \
      mpi "$n" preshard "$M/$arch" --out "$T_TMP/$arch-ep$n" --ep --quiet
    forward "$arch N=$n --ep: each rank's experts, all-reduced = the logits" \
      "$arch" "$T_TMP/$arch-ep$n" "$n" 1 --ep
  done
done
forward "mixtral N=2 --ep, rank 0's experts shifted by one: NO match" \
  mixtral "$T_TMP/mixtral-ep2" 2 1 --ep --ep-shift 1 --mismatch
forward "deepseek_v2 N=4 --ep, rank 0's experts shifted by one: NO match" \
  deepseek_v2 "$T_TMP/deepseek_v2-ep4" 4 1 --ep --ep-shift 1 --mismatch
# --ep-size 4 on TP2 x DP2: the experts spread over both replicas (group
# rank d x 2 + t), each replica computing every token; the routed sums
# all-reduced over the 4 ranks.  deepseek_v3: 8 routed experts (2 a
# rank), a shared expert cut by TP, a dense layer 0.
t_exit "deepseek_v3 TP2 x DP2 --ep-size 4: preshard exits 0" 0 \
  mpi 4 preshard "$M/deepseek_v3" --out "$T_TMP/dsv3-eps4" --tp 2 \
  --ep-size 4 --quiet
forward "deepseek_v3 TP2 x DP2 --ep-size 4: the group's experts = the logits" \
  deepseek_v3 "$T_TMP/dsv3-eps4" 2 1 --dp 2 --ep --ep-size 4
forward "deepseek_v3 --ep-size 4, group rank 0's experts shifted: NO match" \
  deepseek_v3 "$T_TMP/dsv3-eps4" 2 1 --dp 2 --ep --ep-size 4 --ep-shift 1 \
  --mismatch

# --- serve, read through python/tpload.py ------------------------------------
if [ -n "$SAN_CFLAGS" ]; then
  t_ok "serve: # SKIP libtpload.so is built with sanitizers"
else
  export TPLOAD_LIBRARY="$TPL_BUILDDIR/.libs/libtpload.so.0"
  export PYTHONPATH="$TESTS_SRCDIR/../python:$TESTS_SRCDIR/oracle"
  SOCK=$T_TMP/sock
  serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" \
    serve "$M/qwen2" --socket-dir "$SOCK" --ready-file "$T_TMP/ready" --quiet
  t_serve_ready "qwen2 serve -np 2 is ready" "$T_TMP/ready"
  forward "qwen2 served N=2, through python/tpload.py: logits match" \
    qwen2 "serve:$SOCK" 2 1
  t_check "tpload status --shutdown" "$TPLOAD" status "$SOCK/rank0.sock" \
    --shutdown
  serve_end
  if [ "$SERVE_RC" = 0 ]; then t_ok "the serve job ends with exit 0"
  else t_fail "the serve job ends with exit 0" "exit: $SERVE_RC"; fi
fi
t_done
