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

  gpt_oss.py write DIR I      checkpoint, config.json, plan-*.json
  gpt_oss.py check DIR OUT N  preshard output OUT against both rules
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402

E, H, BLK = 2, 64, 32  # experts, hidden, MXFP4 block (values per scale)
PFX = "model.layers.0.mlp.experts."


def tensors(inter):
    rng = np.random.default_rng(36)
    u8 = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return {
        PFX + "gate_up_proj_blocks": u8(E, 2 * inter, H // BLK, 16),
        PFX + "gate_up_proj_scales": u8(E, 2 * inter, H // BLK),
        PFX + "gate_up_proj_bias": rng.standard_normal(
            (E, 2 * inter)).astype(np.float32),
        PFX + "down_proj_blocks": u8(E, H, max(inter // BLK, 1), 16),
        PFX + "down_proj_scales": u8(E, H, max(inter // BLK, 1)),
        "model.layers.0.mlp.router.weight": rng.standard_normal(
            (E, H)).astype(np.float32),
    }


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


def check(d, out, n):
    full = tensors(json.load(open(os.path.join(d, "config.json")))
                   ["intermediate_size"])
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
    for e in errs:
        print(e, file=sys.stderr)
    return 1 if errs else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "write":
        write(argv[2], int(argv[3]))
        return 0
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
