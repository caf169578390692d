/* quant.c - MLC LLM's quantization schemes and quantized params.  The
 * scheme table follows mlc-llm python/mlc_llm/quantization/quantization.py;
 * the shard rules of quantized params follow quantization/utils.py
 * (apply_sharding), group_quantization.py, per_tensor_quantization.py and
 * block_scale_quantization.py.  The plan (plan.c) looks up the rule of a
 * param's base weight and asks this module what MLC does with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "jsonu.h"
#include "quant.h"

#define F16 TPL_DT_F16
#define BF16 TPL_DT_BF16
#define F32 TPL_DT_F32
#define E4M3 TPL_DT_F8_E4M3
#define E5M2 TPL_DT_F8_E5M2
#define GROUP(n, kn, gs, bits, dt, emb)                                        \
  { n, TPL_QK_GROUP, kn, gs, bits, dt, 0, emb, emb, 0, 0, 0 }
#define PER_TENSOR(n, w, scale, calib)                                         \
  { n, TPL_QK_PER_TENSOR, 0, 0, 0, F16, w, 0, 0, scale, calib, 0 }
#define BLOCK(n, act)                                                          \
  { n, TPL_QK_BLOCK_SCALE, 0, 0, 0, BF16, E4M3, 0, 0, 0, 0, act }
#define OTHER(n, kind, dt)                                                     \
  { n, kind, 0, 0, 0, dt, 0, 0, 0, 0, 0, 0 }

static const struct tpl__quant_scheme schemes[] = {
    OTHER("q0f16", TPL_QK_NONE, F16),
    OTHER("q0bf16", TPL_QK_NONE, BF16),
    OTHER("q0f32", TPL_QK_NONE, F32),
    GROUP("q3f16_0", 1, 40, 3, F16, 1),
    GROUP("q3f16_1", 0, 40, 3, F16, 1),
    GROUP("q4f16_0", 1, 32, 4, F16, 1),
    GROUP("q4f16_1", 0, 32, 4, F16, 1),
    GROUP("q4bf16_0", 1, 32, 4, BF16, 1),
    GROUP("q4bf16_1", 0, 32, 4, BF16, 1),
    GROUP("q4f32_1", 0, 32, 4, F32, 1),
    GROUP("q4f16_2", 0, 32, 4, F16, 0),
    OTHER("q4f16_autoawq", TPL_QK_AWQ, F16),
    OTHER("q4f16_ft", TPL_QK_FT, F16),
    PER_TENSOR("e5m2_e5m2_f16", E5M2, 0, 0),
    PER_TENSOR("e4m3_e4m3_f16", E4M3, 1, 1),
    PER_TENSOR("e4m3_e4m3_f16_max_calibrate", E4M3, 1, 0),
    BLOCK("fp8_e4m3fn_bf16_block_scale", 0),
    BLOCK("fp8_e4m3fn_bf16_block_scale_static_activation", 1),
};

const struct tpl__quant_scheme *tpl__quant_find(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
    if (strcmp(schemes[i].name, name) == 0) return &schemes[i];
  return NULL;
}

void tpl__quant_info_init(struct tpl__quant_info *q) {
  memset(q, 0, sizeof(*q));
  q->block[0] = q->block[1] = 128; /* MLC's default when a config has none */
}

/* --- reading the config --- */

#define MAX_BLOCK (1ull << 32)

static int parse_block(const json_t *v, const char *what,
                       struct tpl__quant_info *q, struct tpl__error *err) {
  uint64_t b[2];
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_array(v) || json_array_size(v) != 2 ||
      tpl__json_u64(json_array_get(v, 0), &b[0]) != 0 ||
      tpl__json_u64(json_array_get(v, 1), &b[1]) != 0 || b[0] == 0 ||
      b[1] == 0 || b[0] > MAX_BLOCK || b[1] > MAX_BLOCK)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected 'weight_block_size' to be two positive "
                     "integers, found another value",
                     what);
  q->block[0] = b[0];
  q->block[1] = b[1];
  return 0;
}

static int parse_scheme(const json_t *v, const char *what,
                        struct tpl__quant_info *q, struct tpl__error *err) {
  const char *s;
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_string(v) || json_string_length(v) >= sizeof(q->scheme_name) ||
      tpl__has_nul(json_string_value(v), json_string_length(v)))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected 'quantization' to be a scheme name such "
                     "as q4f16_1, found another value",
                     what);
  s = json_string_value(v);
  snprintf(q->scheme_name, sizeof(q->scheme_name), "%s", s);
  q->scheme = tpl__quant_find(s);
  return 0;
}

static int parse_shards(const json_t *v, const char *what,
                        struct tpl__quant_info *q, struct tpl__error *err) {
  uint64_t n;
  if (v == NULL || json_is_null(v)) return 0;
  if (tpl__json_u64(v, &n) != 0 || n == 0 || n > UINT32_MAX)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected 'tensor_parallel_shards' to be a positive "
                     "integer, found another value",
                     what);
  q->config_shards = (uint32_t)n;
  return 0;
}

/* weight_block_size sits in model_config (MLC) or quantization_config
 * (HF, and MLC configs that kept it). */
static const json_t *find_block(const json_t *cfg) {
  const json_t *mc = json_object_get(cfg, "model_config");
  const json_t *qc = json_object_get(cfg, "quantization_config");
  const json_t *v = json_object_get(mc, "weight_block_size");
  if (v == NULL) v = json_object_get(qc, "weight_block_size");
  if (v == NULL)
    v = json_object_get(json_object_get(mc, "quantization_config"),
                        "weight_block_size");
  return v;
}

/* quantization_config.quant_method of an HF config: a name kept even
 * when malformed (a non-string is "(not a string)"), so that a method
 * tpload cannot shard is refused rather than ignored; none is "". */
static void parse_method(const json_t *cfg, struct tpl__quant_info *q) {
  const json_t *qc = json_object_get(cfg, "quantization_config");
  const json_t *v = json_object_get(qc, "quant_method");
  if (v == NULL || json_is_null(v)) return;
  if (!json_is_string(v))
    snprintf(q->method, sizeof(q->method), "(not a string)");
  else
    snprintf(q->method, sizeof(q->method), "%.31s", json_string_value(v));
}

int tpl__quant_info_parse(const json_t *cfg, int mlc, const char *what,
                          struct tpl__quant_info *q, struct tpl__error *err) {
  struct tpl__quant_info r;
  int rc;
  tpl__quant_info_init(&r);
  if (!mlc) parse_method(cfg, &r);
  rc = parse_block(find_block(cfg), what, &r, err);
  if (rc == 0 && mlc)
    rc = parse_scheme(json_object_get(cfg, "quantization"), what, &r, err);
  if (rc == 0 && mlc)
    rc = parse_shards(json_object_get(cfg, "tensor_parallel_shards"), what, &r,
                      err);
  if (rc == 0) *q = r;
  return rc;
}

/* What each HF method tpload shards needs: "fp8" (transformers'
 * FineGrainedFP8 / vLLM's Fp8Config) is a weight plus weight_scale_inv
 * blocks or per-tensor scalars, cut by the weight's rule; "mxfp4"
 * (gpt-oss) is *_blocks / *_scales / *_bias cut by the gpt_oss preset or
 * a plan file (interleaved.c guards its gate_up); "compressed-tensors"
 * has its scheme checked and its params derived in quant_ct.c. */
static const char *const shardable_methods[] = {
    "fp8", "mxfp4", "compressed-tensors", "modelopt"};

int tpl__quant_check_method(const struct tpl__quant_info *q, const char *what,
                            struct tpl__error *err) {
  if (q->method[0] == '\0') return 0;
  for (size_t i = 0; i < ARRAY_SIZE(shardable_methods); i++)
    if (strcmp(q->method, shardable_methods[i]) == 0) return 0;
  return tpl__fail(err, TPL_EPLAN,
                   "%s: quantization_config.quant_method '%s': expected a "
                   "method tpload shards (fp8, compressed-tensors, "
                   "modelopt, or gpt-oss's mxfp4), "
                   "found one it does not: its packed weights, scales and "
                   "zero points have no shard rules here, and a rank would "
                   "get slices an engine cannot dequantize",
                   what, q->method);
}

int tpl__quant_check_tp(const struct tpl__quant_info *q, uint32_t nshards,
                        const char *what, struct tpl__error *err) {
  const struct tpl__quant_scheme *s = q->scheme;
  const char *why = NULL;
  if (s == NULL || nshards <= 1) return 0;
  if (s->kind == TPL_QK_GROUP && s->kn_layout)
    why = "its KN weight layout is not supported for tensor parallelism "
          "(MLC's compile.py refuses it; the _1 schemes, e.g. q4f16_1, "
          "use NK and shard)";
  else if (s->kind == TPL_QK_FT)
    why = "MLC refuses faster-transformer quantization under tensor "
          "parallelism (compile.py, convert_weight.py)";
  else if (s->kind == TPL_QK_AWQ)
    why = "MLC's AWQ layers carry no shard strategy "
          "(awq_quantization.py), so no engine shards them";
  if (why == NULL) return 0;
  return tpl__fail(err, TPL_EPLAN,
                   "%s: quantization '%s': expected a scheme MLC can shard "
                   "%u ways, found one it cannot: %s",
                   what, s->name, nshards, why);
}

/* --- quantized params --- */

static const struct {
  const char *suffix; /* after the base name's last '.' */
  int qp;
  const char *func;
} qparams[] = {
    {"q_weight", TPL_QP_Q_WEIGHT, "_q_weight"},
    {"q_scale", TPL_QP_Q_SCALE, "_q_scale"},
    {"q_calibration_scale", TPL_QP_Q_CALIB, NULL},
    {"weight_scale_inv", TPL_QP_SCALE_INV, "_scale_inv"},
    {"activation_scale", TPL_QP_ACT_SCALE, "_activation_scale"},
};

int tpl__quant_weight_of(const char *name, const char *suffix, char *base,
                         size_t cap) {
  const char *dot = strrchr(name, '.');
  size_t stem;
  if (dot == NULL || strcmp(dot + 1, suffix) != 0) return 0;
  stem = (size_t)(dot - name) + 1; /* "<base>." */
  if (stem + sizeof("weight") > cap) return 0;
  memcpy(base, name, stem);
  memcpy(base + stem, "weight", sizeof("weight"));
  return 1;
}

int tpl__quant_param(const char *name, char *base, size_t cap) {
  for (size_t i = 0; i < ARRAY_SIZE(qparams); i++)
    if (tpl__quant_weight_of(name, qparams[i].suffix, base, cap))
      return qparams[i].qp;
  return TPL_QP_NONE;
}

const char *tpl__quant_func_suffix(int qp) {
  for (size_t i = 0; i < ARRAY_SIZE(qparams); i++)
    if (qparams[i].qp == qp) return qparams[i].func;
  return NULL;
}

int tpl__quant_is_scale(const char *name, char *stem, size_t cap) {
  static const char *const scales[] = {"q_scale",      "weight_scale_inv",
                                       "scales",       "qzeros",
                                       "weight_scale", "weight_zero_point"};
  const char *dot = strrchr(name, '.');
  size_t n;
  if (dot == NULL) return 0;
  n = (size_t)(dot - name) + 1;
  for (size_t i = 0; i < ARRAY_SIZE(scales); i++) {
    if (strcmp(dot + 1, scales[i]) != 0) continue;
    if (n + 1 > cap) return 0;
    memcpy(stem, name, n);
    stem[n] = '\0';
    return 1;
  }
  return 0;
}

/* segs[j] / unit, each exact; `unit` is a block (fp8) length. */
static int segs_in_units(const struct tpl__shard_spec *base, uint64_t unit,
                         const char *tname, const char *what,
                         struct tpl__shard_spec *out, struct tpl__error *err) {
  for (size_t j = 0; j < base->nsegs; j++) {
    if (base->segs[j] % unit != 0)
      return tpl__fail(err, TPL_EINDIVISIBLE,
                       "tensor '%s': %s: expected segment %zu of the weight "
                       "(%llu) to be a whole number of %llu-wide blocks, "
                       "found remainder %llu",
                       tname, what, j, (unsigned long long)base->segs[j],
                       (unsigned long long)unit,
                       (unsigned long long)(base->segs[j] % unit));
    out->segs[j] = base->segs[j] / unit;
  }
  return 0;
}

/* MLC's group rule (GroupQuantizeLinear): the groups along the cut input
 * dim must split evenly, so every rank gets whole groups. */
static int check_groups(const struct tpl__tensor *t,
                        const struct tpl__quant_info *q,
                        const struct tpl__shard_spec *s, uint32_t nshards,
                        struct tpl__error *err) {
  uint64_t groups;
  if (s->dim != t->ndim - 1 || s->nsegs > 1) return 0;
  groups = t->shape[s->dim];
  if (groups % nshards == 0) return 0;
  return tpl__fail(err, TPL_EINDIVISIBLE,
                   "tensor '%s': expected its %llu quantization groups%s%s "
                   "along dim %d to split evenly over %u shards, found "
                   "remainder %llu (MLC's group_quantization.py refuses "
                   "this too: use fewer shards or a smaller group size)",
                   t->name, (unsigned long long)groups,
                   q->scheme != NULL ? " of " : "",
                   q->scheme != NULL ? q->scheme->name : "", s->dim, nshards,
                   (unsigned long long)(groups % nshards));
}

/* Segment j of the weight along the cut dim: the rule's, or the whole
 * extent of `weight` (0 when neither is known). */
static uint64_t weight_seg(const struct tpl__shard_spec *base,
                           const struct tpl__tensor *weight, size_t j) {
  if (base->nsegs > 0) return base->segs[j];
  return weight != NULL ? weight->shape[base->dim] : 0;
}

/* Writes the shard counts up to 64 under which every segment's slice is
 * a whole number of `block`-wide blocks, as "1, 2, 4". */
static void format_block_counts(char *buf, size_t cap,
                                const struct tpl__shard_spec *base,
                                const struct tpl__tensor *weight,
                                uint64_t block) {
  size_t used = 0, nsegs = base->nsegs > 0 ? base->nsegs : 1;
  buf[0] = '\0';
  for (uint32_t n = 1; n <= 64 && used < cap; n++) {
    int k, ok = 1;
    for (size_t j = 0; ok && j < nsegs; j++) {
      uint64_t seg = weight_seg(base, weight, j);
      ok = seg % n == 0 && (n == 1 || (seg / n) % block == 0);
    }
    if (!ok) continue;
    k = snprintf(buf + used, cap - used, "%s%u", used ? ", " : "", n);
    if (k < 0) return;
    used += (size_t)k;
  }
}

/* Each rank's slice of every segment along the cut dim must be whole
 * blocks, or its scales are not the blocks of its rows: 192 rows in
 * 128-blocks cut in two give rank 1 rows 96..191 and only scale row 1,
 * while rows 96..127 belong to block 0.  vLLM refuses the same cut
 * (validate_fp8_block_shape in model_executor/layers/quantization/
 * utils/fp8_utils.py; fused_moe's checks in quantization/fp8.py for
 * experts).  A segment that does not divide by N is left to
 * tpl__shard_check's message. */
static int check_block_cut(const struct tpl__tensor *t,
                           const struct tpl__tensor *weight,
                           const struct tpl__shard_spec *base, uint64_t block,
                           const char *method, uint32_t nshards,
                           struct tpl__error *err) {
  size_t nsegs = base->nsegs > 0 ? base->nsegs : 1;
  char works[256];
  if (nshards <= 1) return 0;
  for (size_t j = 0; j < nsegs; j++) {
    /* A replicated kv segment is cut into parts[j] pieces, not N. */
    uint32_t pieces = base->parts[j] != 0 ? base->parts[j] : nshards;
    uint64_t seg = weight_seg(base, weight, j), slice = seg / pieces;
    if (pieces <= 1 || seg == 0 || seg % pieces != 0 || slice % block == 0)
      continue;
    format_block_counts(works, sizeof(works), base, weight, block);
    return tpl__fail(err, TPL_EINDIVISIBLE,
                     "%s: tensor '%s': expected each of the %u shards' slice "
                     "of segment %zu of its weight along dim %d (%llu / %u "
                     "= %llu) to be a whole number of %llu-wide "
                     "quantization blocks, found %llu left over: a rank's "
                     "block scales would not match its rows (vLLM refuses "
                     "this cut too); shard counts that work: %s",
                     method, t->name, nshards, j, base->dim,
                     (unsigned long long)seg, pieces, (unsigned long long)slice,
                     (unsigned long long)block,
                     (unsigned long long)(slice % block), works);
  }
  return 0;
}

int tpl__quant_block_cut(const struct tpl__tensor *t,
                         const struct tpl__tensor *weight,
                         const struct tpl__shard_spec *base, uint64_t block,
                         const char *method, uint32_t nshards,
                         struct tpl__shard_spec *out, struct tpl__error *err) {
  int rc = segs_in_units(base, block, t->name, "block scales", out, err);
  if (rc == 0)
    rc = check_block_cut(t, weight, base, block, method, nshards, err);
  return rc;
}

/* "fp8 weight_block_size [128, 128]": the method (HF's quant_method, or
 * MLC's scheme name) and its blocks, as a refusal names them. */
static const char *block_method(const struct tpl__quant_info *q, char *buf,
                                size_t len) {
  const char *m = q->method[0]        ? q->method
                  : q->scheme_name[0] ? q->scheme_name
                                      : "fp8";
  snprintf(buf, len, "%s weight_block_size [%llu, %llu]", m,
           (unsigned long long)q->block[0], (unsigned long long)q->block[1]);
  return buf;
}

static int derive_block(int qp, const struct tpl__quant_info *q,
                        const struct tpl__tensor *t,
                        const struct tpl__tensor *weight,
                        const struct tpl__shard_spec *base, uint32_t nshards,
                        struct tpl__shard_spec *out, int *replicate,
                        struct tpl__error *err) {
  int in_dim = weight != NULL ? weight->ndim - 1 : 1;
  int bdim, rc;
  char method[128];
  if (qp == TPL_QP_ACT_SCALE) {
    if (base->dim != in_dim) {
      *replicate = 1;
      return 0;
    }
    out->dim = 0;
  }
  if (base->dim < in_dim - 1) return 0; /* an expert axis: whole blocks */
  bdim = base->dim == in_dim ? 1 : 0;
  rc = segs_in_units(base, q->block[bdim], t->name,
                     qp == TPL_QP_ACT_SCALE ? "activation_scale"
                                            : "weight_scale_inv",
                     out, err);
  if (rc != 0) return rc;
  return check_block_cut(t, weight, base, q->block[bdim],
                         block_method(q, method, sizeof(method)), nshards, err);
}

int tpl__quant_derive(int qp, const struct tpl__quant_info *q,
                      const struct tpl__tensor *t,
                      const struct tpl__tensor *weight,
                      const struct tpl__shard_spec *base, uint32_t nshards,
                      struct tpl__shard_spec *out, int *replicate,
                      struct tpl__error *err) {
  int rc = 0;
  *out = *base;
  *replicate = 0;
  if (qp == TPL_QP_Q_CALIB ||
      (qp == TPL_QP_Q_SCALE && tpl__tensor_numel(t) == 1)) {
    *replicate = 1; /* per-tensor scale: the same for every shard */
    return 0;
  }
  if (qp == TPL_QP_SCALE_INV || qp == TPL_QP_ACT_SCALE)
    rc = derive_block(qp, q, t, weight, base, nshards, out, replicate, err);
  if (rc != 0 || *replicate) return rc;
  if (qp == TPL_QP_Q_SCALE) rc = check_groups(t, q, out, nshards, err);
  if (rc == 0)
    rc = tpl__shard_check(t->shape, t->ndim, out, nshards, t->name, err);
  return rc;
}

json_t *tpl__quant_json(const struct tpl__quant_info *q) {
  return json_pack("{s:s, s:s, s:o}", "quantization", q->scheme_name,
                   "quant_method", q->method, "weight_block_size",
                   tpl__json_u64_array(q->block, 2));
}

const char *tpl__quant_label(const struct tpl__quant_info *q, char *buf,
                             size_t len) {
  if (strcmp(q->method, "fp8") == 0)
    snprintf(buf, len, "fp8, weight_block_size [%llu, %llu]",
             (unsigned long long)q->block[0], (unsigned long long)q->block[1]);
  else
    snprintf(buf, len, "%s", q->method[0] ? q->method : q->scheme_name);
  return buf;
}
