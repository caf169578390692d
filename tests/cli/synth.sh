#!/bin/sh
# synth.sh - `tpload synth`: for every arch a tiny model whose tensor names
# and shapes must be the HF ones listed by hand below, read back by numpy
# (the safetensors header parsed here with json + struct), with the
# Rust writer's layout, config.json keys, valid small values, determinism,
# the sharded index, the MLC directory, --gib, --force, usage errors, and
# `tpload inspect` accepting every output.
. "$TESTS_SRCDIR/lib/lib.sh"

cat >"$T_TMP/check.py" <<'EOF'
import hashlib, json, os, struct, sys
import numpy as np

# One small config for every arch: --layers 2 --hidden 64 --heads 4
# --intermediate 96 --vocab 80, --kv-heads 2 where the arch has them
# (head_dim 16: q rows 64, k/v rows 32), --experts 2 for mixtral.
LLAMA_LAYER = [
    ("self_attn.q_proj.weight", [64, 64]),
    ("self_attn.k_proj.weight", [32, 64]),
    ("self_attn.v_proj.weight", [32, 64]),
    ("self_attn.o_proj.weight", [64, 64]),
    ("mlp.gate_proj.weight", [96, 64]),
    ("mlp.up_proj.weight", [96, 64]),
    ("mlp.down_proj.weight", [64, 96]),
    ("input_layernorm.weight", [64]),
    ("post_attention_layernorm.weight", [64]),
]
QWEN2_LAYER = LLAMA_LAYER + [
    ("self_attn.q_proj.bias", [64]),
    ("self_attn.k_proj.bias", [32]),
    ("self_attn.v_proj.bias", [32]),
]
MIXTRAL_LAYER = [
    ("self_attn.q_proj.weight", [64, 64]),
    ("self_attn.k_proj.weight", [32, 64]),
    ("self_attn.v_proj.weight", [32, 64]),
    ("self_attn.o_proj.weight", [64, 64]),
    ("block_sparse_moe.gate.weight", [2, 64]),
    ("block_sparse_moe.experts.0.w1.weight", [96, 64]),
    ("block_sparse_moe.experts.0.w2.weight", [64, 96]),
    ("block_sparse_moe.experts.0.w3.weight", [96, 64]),
    ("block_sparse_moe.experts.1.w1.weight", [96, 64]),
    ("block_sparse_moe.experts.1.w2.weight", [64, 96]),
    ("block_sparse_moe.experts.1.w3.weight", [96, 64]),
    ("input_layernorm.weight", [64]),
    ("post_attention_layernorm.weight", [64]),
]
PHI3_LAYER = [
    ("self_attn.qkv_proj.weight", [128, 64]),   # q 64 + k 32 + v 32
    ("self_attn.o_proj.weight", [64, 64]),
    ("mlp.gate_up_proj.weight", [192, 64]),     # 2 x 96
    ("mlp.down_proj.weight", [64, 96]),
    ("input_layernorm.weight", [64]),
    ("post_attention_layernorm.weight", [64]),
]
GPT2_LAYER = [
    ("ln_1.weight", [64]), ("ln_1.bias", [64]),
    ("attn.c_attn.weight", [64, 192]), ("attn.c_attn.bias", [192]),
    ("attn.c_proj.weight", [64, 64]), ("attn.c_proj.bias", [64]),
    ("ln_2.weight", [64]), ("ln_2.bias", [64]),
    ("mlp.c_fc.weight", [64, 96]), ("mlp.c_fc.bias", [96]),
    ("mlp.c_proj.weight", [96, 64]), ("mlp.c_proj.bias", [64]),
]
NEOX_LAYER = [
    ("input_layernorm.weight", [64]), ("input_layernorm.bias", [64]),
    ("post_attention_layernorm.weight", [64]),
    ("post_attention_layernorm.bias", [64]),
    ("attention.query_key_value.weight", [192, 64]),
    ("attention.query_key_value.bias", [192]),
    ("attention.dense.weight", [64, 64]), ("attention.dense.bias", [64]),
    ("mlp.dense_h_to_4h.weight", [96, 64]), ("mlp.dense_h_to_4h.bias", [96]),
    ("mlp.dense_4h_to_h.weight", [64, 96]), ("mlp.dense_4h_to_h.bias", [64]),
]
MLC_LLAMA_LAYER = [
    ("self_attn.qkv_proj.weight", [128, 64]),
    ("self_attn.o_proj.weight", [64, 64]),
    ("mlp.gate_up_proj.weight", [192, 64]),
    ("mlp.down_proj.weight", [64, 96]),
    ("input_layernorm.weight", [64]),
    ("post_attention_layernorm.weight", [64]),
]
# mlc-llm python/mlc_llm/model/qwen2/qwen2_model.py: QWen2Attention.c_attn
# (bias=True); phi3/phi3_model.py: Phi3ParallelBlock ln, mixer (PhiMHA:
# qkv_proj, out_proj), mlp; Phi3Model embd, h, norm.
MLC_QWEN2_LAYER = [
    ("self_attn.c_attn.weight", [128, 64]), ("self_attn.c_attn.bias", [128]),
] + MLC_LLAMA_LAYER[1:]
MLC_PHI3_LAYER = [
    ("mixer.qkv_proj.weight", [128, 64]), ("mixer.out_proj.weight", [64, 64]),
    ("mlp.gate_up_proj.weight", [192, 64]), ("mlp.down_proj.weight", [64, 96]),
    ("ln.weight", [64]), ("post_attention_layernorm.weight", [64]),
]

LLAMA_TOP = [("model.embed_tokens.weight", [80, 64]),
             ("model.norm.weight", [64]), ("lm_head.weight", [80, 64])]
EXPECT = {
    "llama": ("model.layers", LLAMA_LAYER, LLAMA_TOP),
    "mistral": ("model.layers", LLAMA_LAYER, LLAMA_TOP),
    "qwen2": ("model.layers", QWEN2_LAYER, LLAMA_TOP),
    "gemma": ("model.layers", LLAMA_LAYER, LLAMA_TOP[:2]),   # tied
    "mixtral": ("model.layers", MIXTRAL_LAYER, LLAMA_TOP),
    "phi3": ("model.layers", PHI3_LAYER, LLAMA_TOP),
    "gpt2": ("transformer.h", GPT2_LAYER,
             [("transformer.wte.weight", [80, 64]),
              ("transformer.wpe.weight", [1024, 64]),
              ("transformer.ln_f.weight", [64]),
              ("transformer.ln_f.bias", [64])]),
    "gpt_neox": ("gpt_neox.layers", NEOX_LAYER,
                 [("gpt_neox.embed_in.weight", [80, 64]),
                  ("gpt_neox.final_layer_norm.weight", [64]),
                  ("gpt_neox.final_layer_norm.bias", [64]),
                  ("embed_out.weight", [80, 64])]),
    "mlc-llama": ("model.layers", MLC_LLAMA_LAYER, LLAMA_TOP),
    "mlc-qwen2": ("model.layers", MLC_QWEN2_LAYER, LLAMA_TOP),
    "mlc-phi3": ("transformer.h", MLC_PHI3_LAYER,
                 [("transformer.embd.weight", [80, 64]),
                  ("transformer.norm.weight", [64]),
                  ("lm_head.weight", [80, 64])]),
}

# MLC's schemes as quantization/quantization.py defines them: kind, group
# size, bits, model dtype, quantized weight dtype, embedding/final fc.
SCHEMES = {
    "q4f16_1": ("group", 32, 4, "float16", None, True),
    "q3f16_1": ("group", 40, 3, "float16", None, True),
    "q4bf16_1": ("group", 32, 4, "bfloat16", None, True),
    "e4m3_e4m3_f16": ("per-tensor", 0, 0, "float16", "float8_e4m3fn", False),
    "fp8_e4m3fn_bf16_block_scale_static_activation":
        ("block", 0, 0, "bfloat16", "float8_e4m3fn", False),
}


def cdiv(a, b):
    return -(-a // b)


def mlc_quantized(want, scheme):
    """name -> (dtype, shape) as MLC's scheme stores `want` (unquantized
    name -> shape): group_quantization.py GroupQuantizeLinear/Embedding
    (NK: q_weight [out, groups * group/(32/bits)] uint32, q_scale [out,
    groups]); per_tensor_quantization.py (q_weight fp8, q_scale and
    q_calibration_scale [1] float32); block_scale_quantization.py (weight
    fp8, weight_scale_inv [ceil(out/128), ceil(in/128)], activation_scale
    [ceil(in/128)] float32).  Linears are the 2-D weights other than the
    embedding and lm_head (quantized too by group schemes)."""
    kind, gs, bits, mdt, wdt, emb = SCHEMES[scheme]
    out = {}
    for name, shape in want.items():
        base = name[:-len(".weight")]
        edge = "embed" in name or ".embd." in name or name == "lm_head.weight"
        if len(shape) != 2 or not name.endswith(".weight") or \
                (edge and not emb):
            out[name] = (mdt, shape)
            continue
        o, i = shape
        if kind == "group":
            g = cdiv(i, gs)
            out[base + ".q_weight"] = ("uint32", [o, g * gs // (32 // bits)])
            out[base + ".q_scale"] = (mdt, [o, g])
        elif kind == "per-tensor":
            out[base + ".q_weight"] = (wdt, [o, i])
            out[base + ".q_scale"] = ("float32", [1])
            out[base + ".q_calibration_scale"] = ("float32", [1])
        else:
            out[name] = (wdt, [o, i])
            out[base + ".weight_scale_inv"] = ("float32",
                                               [cdiv(o, 128), cdiv(i, 128)])
            out[base + ".activation_scale"] = ("float32", [cdiv(i, 128)])
    return out

ITEM = {"bfloat16": 2, "float16": 2, "float32": 2, "uint32": 4,
        "float8_e4m3fn": 1}  # float32: stored as bf16 (f32-to-bf16)

LLAMA_CFG = {"hidden_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 96,
             "num_hidden_layers": 2, "vocab_size": 80}
CONFIG = {
    "llama": dict(LLAMA_CFG, architectures=["LlamaForCausalLM"],
                  model_type="llama", head_dim=16),
    "mistral": dict(LLAMA_CFG, architectures=["MistralForCausalLM"],
                    model_type="mistral", head_dim=16),
    "qwen2": dict(LLAMA_CFG, architectures=["Qwen2ForCausalLM"],
                  model_type="qwen2"),
    "gemma": dict(LLAMA_CFG, architectures=["GemmaForCausalLM"],
                  model_type="gemma", head_dim=16, tie_word_embeddings=True),
    "mixtral": dict(LLAMA_CFG, architectures=["MixtralForCausalLM"],
                    model_type="mixtral", num_local_experts=2,
                    num_experts_per_tok=2),
    "phi3": dict(LLAMA_CFG, architectures=["Phi3ForCausalLM"],
                 model_type="phi3"),
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
             "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": 96,
             "n_positions": 1024, "vocab_size": 80},
    "gpt_neox": {"architectures": ["GPTNeoXForCausalLM"],
                 "model_type": "gpt_neox", "hidden_size": 64,
                 "num_attention_heads": 4, "intermediate_size": 96,
                 "num_hidden_layers": 2, "vocab_size": 80,
                 "tie_word_embeddings": False},
}
ST_DT = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
TORCH = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def fail(msg):
    print(msg)
    sys.exit(1)


def expected(key, layers=2):
    prefix, per_layer, top = EXPECT[key]
    want = {n: s for n, s in top}
    for i in range(layers):
        for n, s in per_layer:
            want["%s.%d.%s" % (prefix, i, n)] = s
    return want


def read_st(path):
    """Parses a safetensors file by hand and checks the Rust layout:
    length prefix, 8-byte padding with spaces, __metadata__ first, data
    back to back in (name) order, file size.  Returns name -> (dtype,
    shape, bytes) and the header's key order."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    if (8 + n) % 8 != 0:
        fail("%s: 8 + N = %d is not a multiple of 8" % (path, 8 + n))
    text = raw[8:8 + n].decode("utf-8")
    if len(text) - len(text.rstrip(" ")) >= 8:
        fail("%s: more than 7 padding spaces" % path)
    if not text.startswith('{"__metadata__":{"format":"pt"}'):
        fail("%s: header does not open with __metadata__: %r"
             % (path, text[:60]))
    pairs = json.loads(text, object_pairs_hook=lambda p: p)
    hdr = dict(pairs)
    names = [k for k, _ in pairs if k != "__metadata__"]
    if names != sorted(names):
        fail("%s: tensors not in name order" % path)
    off, out = 0, {}
    for name in names:
        e = dict(hdr[name])
        b, end = e["data_offsets"]
        if b != off:
            fail("%s: %s starts at %d, expected %d" % (path, name, b, off))
        out[name] = (e["dtype"], list(e["shape"]), raw[8 + n + b:8 + n + end])
        off = end
    if len(raw) != 8 + n + off:
        fail("%s: size %d, expected %d" % (path, len(raw), 8 + n + off))
    return out


def values(dtype, b):
    u = np.frombuffer(b, dtype="<u2" if dtype in ("BF16", "F16") else "<u4")
    if dtype == "BF16":
        return (u.astype(np.uint32) << 16).view(np.float32)
    if dtype == "F16":
        return u.view(np.float16).astype(np.float32)
    return u.view(np.float32)


def check_values(name, dtype, b):
    v = values(dtype, b)
    a = np.abs(v)
    if not np.all(np.isfinite(v)):
        fail("%s: non-finite values" % name)
    if not np.all((a >= 1 / 64) & (a < 1 / 4)):
        fail("%s: values outside +-[1/64, 1/4): min %g max %g"
             % (name, a.min(), a.max()))
    if v.size >= 64 and ((v > 0).mean() < 0.2 or (v < 0).mean() < 0.2):
        fail("%s: signs are not mixed" % name)


def check_tensors(got, want, dt):
    if set(got) != set(want):
        fail("names differ: missing %s, unexpected %s"
             % (sorted(set(want) - set(got)), sorted(set(got) - set(want))))
    for name, (dtype, shape, b) in got.items():
        if shape != want[name]:
            fail("%s: shape %s, expected %s" % (name, shape, want[name]))
        if dtype != ST_DT[dt]:
            fail("%s: dtype %s, expected %s" % (name, dtype, ST_DT[dt]))
        size = int(np.prod(shape)) * (4 if dt == "f32" else 2)
        if len(b) != size:
            fail("%s: %d bytes, expected %d" % (name, len(b), size))
        check_values(name, dtype, b)


def check_config(d, arch, dt):
    cfg = json.load(open(os.path.join(d, "config.json")))
    want = dict(CONFIG[arch], torch_dtype=TORCH[dt])
    for k, v in want.items():
        if cfg.get(k) != v:
            fail("config.json %s: %r, expected %r" % (k, cfg.get(k), v))
    if arch == "gpt2" and "hidden_size" in cfg:
        fail("config.json: gpt2 uses n_embd, not hidden_size")


def cmd_hf(d, arch, dt="bf16"):
    """A single-file HF directory."""
    files = sorted(os.listdir(d))
    if files != ["config.json", "model.safetensors"]:
        fail("files: %s" % files)
    check_tensors(read_st(os.path.join(d, "model.safetensors")),
                  expected(arch), dt)
    check_config(d, arch, dt)


def load_index(d, k):
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, k) for i in range(k)]
    return idx, names


def cmd_sharded(d, arch, k):
    """--files K: index consistent with the files, files non-empty and in
    state-dict order, sizes roughly even."""
    k = int(k)
    idx, names = load_index(d, k)
    if sorted(os.listdir(d)) != sorted(names + [
            "config.json", "model.safetensors.index.json"]):
        fail("files: %s" % sorted(os.listdir(d)))
    got, where, sizes = {}, {}, []
    for f in names:
        t = read_st(os.path.join(d, f))
        if not t:
            fail("%s holds no tensor" % f)
        sizes.append(sum(len(v[2]) for v in t.values()))
        for n, v in t.items():
            got[n] = v
            where[n] = f
    check_tensors(got, expected(arch), "bf16")
    if idx["weight_map"] != where:
        fail("weight_map disagrees with the files")
    total = sum(sizes)
    if idx["metadata"]["total_size"] != total:
        fail("total_size %s, expected %d" % (idx["metadata"]["total_size"],
                                             total))
    biggest = max(len(v[2]) for v in got.values())
    if max(sizes) > total / k + biggest:
        fail("uneven split: %s" % sizes)


def cmd_same_tensors(a, b):
    """Every tensor holds the same bytes in two outputs (layout-free)."""
    def load(d):
        out = {}
        for f in os.listdir(d):
            if f.endswith(".safetensors"):
                out.update(read_st(os.path.join(d, f)))
        return out
    if load(a) != load(b):
        fail("tensor bytes differ between %s and %s" % (a, b))


def cmd_mlc(d, key, layers="2", shard_cap="0", scheme="q0bf16"):
    """An MLC directory as convert_weight writes it: records tile each
    params_shard file exactly, whose md5sum each file record carries; every record's format is f32-to-bf16 (TVM's
    dump_tensor_cache stamps the encode format on all), float32 stored as
    bf16, other dtypes raw."""
    cache = json.load(open(os.path.join(d, "tensor-cache.json")))
    got, shards = {}, cache["records"]
    for i, s in enumerate(shards):
        path = os.path.join(d, s["dataPath"])
        if s["dataPath"] != "params_shard_%d.bin" % i:
            fail("shard %d is %s" % (i, s["dataPath"]))
        if s["format"] != "raw-shard":
            fail("shard format %s" % s["format"])
        raw = open(path, "rb").read()
        if len(raw) != s["nbytes"]:
            fail("%s: %d bytes, nbytes says %d" % (path, len(raw), s["nbytes"]))
        # TVM's writer: md5sum, hashlib's hexdigest of the whole file
        if s.get("md5sum") != hashlib.md5(raw).hexdigest():
            fail("%s: md5sum %r, expected %s" % (path, s.get("md5sum"),
                                                hashlib.md5(raw).hexdigest()))
        off = 0
        for r in s["records"]:
            if r["byteOffset"] != off:
                fail("%s: byteOffset %d, expected %d" % (r["name"],
                                                         r["byteOffset"], off))
            if r["format"] != "f32-to-bf16":
                fail("%s: format %s" % (r["name"], r["format"]))
            n = int(np.prod(r["shape"])) * ITEM[r["dtype"]]
            if r["nbytes"] != n:
                fail("%s: nbytes %d, expected %d" % (r["name"], r["nbytes"], n))
            got[r["name"]] = (r["dtype"], r["shape"],
                              raw[off:off + r["nbytes"]])
            off += r["nbytes"]
        if off != len(raw):
            fail("%s: records cover %d of %d bytes" % (path, off, len(raw)))
        cap = int(shard_cap)
        if cap and len(raw) > cap and len(s["records"]) > 1:
            fail("%s: %d bytes over the %d cap" % (path, len(raw), cap))
    if key != "-" and scheme == "q0bf16":
        check_tensors({k: ("BF16", s, b) for k, (dt, s, b) in got.items()
                       if dt == "bfloat16"}, expected(key, int(layers)),
                      "bf16")
    elif key != "-":
        want = mlc_quantized(expected(key, int(layers)), scheme)
        found = {k: (dt, s) for k, (dt, s, _) in got.items()}
        if found != want:
            fail("quantized params differ (name, found, expected): %s" %
                 [(k, found.get(k), want.get(k)) for k in
                  sorted(set(found) | set(want))
                  if found.get(k) != want.get(k)][:6])
    if shard_cap != "0" and len(shards) < 2:
        fail("expected several shards, found %d" % len(shards))
    total = sum(len(v[2]) for v in got.values())
    if cache["metadata"]["ParamBytes"] != total:
        fail("ParamBytes %s, expected %d" % (cache["metadata"]["ParamBytes"],
                                            total))
    m = json.load(open(os.path.join(d, "mlc-chat-config.json")))
    if m["quantization"] != scheme or m["tensor_parallel_shards"] != 1:
        fail("quantization %r tensor_parallel_shards %r" %
             (m["quantization"], m["tensor_parallel_shards"]))
    if key != "-":
        want = {"hidden_size": 64, "num_attention_heads": 4,
                "num_key_value_heads": 2, "intermediate_size": 96,
                "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 80}
        if m["model_type"] != key[4:]:
            fail("model_type %s" % m["model_type"])
        for k, v in want.items():
            if m["model_config"].get(k) != v:
                fail("model_config %s: %r, expected %r"
                     % (k, m["model_config"].get(k), v))


def cmd_total(d, lo, hi):
    """Tensor bytes of a single-file output lie in [lo, hi]."""
    t = read_st(os.path.join(d, "model.safetensors"))
    total = sum(len(v[2]) for v in t.values())
    if not int(lo) <= total <= int(hi):
        fail("total %d outside [%s, %s]" % (total, lo, hi))


def cmd_inspect_count(path, arch):
    """`tpload inspect --json` (stdin) lists exactly the expected names."""
    rep = json.load(sys.stdin)
    names = [t["name"] for t in rep["tensors"]]
    if sorted(names) != sorted(expected(arch)):
        fail("inspect lists %d tensors, expected %d"
             % (len(names), len(expected(arch))))


cmds = {"hf": cmd_hf, "sharded": cmd_sharded, "same": cmd_same_tensors,
        "mlc": cmd_mlc, "total": cmd_total, "inspect": cmd_inspect_count}
cmds[sys.argv[1]](*sys.argv[2:])
EOF

check() { "$ORACLE" "$T_TMP/check.py" "$@"; }
SMALL="--layers 2 --hidden 64 --heads 4 --intermediate 96 --vocab 80"
O=$T_TMP/models

# t_py NAME CMD...: passes when the python check succeeds.
t_py() {
  local name=$1; shift
  if msg=$(check "$@" 2>&1); then t_ok "$name"; else t_fail "$name" "$msg"; fi
}

for arch in llama mistral qwen2 gemma mixtral phi3 gpt2 gpt_neox; do
  extra=""
  case $arch in
    gpt2|gpt_neox) ;;
    mixtral) extra="--kv-heads 2 --experts 2" ;;
    *) extra="--kv-heads 2" ;;
  esac
  # shellcheck disable=SC2086
  t_exit "$arch: synth" 0 "$TPLOAD" synth --arch "$arch" --out "$O/$arch" \
    $SMALL $extra
  grep -q "^synth: .*tensors" "$T_TMP/out" && t_ok "$arch: summary line" ||
    t_fail "$arch: summary line" "$(cat "$T_TMP/out")"
  t_py "$arch: HF names, shapes, layout, values, config" hf "$O/$arch" "$arch"
  if "$TPLOAD" inspect --json "$O/$arch" >"$T_TMP/insp" 2>"$T_TMP/err"; then
    t_py "$arch: tpload inspect accepts it" inspect - "$arch" <"$T_TMP/insp"
  else
    t_fail "$arch: tpload inspect accepts it" "$(cat "$T_TMP/err")"
  fi
done

# dtypes
for dt in f16 f32; do
  # shellcheck disable=SC2086
  t_exit "llama --dtype $dt" 0 "$TPLOAD" synth --arch llama --out "$O/$dt" \
    $SMALL --kv-heads 2 --dtype "$dt" --quiet
  [ ! -s "$T_TMP/out" ] && t_ok "--quiet prints nothing" ||
    t_fail "--quiet prints nothing" "$(cat "$T_TMP/out")"
  t_py "llama $dt: values and torch_dtype" hf "$O/$dt" llama "$dt"
done

# determinism
# shellcheck disable=SC2086
"$TPLOAD" synth --arch qwen2 --out "$O/d1" $SMALL --kv-heads 2 --quiet
# shellcheck disable=SC2086
"$TPLOAD" synth --arch qwen2 --out "$O/d2" $SMALL --kv-heads 2 --seed 0 --quiet
# shellcheck disable=SC2086
"$TPLOAD" synth --arch qwen2 --out "$O/d3" $SMALL --kv-heads 2 --seed 1 --quiet
cmp -s "$O/d1/model.safetensors" "$O/d2/model.safetensors" &&
  cmp -s "$O/d1/config.json" "$O/d2/config.json" &&
  t_ok "same seed gives the same bytes" ||
  t_fail "same seed gives the same bytes"
cmp -s "$O/d1/model.safetensors" "$O/d3/model.safetensors" &&
  t_fail "another seed gives other bytes" ||
  t_ok "another seed gives other bytes"
[ "$(stat -c %s "$O/d1/model.safetensors")" = \
  "$(stat -c %s "$O/d3/model.safetensors")" ] &&
  t_ok "another seed keeps the layout" || t_fail "another seed keeps the layout"

# --files 3
# shellcheck disable=SC2086
t_exit "--files 3" 0 "$TPLOAD" synth --arch llama --out "$O/f3" $SMALL \
  --kv-heads 2 --files 3
t_py "--files 3: index and files agree" sharded "$O/f3" llama 3
t_py "--files 3: tensors hold the single-file bytes" same "$O/f3" "$O/llama"
t_check "--files 3: tpload inspect accepts it" "$TPLOAD" inspect "$O/f3"
# shellcheck disable=SC2086
t_exit "--files 5 phi3" 0 "$TPLOAD" synth --arch phi3 --out "$O/f5" $SMALL \
  --kv-heads 2 --files 5
t_py "--files 5 phi3: index and files agree" sharded "$O/f5" phi3 5

# --format mlc
for arch in llama qwen2 phi3; do
  # shellcheck disable=SC2086
  t_exit "mlc $arch" 0 "$TPLOAD" synth --arch "$arch" --format mlc \
    --out "$O/mlc-$arch" $SMALL --kv-heads 2
  t_py "mlc $arch: records, offsets, fused names, config" mlc \
    "$O/mlc-$arch" "mlc-$arch"
  t_check "mlc $arch: tpload inspect accepts it" "$TPLOAD" inspect \
    "$O/mlc-$arch"
done
# About 76 MiB: 8 MiB embeddings + 7.5 MiB per layer -> several 32 MiB shards.
t_exit "mlc: several shards" 0 "$TPLOAD" synth --arch llama --format mlc \
  --out "$O/mlc-big" --layers 8 --hidden 512 --heads 8 --kv-heads 4 \
  --intermediate 2048 --vocab 8192
t_py "mlc: shards stay under 32 MiB and tile exactly" mlc "$O/mlc-big" - 8 \
  33554432
t_check "mlc: tpload inspect accepts several shards" "$TPLOAD" inspect \
  "$O/mlc-big"
rm -rf "$O/mlc-big"
for q in q4f16_1 q3f16_1 q4bf16_1 e4m3_e4m3_f16 \
  fp8_e4m3fn_bf16_block_scale_static_activation; do
  # shellcheck disable=SC2086
  t_exit "mlc llama --quant $q" 0 "$TPLOAD" synth --arch llama --format mlc \
    --out "$O/mlc-$q" $SMALL --kv-heads 2 --quant "$q"
  t_py "mlc llama --quant $q: params, dtypes and shapes as MLC's scheme" \
    mlc "$O/mlc-$q" mlc-llama 2 0 "$q"
  rm -rf "$O/mlc-$q"
done
t_exit "--quant with --format hf" 64 "$TPLOAD" synth --arch llama \
  --out "$O/nope" --quant q4f16_1
t_exit "--quant unknown" 64 "$TPLOAD" synth --arch llama --format mlc \
  --out "$O/nope" --quant q9f16_1

# --gib: defaults are ~1.2 MiB per layer; 0.01 GiB is 10,737,418 bytes.
t_exit "--gib 0.01" 0 "$TPLOAD" synth --arch llama --out "$O/gib" --gib 0.01
t_py "--gib 0.01 lands within 10% of 0.01 GiB" total "$O/gib" 9663676 11811160

# --force and existing directories
mkdir -p "$O/busy" && echo keep >"$O/busy/notes.txt"
t_exit "existing non-empty dir is refused" 73 "$TPLOAD" synth --arch llama \
  --out "$O/busy"
t_exit "--force writes into it" 0 "$TPLOAD" synth --arch llama \
  --out "$O/busy" --force
[ -f "$O/busy/notes.txt" ] && t_ok "--force keeps foreign files" ||
  t_fail "--force keeps foreign files"
t_exit "--force over a sharded output" 0 "$TPLOAD" synth --arch llama \
  --out "$O/f3" --force
[ ! -e "$O/f3/model.safetensors.index.json" ] &&
  [ -z "$(ls "$O/f3" | grep -- '-of-')" ] && [ -f "$O/f3/model.safetensors" ] &&
  t_ok "--force removes the old shards and index" ||
  t_fail "--force removes the old shards and index" "$(ls "$O/f3")"
t_check "--force output is readable" "$TPLOAD" inspect "$O/f3"
mkdir -p "$O/empty"
t_exit "an existing empty dir is fine" 0 "$TPLOAD" synth --arch gpt2 \
  --out "$O/empty"
: >"$O/afile"
t_exit "--out naming a file" 73 "$TPLOAD" synth --arch llama --out "$O/afile"
# A write that fails half way leaves nothing: with one tensor per file
# and a 200 KiB (dash: 512-byte units) or 400 KiB (bash) file size limit,
# the 32 KiB embeddings and the 64-128 KiB q/k/v/o files are written, then
# the 1 MiB gate_proj fails with EFBIG.
( trap '' XFSZ; ulimit -f 400
  exec "$TPLOAD" synth --arch llama --vocab 64 --intermediate 2048 \
    --files 21 --out "$O/efbig" ) >"$T_TMP/out" 2>"$T_TMP/err"
rc=$?
[ "$rc" -eq 74 ] && t_ok "a failed write exits 74" ||
  t_fail "a failed write exits 74" "exit $rc: $(cat "$T_TMP/err")"
[ -d "$O/efbig" ] && [ -z "$(ls -A "$O/efbig")" ] &&
  t_ok "a failed write removes its files" ||
  t_fail "a failed write removes its files" "$(ls -A "$O/efbig")"
[ -z "$(find "$O" -name '*.synth-tmp')" ] && t_ok "no temp files remain" ||
  t_fail "no temp files remain" "$(find "$O" -name '*.synth-tmp')"

# usage errors
U=$O/never
t_exit "--help" 0 "$TPLOAD" synth --help
grep -q -- "--gib" "$T_TMP/out" && t_ok "--help describes the options" ||
  t_fail "--help describes the options"
t_exit "missing --arch" 64 "$TPLOAD" synth --out "$U"
t_exit "missing --out" 64 "$TPLOAD" synth --arch llama
t_exit "unknown arch" 64 "$TPLOAD" synth --arch bert --out "$U"
t_exit "unknown option" 64 "$TPLOAD" synth --arch llama --out "$U" --bogus
t_exit "stray argument" 64 "$TPLOAD" synth --arch llama --out "$U" extra
t_exit "hidden not divisible by heads" 64 "$TPLOAD" synth --arch llama \
  --out "$U" --hidden 100 --heads 8
grep -q "divisible" "$T_TMP/err" && t_ok "divisibility error names it" ||
  t_fail "divisibility error names it" "$(cat "$T_TMP/err")"
t_exit "heads not divisible by kv heads" 64 "$TPLOAD" synth --arch llama \
  --out "$U" --heads 8 --kv-heads 3
t_exit "kv heads above heads" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --heads 4 --kv-heads 8
t_exit "gpt2 with grouped kv heads" 64 "$TPLOAD" synth --arch gpt2 \
  --out "$U" --kv-heads 2
t_exit "--experts on llama" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --experts 4
t_exit "--layers 0" 64 "$TPLOAD" synth --arch llama --out "$U" --layers 0
t_exit "--layers not a number" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --layers 2x
t_exit "--hidden huge" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --hidden 99999999999
t_exit "--dtype int8" 64 "$TPLOAD" synth --arch llama --out "$U" --dtype i8
t_exit "--format gguf" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --format gguf
t_exit "--format mlc with gpt2" 64 "$TPLOAD" synth --arch gpt2 --out "$U" \
  --format mlc
t_exit "--format mlc with mixtral" 64 "$TPLOAD" synth --arch mixtral \
  --out "$U" --format mlc
t_exit "--format mlc with --files" 64 "$TPLOAD" synth --arch llama \
  --out "$U" --format mlc --files 2
t_exit "--files above the tensor count" 64 "$TPLOAD" synth --arch llama \
  --out "$U" --files 22
t_exit "--layers with --gib" 64 "$TPLOAD" synth --arch llama --out "$U" \
  --layers 2 --gib 1
t_exit "--gib negative" 64 "$TPLOAD" synth --arch llama --out "$U" --gib -1
[ ! -e "$U" ] && t_ok "usage errors create nothing" ||
  t_fail "usage errors create nothing"
t_done
