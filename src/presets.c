/* presets.c - the built-in plans.  Each preset is a table of rule
 * templates over the tensor names of one architecture; the segment
 * lengths of fused weights (q/k/v, gate/up) are filled in from the model's
 * config, which is also checked against the shard count before anything
 * moves.
 *
 * What is sharded follows MLC LLM and Megatron: column-parallel
 * projections (q, k, v, gate, up, fc) along their output features,
 * row-parallel ones (o, down, proj) along their input features, and the
 * row-parallel biases marked scale_bias.  Embeddings, lm_head and norms
 * are replicated (explicit `replicate` rules): MLC does not shard them by
 * default, and a vocab-parallel embedding needs engine support that a
 * plain loader cannot assume.  Tensors no rule names (rotary caches,
 * attention-mask buffers, routers) are replicated too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "jsonu.h"
#include "model.h"
#include "presets.h"

/* Which segment list a template wants, filled from the config. */
enum seg_kind {
  SEGS_NONE = 0,
  SEGS_QKV, /* [heads*hd, kv*hd, kv*hd] */
  SEGS_II,  /* [I, I] */
  SEGS_EEE  /* [E, E, E] (hidden size, three times) */
};

struct tmpl {
  const char *match;
  int kind;
  const char *name;
  int dim;
  int segs;
};

#define SHARD(m, n, d, s) {m, TPL_RULE_SHARD, n, d, s}
#define SCALE(m) {m, TPL_RULE_SCALE_BIAS, NULL, 0, SEGS_NONE}
#define REPL(m) {m, TPL_RULE_REPLICATE, NULL, 0, SEGS_NONE}

/* --- HF names --- */

#define HF_LLAMA_ATTN                                              \
  SHARD("*.self_attn.q_proj.weight", "_shard_q", 0, SEGS_NONE),    \
  SHARD("*.self_attn.k_proj.weight", "_shard_k", 0, SEGS_NONE),    \
  SHARD("*.self_attn.v_proj.weight", "_shard_v", 0, SEGS_NONE),    \
  SHARD("*.self_attn.q_proj.bias", "_shard_q_bias", 0, SEGS_NONE), \
  SHARD("*.self_attn.k_proj.bias", "_shard_k_bias", 0, SEGS_NONE), \
  SHARD("*.self_attn.v_proj.bias", "_shard_v_bias", 0, SEGS_NONE), \
  SHARD("*.self_attn.o_proj.weight", "_shard_o", 1, SEGS_NONE),    \
  SCALE("*.self_attn.o_proj.bias")

#define HF_LLAMA_TAIL                                                      \
  REPL("*embed_tokens.weight"), REPL("lm_head.weight"), REPL("*norm.weight")

static const struct tmpl hf_llama[] = {
    HF_LLAMA_ATTN,
    SHARD("*.mlp.gate_proj.weight", "_shard_gate", 0, SEGS_NONE),
    SHARD("*.mlp.up_proj.weight", "_shard_up", 0, SEGS_NONE),
    SHARD("*.mlp.gate_proj.bias", "_shard_gate_bias", 0, SEGS_NONE),
    SHARD("*.mlp.up_proj.bias", "_shard_up_bias", 0, SEGS_NONE),
    SHARD("*.mlp.down_proj.weight", "_shard_down", 1, SEGS_NONE),
    SCALE("*.mlp.down_proj.bias"),
    HF_LLAMA_TAIL,
};

static const struct tmpl hf_mixtral[] = {
    HF_LLAMA_ATTN,
    SHARD("*.block_sparse_moe.experts.*.w1.weight", "_shard_w1", 0,
          SEGS_NONE),
    SHARD("*.block_sparse_moe.experts.*.w3.weight", "_shard_w3", 0,
          SEGS_NONE),
    SHARD("*.block_sparse_moe.experts.*.w2.weight", "_shard_w2", 1,
          SEGS_NONE),
    REPL("*.block_sparse_moe.gate.weight"),
    HF_LLAMA_TAIL,
};

static const struct tmpl hf_phi3[] = {
    SHARD("*.self_attn.qkv_proj.weight", "_shard_qkv", 0, SEGS_QKV),
    SHARD("*.self_attn.o_proj.weight", "_shard_o", 1, SEGS_NONE),
    SHARD("*.mlp.gate_up_proj.weight", "_shard_gate_up", 0, SEGS_II),
    SHARD("*.mlp.down_proj.weight", "_shard_down", 1, SEGS_NONE),
    HF_LLAMA_TAIL,
};

/* GPT-2's Conv1D stores weights as [in, out]: column-parallel layers cut
 * dim 1, row-parallel ones dim 0. */
static const struct tmpl hf_gpt2[] = {
    SHARD("*.attn.c_attn.weight", "_shard_c_attn_weight", 1, SEGS_EEE),
    SHARD("*.attn.c_attn.bias", "_shard_c_attn_bias", 0, SEGS_EEE),
    SHARD("*.attn.c_proj.weight", "_shard_c_proj", 0, SEGS_NONE),
    SCALE("*.attn.c_proj.bias"),
    SHARD("*.mlp.c_fc.weight", "_shard_mlp_c_fc_weight", 1, SEGS_NONE),
    SHARD("*.mlp.c_fc.bias", "_shard_mlp_c_fc_bias", 0, SEGS_NONE),
    SHARD("*.mlp.c_proj.weight", "_shard_mlp_c_proj", 0, SEGS_NONE),
    SCALE("*.mlp.c_proj.bias"),
    REPL("*wte.weight"),
    REPL("*wpe.weight"),
    REPL("lm_head.weight"),
    REPL("*ln_*"),
};

/* HF GPT-NeoX interleaves q, k, v per head in query_key_value, so an even
 * cut of dim 0 gives each rank whole heads: no segs. */
static const struct tmpl hf_gpt_neox[] = {
    SHARD("*.attention.query_key_value.weight", "_shard_qkv_weight", 0,
          SEGS_NONE),
    SHARD("*.attention.query_key_value.bias", "_shard_qkv_bias", 0,
          SEGS_NONE),
    SHARD("*.attention.dense.weight", "_shard_dense", 1, SEGS_NONE),
    SCALE("*.attention.dense.bias"),
    SHARD("*.mlp.dense_h_to_4h.weight", "_shard_dense_h_to_4h_weight", 0,
          SEGS_NONE),
    SHARD("*.mlp.dense_h_to_4h.bias", "_shard_dense_h_to_4h_bias", 0,
          SEGS_NONE),
    SHARD("*.mlp.dense_4h_to_h.weight", "_shard_dense_4h_to_h", 1,
          SEGS_NONE),
    SCALE("*.mlp.dense_4h_to_h.bias"),
    REPL("*embed_in.weight"),
    REPL("embed_out.weight"),
    REPL("*layernorm*"),
};

/* --- MLC names: fused projections, Linear weights [out, in], and the
 * `.*` suffix also covers group-quantized q_weight / q_scale. --- */

#define MLC_TAIL                                                    \
  REPL("*embed_tokens.*"), REPL("lm_head.*"), REPL("*norm.weight")

#define MLC_ATTN                                                   \
  SHARD("*.self_attn.qkv_proj.*", "_shard_qkv", 0, SEGS_QKV),      \
  SHARD("*.self_attn.c_attn.*", "_shard_qkv", 0, SEGS_QKV),        \
  SCALE("*.self_attn.o_proj.bias"),                                \
  SHARD("*.self_attn.o_proj.*", "_shard_o", 1, SEGS_NONE)

static const struct tmpl mlc_llama[] = {
    MLC_ATTN,
    SHARD("*.mlp.gate_up_proj.*", "_shard_mlp_up", 0, SEGS_II),
    SCALE("*.mlp.down_proj.bias"),
    SHARD("*.mlp.down_proj.*", "_shard_mlp_down", 1, SEGS_NONE),
    MLC_TAIL,
};

/* MLC stacks experts: e1_e3 is [experts, 2I, E], e2 is [experts, E, I]. */
static const struct tmpl mlc_mixtral[] = {
    MLC_ATTN,
    SHARD("*.moe.e1_e3.*", "_shard_mlp_up", 1, SEGS_II),
    SHARD("*.moe.e2.*", "_shard_mlp_down", 2, SEGS_NONE),
    REPL("*.moe.gate.*"),
    MLC_TAIL,
};

static const struct tmpl mlc_gpt2[] = {
    SHARD("*.attn.c_attn.*", "_shard_c_attn", 0, SEGS_EEE),
    SCALE("*.attn.c_proj.bias"),
    SHARD("*.attn.c_proj.*", "_shard_c_proj", 1, SEGS_NONE),
    SHARD("*.mlp.c_fc.*", "_shard_mlp_c_fc", 0, SEGS_NONE),
    SCALE("*.mlp.c_proj.bias"),
    SHARD("*.mlp.c_proj.*", "_shard_mlp_c_proj", 1, SEGS_NONE),
    REPL("*wte.*"),
    REPL("*wpe.*"),
    REPL("lm_head.*"),
    REPL("*ln_*"),
};

/* MLC's GPT-NeoX loader de-interleaves query_key_value into [q; k; v]. */
static const struct tmpl mlc_gpt_neox[] = {
    SHARD("*.attention.query_key_value.*", "_shard_qkv", 0, SEGS_EEE),
    SCALE("*.attention.dense.bias"),
    SHARD("*.attention.dense.*", "_shard_dense", 1, SEGS_NONE),
    SHARD("*.mlp.dense_h_to_4h.*", "_shard_dense_h_to_4h", 0, SEGS_NONE),
    SCALE("*.mlp.dense_4h_to_h.bias"),
    SHARD("*.mlp.dense_4h_to_h.*", "_shard_dense_4h_to_h", 1, SEGS_NONE),
    REPL("*embed_in.*"),
    REPL("embed_out.*"),
    REPL("*layernorm*"),
};

struct preset {
  const char *name;
  const struct tmpl *hf;
  size_t nhf;
  const struct tmpl *mlc;
  size_t nmlc;
  int mlp_default_4x; /* intermediate size defaults to 4 * hidden */
};

#define TABLE(t) t, ARRAY_SIZE(t)

static const struct preset presets[] = {
    {"llama", TABLE(hf_llama), TABLE(mlc_llama), 0},
    {"mistral", TABLE(hf_llama), TABLE(mlc_llama), 0},
    {"qwen2", TABLE(hf_llama), TABLE(mlc_llama), 0},
    {"gemma", TABLE(hf_llama), TABLE(mlc_llama), 0},
    {"mixtral", TABLE(hf_mixtral), TABLE(mlc_mixtral), 0},
    {"phi3", TABLE(hf_phi3), TABLE(mlc_llama), 0},
    {"gpt2", TABLE(hf_gpt2), TABLE(mlc_gpt2), 1},
    {"gpt_neox", TABLE(hf_gpt_neox), TABLE(mlc_gpt_neox), 1},
};

/* HF "architectures" values and the preset each one means. */
static const struct {
  const char *arch;
  const char *preset;
} arch_map[] = {
    {"LlamaForCausalLM", "llama"},     {"MistralForCausalLM", "mistral"},
    {"Qwen2ForCausalLM", "qwen2"},     {"GemmaForCausalLM", "gemma"},
    {"MixtralForCausalLM", "mixtral"}, {"Phi3ForCausalLM", "phi3"},
    {"GPT2LMHeadModel", "gpt2"},       {"GPT2Model", "gpt2"},
    {"GPTNeoXForCausalLM", "gpt_neox"},
};

static const struct preset *find_preset(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(presets); i++)
    if (strcmp(presets[i].name, name) == 0) return &presets[i];
  return NULL;
}

int tpl__preset_known(const char *name) { return find_preset(name) != NULL; }

const char *tpl__preset_names(void) {
  return "llama, mistral, qwen2, gemma, mixtral, phi3, gpt2, gpt_neox";
}

/* --- sizes from the config --- */

struct sizes {
  uint64_t hidden, heads, kv_heads, head_dim, inter;
  const char *heads_key, *kv_key, *inter_key; /* as named in the config */
};

#define MAX_SIZE (1ull << 32) /* no model dimension is this large */

/* Reads the first of `keys` present (and not null) as a positive integer
 * and stores which key it was in *key (may be NULL).  Returns 0, 1 when
 * none is present, or TPL_EFORMAT. */
static int get_size(const json_t *cfg, const char *const *keys,
                    const char *what, uint64_t *out, const char **key,
                    struct tpl_error *err) {
  for (; *keys != NULL; keys++) {
    const json_t *v = json_object_get(cfg, *keys);
    uint64_t n;
    if (v == NULL || json_is_null(v)) continue;
    if (!json_is_integer(v))
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected '%s' to be a positive integer, found "
                       "another JSON value",
                       what, *keys);
    if (tpl__json_u64(v, &n) != 0 || n == 0 || n > MAX_SIZE)
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
                     struct tpl_error *err) {
  int rc = get_size(cfg, keys, what, out, key, err);
  if (rc == 1)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected '%s' (a positive integer), found none",
                     what, keys[0]);
  return rc;
}

static int read_sizes(const json_t *cfg, const struct preset *p,
                      const char *what, struct sizes *s,
                      struct tpl_error *err) {
  static const char *const hidden[] = {"hidden_size", "n_embd", NULL};
  static const char *const heads[] = {"num_attention_heads", "n_head", NULL};
  static const char *const kv[] = {"num_key_value_heads", NULL};
  static const char *const hd[] = {"head_dim", NULL};
  static const char *const inter[] = {"intermediate_size", "n_inner", NULL};
  int rc;
  if ((rc = need_size(cfg, hidden, what, &s->hidden, NULL, err)) != 0 ||
      (rc = need_size(cfg, heads, what, &s->heads, &s->heads_key, err)) != 0)
    return rc;
  if ((rc = get_size(cfg, kv, what, &s->kv_heads, &s->kv_key, err)) == 1) {
    s->kv_heads = s->heads;
    s->kv_key = s->heads_key;
  } else if (rc != 0) {
    return rc;
  }
  if ((rc = get_size(cfg, hd, what, &s->head_dim, NULL, err)) == 1) {
    if (s->hidden % s->heads != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected hidden size %llu to be a multiple of "
                       "the %llu attention heads (or a 'head_dim'), found "
                       "neither",
                       what, (unsigned long long)s->hidden,
                       (unsigned long long)s->heads);
    s->head_dim = s->hidden / s->heads;
  } else if (rc != 0) {
    return rc;
  }
  rc = p->mlp_default_4x
           ? get_size(cfg, inter, what, &s->inter, &s->inter_key, err)
           : need_size(cfg, inter, what, &s->inter, &s->inter_key, err);
  if (rc != 1) return rc;
  s->inter = 4 * s->hidden; /* GPT-2 / NeoX default; hidden < 2^32 */
  s->inter_key = "intermediate size (4 x hidden)";
  return 0;
}

/* Lists the shard counts 1..64 that divide every checked size. */
static void list_good_counts(const struct sizes *s, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint64_t n = 1; n <= 64 && used < len; n++) {
    if (s->heads % n || s->kv_heads % n || s->inter % n) continue;
    used += (size_t)snprintf(buf + used, len - used, "%s%llu",
                             used ? ", " : "", (unsigned long long)n);
  }
}

static int check_divisible(const struct sizes *s, uint32_t nshards,
                           const char *what, struct tpl_error *err) {
  const struct {
    const char *label;
    uint64_t value;
  } checks[] = {{s->heads_key, s->heads},
                {s->kv_key, s->kv_heads},
                {s->inter_key, s->inter}};
  char good[256];
  for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
    if (checks[i].value % nshards == 0) continue;
    list_good_counts(s, good, sizeof(good));
    return tpl__fail(err, TPL_EINDIVISIBLE,
                     "%s: %s = %llu: expected a multiple of the %u shards, "
                     "found remainder %llu (shard counts 1..64 that work "
                     "for this model: %s)",
                     what, checks[i].label,
                     (unsigned long long)checks[i].value, nshards,
                     (unsigned long long)(checks[i].value % nshards), good);
  }
  return 0;
}

/* --- building --- */

static int fill_segs(int kind, const struct sizes *s, const char *what,
                     struct tpl__shard_spec *spec, struct tpl_error *err) {
  uint64_t q, kv;
  if (kind == SEGS_NONE) return 0;
  if (kind == SEGS_II) {
    spec->nsegs = 2;
    spec->segs[0] = spec->segs[1] = s->inter;
    return 0;
  }
  if (kind == SEGS_EEE) {
    spec->nsegs = 3;
    spec->segs[0] = spec->segs[1] = spec->segs[2] = s->hidden;
    return 0;
  }
  /* Sizes are below 2^32 each, so these products fit; check anyway. */
  if (tpl__mul_u64(s->heads, s->head_dim, &q) != 0 ||
      tpl__mul_u64(s->kv_heads, s->head_dim, &kv) != 0)
    return tpl__fail(err, TPL_EOVERFLOW,
                     "%s: heads x head_dim overflows 64 bits", what);
  spec->nsegs = 3;
  spec->segs[0] = q;
  spec->segs[1] = spec->segs[2] = kv;
  return 0;
}

static int add_templates(struct tpl__plan *plan, const struct tmpl *t,
                         size_t n, const struct sizes *s, const char *what,
                         struct tpl_error *err) {
  for (size_t i = 0; i < n; i++) {
    struct tpl__shard_spec spec;
    int rc;
    memset(&spec, 0, sizeof(spec));
    spec.dim = t[i].dim;
    rc = fill_segs(t[i].segs, s, what, &spec, err);
    if (rc != 0) return rc;
    if (tpl__plan_add_rule(plan, t[i].match, t[i].kind, t[i].name, &spec))
      return tpl__fail(err, -ENOMEM, "out of memory");
  }
  return 0;
}

/* MLC keeps the model's sizes under "model_config". */
static int sizes_object(const json_t *config, int mlc, const char *what,
                        const json_t **out, struct tpl_error *err) {
  const json_t *mc;
  if (!mlc) {
    *out = config;
    return 0;
  }
  mc = json_object_get(config, "model_config");
  if (!json_is_object(mc))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a 'model_config' object, found %s", what,
                     mc == NULL ? "none" : "another JSON value");
  *out = mc;
  return 0;
}

int tpl__preset_from_config(const char *name, int mlc, const json_t *config,
                            const char *what, uint32_t nshards,
                            struct tpl__plan **out, struct tpl_error *err) {
  const struct preset *p = find_preset(name);
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
  if ((rc = sizes_object(config, mlc, what, &cfg, err)) != 0 ||
      (rc = read_sizes(cfg, p, what, &s, err)) != 0 ||
      (rc = check_divisible(&s, nshards, what, err)) != 0)
    return rc;
  snprintf(source, sizeof(source), "preset %s%s (%s)", p->name,
           mlc ? " [mlc names]" : "", what);
  plan = tpl__plan_new(source);
  if (plan == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
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

static const char *preset_for_arch(const char *arch) {
  for (size_t i = 0; i < ARRAY_SIZE(arch_map); i++)
    if (strcmp(arch_map[i].arch, arch) == 0) return arch_map[i].preset;
  return NULL;
}

int tpl__preset_detect(const json_t *config, int mlc, const char *what,
                       const char **name, struct tpl_error *err) {
  const json_t *archs = json_object_get(config, "architectures");
  const json_t *type = json_object_get(config, "model_type");
  const char *arch = NULL, *mt = NULL;
  const struct preset *p;
  if (!mlc && json_is_array(archs) && json_array_size(archs) > 0 &&
      json_is_string(json_array_get(archs, 0))) {
    arch = json_string_value(json_array_get(archs, 0));
    if ((*name = preset_for_arch(arch)) != NULL) return 0;
  }
  if (json_is_string(type)) {
    mt = json_string_value(type);
    if ((p = find_preset(mt)) != NULL) {
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

/* --- reading the config from the model's directory --- */

static int load_config(const struct tpl_model *m, const char *why,
                       char **path, json_t **out, struct tpl_error *err) {
  const char *fname = m->format == TPL_FMT_MLC ? "mlc-chat-config.json"
                                               : "config.json";
  char *buf = NULL;
  size_t len;
  int rc;
  *path = tpl__path_join(m->dir, fname);
  if (*path == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  rc = tpl__read_file(*path, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc == -ENOENT)
    return tpl__fail(err, rc,
                     "%s: not found; %s needs it for the model's sizes "
                     "(pass --plan FILE to use a plan file instead)",
                     *path, why);
  if (rc != 0) return rc;
  rc = tpl__json_parse_object(buf, len, *path, out, err);
  free(buf);
  return rc;
}

static int build_from_dir(const char *name, const struct tpl_model *m,
                          uint32_t nshards, struct tpl__plan **out,
                          struct tpl_error *err) {
  char why[128], *path = NULL;
  json_t *cfg = NULL;
  int mlc = m->format == TPL_FMT_MLC, rc;
  if (name != NULL)
    snprintf(why, sizeof(why), "preset '%s'", name);
  else
    snprintf(why, sizeof(why), "--plan auto");
  rc = load_config(m, why, &path, &cfg, err);
  if (rc == 0 && name == NULL)
    rc = tpl__preset_detect(cfg, mlc, path, &name, err);
  if (rc == 0)
    rc = tpl__preset_from_config(name, mlc, cfg, path, nshards, out, err);
  json_decref(cfg);
  free(path);
  return rc;
}

int tpl__preset_build(const char *name, const struct tpl_model *m,
                      uint32_t nshards, struct tpl__plan **out,
                      struct tpl_error *err) {
  if (!tpl__preset_known(name))
    return tpl__fail(err, TPL_EPLAN,
                     "preset '%s': expected one of %s, found no such preset",
                     name, tpl__preset_names());
  return build_from_dir(name, m, nshards, out, err);
}

int tpl__preset_auto(const struct tpl_model *m, uint32_t nshards,
                     struct tpl__plan **out, struct tpl_error *err) {
  return build_from_dir(NULL, m, nshards, out, err);
}
