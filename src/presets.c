/* presets.c - the built-in plans.  A preset is a table of rule
 * templates over the tensor names of one architecture (preset_tables.c,
 * written from MLC LLM's model files); the segment lengths of fused
 * weights (q/k/v, gate/up) are filled in from the model's parsed config
 * (the planner reads it), which is also checked against the shard count
 * before anything moves.  After a
 * preset's plan is applied, tpl__preset_check refuses a checkpoint that
 * lacks a tensor the preset must shard in some layer, or has a layer
 * tensor of two or more dims no rule names: a wrong shard must never pass
 * silently.
 *
 * What is sharded follows MLC LLM and Megatron: column-parallel
 * projections along their output features, row-parallel ones along their
 * input features, row-parallel biases marked scale_bias.  Embeddings,
 * lm_head, norms and routers are replicated (explicit `replicate` rules):
 * MLC does not shard embeddings by default, and a vocab-parallel
 * embedding needs engine support a plain loader cannot assume. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experts.h"
#include "jsonu.h"
#include "model.h"
#include "preset_tables.h"
#include "presets.h"

static const struct tpl__preset_def *find_preset(const char *name) {
  for (size_t i = 0; i < tpl__npreset_defs; i++)
    if (strcmp(tpl__preset_defs[i].name, name) == 0)
      return &tpl__preset_defs[i];
  return NULL;
}

/* What `from` maps to in `map` (n entries), or NULL. */
static const char *map_name(const struct tpl__name_map *map, size_t n,
                            const char *from) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(map[i].from, from) == 0) return map[i].to;
  return NULL;
}

/* A preset name or one of its model_type aliases ("deepseek_v3"). */
static const struct tpl__preset_def *find_preset_or_alias(const char *name) {
  const char *to = map_name(tpl__preset_types, tpl__npreset_types, name);
  return find_preset(to != NULL ? to : name);
}

int tpl__preset_known(const char *name) {
  return find_preset_or_alias(name) != NULL;
}

const char *tpl__preset_names(void) {
  static char names[1024];
  size_t used = 0;
  if (names[0] != '\0') return names;
  for (size_t i = 0; i < tpl__npreset_defs && used < sizeof(names); i++)
    used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
                             i ? ", " : "", tpl__preset_defs[i].name);
  return names;
}

/* --- sizes from the config --- */

#define MAX_CHECKS 6

struct sizes {
  uint64_t hidden, heads, kv_heads, head_dim, inter, moe, shared;
  uint64_t layers;  /* 0 when the config does not say */
  uint64_t mtp;     /* num_nextn_predict_layers after them; 0 when none */
  uint64_t experts; /* routed experts a layer; 0 when none or not said */
  /* The config keys each size came from ("num_attention_heads", ...);
   * head_dim's is "hidden / heads" when derived. */
  const char *heads_key, *kv_key, *hd_key, *inter_key, *moe_key, *shared_key,
      *layers_key, *experts_key;
  /* The numbers that must divide by the shard count, as the config
   * names them. */
  struct {
    const char *label;
    uint64_t value;
    /* A rank's slice of the cut dims this size measures, value / N
     * items of `unit` elements (head_dim for heads), must be a multiple
     * of `align` elements (quantization blocks; 0: anything). */
    uint64_t unit, align;
  } checks[MAX_CHECKS];
  size_t nchecks;
  size_t kv_check; /* index of the kv heads' check, or MAX_CHECKS */
  /* kv heads held by N / kv_parts ranks each (N a multiple of them);
   * 0 when they are cut N ways.  Set by check_divisible. */
  uint32_t kv_parts;
};

#define MAX_SIZE (1ull << 32) /* no model dimension is this large */

/* Reads the first of `keys` present (and not null) as a positive integer
 * below 2^32 and stores which key it was in *key (may be NULL).  Returns
 * 0, 1 when none is present, or TPL_EFORMAT. */
static int get_size(const json_t *cfg, const char *const *keys,
                    const char *what, uint64_t *out, const char **key,
                    struct tpl__error *err) {
  for (; *keys != NULL; keys++) {
    const json_t *v = json_object_get(cfg, *keys);
    uint64_t n;
    if (v == NULL || json_is_null(v)) continue;
    if (!json_is_integer(v)) {
      char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      int rc = tpl__fail(err, TPL_EFORMAT,
                         "%s: expected '%s' to be a positive integer, found "
                         "%.64s",
                         what, *keys, shown ? shown : "another JSON value");
      free(shown);
      return rc;
    }
    if (tpl__json_u64(v, &n) != 0 || n == 0 || n >= MAX_SIZE)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected '%s' to be a positive integer below "
                       "2^32, found %lld",
                       what, *keys, (long long)json_integer_value(v));
    *out = n;
    if (key != NULL) *key = *keys;
    return 0;
  }
  return 1;
}

static int need_size(const json_t *cfg, const char *const *keys,
                     const char *what, uint64_t *out, const char **key,
                     struct tpl__error *err) {
  int rc = get_size(cfg, keys, what, out, key, err);
  if (rc == 1)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected '%s' (a positive integer), found none", what,
                     keys[0]);
  return rc;
}

static void add_check(struct sizes *s, const char *label, uint64_t value) {
  if (s->nchecks < MAX_CHECKS) {
    s->checks[s->nchecks].label = label;
    s->checks[s->nchecks].value = value;
    s->checks[s->nchecks].unit = 1;
    s->checks[s->nchecks].align = 0;
    s->nchecks++;
  }
}

/* Removes the check labelled `label` (NULL: none), one that read_mlp or
 * read_experts added after the attention's, so the kv heads' index
 * stays. */
static void drop_check(struct sizes *s, const char *label) {
  for (size_t i = 0; label != NULL && i < s->nchecks; i++) {
    if (s->checks[i].label != label) continue;
    memmove(&s->checks[i], &s->checks[i + 1],
            (s->nchecks - i - 1) * sizeof(s->checks[0]));
    s->nchecks--;
    return;
  }
}

/* Under --ep the routed experts are not cut (vLLM's
 * FusedMoEParallelConfig: tp_size 1 for the experts under expert
 * parallelism), so their size need not divide: moe_intermediate_size,
 * and intermediate_size where the experts are the only MLP. */
static void drop_expert_checks(struct sizes *s, unsigned flags) {
  drop_check(s, s->moe_key);
  if (flags & TPL_P_EXPERT_MLP) drop_check(s, s->inter_key);
}

/* Attention: heads, kv heads (none for latent attention) and head_dim. */
static int read_attention(const json_t *cfg, unsigned flags, const char *what,
                          struct sizes *s, struct tpl__error *err) {
  static const char *const hidden[] = {"hidden_size", "n_embd", "d_model",
                                       NULL};
  static const char *const heads[] = {"num_attention_heads", "n_head",
                                      "num_heads", "n_heads", NULL};
  static const char *const kv[] = {
      "num_key_value_heads", "multi_query_group_num",
      "n_head_kv",           "num_kv_heads",
      "n_kv_heads",          NULL};
  static const char *const hd[] = {"head_dim", "kv_channels", NULL};
  int rc;
  if ((rc = need_size(cfg, hidden, what, &s->hidden, NULL, err)) != 0 ||
      (rc = need_size(cfg, heads, what, &s->heads, &s->heads_key, err)) != 0)
    return rc;
  add_check(s, s->heads_key, s->heads);
  if (flags & TPL_P_MLA) return 0;
  /* Without a kv count every head is a kv head (checked above). */
  s->kv_heads = s->heads;
  s->kv_key = s->heads_key;
  rc = get_size(cfg, kv, what, &s->kv_heads, &s->kv_key, err);
  if (rc == 0) {
    s->kv_check = s->nchecks;
    add_check(s, s->kv_key, s->kv_heads);
  }
  if (rc < 0) return rc;
  if (s->kv_heads > s->heads)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s = %llu: expected at most %s = %llu (each kv "
                     "head serves one or more query heads), found more",
                     what, s->kv_key, (unsigned long long)s->kv_heads,
                     s->heads_key, (unsigned long long)s->heads);
  if ((rc = get_size(cfg, hd, what, &s->head_dim, &s->hd_key, err)) != 1)
    return rc;
  s->hd_key = "hidden size / heads";
  if (s->hidden % s->heads != 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected hidden size %llu to be a multiple of the "
                     "%llu attention heads (or a 'head_dim'), found neither",
                     what, (unsigned long long)s->hidden,
                     (unsigned long long)s->heads);
  s->head_dim = s->hidden / s->heads;
  return 0;
}

/* The MLP: intermediate size (4 x hidden by default for the GPTs; halved
 * for qwen v1's fused halves). */
static int read_mlp(const json_t *cfg, unsigned flags, const char *what,
                    struct sizes *s, struct tpl__error *err) {
  static const char *const inter[] = {"intermediate_size", "n_inner",
                                      "ffn_hidden_size", NULL};
  const char *key = NULL;
  int rc = (flags & TPL_P_4X)
               ? get_size(cfg, inter, what, &s->inter, &key, err)
               : need_size(cfg, inter, what, &s->inter, &key, err);
  if (rc == 1) {
    s->inter = 4 * s->hidden; /* hidden < 2^32 */
    key = "intermediate size (4 x hidden)";
  } else if (rc != 0) {
    return rc;
  }
  if (flags & TPL_P_HALF_I) {
    if (s->inter % 2 != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected '%s' = %llu to be even (both halves "
                       "of gate_up_proj), found it odd",
                       what, key, (unsigned long long)s->inter);
    s->inter /= 2;
    key = "intermediate_size / 2";
  }
  add_check(s, key, s->inter);
  s->inter_key = key;
  return 0;
}

/* Experts: moe_intermediate_size and the shared expert's size. */
static int read_experts(const json_t *cfg, unsigned flags, const char *what,
                        struct sizes *s, struct tpl__error *err) {
  static const char *const moe[] = {"moe_intermediate_size", NULL};
  static const char *const shared[] = {"shared_expert_intermediate_size", NULL};
  static const char *const nshared[] = {"n_shared_experts", NULL};
  uint64_t n = 0;
  int rc;
  if (flags & TPL_P_MOE) {
    if ((rc = need_size(cfg, moe, what, &s->moe, NULL, err)) != 0) return rc;
    add_check(s, moe[0], s->moe);
    s->moe_key = moe[0];
  }
  if (flags & TPL_P_SHARED) {
    if ((rc = need_size(cfg, shared, what, &s->shared, NULL, err)) != 0)
      return rc;
    add_check(s, shared[0], s->shared);
    s->shared_key = shared[0];
  }
  if (flags & TPL_P_SHARED_DS) {
    if ((rc = get_size(cfg, nshared, what, &n, NULL, err)) > 0) return 0;
    if (rc != 0) return rc;
    s->shared = s->moe * n; /* both below 2^32 */
    s->shared_key = "moe_intermediate_size x n_shared_experts";
    add_check(s, s->shared_key, s->shared);
  }
  return 0;
}

/* The layer count, when the config gives one (s->layers stays 0 if not). */
static int read_layer_count(const json_t *cfg, const char *what,
                            struct sizes *s, struct tpl__error *err) {
  static const char *const layers[] = {"num_hidden_layers", "n_layer",
                                       "num_layers", NULL};
  const json_t *mtp = json_object_get(cfg, "num_nextn_predict_layers");
  int rc = get_size(cfg, layers, what, &s->layers, &s->layers_key, err);
  if (rc < 0) return rc;
  if (mtp != NULL && !json_is_null(mtp) &&
      (tpl__json_u64(mtp, &s->mtp) != 0 || s->mtp >= MAX_SIZE))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected 'num_nextn_predict_layers' to be a "
                     "whole number of layers below 2^32, found another "
                     "value",
                     what);
  return 0;
}

/* The routed experts' count, when the config gives a positive one
 * (minicpm's num_experts 0 means a dense model). */
static void read_expert_count(const json_t *cfg, struct sizes *s) {
  static const char *const keys[] = {"num_local_experts", "num_experts",
                                     "n_routed_experts", NULL};
  for (const char *const *k = keys; *k != NULL; k++)
    if (tpl__json_u64(json_object_get(cfg, *k), &s->experts) == 0 &&
        s->experts > 0) {
      s->experts_key = *k;
      return;
    }
  s->experts = 0;
}

static int read_sizes(const json_t *cfg, unsigned flags, const char *what,
                      struct sizes *s, struct tpl__error *err) {
  int rc;
  memset(s, 0, sizeof(*s));
  s->kv_check = MAX_CHECKS;
  if ((rc = read_attention(cfg, flags, what, s, err)) != 0 ||
      (rc = read_mlp(cfg, flags, what, s, err)) != 0 ||
      (rc = read_layer_count(cfg, what, s, err)) != 0)
    return rc;
  read_expert_count(cfg, s);
  return read_experts(cfg, flags, what, s, err);
}

/* How a preset may cut kv heads fewer than the shards (MLC's
 * llama_model.py LlamaAttention asserts num_key_value_heads %
 * tensor_parallel_shards == 0, as every MLC model file does). */
enum kv_rule {
  KV_REPLICATE, /* HF names: vLLM's replication (N a multiple of kv) */
  KV_MLC,       /* MLC's names: MLC cuts kv heads N ways or refuses */
  KV_GROUPED    /* kv heads interleaved with their q heads: cut N ways */
};

static enum kv_rule kv_rule_of(const struct tpl__preset_def *p, int mlc) {
  if (mlc) return KV_MLC;
  return (p->flags & TPL_P_KV_GROUPED) ? KV_GROUPED : KV_REPLICATE;
}

/* Whether check i of `s` holds at `n` shards: a multiple of n, or, for
 * the kv heads under vLLM's rule, a divisor of n (QKVParallelLinear in
 * vllm/model_executor/layers/linear.py: tp_size >= total_num_kv_heads
 * gives num_kv_head_replicas = divide(tp_size, total_num_kv_heads)). */
static int check_holds(const struct sizes *s, size_t i, uint64_t n,
                       enum kv_rule kv) {
  uint64_t v = s->checks[i].value;
  if (v % n == 0) return 1;
  return i == s->kv_check && kv == KV_REPLICATE && n % v == 0;
}

/* check_holds, and at n > 1 a rank's slice is whole quantization blocks
 * (a replicated kv head's slice is one head), as quant.c's block check
 * will require of the block scales' weights. */
static int check_aligned(const struct sizes *s, size_t i, uint64_t n,
                         enum kv_rule kv) {
  uint64_t v = s->checks[i].value, a = s->checks[i].align;
  if (!check_holds(s, i, n, kv)) return 0;
  return n == 1 || a == 0 ||
         ((v % n == 0 ? v / n : 1) * s->checks[i].unit) % a == 0;
}

/* The blocks a block-quantized HF checkpoint's cuts must keep whole
 * (config.json quantization_config): fp8's weight_block_size [bn, bk],
 * where every size but the kv heads' is cut both as a column-parallel
 * output, in bn-blocks, and as a row-parallel input, in bk-blocks (a
 * multiple of both), the kv heads only as outputs; mxfp4's 32-wide
 * blocks along the experts' intermediate size (gpt-oss's
 * down_proj_blocks [E, H, I / 32, 16] cut along dim 2).  Other methods
 * and a block size that is no two positive numbers leave the sizes
 * unaligned. */
static void set_alignment(const json_t *config, struct sizes *s) {
  const json_t *qc = json_object_get(config, "quantization_config");
  const char *m = json_string_value(json_object_get(qc, "quant_method"));
  const json_t *bs = json_object_get(qc, "weight_block_size");
  uint64_t bn = 0, bk = 0, both;
  if (m != NULL && strcmp(m, "mxfp4") == 0) {
    for (size_t i = 0; i < s->nchecks; i++)
      if (s->checks[i].label == s->inter_key) s->checks[i].align = 32;
    return;
  }
  if (m == NULL || strcmp(m, "fp8") != 0 || json_array_size(bs) != 2 ||
      tpl__json_u64(json_array_get(bs, 0), &bn) != 0 ||
      tpl__json_u64(json_array_get(bs, 1), &bk) != 0 || bn == 0 || bk == 0 ||
      bn > MAX_SIZE || bk > MAX_SIZE)
    return;
  both = bn / tpl__gcd_u64(bn, bk) * bk; /* both below 2^32 */
  for (size_t i = 0; i < s->nchecks; i++) {
    int heads = s->checks[i].label == s->heads_key;
    if (heads && s->head_dim == 0) continue; /* MLA: head sizes differ */
    if (heads || i == s->kv_check) s->checks[i].unit = s->head_dim;
    s->checks[i].align = i == s->kv_check ? bn : both;
  }
}

/* Lists the shard counts 1..64 every checked size allows, with whole
 * quantization blocks per rank. */
static void list_good_counts(const struct sizes *s, enum kv_rule kv, char *buf,
                             size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint64_t n = 1; n <= 64 && used < len; n++) {
    size_t i = 0;
    while (i < s->nchecks && check_aligned(s, i, n, kv))
      i++;
    if (i < s->nchecks) continue;
    used += (size_t)snprintf(buf + used, len - used, "%s%llu", used ? ", " : "",
                             (unsigned long long)n);
  }
}

/* Why kv heads that do not divide the shards are refused, by rule. */
static const char *kv_refusal(enum kv_rule kv) {
  switch (kv) {
  case KV_REPLICATE:
    return " or a divisor of them (vLLM replicates kv heads only when the "
           "shards are a multiple of them)";
  case KV_MLC:
    return " (MLC LLM refuses fewer kv heads than shards: its attention "
           "asserts num_key_value_heads % tensor_parallel_shards == 0; "
           "vLLM replicates them, from a Hugging Face checkpoint)";
  default:
    return " (this preset's fused qkv interleaves each kv head with its q "
           "heads: kv heads cannot be replicated)";
  }
}

static int check_divisible(struct sizes *s, uint32_t nshards, enum kv_rule kv,
                           const char *what, struct tpl__error *err) {
  char good[256];
  for (size_t i = 0; i < s->nchecks; i++) {
    uint64_t v = s->checks[i].value;
    if (check_holds(s, i, nshards, kv)) {
      if (i == s->kv_check && v % nshards != 0) s->kv_parts = (uint32_t)v;
      continue;
    }
    list_good_counts(s, kv, good, sizeof(good));
    return tpl__fail(err, TPL_EINDIVISIBLE,
                     "%s: %s = %llu: expected a multiple of the %u shards%s, "
                     "found remainder %llu (shard counts 1..64 that work "
                     "for this model: %s)",
                     what, s->checks[i].label, (unsigned long long)v, nshards,
                     i == s->kv_check ? kv_refusal(kv) : "",
                     (unsigned long long)(v % nshards), good);
  }
  return 0;
}

/* --- building --- */

/* The segment lengths template kind `kind` wants (enum tpl__seg_kind). */
static int fill_segs(int kind, const struct sizes *s, const char *what,
                     struct tpl__shard_spec *spec, struct tpl__error *err) {
  if (kind == TPL_SEGS_SHARED && s->shared == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected 'n_shared_experts' (the shared "
                     "experts' size), found none",
                     what);
  if (kind == TPL_SEGS_QKV) {
    /* Each size is below 2^32, so the products fit in 64 bits. */
    spec->nsegs = 3;
    spec->segs[0] = s->heads * s->head_dim;
    spec->segs[1] = spec->segs[2] = s->kv_heads * s->head_dim;
    spec->parts[1] = spec->parts[2] = s->kv_parts; /* QKVParallelLinear */
  } else if (kind == TPL_SEGS_EEE) {
    spec->nsegs = 3;
    spec->segs[0] = spec->segs[1] = spec->segs[2] = s->hidden;
  } else if (kind != TPL_SEGS_NONE) {
    spec->nsegs = 2;
    spec->segs[0] = spec->segs[1] = kind == TPL_SEGS_II    ? s->inter
                                    : kind == TPL_SEGS_MOE ? s->moe
                                                           : s->shared;
  }
  return 0;
}

static int add_templates(struct tpl__plan *plan, const struct tpl__ptmpl *t,
                         size_t n, const struct sizes *s, const char *what,
                         struct tpl__error *err) {
  for (size_t i = 0; i < n; i++) {
    struct tpl__shard_spec spec;
    int rc;
    memset(&spec, 0, sizeof(spec));
    spec.dim = t[i].dim;
    if (t[i].kind == TPL_RULE_SHARD &&
        (rc = fill_segs(t[i].segs, s, what, &spec, err)) != 0)
      return rc;
    /* A k/v projection, its bias or a per-kv-head norm: the kv heads'
     * cut (vLLM's weight_loader: shard_rank = tp_rank //
     * num_kv_head_replicas for the "k" and "v" shards). */
    if (t[i].unit == TPL_U_KV || t[i].unit == TPL_U_KVH)
      spec.parts[0] = s->kv_parts;
    if (tpl__plan_add_rule(plan, t[i].match, t[i].kind, t[i].name, &spec))
      return tpl__oom(err);
    plan->rules[plan->nrules - 1].bias_vllm = t[i].bias_vllm;
  }
  return 0;
}

/* MLC keeps the model's sizes under "model_config"; multimodal models
 * (gemma3, llama4, llava, ministral3) under "text_config" of either. */
static int sizes_object(const json_t *config, int mlc, unsigned flags,
                        const char *what, const json_t **out,
                        struct tpl__error *err) {
  const json_t *cfg = config, *text;
  if (mlc) {
    cfg = json_object_get(config, "model_config");
    if (!json_is_object(cfg))
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected a 'model_config' object, found %s", what,
                       cfg == NULL ? "none" : "another JSON value");
  }
  text = json_object_get(cfg, "text_config");
  *out = (flags & TPL_P_TEXT) && json_is_object(text) ? text : cfg;
  return 0;
}

int tpl__preset_from_config(const char *name, int mlc, const json_t *config,
                            const char *what, uint32_t nshards, int ep,
                            struct tpl__plan **out, struct tpl__error *err) {
  const struct tpl__preset_def *p = find_preset_or_alias(name);
  const json_t *cfg = NULL;
  struct tpl__plan *plan;
  struct sizes s;
  char source[64 + 4096];
  int rc;
  if (p == NULL)
    return tpl__fail(err, TPL_EPLAN,
                     "preset '%s': expected one of %s, found no such preset",
                     name, tpl__preset_names());
  if (nshards == 0)
    return tpl__fail(err, TPL_EPLAN, "%s: expected at least 1 shard", what);
  if (mlc && p->nmlc == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: preset '%s' has no table in MLC's names: MLC's "
                     "model file for it sets no shard strategy (no "
                     "_set_tp), so MLC runs it unsharded; pass --plan FILE",
                     what, p->name);
  if ((rc = sizes_object(config, mlc, p->flags, what, &cfg, err)) != 0 ||
      (rc = read_sizes(cfg, p->flags, what, &s, err)) != 0)
    return rc;
  if (ep) drop_expert_checks(&s, p->flags);
  if (!mlc) set_alignment(config, &s);
  if ((rc = check_divisible(&s, nshards, kv_rule_of(p, mlc), what, err)) != 0)
    return rc;
  snprintf(source, sizeof(source), "preset %s%s (%s)", p->name,
           mlc ? " [mlc names]" : "", what);
  plan = tpl__plan_new(source);
  if (plan == NULL) return tpl__oom(err);
  plan->preset = p;
  plan->preset_mlc = mlc;
  rc = mlc ? add_templates(plan, p->mlc, p->nmlc, &s, what, err)
           : add_templates(plan, p->hf, p->nhf, &s, what, err);
  if (rc != 0) {
    tpl__plan_free(plan);
    return rc;
  }
  *out = plan;
  return 0;
}

/* --- detecting the architecture --- */

int tpl__preset_detect(const json_t *config, int mlc, const char *what,
                       const char **name, struct tpl__error *err) {
  const json_t *archs = json_object_get(config, "architectures");
  const json_t *type = json_object_get(config, "model_type");
  const char *arch = NULL, *mt = NULL;
  const struct tpl__preset_def *p;
  if (!mlc && json_is_array(archs) && json_array_size(archs) > 0 &&
      json_is_string(json_array_get(archs, 0))) {
    arch = json_string_value(json_array_get(archs, 0));
    *name = map_name(tpl__preset_archs, tpl__npreset_archs, arch);
    if (*name != NULL) return 0;
  }
  if (json_is_string(type)) {
    mt = json_string_value(type);
    if ((p = find_preset_or_alias(mt)) != NULL) {
      *name = p->name;
      return 0;
    }
  }
  return tpl__fail(err, TPL_EPLAN,
                   "%s: expected an architecture with a preset (%s), found "
                   "architectures[0] '%.200s' and model_type '%.200s'; pass "
                   "--plan FILE or a preset name",
                   what, tpl__preset_names(), arch ? arch : "(none)",
                   mt ? mt : "(none)");
}

/* --- checking a model against its preset --- */

/* The layer a tensor belongs to: its first dot-separated component made
 * of digits ("model.layers.7.mlp..." is 7), or -1. */
static long layer_of(const char *name) {
  const char *p = name;
  while (*p != '\0') {
    const char *end = p;
    while (*end >= '0' && *end <= '9')
      end++;
    if (end > p && (*end == '.' || *end == '\0') && end - p < 9)
      return strtol(p, NULL, 10);
    p = strchr(p, '.');
    if (p == NULL) break;
    p++;
  }
  return -1;
}

/* The weight a quantized param stands for: "x.q_weight", "x.q_scale" and
 * "x.weight_scale_inv" all say "x.weight" is there.  Writes into buf. */
static const char *base_name(const char *name, char *buf, size_t len) {
  int qp = tpl__quant_param(name, buf, len);
  if (qp == TPL_QP_Q_WEIGHT || qp == TPL_QP_Q_SCALE || qp == TPL_QP_SCALE_INV)
    return buf;
  /* compressed-tensors' packed weight stands for its weight. */
  if (tpl__ct_param(name, buf, len) == TPL_CT_PACKED) return buf;
  return name;
}

/* A tensor inside a layer, with two or more dims, that no rule names: a
 * projection the preset does not know, which would go out unsharded. */
static int check_unmatched(const struct tpl__plan *p,
                           const struct tpl__model *m,
                           const struct tpl__strategy *s,
                           struct tpl__error *err) {
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    if (s[i].rule >= 0 || t->ndim < 2 || layer_of(t->name) < 0) continue;
    return tpl__fail(err, TPL_EPLAN,
                     "%s: tensor '%s' (%d dims, in layer %ld): expected "
                     "every layer tensor of 2 or more dims to be named by a "
                     "rule, found none for it (another architecture, or a "
                     "projection this preset does not know: pass --plan "
                     "FILE)",
                     p->source, t->name, t->ndim, layer_of(t->name));
  }
  return 0;
}

/* Marks seen[layer * n + j] for every required template j a tensor of
 * that layer matches (tensors a replicate rule matched first do not
 * count); *nlayers is one past the highest such layer. */
static void mark_required(const struct tpl__ptmpl *t, size_t n,
                          const struct tpl__model *m,
                          const struct tpl__strategy *s, unsigned char *seen,
                          size_t cap, size_t *nlayers) {
  char buf[TPL_MAX_NAME + 16];
  *nlayers = 0;
  for (size_t i = 0; i < m->ntensors; i++) {
    const char *name = base_name(m->tensors[i].name, buf, sizeof(buf));
    long layer = layer_of(name);
    /* A replicate rule took it first (a vision tower's own layers). */
    int whole = s[i].rule >= 0 && t[s[i].rule].kind == TPL_RULE_REPLICATE;
    if (layer < 0 || (size_t)layer >= cap || whole) continue;
    for (size_t j = 0; j < n; j++) {
      if (t[j].req == TPL_REQ_NO || !tpl__glob_match(t[j].match, name))
        continue;
      seen[(size_t)layer * n + j] = 1;
      if ((size_t)layer + 1 > *nlayers) *nlayers = (size_t)layer + 1;
    }
  }
}

/* The first template of kind `req` layer row `row` lacks, or -1. */
static long first_missing(const struct tpl__ptmpl *t, size_t n,
                          const unsigned char *row, int req) {
  for (size_t j = 0; j < n; j++)
    if (t[j].req == req && !row[j]) return (long)j;
  return -1;
}

/* The first template some layer must match (every table has one). */
static const char *first_required(const struct tpl__ptmpl *t, size_t n) {
  for (size_t j = 0; j < n; j++)
    if (t[j].req != TPL_REQ_NO) return t[j].match;
  return "(none)";
}

/* --- which layers are mixtures of experts, as the config says --- */

/* How a preset's config places its MoE layers.  When `known` is 0 the
 * config says nothing, and each layer is judged by its tensors' names. */
struct moe_layers {
  int known;
  uint64_t first_dense, freq; /* deepseek: MoE from first_k_dense_replace,
                                 every moe_layer_freq-th */
  uint64_t step;              /* llama4: every interleave_moe_layer_step-th */
  const json_t *list;         /* llama4: an explicit "moe_layers" array */
  int all;                    /* minicpm: every layer (num_experts > 0) */
};

static uint64_t cfg_u64(const json_t *cfg, const char *key, uint64_t dflt) {
  uint64_t v;
  return tpl__json_u64(json_object_get(cfg, key), &v) == 0 ? v : dflt;
}

/* Fills the zeroed *k from `cfg` as `flags` says. */
static void read_moe_layers(const json_t *cfg, unsigned flags,
                            struct moe_layers *k) {
  if (flags & TPL_P_KIND_DS) {
    k->known = json_is_integer(json_object_get(cfg, "first_k_dense_replace"));
    k->first_dense = cfg_u64(cfg, "first_k_dense_replace", 0);
    k->freq = cfg_u64(cfg, "moe_layer_freq", 1);
    if (json_is_null(json_object_get(cfg, "n_routed_experts")))
      k->first_dense = UINT64_MAX; /* no experts: every layer dense */
  } else if (flags & TPL_P_KIND_STEP) {
    k->list = json_object_get(cfg, "moe_layers");
    if (!json_is_array(k->list)) k->list = NULL;
    k->step = cfg_u64(cfg, "interleave_moe_layer_step", 0);
    k->known = k->list != NULL || k->step != 0;
  } else if (flags & TPL_P_KIND_EXPERTS) {
    k->known = 1;
    k->all = cfg_u64(cfg, "num_experts", 0) > 0;
  }
}

static int in_list(const json_t *list, size_t layer) {
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *v = json_array_get(list, i);
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        (uint64_t)json_integer_value(v) == layer)
      return 1;
  }
  return 0;
}

/* 1 when the config makes `layer` a MoE layer, 0 dense, -1 unknown. */
static int layer_is_moe(const struct moe_layers *k, size_t layer) {
  if (!k->known) return -1;
  if (k->list != NULL) return in_list(k->list, layer);
  if (k->step != 0) return (layer + 1) % k->step == 0;
  if (k->freq != 0) return layer >= k->first_dense && layer % k->freq == 0;
  return k->all;
}

/* Reads where the config `cfg` (the preset's config.json or
 * mlc-chat-config.json, may be NULL) puts MoE layers into *k, which
 * borrows from it.  A config without them leaves them unknown: the
 * tensors' names decide. */
static void config_moe_layers(const struct tpl__preset_def *d, int mlc,
                              const json_t *cfg, struct moe_layers *k) {
  unsigned kinds = TPL_P_KIND_DS | TPL_P_KIND_STEP | TPL_P_KIND_EXPERTS;
  struct tpl__error ignored;
  const json_t *obj;
  memset(k, 0, sizeof(*k));
  if ((d->flags & kinds) != 0 && cfg != NULL &&
      sizes_object(cfg, mlc, d->flags, "config", &obj, &ignored) == 0)
    read_moe_layers(obj, d->flags, k);
}

/* The template a layer lacks: every layer needs all TPL_REQ_LAYER ones
 * and, in a preset with dense and MoE layers, all of the kind the config
 * gives it (`moe` 1 or 0), or of either kind (`moe` -1). */
static long layer_missing(const struct tpl__ptmpl *t, size_t n,
                          const unsigned char *row, int moe_layer) {
  long j = first_missing(t, n, row, TPL_REQ_LAYER), dense, moe;
  if (j >= 0) return j;
  dense = first_missing(t, n, row, TPL_REQ_DENSE);
  moe = first_missing(t, n, row, TPL_REQ_MOE);
  if (moe_layer == 1) return moe;
  if (moe_layer == 0) return dense;
  if (dense < 0 || moe < 0) return -1;
  /* Neither kind complete: name what the layer started to be. */
  for (size_t k = 0; k < n; k++)
    if (t[k].req == TPL_REQ_MOE && row[k]) return moe;
  return dense;
}

/* Stores in *out_layers one past the highest layer holding a tensor the
 * preset must shard. */
static int check_required(const struct tpl__plan *p, const struct tpl__ptmpl *t,
                          size_t n, const struct tpl__model *m,
                          const struct tpl__strategy *s,
                          const struct moe_layers *k, size_t *out_layers,
                          struct tpl__error *err) {
  size_t cap = m->ntensors, nlayers = 0;
  unsigned char *seen;
  long miss = -1;
  size_t layer = 0;
  if (cap == 0 || n == 0) cap = 1;
  seen = calloc(cap, n);
  if (seen == NULL) return tpl__oom(err);
  mark_required(t, n, m, s, seen, cap, &nlayers);
  *out_layers = nlayers;
  for (; layer < nlayers && miss < 0; layer++)
    miss = layer_missing(t, n, seen + layer * n, layer_is_moe(k, layer));
  free(seen);
  if (nlayers == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: expected layer tensors such as '%s', found none "
                     "(another architecture? pass --plan FILE or the "
                     "right preset)",
                     p->source, first_required(t, n));
  if (miss < 0) return 0;
  return tpl__fail(err, TPL_EPLAN,
                   "%s: layer %zu: expected a tensor matching '%s' (one the "
                   "preset must shard in every such layer), found none",
                   p->source, layer - 1, t[miss].match);
}

/* --- the checkpoint against the config --- */

/* What a unit measures by the config: *want and a text naming the keys
 * and numbers ("num_attention_heads x head_dim = 8 x 32").  0 when the
 * config does not give it. */
static int unit_size(const struct sizes *s, int unit, uint64_t *want, char *how,
                     size_t len) {
  uint64_t a = 0, b = 1;
  const char *ka = NULL, *kb = NULL;
  switch (unit) {
  case TPL_U_Q:
    a = s->heads, ka = s->heads_key, b = s->head_dim;
    kb = s->hd_key;
    break;
  case TPL_U_KV:
    a = s->kv_heads, ka = s->kv_key, b = s->head_dim;
    kb = s->hd_key;
    break;
  case TPL_U_I:
    a = s->inter, ka = s->inter_key;
    break;
  case TPL_U_MOE:
    a = s->moe, ka = s->moe_key;
    break;
  case TPL_U_SHARED:
    a = s->shared, ka = s->shared_key;
    break;
  case TPL_U_H:
    a = s->heads, ka = s->heads_key;
    break;
  case TPL_U_KVH:
    a = s->kv_heads, ka = s->kv_key;
    break;
  default:
    return 0;
  }
  if (a == 0 || b == 0 || ka == NULL) return 0;
  *want = a * b; /* both below 2^32 */
  if (kb != NULL)
    snprintf(how, len, "%s x %s = %llu x %llu", ka, kb, (unsigned long long)a,
             (unsigned long long)b);
  else
    snprintf(how, len, "%s", ka);
  return 1;
}

/* Every tensor a unit-checked rule cuts measures what the config says
 * along the cut dim (quantized params are packed: their weight's rule
 * speaks for them). */
static int check_units(const struct tpl__plan *p, const struct tpl__ptmpl *t,
                       const struct tpl__model *m,
                       const struct tpl__strategy *st, const struct sizes *s,
                       struct tpl__error *err) {
  char how[160], base[TPL_MAX_NAME + 16];
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *x = &m->tensors[i];
    const struct tpl__ptmpl *r = st[i].rule >= 0 ? &t[st[i].rule] : NULL;
    uint64_t want;
    if (r == NULL || r->kind != TPL_RULE_SHARD || r->dim >= x->ndim ||
        tpl__quant_param(x->name, base, sizeof(base)) != TPL_QP_NONE ||
        tpl__ct_param(x->name, base, sizeof(base)) != TPL_CT_NONE ||
        !unit_size(s, r->unit, &want, how, sizeof(how)) ||
        tpl__ct_unpacked(&p->ct, x, r->dim) == want)
      continue;
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': dim %d is %llu, expected %s = %llu "
                     "(the config's size it is cut by); the checkpoint "
                     "contradicts its config",
                     p->source, x->name, r->dim,
                     (unsigned long long)tpl__ct_unpacked(&p->ct, x, r->dim),
                     how, (unsigned long long)want);
  }
  return 0;
}

/* The layers holding the tensors the preset must shard are 0..L-1, L as
 * the config says, and with DeepSeek-V3's multi-token prediction
 * (num_nextn_predict_layers = M, vLLM's DeepSeekMTP) 0..L+M-1: a
 * checkpoint may ship its MTP layers or leave them out. */
static int check_layer_count(const struct tpl__plan *p,
                             const struct tpl__model *m, const struct sizes *s,
                             size_t nlayers, struct tpl__error *err) {
  if (s->layers == 0 || nlayers == s->layers) return 0;
  if (s->mtp > 0 && nlayers == s->layers + s->mtp) return 0;
  if (nlayers < s->layers)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s = %llu: expected layers 0..%llu in the "
                     "checkpoint, found layers 0..%zu (no layer %zu); the "
                     "checkpoint contradicts its config",
                     p->source, s->layers_key, (unsigned long long)s->layers,
                     (unsigned long long)s->layers - 1, nlayers - 1, nlayers);
  if (s->mtp > 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s = %llu and num_nextn_predict_layers = %llu: "
                     "expected layers 0..%llu, or 0..%llu with the "
                     "multi-token-prediction layers, found layers 0..%zu; "
                     "the checkpoint contradicts its config",
                     p->source, s->layers_key, (unsigned long long)s->layers,
                     (unsigned long long)s->mtp,
                     (unsigned long long)s->layers - 1,
                     (unsigned long long)(s->layers + s->mtp - 1), nlayers - 1);
  for (size_t i = 0; i < m->ntensors; i++)
    if (layer_of(m->tensors[i].name) == (long)s->layers)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s' is in layer %llu: expected layers "
                       "0..%llu (%s = %llu), found %zu layers; the "
                       "checkpoint contradicts its config",
                       p->source, m->tensors[i].name,
                       (unsigned long long)s->layers,
                       (unsigned long long)s->layers - 1, s->layers_key,
                       (unsigned long long)s->layers, nlayers);
  return 0; /* not reached: some tensor is in layer nlayers - 1 >= L */
}

/* Experts named one per tensor are 0..X-1, X as the config says. */
static int check_experts(const struct tpl__plan *p, const struct tpl__model *m,
                         const struct sizes *s, struct tpl__error *err) {
  long top = -1;
  const char *top_name = NULL;
  for (size_t i = 0; s->experts > 0 && i < m->ntensors; i++) {
    long e = tpl__expert_of(m->tensors[i].name);
    if (e < 0) continue;
    if ((uint64_t)e >= s->experts)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s' is expert %ld: expected experts "
                       "0..%llu (%s = %llu); the checkpoint contradicts its "
                       "config",
                       p->source, m->tensors[i].name, e,
                       (unsigned long long)s->experts - 1, s->experts_key,
                       (unsigned long long)s->experts);
    if (e > top) top = e, top_name = m->tensors[i].name;
  }
  if (top < 0 || (uint64_t)top + 1 == s->experts) return 0;
  return tpl__fail(err, TPL_EFORMAT,
                   "%s: %s = %llu: expected experts 0..%llu, found experts "
                   "0..%ld at most (the last is '%s'); the checkpoint "
                   "contradicts its config",
                   p->source, s->experts_key, (unsigned long long)s->experts,
                   (unsigned long long)s->experts - 1, top, top_name);
}

/* 1 when a dim of tensor `x` measures like the heads: heads, kv heads,
 * or either times head_dim.  A 1-D tensor of the hidden size (a norm or
 * a row-parallel bias of the hidden state) does not count. */
static int measures_heads(const struct tpl__tensor *x, const struct sizes *s) {
  uint64_t sz[4] = {s->heads, s->kv_heads, s->heads * s->head_dim,
                    s->kv_heads * s->head_dim};
  if (x->ndim == 1 && x->shape[0] == s->hidden) return 0;
  for (int d = 0; d < x->ndim; d++)
    for (size_t k = 0; k < ARRAY_SIZE(sz); k++)
      if (sz[k] != 0 && x->shape[d] == sz[k]) return 1;
  return 0;
}

/* cut[l] = 1 for every layer l < cap with a tensor the plan cuts. */
static void mark_cut_layers(const struct tpl__model *m,
                            const struct tpl__strategy *st, unsigned char *cut,
                            size_t cap) {
  for (size_t i = 0; i < m->ntensors; i++) {
    long layer = layer_of(m->tensors[i].name);
    if (st[i].kind == TPL_RULE_SHARD && layer >= 0 && (size_t)layer < cap)
      cut[layer] = 1;
  }
}

/* A layer tensor delivered whole (replicated, or a scaled bias) that
 * measures like the heads, in a layer whose heads are cut, with no reason
 * in its rule: its rows belong to heads the rank does not hold (Cohere's
 * per-head q_norm under a `*norm.weight` rule). */
static int check_whole_heads(const struct tpl__plan *p,
                             const struct tpl__ptmpl *t,
                             const struct tpl__model *m,
                             const struct tpl__strategy *st,
                             const struct sizes *s, struct tpl__error *err) {
  char base[TPL_MAX_NAME + 16];
  size_t cap = m->ntensors ? m->ntensors : 1; /* layers < tensors */
  unsigned char *cut = calloc(cap, 1);
  if (cut == NULL) return tpl__oom(err);
  mark_cut_layers(m, st, cut, cap);
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *x = &m->tensors[i];
    const struct tpl__ptmpl *r = st[i].rule >= 0 ? &t[st[i].rule] : NULL;
    long layer = layer_of(x->name);
    if (st[i].kind == TPL_RULE_SHARD || layer < 0 || (size_t)layer >= cap ||
        !cut[layer] || (p->ep_expert != NULL && p->ep_expert(x->name)) ||
        (r != NULL && r->kind == TPL_RULE_REPLICATE && r->name != NULL) ||
        tpl__quant_param(x->name, base, sizeof(base)) != TPL_QP_NONE ||
        tpl__ct_param(x->name, base, sizeof(base)) != TPL_CT_NONE ||
        !measures_heads(x, s))
      continue;
    free(cut);
    return tpl__fail(
        err, TPL_EPLAN,
        "%s: tensor '%s' (layer %ld): a dim measures like the "
        "heads (%s %llu, %s %llu, head_dim %llu), but %s "
        "delivers it whole while the layer's heads are cut; "
        "expected a rule that cuts it with its heads or "
        "replicates it for a stated reason (pass --plan FILE)",
        p->source, x->name, layer, s->heads_key, (unsigned long long)s->heads,
        s->kv_key ? s->kv_key : "kv heads", (unsigned long long)s->kv_heads,
        (unsigned long long)s->head_dim, r != NULL ? r->match : "no rule");
  }
  free(cut);
  return 0;
}

int tpl__preset_check(const struct tpl__plan *p, const struct tpl__model *m,
                      const struct tpl__strategy *s, const json_t *config,
                      struct tpl__error *err) {
  const struct tpl__preset_def *d = p->preset;
  const struct tpl__ptmpl *t;
  const json_t *cfg = NULL;
  struct moe_layers k;
  struct sizes sz;
  size_t n, nlayers = 0;
  int rc;
  if (d == NULL) return 0;
  t = p->preset_mlc ? d->mlc : d->hf;
  n = p->preset_mlc ? d->nmlc : d->nhf;
  rc = check_unmatched(p, m, s, err);
  if (rc != 0) return rc;
  config_moe_layers(d, p->preset_mlc, config, &k);
  rc = check_required(p, t, n, m, s, &k, &nlayers, err);
  if (rc != 0 || config == NULL) return rc;
  if ((rc = sizes_object(config, p->preset_mlc, d->flags, p->source, &cfg,
                         err)) != 0 ||
      (rc = read_sizes(cfg, d->flags, p->source, &sz, err)) != 0 ||
      (rc = check_units(p, t, m, s, &sz, err)) != 0 ||
      (rc = check_layer_count(p, m, &sz, nlayers, err)) != 0 ||
      (rc = check_experts(p, m, &sz, err)) != 0)
    return rc;
  return check_whole_heads(p, t, m, s, &sz, err);
}
