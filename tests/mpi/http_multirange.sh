#!/bin/bash
# http_multirange.sh - `--read local` from a URL asks for a rank's runs of
# pieces in multi-range GETs (RFC 9110 14.2 and 14.6), and falls back to
# one range a GET where the server answers otherwise.  Against the fault
# server (oracle/http_faults.py, whose multipart bodies are its own): at
# 2 ranks, a model with strided tensors (a dim-1 cut and a dim-0 cut of
# segments), each rank's shards are the numpy oracle's when
# the server answers multipart (with a quoted boundary; --read-gap 0,
# about 1,300 pieces a rank), answers 416, 200 with the whole object, one
# range alone, or one range coalescing them all, and when a multipart
# answer is cut (retried).  The refusals run at the default gap (big.cols'
# rows whole, big.rows' 3 segments a multi-range GET): their fallback is
# one GET a run, which the fault server serves slowly.  A fallback loses
# and doubles no byte: the single-range GETs answered 206 carry exactly
# the bytes the ranks report reading, and the multi-range GETs refused
# are one a rank a file at most (the first multi-range GET of a file is
# alone in flight until it is answered).  A multipart part the rank did not ask for fails the job (69),
# naming the URL.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/http_lib.sh"

gen m --seed 3811 --layout index --big-mib 1
faults_start "$M"
NFILES=$(ls "$M"/m/*.safetensors | wc -l)

# load MODE [GAP]: preshard of the model through the fault server's MODE
# at 2 ranks, --read local, --read-gap GAP (0 unless given; "default":
# not given) (report in rep.json, log emptied first); its exit code.
load() {
  local gap=(--read-gap "${2:-0}")
  [ "${2:-0}" = default ] && gap=()
  : >"$FLT_LOG"
  mpi 2 preshard "$FLT_URL/$1/m/" --out "$T_TMP/s-$1" \
    --plan "$M/m/plan.json" --read local "${gap[@]}" --quiet --json \
    >"$T_TMP/rep.json" 2>"$T_TMP/mpi.err"
}

# ranges MODE FALLBACK: the fault server's log against the report: with
# FALLBACK (1) every multi-range GET was refused, one a rank a file at most,
# and the single-range GETs answered 206 carry the bytes the ranks read;
# without (0) multi-range GETs were answered 206 and carried them.
ranges() {
  "$ORACLE" - "$FLT_LOG" "$T_TMP/rep.json" "$1" "$2" "$NFILES" \
    >"$T_TMP/ranges.out" 2>&1 <<'PY'
import json, sys
log, rep, mode, fallback, nfiles = sys.argv[1:6]
ranks = json.load(open(rep))["ranks"]
read = sum(r["bytes_read"] for r in ranks)
lines = [l.split() for l in open(log)]
def spans(rng):
    return [tuple(int(x) for x in p.split("-"))
            for p in rng[len("bytes="):].split(",")]
multi = [l for l in lines if "," in l[2]]
one = [l for l in lines if l[2] != "-" and "," not in l[2] and l[3] == "206"]
# the ranks' reads begin after the files' headers: rank 0's validation
# fetched those (bytes=0-...), the rest are the ranks' own
own = [l for l in one if spans(l[2])[0][0] > 0]
got1 = sum(b - a + 1 for l in own for a, b in spans(l[2]))
gotm = sum(b - a + 1 for l in multi if l[3] == "206" for a, b in spans(l[2]))
print("# %s: %d multi-range GETs (%s), %d single-range; %d bytes read"
      % (mode, len(multi), sorted({l[3] for l in multi}), len(own), read))
assert multi, "no multi-range GET was made"
if fallback == "1":
    assert len(multi) <= 2 * int(nfiles), "%d refused" % len(multi)
    assert got1 == read, "single-range GETs %d bytes, the ranks read %d" % (
        got1, read)
else:
    assert all(l[3] == "206" for l in multi), "a multi-range GET failed"
    assert got1 + gotm >= read, (got1, gotm, read)
PY
}

for mode in ok multimerge multicut multinone multiwhole multione; do
  fb=1 gap=default
  case $mode in ok | multicut) fb=0 gap=0 ;; multimerge) fb=0 ;; esac
  if load "$mode" "$gap"; then
    t_oracle "$mode: the oracle's shards" \
      check-preshard "$M/m" "$M/m/plan.json" 2 "$T_TMP/s-$mode"
    if ranges "$mode" "$fb"; then
      t_ok "$mode: $([ $fb = 1 ] && echo "fell back, no byte lost or doubled" ||
        echo "multi-range GETs answered")"
    else
      t_fail "$mode: the GETs" "$(cat "$T_TMP/ranges.out")"
    fi
    grep "^#" "$T_TMP/ranges.out"
  else
    t_fail "$mode: preshard" "$(messages "$T_TMP/mpi.err" | head -c 2000)"
  fi
done

load multibad
rc=$?
if [ "$rc" -eq 69 ] &&
  messages "$T_TMP/mpi.err" | grep -q "$FLT_URL/multibad/m/.*was not asked for"; then
  t_ok "a multipart part not asked for: 69, naming the URL"
else
  t_fail "a multipart part not asked for" "exit $rc" \
    "$(messages "$T_TMP/mpi.err" | head -c 1500)"
fi
t_done
