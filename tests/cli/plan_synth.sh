#!/bin/sh
# plan_synth.sh - every preset covers its architecture's real tensor names:
# `tpload synth` writes each arch's checkpoint (HF, and MLC where synth
# supports it), and `tpload plan --plan auto` for N = 1, 2, 4 must shard
# every 2-D weight inside the layers (the MoE router excepted), replicate
# embeddings, lm_head and norms, and either shard or scale every bias in
# the layers; N = 3 (8 heads) must be refused before anything moves.
. "$TESTS_SRCDIR/lib/lib.sh"

cat >"$T_TMP/check.py" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
arch, n, mlc = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "mlc"
errs = []
src = d["plan"]["source"]
if not src.startswith("preset " + arch) or ("mlc" in src) != mlc:
    errs.append("plan source %r" % src)
layer = re.compile(r"\.(layers|h)\.\d+\.")
norm = re.compile(r"(norm|ln_|\.ln\.)")
for p in d["params"]:
    name, pre = p["name"], p["preprocs"]
    sharded = "dim" in p
    if sharded and n == 1 and pre:
        errs.append("%s: a preproc at N = 1 (MLC emits none)" % name)
    if sharded and n > 1:
        ins, outs, dim = pre[0]["in_shape"], pre[0]["out_shape"], p["dim"]
        want = list(ins)
        want[dim] //= n
        if p["shape"] != want or outs != [n] + want or ins[dim] % n:
            errs.append("%s: shape %r out %r from %r" %
                        (name, p["shape"], outs, ins))
        if sum(p["segs"]) * n != ins[dim]:
            errs.append("%s: segs %r" % (name, p["segs"]))
    if norm.search(name):
        ok = not sharded and p["bias_scale"] == 1.0
    elif not layer.search(name):
        ok = not sharded and p["bias_scale"] == 1.0  # embeddings, lm_head
    elif "block_sparse_moe.gate." in name:
        ok = not sharded  # the router: every rank needs all of it
    elif p["shape"] == [1] and name.endswith("scale"):
        ok = not sharded  # a per-tensor fp8 scale: the same on every rank
    elif name.endswith(".activation_scale"):
        ok = True  # sharded with a row-parallel weight only (test_quant)
    elif len(p["shape"]) >= 2:
        ok = sharded
    else:  # a bias in a layer: column-parallel sharded or row-parallel scaled
        ok = sharded or (n > 1 and p["bias_scale"] == 1.0 / n) or \
            (n == 1 and p["bias_scale"] == 1.0)
    if not ok:
        errs.append("%s: unexpected %s (bias_scale %r)" %
                    (name, "shard" if sharded else "replicate",
                     p["bias_scale"]))
if not any("dim" in p for p in d["params"]):
    errs.append("nothing sharded")
if errs:
    print("\n".join(errs[:20]))
    sys.exit(1)
EOF

check_arch() {
  arch=$1 format=$2
  shift 2
  dir="$T_TMP/$arch-$format"
  rm -rf "$dir"
  if ! "$TPLOAD" synth --arch "$arch" --format "$format" --layers 2 \
    --out "$dir" --quiet "$@" >"$T_TMP/out" 2>"$T_TMP/err"; then
    t_fail "synth $arch $format" "$(head -c 2000 "$T_TMP/err")"
    return
  fi
  for n in 1 2 4; do
    name="$arch ($format) auto plan, $n shards"
    if ! "$TPLOAD" plan "$dir" --shards "$n" >"$T_TMP/plan.json" \
      2>"$T_TMP/err"; then
      t_fail "$name" "$(head -c 2000 "$T_TMP/err")"
    elif "$ORACLE" "$T_TMP/check.py" "$T_TMP/plan.json" "$arch" "$n" \
      "$format" >"$T_TMP/check.out" 2>&1; then
      t_ok "$name"
    else
      t_fail "$name" "$(head -c 3000 "$T_TMP/check.out")"
    fi
  done
  t_exit "$arch ($format) refuses 3 shards" 65 \
    "$TPLOAD" plan "$dir" --shards 3
  grep -q "= 8: expected a multiple of the 3 shards" "$T_TMP/err" &&
    t_ok "$arch ($format): message names the 8 heads" ||
    t_fail "$arch ($format): message names the 8 heads" "$(cat "$T_TMP/err")"
}

for arch in llama mistral qwen2 gemma mixtral phi3 gpt2 gpt_neox; do
  check_arch "$arch" hf
done
# synth --format mlc writes MLC's names (qwen2: c_attn; phi3: mixer.*).
for arch in llama mistral qwen2 gemma phi3; do
  check_arch "$arch" mlc
done
# Quantized MLC directories (sizes with whole 128-blocks for fp8).
for arch in llama qwen2; do
  check_arch "$arch" mlc --quant q4f16_1
  check_arch "$arch" mlc --quant e4m3_e4m3_f16
  check_arch "$arch" mlc --quant fp8_e4m3fn_bf16_block_scale \
    --hidden 1024 --intermediate 1024 --vocab 256
done
t_done
