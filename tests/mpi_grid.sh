#!/bin/sh
# mpi_grid.sh - issue 13's grids end to end: `mpirun -np N tpload preshard
# --tp T --pp P` on `tpload synth` llama models, every rank file (every
# replica) checked against the numpy oracle's expected_grid (oracle.py
# check-grid: MLC's stage assignment, shard t of T, the grid in the
# metadata) for TP2 x DP2, TP2 x PP2, TP1 x PP4 (4 ranks) and TP2 x PP2 x
# DP2 (8 ranks); that rank 0 sends each tensor byte once whatever D (TP2
# x DP2, TP1 x DP4, TP1 x DP2: its bytes_sent is the model's); and the
# refusals (exit 64, one message with the numbers) of a world that does
# not divide, a P above the layer count and a P that does not divide it.
# The first test proves the oracle's grid check can fail.
. "$TESTS_SRCDIR/lib.sh"
. "$TESTS_SRCDIR/mpi_lib.sh"

# synth NAME LAYERS: a small llama (bf16, 4 heads) from tpload synth.
synth() {
  "$TPLOAD" synth --arch llama --out "$M/$1" --layers "$2" --hidden 64 \
    --heads 4 --vocab 128 >/dev/null 2>&1 ||
    { echo "Bail out! tpload synth $1 failed"; exit 99; }
}

# The llama rules in HF names (the oracle reads plan files, not presets),
# lm_head cut too so that a cut tensor lives on every stage.
PLAN=$T_TMP/plan.json
cat >"$PLAN" <<'EOF'
{"rules": [
 {"match": "*.self_attn.q_proj.weight", "dim": 0},
 {"match": "*.self_attn.k_proj.weight", "dim": 0},
 {"match": "*.self_attn.v_proj.weight", "dim": 0},
 {"match": "*.self_attn.o_proj.weight", "dim": 1},
 {"match": "*.mlp.gate_proj.weight", "dim": 0},
 {"match": "*.mlp.up_proj.weight", "dim": 0},
 {"match": "*.mlp.down_proj.weight", "dim": 1},
 {"match": "lm_head.weight", "dim": 0}
]}
EOF
synth l4 4

# grid_check NAME N TP PP: preshard the 4-layer model on the grid, then
# every rank against the oracle.
grid_check() {
  local out="$T_TMP/$1"
  t_exit "$1: preshard -np $2 --tp $3 --pp $4 exits 0" 0 \
    mpi "$2" preshard "$M/l4" --plan "$PLAN" --tp "$3" --pp "$4" \
    --out "$out" --quiet
  t_oracle "$1: every rank's tensors match the oracle" \
    check-grid "$M/l4" "$PLAN" "$2" "$3" "$4" 4 "$out"
}

# --- TP2 x DP2, and the oracle's check can fail -----------------------------
grid_check tp2dp2 4 2 1
cp -r "$T_TMP/tp2dp2" "$T_TMP/bad"
flip_byte "$T_TMP/bad/rank3.safetensors" \
  model.layers.1.mlp.up_proj.weight 3
ORACLE_WANT="rank 3: tensor 'model.layers.1.mlp.up_proj.weight': bytes differ"
t_oracle_fails "oracle: a flipped byte in replica 1 is found" \
  check-grid "$M/l4" "$PLAN" 4 2 1 4 "$T_TMP/bad"
cp "$T_TMP/tp2dp2/rank1.safetensors" "$T_TMP/bad/rank3.safetensors"
ORACLE_WANT="rank 3: .*__metadata__"
t_oracle_fails "oracle: replica 0's file standing in for replica 1 is found" \
  check-grid "$M/l4" "$PLAN" 4 2 1 4 "$T_TMP/bad"

# --- pipeline stages, and all three at once ---------------------------------
grid_check tp2pp2 4 2 2
grid_check tp1pp4 4 1 4
grid_check tp2pp2dp2 8 2 2

# --- read once: rank 0 sends each byte of the checkpoint once ---------------
# rank0_sent N TP: rank 0's bytes_sent in the --json report of a load.
rank0_sent() {
  mpi "$1" load "$M/l4" --plan "$PLAN" --tp "$2" --json --quiet \
    >"$T_TMP/load.json" 2>"$T_TMP/err" &&
    "$ORACLE" -c 'import json, sys
print(json.load(open(sys.argv[1]))["ranks"][0]["bytes_sent"])' \
      "$T_TMP/load.json"
}
# Every tensor byte of the model file: what a byte-once delivery to
# replicas that hold everything sends from rank 0.
TOTAL=$("$ORACLE" -c 'import sys
sys.path.insert(0, sys.argv[1])
import npst
start, spans = npst.layout(sys.argv[2])
print(sum(e - b for b, e in spans.values()))' "$TESTS_SRCDIR" \
  "$M/l4/model.safetensors")
for grid in "4 2" "4 1" "2 1"; do
  set -- $grid
  got=$(rank0_sent "$1" "$2")
  t_check "-np $1 --tp $2: rank 0 sent every tensor byte once ($TOTAL)" \
    [ "$got" = "$TOTAL" ]
done

# --- refusals ---------------------------------------------------------------
# t_refused NAME TEXT N ARGS...: exit 64 and one message holding TEXT.
t_refused() {
  local name=$1 text=$2 n=$3
  shift 3
  t_exit "$name: exit 64" 64 mpi "$n" load "$@" --quiet
  messages "$T_TMP/err" >"$T_TMP/msgs"
  if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] &&
      grep -qF -- "$text" "$T_TMP/msgs"; then
    t_ok "$name: one message with the numbers"
  else
    t_fail "$name: one message with the numbers" "expected '$text', got:" \
      "$(head -c 1500 "$T_TMP/msgs")"
  fi
}
synth l2 2
synth l3 3
t_refused "-np 6 --tp 4" "-np 6 is not a multiple of --tp 4 x --pp 1 = 4" \
  6 "$M/l4" --plan "$PLAN" --tp 4
t_refused "--pp 4 over 2 layers" "--pp 4: expected 1..2" \
  4 "$M/l2" --plan "$PLAN" --pp 4
t_refused "--pp 2 over 3 layers" "--pp 2 does not divide the 3 layers" \
  2 "$M/l3" --plan "$PLAN" --pp 2

t_done
