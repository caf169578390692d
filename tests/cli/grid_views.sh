#!/bin/sh
# grid_views.sh - what `tpload plan` and `tpload inspect` show of a
# TP x PP x DP grid, checked against the numpy oracle
# (tests/oracle.py: grid_coords, mlc_pipeline_stages, expected_grid), not
# against tpload's own output: every rank's (replica, stage, shard), the
# tensors it holds with their shapes and bytes, each param's MLC
# "pipeline_stages", and the refusals (64) of a grid that does not divide
# the world or the layers.  Topologies: TP2 x DP2, TP2 x PP2, TP2 x PP2 x
# DP2 and TP1 x PP4 on a 4-layer llama-like model.  Then `tpload verify`
# on a TP2 x PP2 x DP2 output written from the oracle's bytes, and on
# copies with a replica's byte flipped, a rank file of the wrong stage and
# a wrong holder in shard-info.json.
. "$TESTS_SRCDIR/lib/lib.sh"

# check.py KIND OUT TP PP DP: KIND plan (tpload plan's JSON) or inspect
# (inspect --json).
cat >"$T_TMP/check.py" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import oracle

kind, path, tp, pp, dp = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
d = os.path.dirname(path)
model = oracle.read_model(os.path.join(os.environ["MODEL"],
                                       "model.safetensors"))
rules = json.load(open(os.path.join(os.environ["MODEL"], "plan.json")))["rules"]
want = oracle.expected_grid(model, rules, tp, pp, dp, 4)
coords = oracle.grid_coords(tp * pp * dp, tp, pp)
got = json.load(open(path))
errs = []
def same(what, a, b):
    if a != b:
        errs.append("%s: expected %r, found %r" % (what, a, b))
same("tensor_parallel_shards", tp, got.get("tensor_parallel_shards"))
same("pipeline_parallel_stages", pp, got.get("pipeline_parallel_stages"))
same("data_parallel_replicas", dp, got.get("data_parallel_replicas"))
params = got.get("params" if kind == "plan" else "tensors") or []
for p in params:
    same(p["name"] + ": pipeline_stages",
         oracle.mlc_pipeline_stages(p["name"], 4, pp, False),
         p.get("pipeline_stages"))
ranks = got.get("ranks") or []
same("rank count", len(want), len(ranks))
for r, (rk, held, c) in enumerate(zip(ranks, want, coords)):
    same("ranks[%d] rank" % r, r, rk.get("rank"))
    same("ranks[%d] (replica, stage, shard)" % r, c,
         (rk.get("replica"), rk.get("stage"), rk.get("shard")))
    same("ranks[%d] tensors" % r, [h[0] for h in held], rk.get("tensors"))
    same("ranks[%d] bytes" % r, sum(len(h[3]) for h in held),
         rk.get("bytes"))
shape = {p["name"]: p.get("shape" if kind == "plan" else "shard_shape")
         for p in params}
for r, held in enumerate(want):
    for name, _, rank_shape, _ in held:
        same("rank %d: %s shape" % (r, name), rank_shape, shape.get(name))
if errs:
    print("\n".join(errs[:20]))
    sys.exit(1)
EOF

# The oracle's 4-layer model, config.json and plan (tests/grid_model.py).
if ! "$ORACLE" "$TESTS_SRCDIR/oracle/grid_model.py" "$T_TMP/m" 2>"$T_TMP/gen.err"
then
  t_fail "write the test model" "$(head -c 2000 "$T_TMP/gen.err")"
  t_done
  exit 1
fi
export MODEL="$T_TMP/m"

# check_views NAME TP PP DP GRID_ARGS: plan and inspect --json on the
# grid (GRID_ARGS: options without spaces in their values).
check_views() {
  name=$1 tp=$2 pp=$3 dp=$4 grid=$5
  for kind in plan inspect; do
    # shellcheck disable=SC2086
    if [ "$kind" = plan ]; then
      set -- plan "$MODEL" --plan "$MODEL/plan.json" $grid
    else
      set -- inspect --json "$MODEL" --plan "$MODEL/plan.json" $grid
    fi
    if ! "$TPLOAD" "$@" >"$T_TMP/$kind.json" 2>"$T_TMP/err"; then
      t_fail "$kind $name" "tpload $* failed: $(head -c 2000 "$T_TMP/err")"
    elif "$ORACLE" "$T_TMP/check.py" "$kind" "$T_TMP/$kind.json" \
      "$tp" "$pp" "$dp" >"$T_TMP/check.out" 2>&1; then
      t_ok "$kind $name"
    else
      t_fail "$kind $name" "$(head -c 3000 "$T_TMP/check.out")"
    fi
  done
}

check_views "TP2 x DP2" 2 1 2 "--shards 4 --tp 2"
check_views "TP2 x PP2" 2 2 1 "--tp 2 --pp 2"
check_views "TP2 x PP2 x DP2" 2 2 2 "--shards 8 --tp 2 --pp 2"
check_views "TP1 x PP4" 1 4 1 "--tp 1 --pp 4"
check_views "TP4 (one group, --shards alone)" 4 1 1 "--shards 4"
# --pp alone: the stages share the world, T = N / P (as load's -np 4 --pp 4)
check_views "TP2 x PP2 (--shards 4 --pp 2)" 2 2 1 "--shards 4 --pp 2"

# The text view: one line per rank with its coordinates; rank 5 of
# TP2 x PP2 x DP2 is (d 1, p 0, t 1) and holds stage 0 (embed, layers 0
# and 1 with their norms, lm_head: 6 tensors).
t_exit "inspect --shards 8 --tp 2 --pp 2 (text)" 0 \
  "$TPLOAD" inspect "$MODEL" --plan "$MODEL/plan.json" --shards 8 --tp 2 \
  --pp 2
grep -q "^grid: tp 2 x pp 2 x dp 2 = 8 ranks, rank = (d\*2 + p)\*2 + t$" \
  "$T_TMP/out" &&
  grep -q "^rank 5 (d 1, p 0, t 1): stage 0 of 2, shard 1 of 2: 6 tensors" \
    "$T_TMP/out" &&
  t_ok "inspect text names each rank's (d, p, t)" ||
  t_fail "inspect text names each rank's (d, p, t)" "$(cat "$T_TMP/out")"

# Refusals, with the numbers.
t_exit "plan --shards 6 --tp 2 --pp 2 refused" 64 \
  "$TPLOAD" plan "$MODEL" --plan "$MODEL/plan.json" --shards 6 --tp 2 --pp 2
grep -q "6 is not a multiple of --tp 2 x --pp 2 = 4" "$T_TMP/err" &&
  t_ok "the refusal gives the numbers" ||
  t_fail "the refusal gives the numbers" "$(cat "$T_TMP/err")"
t_exit "plan --pp 3 (4 layers) refused" 64 \
  "$TPLOAD" plan "$MODEL" --plan "$MODEL/plan.json" --tp 1 --pp 3
grep -q "does not divide the 4 layers" "$T_TMP/err" &&
  t_ok "the refusal names the layer count" ||
  t_fail "the refusal names the layer count" "$(cat "$T_TMP/err")"
t_exit "inspect --pp 8 (4 layers) refused" 64 \
  "$TPLOAD" inspect "$MODEL" --plan "$MODEL/plan.json" --tp 1 --pp 8
grep -q "expected 1..4" "$T_TMP/err" &&
  t_ok "the refusal gives the range" ||
  t_fail "the refusal gives the range" "$(cat "$T_TMP/err")"
t_exit "plan --pp without --tp or --shards" 64 \
  "$TPLOAD" plan "$MODEL" --pp 2
t_exit "inspect --pp without a grid" 64 "$TPLOAD" inspect "$MODEL" --pp 2
t_exit "plan --tp 0" 64 "$TPLOAD" plan "$MODEL" --tp 0
t_exit "plan --tp 300 --pp 300 (90,000 ranks)" 64 \
  "$TPLOAD" plan "$MODEL" --tp 300 --pp 300
grep -q "more than 65536 ranks" "$T_TMP/err" &&
  t_ok "plan says a grid beyond 65536 ranks is too large" ||
  t_fail "plan says a grid beyond 65536 ranks is too large" "$(cat "$T_TMP/err")"

# verify on a TP2 x PP2 x DP2 preshard output built from the oracle's
# bytes: each rank file holds its stage's tensors (shard t), shard-info
# lists each tensor's holders with the oracle's checksums (the params
# themselves are the plan's; verify recomputes and compares them).
cat >"$T_TMP/grid_out.py" <<'EOF'
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import npst, oracle

plan_json, out = sys.argv[1], sys.argv[2]
tp, pp, dp = 2, 2, 2
m = os.environ["MODEL"]
model = oracle.read_model(os.path.join(m, "model.safetensors"))
rules = json.load(open(os.path.join(m, "plan.json")))["rules"]
held = oracle.expected_grid(model, rules, tp, pp, dp, 4)
coords = oracle.grid_coords(tp * pp * dp, tp, pp)
os.makedirs(out)

def meta(r):
    """A rank file's __metadata__ as preshard documents it
    (src/preshard.h): tp_rank t, tp_size T and, when P x D > 1, the global
    rank, world_size and pp_/dp_ rank and size."""
    d, p, t = coords[r]
    m = {"tp_rank": t, "tp_size": tp}
    if pp * dp > 1:
        m.update(rank=r, world_size=len(held), pp_rank=p, pp_size=pp,
                 dp_rank=d, dp_size=dp)
    return {k: str(v) for k, v in m.items()}

for r, tensors in enumerate(held):
    npst.write(os.path.join(out, "rank%d.safetensors" % r),
               {n: np.frombuffer(raw, np.uint8).reshape(shape)
                for n, _, shape, raw in tensors},
               metadata=meta(r),
               order=[t[0] for t in tensors])
info = json.load(open(plan_json))
for p in info["params"]:
    p["ranks"] = [{"rank": r, "replica": c[0], "stage": c[1], "shard": c[2],
                   "nbytes": len(raw), "xxh3": oracle.xxh3_hex(raw)}
                  for r, (tensors, c) in enumerate(zip(held, coords))
                  for n, _, _, raw in tensors if n == p["name"]]
info = {k: info[k] for k in ("tensor_parallel_shards",
                              "pipeline_parallel_stages",
                              "data_parallel_replicas", "bias_scaling",
                              "params")}
json.dump(info, open(os.path.join(out, "shard-info.json"), "w"))
EOF
"$TPLOAD" plan "$MODEL" --plan "$MODEL/plan.json" --shards 8 --tp 2 --pp 2 \
  >"$T_TMP/plan8.json" 2>"$T_TMP/err" &&
  "$ORACLE" "$T_TMP/grid_out.py" "$T_TMP/plan8.json" "$T_TMP/good" \
    2>"$T_TMP/gen.err" ||
  t_fail "write a grid preshard output" "$(cat "$T_TMP/err" "$T_TMP/gen.err")"
t_exit "verify a TP2 x PP2 x DP2 output" 0 \
  "$TPLOAD" verify "$MODEL" "$T_TMP/good" --plan "$MODEL/plan.json"
grep -q "^verify: 8 ranks (tp 2 x pp 2 x dp 2), .*all match; replicas agree$" \
  "$T_TMP/out" && t_ok "verify names the grid" ||
  t_fail "verify names the grid" "$(cat "$T_TMP/out")"
t_exit "verify --tp 2 --pp 2 (matching)" 0 \
  "$TPLOAD" verify "$MODEL" "$T_TMP/good" --plan "$MODEL/plan.json" \
  --tp 2 --pp 2
t_exit "verify --pp 4 (not the output's)" 65 \
  "$TPLOAD" verify "$MODEL" "$T_TMP/good" --plan "$MODEL/plan.json" --pp 4
grep -q "the output is tp 2 x pp 2" "$T_TMP/err" &&
  t_ok "verify says which grid the output is" ||
  t_fail "verify says which grid the output is" "$(cat "$T_TMP/err")"
# A shard-info.json whose grid is out of range is refused, naming it.
cp -r "$T_TMP/good" "$T_TMP/badgrid"
"$ORACLE" - "$T_TMP/badgrid/shard-info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
info["data_parallel_replicas"] = 0
json.dump(info, open(sys.argv[1], "w"))
EOF
t_exit "verify: shard-info.json with data_parallel_replicas 0" 65 \
  "$TPLOAD" verify "$MODEL" "$T_TMP/badgrid" --plan "$MODEL/plan.json"
grep -q "shard-info.json: expected tensor_parallel_shards, .* of 1..65536" \
  "$T_TMP/err" && t_ok "verify names the bad grid in shard-info.json" ||
  t_fail "verify names the bad grid in shard-info.json" "$(cat "$T_TMP/err")"

# expect_bad NAME FRAGMENT: verify of $T_TMP/bad exits 65 naming it.
expect_bad() {
  t_exit "$1: exit 65" 65 \
    "$TPLOAD" verify "$MODEL" "$T_TMP/bad" --plan "$MODEL/plan.json"
  grep -q -- "$2" "$T_TMP/err" && t_ok "$1: names it" ||
    t_fail "$1: names it" "expected '$2' in: $(cat "$T_TMP/err")"
}
copy() { rm -rf "$T_TMP/bad"; cp -r "$T_TMP/good" "$T_TMP/bad"; }

copy # replica 1's rank 5 = (1, 0, 1): last byte of its data flipped
"$ORACLE" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-1]^=1; open(p,"wb").write(b)' \
  "$T_TMP/bad/rank5.safetensors"
expect_bad "a replica's byte flipped" \
  "rank5.safetensors: tensor '.*': bytes differ .*(rank 5 is d 1, p 0, t 1; replica 0 holds the right bytes)"

copy # rank 6 = (1, 1, 0) given rank 4's file: stage 0's tensors
cp "$T_TMP/bad/rank4.safetensors" "$T_TMP/bad/rank6.safetensors"
expect_bad "a stage-0 file in a stage-1 place" "rank6.safetensors"

copy # rank 5 = (1, 0, 1) given rank 1's file: the same bytes, but its
# metadata places it at (0, 0, 1)
cp "$T_TMP/bad/rank1.safetensors" "$T_TMP/bad/rank5.safetensors"
expect_bad "replica 0's file in replica 1's place" \
  "rank5.safetensors: __metadata__: expected .*(rank 5 is d 1, p 0, t 1)"

copy # shard-info.json names a holder that is not one
"$ORACLE" -c '
import json, sys
p = sys.argv[1]; d = json.load(open(p))
d["params"][1]["ranks"][0]["rank"] = 2
json.dump(d, open(p, "w"))' "$T_TMP/bad/shard-info.json"
expect_bad "a wrong holder in shard-info.json" "params\[1\]"

t_done
