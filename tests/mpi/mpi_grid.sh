#!/bin/sh
# mpi_grid.sh - issue 13's grids end to end: `mpirun -np N tpload preshard
# --tp T --pp P` on `tpload synth` llama models, every rank file (every
# replica) checked against the numpy oracle's expected_grid (oracle.py
# check-grid: MLC's stage assignment, shard t of T, the grid in the
# metadata) for TP2 x DP2, TP2 x PP2, TP1 x PP4 (4 ranks), TP2 x PP2 x DP2
# (8 ranks) and an MLC weight directory at TP2 x PP2, the same with
# --read local (TP2 x DP2, TP2 x PP2, MLC); serve on TP2 x PP2
# (each rank's dump = its preshard tensors); that rank 0 sends each tensor
# byte once whatever D (TP2 x DP2, TP1 x DP4, TP1 x DP2: its bytes_sent is
# the model's); and the refusals (exit 64, one message with the numbers)
# of a world that does not divide, a P above the layer count and a P that
# does not divide it.  The first test proves the oracle's grid check can
# fail.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

PLAN=$T_TMP/plan.json
llama_grid_plan "$PLAN"
synth_llama l4 4

# grid_check NAME N TP PP [MODEL PLAN]: preshard a 4-layer model (default
# the synth llama) on the grid, then every rank against the oracle.
# $GRID_ARGS: more preshard options.
grid_check() {
  local out="$T_TMP/$1" model=${5:-$M/l4} plan=${6:-$PLAN}
  t_exit "$1: preshard -np $2 --tp $3 --pp $4 ${GRID_ARGS:-}exits 0" 0 \
    mpi "$2" preshard "$model" --plan "$plan" --tp "$3" --pp "$4" \
    --out "$out" --quiet ${GRID_ARGS:-}
  t_oracle "$1: every rank's tensors match the oracle" \
    check-grid "$model" "$plan" "$2" "$3" "$4" 4 "$out"
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

# An MLC weight directory (fused qkv / gate_up, float32 stored as bf16):
# the layer count comes from mlc-chat-config.json's model_config.
"$TPLOAD" synth --arch llama --format mlc --out "$M/mlc" --layers 4 \
  --hidden 64 --heads 4 --vocab 128 --dtype f32 >/dev/null 2>&1 ||
  { echo "Bail out! tpload synth --format mlc failed"; exit 99; }
cat >"$T_TMP/mlc-plan.json" <<'EOF'
{"rules": [
 {"match": "*.qkv_proj.weight", "dim": 0, "segs": [64, 32, 32]},
 {"match": "*.o_proj.weight", "dim": 1},
 {"match": "*.gate_up_proj.weight", "dim": 0, "segs": [128, 128]},
 {"match": "*.down_proj.weight", "dim": 1}
]}
EOF
grid_check mlc-tp2pp2 4 2 2 "$M/mlc" "$T_TMP/mlc-plan.json"

# --- --read local: every rank reads its stage's slices itself ---------------
GRID_ARGS="--read local " grid_check local-tp2dp2 4 2 1
GRID_ARGS="--read local " grid_check local-tp2pp2 4 2 2
GRID_ARGS="--read local " grid_check local-mlc-tp2pp2 4 2 2 "$M/mlc" \
  "$T_TMP/mlc-plan.json"
GRID_ARGS=

# --- serve on a grid: each daemon serves its stage's tensors ---------------
# Each rank's dump holds exactly the tensors, shapes and bytes of its
# checked preshard file, and (the daemon names its grid) is that file
# byte for byte.
. "$TESTS_SRCDIR/lib/serve_lib.sh"
SOCK=$T_TMP/sock
mkdir -p "$T_TMP/dump"
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 4 "$TPLOAD" serve \
  "$M/l4" --plan "$PLAN" --tp 2 --pp 2 --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve -np 4 --tp 2 --pp 2 is ready" "$T_TMP/ready"
for r in 0 1 2 3; do
  t_exit "serve TP2xPP2: dump rank $r exits 0" 0 \
    "$TPLOAD" dump "$SOCK/rank$r.sock" --out "$T_TMP/dump/rank$r.safetensors"
done
t_dumps_match "serve TP2xPP2: every rank serves what its preshard file holds" \
  4 "$T_TMP/dump" "$T_TMP/tp2pp2"
for r in 0 1 2 3; do
  t_check "serve TP2xPP2: rank $r's dump is its preshard file" \
    cmp "$T_TMP/dump/rank$r.safetensors" "$T_TMP/tp2pp2/rank$r.safetensors"
done
t_exit "serve TP2xPP2: status --shutdown exits 0" 0 \
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
t_check "serve TP2xPP2: the job ends with exit 0" [ "$SERVE_RC" = 0 ]

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
print(sum(e - b for b, e in spans.values()))' "$TESTS_SRCDIR/oracle" \
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
synth_llama l2 2
synth_llama l3 3
t_refused "-np 6 --tp 4" "-np 6 is not a multiple of --tp 4 x --pp 1 = 4" \
  6 "$M/l4" --plan "$PLAN" --tp 4
t_refused "--pp 4 over 2 layers" "--pp 4: expected 1..2" \
  4 "$M/l2" --plan "$PLAN" --pp 4
t_refused "--pp 2 over 3 layers" "--pp 2 does not divide the 3 layers" \
  2 "$M/l3" --plan "$PLAN" --pp 2

t_done
