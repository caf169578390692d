#!/bin/sh
# mpi_gridviews.sh - what users see of a real grid job (issue 13), end to
# end under mpirun: `load --json` on TP2 x DP2 and TP2 x PP2 x DP2 gives
# every rank's (replica, stage, shard) as oracle.grid_coords says, T, P,
# D, and "replicas_agree": true (and the text summary the grid line);
# shard-info.json from `preshard --tp 2 --pp 2` on 8 ranks gives each
# param MLC's pipeline_stages
# (oracle.mlc_pipeline_stages) and lists exactly its holders with their
# coordinates, nbytes and the XXH3 of the oracle's bytes; `verify`
# accepts that output and names a flipped byte in replica 1 and replica
# 0's file standing in for replica 1 (65); `status --json` of a TP1 x
# PP2 x DP2 daemon gives its grid (and the text status its grid line), and `dump` (with or without `--tp 1 --pp 2`) of each of
# its ranks is byte for byte that rank's preshard file.
# Every job runs under $MPIRUN (mpi_lib.sh), so check-fast skips it.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

# The oracle's 4-layer model, config.json and plan (tests/grid_model.py).
"$ORACLE" "$TESTS_SRCDIR/oracle/grid_model.py" "$M/l4" ||
  { echo "Bail out! grid_model.py failed"; exit 99; }
PLAN=$M/l4/plan.json

# check_report.py REPORT TP PP DP: the --json report's grid.
cat >"$T_TMP/check_report.py" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import oracle
rep = json.load(open(sys.argv[1]))
tp, pp, dp = map(int, sys.argv[2:])
want = {"tensor_parallel_shards": tp, "pipeline_parallel_stages": pp,
        "data_parallel_replicas": dp, "replicas_agree": True}
got = {k: rep.get(k) for k in want}
coords = [(r.get("replica"), r.get("stage"), r.get("shard"))
          for r in rep.get("ranks", [])]
errs = []
if got != want:
    errs.append("expected %r, found %r" % (want, got))
if coords != oracle.grid_coords(tp * pp * dp, tp, pp):
    errs.append("rank coordinates %r" % coords)
print("\n".join(errs))
sys.exit(1 if errs else 0)
EOF

# check_info.py DIR MODEL PLAN TP PP DP LAYERS: shard-info.json's grid.
cat >"$T_TMP/check_info.py" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["TESTS_SRCDIR"] + "/oracle")
import oracle
d, model, plan = sys.argv[1:4]
tp, pp, dp, layers = map(int, sys.argv[4:])
rules = json.load(open(plan))["rules"]
held = oracle.expected_grid(oracle.read_model(model), rules, tp, pp, dp,
                            layers)
coords = oracle.grid_coords(tp * pp * dp, tp, pp)
info = json.load(open(os.path.join(d, "shard-info.json")))
errs = []
def same(what, a, b):
    if a != b:
        errs.append("%s: expected %r, found %r" % (what, a, b))
same("grid", [tp, pp, dp], [info.get("tensor_parallel_shards"),
                            info.get("pipeline_parallel_stages"),
                            info.get("data_parallel_replicas")])
for p in info["params"]:
    name = p["name"]
    same(name + ": pipeline_stages",
         oracle.mlc_pipeline_stages(name, layers, pp, False),
         p.get("pipeline_stages"))
    want = [{"rank": r, "replica": c[0], "stage": c[1], "shard": c[2],
             "nbytes": len(raw), "xxh3": oracle.xxh3_hex(raw)}
            for r, (tensors, c) in enumerate(zip(held, coords))
            for n, _, _, raw in tensors if n == name]
    same(name + ": ranks", want, p.get("ranks"))
print("\n".join(errs[:10]))
sys.exit(1 if errs else 0)
EOF

# --- load --json: the grid and the replicas' agreement ----------------------
for grid in "4 2 1 2" "8 2 2 2"; do
  set -- $grid
  name="load -np $1 --tp $2 --pp $3"
  if mpi "$1" load "$M/l4" --plan "$PLAN" --tp "$2" --pp "$3" --json \
    --quiet >"$T_TMP/load.json" 2>"$T_TMP/err"; then
    t_check "$name: report gives the grid and replicas_agree" \
      "$ORACLE" "$T_TMP/check_report.py" "$T_TMP/load.json" "$2" "$3" "$4"
  else
    t_fail "$name: exits 0" "$(head -c 1500 "$T_TMP/err")"
  fi
done

# The text summary says the grid and that the replicas agree.
t_exit "load -np 4 --tp 2 (summary)" 0 mpi 4 load "$M/l4" --plan "$PLAN" \
  --tp 2 --progress=never
grep -q "^tpload load: grid: tp 2 x pp 1 x dp 2, rank = (d\*1 + p)\*2 + t; replicas agree: yes$" \
  "$T_TMP/err" && t_ok "the summary gives the grid and replicas agree" ||
  t_fail "the summary gives the grid and replicas agree" "$(cat "$T_TMP/err")"

# --- preshard: shard-info.json and verify -----------------------------------
out=$T_TMP/grid
t_exit "preshard -np 8 --tp 2 --pp 2" 0 \
  mpi 8 preshard "$M/l4" --plan "$PLAN" --tp 2 --pp 2 --out "$out" --quiet
t_check "shard-info.json: MLC's stages, each tensor's holders and checksums" \
  "$ORACLE" "$T_TMP/check_info.py" "$out" "$M/l4/model.safetensors" \
  "$PLAN" 2 2 2 4
t_exit "verify the TP2 x PP2 x DP2 output" 0 \
  "$TPLOAD" verify "$M/l4" "$out" --plan "$PLAN" --tp 2 --pp 2
grep -q "^verify: 8 ranks (tp 2 x pp 2 x dp 2), .*all match; replicas agree$" \
  "$T_TMP/out" && t_ok "verify names the grid" ||
  t_fail "verify names the grid" "$(cat "$T_TMP/out")"

cp -r "$out" "$T_TMP/bad"
flip_byte "$T_TMP/bad/rank6.safetensors" model.layers.3.w 1
t_exit "verify: replica 1's flipped byte: exit 65" 65 \
  "$TPLOAD" verify "$M/l4" "$T_TMP/bad" --plan "$PLAN"
grep -q "rank6.safetensors: tensor 'model.layers.3.w': bytes differ .*(rank 6 is d 1, p 1, t 0; replica 0 holds the right bytes)" \
  "$T_TMP/err" && t_ok "verify names the replica's rank and tensor" ||
  t_fail "verify names the replica's rank and tensor" "$(cat "$T_TMP/err")"
rm -rf "$T_TMP/bad"
cp -r "$out" "$T_TMP/bad"
cp "$T_TMP/bad/rank2.safetensors" "$T_TMP/bad/rank6.safetensors"
t_exit "verify: replica 0's file as replica 1's: exit 65" 65 \
  "$TPLOAD" verify "$M/l4" "$T_TMP/bad" --plan "$PLAN"
grep -q "rank6.safetensors: __metadata__" "$T_TMP/err" &&
  t_ok "verify names the misplaced file" ||
  t_fail "verify names the misplaced file" "$(cat "$T_TMP/err")"

# --- serve: status and dump on a TP1 x PP2 x DP2 daemon ---------------------
t_exit "preshard -np 4 --tp 1 --pp 2 (for comparison)" 0 \
  mpi 4 preshard "$M/l4" --plan "$PLAN" --tp 1 --pp 2 --out "$T_TMP/ps" \
  --quiet
SOCK=$T_TMP/sock
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 4 "$TPLOAD" serve \
  "$M/l4" --plan "$PLAN" --tp 1 --pp 2 --socket-dir "$SOCK" \
  --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve -np 4 --tp 1 --pp 2 is ready" "$T_TMP/ready"
t_exit "status --json" 0 "$TPLOAD" status "$SOCK/rank0.sock" --json
cp "$T_TMP/out" "$T_TMP/status.json"
t_check "status gives the grid and replicas_agree" \
  "$ORACLE" "$T_TMP/check_report.py" "$T_TMP/status.json" 1 2 2
t_exit "status (text, the summary)" 0 "$TPLOAD" status "$SOCK/rank0.sock"
cp "$T_TMP/out" "$T_TMP/status.txt"
t_check "status prints the grid line" grep -qx \
  'grid: tp 1 x pp 2 x dp 2, rank = (d\*2 + p)\*1 + t; replicas agree: yes' \
  "$T_TMP/status.txt"
# The daemon names its grid: dump needs no --tp / --pp, and checks them
# against it when given.
for r in 0 1 2 3; do
  t_exit "dump rank $r" 0 "$TPLOAD" dump "$SOCK/rank$r.sock" \
    --out "$T_TMP/dump$r.safetensors"
  t_check "rank $r's dump is byte for byte its preshard file" \
    cmp "$T_TMP/dump$r.safetensors" "$T_TMP/ps/rank$r.safetensors"
  t_exit "dump rank $r --tp 1 --pp 2 (the daemon's grid)" 0 "$TPLOAD" dump \
    "$SOCK/rank$r.sock" --out "$T_TMP/dump$r.safetensors" --tp 1 --pp 2 \
    --force
  t_check "rank $r's dump --tp 1 --pp 2 is its preshard file" \
    cmp "$T_TMP/dump$r.safetensors" "$T_TMP/ps/rank$r.safetensors"
done
t_exit "dump --tp 3 (not the daemon's grid)" 64 \
  "$TPLOAD" dump "$SOCK/rank1.sock" --out "$T_TMP/x.safetensors" --tp 3
t_exit "dump --tp 2 --pp 2 (divides 4 ranks, not the daemon's grid)" 64 \
  "$TPLOAD" dump "$SOCK/rank1.sock" --out "$T_TMP/x.safetensors" --tp 2 \
  --pp 2
cp "$T_TMP/err" "$T_TMP/refusal"
t_check "the refusal names the daemon's grid and the flags" grep -qF \
  "rank1.sock: the daemon serves a grid of tp 1 x pp 2 (4 ranks), not the --tp 2 --pp 2 given" \
  "$T_TMP/refusal"
t_check "a refused dump writes nothing" [ ! -e "$T_TMP/x.safetensors" ]
t_exit "status --shutdown" 0 "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
t_check "the serve job ends with 0" [ "$SERVE_RC" = 0 ]

t_done
