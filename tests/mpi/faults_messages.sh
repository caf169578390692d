#!/bin/sh
# faults_messages.sh - the messages and codes of odd inputs and failing
# devices (issue 31), each asserted by its text: a device EIO (the
# test-only TPLOAD_TEST_EIO_OFFSET=N fails the byte at offset N of every
# file with EIO, as a bad sector does; the same pread path as a real one)
# is 74 "I/O error" naming the file and the failed read's range, from
# offset N, never "shrank", in the
# header (inspect), in the data (load, preshard leaving no file) and with
# --read local; num_hidden_layers that is negative, a string, 2^40 or 0
# is 65 "invalid value" naming it (a missing one stays 64 "has no"); a
# 64 KiB MLC dataPath is 65; a message longer than its buffer keeps the
# reason at its end; a UTF-8 tensor name prints as UTF-8; with --read
# local and a slow rank 0 (TPLOAD_TEST_SLOW_RANK) the bar shows MiB/s or
# KiB/s, not "0.00 GiB/s", and says it counts rank 0's share.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

# t_exit and t_check write "$T_TMP/out" and "$T_TMP/err": the checks
# read copies (keep), and runs outside t_exit write "$T_TMP/o", "$T_TMP/e".
keep() { cp "$T_TMP/out" "$T_TMP/o"; cp "$T_TMP/err" "$T_TMP/e"; }

# t_says NAME FILE TEXT: FILE (tpload's messages) contains TEXT.
t_says() {
  if messages "$2" | grep -q -F -- "$3"; then t_ok "$1"
  else t_fail "$1" "expected: $3" "$(messages "$2" | head -c 1500)"; fi
}

# t_not_says NAME FILE TEXT: FILE does not contain TEXT.
t_not_says() {
  if ! grep -q -F -- "$3" "$2"; then t_ok "$1"
  else t_fail "$1" "unexpected: $3" "$(messages "$2" | head -c 1500)"; fi
}

# --- a device EIO ------------------------------------------------------------
gen m --seed 6401 --layout single --big-mib 1
ST=$M/m/model.safetensors
HLEN=$("$ORACLE" -c 'import struct, sys
print(struct.unpack("<Q", open(sys.argv[1], "rb").read(8))[0])' "$ST")
BAD=$((8 + HLEN + 70001)) # a byte of the data, read by whoever holds it

t_exit "EIO in the header: inspect exits 74" 74 env TPLOAD_TEST_EIO_OFFSET=3 \
  "$TPLOAD" inspect "$ST"
keep
t_says "... naming the file, the offset and the I/O error" "$T_TMP/e" \
  "$ST: I/O error reading the header length at offset 3: Input/output error"
t_not_says "... not a file ending early" "$T_TMP/e" "ending"

t_exit "EIO in the header itself: inspect exits 74" 74 env \
  TPLOAD_TEST_EIO_OFFSET=20 "$TPLOAD" inspect "$ST"
keep
t_says "... at offset 20" "$T_TMP/e" "header at offset 20: Input/output error"

for read in mpi local; do
  TPLOAD_TEST_EIO_OFFSET=$BAD "$MPIRUN" --oversubscribe -np 2 \
    -x TPLOAD_TEST_EIO_OFFSET "$TPLOAD" load "$M/m" --plan "$M/m/plan.json" \
    --read $read --quiet >"$T_TMP/o" 2>"$T_TMP/e"
  rc=$?
  t_check "EIO in the data, --read $read: exit 74 (got $rc)" [ $rc -eq 74 ]
  # the kernel does not say which byte failed: the message gives the
  # failed call's range, which starts at the bad byte here (the bytes
  # before it arrive)
  if messages "$T_TMP/e" |
    grep -qE "^tpload: (rank [01]: )?$ST: I/O error in the [0-9]+ bytes from offset $BAD: "
  then t_ok "... naming the file and the range from the failing byte"
  else t_fail "the range of the failed read" \
    "$(messages "$T_TMP/e" | head -c 1500)"; fi
  t_says "... and the device's error" "$T_TMP/e" "Input/output error"
  t_not_says "... never \"shrank\"" "$T_TMP/e" "shrank"
done

rm -rf "$T_TMP/ps"
TPLOAD_TEST_EIO_OFFSET=$BAD "$MPIRUN" --oversubscribe -np 2 \
  -x TPLOAD_TEST_EIO_OFFSET "$TPLOAD" preshard "$M/m" \
  --plan "$M/m/plan.json" --out "$T_TMP/ps" --quiet >"$T_TMP/o" \
  2>"$T_TMP/e"
rc=$?
t_check "EIO, preshard: exit 74 (got $rc)" [ $rc -eq 74 ]
t_check "... and no file left" [ -z "$(ls -A "$T_TMP/ps" 2>/dev/null)" ]

# --- num_hidden_layers -------------------------------------------------------
"$TPLOAD" synth --arch llama --out "$T_TMP/l" --hidden 64 --heads 4 \
  --kv-heads 4 --intermediate 128 --vocab 64 --layers 2 --quiet ||
  { echo "Bail out! synth failed"; exit 99; }
# layers VALUE: config.json's num_hidden_layers set to VALUE (JSON), or
# removed when VALUE is "none".
layers() {
  "$ORACLE" -c 'import json, sys
p = sys.argv[1] + "/config.json"; c = json.load(open(p))
c.pop("num_hidden_layers", None)
if sys.argv[2] != "none": c["num_hidden_layers"] = json.loads(sys.argv[2])
json.dump(c, open(p, "w"))' "$T_TMP/l" "$1"
}
echo '{"rules": []}' >"$T_TMP/rules.json"
for v in -1 '"two"' 1099511627776 0; do
  layers "$v"
  # The preset checks the config (presets.c); a plan file does not, and
  # --pp reads the layer count itself (planner.c).
  t_exit "num_hidden_layers $v with --pp 2 (preset): exit 65" 65 \
    "$TPLOAD" plan "$T_TMP/l" --shards 2 --pp 2
  keep
  t_says "... naming the file, the key and the value" "$T_TMP/e" \
    "$T_TMP/l/config.json: expected 'num_hidden_layers' to be a positive integer"
  t_says "... found $v" "$T_TMP/e" "found $v"
  t_not_says "... not \"has no\"" "$T_TMP/e" "has no"
  t_exit "num_hidden_layers $v with --pp 2 (plan file): exit 65" 65 \
    "$TPLOAD" plan "$T_TMP/l" --plan "$T_TMP/rules.json" --shards 2 --pp 2
  keep
  t_says "... \"invalid value $v\", naming the file" "$T_TMP/e" \
    "$T_TMP/l/config.json: num_hidden_layers: invalid value $v (expected a whole number of layers"
  t_not_says "... not \"has no\"" "$T_TMP/e" "has no"
  t_not_says "... not \"expected 1..0\"" "$T_TMP/e" "1..0"
done
layers none
t_exit "no num_hidden_layers with --pp 2: still 64" 64 \
  "$TPLOAD" plan "$T_TMP/l" --shards 2 --pp 2
keep
t_says "... \"has no\"" "$T_TMP/e" "config.json has no num_hidden_layers"

# --- a 64 KiB MLC dataPath ---------------------------------------------------
mkdir -p "$T_TMP/mlc"
"$ORACLE" -c 'import json, sys
json.dump({"records": [{"dataPath": "p" * 65536, "format": "raw-shard",
  "nbytes": 8, "records": [{"name": "w", "shape": [4], "dtype": "float16",
  "format": "raw", "nbytes": 8, "byteOffset": 0}]}]},
  open(sys.argv[1] + "/tensor-cache.json", "w"))' "$T_TMP/mlc"
t_exit "a 64 KiB MLC dataPath: exit 65, not 74" 65 "$TPLOAD" inspect "$T_TMP/mlc"
keep
t_says "... saying what was expected" "$T_TMP/e" \
  "expected a file name of at most 255 bytes, found 65536 bytes"

# --- a long message keeps its end --------------------------------------------
d=$T_TMP/long
for i in 1 2 3 4 5 6; do d=$d/$(printf "d$i%.0s" $(seq 125)); done
mkdir -p "$d"
"$ORACLE" -c 'import json, struct, sys
h = json.dumps({"n" * 1000: {"dtype": "F16", "shape": [4],
                             "data_offsets": [0, 10]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1] + "/model.safetensors", "wb").write(
    struct.pack("<Q", len(h)) + h + bytes(10))' "$d"
t_exit "a message of $((${#d} + 300)) bytes or so: exit 65" 65 \
  "$TPLOAD" inspect "$d/model.safetensors"
keep
t_check "... its line ends with the reason" \
  grep -q "expected 8 bytes (F16 shape \[4\]), found data_offsets \[0, 10\] spanning 10 bytes\$" \
  "$T_TMP/e"
t_says "... and begins with the path" "$T_TMP/e" "tpload: $T_TMP/long/d1d1"

# --- UTF-8 names ---------------------------------------------------------------
mkdir -p "$T_TMP/u"
"$ORACLE" -c 'import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, npst
npst.write(sys.argv[2] + "/model.safetensors",
           {"w\u00f6rter.weight": np.zeros(4, np.float32),
            "\u20ac.bias": np.zeros(2, np.float16)})' "$TESTS_SRCDIR/oracle" "$T_TMP/u"
t_exit "inspect of UTF-8 names" 0 "$TPLOAD" inspect "$T_TMP/u"
keep
t_check "... prints them as UTF-8" grep -q "wörter.weight" "$T_TMP/o"
t_check "... the euro sign too" grep -q "€.bias" "$T_TMP/o"
t_not_says "... without \\x escapes" "$T_TMP/o" '\x'

# --- progress below 5 MiB/s and with --read local ----------------------------
gen slow --seed 6402 --layout single --big-mib 16
TPLOAD_TEST_SLOW_RANK=0 "$MPIRUN" --oversubscribe -np 2 \
  -x TPLOAD_TEST_SLOW_RANK "$TPLOAD" load "$M/slow" \
  --plan "$M/slow/plan.json" --read local --progress=always \
  >"$T_TMP/o" 2>"$T_TMP/e"
rc=$?
t_check "a slow --read local load succeeds (exit $rc)" [ $rc -eq 0 ]
tr '\r' '\n' <"$T_TMP/e" | grep 'ETA' >"$T_TMP/bars"
t_check "the bar shows MiB/s or KiB/s" grep -q -E '[0-9] [KM]iB/s ETA' \
  "$T_TMP/bars"
t_not_says "... never GiB/s at this speed" "$T_TMP/bars" "GiB/s"
t_check "... and says it counts rank 0's share" \
  grep -q -F "(rank 0's share)" "$T_TMP/bars"

t_done
