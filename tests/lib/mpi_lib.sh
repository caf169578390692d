# mpi_lib.sh - what the mpirun tests share, sourced after lib.sh: the
# oracle ($O), a models directory ($M), ASan settings that work with Open
# MPI, and helpers to run tpload under mpirun, generate a model and read
# tpload's own messages out of mpirun's stderr.

O="$TESTS_SRCDIR/oracle/oracle.py"
# Under --enable-sanitizers: Open MPI's allocations need full stacks for
# tests/lsan.supp to recognise them (the fast unwinder stops at 2 frames).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
M="$T_TMP/models"
mkdir -p "$M"

# need_mpi4py: skips the whole script (one plan line with the reason)
# when the oracle cannot import mpi4py, which forward.py's ranks need.
need_mpi4py() {
  if ! "$ORACLE" -c 'import mpi4py' 2>/dev/null; then
    echo "1..0 # SKIP $ORACLE without mpi4py" \
      "(scripts/install-deps.sh installs python3-mpi4py)"
    exit 0
  fi
}

# mpi N ARGS...: tpload ARGS under mpirun with N ranks.
mpi() {
  local n=$1; shift
  "$MPIRUN" --oversubscribe -np "$n" "$TPLOAD" "$@"
}

# gen NAME ARGS...: a model from the oracle in $M/NAME.
gen() {
  local name=$1; shift
  "$ORACLE" "$O" gen-model "$M/$name" "$@" ||
    { echo "Bail out! oracle.py gen-model $name failed"; exit 99; }
}

# messages FILE: stderr without mpirun's boxed notices (between lines of
# dashes) and blank lines: what tpload itself printed.
messages() {
  awk '/^------------------------------/ { box = !box; next }
       !box && NF' "$1"
}

# t_oracle NAME ARGS...: one TAP line for an oracle check; its diagnostics
# (on stderr) become TAP comments.
t_oracle() {
  local name=$1; shift
  if "$ORACLE" "$O" "$@" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then
    t_ok "$name"
  else
    t_fail "$name" "oracle.py $*"
    head -c 3000 "$T_TMP/oerr" | sed 's/^/# /'
  fi
}

# t_oracle_fails NAME ARGS...: the oracle must reject (a doctored output)
# with a message matching $ORACLE_WANT.
t_oracle_fails() {
  local name=$1; shift
  if "$ORACLE" "$O" "$@" >"$T_TMP/oout" 2>"$T_TMP/oerr"; then
    t_fail "$name" "the oracle accepted it: oracle.py $*"
  elif grep -q "$ORACLE_WANT" "$T_TMP/oerr"; then
    t_ok "$name"
  else
    t_fail "$name" "expected a message matching '$ORACLE_WANT', got:" \
      "$(head -c 1000 "$T_TMP/oerr")"
  fi
}

# flip_byte FILE TENSOR K: flips a bit of byte K of TENSOR's data in the
# safetensors FILE (a doctored output for the oracle to find).
flip_byte() {
  "$ORACLE" - "$@" <<'EOF'
import sys
sys.path.insert(0, __import__("os").environ["TESTS_SRCDIR"] + "/oracle")
import npst
path, name, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
start, spans = npst.layout(path)
b, _ = spans[name]
data = bytearray(open(path, "rb").read())
data[start + b + k] ^= 0x10
open(path, "wb").write(data)
EOF
}

# flip_file_byte FILE K: flips a bit of byte K of FILE, whatever it holds
# (a file whose md5sum no longer matches its record).
flip_file_byte() {
  "$ORACLE" - "$1" "$2" <<'EOF'
import sys
path, k = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
data[k] ^= 0x10
open(path, "wb").write(data)
EOF
}

# synth_llama NAME LAYERS: a small llama (bf16, 4 heads) from tpload synth
# in $M/NAME.
synth_llama() {
  "$TPLOAD" synth --arch llama --out "$M/$1" --layers "$2" --hidden 64 \
    --heads 4 --vocab 128 >/dev/null 2>&1 ||
    { echo "Bail out! tpload synth $1 failed"; exit 99; }
}

# llama_grid_plan FILE: the llama rules in HF names (the oracle reads plan
# files, not presets), lm_head cut too so that a cut tensor lives on every
# stage of a grid.
llama_grid_plan() {
  cat >"$1" <<'EOF'
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
}
