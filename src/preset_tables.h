/* preset_tables.h - the data behind the built-in presets: for each
 * architecture MLC LLM shards, its rule templates in Hugging Face names
 * and in MLC's names, which of them every layer must have, which config
 * sizes its segments and divisibility checks need, and the
 * "architectures" / "model_type" values that select it.  presets.c turns
 * these into plans and checks models against them.  DESIGN.md section 3. */
#ifndef TPL_PRESET_TABLES_H
#define TPL_PRESET_TABLES_H

#include <stddef.h>

/* Which segment list a template wants, filled from the config (full
 * units, as DESIGN.md's plan files; MLC's ShardSingleDim gives the same
 * lists divided by N). */
enum tpl__seg_kind {
  TPL_SEGS_NONE = 0,
  TPL_SEGS_QKV,    /* [heads*hd, kv*hd, kv*hd] */
  TPL_SEGS_II,     /* [I, I]: intermediate_size (halved for qwen v1) */
  TPL_SEGS_MOE,    /* [MI, MI]: moe_intermediate_size */
  TPL_SEGS_SHARED, /* [SI, SI]: the shared expert's intermediate size */
  TPL_SEGS_EEE     /* [E, E, E]: hidden size three times */
};

/* Which layers must hold a tensor a template matches. */
enum tpl__req {
  TPL_REQ_NO = 0, /* optional (biases, alternatives) */
  TPL_REQ_LAYER,  /* every layer */
  TPL_REQ_DENSE,  /* every layer that is not a mixture of experts */
  TPL_REQ_MOE     /* every mixture-of-experts layer */
};

/* What the cut dim of an unsegmented shard rule measures, as the config
 * says (presets.c checks the checkpoint against it; a segmented rule's
 * segs must sum to the dim anyway, shard.c). */
enum tpl__unit {
  TPL_U_ANY = 0, /* not checked */
  TPL_U_Q,       /* heads x head_dim */
  TPL_U_KV,      /* kv heads x head_dim */
  TPL_U_I,       /* intermediate size */
  TPL_U_MOE,     /* moe_intermediate_size */
  TPL_U_SHARED,  /* the shared expert's intermediate size */
  TPL_U_H,       /* heads (one row per head) */
  TPL_U_KVH      /* kv heads */
};

struct tpl__ptmpl {
  const char *match;  /* glob over the full tensor name */
  unsigned char kind; /* enum tpl__rule_kind */
  unsigned char dim;
  unsigned char segs; /* enum tpl__seg_kind */
  unsigned char req;  /* enum tpl__req */
  /* A shard rule's func_name.  A replicate rule's reason for delivering a
   * layer tensor whole that has a dim of the heads' sizes (a router, a
   * norm over all heads): NULL means none, and presets.c refuses such a
   * tensor while its layer's heads are cut. */
  const char *name;
  unsigned char unit; /* enum tpl__unit */
  /* A scale_bias rule: enum tpl__bias under --bias-policy vllm, where
   * vLLM's model loader differs from RowParallelLinear's whole bias;
   * 0 (DEFAULT) elsewhere. */
  unsigned char bias_vllm;
};

/* Preset flags: how sizes are read and checked. */
#define TPL_P_4X 0x01        /* intermediate size defaults to 4 x hidden */
#define TPL_P_HALF_I 0x02    /* [I, I] segs are intermediate_size / 2 */
#define TPL_P_MLA 0x04       /* latent attention: no kv heads, no head_dim */
#define TPL_P_MOE 0x08       /* needs moe_intermediate_size */
#define TPL_P_SHARED 0x10    /* shared_expert_intermediate_size */
#define TPL_P_SHARED_DS 0x20 /* shared = moe_intermediate x n_shared */
#define TPL_P_TEXT 0x40      /* sizes under "text_config" when present */
/* Where the config puts MoE layers (else the tensors' names say): */
#define TPL_P_KIND_DS 0x80       /* first_k_dense_replace, moe_layer_freq */
#define TPL_P_KIND_STEP 0x100    /* moe_layers or interleave_moe_layer_step */
#define TPL_P_KIND_EXPERTS 0x200 /* all when num_experts > 0 */
/* Each kv head's rows sit beside its q heads' in one fused tensor (HF
 * internlm2's wqkv): an even cut gives whole groups, so kv heads fewer
 * than the shards are refused, never replicated. */
#define TPL_P_KV_GROUPED 0x400
/* intermediate_size is the routed experts' and there is no dense MLP
 * (mixtral, gpt-oss): under --ep, where experts are not cut, it need not
 * divide by the shards. */
#define TPL_P_EXPERT_MLP 0x800

struct tpl__preset_def {
  const char *name;
  const struct tpl__ptmpl *hf;
  size_t nhf;
  const struct tpl__ptmpl *mlc;
  size_t nmlc;
  unsigned flags;
};

struct tpl__name_map {
  const char *from, *to;
};

extern const struct tpl__preset_def tpl__preset_defs[];
extern const size_t tpl__npreset_defs;
/* config.json "architectures" values and the preset each one means. */
extern const struct tpl__name_map tpl__preset_archs[];
extern const size_t tpl__npreset_archs;
/* "model_type" spellings (HF and MLC) that differ from a preset name. */
extern const struct tpl__name_map tpl__preset_types[];
extern const size_t tpl__npreset_types;

#endif
