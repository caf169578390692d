#!/bin/sh
# bias_policy.sh - row-parallel biases as each engine family expects them
# (issue 36): gpt2's attn.c_proj.bias and mlp.c_proj.bias at N = 2 and 4
# under scale (MLC: bias / N on every rank), whole (--bias-policy vllm:
# vLLM's RowParallelLinear loads the full bias on every rank and adds it
# on tp_rank 0 only, model_executor/layers/linear.py) and rank0 (a plan
# rule's "bias": whole on rank 0, zeros elsewhere): each rank's bytes and
# shard-info.json against the numpy oracle, and the forward pass over the
# shards (oracle/forward.py; --bias-once: only TP rank 0 adds the biases,
# as vLLM does) equal to the full model's.  Negative control: whole
# biases added by every rank do NOT match.  The --no-bias-scaling alias,
# `verify` of the outputs (--bias-policy against shard-info.json), an
# MLC gpt2 (oracle/mlc_archs.py) under `--layout mlc`, whose biases are
# whole for MLC's graph (mlc and whole taken by preshard and verify,
# vllm refused by both), and the usage errors.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

need_mpi4py
FWD="$TESTS_SRCDIR/oracle/forward.py"
"$TPLOAD" synth --out "$M/gpt2" --arch gpt2 --layers 2 --hidden 64 \
  --heads 8 --vocab 128 --dtype f32 --quiet &&
  "$ORACLE" "$FWD" ref "$M/gpt2" "$M/gpt2.ref.npy" ||
  { echo "Bail out! synth gpt2 or its reference forward failed"; exit 99; }

# plan BIAS FILE: gpt2's rules (MLC's gpt2_model.py GPT2Block._set_tp, HF
# Conv1D [in, out]), the c_proj biases with "bias": BIAS or scale_bias.
plan() {
  local b='"scale_bias": true'
  [ "$1" = default ] || b="\"bias\": \"$1\""
  cat >"$2" <<JSON
{"rules": [
 {"match": "*.attn.c_attn.weight", "dim": 1, "segs": [64, 64, 64]},
 {"match": "*.attn.c_attn.bias", "dim": 0, "segs": [64, 64, 64]},
 {"match": "*.attn.c_proj.weight", "dim": 0},
 {"match": "*.attn.c_proj.bias", $b},
 {"match": "*.mlp.c_fc.weight", "dim": 1},
 {"match": "*.mlp.c_fc.bias", "dim": 0},
 {"match": "*.mlp.c_proj.weight", "dim": 0},
 {"match": "*.mlp.c_proj.bias", $b}]}
JSON
}
plan default "$T_TMP/default.json"
plan rank0 "$T_TMP/rank0.json"

# forward WHAT OUT N [forward.py options...]
forward() {
  local what=$1 out=$2 n=$3
  shift 3
  if "$MPIRUN" --oversubscribe -np "$n" "$ORACLE" "$FWD" tp "$M/gpt2" \
    "$out" "$M/gpt2.ref.npy" --tp "$n" "$@" >/dev/null 2>"$T_TMP/ferr"; then
    t_ok "$what"
  else
    t_fail "$what" "$(head -c 2000 "$T_TMP/ferr")"
  fi
}

# case NAME N PLAN FAMILY FORWARD [preshard options...]: preshard, the
# oracle's bytes under FAMILY, and unless FORWARD is "-" the forward pass
# with forward.py options FORWARD ("." for none).
case_() {
  local name=$1 n=$2 p=$3 fam=$4 fw=$5 out="$T_TMP/$1-$2"
  shift 5
  t_exit "$name N=$n: preshard exits 0" 0 \
    mpi "$n" preshard "$M/gpt2" --plan "$p" --out "$out" --quiet "$@"
  t_oracle "$name N=$n: every rank's biases as the oracle's $fam family" \
    check-preshard "$M/gpt2" "$p" "$n" "$out" --bias-policy "$fam"
  [ "$fw" = - ] && return
  [ "$fw" = . ] && fw=
  # shellcheck disable=SC2086
  forward "$name N=$n: logits of the shards = logits of the checkpoint" \
    "$out" "$n" $fw
}

for n in 2 4; do
  case_ scale "$n" "$T_TMP/default.json" mlc -
  case_ vllm "$n" "$T_TMP/default.json" vllm --bias-once --bias-policy vllm
  case_ rank0 "$n" "$T_TMP/rank0.json" mlc .
done
forward "vllm N=2: whole biases added by every rank do NOT match" \
  "$T_TMP/vllm-2" 2 --mismatch
# A rule's own policy wins over the family, but not over whole.
case_ "rank0 plan under vllm" 2 "$T_TMP/rank0.json" vllm - \
  --bias-policy vllm
case_ "rank0 plan --no-bias-scaling" 2 "$T_TMP/rank0.json" whole - \
  --no-bias-scaling

# verify reads the family back from shard-info.json; --bias-policy
# asserts it.
t_check "verify the vllm output" "$TPLOAD" verify "$M/gpt2" "$T_TMP/vllm-2" \
  --plan "$T_TMP/default.json" --bias-policy vllm
t_exit "verify --bias-policy mlc of the vllm output: exit 65" 65 \
  "$TPLOAD" verify "$M/gpt2" "$T_TMP/vllm-2" --plan "$T_TMP/default.json" \
  --bias-policy mlc
t_check "verify the rank0 plan's output" "$TPLOAD" verify "$M/gpt2" \
  "$T_TMP/rank0-4" --plan "$T_TMP/rank0.json"
t_exit "verify --layout mlc --bias-policy vllm: usage error" 64 \
  "$TPLOAD" verify "$M/gpt2" "$T_TMP/vllm-2" --layout mlc --bias-policy vllm

# --layout mlc writes the biases whole for MLC's graph: preshard and
# verify both take mlc and whole and refuse vllm with one message.
"$ORACLE" "$TESTS_SRCDIR/oracle/mlc_archs.py" write gpt2 mlc "$M/gpt2-mlc" ||
  { echo "Bail out! mlc_archs.py write gpt2 mlc failed"; exit 99; }
WANT="--layout mlc writes row-parallel biases whole (its engine divides \
them): --bias-policy vllm cannot hold; use mlc or whole"
t_exit "preshard --layout mlc --bias-policy vllm: usage error" 64 \
  mpi 2 preshard "$M/gpt2-mlc" --out "$T_TMP/mlc-vllm" --layout mlc \
  --bias-policy vllm
cp "$T_TMP/err" "$T_TMP/mlc.err" # t_check writes $T_TMP/err
t_check "preshard --layout mlc --bias-policy vllm: says why" \
  grep -qF "tpload preshard: $WANT" "$T_TMP/mlc.err"
t_check "preshard --layout mlc --bias-policy vllm: nothing written" \
  test ! -e "$T_TMP/mlc-vllm"
t_exit "preshard --layout mlc --bias-policy mlc exits 0" 0 \
  mpi 2 preshard "$M/gpt2-mlc" --out "$T_TMP/mlc-2" --layout mlc \
  --bias-policy mlc --quiet
for f in mlc whole; do
  t_check "verify --layout mlc --bias-policy $f" "$TPLOAD" verify \
    "$M/gpt2-mlc" "$T_TMP/mlc-2" --layout mlc --bias-policy $f --quiet
done
t_exit "verify --layout mlc --bias-policy vllm: usage error" 64 \
  "$TPLOAD" verify "$M/gpt2-mlc" "$T_TMP/mlc-2" --layout mlc \
  --bias-policy vllm
cp "$T_TMP/err" "$T_TMP/mlc.err"
t_check "verify --layout mlc --bias-policy vllm: preshard's message" \
  grep -qF "tpload verify: $WANT" "$T_TMP/mlc.err"

t_exit "plan --bias-policy half: usage error" 64 \
  "$TPLOAD" plan "$M/gpt2" --shards 2 --bias-policy half
t_exit "plan --no-bias-scaling --bias-policy vllm: usage error" 64 \
  "$TPLOAD" plan "$M/gpt2" --shards 2 --no-bias-scaling --bias-policy vllm
t_done
