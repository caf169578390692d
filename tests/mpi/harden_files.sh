#!/bin/sh
# harden_files.sh - input files are opened once and held:
# - a model file replaced (a new file renamed over it) or grown while the
#   load is under way ends the job with 74 naming the file, instead of
#   the engine reading whatever the path now names; the change is made
#   while rank 1 is stopped (SIGSTOP at a known point, the test-only
#   TPLOAD_TEST_SIGSTOP_RANK) and rank 0 is part way through the file;
#   a file cut short is 74 too, from the read that comes short; with
#   --read local, a file grown or cut short while rank 1 has it open is
#   74 too, and with --io direct (O_DIRECT reads in flight) too;
# - the HF hub-cache layout (REPO/snapshots/REV/* symlinked into
#   REPO/blobs/) loads for a single file, a sharded index and an MLC
#   directory, and gives byte for byte the rank files of the plain copy.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"


# t_changed NAME WORDS MUTATION...: loads a fresh copy of model m with
# rank 1 stopped, runs MUTATION on its file meanwhile, resumes rank 1 and
# expects exit 74 with a message naming the file and containing WORDS.
# $LOAD_ARGS: more load options.
t_changed() {
  local name=$1 words=$2 p rc; shift 2
  rm -rf "$T_TMP/c"; cp -r "$M/m" "$T_TMP/c"
  TPLOAD_TEST_SIGSTOP_RANK=1 "$MPIRUN" --oversubscribe -np 2 \
    -x TPLOAD_TEST_SIGSTOP_RANK "$TPLOAD" load "$T_TMP/c" \
    --plan "$T_TMP/c/plan.json" --chunk-mib 1 --stall-timeout 0 --quiet \
    ${LOAD_ARGS:-} >"$T_TMP/out" 2>"$T_TMP/err" &
  JOB=$!
  PIDS="$PIDS $JOB"
  p=$(stopped_pid 1)
  if [ -z "$p" ]; then
    t_fail "$name: rank 1 stopped" "$(cat "$T_TMP/err")"
    kill -KILL "$JOB"; wait "$JOB"
    return
  fi
  "$@"
  kill -CONT "$p"
  wait "$JOB"; rc=$?
  if [ $rc -eq 74 ]; then t_ok "$name: exit 74"
  else t_fail "$name: exit 74" "exit $rc" "$(messages "$T_TMP/err")"; fi
  if messages "$T_TMP/err" | grep "model.safetensors: " | grep -q -F "$words"; then
    t_ok "$name: the message names the file and '$words'"
  else t_fail "$name: the message names the file and '$words'" \
    "$(messages "$T_TMP/err")"; fi
}
replace() {
  cp "$T_TMP/c/model.safetensors" "$T_TMP/c/new"
  mv "$T_TMP/c/new" "$T_TMP/c/model.safetensors"
}
grow() { printf 'x' >>"$T_TMP/c/model.safetensors"; }
shrink() { truncate -s "$((size / 2))" "$T_TMP/c/model.safetensors"; }

gen m --seed 8101 --layout single --big-mib 8
size=$(wc -c <"$M/m/model.safetensors")
t_changed "a model file replaced mid-load" \
  "changed while loading (another file took its place)" replace
t_changed "a model file grown mid-load" \
  "changed while loading (its size changed)" grow
# Rank 0 is part way through the file (1 MiB chunks, waiting for rank 1
# to take them), so its next reads come short.  The message cannot be
# the deferred "its size changed" instead: that one comes only once every
# byte was read, and rank 0 cannot read far while rank 1 is stopped (a
# chunk's sends to rank 1 complete only once rank 1 takes them; measured,
# rank 0's rchar stays under 0.4 MB of the 16 MB file), while the cut
# (size / 2) lies past big.cols, so every byte of big.rows is read after
# it, and comes short.
t_changed "a model file cut short mid-load" \
  "(it shrank while loading)" shrink
# --read local: rank 1 stops once it has opened the files, before it
# reads (so a file replaced meanwhile changes nothing: it reads the one it
# opened); a file grown meanwhile is 74 from whichever rank sees it.
LOAD_ARGS="--read local" t_changed "--read local: a model file grown mid-load" \
  "$((size + 1)) bytes here, $size on rank 0" grow
# Cut short: rank 0 reads its share on its own and may end with "N bytes
# here" (the cut fell between its last read and its check), but rank 1
# reads rows of big.rows after the cut, always short, and the agreement
# reports the lowest code (MPI_MINLOC): TPL_ESHORT, -10015, below -EIO.
LOAD_ARGS="--read local" t_changed "--read local: a model file cut short mid-load" \
  "(it shrank while loading)" shrink
# The same mid direct read (O_DIRECT through io_uring, several chunks in
# flight): the read that comes short is named.
LOAD_ARGS="--io direct" t_changed "--io direct: a model file cut short mid-load" \
  "(it shrank while loading)" shrink
LOAD_ARGS="--io direct --read local" t_changed \
  "--io direct --read local: a model file cut short mid-load" \
  "(it shrank while loading)" shrink
LOAD_ARGS=

# hub LAYOUT: the model as the HF hub cache stores it.
hub() {
  local src=$M/$1 repo=$T_TMP/hub-$1/models--org--$1 f h
  mkdir -p "$repo/blobs" "$repo/snapshots/0123abc"
  for f in "$src"/*; do
    h=$(sha256sum "$f" | cut -c1-40)
    cp "$f" "$repo/blobs/$h"
    ln -s "../../blobs/$h" "$repo/snapshots/0123abc/${f##*/}"
  done
}
gen single --seed 8201 --layout single
gen index --seed 8202 --layout index
gen mlc --seed 8203 --layout mlc
for layout in single index mlc; do
  hub $layout
  snap="$T_TMP/hub-$layout/models--org--$layout/snapshots/0123abc"
  t_exit "hub cache, $layout: preshard exits 0" 0 mpi 2 preshard "$snap" \
    --plan "$M/$layout/plan.json" --out "$T_TMP/o-hub-$layout" --quiet
  t_exit "plain copy, $layout: preshard exits 0" 0 mpi 2 preshard \
    "$M/$layout" --plan "$M/$layout/plan.json" --out "$T_TMP/o-$layout" --quiet
  t_check "hub cache, $layout: the same rank files as the plain copy" \
    sh -c "cmp '$T_TMP/o-hub-$layout/rank0.safetensors' '$T_TMP/o-$layout/rank0.safetensors' &&
           cmp '$T_TMP/o-hub-$layout/rank1.safetensors' '$T_TMP/o-$layout/rank1.safetensors'"
done
t_done
