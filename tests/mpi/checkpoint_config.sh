#!/bin/sh
# checkpoint_config.sh - a checkpoint must agree with the config its preset
# reads, and no layer tensor whose rows belong to heads may go out whole
# while its layer's heads are cut.  Each contradiction is refused at plan
# time (exit 65, one message naming the tensor, the config field and both
# numbers): q_proj against heads x head_dim, k_proj against kv heads x
# head_dim, more kv heads than heads, the MLP against intermediate_size,
# the experts against num_local_experts, the layers against
# num_hidden_layers (with and without --pp); preshard refuses before any
# byte moves (no output directory).  Fixtures: oracle/mlc_archs.py's llama
# (8 heads, 4 kv heads, head_dim 2, hidden 16, intermediate 24, 2 layers)
# and mixtral (2 experts), changed by its --add / --set options.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

A="$TESTS_SRCDIR/oracle/mlc_archs.py"

# fixture NAME ARCH [write options...]: $T_TMP/NAME from mlc_archs.py.
fixture() {
  local name=$1 arch=$2
  shift 2
  "$ORACLE" "$A" write "$arch" hf "$T_TMP/$name" "$@" ||
    { echo "Bail out! mlc_archs.py write $arch failed"; exit 99; }
}

# says NAME FRAGMENT: the last command's stderr holds FRAGMENT.
says() {
  if grep -qF -- "$2" "$T_TMP/err"; then t_ok "$1: the message says $2"
  else t_fail "$1: the message says $2" "$(cat "$T_TMP/err")"; fi
}

# refused NAME ARCH FRAGMENT [write options...]: `plan --shards 2` of the
# changed fixture ($T_TMP/$DIR) exits 65 with FRAGMENT in its message.
refused() {
  local name=$1 arch=$2 frag=$3
  shift 3
  DIR=$(printf '%s' "$name" | tr -c 'a-z0-9' '_')
  fixture "$DIR" "$arch" "$@"
  t_exit "$name: exit 65" 65 "$TPLOAD" plan "$T_TMP/$DIR" --shards 2
  says "$name" "$frag"
}

fixture good llama
t_exit "the unchanged llama fixture plans" 0 \
  "$TPLOAD" plan "$T_TMP/good" --shards 2

# --- sizes the preset cuts by -----------------------------------------------
# 18 rows divide by 2 but are not 8 heads x 2: cut mid-head before.
refused "q_proj of 18 rows for 8 heads x 2" llama \
  "tensor 'model.layers.0.self_attn.q_proj.weight': dim 0 is 18, expected num_attention_heads x head_dim = 8 x 2 = 16" \
  --add model.layers.0.self_attn.q_proj.weight=18x16
Q18=$T_TMP/$DIR
refused "k_proj of 16 rows for 4 kv heads x 2" llama \
  "tensor 'model.layers.1.self_attn.k_proj.weight': dim 0 is 16, expected num_key_value_heads x head_dim = 4 x 2 = 8" \
  --add model.layers.1.self_attn.k_proj.weight=16x16
refused "16 kv heads for 8 heads" llama \
  "num_key_value_heads = 16: expected at most num_attention_heads = 8" \
  --set num_key_value_heads=16
refused "intermediate_size 12 against the MLP's 24" llama \
  "is 24, expected intermediate_size = 12" --set intermediate_size=12
refused "down_proj's 26 inputs against intermediate_size 24" llama \
  "tensor 'model.layers.0.mlp.down_proj.weight': dim 1 is 26, expected intermediate_size = 24" \
  --add model.layers.0.mlp.down_proj.weight=16x26

# --- experts ----------------------------------------------------------------
refused "num_local_experts 4 on a checkpoint of 2 experts" mixtral \
  "num_local_experts = 4: expected experts 0..3, found experts 0..1 at most" \
  --set num_local_experts=4
refused "num_local_experts 1 on a checkpoint of 2 experts" mixtral \
  "is expert 1: expected experts 0..0 (num_local_experts = 1)" \
  --set num_local_experts=1

# --- layers 0..L-1 exactly --------------------------------------------------
FOUR="num_hidden_layers = 4: expected layers 0..3 in the checkpoint, found layers 0..1 (no layer 2)"
refused "num_hidden_layers 4 on a 2-layer checkpoint" llama "$FOUR" \
  --set num_hidden_layers=4
t_exit "num_hidden_layers 4 on 2 layers, --tp 2 --pp 2: exit 65" 65 \
  "$TPLOAD" plan "$T_TMP/$DIR" --tp 2 --pp 2
says "num_hidden_layers 4 on 2 layers, --pp 2" "$FOUR"
refused "num_hidden_layers 1 on a 2-layer checkpoint" llama \
  "is in layer 1: expected layers 0..0 (num_hidden_layers = 1), found 2 layers" \
  --set num_hidden_layers=1

# A vision tower's own layers (replicated) do not count as the text
# model's: a tower deeper than the text model (Llama 4's has 34 layers for
# 48) is neither a missing layer nor one beyond num_hidden_layers.
fixture deep_tower llava \
  --add vision_tower.vision_model.encoder.layers.5.self_attn.q_proj.weight=16x16
t_exit "llava with a vision tower deeper than its 2 text layers plans" 0 \
  "$TPLOAD" plan "$T_TMP/deep_tower" --shards 2

# preshard refuses at plan time: nothing is written.
t_exit "preshard -np 2 of q_proj 18 rows: exit 65" 65 \
  mpi 2 preshard "$Q18" --out "$T_TMP/shards" --quiet
if [ ! -e "$T_TMP/shards" ]; then t_ok "preshard refused before any byte moved"
else t_fail "preshard refused before any byte moved" "$(ls -la "$T_TMP/shards")"; fi

# --- tensors whose rows belong to heads, delivered whole --------------------
# A per-head 1-D tensor no rule names (attention sinks, one per head).
refused "per-head sinks no rule names" llama \
  "tensor 'model.layers.0.self_attn.sinks' (layer 0): a dim measures like the heads" \
  --add model.layers.0.self_attn.sinks=8
# A per-head norm a catch-all `*norm.weight` rule would replicate.
refused "per-head norm under *norm.weight" llama \
  "but *norm.weight delivers it whole while the layer's heads are cut" \
  --add model.layers.1.self_attn.head_norm.weight=8x2
t_done
