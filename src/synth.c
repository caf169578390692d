/* synth.c - writes random but deterministic checkpoints (`tpload synth`).
 *
 * A checkpoint is first described as a list of tensors with the real names
 * and shapes of the chosen HF architecture (or MLC's fused names for an
 * MLC weight directory), in the order the model's state dict has them.
 * That list decides everything else: how tensors are split across files,
 * the index, the tensor cache.  Tensor values come from a splitmix64
 * stream seeded by (seed, tensor name), so a tensor holds the same bytes
 * whatever file it lands in; every value is a finite, non-zero float of
 * magnitude in [1/64, 1/4), which survives bias scaling in any dtype.
 * Safetensors files follow the Rust writer's layout (data sorted by dtype
 * size descending then name, header padded to 8 bytes, `__metadata__`
 * {"format":"pt"}); every file is written to a temp name in bounded
 * chunks, fsynced and renamed (fileio's atomic write, which also fsyncs
 * the directory), and a failed run removes what it wrote. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "fileio.h"
#include "jsonu.h"
#include "md5sum.h"
#include "st_writer.h"
#include "synth.h"

#define NAME_MAX_LEN 128
#define CHUNK_BYTES (4u << 20)      /* generation buffer, a multiple of 8 */
#define MLC_SHARD_BYTES (32u << 20) /* MLC's params_shard_*.bin target */
#define MAX_TENSORS 2000000u
#define MAX_LAYERS 100000u
#define MAX_HIDDEN 65536u
#define MAX_INTERMEDIATE (1u << 20)
#define MAX_VOCAB (1u << 22)
#define MAX_EXPERTS 256u
#define MAX_FILES 99999u
#define MAX_GIB 16384.0

/* ---- architectures ---- */

struct arch_info {
  const char *name;
  const char *hf_class;      /* config.json "architectures" */
  unsigned kv : 1;           /* has num_key_value_heads */
  unsigned qkv_bias : 1;     /* q/k/v projections carry biases (qwen2) */
  unsigned tied : 1;         /* lm_head tied to the embedding, not saved */
  unsigned moe : 1;          /* mixtral experts */
  unsigned fused : 1;        /* HF checkpoint has fused qkv / gate_up */
  unsigned head_dim_key : 1; /* config.json has head_dim */
  unsigned mlc : 1;          /* --format mlc supported */
};

static const struct arch_info archs[TPL_ARCH_COUNT] = {
    [TPL_ARCH_LLAMA] = {"llama", "LlamaForCausalLM", 1, 0, 0, 0, 0, 1, 1},
    [TPL_ARCH_MISTRAL] = {"mistral", "MistralForCausalLM", 1, 0, 0, 0, 0, 1, 1},
    [TPL_ARCH_QWEN2] = {"qwen2", "Qwen2ForCausalLM", 1, 1, 0, 0, 0, 0, 1},
    [TPL_ARCH_GEMMA] = {"gemma", "GemmaForCausalLM", 1, 0, 1, 0, 0, 1, 1},
    [TPL_ARCH_MIXTRAL] = {"mixtral", "MixtralForCausalLM", 1, 0, 0, 1, 0, 1, 0},
    [TPL_ARCH_PHI3] = {"phi3", "Phi3ForCausalLM", 1, 0, 0, 0, 1, 0, 1},
    [TPL_ARCH_GPT2] = {"gpt2", "GPT2LMHeadModel", 0, 0, 1, 0, 0, 0, 0},
    [TPL_ARCH_GPT_NEOX] = {"gpt_neox", "GPTNeoXForCausalLM", 0, 0, 0, 0, 0, 0,
                           0},
};

int tpl__synth_arch_from_name(const char *name) {
  if (strcmp(name, "gpt-neox") == 0) return TPL_ARCH_GPT_NEOX;
  for (int i = 0; i < TPL_ARCH_COUNT; i++)
    if (strcmp(archs[i].name, name) == 0) return i;
  return -1;
}

const char *tpl__synth_arch_name(size_t arch) {
  return archs[arch].name;
}

static int is_gpt(int arch) {
  return arch == TPL_ARCH_GPT2 || arch == TPL_ARCH_GPT_NEOX;
}

/* ---- the tensor list ---- */

struct stensor {
  char name[NAME_MAX_LEN];
  int ndim;
  uint64_t shape[2];
  int dtype; /* enum tpl_dtype, as recorded */
  int gen;   /* dtype of the stored values (see vadd) */
  uint64_t numel;
  uint64_t nbytes; /* bytes stored in its file */
  uint64_t offset; /* in its file, once laid out */
  uint32_t file;   /* index of its data file */
};

/* Errors while building are sticky in `err`, checked once at the end. */
struct tlist {
  struct stensor *v;
  size_t n, cap;
  uint64_t bytes; /* sum of nbytes */
  int dtype;      /* the model's dtype: add()'s default */
  int mlc;        /* MLC tensor cache: float32 stored as bf16 */
  int err;
};

/* Appends a tensor with its element count and stored bytes.  MLC converts
 * with encode_format "f32-to-bf16": a float32 param is stored as bf16
 * (TVM's dump_tensor_cache), so synth generates bf16 values for it. */
static void vadd(struct tlist *l, int dtype, uint64_t d0, uint64_t d1,
                 const char *fmt, va_list ap) {
  struct stensor *t;
  if (l->err != 0) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    if (cap > MAX_TENSORS) cap = MAX_TENSORS;
    if (l->n >= cap) {
      l->err = TPL_ELIMIT;
      return;
    }
    t = realloc(l->v, cap * sizeof(*t));
    if (t == NULL) {
      l->err = -ENOMEM;
      return;
    }
    l->v = t;
    l->cap = cap;
  }
  t = &l->v[l->n];
  memset(t, 0, sizeof(*t));
  vsnprintf(t->name, sizeof(t->name), fmt, ap);
  t->ndim = d1 == 0 ? 1 : 2;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->dtype = dtype;
  t->gen = l->mlc && dtype == TPL_DT_F32 ? TPL_DT_BF16 : dtype;
  if (tpl__mul_u64(d0, d1 == 0 ? 1 : d1, &t->numel) ||
      tpl__mul_u64(t->numel, tpl__dtype_size(t->gen), &t->nbytes) ||
      tpl__add_u64(l->bytes, t->nbytes, &l->bytes))
    l->err = TPL_EOVERFLOW;
  else
    l->n++;
}

/* Appends a tensor of the model's dtype, shape [d0] (d1 == 0) or
 * [d0, d1]. */
__attribute__((format(printf, 4, 5))) static void
add(struct tlist *l, uint64_t d0, uint64_t d1, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(l, l->dtype, d0, d1, fmt, ap);
  va_end(ap);
}

/* Like add() with its own dtype (quantized params). */
__attribute__((format(printf, 5, 6))) static void
add_typed(struct tlist *l, int dtype, uint64_t d0, uint64_t d1, const char *fmt,
          ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(l, dtype, d0, d1, fmt, ap);
  va_end(ap);
}

/* The model's sizes, derived once, typed as config.json's integers. */
struct dims {
  json_int_t E, H, KV, D, I, V, X, L;
  json_int_t q, kv; /* H*D and KV*D */
};

static struct dims dims_of(const struct tpl__synth_opts *o) {
  struct dims d = {.E = o->hidden,
                   .H = o->heads,
                   .KV = o->kv_heads,
                   .I = o->intermediate,
                   .V = o->vocab,
                   .X = o->experts,
                   .L = o->layers};
  d.D = d.E / d.H;
  d.q = d.H * d.D;
  d.kv = d.KV * d.D;
  return d;
}

typedef unsigned long long ull;

/* Module names of a llama-like model.  HF names, and MLC's where its model
 * file differs (mlc-llm python/mlc_llm/model/<arch>/<arch>_model.py):
 * qwen2 fuses q/k/v as self_attn.c_attn; phi3 is transformer.h.{i} with
 * mixer.qkv_proj / mixer.out_proj, ln, and transformer.embd. */
struct names {
  const char *model, *layers, *attn, *qkv, *o, *in_norm, *embed;
};

static const struct names hf_names = {
    "model",  "model.layers",    "self_attn",   "qkv_proj",
    "o_proj", "input_layernorm", "embed_tokens"};
static const struct names mlc_qwen2_names = {
    "model",  "model.layers",    "self_attn",   "c_attn",
    "o_proj", "input_layernorm", "embed_tokens"};
static const struct names mlc_phi3_names = {
    "transformer", "transformer.h", "mixer", "qkv_proj", "out_proj",
    "ln",          "embd"};

static const struct names *names_of(int arch, int mlc) {
  if (mlc && arch == TPL_ARCH_QWEN2) return &mlc_qwen2_names;
  if (mlc && arch == TPL_ARCH_PHI3) return &mlc_phi3_names;
  return &hf_names;
}

static void llama_attn(struct tlist *l, const struct arch_info *a,
                       const struct names *nm, const struct dims *d, int mlc,
                       ull i) {
  const char *p = nm->layers, *at = nm->attn;
  if (a->fused || mlc) {
    add(l, d->q + 2 * d->kv, d->E, "%s.%llu.%s.%s.weight", p, i, at, nm->qkv);
    if (a->qkv_bias)
      add(l, d->q + 2 * d->kv, 0, "%s.%llu.%s.%s.bias", p, i, at, nm->qkv);
  } else {
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int j = 0; j < 3; j++) {
      uint64_t rows = j == 0 ? d->q : d->kv;
      add(l, rows, d->E, "%s.%llu.self_attn.%s_proj.weight", p, i, qkv[j]);
      if (a->qkv_bias)
        add(l, rows, 0, "%s.%llu.self_attn.%s_proj.bias", p, i, qkv[j]);
    }
  }
  add(l, d->E, d->q, "%s.%llu.%s.%s.weight", p, i, at, nm->o);
}

static void llama_mlp(struct tlist *l, const struct arch_info *a,
                      const struct names *nm, const struct dims *d, int mlc,
                      ull i) {
  const char *p = nm->layers;
  if (a->moe) {
    add(l, d->X, d->E, "%s.%llu.block_sparse_moe.gate.weight", p, i);
    for (ull e = 0; e < (ull)d->X; e++) {
      const char *x = "block_sparse_moe.experts";
      add(l, d->I, d->E, "%s.%llu.%s.%llu.w1.weight", p, i, x, e);
      add(l, d->E, d->I, "%s.%llu.%s.%llu.w2.weight", p, i, x, e);
      add(l, d->I, d->E, "%s.%llu.%s.%llu.w3.weight", p, i, x, e);
    }
  } else if (a->fused || mlc) {
    add(l, 2 * d->I, d->E, "%s.%llu.mlp.gate_up_proj.weight", p, i);
  } else {
    add(l, d->I, d->E, "%s.%llu.mlp.gate_proj.weight", p, i);
    add(l, d->I, d->E, "%s.%llu.mlp.up_proj.weight", p, i);
  }
  if (!a->moe) add(l, d->E, d->I, "%s.%llu.mlp.down_proj.weight", p, i);
}

static void build_llama(struct tlist *l, int arch, const struct dims *d,
                        int mlc) {
  const struct arch_info *a = &archs[arch];
  const struct names *nm = names_of(arch, mlc);
  add(l, d->V, d->E, "%s.%s.weight", nm->model, nm->embed);
  for (ull i = 0; i < (ull)d->L && l->err == 0; i++) {
    llama_attn(l, a, nm, d, mlc, i);
    llama_mlp(l, a, nm, d, mlc, i);
    add(l, d->E, 0, "%s.%llu.%s.weight", nm->layers, i, nm->in_norm);
    add(l, d->E, 0, "%s.%llu.post_attention_layernorm.weight", nm->layers, i);
  }
  add(l, d->E, 0, "%s.norm.weight", nm->model);
  if (!a->tied) add(l, d->V, d->E, "lm_head.weight");
}

/* Appends P.I.WHAT.weight [d0(, d1)] and P.I.WHAT.bias [bias]. */
static void add_wb(struct tlist *l, const char *p, ull i, const char *what,
                   uint64_t d0, uint64_t d1, uint64_t bias) {
  add(l, d0, d1, "%s.%llu.%s.weight", p, i, what);
  add(l, bias, 0, "%s.%llu.%s.bias", p, i, what);
}

/* GPT-2's Conv1D weights are stored [in, out]. */
static void build_gpt2(struct tlist *l, const struct dims *d) {
  const char *h = "transformer.h";
  add(l, d->V, d->E, "transformer.wte.weight");
  add(l, 1024, d->E, "transformer.wpe.weight");
  for (ull i = 0; i < (ull)d->L && l->err == 0; i++) {
    add_wb(l, h, i, "ln_1", d->E, 0, d->E);
    add_wb(l, h, i, "attn.c_attn", d->E, 3 * d->E, 3 * d->E);
    add_wb(l, h, i, "attn.c_proj", d->E, d->E, d->E);
    add_wb(l, h, i, "ln_2", d->E, 0, d->E);
    add_wb(l, h, i, "mlp.c_fc", d->E, d->I, d->I);
    add_wb(l, h, i, "mlp.c_proj", d->I, d->E, d->E);
  }
  add(l, d->E, 0, "transformer.ln_f.weight");
  add(l, d->E, 0, "transformer.ln_f.bias");
}

static void build_neox(struct tlist *l, const struct dims *d) {
  const char *p = "gpt_neox.layers";
  add(l, d->V, d->E, "gpt_neox.embed_in.weight");
  for (ull i = 0; i < (ull)d->L && l->err == 0; i++) {
    add_wb(l, p, i, "input_layernorm", d->E, 0, d->E);
    add_wb(l, p, i, "post_attention_layernorm", d->E, 0, d->E);
    add_wb(l, p, i, "attention.query_key_value", 3 * d->E, d->E, 3 * d->E);
    add_wb(l, p, i, "attention.dense", d->E, d->E, d->E);
    add_wb(l, p, i, "mlp.dense_h_to_4h", d->I, d->E, d->I);
    add_wb(l, p, i, "mlp.dense_4h_to_h", d->E, d->I, d->E);
  }
  add(l, d->E, 0, "gpt_neox.final_layer_norm.weight");
  add(l, d->E, 0, "gpt_neox.final_layer_norm.bias");
  add(l, d->V, d->E, "embed_out.weight");
}

/* ---- MLC quantization (mlc-llm python/mlc_llm/quantization/) ---- */

enum param_role { ROLE_OTHER, ROLE_LINEAR, ROLE_EMBEDDING, ROLE_FINAL_FC };

/* What a 2-D ".weight" is in MLC's model: an nn.Embedding, the final fc
 * (utils.py is_final_fc: lm_head) or an nn.Linear. */
static int param_role(const struct stensor *t) {
  size_t n = strlen(t->name);
  if (t->ndim != 2 || n < 7 || strcmp(t->name + n - 7, ".weight") != 0)
    return ROLE_OTHER;
  if (strcmp(t->name, "lm_head.weight") == 0) return ROLE_FINAL_FC;
  if (strstr(t->name, "embed_tokens.weight") != NULL ||
      strstr(t->name, ".embd.weight") != NULL)
    return ROLE_EMBEDDING;
  return ROLE_LINEAR;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

/* group_quantization.py (_quantize, GroupQuantizeLinear): NK layout
 * q_weight [out, storage] uint32, q_scale [out, groups] model dtype; KN
 * layouts store both transposed. */
static void quant_group(struct tlist *l, const struct tpl__quant_scheme *q,
                        const struct stensor *t, int blen) {
  uint64_t out = t->shape[0], groups = ceil_div(t->shape[1], q->group_size);
  uint64_t storage = groups * (q->group_size / (32 / q->bits));
  int kn = q->kn_layout;
  add_typed(l, TPL_DT_U32, kn ? storage : out, kn ? out : storage,
            "%.*s.q_weight", blen, t->name);
  add_typed(l, q->model_dtype, kn ? groups : out, kn ? out : groups,
            "%.*s.q_scale", blen, t->name);
}

/* per_tensor_quantization.py (PerTensorQuantizeLinear): q_weight [out, in]
 * fp8, q_scale [1] and q_calibration_scale [1] float32. */
static void quant_per_tensor(struct tlist *l, const struct tpl__quant_scheme *q,
                             const struct stensor *t, int blen) {
  add_typed(l, q->weight_dtype, t->shape[0], t->shape[1], "%.*s.q_weight", blen,
            t->name);
  if (q->scale) add_typed(l, TPL_DT_F32, 1, 0, "%.*s.q_scale", blen, t->name);
  if (q->calib)
    add_typed(l, TPL_DT_F32, 1, 0, "%.*s.q_calibration_scale", blen, t->name);
}

/* block_scale_quantization.py (BlockScaleQuantizeLinear): weight fp8,
 * weight_scale_inv [ceil(out/b0), ceil(in/b1)] float32, static
 * activation_scale [ceil(in/b1)] float32; MLC's default block 128 x 128. */
static void quant_block(struct tlist *l, const struct tpl__quant_scheme *q,
                        const struct stensor *t, int blen) {
  uint64_t b = 128, in_blocks = ceil_div(t->shape[1], b);
  add_typed(l, q->weight_dtype, t->shape[0], t->shape[1], "%s", t->name);
  add_typed(l, TPL_DT_F32, ceil_div(t->shape[0], b), in_blocks,
            "%.*s.weight_scale_inv", blen, t->name);
  if (q->act_scale)
    add_typed(l, TPL_DT_F32, in_blocks, 0, "%.*s.activation_scale", blen,
              t->name);
}

/* Whether scheme `q` quantizes a param of `role`. */
static int quantizes(const struct tpl__quant_scheme *q, int role) {
  if (role == ROLE_LINEAR) return 1;
  if (q->kind != TPL_QK_GROUP) return 0; /* fp8 kinds: linears only */
  return role == ROLE_EMBEDDING ? q->embedding
                                : role == ROLE_FINAL_FC && q->final_fc;
}

/* Rewrites the unquantized list `in` into `out` as scheme `q` stores it. */
static void quantize_list(const struct tlist *in,
                          const struct tpl__quant_scheme *q,
                          struct tlist *out) {
  for (size_t i = 0; i < in->n && out->err == 0; i++) {
    const struct stensor *t = &in->v[i];
    int role = param_role(t), blen = (int)strlen(t->name) - 7;
    if (role == ROLE_OTHER || !quantizes(q, role))
      add_typed(out, t->dtype, t->shape[0], t->ndim == 2 ? t->shape[1] : 0,
                "%s", t->name);
    else if (q->kind == TPL_QK_GROUP)
      quant_group(out, q, t, blen);
    else if (q->kind == TPL_QK_PER_TENSOR)
      quant_per_tensor(out, q, t, blen);
    else
      quant_block(out, q, t, blen);
  }
}

static void list_init(struct tlist *l, const struct tpl__synth_opts *o) {
  memset(l, 0, sizeof(*l));
  l->dtype = o->dtype;
  l->mlc = o->format == TPL_SYNTH_MLC;
}

/* Builds the tensor list of `o` into *l (free l->v). */
static int build_list(const struct tpl__synth_opts *o, struct tlist *l) {
  struct dims d = dims_of(o);
  struct tlist plain;
  list_init(l, o);
  if (o->arch == TPL_ARCH_GPT2)
    build_gpt2(l, &d);
  else if (o->arch == TPL_ARCH_GPT_NEOX)
    build_neox(l, &d);
  else
    build_llama(l, o->arch, &d, o->format == TPL_SYNTH_MLC);
  if (l->err != 0 || o->quant == NULL || o->quant->kind == TPL_QK_NONE)
    return l->err;
  plain = *l;
  list_init(l, o);
  quantize_list(&plain, o->quant, l);
  free(plain.v);
  return l->err;
}

/* ---- option defaults and checks ---- */

static void apply_defaults(struct tpl__synth_opts *o) {
  if (o->hidden == 0) o->hidden = 256;
  if (o->heads == 0) o->heads = 8;
  if (o->kv_heads == 0)
    o->kv_heads =
        (!is_gpt(o->arch) && o->heads % 2 == 0) ? o->heads / 2 : o->heads;
  if (o->intermediate == 0)
    o->intermediate = is_gpt(o->arch) ? 4 * o->hidden : 2 * o->hidden;
  if (o->vocab == 0) o->vocab = 1024;
  if (o->experts == 0 && o->arch == TPL_ARCH_MIXTRAL) o->experts = 4;
  if (o->files == 0) o->files = 1;
}

static int check_range(const char *opt, uint64_t v, uint64_t max,
                       struct tpl__error *err) {
  if (v >= 1 && v <= max) return 0;
  return tpl__fail(err, TPL_EUSAGE, "synth: %s: expected 1..%llu, found %llu",
                   opt, (ull)max, (ull)v);
}

static int check_sizes(const struct tpl__synth_opts *o,
                       struct tpl__error *err) {
  int rc = check_range("--hidden", o->hidden, MAX_HIDDEN, err);
  if (rc == 0) rc = check_range("--heads", o->heads, o->hidden, err);
  if (rc == 0) rc = check_range("--kv-heads", o->kv_heads, o->heads, err);
  if (rc == 0)
    rc = check_range("--intermediate", o->intermediate, MAX_INTERMEDIATE, err);
  if (rc == 0) rc = check_range("--vocab", o->vocab, MAX_VOCAB, err);
  if (rc == 0) rc = check_range("--files", o->files, MAX_FILES, err);
  if (rc == 0 && o->arch == TPL_ARCH_MIXTRAL)
    rc = check_range("--experts", o->experts, MAX_EXPERTS, err);
  if (rc != 0) return rc;
  if (!archs[o->arch].kv && o->kv_heads != o->heads)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: %s has no grouped-query attention: --kv-heads "
                     "must equal --heads (%llu), found %llu",
                     archs[o->arch].name, (ull)o->heads, (ull)o->kv_heads);
  if (o->hidden % o->heads != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --hidden %llu must be divisible by --heads %llu",
                     (ull)o->hidden, (ull)o->heads);
  if (o->heads % o->kv_heads != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --heads %llu must be divisible by --kv-heads "
                     "%llu",
                     (ull)o->heads, (ull)o->kv_heads);
  return 0;
}

static int check_arch_options(const struct tpl__synth_opts *o,
                              struct tpl__error *err) {
  const struct arch_info *a = &archs[o->arch];
  if (!a->moe && o->experts != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --experts applies to mixtral only, not %s",
                     a->name);
  if (o->format == TPL_SYNTH_MLC && !a->mlc)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --format mlc supports the llama-like archs "
                     "llama, mistral, qwen2, gemma and phi3, not %s",
                     a->name);
  if (o->format == TPL_SYNTH_MLC && o->files > 1)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --files applies to safetensors output, not "
                     "--format mlc (which shards by size)");
  if (o->quant != NULL && o->format != TPL_SYNTH_MLC)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --quant applies to --format mlc only");
  if (o->quant != NULL &&
      (o->quant->kind == TPL_QK_FT || o->quant->kind == TPL_QK_AWQ))
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --quant %s: expected a group (q4f16_1, ...), "
                     "per-tensor (e4m3_e4m3_f16, ...) or block-scale fp8 "
                     "scheme",
                     o->quant->name);
  if (o->gib != 0 && o->layers != 0)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: give --layers or --gib, not both");
  if (o->gib < 0 || o->gib > MAX_GIB || isnan(o->gib))
    return tpl__fail(err, TPL_EUSAGE, "synth: --gib: expected 0..%g, found %g",
                     MAX_GIB, o->gib);
  return 0;
}

/* Bytes of the model with `layers` layers. */
static int bytes_for_layers(const struct tpl__synth_opts *o, uint64_t layers,
                            uint64_t *out) {
  struct tpl__synth_opts t = *o;
  struct tlist l;
  int rc;
  t.layers = layers;
  rc = build_list(&t, &l);
  *out = l.bytes;
  free(l.v);
  return rc;
}

/* Picks the layer count whose total is nearest o->gib GiB (at least 1). */
static int layers_for_gib(struct tpl__synth_opts *o, struct tpl__error *err) {
  uint64_t b1, b2, per, fixed;
  double target = o->gib * 1073741824.0, n;
  int rc = bytes_for_layers(o, 1, &b1);
  if (rc == 0) rc = bytes_for_layers(o, 2, &b2);
  if (rc != 0)
    return tpl__fail(err, rc, "synth: model too large: %s", tpl_strerror(rc));
  per = b2 - b1;
  fixed = b1 - per;
  n = floor((target - (double)fixed) / (double)per + 0.5);
  if (n > MAX_LAYERS)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --gib %g needs %.0f layers at --hidden %llu, "
                     "more than %u: raise --hidden",
                     o->gib, n, (ull)o->hidden, MAX_LAYERS);
  o->layers = n < 1 ? 1 : (uint64_t)n;
  return 0;
}

static int check_list(const struct tpl__synth_opts *o, struct tpl__error *err) {
  struct tlist l;
  int rc = build_list(o, &l);
  size_t n = l.n;
  free(l.v);
  if (rc == TPL_ELIMIT)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: expected at most %u tensors, the options ask "
                     "for more",
                     MAX_TENSORS);
  if (rc != 0)
    return tpl__fail(err, rc, "synth: model too large: %s", tpl_strerror(rc));
  if (o->files > n)
    return tpl__fail(err, TPL_EUSAGE,
                     "synth: --files %llu exceeds the model's %zu tensors",
                     (ull)o->files, n);
  return 0;
}

int tpl__synth_resolve(struct tpl__synth_opts *o, struct tpl__error *err) {
  int rc = check_arch_options(o, err);
  if (rc != 0) return rc;
  if (o->quant != NULL) o->dtype = o->quant->model_dtype;
  apply_defaults(o);
  rc = check_sizes(o, err);
  if (rc == 0 && o->gib > 0) rc = layers_for_gib(o, err);
  if (rc != 0) return rc;
  if (o->layers == 0) o->layers = 2;
  rc = check_range("--layers", o->layers, MAX_LAYERS, err);
  return rc == 0 ? check_list(o, err) : rc;
}

/* ---- values ---- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Each tensor's stream depends only on the seed and its name. */
static uint64_t tensor_seed(uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ull, s = seed;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return splitmix64(&s) ^ h;
}

/* A float of `width` bits from the low bits of r: sign, exponent
 * bias + 0..3 (magnitude [2^-6, 2^-2)), a random `man`-bit mantissa. */
static uint64_t rand_float(uint64_t r, int width, int man, uint64_t bias) {
  return ((r >> (width - 1)) & 1) << (width - 1) |
         (bias + ((r >> man) & 3)) << man | (r & ((1ull << man) - 1));
}

/* Turns one 64-bit draw into 8 little-endian bytes of values: floats as
 * above, fp8 finite (exponent below all-ones), other dtypes raw bits. */
static void word_bytes(uint64_t r, int dtype, uint8_t out[8]) {
  uint64_t v = r;
  if (dtype == TPL_DT_F8_E4M3 || dtype == TPL_DT_F8_E5M2) {
    v = r & 0xbfbfbfbfbfbfbfbfull;
  } else if (dtype == TPL_DT_F32 || dtype == TPL_DT_F16 ||
             dtype == TPL_DT_BF16) {
    int width = dtype == TPL_DT_F32 ? 32 : 16;
    int man = dtype == TPL_DT_F32 ? 23 : dtype == TPL_DT_F16 ? 10 : 7;
    v = 0;
    for (int k = 0; k < 64; k += width)
      v |= rand_float(r >> k, width, man, dtype == TPL_DT_F16 ? 9 : 121) << k;
  }
  for (int k = 0; k < 8; k++)
    out[k] = (uint8_t)(v >> (8 * k));
}

/* Fills `len` bytes; only a tensor's last chunk may be a partial word. */
static void fill(uint64_t *state, int dtype, uint8_t *buf, size_t len) {
  uint8_t w[8];
  size_t i = 0;
  for (; i + 8 <= len; i += 8)
    word_bytes(splitmix64(state), dtype, buf + i);
  if (i < len) {
    word_bytes(splitmix64(state), dtype, w);
    memcpy(buf + i, w, len - i);
  }
}

/* ---- atomic output files ---- */

/* Opens DIR/.NAME.synth-tmp for writing DIR/NAME (fileio's atomic write). */
static int out_open(const char *dir, const char *name, struct tpl__atomic *f,
                    struct tpl__error *err) {
  char tmpname[NAME_MAX_LEN + 32];
  char *path, *tmp;
  int rc;
  snprintf(tmpname, sizeof(tmpname), ".%s.synth-tmp", name);
  path = tpl__path_join(dir, name);
  tmp = tpl__path_join(dir, tmpname);
  if (path == NULL || tmp == NULL)
    rc = tpl__fail(err, -ENOMEM, "%s/%s: out of memory", dir, name);
  else
    rc = tpl__atomic_open(path, tmp, f, err);
  free(path);
  free(tmp);
  return rc;
}

static int out_write(struct tpl__atomic *f, const void *buf, size_t len,
                     struct tpl__error *err) {
  int rc = tpl__write_full(f->fd, buf, len);
  if (rc != 0)
    return tpl__fail(err, rc, "%s: write failed: %s", f->path,
                     tpl_strerror(rc));
  return 0;
}

/* After writing ended with `rc`: on 0 fsync, close, rename into place and
 * fsync the directory, else remove the temp file; always releases `f`.
 * `dir` and `name` are what out_open was given. */
static int out_commit(struct tpl__atomic *f, int rc, const char *dir,
                      const char *name, struct tpl__error *err) {
  if (rc != 0) {
    tpl__atomic_abort(f);
    return rc;
  }
  rc = tpl__atomic_commit(f, err);
  if (rc != 0 && f->step != TPL__ATOMIC_DIRSYNC)
    return tpl__fail(err, rc, "%s/%s: cannot finish writing: %s", dir, name,
                     strerror(-rc));
  return rc;
}

/* Dumps `j` (stolen) the way HF does: indent 2, a final newline. */
static int write_json(const char *dir, const char *name, json_t *j,
                      size_t flags, struct tpl__error *err) {
  char *text = j == NULL ? NULL : json_dumps(j, flags | JSON_REAL_PRECISION(8));
  struct tpl__atomic f;
  int rc;
  json_decref(j);
  if (text == NULL)
    return tpl__fail(err, -ENOMEM, "%s/%s: out of memory", dir, name);
  rc = out_open(dir, name, &f, err);
  if (rc == 0) {
    rc = out_write(&f, text, strlen(text), err);
    if (rc == 0) rc = out_write(&f, "\n", 1, err);
    rc = out_commit(&f, rc, dir, name, err);
  }
  free(text);
  return rc;
}

/* ---- the output directory ---- */

static const char *const own_files[] = {"config.json",
                                        "model.safetensors",
                                        "model.safetensors.index.json",
                                        "model-*-of-*.safetensors",
                                        "tensor-cache.json",
                                        "ndarray-cache.json",
                                        "params_shard_*.bin",
                                        "mlc-chat-config.json",
                                        ".*.synth-tmp"};

static int is_own_file(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(own_files); i++)
    if (fnmatch(own_files[i], name, FNM_PERIOD) == 0) return 1;
  return 0;
}

/* Counts entries; with `clean`, unlinks the ones synth writes first. */
static int scan_dir(const char *dir, int clean, size_t *left,
                    struct tpl__error *err) {
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t n = 0;
  int rc = 0;
  if (d == NULL)
    return tpl__fail(err, TPL_EOUTPUT, "%s: cannot open directory: %s", dir,
                     strerror(errno));
  while (rc == 0 && (e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (!clean || !is_own_file(name))
      n++;
    else if (unlinkat(dirfd(d), name, 0) != 0)
      rc = tpl__fail(err, TPL_EOUTPUT, "%s/%s: cannot remove: %s", dir, name,
                     strerror(errno));
  }
  closedir(d);
  *left = n;
  return rc;
}

/* mkdir -p: creates the missing parents of `dir`, then `dir`. */
static int make_dirs(const char *dir) {
  char *p = strdup(dir);
  int rc = 0;
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  for (char *s = p + 1; rc == 0 && *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = -1;
    *s = '/';
  }
  if (rc == 0) rc = mkdir(p, 0755);
  free(p);
  return rc;
}

static int prepare_dir(const char *dir, int force, struct tpl__error *err) {
  size_t n;
  int rc;
  if (make_dirs(dir) == 0) return 0;
  if (errno != EEXIST)
    return tpl__fail(err, TPL_EOUTPUT, "%s: cannot create directory: %s", dir,
                     strerror(errno));
  if (!tpl__is_dir(dir))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: expected a directory, found another file type", dir);
  rc = scan_dir(dir, 0, &n, err);
  if (rc != 0 || n == 0) return rc;
  if (!force)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: expected an empty or new directory, found %zu "
                     "entries (use --force to overwrite)",
                     dir, n);
  return scan_dir(dir, 1, &n, err);
}

/* ---- safetensors files ---- */

/* The Rust writer's data order is dtype alignment descending, then name;
 * a synth model has one dtype, so the name decides. */
static int cmp_data_order(const void *pa, const void *pb) {
  const struct stensor *a = *(const struct stensor *const *)pa;
  const struct stensor *b = *(const struct stensor *const *)pb;
  return strcmp(a->name, b->name);
}

/* The tensor's bytes to f, and into md5 (NULL: none). */
static int write_tensor_data(struct tpl__atomic *f, const struct stensor *t,
                             const struct tpl__synth_opts *o, uint8_t *buf,
                             struct tpl__md5 *md5, struct tpl__error *err) {
  uint64_t state = tensor_seed(o->seed, t->name), left = t->nbytes;
  while (left > 0) {
    size_t c = left < CHUNK_BYTES ? (size_t)left : CHUNK_BYTES;
    int rc;
    fill(&state, t->gen, buf, c);
    if (md5 != NULL) tpl__md5_update(md5, buf, c);
    rc = out_write(f, buf, c, err);
    if (rc != 0) return rc;
    left -= c;
  }
  return 0;
}

static int st_header(struct stensor **ts, size_t n, uint8_t **hdr, size_t *hlen,
                     struct tpl__error *err) {
  static const char *const meta[2] = {"format", "pt"};
  struct tpl__st_out *outs = calloc(n ? n : 1, sizeof(*outs));
  int rc;
  if (outs == NULL) return tpl__fail(err, -ENOMEM, "synth: out of memory");
  for (size_t i = 0; i < n; i++)
    outs[i] = (struct tpl__st_out){.name = ts[i]->name,
                                   .dtype = ts[i]->dtype,
                                   .ndim = ts[i]->ndim,
                                   .shape = ts[i]->shape,
                                   .nbytes = ts[i]->nbytes};
  rc = tpl__st_build_header(outs, n, meta, 1, hdr, hlen);
  free(outs);
  if (rc != 0)
    return tpl__fail(err, rc, "synth: cannot build a safetensors header: %s",
                     tpl_strerror(rc));
  return 0;
}

/* Writes tensors ts[0..n) (reordered in place) as dir/name. */
static int write_st_file(const char *dir, const char *name, struct stensor **ts,
                         size_t n, const struct tpl__synth_opts *o,
                         uint8_t *buf, struct tpl__error *err) {
  struct tpl__atomic f;
  uint8_t *hdr = NULL;
  size_t hlen;
  int rc;
  qsort(ts, n, sizeof(*ts), cmp_data_order);
  rc = st_header(ts, n, &hdr, &hlen, err);
  if (rc != 0) return rc;
  rc = out_open(dir, name, &f, err);
  if (rc != 0) {
    free(hdr);
    return rc;
  }
  rc = out_write(&f, hdr, hlen, err);
  free(hdr);
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = write_tensor_data(&f, ts[i], o, buf, NULL, err);
  return out_commit(&f, rc, dir, name, err);
}

/* HF's split: tensors in state-dict order, files filled to about
 * total/K each, every file non-empty. */
static void assign_files(struct tlist *l, uint64_t k) {
  uint64_t cum = 0, f = 0;
  for (size_t j = 0; j < l->n; j++) {
    uint64_t left_t = l->n - j - 1, left_f = k - 1 - f;
    l->v[j].file = (uint32_t)f;
    cum += l->v[j].nbytes;
    if (left_f > 0 &&
        ((double)cum * (double)k >= (double)(f + 1) * (double)l->bytes ||
         left_t == left_f))
      f++;
  }
}

static void shard_name(char *buf, size_t len, uint64_t i, uint64_t k) {
  if (k == 1)
    snprintf(buf, len, "model.safetensors");
  else
    snprintf(buf, len, "model-%05llu-of-%05llu.safetensors", (ull)i + 1,
             (ull)k);
}

static int write_index(const char *dir, const struct tlist *l, uint64_t k,
                       struct tpl__error *err) {
  json_t *map = json_object();
  char fname[64];
  for (size_t i = 0; i < l->n; i++) {
    shard_name(fname, sizeof(fname), l->v[i].file, k);
    json_object_set_new(map, l->v[i].name, json_string(fname));
  }
  return write_json(dir, "model.safetensors.index.json",
                    json_pack("{s{sI} so}", "metadata", "total_size",
                              (json_int_t)l->bytes, "weight_map", map),
                    JSON_INDENT(2) | JSON_SORT_KEYS, err);
}

static int write_hf_files(const char *dir, struct tlist *l,
                          const struct tpl__synth_opts *o, uint8_t *buf,
                          struct tpl__error *err) {
  struct stensor **ts = malloc(l->n * sizeof(*ts));
  char fname[64];
  int rc = 0;
  if (ts == NULL) return tpl__fail(err, -ENOMEM, "synth: out of memory");
  assign_files(l, o->files);
  for (uint64_t f = 0; rc == 0 && f < o->files; f++) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
      if (l->v[i].file == f) ts[n++] = &l->v[i];
    shard_name(fname, sizeof(fname), f, o->files);
    rc = write_st_file(dir, fname, ts, n, o, buf, err);
  }
  free(ts);
  if (rc == 0 && o->files > 1) rc = write_index(dir, l, o->files, err);
  return rc;
}

/* ---- config.json ---- */

static json_t *config_llama(const struct tpl__synth_opts *o,
                            const struct dims *d) {
  const struct arch_info *a = &archs[o->arch];
  int arch = o->arch;
  json_t *c = json_pack(
      "{sI sI sI sI sI si sf sf ss si si sb}", "hidden_size", d->E,
      "intermediate_size", d->I, "num_attention_heads", d->H,
      "num_key_value_heads", d->KV, "num_hidden_layers", d->L,
      "max_position_embeddings", 4096, "rms_norm_eps", 1e-5, "rope_theta",
      arch == TPL_ARCH_LLAMA ? 10000.0 : 1000000.0, "hidden_act",
      arch == TPL_ARCH_GEMMA ? "gelu_pytorch_tanh" : "silu", "bos_token_id", 1,
      "eos_token_id", 2, "attention_bias", a->qkv_bias);
  if (a->head_dim_key) json_object_set_new(c, "head_dim", json_integer(d->D));
  if (arch == TPL_ARCH_MISTRAL || arch == TPL_ARCH_QWEN2 ||
      arch == TPL_ARCH_PHI3)
    json_object_set_new(c, "sliding_window", json_integer(4096));
  if (arch == TPL_ARCH_QWEN2)
    json_object_update_new(c, json_pack("{sb sI}", "use_sliding_window", 0,
                                        "max_window_layers", d->L));
  if (arch == TPL_ARCH_PHI3)
    json_object_set_new(c, "original_max_position_embeddings",
                        json_integer(4096));
  if (a->moe)
    json_object_update_new(c,
                           json_pack("{sI sI sf}", "num_local_experts", d->X,
                                     "num_experts_per_tok", d->X < 2 ? d->X : 2,
                                     "router_aux_loss_coef", 0.02));
  return c;
}

static json_t *config_gpt2(const struct dims *d) {
  return json_pack("{sI sI sI sI si si ss sf sI sI}", "n_embd", d->E, "n_head",
                   d->H, "n_layer", d->L, "n_inner", d->I, "n_positions", 1024,
                   "n_ctx", 1024, "activation_function", "gelu_new",
                   "layer_norm_epsilon", 1e-5, "bos_token_id", d->V - 1,
                   "eos_token_id", d->V - 1);
}

static json_t *config_neox(const struct dims *d) {
  return json_pack("{sI sI sI sI si sf si sf sb ss si si}", "hidden_size", d->E,
                   "intermediate_size", d->I, "num_attention_heads", d->H,
                   "num_hidden_layers", d->L, "max_position_embeddings", 2048,
                   "rotary_pct", 0.25, "rotary_emb_base", 10000,
                   "layer_norm_eps", 1e-5, "use_parallel_residual", 1,
                   "hidden_act", "gelu", "bos_token_id", 0, "eos_token_id", 0);
}

/* The keys every arch has, then the arch's own (synth's dtypes have the
 * same names in torch and MLC). */
static json_t *hf_config(const struct tpl__synth_opts *o) {
  const struct arch_info *a = &archs[o->arch];
  struct dims d = dims_of(o);
  json_t *c = json_pack("{s[s] ss sI ss sf sb}", "architectures", a->hf_class,
                        "model_type", a->name, "vocab_size", d.V, "torch_dtype",
                        tpl__dtype_mlc_name(o->dtype), "initializer_range",
                        0.02, "use_cache", 1);
  if (o->arch == TPL_ARCH_GPT2)
    json_object_update_new(c, config_gpt2(&d));
  else if (o->arch == TPL_ARCH_GPT_NEOX)
    json_object_update_new(c, config_neox(&d));
  else
    json_object_update_new(c, config_llama(o, &d));
  if (o->arch != TPL_ARCH_GPT2)
    json_object_set_new(c, "tie_word_embeddings", json_boolean(a->tied));
  return c;
}

/* ---- MLC weight directory ---- */

/* Packs tensors in order into shards of about MLC_SHARD_BYTES; a tensor
 * larger than that gets a shard of its own.  Returns the shard count. */
static uint32_t assign_mlc_shards(struct tlist *l) {
  uint64_t cur = 0;
  uint32_t f = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (cur > 0 && cur + l->v[i].nbytes > MLC_SHARD_BYTES) {
      f++;
      cur = 0;
    }
    l->v[i].file = f;
    l->v[i].offset = cur;
    cur += l->v[i].nbytes;
  }
  return l->n ? f + 1 : 0;
}

/* A record as TVM's dump_tensor_cache writes it for MLC's encode_format
 * "f32-to-bf16": that format on every record, whatever the dtype. */
static json_t *mlc_record(const struct stensor *t) {
  return json_pack("{ss so ss ss sI sI}", "name", t->name, "shape",
                   tpl__json_u64_array(t->shape, (size_t)t->ndim), "dtype",
                   tpl__dtype_mlc_name(t->dtype), "format", "f32-to-bf16",
                   "nbytes", (json_int_t)t->nbytes, "byteOffset",
                   (json_int_t)t->offset);
}

/* Writes params_shard_{f}.bin and appends its entry to `shards`, with
 * the md5sum TVM's writer records (md5sum.h). */
static int write_mlc_shard(const char *dir, const struct tlist *l, uint32_t f,
                           const struct tpl__synth_opts *o, uint8_t *buf,
                           json_t *shards, struct tpl__error *err) {
  struct tpl__atomic out;
  char fname[64];
  json_t *recs;
  uint64_t bytes = 0;
  struct tpl__md5 md5;
  uint8_t sum[16];
  char hex[TPL_MD5_HEX];
  int rc;
  tpl__md5_init(&md5);
  snprintf(fname, sizeof(fname), "params_shard_%u.bin", f);
  rc = out_open(dir, fname, &out, err);
  if (rc != 0) return rc;
  recs = json_array();
  for (size_t i = 0; rc == 0 && i < l->n; i++) {
    if (l->v[i].file != f) continue;
    json_array_append_new(recs, mlc_record(&l->v[i]));
    bytes += l->v[i].nbytes;
    rc = write_tensor_data(&out, &l->v[i], o, buf, &md5, err);
  }
  tpl__md5_digest(&md5, sum);
  tpl__md5_hex(sum, hex);
  /* On failure the caller drops `shards`, this entry with it. */
  json_array_append_new(shards, json_pack("{ss ss sI so ss}", "dataPath", fname,
                                          "format", "raw-shard", "nbytes",
                                          (json_int_t)bytes, "records", recs,
                                          "md5sum", hex));
  return out_commit(&out, rc, dir, fname, err);
}

static json_t *mlc_chat_config(const struct tpl__synth_opts *o) {
  struct dims d = dims_of(o);
  static const char *const quant[] = {"q0bf16", "q0f16", "q0f32"};
  int q = o->dtype == TPL_DT_F16 ? 1 : o->dtype == TPL_DT_F32 ? 2 : 0;
  static const uint64_t block[2] = {128, 128};
  json_t *m = json_pack(
      "{sI sI sI sI sI sI sI si si}", "hidden_size", d.E, "num_attention_heads",
      d.H, "num_key_value_heads", d.KV, "intermediate_size", d.I, "head_dim",
      d.D, "num_hidden_layers", d.L, "vocab_size", d.V, "context_window_size",
      4096, "tensor_parallel_shards", 1);
  if (o->quant != NULL && o->quant->kind == TPL_QK_BLOCK_SCALE)
    json_object_set_new(m, "weight_block_size", tpl__json_u64_array(block, 2));
  return json_pack("{ss ss so sI si si}", "model_type", archs[o->arch].name,
                   "quantization", o->quant != NULL ? o->quant->name : quant[q],
                   "model_config", m, "vocab_size", d.V, "context_window_size",
                   4096, "tensor_parallel_shards", 1);
}

/* convert_weight.py's metadata: ParamSize counts params (tensors),
 * ParamBytes their bytes, BitsPerParam bits per element. */
static json_t *mlc_cache(const struct tlist *l, json_t *shards) {
  uint64_t numel = 0, bytes = 0;
  for (size_t i = 0; i < l->n; i++) {
    numel += l->v[i].numel;
    bytes += l->v[i].nbytes;
  }
  return json_pack(
      "{s{sI sI sf} so}", "metadata", "ParamSize", (json_int_t)l->n,
      "ParamBytes", (json_int_t)bytes, "BitsPerParam",
      numel ? 8.0 * (double)bytes / (double)numel : 0.0, "records", shards);
}

static int write_mlc_files(const char *dir, struct tlist *l,
                           const struct tpl__synth_opts *o, uint8_t *buf,
                           size_t *nfiles, struct tpl__error *err) {
  uint32_t n = assign_mlc_shards(l);
  json_t *shards = json_array();
  int rc = 0;
  for (uint32_t f = 0; rc == 0 && f < n; f++)
    rc = write_mlc_shard(dir, l, f, o, buf, shards, err);
  if (rc != 0) {
    json_decref(shards);
    return rc;
  }
  *nfiles = n;
  rc = write_json(dir, "tensor-cache.json", mlc_cache(l, shards),
                  JSON_INDENT(2) | JSON_PRESERVE_ORDER, err);
  if (rc != 0) return rc;
  return write_json(dir, "mlc-chat-config.json", mlc_chat_config(o),
                    JSON_INDENT(2) | JSON_PRESERVE_ORDER, err);
}

/* ---- driver ---- */

static int write_all(const struct tpl__synth_opts *o, const char *dir,
                     struct tlist *l, uint8_t *buf, size_t *nfiles,
                     struct tpl__error *err) {
  int rc = prepare_dir(dir, o->force, err);
  if (rc != 0) return rc;
  if (o->format == TPL_SYNTH_MLC) {
    rc = write_mlc_files(dir, l, o, buf, nfiles, err);
  } else {
    rc = write_hf_files(dir, l, o, buf, err);
    if (rc == 0)
      rc = write_json(dir, "config.json", hf_config(o),
                      JSON_INDENT(2) | JSON_SORT_KEYS, err);
    *nfiles = (size_t)o->files;
  }
  if (rc != 0) {
    /* No partial checkpoint: the dir held none of synth's files when we
     * started (empty, or cleaned by --force), so all of them are ours. */
    size_t left;
    scan_dir(dir, 1, &left, NULL);
  }
  return rc;
}

int tpl__synth_write(const struct tpl__synth_opts *o, const char *dir,
                     struct tpl__synth_summary *sum, struct tpl__error *err) {
  struct tlist l;
  uint8_t *buf = NULL;
  size_t nfiles = 0;
  int rc = build_list(o, &l);
  if (rc != 0) {
    free(l.v);
    return tpl__fail(err, rc, "synth: cannot describe the model: %s",
                     tpl_strerror(rc));
  }
  buf = malloc(CHUNK_BYTES);
  if (buf == NULL) rc = tpl__fail(err, -ENOMEM, "synth: out of memory");
  if (rc == 0) rc = write_all(o, dir, &l, buf, &nfiles, err);
  if (rc == 0) {
    sum->files = nfiles;
    sum->tensors = l.n;
    sum->bytes = l.bytes;
  }
  free(buf);
  free(l.v);
  return rc;
}
