/* preset_tables.c - the rule tables of the built-in presets, one per
 * architecture and naming (Hugging Face checkpoints, MLC weight
 * directories).  Each MLC table is written from the `_set_tp` function of
 * the architecture's decoder layer in mlc-ai/mlc-llm
 * `python/mlc_llm/model/<arch>/<arch>_model.py` (names from the module
 * tree and `<arch>_loader.py`): the glob, dim, segments and func_name of
 * every `tp.ShardSingleDim`.  The HF tables shard the same tensors before
 * MLC's loader fuses them (q/k/v and gate/up separate), so they keep MLC's
 * func_name only where the tensor is the same one.
 *
 * Rules cover `.weight` and `.bias` only; quantized params (q_weight,
 * q_scale, weight_scale_inv) get theirs from the `.weight` rule in plan.c.
 * Row-parallel biases are `scale_bias` (DESIGN.md section 2).  Where MLC's
 * own rule cannot give a correct all-reducing engine its tensors, the
 * table follows what the engine needs and the comment says "MLC: ...".
 * Tensors a table does not name are replicated; but a 2-D tensor inside a
 * layer that no rule names is refused (presets.c), so routers, low-rank
 * and vision tensors are listed as `replicate`.  A layer tensor with a dim
 * of the heads' sizes (heads, kv heads, either times head_dim) delivered
 * whole while its layer's heads are cut is refused too, unless its
 * replicate rule says why it is whole (RW, the reason in the rule):
 * per-head norms and scales must be cut with their heads (Cohere's
 * q_norm / k_norm). */
#include "preset_tables.h"

#include "common.h"
#include "plan.h"

#define SH(m, n, d, s, r)                                                      \
  { m, TPL_RULE_SHARD, d, s, r, n, TPL_U_ANY, 0 }
/* A shard rule whose cut dim measures `u` (enum tpl__unit). */
#define SU(m, n, d, r, u)                                                      \
  { m, TPL_RULE_SHARD, d, TPL_SEGS_NONE, r, n, u, 0 }
/* SU's required kinds, short: every layer, or optional. */
#define EVERY TPL_REQ_LAYER
#define OPT TPL_REQ_NO
/* A weight every layer must have; an optional shard (a bias); a weight of
 * every dense or every MoE layer. */
#define W(m, n, d, s) SH(m, n, d, s, TPL_REQ_LAYER)
#define O(m, n, d, s) SH(m, n, d, s, TPL_REQ_NO)
#define WD(m, n, d, s) SH(m, n, d, s, TPL_REQ_DENSE)
#define WM(m, n, d, s) SH(m, n, d, s, TPL_REQ_MOE)
#define SC(m)                                                                  \
  { m, TPL_RULE_SCALE_BIAS, 0, 0, TPL_REQ_NO, NULL, TPL_U_ANY, 0 }
/* A scale_bias rule whose copies vLLM's loader zeroes on tp ranks but 0
 * (its policy under --bias-policy vllm is rank0). */
#define SC0(m)                                                                 \
  { m, TPL_RULE_SCALE_BIAS, 0, 0, TPL_REQ_NO, NULL, TPL_U_ANY, TPL_BIAS_RANK0 }
#define RP(m)                                                                  \
  { m, TPL_RULE_REPLICATE, 0, 0, TPL_REQ_NO, NULL, TPL_U_ANY, 0 }
/* Replicated although it may measure like the heads, for reason `why`. */
#define RW(m, why)                                                             \
  { m, TPL_RULE_REPLICATE, 0, 0, TPL_REQ_NO, why, TPL_U_ANY, 0 }
#define ROUTER "a router: every rank routes every token"
#define LOW_RANK "a low-rank projection of the hidden state, before the heads"

#define NONE TPL_SEGS_NONE
#define QKV TPL_SEGS_QKV
#define II TPL_SEGS_II
#define MOE TPL_SEGS_MOE
#define SHR TPL_SEGS_SHARED
#define EEE TPL_SEGS_EEE

/* ---- shared pieces ---- */

/* HF llama-style attention: q/k/v column-parallel, o row-parallel. */
#define HF_QKV_O(b)                                                            \
  SU(b ".q_proj.weight", "_shard_q", 0, EVERY, TPL_U_Q),                       \
      SU(b ".k_proj.weight", "_shard_k", 0, EVERY, TPL_U_KV),                  \
      SU(b ".v_proj.weight", "_shard_v", 0, EVERY, TPL_U_KV),                  \
      SU(b ".q_proj.bias", "_shard_q_bias", 0, OPT, TPL_U_Q),                  \
      SU(b ".k_proj.bias", "_shard_k_bias", 0, OPT, TPL_U_KV),                 \
      SU(b ".v_proj.bias", "_shard_v_bias", 0, OPT, TPL_U_KV)
#define HF_ATTN                                                                \
  HF_QKV_O("*.self_attn"),                                                     \
      SU("*.self_attn.o_proj.weight", "_shard_o", 1, EVERY, TPL_U_Q),          \
      SC("*.self_attn.o_proj.bias")

/* HF gate/up/down MLP under `b`, required in layers of kind `R` (enum
 * tpl__req), its features measuring `u` (enum tpl__unit). */
#define HF_MLP_U(R, b, u)                                                      \
  SU(b ".gate_proj.weight", "_shard_gate", 0, R, u),                           \
      SU(b ".up_proj.weight", "_shard_up", 0, R, u),                           \
      SU(b ".down_proj.weight", "_shard_down", 1, R, u),                       \
      SU(b ".gate_proj.bias", "_shard_gate_bias", 0, OPT, u),                  \
      SU(b ".up_proj.bias", "_shard_up_bias", 0, OPT, u),                      \
      SC(b ".down_proj.bias")
#define HF_MLP(R, b) HF_MLP_U(R, b, TPL_U_I)

/* Older HF checkpoints store each layer's rotary frequencies. */
#define ROTARY                                                                 \
  RW("*.rotary_emb.inv_freq", "rotary frequencies, shared by every head")
#define TAIL                                                                   \
  RP("*embed_tokens.weight"), RP("*lm_head.weight"), RP("*norm.weight"), ROTARY

/* MLC llama-style layer (llama_model.py LlamaDecoderLayer._set_tp): MLC
 * sets only the weights; a checkpoint with attention biases gets them
 * sharded / scaled as the weights need. */
#define MLC_QKV_O(b, o)                                                        \
  W(b ".qkv_proj.weight", "_shard_qkv", 0, QKV),                               \
      O(b ".qkv_proj.bias", "_shard_qkv_bias", 0, QKV),                        \
      W(b "." o ".weight", "_shard_o", 1, NONE), SC(b "." o ".bias")
#define MLC_MLP(R, b)                                                          \
  R(b ".gate_up_proj.weight", "_shard_mlp_up", 0, II),                         \
      R(b ".down_proj.weight", "_shard_mlp_down", 1, NONE)

/* MLC qwen2-style attention (qwen2_model.py QWen2DecoderLayer._set_tp). */
#define MLC_C_ATTN(rb)                                                         \
  W("*.self_attn.c_attn.weight", "_shard_qkv_weight", 0, QKV),                 \
      SH("*.self_attn.c_attn.bias", "_shard_qkv_bias", 0, QKV, rb),            \
      W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE)

/* ---- llama, mistral, gemma, gemma2, olmo, olmo2, orion, ministral3,
 * llava: llama_model.py LlamaDecoderLayer._set_tp (and the identical
 * _set_tp of mistral_model.py, gemma_model.py, gemma2_model.py,
 * olmo_model.py, olmo2_model.py, orion_model.py, ministral3_model.py;
 * llava_model.py wraps a llama under `language_model.`). ---- */

/* Vision towers (llava, gemma3, llama4, qwen2_5_vl) have layers of
 * their own, with names like the text model's: replicated, and listed
 * first so that the text model's rules never match them. */
#define TOWER "the vision tower's own layers, not cut"
#define VISION                                                                 \
  RW("*vision_tower.*", TOWER), RW("*vision_model.*", TOWER),                  \
      RW("*multi_modal_projector.*", TOWER), RW("visual.*", TOWER),            \
      RW("*.visual.*", TOWER)

/* q/k norms of the llama-like presets: [head_dim] (qwen3, gemma3) is one
 * norm every head shares; [heads x head_dim] (olmo2) is one RMSNorm over
 * all heads' q, which an engine applies to the all-gathered q (vLLM's
 * Olmo2Attention): whole either way. */
#define QK_WHY "one norm shared by the heads, or over all of them (olmo2)"
#define QK_NORMS                                                               \
  RW("*.self_attn.q_norm.weight", QK_WHY),                                     \
      RW("*.self_attn.k_norm.weight", QK_WHY)

static const struct tpl__ptmpl hf_llama[] = {
    VISION, HF_ATTN, QK_NORMS, HF_MLP(TPL_REQ_LAYER, "*.mlp"), TAIL,
};
static const struct tpl__ptmpl mlc_llama[] = {
    VISION, MLC_QKV_O("*.self_attn", "o_proj"), QK_NORMS, MLC_MLP(W, "*.mlp"),
    TAIL,
};

/* ---- mixtral: mixtral_model.py MixtralDecoderLayer._set_tp.  MLC stacks
 * experts: e1_e3 is [experts, 2I, E] (dim 1), e2 [experts, E, I] (dim 2).
 * The router is replicated: every rank routes every token. ---- */

static const struct tpl__ptmpl hf_mixtral[] = {
    HF_ATTN,
    SU("*.block_sparse_moe.experts.*.w1.weight", "_shard_w1", 0, EVERY,
       TPL_U_I),
    SU("*.block_sparse_moe.experts.*.w3.weight", "_shard_w3", 0, EVERY,
       TPL_U_I),
    SU("*.block_sparse_moe.experts.*.w2.weight", "_shard_w2", 1, EVERY,
       TPL_U_I),
    RW("*.block_sparse_moe.gate.weight", ROUTER),
    TAIL,
};
static const struct tpl__ptmpl mlc_mixtral[] = {
    MLC_QKV_O("*.self_attn", "o_proj"),
    W("*.moe.e1_e3.weight", "_shard_mlp_up", 1, II),
    W("*.moe.e2.weight", "_shard_mlp_down", 2, NONE),
    RW("*.moe.gate.weight", ROUTER),
    TAIL,
};

/* ---- phi3: phi3_model.py Phi3ParallelBlock._set_tp.  MLC names the
 * block transformer.h.{i} with mixer.qkv_proj / mixer.out_proj
 * (phi3_loader.py); HF already fuses qkv_proj and gate_up_proj, so the
 * HF tensors are MLC's and keep MLC's func_names. ---- */

static const struct tpl__ptmpl hf_phi3[] = {
    W("*.self_attn.qkv_proj.weight", "_shard_qkv", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    MLC_MLP(W, "*.mlp"),
    TAIL,
};
static const struct tpl__ptmpl mlc_phi3[] = {
    MLC_QKV_O("*.mixer", "out_proj"),
    MLC_MLP(W, "*.mlp"),
    RP("*embd.weight"),
    RP("*lm_head.weight"),
    RP("*norm.weight"),
    RP("*.ln.weight"),
};

/* ---- qwen2, qwen3, qwen2_5_vl: qwen2_model.py QWen2DecoderLayer._set_tp,
 * qwen3_model.py Qwen3DecoderLayer._set_tp (bias only with
 * attention_bias), qwen2_5_vl_model.py Qwen25VLDecoderLayer._set_tp (the
 * vision tower `visual.` replicated).  qwen3's q_norm / k_norm are
 * [head_dim], shared by every head: replicated.  Their HF names are
 * llama's (hf_llama). ---- */

static const struct tpl__ptmpl mlc_qwen2[] = {
    VISION,
    MLC_C_ATTN(TPL_REQ_LAYER),
    MLC_MLP(W, "*.mlp"),
    TAIL,
};
static const struct tpl__ptmpl mlc_qwen3[] = {
    MLC_C_ATTN(TPL_REQ_NO),
    QK_NORMS,
    MLC_MLP(W, "*.mlp"),
    TAIL,
};

/* ---- qwen2_moe: qwen2_moe_model.py Qwen2MoeDecoderLayer._set_tp (shared
 * expert [SI, SI], stacked experts moe_gate_up_proj dim 1 [MI, MI] and
 * moe_down_proj dim 2); qwen3_moe: qwen3_moe_model.py, no shared
 * expert.  Routers and the shared expert's gate are replicated. ---- */

#define HF_EXPERTS(R, b)                                                       \
  SU(b ".experts.*.gate_proj.weight", "_shard_expert_gate", 0, R, TPL_U_MOE),  \
      SU(b ".experts.*.up_proj.weight", "_shard_expert_up", 0, R, TPL_U_MOE),  \
      SU(b ".experts.*.down_proj.weight", "_shard_expert_down", 1, R,          \
         TPL_U_MOE)
/* A shared expert's gate/up/down under `b`. */
#define HF_SHARED(R, b)                                                        \
  SU(b ".gate_proj.weight", "_shard_shared_gate", 0, R, TPL_U_SHARED),         \
      SU(b ".up_proj.weight", "_shard_shared_up", 0, R, TPL_U_SHARED),         \
      SU(b ".down_proj.weight", "_shard_shared_down", 1, R, TPL_U_SHARED)
#define MLC_EXPERTS(up, down)                                                  \
  W("*.mlp.moe_gate_up_proj.weight", up, 1, MOE),                              \
      W("*.mlp.moe_down_proj.weight", down, 2, NONE)

static const struct tpl__ptmpl hf_qwen2_moe[] = {
    HF_ATTN,
    HF_EXPERTS(TPL_REQ_LAYER, "*.mlp"),
    HF_SHARED(TPL_REQ_LAYER, "*.mlp.shared_expert"),
    RW("*.mlp.gate.weight", ROUTER),
    RW("*.mlp.shared_expert_gate.weight", ROUTER),
    TAIL,
};
static const struct tpl__ptmpl mlc_qwen2_moe[] = {
    MLC_C_ATTN(TPL_REQ_LAYER),
    W("*.mlp.shared_expert.gate_up_proj.weight", "_shard_shared_mlp_up", 0,
      SHR),
    W("*.mlp.shared_expert.down_proj.weight", "_shard_shared_mlp_down", 1,
      NONE),
    MLC_EXPERTS("_shard_moe_mlp_up", "_shard_moe_mlp_down"),
    RW("*.mlp.gate.weight", ROUTER),
    RW("*.mlp.shared_expert_gate.weight", ROUTER),
    TAIL,
};
static const struct tpl__ptmpl hf_qwen3_moe[] = {
    HF_ATTN,
    QK_NORMS,
    HF_EXPERTS(TPL_REQ_LAYER, "*.mlp"),
    RW("*.mlp.gate.weight", ROUTER),
    TAIL,
};
static const struct tpl__ptmpl mlc_qwen3_moe[] = {
    MLC_C_ATTN(TPL_REQ_NO),
    QK_NORMS,
    MLC_EXPERTS("_shard_moe_mlp_up", "_shard_moe_mlp_down"),
    RW("*.mlp.gate.weight", ROUTER),
    TAIL,
};

/* ---- deepseek_v2 / v3: deepseek_v2_model.py DeepseekV2DecoderLayer
 * ._set_tp.  Latent attention: q_proj (or q_b_proj with q_lora_rank),
 * kv_b_proj, w_uk, w_uv by heads (dim 0), o_proj dim 1; the low-rank
 * q_a_proj / kv_a_proj_with_mqa are replicated.  Layers below
 * first_k_dense_replace are dense (mlp.gate_up_proj), the rest MoE
 * (shared experts, stacked experts, router). ---- */

#define DS_ATTN                                                                \
  O("*.self_attn.q_proj.weight", "_shard_q_weight", 0, NONE),                  \
      O("*.self_attn.q_b_proj.weight", "_shard_q_b_weight", 0, NONE),          \
      W("*.self_attn.kv_b_proj.weight", "_shard_kv_b_weight", 0, NONE),        \
      W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),                     \
      RW("*.self_attn.q_a_proj.weight", LOW_RANK),                             \
      RW("*.self_attn.kv_a_proj_with_mqa.weight", LOW_RANK),                   \
      RW("*.self_attn.q_a_layernorm.weight", LOW_RANK),                        \
      RW("*.self_attn.kv_a_layernorm.weight", LOW_RANK)

/* MLC DeepSeek's shared experts (v1, v2, v3). */
#define MLC_DS_SHARED                                                          \
  WM("*.mlp.shared_experts.gate_up_proj.weight",                               \
     "_shard_shared_experts_gate_up", 0, SHR),                                 \
      WM("*.mlp.shared_experts.down_proj.weight",                              \
         "_shard_shared_experts_down", 1, NONE)

/* HF DeepSeek MLPs (v1, v2, v3): experts and shared experts in MoE
 * layers, gate/up/down in dense ones. */
#define HF_DS_MLP                                                              \
  HF_EXPERTS(TPL_REQ_MOE, "*.mlp"),                                            \
      HF_SHARED(TPL_REQ_MOE, "*.mlp.shared_experts"),                          \
      RW("*.mlp.gate.weight", ROUTER),                                         \
      RW("*.mlp.gate.e_score_correction_bias", ROUTER),                        \
      HF_MLP(TPL_REQ_DENSE, "*.mlp"), TAIL

/* DeepSeek-V3's multi-token-prediction layers (num_hidden_layers ..
 * + num_nextn_predict_layers - 1), loaded as vLLM's DeepSeekMTP loads
 * them (vllm/model_executor/models/deepseek_mtp.py, 03356f8c): the
 * decoder block like any MoE layer's; eh_proj a plain nn.Linear, whole
 * on every rank; enorm / hnorm / shared_head.norm norms (TAIL's
 * *norm.weight); shared_head.head and the layer's embed_tokens the
 * vocabulary tables, whole here as lm_head and the embeddings are. */
#define MTP_EH "MTP's eh_proj: a plain linear, whole in vLLM's DeepSeekMTP"
#define MTP_VOCAB "MTP's vocabulary table: whole, as lm_head"
#define HF_DS_MTP                                                              \
  RW("model.layers.*.eh_proj.weight", MTP_EH),                                 \
      RW("model.layers.*.shared_head.head.weight", MTP_VOCAB),                 \
      RW("model.layers.*.embed_tokens.weight", MTP_VOCAB)

static const struct tpl__ptmpl hf_deepseek_v2[] = {
    HF_DS_MTP,
    DS_ATTN,
    HF_DS_MLP,
};
static const struct tpl__ptmpl mlc_deepseek_v2[] = {
    DS_ATTN,
    W("*.self_attn.w_uk", "_shard_kv_b_weight_w_uk", 0, NONE),
    W("*.self_attn.w_uv", "_shard_kv_b_weight_w_uv", 0, NONE),
    /* Block-scale fp8 (deepseek_v2_loader.py): the scales of w_uk / w_uv
     * are [heads, ., .] too; they have no `.weight` to derive from. */
    O("*.self_attn.w_uk_scale_inv", "_shard_kv_b_weight_w_uk_scale_inv", 0,
      NONE),
    O("*.self_attn.w_uv_scale_inv", "_shard_kv_b_weight_w_uv_scale_inv", 0,
      NONE),
    MLC_DS_SHARED,
    WM("*.mlp.moe_gate_up_proj.weight", "_shard_moe_gate_up", 1, MOE),
    WM("*.mlp.moe_down_proj.weight", "_shard_moe_mlp_down", 2, NONE),
    RW("*.mlp.gate.weight", ROUTER),
    RW("*.mlp.e_score_correction_bias", ROUTER),
    WD("*.mlp.gate_up_proj.weight", "_shard_gate_up", 0, II),
    WD("*.mlp.down_proj.weight", "_shard_down", 1, NONE),
    TAIL,
};

/* ---- deepseek (v1): deepseek_model.py DeepseekDecoderLayer._set_tp.
 * MLC: the shared experts of MoE layers get no rule although
 * DeepseekMLP builds them with intermediate / N; here they are sharded
 * like deepseek_v2's (segs [SI, SI] with SI = moe_intermediate_size x
 * n_shared_experts). ---- */

static const struct tpl__ptmpl hf_deepseek[] = {
    HF_ATTN,
    HF_DS_MLP,
};
static const struct tpl__ptmpl mlc_deepseek[] = {
    W("*.self_attn.wqkv_pack.weight", "_shard_qkv_weight", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    WM("*.mlp.moe_gate_up_proj.weight", "_shard_mlp_up", 1, MOE),
    WM("*.mlp.moe_down_proj.weight", "_shard_mlp_down", 2, NONE),
    MLC_DS_SHARED,
    RW("*.mlp.gate.weight", ROUTER),
    MLC_MLP(WD, "*.mlp"),
    TAIL,
};

/* ---- gemma3: gemma3_model.py Gemma3DecoderLayer._set_tp, sizes under
 * text_config, MLC names under `language_model.`.  MLC: q_norm / k_norm
 * are sharded along dim 0, but they are [head_dim] and every head needs
 * all of it; replicated here. ---- */

#define SEP_QKV_O HF_ATTN

static const struct tpl__ptmpl mlc_gemma3[] = {
    VISION, SEP_QKV_O, QK_NORMS, MLC_MLP(W, "*.mlp"), TAIL,
};

/* ---- llama4: llama4_model.py Llama4TextDecoderLayer._set_tp, sizes under
 * text_config.  Dense layers: feed_forward.gate_up_proj; MoE layers: a
 * shared expert and stacked experts gate_up_proj [experts, E, 2I] (dim 2,
 * segs [I, I]) and down_proj [experts, I, E] (dim 1).  MLC: the router is
 * sharded along dim 0 (experts), so each rank would pick its top-k among
 * a different subset of experts while holding a slice of every expert,
 * and the all-reduce would sum different experts; replicated here. ---- */

static const struct tpl__ptmpl hf_llama4[] = {
    VISION,
    SEP_QKV_O,
    WM("*.feed_forward.experts.gate_up_proj", "_shard_expert_mlp_up", 2, II),
    WM("*.feed_forward.experts.down_proj", "_shard_expert_mlp_down", 1, NONE),
    HF_SHARED(TPL_REQ_MOE, "*.feed_forward.shared_expert"),
    RW("*.feed_forward.router.weight", ROUTER),
    /* Dense layers measure intermediate_size_mlp, which the preset does
     * not read: unchecked. */
    HF_MLP_U(TPL_REQ_DENSE, "*.feed_forward", TPL_U_ANY),
    TAIL,
};
static const struct tpl__ptmpl mlc_llama4[] = {
    VISION,
    SEP_QKV_O,
    WM("*.feed_forward.experts.gate_up_proj", "_shard_expert_mlp_up", 2, II),
    WM("*.feed_forward.experts.down_proj", "_shard_expert_mlp_down", 1, NONE),
    MLC_MLP(WM, "*.feed_forward.shared_expert"),
    RW("*.feed_forward.router.router.weight", ROUTER),
    MLC_MLP(WD, "*.feed_forward"),
    TAIL,
};

/* Older HF checkpoints of GPT-2, GPT-J and GPT-NeoX store the causal
 * mask (`attn.bias`, [1, 1, ctx, ctx]) and `masked_bias` per layer. */
#define MASKS(b)                                                               \
  RW(b ".bias", "a causal-mask buffer, no weights"),                           \
      RW(b ".masked_bias", "a causal-mask constant, no weights")

/* ---- gpt2: gpt2_model.py GPT2Block._set_tp.  MLC's Linear weights are
 * [out, in]; HF's Conv1D stores [in, out], so the HF column-parallel
 * weights cut dim 1 and the row-parallel ones dim 0, under names of their
 * own (a different layout is a different shard function). ---- */

#define GPT2_TAIL                                                              \
  RP("*wte.weight"), RP("*wpe.weight"), RP("*lm_head.weight"), RP("*ln_*")

static const struct tpl__ptmpl hf_gpt2[] = {
    W("*.attn.c_attn.weight", "_shard_c_attn_weight", 1, EEE),
    W("*.attn.c_attn.bias", "_shard_c_attn_bias", 0, EEE),
    W("*.attn.c_proj.weight", "_shard_c_proj", 0, NONE),
    SC("*.attn.c_proj.bias"),
    W("*.mlp.c_fc.weight", "_shard_mlp_c_fc_weight", 1, NONE),
    W("*.mlp.c_fc.bias", "_shard_mlp_c_fc_bias", 0, NONE),
    W("*.mlp.c_proj.weight", "_shard_mlp_c_proj", 0, NONE),
    SC("*.mlp.c_proj.bias"),
    GPT2_TAIL,
    MASKS("*.attn"),
};
static const struct tpl__ptmpl mlc_gpt2[] = {
    W("*.attn.c_attn.weight", "_shard_qkv_weight", 0, EEE),
    W("*.attn.c_attn.bias", "_shard_qkv_bias", 0, EEE),
    W("*.attn.c_proj.weight", "_shard_attn_c_proj", 1, NONE),
    SC("*.attn.c_proj.bias"),
    W("*.mlp.c_fc.weight", "_shard_c_fc_weight", 0, NONE),
    W("*.mlp.c_fc.bias", "_shard_c_fc_bias", 0, NONE),
    W("*.mlp.c_proj.weight", "_shard_mlp_c_proj", 1, NONE),
    SC("*.mlp.c_proj.bias"),
    GPT2_TAIL,
};

/* ---- gpt_neox: gpt_neox_model.py GPTNeoXLayer._set_tp.  HF interleaves
 * q, k, v per head in query_key_value, so an even cut of dim 0 gives each
 * rank whole heads (no segs); MLC's loader de-interleaves it into
 * [q; k; v] (segs [E, E, E]). ---- */

#define NEOX_REST                                                              \
  W("*.attention.dense.weight", "_shard_dense", 1, NONE),                      \
      SC("*.attention.dense.bias"),                                            \
      W("*.mlp.dense_h_to_4h.weight", "_shard_dense_h_to_4h_weight", 0, NONE), \
      W("*.mlp.dense_h_to_4h.bias", "_shard_dense_h_to_4h_bias", 0, NONE),     \
      W("*.mlp.dense_4h_to_h.weight", "_shard_dense_4h_to_h", 1, NONE),        \
      SC("*.mlp.dense_4h_to_h.bias"), RP("*embed_in.weight"),                  \
      RP("*embed_out.weight"), RP("*layernorm*"), RP("*layer_norm*"),          \
      MASKS("*.attention"), ROTARY

static const struct tpl__ptmpl hf_gpt_neox[] = {
    W("*.attention.query_key_value.weight", "_shard_qkv_interleaved_weight", 0,
      NONE),
    W("*.attention.query_key_value.bias", "_shard_qkv_interleaved_bias", 0,
      NONE),
    NEOX_REST,
};
static const struct tpl__ptmpl mlc_gpt_neox[] = {
    W("*.attention.query_key_value.weight", "_shard_qkv_weight", 0, EEE),
    W("*.attention.query_key_value.bias", "_shard_qkv_bias", 0, EEE),
    NEOX_REST,
};

/* ---- gpt_j: gpt_j_model.py GPTJBlock._set_tp.  MLC: fc_in.bias gets no
 * rule although fc_in.weight is cut along its outputs; sharded here with
 * the weight.  fc_out.bias is row-parallel: scale_bias. ---- */

#define GPTJ_MLP                                                               \
  W("*.mlp.fc_in.weight", "_shard_c_fc_weight", 0, NONE),                      \
      O("*.mlp.fc_in.bias", "_shard_c_fc_bias", 0, NONE),                      \
      W("*.mlp.fc_out.weight", "_shard_mlp_c_proj", 1, NONE),                  \
      SC("*.mlp.fc_out.bias"), RP("*wte.weight"), RP("*lm_head.weight"),       \
      RP("*ln_*"), MASKS("*.attn"), ROTARY

static const struct tpl__ptmpl hf_gpt_j[] = {
    HF_QKV_O("*.attn"),
    W("*.attn.out_proj.weight", "_shard_o", 1, NONE),
    GPTJ_MLP,
};
static const struct tpl__ptmpl mlc_gpt_j[] = {
    W("*.attn.c_attn.weight", "_shard_qkv_weight", 0, QKV),
    W("*.attn.out_proj.weight", "_shard_o", 1, NONE),
    GPTJ_MLP,
};

/* ---- phi (phi-1, 1.5, 2): phi_model.py PhiParallelBlock._set_tp.  MLC
 * names transformer.h.{i}.mixer.Wqkv / out_proj; HF (phi-2 layout)
 * self_attn.q/k/v_proj and dense. ---- */

#define PHI_MLP                                                                \
  W("*.mlp.fc1.weight", "_shard_mlp_fc1_weight", 0, NONE),                     \
      W("*.mlp.fc1.bias", "_shard_mlp_fc1_bias", 0, NONE),                     \
      W("*.mlp.fc2.weight", "_shard_mlp_fc2_weight", 1, NONE),                 \
      SC("*.mlp.fc2.bias")

/* With qk_layernorm, PhiAttention's q_layernorm / k_layernorm are
 * LayerNorm(head_dim), shared by every head. */
static const struct tpl__ptmpl hf_phi[] = {
    HF_QKV_O("*.self_attn"),
    RW("*.self_attn.q_layernorm.*", QK_WHY),
    RW("*.self_attn.k_layernorm.*", QK_WHY),
    W("*.self_attn.dense.weight", "_shard_o_weight", 1, NONE),
    SC("*.self_attn.dense.bias"),
    PHI_MLP,
    TAIL,
    RP("*final_layernorm.*"),
    RP("*input_layernorm.*"),
};
static const struct tpl__ptmpl mlc_phi[] = {
    W("*.mixer.Wqkv.weight", "_shard_qkv_weight", 0, QKV),
    W("*.mixer.Wqkv.bias", "_shard_qkv_bias", 0, QKV),
    W("*.mixer.out_proj.weight", "_shard_o_weight", 1, NONE),
    SC("*.mixer.out_proj.bias"),
    PHI_MLP,
    RP("*embd.wte.weight"),
    RP("lm_head.*"),
    RP("*.ln.*"),
};

/* ---- internlm2: internlm2_model.py InternLM2DecoderLayer._set_tp.  HF's
 * wqkv interleaves per kv group ([groups, q/kv + 2, hd, E]), so an even
 * cut of dim 0 gives each rank whole groups; MLC's loader reorders it
 * into [q; k; v]. ---- */

#define INTERNLM2_REST(b)                                                      \
  W("*.attention.wo.weight", "_shard_o", 1, NONE), SC("*.attention.wo.bias"),  \
      W("*.feed_forward." b, "_shard_mlp_up", 0, II),                          \
      W("*.feed_forward.w2.weight", "_shard_mlp_down", 1, NONE),               \
      RP("*tok_embeddings.weight"), RP("output.weight"), RP("*norm.weight")

static const struct tpl__ptmpl hf_internlm2[] = {
    W("*.attention.wqkv.weight", "_shard_qkv_grouped_weight", 0, NONE),
    O("*.attention.wqkv.bias", "_shard_qkv_grouped_bias", 0, NONE),
    W("*.feed_forward.w1.weight", "_shard_gate", 0, NONE),
    W("*.feed_forward.w3.weight", "_shard_up", 0, NONE),
    W("*.attention.wo.weight", "_shard_o", 1, NONE),
    SC("*.attention.wo.bias"),
    W("*.feed_forward.w2.weight", "_shard_mlp_down", 1, NONE),
    RP("*tok_embeddings.weight"),
    RP("output.weight"),
    RP("*norm.weight"),
};
static const struct tpl__ptmpl mlc_internlm2[] = {
    W("*.attention.wqkv.weight", "_shard_qkv_weight", 0, QKV),
    O("*.attention.wqkv.bias", "_shard_qkv_bias", 0, QKV),
    INTERNLM2_REST("gate_up_proj.weight"),
};

/* ---- internlm (v1): internlm_model.py InternLMDecoderLayer._set_tp.
 * MLC: o_proj.bias is sharded along dim 0, but it is added after the
 * row-parallel o_proj, to the all-reduced [E] output; scale_bias
 * here. ---- */

static const struct tpl__ptmpl mlc_internlm[] = {
    W("*.self_attn.wqkv_pack.weight", "_shard_qkv_weight", 0, QKV),
    O("*.self_attn.wqkv_pack.bias", "_shard_qkv_bias", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o_weight", 1, NONE),
    SC("*.self_attn.o_proj.bias"),
    W("*.mlp.gate_up_proj.weight", "_shard_mlp_gate_up", 0, II),
    W("*.mlp.down_proj.weight", "_shard_mlp_down_proj", 1, NONE),
    TAIL,
};

/* ---- baichuan: baichuan_model.py BaichuanDecoderLayer._set_tp.  HF's
 * W_pack is already [q; k; v]: the same tensor, MLC's name. ---- */

static const struct tpl__ptmpl hf_baichuan[] = {
    W("*.self_attn.W_pack.weight", "_shard_qkv_weight", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    W("*.mlp.gate_proj.weight", "_shard_gate", 0, NONE),
    W("*.mlp.up_proj.weight", "_shard_up", 0, NONE),
    W("*.mlp.down_proj.weight", "_shard_mlp_down_proj", 1, NONE),
    TAIL,
};
static const struct tpl__ptmpl mlc_baichuan[] = {
    W("*.self_attn.W_pack.weight", "_shard_qkv_weight", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    W("*.mlp.gate_up_proj.weight", "_shard_mlp_gate_up", 0, II),
    W("*.mlp.down_proj.weight", "_shard_mlp_down_proj", 1, NONE),
    TAIL,
};

/* ---- chatglm3: chatglm3_model.py GLMBlock._set_tp; HF and MLC share the
 * names.  MLC: dense_h_to_4h is sharded without segs, but it holds
 * [gate; up] (swiglu chunks it in two), so segs [I, I] here; MLC also
 * shards the row-parallel biases dense.bias (dim 0) and dense_4h_to_h.bias
 * (dim 1 of a 1-D tensor), which are added to the all-reduced [E] output:
 * scale_bias here. ---- */

static const struct tpl__ptmpl chatglm3[] = {
    W("*.self_attention.query_key_value.weight", "_shard_qkv_weight", 0, QKV),
    O("*.self_attention.query_key_value.bias", "_shard_qkv_bias", 0, QKV),
    W("*.self_attention.dense.weight", "_shard_dense_weight", 1, NONE),
    SC("*.self_attention.dense.bias"),
    W("*.mlp.dense_h_to_4h.weight", "_shard_dense_h_to_4h_weight", 0, II),
    O("*.mlp.dense_h_to_4h.bias", "_shard_dense_h_to_4h_bias", 0, II),
    W("*.mlp.dense_4h_to_h.weight", "_shard_dense_4h_to_h", 1, NONE),
    SC("*.mlp.dense_4h_to_h.bias"),
    RP("*word_embeddings.weight"),
    RP("*output_layer.weight"),
    RP("*layernorm.weight"),
};

/* ---- starcoder2: starcoder2_model.py Starcoder2DecoderLayer._set_tp.
 * MLC: c_proj.bias is sharded along dim 0 and o_proj.bias replicated, but
 * both are added to all-reduced [E] outputs: scale_bias here. ---- */

#define SC2_MLP                                                                \
  W("*.mlp.c_fc.weight", "_shard_c_fc_weight", 0, NONE),                       \
      O("*.mlp.c_fc.bias", "_shard_c_fc_bias", 0, NONE),                       \
      W("*.mlp.c_proj.weight", "_shard_mlp_c_proj", 1, NONE),                  \
      SC("*.mlp.c_proj.bias"), TAIL, RP("*norm.bias")

static const struct tpl__ptmpl hf_starcoder2[] = {HF_ATTN, SC2_MLP};
static const struct tpl__ptmpl mlc_starcoder2[] = {
    W("*.self_attn.wqkv_pack.weight", "_shard_qkv_weight", 0, QKV),
    O("*.self_attn.wqkv_pack.bias", "_shard_qkv_bias", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    SC("*.self_attn.o_proj.bias"),
    SC2_MLP,
};

/* ---- cohere: cohere_model.py CohereDecoderLayer._set_tp.  MLC: gate_proj
 * and up_proj are separate tensors but given segs [i, i]; each is one
 * segment, so no segs here.  With use_qk_norm (Command R+), HF's
 * CohereAttention has q_norm [heads, head_dim] and k_norm [kv heads,
 * head_dim], one row per head: cut along dim 0 with the heads, as vLLM's
 * Cohere model loads them (MLC's cohere_model.py has no qk norm; a
 * directory with them gets the same cut). ---- */

#define COHERE_QK_NORMS                                                        \
  SU("*.self_attn.q_norm.weight", "_shard_q_norm", 0, OPT, TPL_U_H),           \
      SU("*.self_attn.k_norm.weight", "_shard_k_norm", 0, OPT, TPL_U_KVH)

static const struct tpl__ptmpl hf_cohere[] = {
    HF_ATTN,
    COHERE_QK_NORMS,
    HF_MLP(TPL_REQ_LAYER, "*.mlp"),
    TAIL,
};
static const struct tpl__ptmpl mlc_cohere[] = {
    MLC_QKV_O("*.self_attn", "out_proj"),
    COHERE_QK_NORMS,
    W("*.mlp.gate_proj.weight", "_shard_mlp_gate", 0, NONE),
    W("*.mlp.up_proj.weight", "_shard_mlp_up", 0, NONE),
    W("*.mlp.down_proj.weight", "_shard_mlp_down", 1, NONE),
    TAIL,
};

/* ---- nemotron: nemotron_model.py NemotronDecoderLayer._set_tp.  MLC:
 * up_proj is sharded along dim 1 (its input features) while down_proj
 * also cuts its input features; a column-parallel up_proj must cut dim 0,
 * as here. ---- */

#define NEMOTRON_MLP                                                           \
  W("*.mlp.up_proj.weight", "_shard_mlp_up", 0, NONE),                         \
      O("*.mlp.up_proj.bias", "_shard_mlp_up_bias", 0, NONE),                  \
      W("*.mlp.down_proj.weight", "_shard_mlp_down", 1, NONE),                 \
      SC("*.mlp.down_proj.bias"), TAIL, RP("*norm.bias")

static const struct tpl__ptmpl hf_nemotron[] = {HF_ATTN, NEMOTRON_MLP};
static const struct tpl__ptmpl mlc_nemotron[] = {
    MLC_QKV_O("*.self_attn", "o_proj"),
    NEMOTRON_MLP,
};

/* ---- stable_lm: stablelm_model.py StableLMDecoderLayer._set_tp. ---- */

static const struct tpl__ptmpl mlc_stable_lm[] = {
    W("*.self_attn.qkv_proj.weight", "_shard_qkv_weight", 0, QKV),
    O("*.self_attn.qkv_proj.bias", "_shard_qkv_bias", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    MLC_MLP(W, "*.mlp"),
    TAIL,
    RP("*norm.bias"),
};

/* ---- minicpm: minicpm_model.py MiniCPMDecoderLayer._set_tp: dense
 * gate_up_proj / down_proj, or (num_experts > 0) stacked e1_e3 (dim 1) and
 * e2 (dim 2) with a replicated router. ---- */

static const struct tpl__ptmpl hf_minicpm[] = {
    HF_ATTN,
    WM("*.mlp.experts.*.w1.weight", "_shard_w1", 0, NONE),
    WM("*.mlp.experts.*.w3.weight", "_shard_w3", 0, NONE),
    WM("*.mlp.experts.*.w2.weight", "_shard_w2", 1, NONE),
    RW("*.mlp.gate.weight", ROUTER),
    HF_MLP(TPL_REQ_DENSE, "*.mlp"),
    TAIL,
};
static const struct tpl__ptmpl mlc_minicpm[] = {
    W("*.self_attn.wqkv_pack.weight", "_shard_qkv_weight", 0, QKV),
    W("*.self_attn.o_proj.weight", "_shard_o", 1, NONE),
    WM("*.mlp.e1_e3.weight", "_shard_mlp_up", 1, II),
    WM("*.mlp.e2.weight", "_shard_mlp_down", 2, NONE),
    RW("*.mlp.gate.weight", ROUTER),
    MLC_MLP(WD, "*.mlp"),
    TAIL,
};

/* ---- qwen (v1): qwen_model.py QWenBlock._set_tp.  config.json's
 * intermediate_size is both halves of gate_up_proj, so segs are
 * [I/2, I/2]; HF keeps w1 and w2 apart. ---- */

#define QWEN_ATTN                                                              \
  W("*.attn.c_attn.weight", "_shard_qkv_weight", 0, QKV),                      \
      W("*.attn.c_attn.bias", "_shard_qkv_bias", 0, QKV),                      \
      W("*.attn.c_proj.weight", "_shard_attn_c_proj", 1, NONE),                \
      SC("*.attn.c_proj.bias")
#define QWEN_TAIL                                                              \
  W("*.mlp.c_proj.weight", "_shard_mlp_c_proj", 1, NONE), RP("*wte.weight"),   \
      RP("lm_head.weight"), RP("*ln_*")

static const struct tpl__ptmpl hf_qwen[] = {
    QWEN_ATTN,
    W("*.mlp.w1.weight", "_shard_mlp_w1", 0, NONE),
    W("*.mlp.w2.weight", "_shard_mlp_w2", 0, NONE),
    QWEN_TAIL,
};
static const struct tpl__ptmpl mlc_qwen[] = {
    QWEN_ATTN,
    W("*.mlp.gate_up_proj.weight", "_shard_mlp_gate_up_proj", 0, II),
    QWEN_TAIL,
};

/* ---- gpt_oss: HF only (MLC's gpt_oss_model.py sets no shard strategy:
 * no _set_tp, so MLC runs it unsharded).  transformers'
 * GptOssForCausalLM names, cut as vLLM's models/gpt_oss.py (0025d69b)
 * loads them: q/k/v and their biases by heads (QKVParallelLinear),
 * o_proj row-parallel, `sinks` ([heads]) by heads, the router whole.
 * The MXFP4 experts' gate_up_proj_{blocks,scales,bias} along their
 * 2 x I rows (dim 1), which interleave gate and up: a contiguous cut
 * keeps the pairs (interleaved.c checks whole pairs per rank), as
 * vLLM's rows [2 r P, 2 (r + 1) P); down_proj_{blocks,scales} along
 * the input blocks (dim 2).  The dequantized bf16 form (gate_up_proj
 * [E, H, 2I], down_proj [E, I, H]) is cut the same way.  Row-parallel
 * biases (o_proj, the experts' down) are scale_bias: under --bias-policy
 * vllm o_proj's is whole (RowParallelLinear adds it on tp_rank 0) and the
 * experts' down bias rank0 (the loader's down_proj_bias branch zeroes it
 * on tp_rank != 0, "only load on rank 0 to avoid duplication"). ---- */
static const struct tpl__ptmpl hf_gpt_oss[] = {
    HF_ATTN,
    SU("*.self_attn.sinks", "_shard_sinks", 0, EVERY, TPL_U_H),
    RW("*.mlp.router.weight", ROUTER),
    RW("*.mlp.router.bias", ROUTER),
    O("*.mlp.experts.gate_up_proj_blocks", "_shard_gate_up_blocks", 1, NONE),
    O("*.mlp.experts.gate_up_proj_scales", "_shard_gate_up_scales", 1, NONE),
    O("*.mlp.experts.gate_up_proj_bias", "_shard_gate_up_bias", 1, NONE),
    O("*.mlp.experts.down_proj_blocks", "_shard_down_blocks", 2, NONE),
    O("*.mlp.experts.down_proj_scales", "_shard_down_scales", 2, NONE),
    O("*.mlp.experts.gate_up_proj", "_shard_gate_up", 2, NONE),
    O("*.mlp.experts.down_proj", "_shard_down", 1, NONE),
    SC0("*.mlp.experts.down_proj_bias"),
    TAIL,
};

#define T(t) t, ARRAY_SIZE(t)

const struct tpl__preset_def tpl__preset_defs[] = {
    {"llama", T(hf_llama), T(mlc_llama), 0},
    {"mistral", T(hf_llama), T(mlc_llama), 0},
    {"ministral3", T(hf_llama), T(mlc_llama), TPL_P_TEXT},
    {"gemma", T(hf_llama), T(mlc_llama), 0},
    {"gemma2", T(hf_llama), T(mlc_llama), 0},
    {"gemma3", T(hf_llama), T(mlc_gemma3), TPL_P_TEXT},
    {"olmo", T(hf_llama), T(mlc_llama), 0},
    {"olmo2", T(hf_llama), T(mlc_llama), 0},
    {"orion", T(hf_llama), T(mlc_llama), 0},
    {"llava", T(hf_llama), T(mlc_llama), TPL_P_TEXT},
    {"llama4", T(hf_llama4), T(mlc_llama4), TPL_P_TEXT | TPL_P_KIND_STEP},
    {"mixtral", T(hf_mixtral), T(mlc_mixtral), TPL_P_EXPERT_MLP},
    {"phi3", T(hf_phi3), T(mlc_phi3), 0},
    {"phi", T(hf_phi), T(mlc_phi), TPL_P_4X},
    {"qwen", T(hf_qwen), T(mlc_qwen), TPL_P_HALF_I},
    {"qwen2", T(hf_llama), T(mlc_qwen2), 0},
    {"qwen2_5_vl", T(hf_llama), T(mlc_qwen2), 0},
    {"qwen3", T(hf_llama), T(mlc_qwen3), 0},
    {"qwen2_moe", T(hf_qwen2_moe), T(mlc_qwen2_moe), TPL_P_MOE | TPL_P_SHARED},
    {"qwen3_moe", T(hf_qwen3_moe), T(mlc_qwen3_moe), TPL_P_MOE},
    {"deepseek_v2", T(hf_deepseek_v2), T(mlc_deepseek_v2),
     TPL_P_MLA | TPL_P_MOE | TPL_P_SHARED_DS | TPL_P_KIND_DS},
    {"deepseek", T(hf_deepseek), T(mlc_deepseek),
     TPL_P_MOE | TPL_P_SHARED_DS | TPL_P_KIND_DS},
    {"gpt2", T(hf_gpt2), T(mlc_gpt2), TPL_P_4X},
    {"gpt_neox", T(hf_gpt_neox), T(mlc_gpt_neox), TPL_P_4X},
    {"gpt_j", T(hf_gpt_j), T(mlc_gpt_j), TPL_P_4X},
    {"internlm", T(hf_llama), T(mlc_internlm), 0},
    {"internlm2", T(hf_internlm2), T(mlc_internlm2), TPL_P_KV_GROUPED},
    {"baichuan", T(hf_baichuan), T(mlc_baichuan), 0},
    {"chatglm3", T(chatglm3), T(chatglm3), 0},
    {"starcoder2", T(hf_starcoder2), T(mlc_starcoder2), TPL_P_4X},
    {"cohere", T(hf_cohere), T(mlc_cohere), 0},
    {"nemotron", T(hf_nemotron), T(mlc_nemotron), 0},
    {"stable_lm", T(hf_llama), T(mlc_stable_lm), 0},
    {"minicpm", T(hf_minicpm), T(mlc_minicpm), TPL_P_KIND_EXPERTS},
    {"gpt_oss", T(hf_gpt_oss), NULL, 0, TPL_P_EXPERT_MLP},
};
const size_t tpl__npreset_defs = ARRAY_SIZE(tpl__preset_defs);

const struct tpl__name_map tpl__preset_archs[] = {
    {"LlamaForCausalLM", "llama"},
    {"MistralForCausalLM", "mistral"},
    {"Mistral3ForConditionalGeneration", "ministral3"},
    {"GemmaForCausalLM", "gemma"},
    {"Gemma2ForCausalLM", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3"},
    {"Gemma3ForConditionalGeneration", "gemma3"},
    {"OlmoForCausalLM", "olmo"},
    {"Olmo2ForCausalLM", "olmo2"},
    {"OrionForCausalLM", "orion"},
    {"LlavaForConditionalGeneration", "llava"},
    {"Llama4ForConditionalGeneration", "llama4"},
    {"Llama4ForCausalLM", "llama4"},
    {"MixtralForCausalLM", "mixtral"},
    {"Phi3ForCausalLM", "phi3"},
    {"PhiForCausalLM", "phi"},
    {"QWenLMHeadModel", "qwen"},
    {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"},
    {"Qwen3ForCausalLM", "qwen3"},
    {"Qwen2MoeForCausalLM", "qwen2_moe"},
    {"Qwen3MoeForCausalLM", "qwen3_moe"},
    {"DeepseekV2ForCausalLM", "deepseek_v2"},
    {"DeepseekV3ForCausalLM", "deepseek_v2"},
    {"DeepseekForCausalLM", "deepseek"},
    {"GPT2LMHeadModel", "gpt2"},
    {"GPT2Model", "gpt2"},
    {"GPTNeoXForCausalLM", "gpt_neox"},
    {"GPTJForCausalLM", "gpt_j"},
    {"InternLMForCausalLM", "internlm"},
    {"InternLM2ForCausalLM", "internlm2"},
    {"BaichuanForCausalLM", "baichuan"},
    {"BaiChuanForCausalLM", "baichuan"},
    {"ChatGLMModel", "chatglm3"},
    {"ChatGLMForConditionalGeneration", "chatglm3"},
    {"Starcoder2ForCausalLM", "starcoder2"},
    {"CohereForCausalLM", "cohere"},
    {"NemotronForCausalLM", "nemotron"},
    {"StableLmForCausalLM", "stable_lm"},
    {"StableLMEpochForCausalLM", "stable_lm"},
    {"MiniCPMForCausalLM", "minicpm"},
    {"GptOssForCausalLM", "gpt_oss"},
};
const size_t tpl__npreset_archs = ARRAY_SIZE(tpl__preset_archs);

const struct tpl__name_map tpl__preset_types[] = {
    {"mistral3", "ministral3"},
    {"gemma3_text", "gemma3"},
    {"llama4_text", "llama4"},
    {"deepseek_v3", "deepseek_v2"},
    {"gptj", "gpt_j"},
    {"stablelm", "stable_lm"},
    {"stablelm_epoch", "stable_lm"},
    {"chatglm", "chatglm3"},
    {"phi-msft", "phi"},
};
const size_t tpl__npreset_types = ARRAY_SIZE(tpl__preset_types);
