#!/bin/bash
# verify.sh - `tpload verify` accepts a true preshard output and names the
# first difference of each kind of tampering with it.
. "$TESTS_SRCDIR/lib/lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
model="$T_TMP/model"
good="$T_TMP/good"
"$TPLOAD" synth --arch qwen2 --out "$model" --layers 1 --quiet
"$MPIRUN" --oversubscribe -np 2 "$TPLOAD" preshard "$model" --out "$good" \
  --quiet 2>"$T_TMP/mpi.err" || cat "$T_TMP/mpi.err"

t_exit "a true preshard output verifies" 0 "$TPLOAD" verify "$model" "$good"
grep -q "all match" "$T_TMP/out" && t_ok "says all match" ||
  t_fail "says all match" "$(cat "$T_TMP/out")"

copy() { rm -rf "$T_TMP/bad"; cp -r "$good" "$T_TMP/bad"; }
# expect_bad NAME FRAGMENT: verify exits 65 and names what differs
expect_bad() {
  t_exit "$1: exit 65" 65 "$TPLOAD" verify "$model" "$T_TMP/bad"
  grep -q -- "$2" "$T_TMP/err" && t_ok "$1: names it" ||
    t_fail "$1: names it" "expected '$2' in: $(cat "$T_TMP/err")"
}

copy  # flip the last byte of rank 1's file (inside the last tensor's data)
"$ORACLE" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1]^=1; open(p,"wb").write(b)' "$T_TMP/bad/rank1.safetensors"
expect_bad "one flipped byte" "rank1.safetensors: tensor"

# wrong_checksum R: rank R's checksum of params[3] in shard-info.json is
# not its file's
wrong_checksum() {
  copy
  "$ORACLE" -c '
import json, sys
p = sys.argv[1]; d = json.load(open(p))
r = d["params"][3]["ranks"][int(sys.argv[2])]
r["xxh3"] = "%016x" % (int(r["xxh3"], 16) ^ 1)
json.dump(d, open(p, "w"))' "$T_TMP/bad/shard-info.json" "$1"
  expect_bad "wrong checksum of rank $1" "' rank $1: checksum"
}
wrong_checksum 0
wrong_checksum 1

copy  # a shape in shard-info.json that the plan does not give
"$ORACLE" -c '
import json, sys
p = sys.argv[1]; d = json.load(open(p))
d["params"][5]["shape"][0] += 1
json.dump(d, open(p, "w"))' "$T_TMP/bad/shard-info.json"
expect_bad "wrong shape in shard-info.json" "params\[5\]"

copy  # a key in a ranks entry of shard-info.json that preshard never writes
"$ORACLE" -c '
import json, sys
p = sys.argv[1]; d = json.load(open(p))
d["params"][3]["ranks"][0]["extra"] = 1
json.dump(d, open(p, "w"))' "$T_TMP/bad/shard-info.json"
expect_bad "an extra key in a ranks entry" "params\[3\]"

copy; cp "$T_TMP/bad/rank0.safetensors" "$T_TMP/bad/rank2.safetensors"
expect_bad "a stray rank file" "rank2.safetensors"

copy; cp "$T_TMP/bad/rank0.safetensors" "$T_TMP/bad/rank1.safetensors"
expect_bad "rank 0's file in rank 1's place" "rank1.safetensors"

copy; rm "$T_TMP/bad/rank1.safetensors"
t_exit "a missing rank file: exit 66" 66 "$TPLOAD" verify "$model" "$T_TMP/bad"

copy  # verified under another plan, the shards are not what it gives
echo '{"rules": []}' >"$T_TMP/replicate.json"
t_exit "another plan: exit 65" 65 "$TPLOAD" verify "$model" "$good" \
  --plan "$T_TMP/replicate.json"
t_exit "verify --help" 0 "$TPLOAD" verify --help
t_exit "verify without DIR" 64 "$TPLOAD" verify "$model"
t_done
