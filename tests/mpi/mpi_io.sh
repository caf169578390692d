#!/bin/sh
# mpi_io.sh - --io direct|buffered (issue 24): every rank's bytes are the
# numpy oracle's with O_DIRECT reads (aligned supersets through io_uring,
# sliced) and with buffered ones, for the single, index and MLC layouts
# under --read mpi and --read local and a TP2 x PP2 grid, on files whose
# tensors start at offsets that are not multiples of 4096 (checked), with
# requests small enough (TPLOAD_IO_REQUEST_KIB) that every chunk is many
# requests in flight; the report names the mode per file (text and
# --json); a file system that refuses O_DIRECT (the test-only
# TPLOAD_TEST_REFUSE_DIRECT) reads buffered with a one-line note, and so
# does a tmpfs file whatever the kernel says; a rank 0 that reads slowly
# (the test-only TPLOAD_TEST_SLOW_RANK: 50 ms per completed request) but
# steadily is waited for past --stall-timeout, its completed reads
# beating; a submit to io_uring refused (the test-only
# TPLOAD_TEST_SUBMIT_FAIL) ends the job with 75, not a hang; --io's
# usage error (64).  A file cut short mid direct read is
# in harden_files.sh.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/harden_lib.sh"

export TPLOAD_IO_REQUEST_KIB=16
E=$T_TMP/run.err # the last run's stderr (t_check writes $T_TMP/err)

gen single --seed 2401 --layout single --big-mib 3
gen index --seed 2402 --layout index --big-mib 3
gen mlc --seed 2403 --layout mlc --big-mib 3

t_py "the models have tensors at offsets that are not multiples of 4096" '
import json, struct, sys, glob
bad = 0
for f in glob.glob(sys.argv[1] + "/*/*.safetensors"):
    b = open(f, "rb").read(8)
    n = struct.unpack("<Q", b)[0]
    h = json.loads(open(f, "rb").read(8 + n)[8:])
    bad += sum(1 for k, v in h.items() if k != "__metadata__"
               and (8 + n + v["data_offsets"][0]) % 4096)
if bad < 10:
    sys.exit("only %d unaligned tensors" % bad)
' "$M"

# io_check NAME N MODEL MODE READ [options...]: preshard with --io MODE
# --read READ in 128 KiB chunks, then the oracle; a direct run says so
# (or, on a file system that refuses O_DIRECT, says why not).
io_check() {
  local name=$1 n=$2 model=$3 mode=$4 read=$5 out=$T_TMP/o-$1
  shift 5
  t_exit "$name: preshard exits 0" 0 mpi "$n" preshard "$model" \
    --plan "${PLAN:-$model/plan.json}" --out "$out" --io "$mode" \
    --read "$read" --chunk-mib 1 "$@"
  cp "$T_TMP/err" "$E"
  if [ -z "$PLAN" ]; then
    t_oracle "$name: every rank's tensors match the oracle" \
      check-preshard "$model" "$model/plan.json" "$n" "$out"
  else
    t_oracle "$name: every rank's tensors match the oracle" \
      check-grid "$model" "$PLAN" "$n" 2 2 4 "$out"
  fi
  if grep -q "refuses O_DIRECT" "$E"; then
    t_ok "$name: read buffered (# this file system refuses O_DIRECT)"
  else
    t_check "$name: rank 0 says it read $mode" \
      grep -q "rank 0 read $mode: " "$E"
  fi
}

PLAN=
for layout in single index mlc; do
  for mode in direct buffered; do
    io_check "$layout $mode mpi" 2 "$M/$layout" $mode mpi
    io_check "$layout $mode local" 3 "$M/$layout" $mode local
  done
done

# A TP2 x PP2 grid of a synth llama.
synth_llama l4 4
PLAN=$T_TMP/plan.json
llama_grid_plan "$PLAN"
for read in mpi local; do
  io_check "tp2 x pp2 direct $read" 4 "$M/l4" direct $read --tp 2 --pp 2
done
PLAN=

# --json: the mode per file, per rank that read.
t_exit "load --io direct --json exits 0" 0 mpi 2 load "$M/index" \
  --plan "$M/index/plan.json" --io direct --json --quiet
cp "$T_TMP/out" "$T_TMP/report.json"
cp "$T_TMP/err" "$E"
t_py "--json: rank 0 read every file of the index, direct; rank 1 none" '
import json, sys, glob
r = json.load(open(sys.argv[1]))["ranks"]
files = sorted(glob.glob(sys.argv[2] + "/*.safetensors"))
got = sorted(x["file"] for x in r[0]["reads"])
if [f.split("/")[-1] for f in got] != [f.split("/")[-1] for f in files]:
    sys.exit("rank 0 read %s, the index has %s" % (got, files))
if any(x["mode"] != "direct" for x in r[0]["reads"]):
    if not open(sys.argv[3]).read().count("refuses O_DIRECT"):
        sys.exit("modes %s" % r[0]["reads"])
if r[1]["reads"]:
    sys.exit("rank 1 read %s" % r[1]["reads"])
' "$T_TMP/report.json" "$M/index" "$E"

# A file system that refuses O_DIRECT: buffered, one note, same bytes.
export TPLOAD_TEST_REFUSE_DIRECT=1
t_exit "O_DIRECT refused: preshard exits 0" 0 \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_REFUSE_DIRECT "$TPLOAD" \
  preshard "$M/single" --plan "$M/single/plan.json" --out "$T_TMP/o-refused" \
  --io direct
unset TPLOAD_TEST_REFUSE_DIRECT
cp "$T_TMP/err" "$E"
t_oracle "O_DIRECT refused: every rank's tensors match the oracle" \
  check-preshard "$M/single" "$M/single/plan.json" 2 "$T_TMP/o-refused"
messages "$E" | grep 'O_DIRECT' >"$T_TMP/notes"
t_check "O_DIRECT refused: one note naming the file says why" \
  sh -c "[ \$(grep -c . '$T_TMP/notes') = 1 ] &&
    grep -q 'model.safetensors: read buffered: its file system refuses O_DIRECT' '$T_TMP/notes'"
t_check "O_DIRECT refused: rank 0 says it read buffered" \
  grep -q "rank 0 read buffered: model.safetensors" "$E"

# tmpfs: direct where the kernel takes it (6.6 and later), else the note.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  shm=$(mktemp -d /dev/shm/tpload-io.XXXXXX)
  cp -r "$M/single" "$shm/m"
  t_exit "tmpfs --io direct: preshard exits 0" 0 mpi 2 preshard "$shm/m" \
    --plan "$shm/m/plan.json" --out "$T_TMP/o-shm" --io direct
  cp "$T_TMP/err" "$E"
  t_oracle "tmpfs --io direct: every rank's tensors match the oracle" \
    check-preshard "$shm/m" "$shm/m/plan.json" 2 "$T_TMP/o-shm"
  t_check "tmpfs --io direct: read direct, or buffered with the note" \
    sh -c "grep -q 'rank 0 read direct: ' '$E' ||
      grep -q 'read buffered: its file system refuses O_DIRECT' '$E'"
  rm -rf "$shm"
fi

# A slow but steady reader: rank 0 takes 50 ms per completed 64 KiB
# request, so a 6 MiB chunk takes about 5 s, past the 2 s deadline; its
# completed reads beat (every 0.5 s), so rank 1 waits for it.
gen slow --seed 2404 --layout single --big-mib 6
TPLOAD_TEST_SLOW_RANK=0 TPLOAD_IO_REQUEST_KIB=64 timeout -s KILL 120 \
  "$MPIRUN" --oversubscribe -np 2 -x TPLOAD_TEST_SLOW_RANK \
  -x TPLOAD_IO_REQUEST_KIB "$TPLOAD" load "$M/slow" \
  --plan "$M/slow/plan.json" --io direct --json --stall-timeout 2 \
  >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
if [ $rc -eq 0 ]; then t_ok "a slow rank 0 that keeps reading is waited for"
else t_fail "a slow rank 0 that keeps reading is waited for" \
  "exit $rc" "$(messages "$T_TMP/err" | head -c 1500)"; fi
t_py "the slow rank 0 read for longer than the stall deadline" '
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
if r["phases"]["read"] <= 3:
    sys.exit("rank 0 read for %.2f s: too fast to test" % r["phases"]["read"])
' "$T_TMP/out"

# A submit refused (the test-only TPLOAD_TEST_SUBMIT_FAIL=N: the Nth
# submit fails with EBUSY, its requests left queued): the job ends with
# 75 (EBUSY is temporary) and one message naming the file, whether it is
# the first read's submit or a later one's, and does not hang at the
# source's close (the queued requests are submitted before it waits).
for n in 1 3; do
  TPLOAD_TEST_SUBMIT_FAIL=$n timeout -s KILL 120 "$MPIRUN" --oversubscribe \
    -np 2 -x TPLOAD_TEST_SUBMIT_FAIL -x TPLOAD_IO_REQUEST_KIB "$TPLOAD" \
    load "$M/single" --plan "$M/single/plan.json" --io direct --quiet \
    >"$T_TMP/out" 2>"$T_TMP/err"
  rc=$?
  messages "$T_TMP/err" | grep 'I/O error in the' >"$T_TMP/notes"
  if [ $rc -eq 75 ] && [ "$(grep -c . "$T_TMP/notes")" = 1 ] &&
    grep -q 'model.safetensors: I/O error in the.*busy' "$T_TMP/notes"; then
    t_ok "submit $n refused: 75, one message naming the file"
  else t_fail "submit $n refused: 75, one message naming the file" \
    "exit $rc" "$(messages "$T_TMP/err" | head -c 1500)"; fi
done

t_exit "--io takes auto, direct or buffered (64)" 64 \
  mpi 2 load "$M/single" --io fast
t_done
