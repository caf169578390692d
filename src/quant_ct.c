/* quant_ct.c - compressed-tensors checkpoints (the format llm-compressor
 * writes: config.json quantization_config with quant_method
 * "compressed-tensors", a format and config_groups): which weight scheme
 * they use, and how each quantized param is cut so that every rank's
 * scales and zero points are those of its own rows.  The rules follow
 * vLLM's compressed-tensors schemes (vllm-project/vllm,
 * model_executor/layers/quantization/compressed_tensors/schemes/:
 * compressed_tensors_wNa16.py for pack-quantized int4/int8 weights,
 * compressed_tensors_w8a8_fp8.py and _w8a8_int8.py for the rest). */
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "jsonu.h"
#include "quant.h"
#include "quant_ct.h"

/* The formats whose tensors are the weight (or weight_packed) and its
 * scales, zero points and shape, row for row. */
static const char *const formats[] = {"pack-quantized", "float-quantized",
                                      "int-quantized", "naive-quantized",
                                      "modelopt"};

static const char *str_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static uint64_t u64_of(const json_t *o, const char *key) {
  uint64_t v = 0;
  return tpl__json_u64(json_object_get(o, key), &v) == 0 ? v : 0;
}

/* One config group's "weights" into *w. */
static void read_weights(const json_t *weights, struct tpl__ct_scheme *w) {
  const json_t *bs = json_object_get(weights, "block_structure");
  const char *st = str_of(weights, "strategy");
  const json_t *ao = json_object_get(weights, "actorder");
  memset(w, 0, sizeof(*w));
  snprintf(w->strategy, sizeof(w->strategy), "%.15s", st ? st : "");
  w->num_bits = (uint32_t)u64_of(weights, "num_bits");
  w->group_size = u64_of(weights, "group_size");
  w->actorder = ao != NULL && !json_is_null(ao) && !json_is_false(ao);
  if (json_is_array(bs) && json_array_size(bs) == 2) {
    tpl__json_u64(json_array_get(bs, 0), &w->block[0]);
    tpl__json_u64(json_array_get(bs, 1), &w->block[1]);
  }
}

static int same_weights(const struct tpl__ct_scheme *a,
                        const struct tpl__ct_scheme *b) {
  return strcmp(a->strategy, b->strategy) == 0 && a->num_bits == b->num_bits &&
         a->group_size == b->group_size && a->actorder == b->actorder &&
         a->block[0] == b->block[0] && a->block[1] == b->block[1];
}

static int known_format(const char *f) {
  for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
    if (strcmp(formats[i], f) == 0) return 1;
  return 0;
}

/* Why the scheme `s` read so far has no rules here, or NULL. */
static const char *scheme_problem(const struct tpl__ct_scheme *s) {
  if (!known_format(s->format))
    return "format: expected pack-quantized, float-quantized, "
           "int-quantized or naive-quantized";
  if (strcmp(s->strategy, "group") == 0 && s->group_size == 0)
    return "a group strategy without group_size";
  if (strcmp(s->strategy, "block") == 0 &&
      (s->block[0] == 0 || s->block[1] == 0))
    return "a block strategy without a two-number block_structure";
  if (strcmp(s->format, "pack-quantized") == 0 && s->num_bits != 4 &&
      s->num_bits != 8)
    return "pack-quantized weights of other than 4 or 8 bits";
  return NULL;
}

void tpl__ct_parse(const json_t *qc, struct tpl__ct_scheme *s) {
  const json_t *groups = json_object_get(qc, "config_groups"), *g;
  const char *key, *format = str_of(qc, "format"), *why;
  struct tpl__ct_scheme w;
  int first = 1, mixed = 0;
  memset(s, 0, sizeof(*s));
  json_object_foreach((json_t *)groups, key, g) {
    const json_t *weights = json_object_get(g, "weights");
    if (weights == NULL || json_is_null(weights)) continue;
    read_weights(weights, &w); /* only the weight fields; the rest zero */
    if (first) *s = w;
    mixed = mixed || !same_weights(s, &w);
    first = 0;
  }
  s->present = 1;
  snprintf(s->format, sizeof(s->format), "%.31s", format ? format : "");
  why =
      mixed ? "config groups with different weight schemes" : scheme_problem(s);
  if (why != NULL) snprintf(s->problem, sizeof(s->problem), "%s", why);
}

int tpl__ct_check(const struct tpl__ct_scheme *s, const char *what,
                  struct tpl__error *err) {
  if (!s->present || s->problem[0] == '\0') return 0;
  if (strcmp(s->format, "modelopt") == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "%s: ModelOpt quantization: expected a scheme tpload "
                     "can shard, found %s",
                     what, s->problem);
  return tpl__fail(err, TPL_EPLAN,
                   "%s: compressed-tensors format '%s', weights %s %u-bit: "
                   "expected a scheme tpload can shard, found %s",
                   what, s->format[0] ? s->format : "(none)",
                   s->strategy[0] ? s->strategy : "(no strategy)", s->num_bits,
                   s->problem);
}

void tpl__ct_parse_modelopt(const json_t *q, struct tpl__ct_scheme *s) {
  const char *algo = str_of(q, "quant_algo");
  memset(s, 0, sizeof(*s));
  s->present = 1;
  snprintf(s->format, sizeof(s->format), "modelopt");
  if (algo != NULL && strcmp(algo, "NVFP4") == 0) {
    snprintf(s->strategy, sizeof(s->strategy), "group");
    s->num_bits = 4;
    s->group_size = u64_of(q, "group_size") ? u64_of(q, "group_size") : 16;
  } else if (algo != NULL && strcmp(algo, "FP8") == 0) {
    snprintf(s->strategy, sizeof(s->strategy), "tensor");
    s->num_bits = 8;
  } else {
    snprintf(s->problem, sizeof(s->problem),
             "quant_algo '%.64s': expected NVFP4 or FP8",
             algo ? algo : "(none)");
  }
}

uint64_t tpl__ct_unpacked(const struct tpl__ct_scheme *s,
                          const struct tpl__tensor *x, int dim) {
  if (s->present && strcmp(s->format, "modelopt") == 0 && s->num_bits == 4 &&
      x->dtype == TPL_DT_U8 && dim == x->ndim - 1)
    return x->shape[dim] * 2;
  return x->shape[dim];
}

static const struct {
  const char *suffix;
  int ct;
} params[] = {
    {"weight_packed", TPL_CT_PACKED},   {"weight_scale", TPL_CT_SCALE},
    {"weight_zero_point", TPL_CT_ZERO}, {"weight_shape", TPL_CT_SHAPE},
    {"weight_g_idx", TPL_CT_GIDX},      {"input_scale", TPL_CT_INPUT},
};

int tpl__ct_param(const char *name, char *base, size_t cap) {
  for (size_t i = 0; i < ARRAY_SIZE(params); i++)
    if (tpl__quant_weight_of(name, params[i].suffix, base, cap))
      return params[i].ct;
  return TPL_CT_NONE;
}

/* segs[j] / unit, each exact and each rank's slice a whole number of
 * units: a zero point packs `unit` rows in one int32. */
static int segs_packed(const struct tpl__tensor *t,
                       const struct tpl__shard_spec *base, uint64_t rows,
                       uint64_t unit, uint32_t nshards,
                       struct tpl__shard_spec *out, struct tpl__error *err) {
  size_t nsegs = base->nsegs > 0 ? base->nsegs : 1;
  for (size_t j = 0; j < nsegs; j++) {
    uint64_t seg = base->nsegs > 0 ? base->segs[j] : rows;
    uint32_t pieces = base->parts[j] != 0 ? base->parts[j] : nshards;
    if (seg % pieces == 0 && (seg / pieces) % unit == 0) {
      if (base->nsegs > 0) out->segs[j] = seg / unit;
      continue;
    }
    return tpl__fail(err, TPL_EINDIVISIBLE,
                     "tensor '%s': expected each shard's slice of segment "
                     "%zu of its weight's rows (%llu / %u) to be a whole "
                     "number of the %llu rows one packed zero point holds, "
                     "found %llu rows (vLLM packs zero points along the "
                     "rows)",
                     t->name, j, (unsigned long long)seg, pieces,
                     (unsigned long long)unit,
                     (unsigned long long)(seg / pieces));
  }
  return 0;
}

/* A scale or zero point under an input (column) cut: whole when it holds
 * one column (per channel) or activation order repeats the scales on
 * every rank (vLLM's marlin_repeat_scales_on_all_ranks); else cut along
 * its groups, which segs there would not be. */
static int input_cut(const struct tpl__ct_scheme *s,
                     const struct tpl__tensor *t,
                     const struct tpl__shard_spec *base, int *replicate,
                     struct tpl__error *err) {
  if (t->ndim < 2 || t->shape[1] == 1 || s->actorder) {
    *replicate = 1;
    return 0;
  }
  if (base->nsegs == 0) return 0;
  return tpl__fail(err, TPL_EPLAN,
                   "tensor '%s': expected no segs along the input dim of a "
                   "group-quantized weight, found %zu",
                   t->name, base->nsegs);
}

static int derive_scale(const struct tpl__ct_scheme *s,
                        const struct tpl__tensor *t,
                        const struct tpl__tensor *weight,
                        const struct tpl__shard_spec *base, uint32_t nshards,
                        struct tpl__shard_spec *out, int *replicate,
                        struct tpl__error *err) {
  if (tpl__tensor_numel(t) == 1) {
    *replicate = 1;
    return 0;
  }
  if (strcmp(s->strategy, "block") == 0 && base->dim <= 1) {
    char method[96];
    snprintf(method, sizeof(method), "compressed-tensors block [%llu, %llu]",
             (unsigned long long)s->block[0], (unsigned long long)s->block[1]);
    return tpl__quant_block_cut(t, weight, base, s->block[base->dim], method,
                                nshards, out, err);
  }
  if (base->dim == 1) return input_cut(s, t, base, replicate, err);
  return 0;
}

static int derive_zero(const struct tpl__ct_scheme *s,
                       const struct tpl__tensor *t,
                       const struct tpl__tensor *weight,
                       const struct tpl__shard_spec *base, uint32_t nshards,
                       struct tpl__shard_spec *out, int *replicate,
                       struct tpl__error *err) {
  uint64_t rows, unit;
  if (base->dim == 1) return input_cut(s, t, base, replicate, err);
  if (base->dim != 0 || weight == NULL || t->shape[0] == 0 ||
      weight->shape[0] % t->shape[0] != 0)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': expected a zero point of [rows / pack, "
                     "groups] beside a weight cut along its rows, found "
                     "another shape or no weight",
                     t->name);
  rows = weight->shape[0];
  unit = rows / t->shape[0];
  return segs_packed(t, base, rows, unit, nshards, out, err);
}

int tpl__ct_derive(int ct, const struct tpl__ct_scheme *s,
                   const struct tpl__tensor *t,
                   const struct tpl__tensor *weight,
                   const struct tpl__shard_spec *base, uint32_t nshards,
                   struct tpl__shard_spec *out, int *replicate,
                   struct tpl__error *err) {
  int rc = 0;
  *out = *base;
  *replicate = 0;
  if (ct == TPL_CT_SHAPE || ct == TPL_CT_INPUT ||
      (ct == TPL_CT_GIDX && base->dim != 1)) {
    *replicate = 1;
    return 0;
  }
  if (ct == TPL_CT_GIDX) {
    out->dim = 0;
    out->nsegs = 0;
  } else if (ct == TPL_CT_PACKED && base->dim == 1 && base->nsegs > 0) {
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': expected no segs along the packed input "
                     "dim, found %zu",
                     t->name, base->nsegs);
  } else if (ct == TPL_CT_SCALE) {
    rc = derive_scale(s, t, weight, base, nshards, out, replicate, err);
  } else if (ct == TPL_CT_ZERO) {
    rc = derive_zero(s, t, weight, base, nshards, out, replicate, err);
  }
  if (rc != 0 || *replicate) return rc;
  return tpl__shard_check(t->shape, t->ndim, out, nshards, t->name, err);
}
