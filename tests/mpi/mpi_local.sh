#!/bin/sh
# mpi_local.sh - `--read local` end to end: every rank reads its own
# slices from the checkpoint's files.  Its output is checked rank by rank
# against the numpy oracle on the models mpi_load.sh uses (every dtype,
# fused segments, strided dims, zero-size tensors, scale_bias biases; the
# single, index and MLC layouts with f32-to-bf16 records; tensors larger
# than the 512 KiB read step; --no-bias-scaling), the --json report, and
# serve (each rank's dump = its preshard file).  The refusals, with ranks
# started in different working directories so that a relative MODEL names
# other files on rank 1: a file of another size or time (65), a missing
# file (66), one message from the rank that saw it; and --read's own
# usage error (64).  mpi_grid.sh runs it on TP x PP x DP grids.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

# local_check NAME N MODEL OUT [tpload options...]: preshard --read local
# with the model's own plan, then the oracle check.
local_check() {
  local name=$1 n=$2 model=$3 out=$4 nb=""
  shift 4
  case " $* " in *" --no-bias-scaling "*) nb=--no-bias-scaling ;; esac
  t_exit "$name: preshard --read local exits 0" 0 \
    mpi "$n" preshard "$model" --plan "$model/plan.json" --out "$out" \
    --read local --quiet "$@"
  t_oracle "$name: every rank's tensors match the oracle" \
    check-preshard "$model" "$model/plan.json" "$n" "$out" $nb
}

gen s --seed 101 --layout single
gen idx --seed 303 --layout index
gen mlc --seed 404 --layout mlc
gen big --seed 505 --layout single --big-mib 5
gen bigmlc --seed 525 --layout mlc --big-mib 5
for n in 2 3; do
  local_check "single N=$n" "$n" "$M/s" "$T_TMP/s$n"
done
local_check "index N=2" 2 "$M/idx" "$T_TMP/idx2"
local_check "mlc (f32-to-bf16 records) N=3" 3 "$M/mlc" "$T_TMP/mlc3"
local_check "single N=2 --no-bias-scaling" 2 "$M/s" "$T_TMP/nb2" \
  --no-bias-scaling
local_check "5 MiB tensors N=3" 3 "$M/big" "$T_TMP/big3"
local_check "5 MiB f32-to-bf16 record N=2" 2 "$M/bigmlc" "$T_TMP/bigmlc2"

t_exit "load --read local --json N=3 exits 0" 0 \
  mpi 3 load "$M/big" --plan "$M/big/plan.json" --read local --json --quiet
cp "$T_TMP/out" "$T_TMP/report3.json"
t_oracle "load --read local --json N=3: report fields, bytes delivered" \
  check-report "$M/big" "$M/big/plan.json" 3 "$T_TMP/report3.json"

# --- serve: each rank serves what its checked preshard file holds -----------
SOCK=$T_TMP/sock
mkdir -p "$T_TMP/dump"
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
  "$M/s" --plan "$M/s/plan.json" --read local --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve --read local -np 2 is ready" "$T_TMP/ready"
for r in 0 1; do
  t_exit "serve --read local: dump rank $r exits 0" 0 \
    "$TPLOAD" dump "$SOCK/rank$r.sock" --out "$T_TMP/dump/rank$r.safetensors"
done
t_dumps_match "serve --read local: every rank serves what its preshard file holds" \
  2 "$T_TMP/dump" "$T_TMP/s2"
t_exit "serve --read local: status --shutdown exits 0" 0 \
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
t_check "serve --read local: the job ends with exit 0" [ "$SERVE_RC" = 0 ]

# --- refusals: rank 1 sees other files --------------------------------------
# two_dirs: rank 0 runs in $T_TMP/w0 and rank 1 in $T_TMP/w1, each loading
# the relative MODEL "m" (a copy of the single model in each).
mkdir -p "$T_TMP/w0" "$T_TMP/w1"
cp -a "$M/s" "$T_TMP/w0/m"
two_dirs() {
  "$MPIRUN" --oversubscribe -np 1 --wdir "$T_TMP/w0" "$TPLOAD" load m \
    --plan "$M/s/plan.json" --read local --quiet : \
    -np 1 --wdir "$T_TMP/w1" "$TPLOAD" load m --plan "$M/s/plan.json" \
    --read local --quiet
}
# t_rank1_says NAME WORDS: the last stderr holds one message, rank 1's,
# naming WORDS (rank 0 adds no line of its own).
t_rank1_says() {
  messages "$T_TMP/err" >"$T_TMP/msgs"
  if [ "$(grep -c . "$T_TMP/msgs")" -eq 1 ] &&
      grep -q "^tpload: rank 1: " "$T_TMP/msgs" &&
      grep -qF -- "$2" "$T_TMP/msgs"; then
    t_ok "$1"
  else
    t_fail "$1" "expected one 'tpload: rank 1:' line naming '$2', got:" \
      "$(head -c 1500 "$T_TMP/msgs")"
  fi
}

cp -a "$M/s" "$T_TMP/w1/m"  # -a: the same times too
t_exit "the same files in both directories: exit 0" 0 two_dirs

printf 'x' >>"$T_TMP/w1/m/model.safetensors"
t_exit "rank 1's file is a byte longer: exit 65" 65 two_dirs
t_rank1_says "longer file: rank 1 says so, with both sizes" \
  "m/model.safetensors: $(($(wc -c <"$M/s/model.safetensors") + 1)) bytes here, $(wc -c <"$M/s/model.safetensors") on rank 0"

cp "$M/s/model.safetensors" "$T_TMP/w1/m/model.safetensors"
touch -d '2001-02-03 04:05:06' "$T_TMP/w1/m/model.safetensors"
t_exit "rank 1's file has another time: exit 65" 65 two_dirs
t_rank1_says "another time: rank 1 names the file" \
  "m/model.safetensors: modified at another time than on rank 0"

rm "$T_TMP/w1/m/model.safetensors"
t_exit "rank 1 lacks the file: exit 66" 66 two_dirs
t_rank1_says "missing file: rank 1 names it" \
  "m/model.safetensors: cannot open it"

t_exit "--read elsewhere: exit 64" 64 \
  mpi 2 load "$M/s" --plan "$M/s/plan.json" --read elsewhere --quiet
cp "$T_TMP/err" "$T_TMP/usage"
t_check "--read elsewhere: the message names the choices" \
  grep -q "expects auto, mpi or local, got 'elsewhere'" "$T_TMP/usage"

t_done
