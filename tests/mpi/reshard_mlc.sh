#!/bin/sh
# reshard_mlc.sh - an MLC presharded tensor cache as MODEL (issue 40):
# records "<name>_shard-<k>" for the params MLC cuts, "<name>" for the
# others, the cut taken from the preset on the cache's
# mlc-chat-config.json (src/mlc_cut.c).  An MLC q4f16_1 synth cut by
# `preshard --layout mlc` at 4, used as MODEL: inspect lists the
# original's tensors; preshard at 2 = preshard
# of the original at 2 (the rank files and shard-info.json; the copied
# mlc-chat-config.json says the cache's 4), and `--layout mlc` at 2 =
# the original's, every file, and `verify` with it as ORIGINAL passes
# both.  MLC's own converter's cache, from
# oracle/mlc_preshard.py write, read back at one rank = the original's
# tensors (oracle/reshard.py full: numpy).  --verify-md5 (load and
# inspect) checks the cache's files against their records' md5sums: the
# report lists them all, a flipped byte is 65 naming the file.  Bad caches: a missing
# "_shard-k" record, shard records of unequal shapes: 65 naming it; a
# whole shard's records gone: 65 naming mlc-chat-config.json's N.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

R="$TESTS_SRCDIR/oracle/reshard.py"
MP="$TESTS_SRCDIR/oracle/mlc_preshard.py"
S=$M/q4

# same WHAT A B FILE...: each FILE of A and B byte for byte.
same() {
  local what=$1 a=$2 b=$3 f bad=""
  shift 3
  for f in "$@"; do
    cmp -s "$a/$f" "$b/$f" || bad="$bad $f"
  done
  if [ -z "$bad" ]; then t_ok "$what"; else t_fail "$what" "differ:$bad"; fi
}

# cut WHAT N MODEL OUT [preshard options...]
cut() {
  local what=$1 n=$2 model=$3 out=$4
  shift 4
  t_check "$what" mpi "$n" preshard "$model" --out "$out" --quiet "$@"
}

"$TPLOAD" synth --arch llama --format mlc --quant q4f16_1 --layers 1 \
  --hidden 256 --intermediate 512 --vocab 256 --out "$S" --quiet ||
  { echo "Bail out! synth failed"; exit 99; }
cut "q4f16_1 --layout mlc at 4" 4 "$S" "$T_TMP/m4" --layout mlc
cut "the original at 2" 2 "$S" "$T_TMP/o2"
cut "the original --layout mlc at 2" 2 "$S" "$T_TMP/om2" --layout mlc

# listed MODEL [inspect options...]: NAME DTYPE SHAPE of every tensor
# inspect lists, sorted.
listed() {
  "$TPLOAD" inspect "$@" 2>&1 | grep -E '^[a-z].* \[' |
    sed 's/ *[0-9]* *params_shard_.*$//' | sort
}
listed "$S" >"$T_TMP/i.src"
listed "$T_TMP/m4" >"$T_TMP/i.m4"
if [ -s "$T_TMP/i.src" ] && cmp -s "$T_TMP/i.src" "$T_TMP/i.m4" &&
  "$TPLOAD" inspect "$T_TMP/m4" | grep -q "MLC cache, 4 shards"; then
  t_ok "inspect lists the original's names, dtypes and shapes"
else
  t_fail "inspect lists the original's names, dtypes and shapes" \
    "$(diff "$T_TMP/i.src" "$T_TMP/i.m4" | head -c 1500)"
fi

# --verify-md5: the cache's own files against the md5sums their records
# carry (tensor-cache.json; numpy's hashlib agrees with them first), by
# load and by inspect, which lists the full tensors still.
t_check "the 4-way cache's records carry its files' md5sums (hashlib)" \
  "$ORACLE" - "$T_TMP/m4" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
files = json.load(open(os.path.join(d, "tensor-cache.json")))["records"]
for f in files:
    got = hashlib.md5(open(os.path.join(d, f["dataPath"]), "rb").read())
    if got.hexdigest() != f["md5sum"]:
        sys.exit("%s: md5sum %s, found %s" % (f["dataPath"], f["md5sum"],
                                             got.hexdigest()))
open(os.path.join(d, "..", "m4.files"), "w").write(
    "\n".join(f["dataPath"] for f in files) + "\n")
PY
t_exit "load --verify-md5 of the 4-way cache at 2 exits 0" 0 \
  mpi 2 load "$T_TMP/m4" --verify-md5 --json
cp "$T_TMP/out" "$T_TMP/load-md5.json"
t_check "... its report lists every file of the cache as verified" \
  "$ORACLE" - "$T_TMP/load-md5.json" "$T_TMP/m4.files" <<'PY'
import json, sys
got = json.load(open(sys.argv[1])).get("md5", {}).get("verified")
want = open(sys.argv[2]).read().split()
if got != want:
    sys.exit("verified %r, expected %r" % (got, want))
PY
listed "$T_TMP/m4" --verify-md5 >"$T_TMP/i.m4md5"
if [ -s "$T_TMP/i.m4md5" ] && cmp -s "$T_TMP/i.src" "$T_TMP/i.m4md5" &&
  "$TPLOAD" inspect "$T_TMP/m4" --verify-md5 |
  grep -q "md5sum as the cache records: $(grep -c . "$T_TMP/m4.files") files"
then
  t_ok "inspect --verify-md5 lists the full tensors and checks every file"
else
  t_fail "inspect --verify-md5 lists the full tensors and checks every file" \
    "$(diff "$T_TMP/i.src" "$T_TMP/i.m4md5" | head -c 1500)"
fi
rm -rf "$T_TMP/m4x"
cp -r "$T_TMP/m4" "$T_TMP/m4x"
printf 'X' | dd of="$T_TMP/m4x/params_shard_2.bin" bs=1 seek=100 \
  conv=notrunc 2>/dev/null
t_exit "a flipped byte: load --verify-md5 exits 65" 65 \
  mpi 2 load "$T_TMP/m4x" --verify-md5
if messages "$T_TMP/err" | grep -q "m4x/params_shard_2.bin: expected md5sum"
then
  t_ok "... naming the file"
else
  t_fail "... naming the file" "$(messages "$T_TMP/err" | head -c 1000)"
fi

cut "the 4-way cache as MODEL at 2" 2 "$T_TMP/m4" "$T_TMP/r2"
same "... = preshard of the original at 2" "$T_TMP/o2" "$T_TMP/r2" \
  rank0.safetensors rank1.safetensors shard-info.json
cut "the 4-way cache as MODEL, --layout mlc at 2" 2 "$T_TMP/m4" \
  "$T_TMP/rm2" --layout mlc
same "... = the original's --layout mlc at 2, every file" "$T_TMP/om2" \
  "$T_TMP/rm2" $(ls "$T_TMP/om2")

t_check "verify with the 4-way cache as ORIGINAL (rank layout at 2)" \
  "$TPLOAD" verify "$T_TMP/m4" "$T_TMP/r2" --quiet
t_check "... and --layout mlc at 2" \
  "$TPLOAD" verify "$T_TMP/m4" "$T_TMP/rm2" --layout mlc --quiet

# MLC's own converter's cache at 2, read back whole.
"$TPLOAD" plan "$S" --shards 2 >"$T_TMP/q4.plan.json" 2>/dev/null
"$ORACLE" "$MP" write "$S" "$T_TMP/own" "$T_TMP/q4.plan.json" ||
  { echo "Bail out! mlc_preshard.py write failed"; exit 99; }
cut "MLC's own cache at 1 rank" 1 "$T_TMP/own" "$T_TMP/own1"
t_check "... = the original's tensors (numpy)" \
  "$ORACLE" "$R" full "$S" "$T_TMP/own1/rank0.safetensors"

# refused WHAT DIR WANT: `preshard DIR` at 1 rank exits 65 naming WANT.
refused() {
  t_exit "$1: 65" 65 mpi 1 preshard "$2" --out "$T_TMP/bad.out" --quiet
  if messages "$T_TMP/err" | grep -q -- "$3"; then
    t_ok "... naming $3"
  else
    t_fail "... naming $3" "$(messages "$T_TMP/err" | head -c 1000)"
  fi
}

# edit DIR PYTHON: DIR a copy of the 4-way cache, its tensor-cache.json
# changed by PYTHON (recs: every record).
edit() {
  rm -rf "$1" "$T_TMP/bad.out"
  cp -r "$T_TMP/m4" "$1"
  "$ORACLE" - "$1/tensor-cache.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
recs = [r for f in c["records"] for r in f["records"]]
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
PY
}
W=model.layers.0.mlp.down_proj.q_weight
edit "$T_TMP/b1" "
for f in c['records']:
    f['records'] = [r for r in f['records'] if r['name'] != '${W}_shard-2']"
refused "a missing _shard-k record" "$T_TMP/b1" "tensor '${W}_shard-2': missing"
edit "$T_TMP/b2" "
r = next(r for r in recs if r['name'] == '${W}_shard-1')
r['shape'] = [r['shape'][0] // 2, r['shape'][1]]
r['nbytes'] //= 2"
refused "shard records of unequal shapes" "$T_TMP/b2" "tensor '${W}_shard-1'"
edit "$T_TMP/b3" "
for f in c['records']:
    f['records'] = [r for r in f['records'] if not r['name'].endswith('_shard-3')]"
refused "every '_shard-3' record gone" "$T_TMP/b3" "tensor_parallel_shards 4"

t_done
