"""ct_quant.py - one-layer llama checkpoints quantized as llm-compressor
writes compressed-tensors (config.json quantization_config: quant_method
"compressed-tensors", format, config_groups.group_0.weights), and the
check of a preshard output against what vLLM gives each rank.

Tensors per linear, as compressed-tensors names them:
  pack-quantized (W4A16, W8A16): weight_packed int32 [out, in / (32 /
    bits)] (value i of a word at bits bits * i), weight_scale [out,
    in / group], weight_shape int64 [2], and without symmetry
    weight_zero_point int32 [out / pack, in / group] (packed along rows);
  int-/float-quantized (W8A8 int8, FP8): weight int8 / F8_E4M3 [out, in],
    weight_scale [out, 1] (channel) or [out / bn, in / bk] (block),
    input_scale [1] for static activations.
vLLM's rules (model_executor/layers/quantization/compressed_tensors/
schemes/compressed_tensors_wNa16.py, _w8a8_fp8.py, _w8a8_int8.py):
weight_packed output_dim 0, input_dim 1 (packed); weight_scale
output_dim 0, input_dim 1 for groups, none per channel; zero points
output_dim 0 packed_dim 0, input_dim 1; weight_shape whole (the full
shape); block scales by blocks.  Independently of the slicing, each
rank's weights are dequantized with the scales and zero points it
received and must equal the slice of the full dequantized weight.

Native FP8 blocks (quant_method "fp8", weight_block_size [128, 128]:
DeepSeek-V3, Qwen3-8B-FP8): weight F8_E4M3 [out, in] and
weight_scale_inv F32 [out / 128, in / 128], dequantized as weight x
weight_scale_inv per block (transformers' integrations/finegrained_fp8.py;
vLLM's Fp8LinearMethod with block_quant, quantization/fp8.py: the block
scales cut by blocks, BlockQuantScaleParameter).

NVIDIA ModelOpt (quant_method "modelopt", or hf_quant_config.json for
older exports): NVFP4 weight uint8 [out, in / 2] (two E2M1 values a
byte, the low nibble first), weight_scale F8_E4M3 [out, in / 16],
weight_scale_2 and input_scale scalars; FP8 weight with scalar scales.
vLLM's modelopt.py (ModelOptNvFp4LinearMethod, ModelOptFp8LinearMethod):
weight and weight_scale input_dim 1, output_dim 0; the scalars per tensor.
With an FP8 kv cache (kv_cache_quant_algo "FP8") each layer's
k_proj.k_scale and v_proj.v_scale are scalars too, whole on every rank
(vLLM's quantization/kv_cache.py BaseKVCacheMethod: one k_scale and
v_scale an attention layer, the loader's maybe_remap_kv_scale_name).

  ct_quant.py write SCHEME DIR [KV]   SCHEME: w4a16 w4a16-asym w8a8-int8
                                      fp8-channel fp8-static fp8-block
                                      fp8-native modelopt-nvfp4
                                      modelopt-nvfp4-hfq modelopt-fp8
                                      modelopt-fp8-kv
  ct_quant.py check DIR OUT N
  ct_quant.py dequant DIR OUT N DST [--swap-scales]
      float32 copies for tests/oracle/forward.py: DST/full (DIR's
      weights dequantized, its config without quantization_config) and
      DST/shards/rank{R}.safetensors (each rank's weights dequantized
      with the scales and zero points it received); with --swap-scales
      rank r uses rank (r + 1) % N's scales (a negative control)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402

L = "model.layers.0."
COL = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
       "mlp.gate_proj", "mlp.up_proj"]
ROW = ["self_attn.o_proj", "mlp.down_proj"]
GROUP = 32
VOCAB = 128  # above forward.py's token ids


def sizes(scheme, kv):
    if scheme in ("fp8-block", "fp8-native"):
        return dict(hidden=256, heads=4, kv=kv or 4, hd=64, inter=512)
    return dict(hidden=64, heads=4, kv=kv or 2, hd=16, inter=128)


def shapes(z):
    q, k = z["heads"] * z["hd"], z["kv"] * z["hd"]
    h, i = z["hidden"], z["inter"]
    return {"self_attn.q_proj": (q, h), "self_attn.k_proj": (k, h),
            "self_attn.v_proj": (k, h), "self_attn.o_proj": (h, q),
            "mlp.gate_proj": (i, h), "mlp.up_proj": (i, h),
            "mlp.down_proj": (h, i)}


def weights_cfg(scheme):
    if scheme.startswith("w4a16"):
        return "pack-quantized", {"num_bits": 4, "type": "int",
                                  "strategy": "group", "group_size": GROUP,
                                  "symmetric": scheme == "w4a16",
                                  "actorder": None}
    if scheme == "w8a8-int8":
        return "int-quantized", {"num_bits": 8, "type": "int",
                                 "strategy": "channel", "symmetric": True}
    if scheme == "fp8-block":
        return "float-quantized", {"num_bits": 8, "type": "float",
                                   "strategy": "block",
                                   "block_structure": [128, 128]}
    return "float-quantized", {"num_bits": 8, "type": "float",
                               "strategy": "channel", "symmetric": True}


def f8(rng, shape, lo=0, hi=256):
    n = int(np.prod(shape))
    return ("F8_E4M3", shape, rng.integers(lo, hi, n, dtype=np.uint8).tobytes())


def linear(rng, scheme, out, inn):
    f32 = lambda *s: rng.uniform(0.002, 0.01, s).astype(  # noqa: E731
        np.float32)
    if scheme.startswith("modelopt-nvfp4"):
        return {"weight": rng.integers(0, 256, (out, inn // 2),
                                       dtype=np.uint8),
                "weight_scale": f8(rng, (out, inn // 16), 0x20, 0x48),
                "weight_scale_2": np.float32(rng.uniform(0.002, 0.01)),
                "input_scale": np.float32(rng.uniform(0.5, 2))}
    if scheme.startswith("modelopt-fp8"):
        return {"weight": f8(rng, (out, inn), 0, 0x70),
                "weight_scale": np.float32(rng.uniform(0.002, 0.01)),
                "input_scale": np.float32(rng.uniform(0.5, 2))}
    if scheme.startswith("w4a16"):
        t = {"weight_packed": rng.integers(-2**31, 2**31, (out, inn // 8),
                                           dtype=np.int64).astype(np.int32),
             "weight_scale": f32(out, inn // GROUP).astype(np.float16),
             "weight_shape": np.array([out, inn], np.int64)}
        if scheme == "w4a16-asym":
            t["weight_zero_point"] = rng.integers(
                -2**31, 2**31, (out // 8, inn // GROUP),
                dtype=np.int64).astype(np.int32)
        return t
    if scheme == "w8a8-int8":
        return {"weight": rng.integers(-128, 128, (out, inn), dtype=np.int8),
                "weight_scale": f32(out, 1)}
    w = f8(rng, (out, inn), 0, 0x70)  # positive, below 2^6
    if scheme == "fp8-native":
        return {"weight": w, "weight_scale_inv": f32(out // 128, inn // 128)}
    if scheme == "fp8-block":
        return {"weight": w, "weight_scale": f32(out // 128, inn // 128)}
    t = {"weight": w, "weight_scale": f32(out, 1)}
    if scheme == "fp8-static":
        t["input_scale"] = f32(1)
    return t


def model(scheme, z):
    rng = np.random.default_rng(len(scheme))
    t = {}
    for mod, (out, inn) in shapes(z).items():
        for k, v in linear(rng, scheme, out, inn).items():
            t[L + mod + "." + k] = v
    if scheme == "modelopt-fp8-kv":  # FP8 kv cache: one scale a layer each
        t[L + "self_attn.k_proj.k_scale"] = np.float32(rng.uniform(0.5, 2))
        t[L + "self_attn.v_proj.v_scale"] = np.float32(rng.uniform(0.5, 2))
    h, v = z["hidden"], VOCAB
    for name, shape in (("model.embed_tokens.weight", (v, h)),
                        (L + "input_layernorm.weight", (h,)),
                        (L + "post_attention_layernorm.weight", (h,)),
                        ("model.norm.weight", (h,)),
                        ("lm_head.weight", (v, h))):
        t[name] = rng.standard_normal(shape).astype(np.float16)
    return t


def write(scheme, d, kv=0):
    z = sizes(scheme, kv)
    fmt, weights = weights_cfg(scheme)
    os.makedirs(d, exist_ok=True)
    npst.write(os.path.join(d, "model.safetensors"), model(scheme, z))
    if scheme == "fp8-native":
        qc = {"quant_method": "fp8", "activation_scheme": "dynamic",
              "fmt": "e4m3", "weight_block_size": [128, 128]}
    elif scheme.startswith("modelopt"):
        qc = {"quant_method": "modelopt", "quant_algo":
              "FP8" if scheme.startswith("modelopt-fp8") else "NVFP4",
              "group_size": 16, "exclude_modules": ["lm_head"]}
        if scheme == "modelopt-fp8-kv":
            qc["kv_cache_quant_algo"] = "FP8"
    else:
        qc = {"quant_method": "compressed-tensors", "format": fmt,
              "ignore": ["lm_head"],
              "config_groups": {"group_0": {
                  "targets": ["Linear"], "weights": weights,
                  "input_activations": None}}}
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": z["hidden"], "num_attention_heads": z["heads"],
           "num_key_value_heads": z["kv"], "head_dim": z["hd"],
           "intermediate_size": z["inter"], "num_hidden_layers": 1,
           "vocab_size": VOCAB, "scheme": scheme, "quantization_config": qc}
    if scheme.endswith("-hfq"):  # older exports: a file of its own
        cfg.pop("quantization_config", None)
        with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
            json.dump({"producer": {"name": "modelopt"},
                       "quantization": {k: v for k, v in qc.items()
                                        if k != "quant_method"}}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


# --- dequantization: independent of how anything was cut ---

def e4m3(codes):
    c = codes.astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6,
                 (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.where((e == 15) & (m == 7), 0.0, s * v)


def nibbles(packed, axis_len):
    u = packed.astype(np.int64) & 0xFFFFFFFF
    parts = [(u >> (4 * k)) & 15 for k in range(8)]
    return np.stack(parts, axis=-1).reshape(packed.shape[0], axis_len)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4,
                 -6])


def dequant(scheme, t):
    if scheme.startswith("modelopt-nvfp4"):
        w = t["weight"].astype(np.int64)
        vals = np.stack([E2M1[w & 15], E2M1[w >> 4]], axis=-1)
        vals = vals.reshape(w.shape[0], w.shape[1] * 2)
        s = np.repeat(e4m3(t["weight_scale"]), 16, axis=1)
        return vals * s * float(t["weight_scale_2"])
    if scheme.startswith("modelopt-fp8"):
        return e4m3(t["weight"]) * float(t["weight_scale"])
    if scheme.startswith("w4a16"):
        out, inn = t["weight_packed"].shape[0], t["weight_packed"].shape[1] * 8
        q = nibbles(t["weight_packed"], inn)
        if "weight_zero_point" in t:
            zp = t["weight_zero_point"]
            zr = nibbles(zp.T.copy(), zp.shape[0] * 8).T  # unpack rows
        else:
            zr = np.full((out, inn // GROUP), 8)
        g = inn // t["weight_scale"].shape[1]
        return ((q - np.repeat(zr, g, axis=1)) *
                np.repeat(t["weight_scale"].astype(np.float64), g, axis=1))
    w = t["weight"]
    w = e4m3(w) if w.dtype == np.uint8 else w.astype(np.float64)
    s = t["weight_scale_inv" if scheme == "fp8-native" else
          "weight_scale"].astype(np.float64)
    if scheme in ("fp8-block", "fp8-native"):
        s = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)
    return w * s


def held(path):
    t, _, _ = npst.read(path)
    return {k: (np.frombuffer(v[2], np.uint8).reshape(v[1])
                if v[0] == "F8_E4M3" else npst.to_numpy(*v))
            for k, v in t.items()}


def expect(scheme, name, a, r, n, dim):
    """vLLM's slice of param `name` for rank r of n (dim: the weight's)."""
    kind = name.rsplit(".", 1)[1]
    if kind in ("weight_shape", "input_scale", "weight_scale_2") or \
            a.size == 1:
        return a
    if kind in ("weight_scale", "weight_zero_point") and dim == 1 and \
            a.shape[1] == 1:
        return a
    k = a.shape[dim] // n
    return np.take(a, range(r * k, (r + 1) * k), axis=dim)


def check(d, out, n):
    cfg = json.load(open(os.path.join(d, "config.json")))
    scheme = cfg["scheme"]
    z = sizes(scheme, cfg["num_key_value_heads"])
    full = {k: v for k, v in held(os.path.join(d, "model.safetensors")).items()}
    ranks = [held(os.path.join(out, "rank%d.safetensors" % r))
             for r in range(n)]
    errs = []
    for mod in shapes(z):
        dim = 0 if mod in COL else 1
        ft = {k.rsplit(".", 1)[1]: v for k, v in full.items()
              if k.startswith(L + mod + ".")}
        fdq = dequant(scheme, ft)
        for r, got in enumerate(ranks):
            rt = {}
            for kind, a in ft.items():
                name = L + mod + "." + kind
                want = expect(scheme, name, a, r, n, dim)
                if not np.array_equal(got[name], want):
                    errs.append("rank %d %s: not vLLM's slice" % (r, name))
                rt[kind] = got[name]
            if not np.array_equal(
                    dequant(scheme, rt), expect(scheme, "x.w", fdq, r, n, dim)):
                errs.append("rank %d %s: dequantized with its scales, not "
                            "its slice of the dequantized weight" % (r, mod))
    for e in errs:
        print(e, file=sys.stderr)
    return 1 if errs else 0


def dequant_dir(d, out, n, dst, swap=False):
    """See the module doc: float32 full model and rank files."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    scheme = cfg["scheme"]
    z = sizes(scheme, cfg["num_key_value_heads"])
    full = held(os.path.join(d, "model.safetensors"))
    ranks = [held(os.path.join(out, "rank%d.safetensors" % r))
             for r in range(n)]

    def floats(t, other=None):
        res = {}
        for mod in shapes(z):
            pre = L + mod + "."
            parts = {k[len(pre):]: v for k, v in t.items()
                     if k.startswith(pre)}
            if other is not None:
                for k in ("weight_scale", "weight_zero_point",
                          "weight_scale_inv"):
                    if k in parts:
                        parts[k] = other[pre + k]
            res[pre + "weight"] = dequant(scheme, parts).astype(np.float32)
        for k, v in t.items():
            if not any(k.startswith(L + mod + ".") for mod in shapes(z)):
                res[k] = v.astype(np.float32)
        return res

    os.makedirs(os.path.join(dst, "full"), exist_ok=True)
    os.makedirs(os.path.join(dst, "shards"), exist_ok=True)
    npst.write(os.path.join(dst, "full", "model.safetensors"), floats(full))
    cfg.pop("quantization_config", None)
    with open(os.path.join(dst, "full", "config.json"), "w") as f:
        json.dump(cfg, f)
    for r in range(n):
        other = ranks[(r + 1) % n] if swap else None
        npst.write(os.path.join(dst, "shards", "rank%d.safetensors" % r),
                   floats(ranks[r], other))


def main(argv):
    if len(argv) in (6, 7) and argv[1] == "dequant":
        dequant_dir(argv[2], argv[3], int(argv[4]), argv[5],
                    argv[6:] == ["--swap-scales"])
        return 0
    if len(argv) in (4, 5) and argv[1] == "write":
        write(argv[2], argv[3], int(argv[4]) if len(argv) == 5 else 0)
        return 0
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
