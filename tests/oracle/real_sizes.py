"""real_sizes.py - header-only checkpoints at the real sizes of five
models people deploy (each tensor's name, dtype and shape as published;
the data a sparse hole, so a 10 GiB layer costs nothing), with fewer
layers than the real ones (whether a shard count works depends on the
sizes, not on how many layers repeat them), and the shard counts N in
2..32 that vLLM accepts for each, written from vLLM's rules:

  heads % N == 0 (every attention layer); kv heads: N divides them, or N
    is a multiple of them (QKVParallelLinear replicates, linear.py);
  MergedColumnParallelLinear / ColumnParallelLinear: the output size
    divides by N; RowParallelLinear: the input size divides by N;
  FP8 blocks (quantization/utils/fp8_utils.py validate_fp8_block_shape,
    fused_moe's fp8.py): every output partition (per merged part) and
    every input partition a multiple of the block, for N > 1;
  MLA (deepseek_v2.py): q_b_proj / kv_b_proj by heads, o_proj's input by
    heads; q_a / kv_a replicated;
  gpt-oss (gpt_oss.py): intermediate_size % N == 0, MXFP4 experts split
    in cdiv(I / 32, N) blocks a rank, the last rank shorter.

tpload cuts every tensor in N equal parts, so where vLLM pads an uneven
split (gpt-oss's MXFP4 blocks: 90 blocks at N = 4) tpload refuses; the
table says so in `tpload` beside `vllm`.

With expert parallelism (`--ep`, vLLM's --enable-expert-parallel with
EP size = TP size N): the routed experts are not cut (fused_moe's
FusedMoEParallelConfig gives them tp_size 1), so their sizes and FP8
blocks no longer need to divide; every rank needs one expert (E >= N);
attention, dense MLPs and DeepSeek's shared expert keep every rule
above.  Experts stacked in one [E, ...] tensor (gpt-oss) are cut along
E in equal parts by tpload: E % N == 0 (vLLM gives the remainder to the
first ranks); the table says so in `tpload_ep`.

  real_sizes.py write DIR   one directory per model, and DIR/expect.txt:
                            "MODEL N vllm tpload vllm_ep tpload_ep" with
                            accept / refuse ("-" for a model without
                            experts)
"""
import json
import os
import struct
import sys

BLK = 128
SIZE = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1}


def deepseek_v3():
    h, heads, ql, kvl, nope, rope, vh = 7168, 128, 1536, 512, 128, 64, 128
    inter, mi, experts, layers, dense = 18432, 2048, 256, 3, 2
    t = {}

    def fp8(name, out, inn):
        t[name + ".weight"] = ("F8_E4M3", [out, inn])
        t[name + ".weight_scale_inv"] = ("F32", [-(-out // BLK),
                                                 -(-inn // BLK)])

    for i in range(layers + 1):  # the last one is the MTP layer
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = ("BF16", [h])
        t[p + "post_attention_layernorm.weight"] = ("BF16", [h])
        fp8(p + "self_attn.q_a_proj", ql, h)
        t[p + "self_attn.q_a_layernorm.weight"] = ("BF16", [ql])
        fp8(p + "self_attn.q_b_proj", heads * (nope + rope), ql)
        fp8(p + "self_attn.kv_a_proj_with_mqa", kvl + rope, h)
        t[p + "self_attn.kv_a_layernorm.weight"] = ("BF16", [kvl])
        fp8(p + "self_attn.kv_b_proj", heads * (nope + vh), kvl)
        fp8(p + "self_attn.o_proj", h, heads * vh)
        if i < dense:
            for m, (o, n) in (("gate_proj", (inter, h)), ("up_proj", (inter, h)),
                              ("down_proj", (h, inter))):
                fp8(p + "mlp." + m, o, n)
            continue
        t[p + "mlp.gate.weight"] = ("BF16", [experts, h])
        t[p + "mlp.gate.e_score_correction_bias"] = ("F32", [experts])
        for e in ["shared_experts"] + ["experts.%d" % k for k in range(experts)]:
            for m, (o, n) in (("gate_proj", (mi, h)), ("up_proj", (mi, h)),
                              ("down_proj", (h, mi))):
                fp8(p + "mlp.%s.%s" % (e, m), o, n)
        if i == layers:
            for n in ("enorm", "hnorm", "shared_head.norm"):
                t[p + n + ".weight"] = ("BF16", [h])
            t[p + "eh_proj.weight"] = ("BF16", [h, 2 * h])
            t[p + "shared_head.head.weight"] = ("BF16", [129280, h])
            t[p + "embed_tokens.weight"] = ("BF16", [129280, h])
    top(t, h, 129280)
    cfg = {"architectures": ["DeepseekV3ForCausalLM"],
           "model_type": "deepseek_v3", "hidden_size": h,
           "num_attention_heads": heads, "num_key_value_heads": heads,
           "intermediate_size": inter, "moe_intermediate_size": mi,
           "n_routed_experts": experts, "n_shared_experts": 1,
           "first_k_dense_replace": dense, "moe_layer_freq": 1,
           "num_hidden_layers": layers, "num_nextn_predict_layers": 1,
           "q_lora_rank": ql, "kv_lora_rank": kvl,
           "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
           "v_head_dim": vh, "vocab_size": 129280,
           "quantization_config": {"quant_method": "fp8",
                                   "weight_block_size": [BLK, BLK]}}

    def vllm(n):  # mi: the routed experts' and the one shared expert's
        blocks = [heads * (nope + rope), heads * (nope + vh), heads * vh,
                  inter, mi]
        return heads % n == 0 and all(b % n == 0 and (b // n) % BLK == 0
                                      for b in blocks)

    def vllm_ep(n):  # the shared expert (mi) is still cut under EP
        return vllm(n) and experts >= n
    return t, cfg, vllm, vllm, vllm_ep, vllm_ep


def qwen3_moe(h, heads, kv, mi, experts, arch_layers=2):
    hd = 128
    t = {}

    def fp8(name, out, inn):
        t[name + ".weight"] = ("F8_E4M3", [out, inn])
        t[name + ".weight_scale_inv"] = ("F32", [-(-out // BLK),
                                                 -(-inn // BLK)])

    for i in range(arch_layers):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = ("BF16", [h])
        t[p + "post_attention_layernorm.weight"] = ("BF16", [h])
        fp8(p + "self_attn.q_proj", heads * hd, h)
        fp8(p + "self_attn.k_proj", kv * hd, h)
        fp8(p + "self_attn.v_proj", kv * hd, h)
        fp8(p + "self_attn.o_proj", h, heads * hd)
        t[p + "self_attn.q_norm.weight"] = ("BF16", [hd])
        t[p + "self_attn.k_norm.weight"] = ("BF16", [hd])
        t[p + "mlp.gate.weight"] = ("BF16", [experts, h])
        for e in range(experts):
            for m, (o, n) in (("gate_proj", (mi, h)), ("up_proj", (mi, h)),
                              ("down_proj", (h, mi))):
                fp8(p + "mlp.experts.%d.%s" % (e, m), o, n)
    top(t, h, 151936)
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
           "hidden_size": h, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd,
           "intermediate_size": 6 * mi, "moe_intermediate_size": mi,
           "num_experts": experts, "num_experts_per_tok": 8,
           "num_hidden_layers": arch_layers, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "vocab_size": 151936,
           "quantization_config": {"quant_method": "fp8",
                                   "weight_block_size": [BLK, BLK]}}

    def attention(n):
        kv_ok = kv % n == 0 or n % kv == 0
        kv_part = kv * hd // n if kv % n == 0 else hd
        return (heads % n == 0 and kv_ok and (heads * hd // n) % BLK == 0 and
                kv_part % BLK == 0)

    def vllm(n):
        return attention(n) and mi % n == 0 and (mi // n) % BLK == 0

    def vllm_ep(n):
        return attention(n) and experts >= n
    return t, cfg, vllm, vllm, vllm_ep, vllm_ep


def gqa_layer(t, p, h, heads, kv, hd, bias):
    """A bf16 GQA attention block and its norms under prefix `p`."""
    t[p + "input_layernorm.weight"] = ("BF16", [h])
    t[p + "post_attention_layernorm.weight"] = ("BF16", [h])
    for m, o in (("q_proj", heads * hd), ("k_proj", kv * hd),
                 ("v_proj", kv * hd)):
        t[p + "self_attn.%s.weight" % m] = ("BF16", [o, h])
        if bias:
            t[p + "self_attn.%s.bias" % m] = ("BF16", [o])
    t[p + "self_attn.o_proj.weight"] = ("BF16", [h, heads * hd])
    if bias:
        t[p + "self_attn.o_proj.bias"] = ("BF16", [h])


def gpt_oss_120b():
    h, heads, kv, hd, inter, experts = 2880, 64, 8, 64, 2880, 128
    t = {}
    for i in range(2):
        p = "model.layers.%d." % i
        gqa_layer(t, p, h, heads, kv, hd, True)
        t[p + "self_attn.sinks"] = ("BF16", [heads])
        t[p + "mlp.router.weight"] = ("BF16", [experts, h])
        t[p + "mlp.router.bias"] = ("BF16", [experts])
        x = p + "mlp.experts."
        t[x + "gate_up_proj_blocks"] = ("U8", [experts, 2 * inter, h // 32, 16])
        t[x + "gate_up_proj_scales"] = ("U8", [experts, 2 * inter, h // 32])
        t[x + "gate_up_proj_bias"] = ("BF16", [experts, 2 * inter])
        t[x + "down_proj_blocks"] = ("U8", [experts, h, inter // 32, 16])
        t[x + "down_proj_scales"] = ("U8", [experts, h, inter // 32])
        t[x + "down_proj_bias"] = ("BF16", [experts, h])
    top(t, h, 201088)
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
           "hidden_size": h, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd,
           "intermediate_size": inter, "num_local_experts": experts,
           "num_hidden_layers": 2, "vocab_size": 201088,
           "quantization_config": {"quant_method": "mxfp4"}}

    def vllm(n):
        return (heads % n == 0 and (kv % n == 0 or n % kv == 0) and
                inter % n == 0)

    def tpload(n):  # equal parts only: the MXFP4 blocks must divide by N
        return vllm(n) and (inter // 32) % n == 0

    def vllm_ep(n):  # no dense MLP: only attention is cut
        return heads % n == 0 and (kv % n == 0 or n % kv == 0) and \
            experts >= n

    def tpload_ep(n):  # the stacked experts cut along E in equal parts
        return vllm_ep(n) and experts % n == 0
    return t, cfg, vllm, tpload, vllm_ep, tpload_ep


def llama_70b():
    h, heads, kv, hd, inter = 8192, 64, 8, 128, 28672
    t = {}
    for i in range(2):
        p = "model.layers.%d." % i
        gqa_layer(t, p, h, heads, kv, hd, False)
        t[p + "mlp.gate_proj.weight"] = ("BF16", [inter, h])
        t[p + "mlp.up_proj.weight"] = ("BF16", [inter, h])
        t[p + "mlp.down_proj.weight"] = ("BF16", [h, inter])
    top(t, h, 128256)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": h, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd,
           "intermediate_size": inter, "num_hidden_layers": 2,
           "vocab_size": 128256}

    def vllm(n):
        return (heads % n == 0 and (kv % n == 0 or n % kv == 0) and
                inter % n == 0)
    return t, cfg, vllm, vllm, None, None


def top(t, h, vocab):
    t["model.embed_tokens.weight"] = ("BF16", [vocab, h])
    t["model.norm.weight"] = ("BF16", [h])
    t["lm_head.weight"] = ("BF16", [vocab, h])


MODELS = {
    "deepseek-v3": deepseek_v3,
    "qwen3-30b-a3b-fp8": lambda: qwen3_moe(2048, 32, 4, 768, 128),
    "qwen3-235b-a22b-fp8": lambda: qwen3_moe(4096, 64, 4, 1536, 128),
    "gpt-oss-120b": gpt_oss_120b,
    "llama-3.1-70b": llama_70b,
}


def write_sparse(path, tensors):
    hdr, at = {}, 0
    for name, (dt, shape) in tensors.items():
        n = SIZE[dt]
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + at)  # a hole: nothing is written


def verdict(rule, n):
    if rule is None:
        return "-"
    return "accept" if rule(n) else "refuse"


def write(d):
    lines = []
    for name, make in MODELS.items():
        tensors, cfg, vllm, tpload, vllm_ep, tpload_ep = make()
        md = os.path.join(d, name)
        os.makedirs(md, exist_ok=True)
        write_sparse(os.path.join(md, "model.safetensors"), tensors)
        with open(os.path.join(md, "config.json"), "w") as f:
            json.dump(cfg, f)
        for n in range(2, 33):
            lines.append("%s %d %s %s %s %s" % (
                name, n, verdict(vllm, n), verdict(tpload, n),
                verdict(vllm_ep, n), verdict(tpload_ep, n)))
    with open(os.path.join(d, "expect.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
        sys.exit(0)
    print(__doc__, file=sys.stderr)
    sys.exit(64)
