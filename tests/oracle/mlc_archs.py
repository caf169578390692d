#!/usr/bin/python3
"""mlc_archs.py - tiny checkpoints of every preset architecture, shaped as
MLC LLM writes its weight directories and as Hugging Face checkpoints are
named, with the shard plan each one must get, written from MLC LLM's model
files (mlc-ai/mlc-llm python/mlc_llm/model/<arch>/<arch>_model.py, the
`_set_tp` of each decoder layer; names from the module tree and
<arch>_loader.py).  Independent of `tpload synth` and of src/.

Sizes (all divisible by 1, 2 and 4): hidden E = 16, 8 heads of head_dim
2 (q = 16), 4 kv heads (k = v = 8), intermediate I = 24, 2 experts of
moe_intermediate MI = 8, shared expert SI = 16, vocab 40, 2 layers.
Segments are in full units (DESIGN.md section 3); MLC's ShardSingleDim
lists the same segments divided by N.

Expectations: name -> ("_func", dim, segs or None) for a shard,
"S" for scale_bias, "R" for replicate.

CLI:
    mlc_archs.py list                     "ARCH FMT..." lines
    mlc_archs.py write ARCH FMT DIR [--drop NAME] [--add NAME=D0xD1]
                   [--set KEY=JSON] [--experts X]
                                          FMT hf | mlc: DIR/ with the
        checkpoint (model.safetensors + config.json, or tensor-cache.json
        + params_shard_0.bin + mlc-chat-config.json; float32 records in
        f32-to-bf16 as MLC converts them), DIR/expect.json and
        DIR/plan.json (the expectations as a plan file, for oracle.py)
        (--drop / --add change the tensors, --set a config size, to
        build the checkpoints a preset must refuse; --experts X routed
        experts per MoE layer instead of 2)
    mlc_archs.py write-all DIR            every ARCH x FMT into DIR/ARCH-FMT
    mlc_archs.py check-all DIR            for every DIR/ARCH-FMT/planN.json
        (`tpload plan --shards N` output), checks the plan against
        expect.json and that auto-detection chose preset ARCH; prints
        "ok NAME" or "fail NAME" followed by "# detail" lines
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402

E, H, KV, D, I, V = 16, 8, 4, 2, 24, 40
Q, K = H * D, KV * D
MI, SI, NE = 8, 16, 2
QKV = [Q, K, K]
MHA = [Q, Q, Q]          # kv heads = heads
LAYERS = 2

HF_CFG = {"hidden_size": E, "num_attention_heads": H,
          "num_key_value_heads": KV, "head_dim": D, "intermediate_size": I,
          "vocab_size": V, "num_hidden_layers": LAYERS}


def R(shape):
    return (shape, "R")


def S(shape):
    return (shape, "S")


def X(shape, func, dim, segs=None):
    return (shape, (func, dim, segs))


# ---- MLC layer pieces ----

def mlc_llama_layer():
    # llama_model.py LlamaDecoderLayer._set_tp
    return {
        "self_attn.qkv_proj.weight": X([Q + 2 * K, E], "_shard_qkv", 0, QKV),
        "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
        "mlp.gate_up_proj.weight": X([2 * I, E], "_shard_mlp_up", 0, [I, I]),
        "mlp.down_proj.weight": X([E, I], "_shard_mlp_down", 1),
        "input_layernorm.weight": R([E]),
        "post_attention_layernorm.weight": R([E]),
    }


def mlc_llama_top(p="model."):
    return {p + "embed_tokens.weight": R([V, E]), p + "norm.weight": R([E]),
            "lm_head.weight": R([V, E])}


def mlc_qwen2_attn(bias=True):
    # qwen2_model.py QWen2DecoderLayer._set_tp
    d = {"self_attn.c_attn.weight": X([Q + 2 * K, E], "_shard_qkv_weight", 0,
                                      QKV),
         "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
         "input_layernorm.weight": R([E]),
         "post_attention_layernorm.weight": R([E])}
    if bias:
        d["self_attn.c_attn.bias"] = X([Q + 2 * K], "_shard_qkv_bias", 0, QKV)
    return d


def mlc_mlp():
    return {"mlp.gate_up_proj.weight": X([2 * I, E], "_shard_mlp_up", 0,
                                         [I, I]),
            "mlp.down_proj.weight": X([E, I], "_shard_mlp_down", 1)}


# ---- HF layer pieces ----

def hf_attn(bias=False, base="self_attn", o="o_proj", k=K):
    d = {base + ".q_proj.weight": X([Q, E], "_shard_q", 0),
         base + ".k_proj.weight": X([k, E], "_shard_k", 0),
         base + ".v_proj.weight": X([k, E], "_shard_v", 0),
         base + "." + o + ".weight": X([E, Q], "_shard_o", 1),
         "input_layernorm.weight": R([E]),
         "post_attention_layernorm.weight": R([E])}
    if bias:
        d.update({base + ".q_proj.bias": X([Q], "_shard_q_bias", 0),
                  base + ".k_proj.bias": X([k], "_shard_k_bias", 0),
                  base + ".v_proj.bias": X([k], "_shard_v_bias", 0)})
    return d


def hf_mlp(base="mlp", inter=I, names=("_shard_gate", "_shard_up",
                                        "_shard_down")):
    return {base + ".gate_proj.weight": X([inter, E], names[0], 0),
            base + ".up_proj.weight": X([inter, E], names[1], 0),
            base + ".down_proj.weight": X([E, inter], names[2], 1)}


def hf_experts(base="mlp"):
    d = {}
    for e in range(NE):
        d.update(hf_mlp("%s.experts.%d" % (base, e), MI,
                        ("_shard_expert_gate", "_shard_expert_up",
                         "_shard_expert_down")))
    return d


def llama_top_hf():
    return mlc_llama_top()


# ---- architectures: arch -> {"hf": (layers, top, cfg), "mlc": (...)} ----
# layers: list (one dict per layer) of suffix -> (shape, expectation),
# prefixed by `prefix` + "<i>.".

def same_layers(d, n=LAYERS):
    return [dict(d) for _ in range(n)]


def llama_like(hf_arch, mtype, prefix="model.layers.", hf_prefix=None):
    # mlc: llama_model.py / mistral_model.py / gemma_model.py /
    # gemma2_model.py / olmo_model.py / olmo2_model.py / orion_model.py /
    # ministral3_model.py: the same _set_tp as LlamaDecoderLayer.
    mlc = mlc_llama_layer()
    hf = hf_attn()
    hf.update(hf_mlp())
    return {
        "mlc": (prefix, same_layers(mlc), mlc_llama_top(),
                {"model_type": mtype, "model_config": dict(HF_CFG)}),
        "hf": (hf_prefix or prefix, same_layers(hf), llama_top_hf(),
               dict(HF_CFG, architectures=[hf_arch], model_type=mtype)),
    }


def arch_qwen2():
    hf = hf_attn(bias=True)
    hf.update(hf_mlp())
    mlc = mlc_qwen2_attn()
    mlc.update(mlc_mlp())
    return {"mlc": ("model.layers.", same_layers(mlc), mlc_llama_top(),
                    {"model_type": "qwen2", "model_config": dict(HF_CFG)}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(HF_CFG, architectures=["Qwen2ForCausalLM"],
                        model_type="qwen2"))}


def arch_qwen3():
    # qwen3_model.py Qwen3DecoderLayer._set_tp: c_attn bias only with
    # attention_bias (false here); q_norm / k_norm [head_dim] unsharded.
    norms = {"self_attn.q_norm.weight": R([D]),
             "self_attn.k_norm.weight": R([D])}
    hf = hf_attn()
    hf.update(hf_mlp())
    hf.update(norms)
    mlc = mlc_qwen2_attn(bias=False)
    mlc.update(mlc_mlp())
    mlc.update(norms)
    cfg = dict(HF_CFG, attention_bias=False)
    return {"mlc": ("model.layers.", same_layers(mlc), mlc_llama_top(),
                    {"model_type": "qwen3", "model_config": cfg}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(cfg, architectures=["Qwen3ForCausalLM"],
                        model_type="qwen3"))}


def arch_qwen2_5_vl():
    # qwen2_5_vl_model.py Qwen25VLDecoderLayer._set_tp; the vision tower
    # (`visual.`) is not sharded.
    d = arch_qwen2()
    vis = {"visual.blocks.0.attn.qkv.weight": R([48, E]),
           "visual.merger.mlp.0.weight": R([E, E])}
    prefix, layers, top, cfg = d["mlc"]
    top = dict(top, **vis)
    d["mlc"] = (prefix, layers, top, {"model_type": "qwen2_5_vl",
                                      "model_config": dict(HF_CFG)})
    prefix, layers, htop, hcfg = d["hf"]
    d["hf"] = (prefix, layers, dict(htop, **vis),
               dict(hcfg, architectures=["Qwen2_5_VLForConditionalGeneration"],
                    model_type="qwen2_5_vl"))
    return d


def arch_phi3():
    # phi3_model.py Phi3ParallelBlock._set_tp; MLC names from
    # phi3_loader.py (transformer.h.{i}.mixer.*)
    mlc = {"mixer.qkv_proj.weight": X([Q + 2 * K, E], "_shard_qkv", 0, QKV),
           "mixer.out_proj.weight": X([E, Q], "_shard_o", 1),
           "ln.weight": R([E]), "post_attention_layernorm.weight": R([E])}
    mlc.update(mlc_mlp())
    hf = {"self_attn.qkv_proj.weight": X([Q + 2 * K, E], "_shard_qkv", 0,
                                         QKV),
          "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
          "input_layernorm.weight": R([E]),
          "post_attention_layernorm.weight": R([E])}
    hf.update(mlc_mlp())
    return {"mlc": ("transformer.h.", same_layers(mlc),
                    {"transformer.embd.weight": R([V, E]),
                     "transformer.norm.weight": R([E]),
                     "lm_head.weight": R([V, E])},
                    {"model_type": "phi3", "model_config": dict(HF_CFG)}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(HF_CFG, architectures=["Phi3ForCausalLM"],
                        model_type="phi3"))}


def arch_mixtral():
    # mixtral_model.py MixtralDecoderLayer._set_tp: e1_e3 [experts, 2I, E]
    # dim 1, e2 [experts, E, I] dim 2; the router is not sharded.
    mlc = mlc_llama_layer()
    del mlc["mlp.gate_up_proj.weight"], mlc["mlp.down_proj.weight"]
    mlc.update({"moe.e1_e3.weight": X([NE, 2 * I, E], "_shard_mlp_up", 1,
                                      [I, I]),
                "moe.e2.weight": X([NE, E, I], "_shard_mlp_down", 2),
                "moe.gate.weight": R([NE, E])})
    hf = hf_attn()
    for e in range(NE):
        b = "block_sparse_moe.experts.%d." % e
        hf.update({b + "w1.weight": X([I, E], "_shard_w1", 0),
                   b + "w3.weight": X([I, E], "_shard_w3", 0),
                   b + "w2.weight": X([E, I], "_shard_w2", 1)})
    hf["block_sparse_moe.gate.weight"] = R([NE, E])
    cfg = dict(HF_CFG, num_local_experts=NE, num_experts_per_tok=1)
    return {"mlc": ("model.layers.", same_layers(mlc), mlc_llama_top(),
                    {"model_type": "mixtral", "model_config": cfg}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(cfg, architectures=["MixtralForCausalLM"],
                        model_type="mixtral"))}


def moe_cfg(**kw):
    return dict(HF_CFG, num_experts=NE, num_experts_per_tok=1,
                moe_intermediate_size=MI, **kw)


def mlc_stacked(up, down):
    return {"mlp.moe_gate_up_proj.weight": X([NE, 2 * MI, E], up, 1,
                                             [MI, MI]),
            "mlp.moe_down_proj.weight": X([NE, E, MI], down, 2),
            "mlp.gate.weight": R([NE, E])}


def arch_qwen2_moe():
    # qwen2_moe_model.py Qwen2MoeDecoderLayer._set_tp
    mlc = mlc_qwen2_attn()
    mlc.update(mlc_stacked("_shard_moe_mlp_up", "_shard_moe_mlp_down"))
    mlc.update({
        "mlp.shared_expert.gate_up_proj.weight":
            X([2 * SI, E], "_shard_shared_mlp_up", 0, [SI, SI]),
        "mlp.shared_expert.down_proj.weight":
            X([E, SI], "_shard_shared_mlp_down", 1),
        "mlp.shared_expert_gate.weight": R([1, E])})
    hf = hf_attn(bias=True)
    hf.update(hf_experts())
    hf.update(hf_mlp("mlp.shared_expert", SI, ("_shard_shared_gate",
                                               "_shard_shared_up",
                                               "_shard_shared_down")))
    hf.update({"mlp.gate.weight": R([NE, E]),
               "mlp.shared_expert_gate.weight": R([1, E])})
    cfg = moe_cfg(shared_expert_intermediate_size=SI)
    return {"mlc": ("model.layers.", same_layers(mlc), mlc_llama_top(),
                    {"model_type": "qwen2_moe", "model_config": cfg}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(cfg, architectures=["Qwen2MoeForCausalLM"],
                        model_type="qwen2_moe"))}


def arch_qwen3_moe():
    # qwen3_moe_model.py Qwen3MoeDecoderLayer._set_tp: no shared expert
    mlc = mlc_qwen2_attn(bias=False)
    mlc.update(mlc_stacked("_shard_moe_mlp_up", "_shard_moe_mlp_down"))
    hf = hf_attn()
    hf.update(hf_experts())
    hf["mlp.gate.weight"] = R([NE, E])
    cfg = moe_cfg(attention_bias=False)
    return {"mlc": ("model.layers.", same_layers(mlc), mlc_llama_top(),
                    {"model_type": "qwen3_moe", "model_config": cfg}),
            "hf": ("model.layers.", same_layers(hf), llama_top_hf(),
                   dict(cfg, architectures=["Qwen3MoeForCausalLM"],
                        model_type="qwen3_moe"))}


# deepseek_v2: heads 4, qk_nope 4, qk_rope 2 (q_head_dim 6), v_head 4,
# kv_lora 8, q_lora 8; layer 0 dense (first_k_dense_replace 1), layer 1
# MoE with 2 shared experts (SI = 2 x MI = 16).
NOPE, ROPE, VH, KVL, QL = 4, 2, 4, 8, 8


def arch_deepseek_v2():
    # deepseek_v2_model.py DeepseekV2DecoderLayer._set_tp
    attn_common = {
        "self_attn.q_a_proj.weight": R([QL, E]),
        "self_attn.q_a_layernorm.weight": R([QL]),
        "self_attn.q_b_proj.weight": X([H * (NOPE + ROPE), QL],
                                       "_shard_q_b_weight", 0),
        "self_attn.kv_a_proj_with_mqa.weight": R([KVL + ROPE, E]),
        "self_attn.kv_a_layernorm.weight": R([KVL]),
        "self_attn.kv_b_proj.weight": X([H * (NOPE + VH), KVL],
                                        "_shard_kv_b_weight", 0),
        "self_attn.o_proj.weight": X([E, H * VH], "_shard_o", 1),
        "input_layernorm.weight": R([E]),
        "post_attention_layernorm.weight": R([E])}
    mlc_attn = dict(attn_common, **{
        "self_attn.w_uk": X([H, KVL, NOPE], "_shard_kv_b_weight_w_uk", 0),
        "self_attn.w_uv": X([H, VH, KVL], "_shard_kv_b_weight_w_uv", 0)})
    dense = dict(mlc_attn, **{
        "mlp.gate_up_proj.weight": X([2 * I, E], "_shard_gate_up", 0, [I, I]),
        "mlp.down_proj.weight": X([E, I], "_shard_down", 1)})
    moe = dict(mlc_attn, **mlc_stacked("_shard_moe_gate_up",
                                       "_shard_moe_mlp_down"))
    moe.update({
        "mlp.shared_experts.gate_up_proj.weight":
            X([2 * SI, E], "_shard_shared_experts_gate_up", 0, [SI, SI]),
        "mlp.shared_experts.down_proj.weight":
            X([E, SI], "_shard_shared_experts_down", 1),
        "mlp.e_score_correction_bias": R([NE])})
    hf_dense = dict(attn_common, **hf_mlp())
    hf_moe = dict(attn_common, **hf_experts())
    hf_moe.update(hf_mlp("mlp.shared_experts", SI, ("_shard_shared_gate",
                                                    "_shard_shared_up",
                                                    "_shard_shared_down")))
    hf_moe.update({"mlp.gate.weight": R([NE, E]),
                   "mlp.gate.e_score_correction_bias": R([NE])})
    cfg = {"hidden_size": E, "num_attention_heads": H,
           "num_key_value_heads": H, "intermediate_size": I,
           "moe_intermediate_size": MI, "n_shared_experts": 2,
           "n_routed_experts": NE, "num_experts_per_tok": 1,
           "first_k_dense_replace": 1, "moe_layer_freq": 1,
           "kv_lora_rank": KVL, "q_lora_rank": QL, "qk_nope_head_dim": NOPE,
           "qk_rope_head_dim": ROPE, "v_head_dim": VH, "vocab_size": V,
           "num_hidden_layers": 2}
    return {"mlc": ("model.layers.", [dense, moe], mlc_llama_top(),
                    {"model_type": "deepseek_v3", "model_config": cfg}),
            "hf": ("model.layers.", [hf_dense, hf_moe], llama_top_hf(),
                   dict(cfg, architectures=["DeepseekV3ForCausalLM"],
                        model_type="deepseek_v3"))}


def arch_deepseek_v2_q_proj():
    # DeepseekV2DecoderLayer._set_tp with q_lora_rank None: q_proj
    # ("_shard_q_weight") instead of q_a_proj / q_b_proj; all layers MoE.
    d = arch_deepseek_v2()
    for fmt in ("mlc", "hf"):
        prefix, layers, top, cfg = d[fmt]
        layer = dict(layers[1])
        for k in ("self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight",
                  "self_attn.q_b_proj.weight"):
            del layer[k]
        layer["self_attn.q_proj.weight"] = X([H * (NOPE + ROPE), E],
                                             "_shard_q_weight", 0)
        if fmt == "mlc":
            cfg = dict(cfg, model_type="deepseek_v2", model_config=dict(
                cfg["model_config"], q_lora_rank=None,
                first_k_dense_replace=0))
        else:
            cfg = dict(cfg, q_lora_rank=None, first_k_dense_replace=0,
                       architectures=["DeepseekV2ForCausalLM"],
                       model_type="deepseek_v2")
        d[fmt] = (prefix, [layer, dict(layer)], top, cfg)
    return d


def arch_deepseek_v3_mtp():
    # DeepSeek-V3 as published: after its num_hidden_layers decoder layers,
    # num_nextn_predict_layers multi-token-prediction layers, each a MoE
    # decoder layer plus enorm, hnorm, eh_proj [E, 2E], shared_head.norm,
    # shared_head.head [V, E] and embed_tokens [V, E] (the names vLLM's
    # DeepSeekMTP loads: vllm/model_executor/models/deepseek_mtp.py,
    # _rewrite_spec_layer_name).  vLLM builds eh_proj as a plain
    # nn.Linear (whole on every rank); the head and the embedding are the
    # vocabulary tables, whole here as lm_head and embed_tokens are.  HF
    # only: MLC's converter does not carry the MTP layer.
    prefix, layers, top, cfg = arch_deepseek_v2()["hf"]
    mtp = dict(layers[1])
    mtp.update({"enorm.weight": R([E]), "hnorm.weight": R([E]),
                "eh_proj.weight": R([E, 2 * E]),
                "shared_head.norm.weight": R([E]),
                "shared_head.head.weight": R([V, E]),
                "embed_tokens.weight": R([V, E])})
    return {"hf": (prefix, layers + [mtp], top,
                   dict(cfg, num_nextn_predict_layers=1))}


def arch_gemma3_new():
    # transformers >= 4.52's Gemma3ForConditionalGeneration names
    # (modeling_gemma3.py: Gemma3Model holds language_model,
    # vision_tower and multi_modal_projector under "model."; lm_head at
    # the top), as Gemma-3-27b-it is published now: the same cut under
    # model.language_model.layers.*.  HF only.
    prefix, layers, top, cfg = arch_gemma3()["hf"]
    new = {"model.language_model.embed_tokens.weight": R([V, E]),
           "model.language_model.norm.weight": R([E]),
           "model.vision_tower.vision_model.encoder.layers.0.self_attn"
           ".q_proj.weight": R([E, E]),
           "model.multi_modal_projector.mm_input_projection_weight":
               R([E, E])}
    return {"hf": ("model.language_model.layers.", layers, new, cfg)}


def sep_attn():
    # q/k/v/o kept apart (gemma3_model.py, llama4_model.py _set_tp)
    return {"self_attn.q_proj.weight": X([Q, E], "_shard_q", 0),
            "self_attn.k_proj.weight": X([K, E], "_shard_k", 0),
            "self_attn.v_proj.weight": X([K, E], "_shard_v", 0),
            "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
            "input_layernorm.weight": R([E]),
            "post_attention_layernorm.weight": R([E])}


def arch_gemma3():
    # gemma3_model.py Gemma3DecoderLayer._set_tp, sizes under text_config,
    # MLC names under language_model.  Deviation: q_norm / k_norm
    # ([head_dim], shared by every head) replicated, not cut along dim 0.
    norms = {"self_attn.q_norm.weight": R([D]),
             "self_attn.k_norm.weight": R([D])}
    mlc = dict(sep_attn(), **norms)
    mlc.update(mlc_mlp())
    hf = dict(sep_attn(), **norms)
    hf.update(hf_mlp())
    vis = {"vision_tower.vision_model.encoder.layers.0.self_attn.q_proj"
           ".weight": R([E, E]),
           "multi_modal_projector.mm_input_projection_weight": R([E, E])}
    top = dict(mlc_llama_top("language_model.model."), **vis)
    del top["lm_head.weight"]
    cfg = {"text_config": dict(HF_CFG), "vision_config": {"hidden_size": E}}
    return {"mlc": ("language_model.model.layers.", same_layers(mlc), top,
                    {"model_type": "gemma3", "model_config": cfg}),
            "hf": ("language_model.model.layers.", same_layers(hf), top,
                   dict(cfg, architectures=["Gemma3ForConditionalGeneration"],
                        model_type="gemma3"))}


def arch_llama4():
    # llama4_model.py Llama4TextDecoderLayer._set_tp; interleave step 2:
    # layer 0 dense, layer 1 MoE.  Deviation: the router is replicated.
    mlc_dense = dict(sep_attn(), **{
        "feed_forward.gate_up_proj.weight": X([2 * I, E], "_shard_mlp_up", 0,
                                              [I, I]),
        "feed_forward.down_proj.weight": X([E, I], "_shard_mlp_down", 1)})
    experts = {
        "feed_forward.experts.gate_up_proj": X([NE, E, 2 * I],
                                               "_shard_expert_mlp_up", 2,
                                               [I, I]),
        "feed_forward.experts.down_proj": X([NE, I, E],
                                            "_shard_expert_mlp_down", 1)}
    mlc_moe = dict(sep_attn(), **experts)
    mlc_moe.update({
        "feed_forward.shared_expert.gate_up_proj.weight":
            X([2 * I, E], "_shard_mlp_up", 0, [I, I]),
        "feed_forward.shared_expert.down_proj.weight":
            X([E, I], "_shard_mlp_down", 1),
        "feed_forward.router.router.weight": R([NE, E])})
    hf_dense = dict(sep_attn(), **hf_mlp("feed_forward"))
    hf_moe = dict(sep_attn(), **experts)
    hf_moe.update(hf_mlp("feed_forward.shared_expert", I,
                         ("_shard_shared_gate", "_shard_shared_up",
                          "_shard_shared_down")))
    hf_moe["feed_forward.router.weight"] = R([NE, E])
    text = dict(HF_CFG, num_local_experts=NE, interleave_moe_layer_step=2)
    cfg = {"text_config": text, "vision_config": {"hidden_size": E}}
    hf_top = {"language_model.model.embed_tokens.weight": R([V, E]),
              "language_model.model.norm.weight": R([E]),
              "language_model.lm_head.weight": R([V, E]),
              "vision_model.model.layers.0.mlp.fc1.weight": R([E, E])}
    return {"mlc": ("model.layers.", [mlc_dense, mlc_moe], mlc_llama_top(),
                    {"model_type": "llama4", "model_config": cfg}),
            "hf": ("language_model.model.layers.", [hf_dense, hf_moe], hf_top,
                   dict(cfg, architectures=["Llama4ForConditionalGeneration"],
                        model_type="llama4"))}


def arch_gpt2():
    # gpt2_model.py GPT2Block._set_tp (MLC Linear [out, in]); HF Conv1D
    # [in, out] cuts the other dim.
    mlc = {"attn.c_attn.weight": X([3 * E, E], "_shard_qkv_weight", 0, MHA),
           "attn.c_attn.bias": X([3 * E], "_shard_qkv_bias", 0, MHA),
           "attn.c_proj.weight": X([E, E], "_shard_attn_c_proj", 1),
           "attn.c_proj.bias": S([E]),
           "mlp.c_fc.weight": X([4 * E, E], "_shard_c_fc_weight", 0),
           "mlp.c_fc.bias": X([4 * E], "_shard_c_fc_bias", 0),
           "mlp.c_proj.weight": X([E, 4 * E], "_shard_mlp_c_proj", 1),
           "mlp.c_proj.bias": S([E]),
           "ln_1.weight": R([E]), "ln_1.bias": R([E])}
    hf = {"attn.c_attn.weight": X([E, 3 * E], "_shard_c_attn_weight", 1, MHA),
          "attn.c_attn.bias": X([3 * E], "_shard_c_attn_bias", 0, MHA),
          "attn.c_proj.weight": X([E, E], "_shard_c_proj", 0),
          "attn.c_proj.bias": S([E]),
          "mlp.c_fc.weight": X([E, 4 * E], "_shard_mlp_c_fc_weight", 1),
          "mlp.c_fc.bias": X([4 * E], "_shard_mlp_c_fc_bias", 0),
          "mlp.c_proj.weight": X([4 * E, E], "_shard_mlp_c_proj", 0),
          "mlp.c_proj.bias": S([E]),
          "ln_1.weight": R([E]), "attn.bias": R([1, 1, 8, 8])}
    cfg = {"n_embd": E, "n_head": H, "n_inner": None, "n_layer": LAYERS,
           "vocab_size": V}
    top = {"transformer.wte.weight": R([V, E]),
           "transformer.wpe.weight": R([32, E]),
           "transformer.ln_f.weight": R([E])}
    return {"mlc": ("transformer.h.", same_layers(mlc),
                    dict(top, **{"lm_head.weight": R([V, E])}),
                    {"model_type": "gpt2", "model_config": cfg}),
            "hf": ("transformer.h.", same_layers(hf), top,
                   dict(cfg, architectures=["GPT2LMHeadModel"],
                        model_type="gpt2"))}


def arch_gpt_neox():
    # gpt_neox_model.py GPTNeoXLayer._set_tp; HF interleaves q/k/v per
    # head (no segs, its own func_name).
    def layer(qkv_w, qkv_b, segs):
        return {
            "attention.query_key_value.weight": X([3 * E, E], qkv_w, 0, segs),
            "attention.query_key_value.bias": X([3 * E], qkv_b, 0, segs),
            "attention.dense.weight": X([E, E], "_shard_dense", 1),
            "attention.dense.bias": S([E]),
            "mlp.dense_h_to_4h.weight": X([4 * E, E],
                                          "_shard_dense_h_to_4h_weight", 0),
            "mlp.dense_h_to_4h.bias": X([4 * E], "_shard_dense_h_to_4h_bias",
                                        0),
            "mlp.dense_4h_to_h.weight": X([E, 4 * E], "_shard_dense_4h_to_h",
                                          1),
            "mlp.dense_4h_to_h.bias": S([E]),
            "input_layernorm.weight": R([E]),
            "input_layernorm.bias": R([E])}
    cfg = {"hidden_size": E, "num_attention_heads": H,
           "intermediate_size": 4 * E, "num_hidden_layers": LAYERS,
           "vocab_size": V}
    top = {"gpt_neox.embed_in.weight": R([V, E]),
           "gpt_neox.final_layer_norm.weight": R([E]),
           "embed_out.weight": R([V, E])}
    return {"mlc": ("gpt_neox.layers.",
                    same_layers(layer("_shard_qkv_weight", "_shard_qkv_bias",
                                      MHA)), top,
                    {"model_type": "gpt_neox", "model_config": cfg}),
            "hf": ("gpt_neox.layers.",
                   same_layers(layer("_shard_qkv_interleaved_weight",
                                     "_shard_qkv_interleaved_bias", None)),
                   top, dict(cfg, architectures=["GPTNeoXForCausalLM"],
                             model_type="gpt_neox"))}


def mlc_only(mtype, prefix, layers, top, cfg=None):
    return {"mlc": (prefix, layers, top,
                    {"model_type": mtype, "model_config": cfg or
                     dict(HF_CFG)})}


def with_hf(d, hf_arch, prefix, layers, top, cfg=None):
    """Adds the HF checkpoint to an mlc_only() description."""
    c = dict(cfg or d["mlc"][3]["model_config"], architectures=[hf_arch],
             model_type=d["mlc"][3]["model_type"])
    d["hf"] = (prefix, layers, top, c)
    return d


def arch_gpt_j():
    # gpt_j_model.py GPTJBlock._set_tp.  Deviation: fc_in.bias sharded
    # with fc_in.weight; fc_out.bias scale_bias.
    layer = {"attn.c_attn.weight": X([3 * E, E], "_shard_qkv_weight", 0, MHA),
             "attn.out_proj.weight": X([E, E], "_shard_o", 1),
             "mlp.fc_in.weight": X([4 * E, E], "_shard_c_fc_weight", 0),
             "mlp.fc_in.bias": X([4 * E], "_shard_c_fc_bias", 0),
             "mlp.fc_out.weight": X([E, 4 * E], "_shard_mlp_c_proj", 1),
             "mlp.fc_out.bias": S([E]), "ln_1.weight": R([E])}
    top = {"transformer.wte.weight": R([V, E]), "lm_head.weight": R([V, E]),
           "lm_head.bias": R([V])}
    d = mlc_only("gptj", "transformer.h.", same_layers(layer), top,
                 {"n_embd": E, "n_head": H, "n_inner": None})
    hf = {k: v for k, v in layer.items() if not k.startswith("attn.")}
    hf.update({"attn.q_proj.weight": X([Q, E], "_shard_q", 0),
               "attn.k_proj.weight": X([Q, E], "_shard_k", 0),
               "attn.v_proj.weight": X([Q, E], "_shard_v", 0),
               "attn.out_proj.weight": X([E, Q], "_shard_o", 1),
               "attn.bias": R([1, 1, 8, 8]), "attn.masked_bias": R([1])})
    return with_hf(d, "GPTJForCausalLM", "transformer.h.", same_layers(hf),
                   top)


def arch_phi():
    # phi_model.py PhiParallelBlock._set_tp (MLC names transformer.h.{i})
    layer = {"mixer.Wqkv.weight": X([Q + 2 * K, E], "_shard_qkv_weight", 0,
                                    QKV),
             "mixer.Wqkv.bias": X([Q + 2 * K], "_shard_qkv_bias", 0, QKV),
             "mixer.out_proj.weight": X([E, Q], "_shard_o_weight", 1),
             "mixer.out_proj.bias": S([E]),
             "mlp.fc1.weight": X([4 * E, E], "_shard_mlp_fc1_weight", 0),
             "mlp.fc1.bias": X([4 * E], "_shard_mlp_fc1_bias", 0),
             "mlp.fc2.weight": X([E, 4 * E], "_shard_mlp_fc2_weight", 1),
             "mlp.fc2.bias": S([E]), "ln.weight": R([E])}
    cfg = {"hidden_size": E, "num_attention_heads": H,
           "num_key_value_heads": KV, "intermediate_size": None}
    d = mlc_only("phi", "transformer.h.", same_layers(layer),
                 {"transformer.embd.wte.weight": R([V, E]),
                  "lm_head.linear.weight": R([V, E]),
                  "lm_head.ln.weight": R([E])}, cfg)
    # HF phi-2 layout: q/k/v apart, self_attn.dense
    hf = {k: v for k, v in layer.items() if k.startswith("mlp.")}
    hf.update(hf_attn(bias=True, o="dense"))
    hf["self_attn.dense.weight"] = X([E, Q], "_shard_o_weight", 1)
    hf.update({"self_attn.dense.bias": S([E]),
               "input_layernorm.bias": R([E])})
    del hf["post_attention_layernorm.weight"]
    return with_hf(d, "PhiForCausalLM", "model.layers.", same_layers(hf),
                   {"model.embed_tokens.weight": R([V, E]),
                    "model.final_layernorm.weight": R([E]),
                    "model.final_layernorm.bias": R([E]),
                    "lm_head.weight": R([V, E]), "lm_head.bias": R([V])})


def fused_qkv_layer(qkv, func_w, segs, o, func_o, up, func_up, down,
                    func_down, extra=None):
    d = {qkv + ".weight": X([sum(segs), E], func_w, 0, segs),
         o + ".weight": X([E, segs[0]], func_o, 1),
         up + ".weight": X([2 * I, E], func_up, 0, [I, I]),
         down + ".weight": X([E, I], func_down, 1)}
    d.update(extra or {})
    return d


def arch_internlm2():
    # internlm2_model.py InternLM2DecoderLayer._set_tp
    layer = fused_qkv_layer("attention.wqkv", "_shard_qkv_weight", QKV,
                            "attention.wo", "_shard_o",
                            "feed_forward.gate_up_proj", "_shard_mlp_up",
                            "feed_forward.w2", "_shard_mlp_down",
                            {"attention_norm.weight": R([E])})
    top = {"model.tok_embeddings.weight": R([V, E]),
           "output.weight": R([V, E])}
    d = mlc_only("internlm2", "model.layers.", same_layers(layer), top)
    # HF wqkv interleaves per kv group: whole groups per rank, no segs.
    hf = {"attention.wqkv.weight": X([Q + 2 * K, E],
                                     "_shard_qkv_grouped_weight", 0),
          "attention.wo.weight": X([E, Q], "_shard_o", 1),
          "feed_forward.w1.weight": X([I, E], "_shard_gate", 0),
          "feed_forward.w3.weight": X([I, E], "_shard_up", 0),
          "feed_forward.w2.weight": X([E, I], "_shard_mlp_down", 1),
          "attention_norm.weight": R([E]), "ffn_norm.weight": R([E])}
    return with_hf(d, "InternLM2ForCausalLM", "model.layers.",
                   same_layers(hf), top)


def arch_internlm():
    # internlm_model.py InternLMDecoderLayer._set_tp.  Deviation: o_proj
    # .bias scale_bias (MLC cuts it along dim 0).
    layer = fused_qkv_layer("self_attn.wqkv_pack", "_shard_qkv_weight", MHA,
                            "self_attn.o_proj", "_shard_o_weight",
                            "mlp.gate_up_proj", "_shard_mlp_gate_up",
                            "mlp.down_proj", "_shard_mlp_down_proj",
                            {"self_attn.wqkv_pack.bias":
                             X([3 * Q], "_shard_qkv_bias", 0, MHA),
                             "self_attn.o_proj.bias": S([E])})
    d = mlc_only("internlm", "model.layers.", same_layers(layer),
                 mlc_llama_top(), dict(HF_CFG, num_key_value_heads=H))
    hf = hf_attn(bias=True, k=Q)
    hf.update(hf_mlp())
    hf["self_attn.o_proj.bias"] = S([E])
    return with_hf(d, "InternLMForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_baichuan():
    # baichuan_model.py BaichuanDecoderLayer._set_tp
    layer = fused_qkv_layer("self_attn.W_pack", "_shard_qkv_weight", MHA,
                            "self_attn.o_proj", "_shard_o",
                            "mlp.gate_up_proj", "_shard_mlp_gate_up",
                            "mlp.down_proj", "_shard_mlp_down_proj")
    d = mlc_only("baichuan", "model.layers.", same_layers(layer),
                 mlc_llama_top(), dict(HF_CFG, num_key_value_heads=H))
    # HF's W_pack is already [q; k; v]: MLC's tensor and func_name.
    hf = {"self_attn.W_pack.weight": X([3 * Q, E], "_shard_qkv_weight", 0,
                                       MHA),
          "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
          "input_layernorm.weight": R([E])}
    hf.update(hf_mlp(names=("_shard_gate", "_shard_up",
                            "_shard_mlp_down_proj")))
    return with_hf(d, "BaichuanForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_chatglm3():
    # chatglm3_model.py GLMBlock._set_tp.  Deviation: dense_h_to_4h holds
    # [gate; up] (swiglu chunks it): segs [I, I].
    layer = fused_qkv_layer("self_attention.query_key_value",
                            "_shard_qkv_weight", QKV,
                            "self_attention.dense", "_shard_dense_weight",
                            "mlp.dense_h_to_4h",
                            "_shard_dense_h_to_4h_weight",
                            "mlp.dense_4h_to_h", "_shard_dense_4h_to_h",
                            {"self_attention.query_key_value.bias":
                             X([Q + 2 * K], "_shard_qkv_bias", 0, QKV),
                             "input_layernorm.weight": R([E])})
    cfg = {"hidden_size": E, "num_attention_heads": H,
           "multi_query_group_num": KV, "kv_channels": D,
           "ffn_hidden_size": I, "num_layers": LAYERS}
    top = {"transformer.embedding.word_embeddings.weight": R([V, E]),
           "transformer.encoder.final_layernorm.weight": R([E]),
           "transformer.output_layer.weight": R([V, E])}
    d = mlc_only("chatglm", "transformer.encoder.layers.",
                 same_layers(layer), top, cfg)
    # HF and MLC share the names and layouts.
    return with_hf(d, "ChatGLMModel", "transformer.encoder.layers.",
                   same_layers(layer), top)


def arch_starcoder2():
    # starcoder2_model.py Starcoder2DecoderLayer._set_tp.  Deviation:
    # o_proj.bias and c_proj.bias scale_bias.
    layer = {"self_attn.wqkv_pack.weight": X([Q + 2 * K, E],
                                             "_shard_qkv_weight", 0, QKV),
             "self_attn.wqkv_pack.bias": X([Q + 2 * K], "_shard_qkv_bias", 0,
                                           QKV),
             "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
             "self_attn.o_proj.bias": S([E]),
             "mlp.c_fc.weight": X([I, E], "_shard_c_fc_weight", 0),
             "mlp.c_fc.bias": X([I], "_shard_c_fc_bias", 0),
             "mlp.c_proj.weight": X([E, I], "_shard_mlp_c_proj", 1),
             "mlp.c_proj.bias": S([E]),
             "input_layernorm.weight": R([E]),
             "input_layernorm.bias": R([E])}
    d = mlc_only("starcoder2", "model.layers.", same_layers(layer),
                 mlc_llama_top())
    hf = {k: v for k, v in layer.items() if not k.startswith("self_attn.")}
    hf.update(hf_attn(bias=True))
    hf["self_attn.o_proj.bias"] = S([E])
    return with_hf(d, "Starcoder2ForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_cohere():
    # cohere_model.py CohereDecoderLayer._set_tp.  Deviation: gate_proj
    # and up_proj unfused, so no segs.
    layer = {"self_attn.qkv_proj.weight": X([Q + 2 * K, E], "_shard_qkv", 0,
                                            QKV),
             "self_attn.out_proj.weight": X([E, Q], "_shard_o", 1),
             "mlp.gate_proj.weight": X([I, E], "_shard_mlp_gate", 0),
             "mlp.up_proj.weight": X([I, E], "_shard_mlp_up", 0),
             "mlp.down_proj.weight": X([E, I], "_shard_mlp_down", 1),
             "input_layernorm.weight": R([E])}
    d = mlc_only("cohere", "model.layers.", same_layers(layer),
                 mlc_llama_top())
    hf = hf_attn()
    hf.update(hf_mlp())
    return with_hf(d, "CohereForCausalLM", "model.layers.", same_layers(hf),
                   mlc_llama_top())


def arch_nemotron():
    # nemotron_model.py NemotronDecoderLayer._set_tp.  Deviation: up_proj
    # column-parallel (dim 0), not dim 1.
    layer = {"self_attn.qkv_proj.weight": X([Q + 2 * K, E], "_shard_qkv", 0,
                                            QKV),
             "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
             "mlp.up_proj.weight": X([I, E], "_shard_mlp_up", 0),
             "mlp.down_proj.weight": X([E, I], "_shard_mlp_down", 1),
             "input_layernorm.weight": R([E]),
             "input_layernorm.bias": R([E])}
    d = mlc_only("nemotron", "model.layers.", same_layers(layer),
                 mlc_llama_top())
    hf = hf_attn()
    hf.update({"mlp.up_proj.weight": X([I, E], "_shard_mlp_up", 0),
               "mlp.down_proj.weight": X([E, I], "_shard_mlp_down", 1),
               "input_layernorm.bias": R([E])})
    return with_hf(d, "NemotronForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_stable_lm():
    # stablelm_model.py StableLMDecoderLayer._set_tp
    layer = fused_qkv_layer("self_attn.qkv_proj", "_shard_qkv_weight", QKV,
                            "self_attn.o_proj", "_shard_o",
                            "mlp.gate_up_proj", "_shard_mlp_up",
                            "mlp.down_proj", "_shard_mlp_down",
                            {"self_attn.qkv_proj.bias":
                             X([Q + 2 * K], "_shard_qkv_bias", 0, QKV),
                             "input_layernorm.weight": R([E]),
                             "input_layernorm.bias": R([E])})
    d = mlc_only("stablelm", "model.layers.", same_layers(layer),
                 mlc_llama_top())
    hf = hf_attn(bias=True)
    hf.update(hf_mlp())
    hf["input_layernorm.bias"] = R([E])
    return with_hf(d, "StableLmForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_minicpm():
    # minicpm_model.py MiniCPMDecoderLayer._set_tp (num_experts 0)
    layer = fused_qkv_layer("self_attn.wqkv_pack", "_shard_qkv_weight", QKV,
                            "self_attn.o_proj", "_shard_o",
                            "mlp.gate_up_proj", "_shard_mlp_up",
                            "mlp.down_proj", "_shard_mlp_down")
    d = mlc_only("minicpm", "model.layers.", same_layers(layer),
                 mlc_llama_top(), dict(HF_CFG, num_experts=0))
    hf = hf_attn()
    hf.update(hf_mlp())
    return with_hf(d, "MiniCPMForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_minicpm_moe():
    # minicpm_model.py MiniCPMDecoderLayer._set_tp with num_experts > 0:
    # e1_e3 [experts, 2I, E] dim 1, e2 [experts, E, I] dim 2.
    layer = {"self_attn.wqkv_pack.weight": X([Q + 2 * K, E],
                                             "_shard_qkv_weight", 0, QKV),
             "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1),
             "mlp.e1_e3.weight": X([NE, 2 * I, E], "_shard_mlp_up", 1,
                                   [I, I]),
             "mlp.e2.weight": X([NE, E, I], "_shard_mlp_down", 2),
             "mlp.gate.weight": R([NE, E])}
    cfg = dict(HF_CFG, num_experts=NE, num_experts_per_tok=1)
    d = mlc_only("minicpm", "model.layers.", same_layers(layer),
                 mlc_llama_top(), cfg)
    hf = hf_attn()
    for e in range(NE):
        b = "mlp.experts.%d." % e
        hf.update({b + "w1.weight": X([I, E], "_shard_w1", 0),
                   b + "w3.weight": X([I, E], "_shard_w3", 0),
                   b + "w2.weight": X([E, I], "_shard_w2", 1)})
    hf["mlp.gate.weight"] = R([NE, E])
    return with_hf(d, "MiniCPMForCausalLM", "model.layers.",
                   same_layers(hf), mlc_llama_top())


def arch_deepseek():
    # deepseek_model.py DeepseekDecoderLayer._set_tp: layer 0 dense, layer
    # 1 MoE.  Deviation: the MoE layer's shared experts are sharded.
    attn = {"self_attn.wqkv_pack.weight": X([Q + 2 * K, E],
                                            "_shard_qkv_weight", 0, QKV),
            "self_attn.o_proj.weight": X([E, Q], "_shard_o", 1)}
    dense = dict(attn, **mlc_mlp())
    moe = dict(attn, **mlc_stacked("_shard_mlp_up", "_shard_mlp_down"))
    moe.update({
        "mlp.shared_experts.gate_up_proj.weight":
            X([2 * SI, E], "_shard_shared_experts_gate_up", 0, [SI, SI]),
        "mlp.shared_experts.down_proj.weight":
            X([E, SI], "_shard_shared_experts_down", 1)})
    cfg = dict(HF_CFG, moe_intermediate_size=MI, n_shared_experts=2,
               n_routed_experts=NE, first_k_dense_replace=1, moe_layer_freq=1)
    d = mlc_only("deepseek", "model.layers.", [dense, moe],
                 mlc_llama_top(), cfg)
    hf_dense = dict(hf_attn(), **hf_mlp())
    hf_moe = dict(hf_attn(), **hf_experts())
    hf_moe.update(hf_mlp("mlp.shared_experts", SI, ("_shard_shared_gate",
                                                    "_shard_shared_up",
                                                    "_shard_shared_down")))
    hf_moe["mlp.gate.weight"] = R([NE, E])
    return with_hf(d, "DeepseekForCausalLM", "model.layers.",
                   [hf_dense, hf_moe], mlc_llama_top())


def arch_qwen():
    # qwen_model.py QWenBlock._set_tp: intermediate_size is both halves.
    layer = {"attn.c_attn.weight": X([3 * Q, E], "_shard_qkv_weight", 0, MHA),
             "attn.c_attn.bias": X([3 * Q], "_shard_qkv_bias", 0, MHA),
             "attn.c_proj.weight": X([E, Q], "_shard_attn_c_proj", 1),
             "mlp.gate_up_proj.weight": X([2 * I, E],
                                          "_shard_mlp_gate_up_proj", 0,
                                          [I, I]),
             "mlp.c_proj.weight": X([E, I], "_shard_mlp_c_proj", 1),
             "ln_1.weight": R([E])}
    cfg = {"hidden_size": E, "num_attention_heads": H, "kv_channels": D,
           "intermediate_size": 2 * I}
    top = {"transformer.wte.weight": R([V, E]),
           "transformer.ln_f.weight": R([E]), "lm_head.weight": R([V, E])}
    d = mlc_only("qwen", "transformer.h.", same_layers(layer), top, cfg)
    hf = {k: v for k, v in layer.items() if k != "mlp.gate_up_proj.weight"}
    hf.update({"mlp.w1.weight": X([I, E], "_shard_mlp_w1", 0),
               "mlp.w2.weight": X([I, E], "_shard_mlp_w2", 0),
               "ln_2.weight": R([E])})
    return with_hf(d, "QWenLMHeadModel", "transformer.h.", same_layers(hf),
                   top)


def arch_llava():
    # llava_model.py: a llama (LlamaDecoderLayer._set_tp) under
    # language_model., the CLIP tower and projector unsharded.
    d = llama_like("LlavaForConditionalGeneration", "llava",
                   "language_model.model.layers.")
    top = dict(mlc_llama_top("language_model.model."))
    del top["lm_head.weight"]
    top.update({"language_model.lm_head.weight": R([V, E]),
                "vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight":
                    R([E, E]),
                "multi_modal_projector.linear_1.weight": R([E, E])})
    cfg = {"text_config": dict(HF_CFG), "vision_config": {"hidden_size": E}}
    for fmt in ("hf", "mlc"):
        prefix, layers, _, c = d[fmt]
        c = ({"model_type": "llava", "model_config": cfg} if fmt == "mlc"
             else dict(cfg, architectures=c["architectures"],
                       model_type="llava"))
        d[fmt] = (prefix, layers, top, c)
    return d


ARCHS = {
    "llama": lambda: llama_like("LlamaForCausalLM", "llama"),
    "mistral": lambda: llama_like("MistralForCausalLM", "mistral"),
    "gemma": lambda: llama_like("GemmaForCausalLM", "gemma"),
    "gemma2": lambda: llama_like("Gemma2ForCausalLM", "gemma2"),
    "olmo": lambda: llama_like("OlmoForCausalLM", "olmo"),
    "olmo2": lambda: llama_like("Olmo2ForCausalLM", "olmo2"),
    "orion": lambda: llama_like("OrionForCausalLM", "orion"),
    "ministral3": lambda: llama_like("Mistral3ForConditionalGeneration",
                                     "ministral3"),
    "llava": arch_llava,
    "qwen2": arch_qwen2, "qwen3": arch_qwen3, "qwen2_5_vl": arch_qwen2_5_vl,
    "phi3": arch_phi3, "mixtral": arch_mixtral,
    "qwen2_moe": arch_qwen2_moe, "qwen3_moe": arch_qwen3_moe,
    "deepseek_v2": arch_deepseek_v2, "gemma3": arch_gemma3,
    "llama4": arch_llama4, "gpt2": arch_gpt2, "gpt_neox": arch_gpt_neox,
    "gpt_j": arch_gpt_j, "phi": arch_phi, "internlm2": arch_internlm2,
    "internlm": arch_internlm, "baichuan": arch_baichuan,
    "chatglm3": arch_chatglm3, "starcoder2": arch_starcoder2,
    "cohere": arch_cohere, "nemotron": arch_nemotron,
    "stable_lm": arch_stable_lm, "minicpm": arch_minicpm,
    "deepseek": arch_deepseek, "qwen": arch_qwen,
    # Variants: the preset is the name before "+".
    "minicpm+moe": arch_minicpm_moe,
    "deepseek_v2+q_proj": arch_deepseek_v2_q_proj,
    "deepseek_v2+mtp": arch_deepseek_v3_mtp,
    "gemma3+new": arch_gemma3_new,
}


def tensors_of(arch, fmt):
    """name -> (shape, expectation), checkpoint order; and the config."""
    prefix, layers, top, cfg = ARCHS[arch]()[fmt]
    out = {}
    for i, layer in enumerate(layers):
        for suffix, v in layer.items():
            out["%s%d.%s" % (prefix, i, suffix)] = v
    out.update(top)
    return out, cfg


def as_plan(tensors):
    """The expectations as a plan file with one exact rule a tensor."""
    rules = []
    for name, (shape, exp) in tensors.items():
        if exp == "R":
            rules.append({"match": name, "replicate": True})
        elif exp == "S":
            rules.append({"match": name, "scale_bias": True})
        else:
            r = {"match": name, "name": exp[0], "dim": exp[1]}
            if exp[2] is not None:
                r["segs"] = exp[2]
            rules.append(r)
    return {"rules": rules}


def _bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def write_mlc(d, tensors, rng):
    """tensor-cache.json as MLC's convert_weight writes it: float32 params
    stored bf16 under format f32-to-bf16, one params shard."""
    blob, recs = bytearray(), []
    for name, (shape, _) in tensors.items():
        data = _bf16(rng.standard_normal(shape).astype(np.float32))
        recs.append({"name": name, "shape": shape, "dtype": "float32",
                     "format": "f32-to-bf16", "nbytes": len(data),
                     "byteOffset": len(blob)})
        blob += data
    with open(os.path.join(d, "params_shard_0.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(d, "tensor-cache.json"), "w") as f:
        json.dump({"metadata": {"ParamSize": len(recs), "ParamBytes":
                                len(blob), "BitsPerParam": 16},
                   "records": [{"dataPath": "params_shard_0.bin",
                                "format": "raw-shard", "nbytes": len(blob),
                                "records": recs}]}, f)


def edit(tensors, cfg, opts):
    """Applies --drop NAME, --add NAME=D0xD1, --set KEY=JSON."""
    for i in range(0, len(opts), 2):
        key, val = opts[i], opts[i + 1]
        if key == "--drop":
            del tensors[val]
        elif key == "--add":
            name, dims = val.split("=")
            tensors[name] = ([int(x) for x in dims.split("x")], "R")
        elif key == "--set":
            k, v = val.split("=", 1)
            target = cfg.get("model_config", cfg)
            target = target.get("text_config", target)
            target[k] = json.loads(v)
        else:
            raise SystemExit("unknown option " + key)


def write(arch, fmt, d, opts=()):
    global NE
    opts = list(opts)
    while "--experts" in opts[::2]:  # routed experts per MoE layer
        k = opts[::2].index("--experts") * 2
        NE = int(opts[k + 1])
        del opts[k:k + 2]
    tensors, cfg = tensors_of(arch, fmt)
    edit(tensors, cfg, opts)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(len(arch) * 7 + len(fmt))
    if fmt == "mlc":
        write_mlc(d, tensors, rng)
        cfg = dict(cfg, tensor_parallel_shards=1, quantization="q0f32")
        cname = "mlc-chat-config.json"
    else:
        npst.write(os.path.join(d, "model.safetensors"),
                   {n: rng.standard_normal(s).astype(np.float16)
                    for n, (s, _) in tensors.items()})
        cname = "config.json"
    with open(os.path.join(d, cname), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(d, "expect.json"), "w") as f:
        json.dump(tensors, f)
    with open(os.path.join(d, "plan.json"), "w") as f:
        json.dump(as_plan(tensors), f, indent=1)


def check_param(p, shape, exp, n):
    errs = []
    pre = p.get("preprocs") or []
    if exp in ("R", "S"):
        scale = 1.0 / n if exp == "S" else 1.0
        if p.get("shape") != shape or "dim" in p:
            errs.append("expected unsharded %r, found shape %r dim %r"
                        % (shape, p.get("shape"), p.get("dim")))
        if abs(p.get("bias_scale", -1) - scale) > 1e-12:
            errs.append("bias_scale %r, expected %r"
                        % (p.get("bias_scale"), scale))
        return errs
    func, dim, segs = exp
    want = list(shape)
    want[dim] //= n
    segs = segs or [shape[dim]]
    if p.get("shape") != want:
        errs.append("shape %r, expected %r" % (p.get("shape"), want))
    if p.get("dim") != dim:
        errs.append("dim %r, expected %d" % (p.get("dim"), dim))
    if p.get("segs") != [s // n for s in segs]:
        errs.append("segs %r, expected %r" % (p.get("segs"),
                                              [s // n for s in segs]))
    if n > 1 and [q.get("func_name") for q in pre] != [func]:
        errs.append("func_name %r, expected %r"
                    % ([q.get("func_name") for q in pre], func))
    for q in pre:
        if q.get("in_shape") != shape or q.get("out_shape") != [n] + want:
            errs.append("preproc %r, expected in %r out %r"
                        % (q, shape, [n] + want))
    if abs(p.get("bias_scale", -1) - 1.0) > 1e-12:
        errs.append("bias_scale %r" % p.get("bias_scale"))
    return errs


def check(plan_json, d, n):
    with open(plan_json) as f:
        got = json.load(f)
    with open(os.path.join(d, "expect.json")) as f:
        exp = json.load(f)
    errs = []
    params = {p["name"]: p for p in got.get("params", [])}
    if sorted(params) != sorted(exp):
        errs.append("tensors: got %r, expected %r"
                    % (sorted(set(params) ^ set(exp)), []))
    for name, (shape, e) in exp.items():
        if name in params:
            e = e if isinstance(e, str) else tuple(e)
            errs += ["%s: %s" % (name, m)
                     for m in check_param(params[name], shape, e, n)]
    for m in errs[:30]:
        print(m)
    return 1 if errs else 0


def combos():
    return [(a, f) for a in ARCHS for f in sorted(ARCHS[a]())]


def check_all(d):
    failed = 0
    for a, f in combos():
        for n in (1, 2, 4):
            path = os.path.join(d, "%s-%s" % (a, f), "plan%d.json" % n)
            name = "%s (%s) auto plan, %d shards" % (a, f, n)
            if not os.path.exists(path):
                continue
            with open(path) as fh:
                src = json.load(fh).get("plan", {}).get("source", "")
            want = "preset %s%s " % (a.split("+")[0],
                                     " [mlc names]" if f == "mlc" else "")
            errs = [] if src.startswith(want) else [
                "plan source %r, expected %r..." % (src, want)]
            import io
            import contextlib
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = check(path, os.path.dirname(path), n)
            if rc:
                errs += buf.getvalue().splitlines()
            print(("fail " if errs else "ok ") + name)
            for e in errs[:20]:
                print("# " + e)
            failed += bool(errs)
    return 1 if failed else 0


def main(argv):
    if argv[1:2] == ["list"]:
        for a, f in combos():
            print("%s %s" % (a, f))
        return 0
    if argv[1:2] == ["write"] and len(argv) >= 5 and len(argv) % 2 == 1:
        write(argv[2], argv[3], argv[4], argv[5:])
        return 0
    if argv[1:2] == ["write-all"] and len(argv) == 3:
        for a, f in combos():
            write(a, f, os.path.join(argv[2], "%s-%s" % (a, f)))
        return 0
    if argv[1:2] == ["check-all"] and len(argv) == 3:
        return check_all(argv[2])
    if argv[1:2] == ["check"] and len(argv) == 5:
        return check(argv[2], argv[3], int(argv[4]))
    print(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
