#!/bin/sh
# read_auto.sh - `--read auto`, the default: every rank reads its own
# slices when every rank finds every file mostly in its page cache
# (the report's read {by: local, auto: true}), rank 0 reads and MPI
# delivers when one is not (read {by: mpi}); the shards are the numpy
# oracle's either way.  The files are evicted with POSIX_FADV_DONTNEED
# (fincore, util-linux, says whether they left the cache: the cases that
# need a cold file skip, saying why, where they stay).  Also: --read mpi
# and --io other than auto keep rank 0's stream on warm files, and
# TPLOAD_READ sets --read's default (the option wins; a bad value is 64).
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
unset TPLOAD_READ # the default, as users get it (lib.sh sets mpi)

gen m --seed 7101 --layout index --big-mib 3
# The tensors' bytes, from the files' own headers (what rank 0 reads
# when it reads them all: headers and padding aside).
TENSOR_BYTES=$("$ORACLE" -c '
import json, struct, sys
total = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    total += sum(t["data_offsets"][1] - t["data_offsets"][0]
                 for k, t in head.items() if k != "__metadata__")
print(total)
' "$M"/m/*.safetensors)

# evict: the model's files out of the page cache; 0 when they left it.
evict() {
  "$ORACLE" - "$M"/m/*.safetensors <<'EOF'
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
  ! fincore --noheadings --output PAGES "$M"/m/*.safetensors |
    grep -qv '^ *0$'
}

# warm: every byte of the model's files read into the page cache.
warm() { cat "$M"/m/*.safetensors >/dev/null; }

# read_is NAME JSON BY AUTO: the report says who read (BY) and whether
# auto chose it (AUTO: True / False).
read_is() {
  t_check "$1: the report says read by $3 (auto $4)" "$ORACLE" -c '
import json, sys
r = json.load(open(sys.argv[1]))["read"]
sys.exit(0 if (r["by"], str(r["auto"])) == (sys.argv[2], sys.argv[3]) else 1)
' "$2" "$3" "$4"
}

# bytes_read_are NAME JSON WHO: rank 0 read every tensor byte and the
# others none (WHO=rank0), or every rank some, each less than the model
# (WHO=each: a dim-1 cut of short pieces reads whole rows, so together
# they may read more).
bytes_read_are() {
  t_check "$1: bytes read ($3)" "$ORACLE" -c '
import json, sys
j, total = json.load(open(sys.argv[1])), int(sys.argv[3])
ranks = j["ranks"]
if sys.argv[2] == "rank0":
    ok = ranks[0]["bytes_read"] == total and \
        all(r["bytes_read"] == 0 for r in ranks[1:])
else:
    ok = all(0 < r["bytes_read"] < total for r in ranks)
sys.exit(0 if ok else 1)
' "$2" "$3" "$TENSOR_BYTES"
}

# auto_case NAME N WHO BY AUTO [options...]: load --json, its read, bytes
# read and a preshard with the same options checked by the oracle.
auto_case() {
  local name=$1 n=$2 who=$3 by=$4 auto=$5
  shift 5
  t_exit "$name: load exits 0" 0 \
    mpi "$n" load "$M/m" --plan "$M/m/plan.json" --json --quiet "$@"
  cp "$T_TMP/out" "$T_TMP/r.json"
  read_is "$name" "$T_TMP/r.json" "$by" "$auto"
  bytes_read_are "$name" "$T_TMP/r.json" "$who"
}

warm
auto_case "warm, 2 ranks" 2 each local True
auto_case "warm, 3 ranks" 3 each local True
t_exit "warm: preshard exits 0" 0 mpi 2 preshard "$M/m" \
  --plan "$M/m/plan.json" --out "$T_TMP/warm"
cp "$T_TMP/err" "$T_TMP/summary"
t_check "warm: the summary says every rank read its own slices" \
  grep -q "every rank read its own slices (--read auto: every file was in" \
  "$T_TMP/summary"
t_oracle "warm: every rank's tensors match the oracle" \
  check-preshard "$M/m" "$M/m/plan.json" 2 "$T_TMP/warm"
auto_case "warm, --read mpi" 2 rank0 mpi False --read mpi
auto_case "warm, --io buffered" 2 rank0 mpi True --io buffered
TPLOAD_READ=mpi auto_case "warm, TPLOAD_READ=mpi" 2 rank0 mpi False
TPLOAD_READ=mpi auto_case "warm, TPLOAD_READ=mpi --read auto" 2 each local \
  True --read auto
t_exit "TPLOAD_READ=elsewhere: exit 64" 64 env TPLOAD_READ=elsewhere \
  "$TPLOAD" load "$M/m" --plan "$M/m/plan.json" --quiet
cp "$T_TMP/err" "$T_TMP/usage"
t_check "TPLOAD_READ=elsewhere: the message names the choices" \
  grep -q "TPLOAD_READ expects auto, mpi or local, got 'elsewhere'" \
  "$T_TMP/usage"

# serve: the store the default read (local) is what preshard wrote, and
# status says who read; a reload of the evicted model then reads by mpi.
. "$TESTS_SRCDIR/lib/serve_lib.sh"
SOCK=$T_TMP/sock
mkdir -p "$T_TMP/dump"
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" serve \
  "$M/m" --plan "$M/m/plan.json" --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve, warm: ready" "$T_TMP/ready"
for r in 0 1; do
  "$TPLOAD" dump "$SOCK/rank$r.sock" --out "$T_TMP/dump/rank$r.safetensors" \
    2>/dev/null
done
t_dumps_match "serve, warm: every rank serves what preshard wrote" \
  2 "$T_TMP/dump" "$T_TMP/warm"
"$TPLOAD" status "$SOCK/rank0.sock" --json >"$T_TMP/status.json" 2>/dev/null
t_check "serve, warm: status says read by local (auto)" "$ORACLE" -c '
import json, sys
r = json.load(open(sys.argv[1]))["read"]
sys.exit(0 if (r["by"], r["auto"]) == ("local", True) else 1)
' "$T_TMP/status.json"
if evict; then
  t_exit "serve: a reload of the evicted model exits 0" 0 \
    "$TPLOAD" reload "$SOCK/rank0.sock" "$M/m" --plan "$M/m/plan.json"
  "$TPLOAD" status "$SOCK/rank0.sock" --json >"$T_TMP/status.json" 2>/dev/null
  t_check "serve, reloaded cold: status says read by mpi (auto)" "$ORACLE" -c '
import json, sys
r = json.load(open(sys.argv[1]))["read"]
sys.exit(0 if (r["by"], r["auto"]) == ("mpi", True) else 1)
' "$T_TMP/status.json"
else
  echo "ok $((T_COUNT += 1)) # SKIP serve, reloaded cold: POSIX_FADV_DONTNEED" \
    "left the files in the cache"
fi
t_exit "serve: status --shutdown exits 0" 0 \
  "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
t_check "serve: the job ends with exit 0" [ "$SERVE_RC" = 0 ]

if evict; then
  auto_case "cold, 2 ranks" 2 rank0 mpi True
  t_exit "cold: preshard exits 0" 0 mpi 2 preshard "$M/m" \
    --plan "$M/m/plan.json" --out "$T_TMP/cold" --quiet
  t_oracle "cold: every rank's tensors match the oracle" \
    check-preshard "$M/m" "$M/m/plan.json" 2 "$T_TMP/cold"
  evict
  TPLOAD_READ=local auto_case "cold, TPLOAD_READ=local" 2 each local False
  # One file warm, the other cold: not every file is, so rank 0 reads.
  evict
  cat "$M/m/model-00003-of-00003.safetensors" >/dev/null
  auto_case "one file cold" 2 rank0 mpi True
else
  for c in "cold, 2 ranks" "cold, TPLOAD_READ=local" "one file cold"; do
    echo "ok $((T_COUNT += 1)) # SKIP $c: POSIX_FADV_DONTNEED left the" \
      "files in the cache"
  done
fi

t_done
