#!/bin/sh
# expert_parallel.sh - `--ep` (issue 37): every rank's bytes of MoE
# checkpoints against the oracle's expectation of vLLM's expert map
# (oracle.py check-ep: determine_expert_map, experts whole on their
# owner), for per-expert tensors (HF mixtral), stacked [E, ...] ones (MLC
# mixtral's e1_e3 / e2, MLC qwen3_moe's moe_gate_up_proj / moe_down_proj)
# and a remainder (6 experts over 4 ranks), fp8 block-quantized experts
# (weight_scale_inv whole with its expert), at group sizes 2 and 4, by
# rank 0's stream and by --read local; a wrong map fails the oracle;
# `verify --ep` of an output and of one with a flipped byte; the load
# report's and status's map, a reload of a serve --ep job (its new map
# and bytes); `plan` and `inspect` show the map; the refusals (65 before any byte moves, an
# expert missing in one layer among them; 64 for --layout mlc).
# --ep-size 4 on TP2 x DP2 (the group spanning the replicas, vLLM's
# ep_rank = dp_rank x tp_size + tp_rank): bytes against check-ep --tp 2
# --ep-size 4 by both readers, bytes read, verify and a flipped expert
# byte, the report's map, plan, --ep-size 3 (64), stacked experts (65).
# A plan file's "expert" rules on experts the built-in names miss.
# Fixtures: oracle/mlc_archs.py with --experts.
. "$TESTS_SRCDIR/lib/lib.sh"
. "$TESTS_SRCDIR/lib/mpi_lib.sh"
. "$TESTS_SRCDIR/lib/serve_lib.sh"

A="$TESTS_SRCDIR/oracle/mlc_archs.py"

# fixture NAME ARCH FMT [write options...]: $M/NAME from mlc_archs.py.
fixture() {
  local name=$1 arch=$2 fmt=$3
  shift 3
  "$ORACLE" "$A" write "$arch" "$fmt" "$M/$name" "$@" ||
    { echo "Bail out! mlc_archs.py write $arch $fmt failed"; exit 99; }
}
fixture mx mixtral hf --experts 4
fixture mx6 mixtral hf --experts 6
fixture mxmlc mixtral mlc --experts 4
fixture q3 qwen3_moe mlc --experts 4

# ep_case NAME FIXTURE N OUT [preshard options...]: preshard --ep into
# $T_TMP/OUT, every rank's files and shard-info.json against the oracle.
ep_case() {
  local name=$1 fx=$2 n=$3 out=$T_TMP/$4
  shift 4
  t_exit "$name: preshard --ep exits 0" 0 \
    mpi "$n" preshard "$M/$fx" --out "$out" --ep --quiet "$@"
  t_oracle "$name: every rank holds its experts whole (oracle)" \
    check-ep "$M/$fx" "$M/$fx/plan.json" "$n" "$out"
}

ep_case "HF mixtral, 4 experts, N=2" mx 2 mx2
ep_case "HF mixtral, 4 experts, N=4 --read local" mx 4 mx4l --read local
ep_case "HF mixtral, 6 experts, N=4 (2, 2, 1, 1)" mx6 4 mx6
ep_case "MLC mixtral stacked, N=4" mxmlc 4 mxmlc4
ep_case "MLC qwen3_moe stacked, N=2 --read local" q3 2 q3l --read local
ep_case "MLC qwen3_moe stacked, N=4" q3 4 q34

# FP8 block-quantized experts (a DeepSeek / Qwen3-FP8 layout): each
# expert's weight_scale_inv moves with its expert, whole, never re-cut.
# moe_fixture DIR I [MODE]: expert size I; MODE "experts" adds the TP
# cut of every expert to the plan (what --ep must set aside); "f32" makes
# every weight float32 and unquantized, 6 experts, head_dim 256 (o_proj's
# rows cut in 4 are 1 KiB pieces, which --read local reads one by one);
# "renamed" is "f32" with the experts named block_sparse_moe.x<e>.w1
# (not ".experts.<e>."), plan.json's "expert" rules naming them and
# plain.json the same plan without them.
moe_fixture() {
"$ORACLE" - "$1" "$TESTS_SRCDIR/oracle" "$2" "${3:-}" <<'PY'

import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import npst
import oracle
renamed = sys.argv[4] == "renamed"
f32 = sys.argv[4] == "f32" or renamed
d, (E, H, KV, D, X) = sys.argv[1], (256, 4, 2, 256 if f32 else 64,
                                    6 if f32 else 4)
I = int(sys.argv[3])
rng = np.random.default_rng(37)
t = oracle.one_layer_frame(rng, E)
p = "model.layers.0."
for n, rows, cols in (("q_proj", H * D, E), ("k_proj", KV * D, E),
                      ("v_proj", KV * D, E), ("o_proj", E, H * D)):
    t[p + "self_attn." + n + ".weight"] = rng.random((rows, cols),
                                                     np.float32)
t[p + "block_sparse_moe.gate.weight"] = rng.random((X, E), np.float32)
for x in range(X):
    for n, rows, cols in (("w1", I, E), ("w3", I, E), ("w2", E, I)):
        b = p + "block_sparse_moe.%s.%s." % (
            ("x%d" if renamed else "experts.%d") % x, n)
        if f32:
            t[b + "weight"] = rng.random((rows, cols), np.float32)
            continue
        t[b + "weight"] = rng.integers(0, 256, (rows, cols), np.uint8)
        t[b + "weight_scale_inv"] = rng.random((rows // 128, cols // 128),
                                               np.float32)
os.makedirs(d)
npst.write(os.path.join(d, "model.safetensors"), t)
cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
       "hidden_size": E, "num_attention_heads": H,
       "num_key_value_heads": KV, "head_dim": D, "intermediate_size": I,
       "num_hidden_layers": 1, "num_local_experts": X}
if not f32:
    cfg["quantization_config"] = {"quant_method": "fp8",
                                  "weight_block_size": [128, 128]}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
a = "*.self_attn."
rules = [{"match": a + "q_proj.weight", "dim": 0},
         {"match": a + "k_proj.weight", "dim": 0},
         {"match": a + "v_proj.weight", "dim": 0},
         {"match": a + "o_proj.weight", "dim": 1}]
if sys.argv[4] == "experts":
    x = "*.block_sparse_moe.experts.*."
    rules += [{"match": x + "w1.weight", "dim": 0},
              {"match": x + "w3.weight", "dim": 0},
              {"match": x + "w2.weight", "dim": 1}]
if renamed:  # names experts.c does not know: only the plan's rules say
    json.dump({"rules": rules}, open(os.path.join(d, "plain.json"), "w"))
    x = "model.layers.*.block_sparse_moe.x*."
    rules += [{"match": x + "w1.weight", "dim": 0, "expert": True},
              {"match": x + "w3.weight", "dim": 0, "expert": True},
              {"match": x + "w2.weight", "expert": True}]
json.dump({"rules": rules}, open(os.path.join(d, "plan.json"), "w"))
PY
}
moe_fixture "$M/fp8" 256 || { echo "Bail out! the fp8 checkpoint failed"; exit 99; }
ep_case "fp8 block experts, N=2: scales move with their expert" fp8 2 fp8
# One 128-row block per expert, which a TP cut in two would split (65,
# as vLLM's validate_fp8_block_shape refuses): under --ep the experts
# are not cut, so the plan's rules for them are set aside, unchecked.
moe_fixture "$M/fp8b" 128 experts ||
  { echo "Bail out! the fp8 checkpoint failed"; exit 99; }
t_exit "one-block fp8 experts cut by TP in two: refused (65)" 65 \
  mpi 2 preshard "$M/fp8b" --out "$T_TMP/fp8b-tp" --quiet
ep_case "one-block fp8 experts, N=2 --ep: accepted, whole" fp8b 2 fp8b

# --- --read local --ep reads each rank's own bytes ---------------------------
# Each rank's bytes_read in the load report (buffered reads: no
# alignment) equals what the oracle says it holds: its TP share of the
# attention, the replicated rest and its experts whole (expected_ep,
# vLLM's map); 6 experts over 4 ranks hold 2, 2, 1, 1.
moe_fixture "$M/rd" 64 f32 ||
  { echo "Bail out! the f32 checkpoint failed"; exit 99; }
# rd_case N TP G: -np N --tp TP --ep-size G (G = TP: each replica's TP
# group; G = N: both replicas' ranks, TP2 x DP2, 6 experts 2, 2, 1, 1).
rd_case() {
  local n=$1 tp=$2 g=$3 what="N=$1 --read local --ep"
  [ "$g" = "$tp" ] || what="TP$2 x DP$(($1 / $2)) --read local --ep-size $3"
  mpi "$n" load "$M/rd" --plan "$M/rd/plan.json" --tp "$tp" --ep-size "$g" \
    --read local --io buffered --json --quiet >"$T_TMP/rd$n.json" \
    2>"$T_TMP/rd$n.err"
  if "$ORACLE" - "$M/rd" "$n" "$T_TMP/rd$n.json" "$TESTS_SRCDIR/oracle" \
    "$tp" "$g" >"$T_TMP/oout" 2>&1 <<'PY'; then
import json, sys
sys.path.insert(0, sys.argv[4])
import oracle
d, n, tp, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[5]), int(sys.argv[6])
rules = json.load(open(d + "/plan.json"))["rules"]
held = oracle.expected_ep(d, rules, n, oracle.config_experts(d), tp=tp,
                          size=g)
own = [sum(len(h[3]) for h in held[r]) for r in range(n)]
ranks = json.load(open(sys.argv[3]))["ranks"]
got = [(k["bytes"], k["bytes_read"], [x["align"] for x in k["reads"]])
       for k in ranks]
want = [(o, o, [0]) for o in own]
if got != want:
    sys.exit("expected (held, read, aligns) %r, found %r" % (want, got))
PY
    t_ok "$what: each rank reads exactly its own bytes"
  else
    t_fail "$what: each rank reads exactly its own bytes" \
      "$(cat "$T_TMP/oout" "$T_TMP/rd$n.err" | head -c 800)"
  fi
}
rd_case 2 2 2
rd_case 4 4 4
rd_case 4 2 4

# --- "expert" rules in a plan file ------------------------------------------
# Experts whose names the built-in classification does not know
# (block_sparse_moe.x<e>.w1): plan.json's "expert": true rules say whose
# they are, and each rank of 4 holds its 2, 2, 1, 1 experts whole
# (oracle, which takes the ids from the rules' last '*'); the same plan
# without the rules finds no experts (65).
moe_fixture "$M/ren" 64 renamed ||
  { echo "Bail out! the renamed checkpoint failed"; exit 99; }
ep_case "renamed experts by plan rules, N=4 --read local" ren 4 ren \
  --plan "$M/ren/plan.json" --read local
t_exit "renamed experts without expert rules: exit 65" 65 \
  mpi 2 preshard "$M/ren" --plan "$M/ren/plain.json" --out "$T_TMP/ren0" \
  --ep --quiet
grep -q "the model has no experts" "$T_TMP/err" &&
  t_ok "the message says the model has no experts" ||
  t_fail "the message says the model has no experts" \
    "$(messages "$T_TMP/err")"

out="$T_TMP/mx6"
if "$ORACLE" "$O" check-ep "$M/mx6" "$M/mx6/plan.json" 4 "$out" --shift 1 \
  >/dev/null 2>&1; then
  t_fail "a map shifted by one expert fails the oracle"
else
  t_ok "a map shifted by one expert fails the oracle"
fi

t_exit "verify --ep of the 6-expert output exits 0" 0 \
  "$TPLOAD" verify "$M/mx6" "$out" --ep
grep -q "all match" "$T_TMP/out" && t_ok "verify says all match" ||
  t_fail "verify says all match" "$(cat "$T_TMP/out" "$T_TMP/err")"
cp -r "$out" "$T_TMP/flipped"
"$ORACLE" - "$T_TMP/flipped/rank3.safetensors" <<'PY' ||
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-1] ^= 1  # the last byte of the last tensor's data
open(p, "wb").write(b)
PY
  { echo "Bail out! flipping a byte failed"; exit 99; }
t_exit "verify of a flipped byte exits 65" 65 \
  "$TPLOAD" verify "$M/mx6" "$T_TMP/flipped"
grep -q "rank 3" "$T_TMP/err" && t_ok "the mismatch names rank 3" ||
  t_fail "the mismatch names rank 3" "$(cat "$T_TMP/err")"
mpi 2 preshard "$M/mx" --out "$T_TMP/tp" --quiet
t_exit "verify --ep of a TP output exits 65" 65 \
  "$TPLOAD" verify "$M/mx" "$T_TMP/tp" --ep

# --- the load report and status carry the map --------------------------------
# t_report_map NAME JSON N TP [E [G]]: the report's expert_parallel is
# vLLM's map of the E (default 6) experts over the group of G ranks
# (default TP: every replica's rank t as shard t; G = N: group rank
# d x TP + t), from oracle.py's vllm_expert_map and ep_rank, not from
# tpload's output.
t_report_map() {
  if "$ORACLE" - "$2" "$3" "$4" "$TESTS_SRCDIR/oracle" "${5:-6}" "${6:-$4}" \
    >"$T_TMP/oout" 2>&1 <<'PY'; then t_ok "$1"; else t_fail "$1" "$(head -c 800 "$T_TMP/oout")"; fi
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from oracle import ep_rank, vllm_expert_map
ep = json.load(open(sys.argv[1]))["expert_parallel"]
n, tp, E, G = (int(a) for a in (sys.argv[2], sys.argv[3], sys.argv[5],
                                sys.argv[6]))
want = []
for r in range(n):
    er, t = ep_rank(r, tp, G)
    ids = np.nonzero(vllm_expert_map(G, er, E) >= 0)[0]
    want.append({"rank": r, "shard": t,
                 "experts": [int(ids[0]), len(ids)]})
got = (ep.get("size"), ep.get("experts"), ep.get("ranks"))
if got != (G, E, want):
    sys.exit("expected %r, found %r" % ((G, E, want), got))
PY
}
mpi 4 load "$M/mx6" --ep --json --quiet >"$T_TMP/rep4.json" 2>"$T_TMP/rep4.err"
t_report_map "load --json, N=4: expert_parallel is vLLM's map" \
  "$T_TMP/rep4.json" 4 4
mpi 4 load "$M/mx6" --ep --tp 2 --json --quiet >"$T_TMP/rep22.json" \
  2>"$T_TMP/rep22.err"
t_report_map "load --json, TP2 x DP2: each replica's ranks hold the map" \
  "$T_TMP/rep22.json" 4 2
mpi 4 load "$M/mx6" --ep 2>"$T_TMP/rep.err" >/dev/null
grep -q "ep 4 (the TP group), 6 experts" "$T_TMP/rep.err" &&
  t_ok "the load summary's grid line names the group and E" ||
  t_fail "the load summary's grid line names the group and E" \
    "$(tail -n 3 "$T_TMP/rep.err")"
SOCK=$T_TMP/sock
serve_start "$T_TMP/serve" "$MPIRUN" --oversubscribe -np 2 "$TPLOAD" \
  serve "$M/mx6" --ep --socket-dir "$SOCK" --ready-file "$T_TMP/ready" --quiet
t_serve_ready "serve --ep -np 2 is ready" "$T_TMP/ready"
"$TPLOAD" status "$SOCK/rank1.sock" --json >"$T_TMP/status.json" 2>&1
t_report_map "status --json (asked of rank 1): the same map" \
  "$T_TMP/status.json" 2 2
# reload inherits serve's --ep: to the 4-expert model, a new map (2, 2)
# in status, and each rank's bytes (dump) the oracle's for that map.
t_exit "reload of the serve --ep job to 4 experts exits 0" 0 \
  "$TPLOAD" reload "$SOCK/rank0.sock" "$M/mx"
"$TPLOAD" status "$SOCK/rank1.sock" --json >"$T_TMP/status2.json" 2>&1
t_report_map "status after the reload: vLLM's map of 4 experts" \
  "$T_TMP/status2.json" 2 2 4
for r in 0 1; do
  "$TPLOAD" dump "$SOCK/rank$r.sock" --out "$T_TMP/reload$r.st" \
    >/dev/null 2>&1
done
t_check "after the reload each rank holds its experts whole (oracle)" \
  "$ORACLE" - "$M/mx" "$T_TMP/reload" "$TESTS_SRCDIR/oracle" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
import oracle
d = sys.argv[1]
rules = json.load(open(d + "/plan.json"))["rules"]
held = oracle.expected_ep(d, rules, 2, oracle.config_experts(d))
for r in range(2):
    oracle._check_rank_file("%s%d.st" % (sys.argv[2], r), r,
                            {"tp_rank": str(r), "tp_size": "2"}, held[r])
PY
t_check "status --shutdown" "$TPLOAD" status "$SOCK/rank0.sock" --shutdown
serve_end
[ "$SERVE_RC" = 0 ] && t_ok "the serve --ep job ends with exit 0" ||
  t_fail "the serve --ep job ends with exit 0" "exit: $SERVE_RC"

# --- plan and inspect show the map ------------------------------------------
t_exit "plan --ep exits 0" 0 "$TPLOAD" plan "$M/mx6" --shards 4 --ep
"$ORACLE" - "$T_TMP/out" <<'PY' && t_ok "plan: each rank's experts, vLLM's map" ||
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
sys.exit([r["experts"] for r in ranks] != [[0, 2], [2, 2], [4, 1], [5, 1]])
PY
  t_fail "plan: each rank's experts, vLLM's map" "$(head -c 600 "$T_TMP/out")"
t_exit "inspect --ep exits 0" 0 "$TPLOAD" inspect "$M/mx6" --tp 4 --ep
grep -q "^rank 2 (d 0, p 0, t 2): .*, experts 4..4 of 6$" "$T_TMP/out" &&
  grep -q "experts.5.w2.weight .* expert, shard 3 " "$T_TMP/out" &&
  t_ok "inspect: rank 2 holds expert 4, expert 5 is shard 3's" ||
  t_fail "inspect: rank 2 holds expert 4, expert 5 is shard 3's" \
    "$(grep -e "^rank" -e "experts.5.w2" "$T_TMP/out")"

# --- --ep-size T x D: the group spans the replicas ---------------------------
# TP2 x DP2, --ep-size 4: group rank d x 2 + t (vLLM's ep_rank = dp_rank
# x tp_size + tp_rank), 6 experts as (2, 2, 1, 1) over the 4 ranks, each
# expert on one rank only; attention cut by TP, the same on both
# replicas (oracle: check-ep --tp 2 --ep-size 4).
span() {
  t_exit "TP2 x DP2 --ep-size 4 $1: preshard exits 0" 0 \
    mpi 4 preshard "$M/mx6" --out "$T_TMP/$2" --tp 2 --ep-size 4 --quiet \
    --read "$1"
  t_oracle "TP2 x DP2 --ep-size 4 $1: experts spread over both replicas" \
    check-ep "$M/mx6" "$M/mx6/plan.json" 4 "$T_TMP/$2" --tp 2 --ep-size 4
}
span mpi span
span local spanl
ORACLE_WANT="rank 0: tensor '.*experts.2"
t_oracle_fails "the oracle of a group of 2 (each replica's TP group) fails" \
  check-ep "$M/mx6" "$M/mx6/plan.json" 4 "$T_TMP/span" --tp 2
t_exit "verify --ep-size 4 of it exits 0" 0 \
  "$TPLOAD" verify "$M/mx6" "$T_TMP/span" --ep-size 4
grep -q "all match; replicas agree (experts aside)" "$T_TMP/out" &&
  t_ok "verify: replicas agree on all but the experts" ||
  t_fail "verify: replicas agree on all but the experts" "$(cat "$T_TMP/out")"
t_exit "verify --ep-size 2 of it: exit 65" 65 \
  "$TPLOAD" verify "$M/mx6" "$T_TMP/span" --ep-size 2
cp -r "$T_TMP/span" "$T_TMP/spanf"
"$ORACLE" - "$T_TMP/spanf/rank2.safetensors" <<'PY' ||
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
# rank 2 (d 1, t 0) alone holds expert 4: no replica to compare it with
x = json.loads(b[8:8 + n])["model.layers.1.block_sparse_moe.experts.4.w2.weight"]
b[8 + n + x["data_offsets"][0]] ^= 1
open(p, "wb").write(b)
PY
  { echo "Bail out! flipping a byte failed"; exit 99; }
t_exit "verify of a flipped byte in replica 1's expert 4 exits 65" 65 \
  "$TPLOAD" verify "$M/mx6" "$T_TMP/spanf"
grep -q "rank2.safetensors: tensor 'model.layers.1.*experts.4.w2" \
  "$T_TMP/err" && t_ok "the mismatch names rank 2 and the expert" ||
  t_fail "the mismatch names rank 2 and the expert" "$(cat "$T_TMP/err")"
mpi 4 load "$M/mx6" --tp 2 --ep-size 4 --json --quiet >"$T_TMP/reps.json" \
  2>"$T_TMP/reps.err"
t_report_map "load --json --ep-size 4: group rank d x T + t, vLLM's map" \
  "$T_TMP/reps.json" 4 2 6 4
t_exit "plan --ep-size 4 exits 0" 0 \
  "$TPLOAD" plan "$M/mx6" --shards 4 --tp 2 --ep-size 4
"$ORACLE" - "$T_TMP/out" <<'PY' && t_ok "plan: the map over TP x DP" ||
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
sys.exit([r["experts"] for r in ranks] != [[0, 2], [2, 2], [4, 1], [5, 1]])
PY
  t_fail "plan: the map over TP x DP" "$(head -c 600 "$T_TMP/out")"
t_exit "--ep-size 3 on TP2 x DP2: exit 64" 64 \
  mpi 4 load "$M/mx6" --tp 2 --ep-size 3 --quiet
grep -q "ep-size 3: expected 2 (--tp, the TP group) or 4" "$T_TMP/err" &&
  t_ok "the message names the allowed sizes" ||
  t_fail "the message names the allowed sizes" "$(messages "$T_TMP/err")"
t_exit "stacked experts over TP x DP: exit 65 (not built)" 65 \
  "$TPLOAD" plan "$M/mxmlc" --shards 4 --tp 2 --ep-size 4
grep -q "not built yet: use --ep-size 2" "$T_TMP/err" &&
  t_ok "the message names the tensor's limit and the way out" ||
  t_fail "the message names the tensor's limit and the way out" \
    "$(cat "$T_TMP/err")"

# --- refusals ---------------------------------------------------------------
fixture dense llama hf
t_exit "--ep on a model without experts: exit 65" 65 \
  mpi 2 preshard "$M/dense" --out "$T_TMP/no" --ep --quiet
grep -q "has no experts" "$T_TMP/err" && [ ! -e "$T_TMP/no/rank0.safetensors" ] &&
  t_ok "the message says so; nothing written" ||
  t_fail "the message says so; nothing written" "$(messages "$T_TMP/err")"
fixture unknown mixtral hf --experts 4 --set num_local_experts=null
t_exit "E unknown from the config: exit 65" 65 \
  "$TPLOAD" plan "$M/unknown" --shards 2 --ep
grep -q "needs the number of experts" "$T_TMP/err" &&
  t_ok "the message names the keys it read" ||
  t_fail "the message names the keys it read" "$(cat "$T_TMP/err")"
t_exit "4 experts over 8 ranks: exit 65" 65 \
  "$TPLOAD" plan "$M/mx" --shards 8 --tp 8 --ep
grep -qF "num_local_experts = 4 experts is fewer than the 8 ranks" \
  "$T_TMP/err" && t_ok "the message names both numbers" ||
  t_fail "the message names both numbers" "$(cat "$T_TMP/err")"
# Layer 1 without expert 2 (its w1, w2, w3 dropped; experts 0, 1, 3 and
# all of layer 0 kept): refused before any byte moves.
fixture miss mixtral hf --experts 4
"$ORACLE" - "$M/miss/model.safetensors" "$TESTS_SRCDIR/oracle" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[2])
import npst
t, meta, order = npst.read(sys.argv[1])
drop = "model.layers.1.block_sparse_moe.experts.2."
keep = {n: t[n] for n in order if not n.startswith(drop)}
assert len(keep) == len(t) - 3
npst.write(sys.argv[1], keep, metadata=meta)
PY
  { echo "Bail out! dropping layer 1's expert 2 failed"; exit 99; }
t_exit "layer 1 lacks expert 2: exit 65" 65 \
  mpi 2 preshard "$M/miss" --out "$T_TMP/miss" --ep --quiet
miss="no tensor 'model.layers.1.block_sparse_moe.experts.2.w1.weight'"
grep -qF "expert 2 is missing: $miss" "$T_TMP/err" &&
  [ ! -e "$T_TMP/miss/rank0.safetensors" ] &&
  t_ok "the message names layer 1's expert 2; nothing written" ||
  t_fail "the message names layer 1's expert 2; nothing written" \
    "$(messages "$T_TMP/err")"
fixture q6 qwen3_moe mlc --experts 6
t_exit "6 stacked experts over 4 ranks: exit 65" 65 \
  mpi 4 load "$M/q6" --ep --quiet
grep -q "6 experts do not divide by the 4 ranks" "$T_TMP/err" &&
  t_ok "the message names the tensor, E and the size" ||
  t_fail "the message names the tensor, E and the size" \
    "$(messages "$T_TMP/err")"
t_exit "preshard --layout mlc --ep: exit 64" 64 \
  mpi 2 preshard "$M/mxmlc" --out "$T_TMP/mlc" --layout mlc --ep --quiet
t_done
