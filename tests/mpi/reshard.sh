#!/bin/sh
# reshard.sh - a presharded directory as MODEL (issue 40): tpload's own
# `--layout rank` output (any grid, --ep too, an MLC q4f16_1 model's),
# cut again for another N.  MLC layouts as MODEL (tpload's --layout mlc
# output, an MLC presharded cache from oracle/mlc_preshard.py write) in
# mlc_inputs (and tests/mpi/reshard_mlc.sh).
#
# Round trips: `preshard` of the N-way output at M ranks must give the
# files `preshard` of the original at M ranks gives, byte for byte (cmp,
# shard-info.json included; oracle/reshard.py same-info names a record
# that differs).  That compares two tpload outputs: the second, preshard
# from the original, is checked against the numpy oracle by mpi_load.sh,
# forward.sh, bias_policy.sh, expert_parallel.sh and mpi_mlc_layout.sh,
# and here too the re-sharded files meet numpy directly: llama 4 -> 2
# against oracle.py check-preshard, inputs read back whole (-np 1)
# against oracle.read_model of the original (reshard.py full), and the
# forward pass (oracle/forward.py) over re-sharded llama shards against
# the full model's logits.
#
# Biases: qwen2's q/k/v biases are column-parallel (cut, never scaled);
# the row-parallel (scaled) ones are gpt2's and gpt_neox's c_proj /
# dense biases.  Unscaled (--bias-policy whole) and scaled by a power of
# two they round-trip exactly; scaled by 3 in bf16 each is rebuilt as
# shard x 3 in float32 rounded once: reshard.py's numpy value byte for
# byte, within 1 ulp of the original, and the --json report counts them
# approximate.
#
# Bad inputs exit 65 naming the file (and tensor): when the directory is
# opened (inspect), a missing rank file, shard-info.json disagreeing with
# a header, two replicas disagreeing (each consistent with its own XXH3);
# as the bytes are read (preshard, writing no file), a rank file of
# another job on the same grid and a flipped byte.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"

need_mpi4py
R="$TESTS_SRCDIR/oracle/reshard.py"
MP="$TESTS_SRCDIR/oracle/mlc_preshard.py"
FWD="$TESTS_SRCDIR/oracle/forward.py"
SMALL="--layers 2 --hidden 64 --heads 4 --vocab 128 --quiet"

# synth NAME SYNTH-OPTIONS...: $M/NAME from tpload synth.
synth() {
  local name=$1
  shift
  "$TPLOAD" synth --out "$M/$name" "$@" ||
    { echo "Bail out! tpload synth $name failed"; exit 99; }
}

# to_n WHAT N SRC OUT [preshard options...]: one TAP line for `preshard
# SRC` at N ranks into $T_TMP/OUT.
to_n() {
  local what=$1 n=$2 src=$3 out=$T_TMP/$4
  shift 4
  t_exit "$what: preshard at N=$n exits 0" 0 \
    mpi "$n" preshard "$src" --out "$out" --quiet "$@"
}

# same_but_grid A B: two mlc-chat-config.json equal but for the grid's
# counts: the rank layout copies its MODEL's verbatim, and an MLC cache's
# says the cache's N where the original said its own.
same_but_grid() {
  "$ORACLE" - "$1" "$2" <<'EOF_PY'
import json, sys
def norm(path):
    with open(path, encoding="utf-8") as f:
        c = json.load(f)
    for o in (c, c.get("model_config", {})):
        o.pop("tensor_parallel_shards", None)
        o.pop("pipeline_parallel_stages", None)
    return c
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
EOF_PY
}

# same WHAT A B: one TAP line: directories A and B hold the same files,
# each equal byte for byte (where shard-info.json differs, reshard.py
# same-info names the first record that does).
same() {
  local what=$1 a=$2 b=$3 f bad=""
  rm -f "$T_TMP/same"
  if [ ! -d "$a" ] || [ ! -d "$b" ]; then
    t_fail "$what" "no output to compare"
    return
  fi
  if [ "$(ls "$a")" != "$(ls "$b")" ]; then
    t_fail "$what" "files differ: $(ls "$a" | tr '\n' ' ')" \
      "and: $(ls "$b" | tr '\n' ' ')"
    return
  fi
  for f in "$a"/*; do
    f=${f##*/}
    cmp -s "$a/$f" "$b/$f" && continue
    [ "$f" = mlc-chat-config.json ] && same_but_grid "$a/$f" "$b/$f" &&
      continue
    bad="$bad $f"
    [ "$f" = shard-info.json ] &&
      "$ORACLE" "$R" same-info "$a/$f" "$b/$f" 2>"$T_TMP/same"
  done
  if [ -z "$bad" ]; then
    t_ok "$what"
  else
    t_fail "$what" "differ:$bad" "$(cat "$T_TMP/same" 2>/dev/null)"
  fi
}

# round NAME SRC FROM TO [preshard options...]: $T_TMP/NAME-FROM and
# NAME-TO from SRC (made once), then NAME-FROM at TO ranks must equal
# NAME-TO.
round() {
  local name=$1 src=$2 from=$3 to=$4
  shift 4
  [ -d "$T_TMP/$name-$from" ] || to_n "$name" "$from" "$src" "$name-$from" "$@"
  [ -d "$T_TMP/$name-$to" ] || to_n "$name" "$to" "$src" "$name-$to" "$@"
  to_n "$name: re-shard $from -> $to" "$to" "$T_TMP/$name-$from" \
    "$name-$from-$to" "$@"
  same "$name: $from -> $to = preshard of the original at $to, file for file" \
    "$T_TMP/$name-$to" "$T_TMP/$name-$from-$to"
}

# whole WHAT MODEL DIR [reshard.py full options...]: DIR read back at one
# rank holds MODEL's tensors (numpy, oracle.read_model); the load report
# is left in $T_TMP/whole.json.
whole() {
  local what=$1 model=$2 dir=$3 out=$T_TMP/whole.$$
  shift 3
  rm -rf "$out"
  if ! mpi 1 preshard "$dir" --out "$out" --quiet --json \
    >"$T_TMP/whole.json" 2>"$T_TMP/err"; then
    t_fail "$what" "preshard -np 1 failed:" \
      "$(messages "$T_TMP/err" | head -c 1500)"
  elif "$ORACLE" "$R" full "$model" "$out/rank0.safetensors" "$@" \
    >"$T_TMP/rout" 2>"$T_TMP/rerr"; then
    t_ok "$what"
    sed 's/^/# /' "$T_TMP/rout"
  else
    t_fail "$what" "$(head -c 1500 "$T_TMP/rerr")"
  fi
}

# forward WHAT NAME SRC N: the logits of a TP-N forward pass over SRC's
# shards = those of the full $M/NAME (its reference made here).
forward() {
  local what=$1 name=$2 src=$3 n=$4
  "$ORACLE" "$FWD" ref "$M/$name" "$M/$name.ref.npy" 2>"$T_TMP/ferr" ||
    { t_fail "$what" "reference forward failed"; return; }
  if "$MPIRUN" --oversubscribe -np "$n" "$ORACLE" "$FWD" tp "$M/$name" \
    "$src" "$M/$name.ref.npy" --tp "$n" >/dev/null 2>"$T_TMP/ferr"; then
    t_ok "$what"
  else
    t_fail "$what" "$(messages "$T_TMP/ferr" | head -c 2000)"
  fi
}

# refused WHAT HOW DIR WANT...: DIR is refused, exit 65, with a message
# matching every WANT (grep -E).  HOW "open": by `inspect` (found before
# any tensor byte is read); "read": by `preshard` at one rank (found as
# the bytes are read), which writes no file.
refused() {
  local what=$1 how=$2 dir=$3 out=$T_TMP/refused.out w
  shift 3
  rm -rf "$out"
  if [ "$how" = open ]; then
    t_exit "$what: inspect exits 65" 65 "$TPLOAD" inspect "$dir"
  else
    t_exit "$what: preshard exits 65" 65 \
      mpi 1 preshard "$dir" --out "$out" --quiet
  fi
  messages "$T_TMP/err" >"$T_TMP/msg"
  for w in "$@"; do
    if grep -Eq -- "$w" "$T_TMP/msg"; then
      t_ok "... its message names $w"
    else
      t_fail "... its message names $w" "$(head -c 1000 "$T_TMP/msg")"
    fi
  done
  [ "$how" = open ] && return
  if [ -z "$(ls -A "$out" 2>/dev/null)" ]; then
    t_ok "... and no file is written"
  else
    t_fail "... and no file is written" "$(ls -A "$out")"
  fi
}

# --- llama: 4 -> 2, 2 -> 4, TP2 x PP2 -> TP4, TP2 x DP2 -> 2; numpy checks
synth llama --arch llama $SMALL --dtype f32
round llama "$M/llama" 4 2
round llama "$M/llama" 2 4
to_n "llama TP2 x PP2" 4 "$M/llama" llama-grid --tp 2 --pp 2
to_n "llama: re-shard TP2 x PP2 -> TP4" 4 "$T_TMP/llama-grid" llama-grid-4
same "llama: TP2 x PP2 -> TP4 = preshard of the original at 4" \
  "$T_TMP/llama-4" "$T_TMP/llama-grid-4"
to_n "llama TP2 x DP2" 4 "$M/llama" llama-dp --tp 2
to_n "llama: re-shard TP2 x DP2 -> TP2" 2 "$T_TMP/llama-dp" llama-dp-2
same "llama: TP2 x DP2 -> TP2 = preshard of the original at 2" \
  "$T_TMP/llama-2" "$T_TMP/llama-dp-2"
# llama's preset rules as a plan file for the oracle: mpi_lib.sh's, but
# lm_head whole and each rule with the preset's func_name (MLC's
# llama_model.py: _shard_q, ..., _shard_down).
llama_grid_plan "$T_TMP/llama-plan.json"
"$ORACLE" - "$T_TMP/llama-plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["rules"] = [dict(r, name="_shard_" + r["match"].split(".")[-2]
                      .replace("_proj", ""))
                 for r in plan["rules"] if r["match"] != "lm_head.weight"]
json.dump(plan, open(sys.argv[1], "w"))
PY
t_oracle "llama 4 -> 2: each rank's files against the numpy oracle" \
  check-preshard "$M/llama" "$T_TMP/llama-plan.json" 2 "$T_TMP/llama-4-2"
whole "llama: the 4-way output read whole = the original (numpy)" \
  "$M/llama" "$T_TMP/llama-4"
t_check "... the --json report has no approximate tensor" \
  "$ORACLE" -c 'import json, sys
sys.exit("approximate" in json.load(open(sys.argv[1])))' "$T_TMP/whole.json"
t_check "verify ORIGINAL of the 4 -> 2 output" \
  "$TPLOAD" verify "$M/llama" "$T_TMP/llama-4-2" --quiet
forward "llama 4 -> 2: logits of the re-sharded shards = the checkpoint's" \
  llama "$T_TMP/llama-4-2" 2
t_exit "--read local of a presharded MODEL: 64 (only rank 0 rebuilds)" 64 \
  mpi 2 load "$T_TMP/llama-4" --read local --quiet
"$TPLOAD" inspect "$M/llama" >"$T_TMP/i.orig" 2>&1
"$TPLOAD" inspect "$T_TMP/llama-4" >"$T_TMP/i.re" 2>&1
t_check "inspect of the 4-way output says presharded" \
  grep -qi presharded "$T_TMP/i.re"
# NAME DTYPE [SHAPE] of every tensor line, sorted.
triples() {
  sed -n 's/^\([^ ]*\)  *\([A-Z0-9]*\)  *\(\[[^]]*\]\).*/\1 \2 \3/p' "$1" |
    sort
}
triples "$T_TMP/i.orig" >"$T_TMP/t.orig"
triples "$T_TMP/i.re" >"$T_TMP/t.re"
if [ -s "$T_TMP/t.orig" ] && cmp -s "$T_TMP/t.orig" "$T_TMP/t.re"; then
  t_ok "... and lists the original's names, dtypes and shapes"
else
  t_fail "... and lists the original's names, dtypes and shapes" \
    "$(diff "$T_TMP/t.orig" "$T_TMP/t.re" | head -20)"
fi

# --- biases ------------------------------------------------------------
synth qwen2 --arch qwen2 $SMALL
round qwen2 "$M/qwen2" 4 2
synth gpt2 --arch gpt2 --layers 2 --hidden 96 --heads 12 --vocab 96 --quiet
round gpt2-whole "$M/gpt2" 4 2 --bias-policy whole
to_n "gpt2 bf16, biases / 3" 3 "$M/gpt2" gpt2-3
whole "gpt2 bf16 3 -> 1: biases x 3 rounded once (numpy), <= 1 ulp" \
  "$M/gpt2" "$T_TMP/gpt2-3" --scaled 3 "$T_TMP/gpt2-3/shard-info.json"
t_check "... the --json report counts the 4 scaled biases approximate" \
  "$ORACLE" -c 'import json, sys
a = json.load(open(sys.argv[1]))["approximate"]
sys.exit(a != {"tensors": 4, "max_error": "1 ulp"})' "$T_TMP/whole.json"
synth gpt2-f32 --arch gpt2 $SMALL --dtype f32
round gpt2-f32 "$M/gpt2-f32" 4 2
synth neox --arch gpt_neox $SMALL
round gpt_neox "$M/neox" 4 2

# --- experts: per-expert (mixtral, and --ep) and stacked (MLC qwen3_moe) --
synth mixtral --arch mixtral $SMALL
round mixtral "$M/mixtral" 4 2
round mixtral-ep "$M/mixtral" 4 2 --ep
"$ORACLE" "$TESTS_SRCDIR/oracle/mlc_archs.py" write qwen3_moe mlc "$M/q3" \
  --experts 4 ||
  { echo "Bail out! mlc_archs.py write qwen3_moe failed"; exit 99; }
# By its plan file (mlc_archs.py's expectations), given again to the
# re-shard: the input's cut is shard-info.json's, the output's the plan's.
round qwen3_moe-stacked "$M/q3" 4 2 --plan "$M/q3/plan.json"

# --- MLC q4f16_1 in the rank layout (its mlc-chat-config.json goes along)
synth q4 --arch llama --format mlc --quant q4f16_1 --layers 1 --hidden 256 \
  --intermediate 512 --vocab 256 --quiet
round q4 "$M/q4" 4 2

# mlc_inputs: MLC's layouts as MODEL: tpload's --layout mlc output in
# (to both layouts) and out (from the rank layout), MLC's own presharded
# cache (oracle/mlc_preshard.py write) read whole and re-cut.
mlc_inputs() {
  round q4-mlc "$M/q4" 4 2 --layout mlc
  to_n "q4 --layout mlc -> rank layout" 2 "$T_TMP/q4-mlc-4" q4-mlc-4-rank
  same "... = preshard of the original at 2" "$T_TMP/q4-2" \
    "$T_TMP/q4-mlc-4-rank"
  t_check "verify --layout mlc ORIGINAL of the 4 -> 2 cache" \
    "$TPLOAD" verify "$M/q4" "$T_TMP/q4-mlc-4-2" --layout mlc --quiet
  # the rank layout holds no tokenizer files nor the cache's metadata:
  # --layout mlc is written from an MLC weight directory only
  mpi 2 preshard "$T_TMP/q4-4" --out "$T_TMP/q4-4-mlc" --quiet \
    --layout mlc >"$T_TMP/q4-4-mlc.err" 2>&1
  t_check "q4 rank layout -> --layout mlc: refused (64)" [ $? -eq 64 ]
  t_check "... the refusal says it needs an MLC weight directory" \
    grep -q "from an MLC weight directory" "$T_TMP/q4-4-mlc.err"
  "$TPLOAD" plan "$M/q4" --shards 2 >"$T_TMP/q4.plan.json" 2>/dev/null
  "$ORACLE" "$MP" write "$M/q4" "$T_TMP/q4-own" "$T_TMP/q4.plan.json" ||
    { echo "Bail out! mlc_preshard.py write failed"; exit 99; }
  "$TPLOAD" inspect "$T_TMP/q4-own" >"$T_TMP/i.own" 2>&1
  t_check "inspect of MLC's own presharded cache says presharded" \
    grep -qi presharded "$T_TMP/i.own"
  whole "MLC's own cache read whole = the original (numpy)" \
    "$M/q4" "$T_TMP/q4-own"
  to_n "MLC's own cache" 2 "$T_TMP/q4-own" q4-own-2
  same "... at 2 = preshard of the original at 2" "$T_TMP/q4-2" \
    "$T_TMP/q4-own-2"
}
mlc_inputs

# --- bad inputs: 65 naming the file (and tensor), no file written ---------
L4=$T_TMP/llama-4
bad() { rm -rf "$T_TMP/bad"; cp -r "$L4" "$T_TMP/bad"; }
bad
rm "$T_TMP/bad/rank2.safetensors"
refused "a missing rank file" open "$T_TMP/bad" rank2.safetensors
synth llama-b --arch llama $SMALL --dtype f32 --seed 7
to_n "another job" 4 "$M/llama-b" llama-b-4
bad
cp "$T_TMP/llama-b-4/rank1.safetensors" "$T_TMP/bad/"
# Same grid, plan and shapes: told apart by the job fingerprint its
# header and shard-info.json record, before a tensor byte is read.
refused "a rank file of another job" open "$T_TMP/bad" \
  'bad/rank1\.safetensors: fingerprint' 'bad/shard-info\.json' 'another job'
refused "... and preshard of it" read "$T_TMP/bad" 'rank1\.safetensors' \
  'another job'
t_exit "... and verify ORIGINAL of it: 65" 65 \
  "$TPLOAD" verify "$M/llama" "$T_TMP/bad" --quiet
if messages "$T_TMP/err" | grep -q 'rank1\.safetensors: __metadata__.*fingerprint'
then
  t_ok "... naming rank1.safetensors' fingerprint"
else
  t_fail "... naming rank1.safetensors' fingerprint" \
    "$(messages "$T_TMP/err" | head -c 1000)"
fi
# An output older than the fingerprint (no key in any header nor in
# shard-info.json) is read as before.
bad
"$ORACLE" - "$T_TMP/bad" <<'PY'
import glob, json, os, re, sys
d = sys.argv[1]
for path in glob.glob(os.path.join(d, "rank*.safetensors")):
    with open(path, "r+b") as f:
        head = f.read(1 << 16)
        m = re.search(rb',"fingerprint":"[0-9a-f]{16}"', head)
        if m is None:
            sys.exit("%s: no fingerprint in the header" % path)
        f.seek(m.start())
        f.write(b" " * (m.end() - m.start()))
path = os.path.join(d, "shard-info.json")
info = json.load(open(path))
del info["fingerprint"]
json.dump(info, open(path, "w"))
PY
to_n "an output without fingerprints" 2 "$T_TMP/bad" old-2
same "... re-sharded at 2 = preshard of the original at 2" \
  "$T_TMP/llama-2" "$T_TMP/old-2"
bad
"$ORACLE" - "$T_TMP/bad/shard-info.json" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
p = next(p for p in info["params"]
         if p["name"] == "model.layers.0.self_attn.o_proj.weight")
p["shape"] = [p["shape"][1], p["shape"][0]]
json.dump(info, open(sys.argv[1], "w"))
PY
refused "shard-info.json disagreeing with a header" open "$T_TMP/bad" \
  shard-info.json 'layers\.0\.self_attn\.o_proj\.weight'
# Two replicas (TP2 x DP2): replica 1's copy of shard 0 of a tensor
# changed, and its recorded XXH3 with it (each file agrees with
# shard-info.json; the replicas disagree).
rm -rf "$T_TMP/bad"
cp -r "$T_TMP/llama-dp" "$T_TMP/bad"
T=model.layers.1.mlp.down_proj.weight
flip_byte "$T_TMP/bad/rank2.safetensors" "$T" 5
"$ORACLE" - "$T_TMP/bad" "$T" "$TESTS_SRCDIR/oracle" <<'PY'
import json, os, sys
sys.path.insert(0, sys.argv[3])
import npst, oracle
d, name = sys.argv[1], sys.argv[2]
tensors, _, _ = npst.read(os.path.join(d, "rank2.safetensors"))
path = os.path.join(d, "shard-info.json")
info = json.load(open(path))
p = next(p for p in info["params"] if p["name"] == name)
r = next(r for r in p["ranks"] if r["rank"] == 2)
r["xxh3"] = oracle.xxh3_hex(tensors[name][2])
json.dump(info, open(path, "w"))
PY
refused "replicas disagreeing" open "$T_TMP/bad" "$T"
bad
flip_byte "$T_TMP/bad/rank1.safetensors" model.layers.0.mlp.up_proj.weight 3
refused "a flipped byte" read "$T_TMP/bad" rank1.safetensors \
  'layers\.0\.mlp\.up_proj\.weight'
t_done
