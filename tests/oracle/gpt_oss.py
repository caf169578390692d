"""gpt_oss.py - a one-layer checkpoint shaped as OpenAI's gpt-oss is
published (MXFP4 experts: transformers' GptOssForCausalLM names, the
*_blocks / *_scales / *_bias tensors of mlp.experts, gate_up rows
interleaved gate, up, gate, up, ...), its plans, and the check of a
preshard output against what vLLM gives each rank.

The expectation is written from vLLM's gpt_oss.py (_load_weights_mxfp4):
with per-rank intermediate size P = I / N (here whole 32-blocks), rank r
holds gate_up rows [2 r P, 2 (r + 1) P) of blocks, scales and bias, and
down blocks / scales [r P / 32, (r + 1) P / 32) along the input blocks.
Independently of that formula, a rank's even rows must be gate rows
[r P, (r + 1) P) and its odd rows the matching up rows: a segs cut
would fail both.

The rest of the layer as the same file loads it: q/k/v rows and biases
by heads (QKVParallelLinear), o_proj's columns, sinks by heads, the
router, norms and vocabulary tables whole; row-parallel biases (o_proj,
the experts' down) as tpload delivers them by default, bias / N on every
rank, so that the all-reduced sum is the bias vLLM adds on rank 0, or
under --bias-policy vllm as vLLM's loader holds them (vllm_bias).

  gpt_oss.py write DIR I        checkpoint, config.json, plan-*.json
  gpt_oss.py check DIR OUT N    the experts of preshard output OUT
  gpt_oss.py check-all DIR OUT N [vllm]  every tensor (the gpt_oss
                                preset); vllm: as --bias-policy vllm
                                delivers the row-parallel biases
  gpt_oss.py forward DIR OUT N [--swap-scales]
      the MoE MLP's forward pass: each rank dequantizes the MXFP4 blocks
      it holds with the scales it holds (mxfp4() below), computes its
      partial output over T tokens (router top-2 of the replicated
      router, its intermediate slice of every chosen expert, plus its
      copy of the down bias as the bias policy delivered it: bias / N,
      or under --bias-policy vllm the whole bias on rank 0, zeros
      elsewhere, vLLM's loader); the sum
      over the ranks (the all-reduce) must equal the full checkpoint's
      output, relative error below 1e-6.  --swap-scales: rank r uses
      rank (r + 1) % N's scales (a negative control: exit 1).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402

E, H, BLK = 3, 64, 32  # experts, hidden, MXFP4 block (values per scale)
HEADS, KV, HD, VOCAB = 4, 2, 8, 40
PFX = "model.layers.0.mlp.experts."
ATT = "model.layers.0.self_attn."


def attention(rng):
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    t = {"model.embed_tokens.weight": f32(VOCAB, H),
         "model.layers.0.input_layernorm.weight": f32(H),
         "model.layers.0.post_attention_layernorm.weight": f32(H),
         ATT + "sinks": f32(HEADS), ATT + "o_proj.weight": f32(H, HEADS * HD),
         ATT + "o_proj.bias": f32(H), "model.layers.0.mlp.router.bias": f32(E),
         "model.norm.weight": f32(H), "lm_head.weight": f32(VOCAB, H)}
    for p, heads in (("q", HEADS), ("k", KV), ("v", KV)):
        t[ATT + p + "_proj.weight"] = f32(heads * HD, H)
        t[ATT + p + "_proj.bias"] = f32(heads * HD)
    return t


def tensors(inter):
    rng = np.random.default_rng(36)
    u8 = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return dict(attention(np.random.default_rng(37)), **{
        PFX + "gate_up_proj_blocks": u8(E, 2 * inter, H // BLK, 16),
        # E8M0 exponents 2^-9 .. 2^0: values a forward pass can add up
        PFX + "gate_up_proj_scales": rng.integers(
            118, 128, (E, 2 * inter, H // BLK), dtype=np.uint8),
        PFX + "gate_up_proj_bias": rng.standard_normal(
            (E, 2 * inter)).astype(np.float32),
        PFX + "down_proj_blocks": u8(E, H, max(inter // BLK, 1), 16),
        PFX + "down_proj_scales": rng.integers(
            118, 128, (E, H, max(inter // BLK, 1)), dtype=np.uint8),
        PFX + "down_proj_bias": rng.standard_normal(
            (E, H)).astype(np.float32),
        "model.layers.0.mlp.router.weight": rng.standard_normal(
            (E, H)).astype(np.float32),
    })


def plans(inter):
    gu = [{"match": PFX + "gate_up_proj_" + k, "dim": 1, "interleave": 2}
          for k in ("blocks", "scales", "bias")]
    down = [{"match": PFX + "down_proj_" + k, "dim": 2}
            for k in ("blocks", "scales")]
    segs = [dict(r, segs=[inter, inter]) for r in gu]
    for r in segs:
        del r["interleave"]
    plain = [{k: v for k, v in r.items() if k != "interleave"} for r in gu]
    return {"plan-interleave.json": gu + down, "plan-segs.json": segs + down,
            "plan-plain.json": plain + down}


def write(d, inter):
    os.makedirs(d, exist_ok=True)
    npst.write(os.path.join(d, "model.safetensors"), tensors(inter))
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
           "hidden_size": H, "intermediate_size": inter,
           "num_attention_heads": HEADS, "num_key_value_heads": KV,
           "head_dim": HD, "vocab_size": VOCAB,
           "num_local_experts": E, "num_hidden_layers": 1,
           "quantization_config": {"quant_method": "mxfp4"}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    for name, rules in plans(inter).items():
        with open(os.path.join(d, name), "w") as f:
            json.dump({"rules": rules}, f)


def held(out, r):
    t, _, _ = npst.read(os.path.join(out, "rank%d.safetensors" % r))
    return {k: npst.to_numpy(*v) for k, v in t.items()}


def full_of(d):
    return tensors(json.load(open(os.path.join(d, "config.json")))
                   ["intermediate_size"])


def check_experts(full, out, n):
    inter = full[PFX + "gate_up_proj_bias"].shape[1] // 2
    p, errs = inter // n, []
    for r in range(n):
        got = held(out, r)
        for k in ("blocks", "scales", "bias"):
            name = PFX + "gate_up_proj_" + k
            want = full[name][:, 2 * r * p:2 * (r + 1) * p]
            if not np.array_equal(got[name], want):
                errs.append("rank %d %s: not vLLM's rows" % (r, name))
            gate = full[name][:, 0::2][:, r * p:(r + 1) * p]
            up = full[name][:, 1::2][:, r * p:(r + 1) * p]
            if not (np.array_equal(got[name][:, 0::2], gate) and
                    np.array_equal(got[name][:, 1::2], up)):
                errs.append("rank %d %s: gate/up rows of another rank"
                            % (r, name))
        for k in ("blocks", "scales"):
            name = PFX + "down_proj_" + k
            want = full[name][:, :, r * p // BLK:(r + 1) * p // BLK]
            if not np.array_equal(got[name], want):
                errs.append("rank %d %s: not vLLM's blocks" % (r, name))
    return errs


def report(errs):
    for e in errs:
        print(e, file=sys.stderr)
    return 1 if errs else 0


def check(d, out, n):
    return report(check_experts(full_of(d), out, n))


def rows(a, r, n, axis=0):
    k = a.shape[axis] // n
    return np.take(a, range(r * k, (r + 1) * k), axis=axis)


def vllm_bias(name, a, r):
    """vLLM's gpt_oss.py loader: o_proj's bias whole on every rank
    (RowParallelLinear, added on tp_rank 0 only), the experts' down bias
    zeroed on tp_rank != 0 ("only load on rank 0 to avoid
    duplication")."""
    if name == PFX + "down_proj_bias" and r != 0:
        return np.zeros_like(a)
    return a


def check_all(d, out, n, family="mlc"):
    full = full_of(d)
    errs = check_experts(full, out, n)
    cut = {ATT + p: 0 for p in ("q_proj.weight", "q_proj.bias", "k_proj.weight",
                                "k_proj.bias", "v_proj.weight", "v_proj.bias",
                                "sinks")}
    cut[ATT + "o_proj.weight"] = 1
    sums = {ATT + "o_proj.bias": 0, PFX + "down_proj_bias": 0}
    held_all = [held(out, r) for r in range(n)]
    for name, a in full.items():
        if name.startswith(PFX) and name not in sums:
            continue
        for r, got in enumerate(held_all):
            if name in sums:
                sums[name] = sums[name] + got[name]
                want = a / n if family == "mlc" else vllm_bias(name, a, r)
            elif name in cut:
                want = rows(a, r, n, cut[name])
            else:
                want = a
            if not np.array_equal(got[name], want.astype(a.dtype)):
                errs.append("rank %d %s: not what vLLM's loader gives it"
                            % (r, name))
    for name, s in sums.items():
        if family == "mlc" and not np.allclose(s, full[name], rtol=0,
                                               atol=1e-6):
            errs.append("%s: the ranks' biases do not sum to the bias" % name)
    return report(errs)


# --- the MoE MLP's forward pass over MXFP4 experts ---

# transformers' integrations/mxfp4.py (convert_moe_packed_tensors): an
# E2M1 code per nibble, the low nibble first; a block of 32 values shares
# one E8M0 scale, 2^(scale - 127).
FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
LIMIT, ALPHA, T = 7.0, 1.702, 5  # GptOssExperts' swiglu; tokens


def mxfp4(blocks, scales):
    """[..., G, 16] uint8 blocks and [..., G] scales -> [..., G * 32]."""
    b = blocks.astype(np.int64)
    v = np.stack([FP4[b & 15], FP4[b >> 4]], axis=-1)
    v = v.reshape(blocks.shape[:-1] + (32,))
    v = np.ldexp(v, scales.astype(np.int64)[..., None] - 127)
    return v.reshape(blocks.shape[:-2] + (-1,))


def experts_out(t, h, router, down_bias):
    """transformers' GptOssMLP over tokens h: top-2 of the router,
    softmax over the two, each expert's interleaved gate_up (gate even
    rows, up odd), clamped swiglu, down plus `down_bias[e]`."""
    logits = h @ router[0].T + router[1]
    top = np.argsort(-logits, axis=1)[:, :2]
    out = np.zeros_like(h)
    gu_w = mxfp4(t[PFX + "gate_up_proj_blocks"], t[PFX + "gate_up_proj_scales"])
    d_w = mxfp4(t[PFX + "down_proj_blocks"], t[PFX + "down_proj_scales"])
    for i in range(h.shape[0]):
        z = logits[i, top[i]]
        w = np.exp(z - z.max())
        w /= w.sum()
        for e, we in zip(top[i], w):
            gu = gu_w[e] @ h[i] + t[PFX + "gate_up_proj_bias"][e]
            gate = np.minimum(gu[0::2], LIMIT)
            up = np.clip(gu[1::2], -LIMIT, LIMIT)
            act = (up + 1) * gate / (1 + np.exp(-ALPHA * gate))
            out[i] += we * (d_w[e] @ act + down_bias[e])
    return out


def forward(d, out, n, swap=False):
    full = {k: v.astype(np.float64) if v.dtype == np.float32 else v
            for k, v in full_of(d).items()}
    rng = np.random.default_rng(7)
    h = rng.standard_normal((T, H))
    router = (full["model.layers.0.mlp.router.weight"],
              full["model.layers.0.mlp.router.bias"])
    want = experts_out(full, h, router, full[PFX + "down_proj_bias"])
    ranks = [held(out, r) for r in range(n)]
    got = np.zeros_like(want)
    for r, t in enumerate(ranks):
        if swap:
            other = ranks[(r + 1) % n]
            t = dict(t, **{k: other[k] for k in
                           (PFX + "gate_up_proj_scales",
                            PFX + "down_proj_scales")})
        got += experts_out(t, h, router,
                           t[PFX + "down_proj_bias"].astype(np.float64))
    err = np.abs(got - want).max() / np.abs(want).max()
    print("# MoE MLP over %d ranks: relative error %.3g" % (n, err),
          file=sys.stderr)
    return 0 if err < 1e-6 else 1


def main(argv):
    if len(argv) >= 5 and argv[1] == "forward":
        return forward(argv[2], argv[3], int(argv[4]),
                       argv[5:] == ["--swap-scales"])
    if len(argv) == 4 and argv[1] == "write":
        write(argv[2], int(argv[3]))
        return 0
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], int(argv[4]))
    if len(argv) in (5, 6) and argv[1] == "check-all":
        return check_all(argv[2], argv[3], int(argv[4]), *argv[5:])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
