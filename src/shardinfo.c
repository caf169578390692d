/* shardinfo.c - builds the shard-info JSON that `tpload plan` prints and
 * `preshard` writes, mirroring the `params` list of MLC's model metadata
 * so MLC tooling can read it.  Pure: strategies and shapes in, a jansson
 * object out; the shard shapes come from shard.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "dtype.h"
#include "jsonu.h"
#include "shardinfo.h"

double tpl__bias_scale(int kind, uint32_t nshards, int bias_scaling) {
  if (kind != TPL_RULE_SCALE_BIAS || !bias_scaling || nshards <= 1) return 1.0;
  return 1.0 / (double)nshards;
}

/* [N, *shard_shape] */
static json_t *out_shape(const uint64_t *shard, int ndim, uint32_t nshards) {
  uint64_t v[TPL_MAX_DIMS + 1];
  v[0] = nshards;
  for (int i = 0; i < ndim; i++)
    v[i + 1] = shard[i];
  return tpl__json_u64_array(v, (size_t)ndim + 1);
}

static json_t *preproc(const struct tpl__tensor *t,
                       const struct tpl__strategy *s, const uint64_t *shard,
                       uint32_t nshards) {
  return json_pack("{s:s, s:o, s:o, s:s}", "func_name", s->func_name,
                   "in_shape", tpl__json_u64_array(t->shape, (size_t)t->ndim),
                   "out_shape", out_shape(shard, t->ndim, nshards), "out_dtype",
                   tpl__dtype_mlc_name(t->dtype));
}

/* Per-shard segment lengths, MLC's units: segs[j] / N. */
static json_t *shard_segs(const struct tpl__tensor *t,
                          const struct tpl__strategy *s, uint32_t nshards) {
  uint64_t v[TPL_MAX_SEGS];
  size_t n = s->spec.nsegs ? s->spec.nsegs : 1;
  if (s->spec.nsegs == 0)
    v[0] = t->shape[s->spec.dim] / nshards;
  else
    for (size_t j = 0; j < n; j++)
      v[j] = s->spec.segs[j] / nshards;
  return tpl__json_u64_array(v, n);
}

static json_t *rank_list(const struct tpl__rank_info *ranks, uint32_t nshards) {
  json_t *a = json_array();
  for (uint32_t r = 0; a != NULL && r < nshards; r++) {
    char hex[17];
    snprintf(hex, sizeof(hex), "%016" PRIx64, ranks[r].xxh3);
    if (json_array_append_new(
            a, json_pack("{s:I, s:I, s:s}", "rank", (json_int_t)r, "nbytes",
                         (json_int_t)ranks[r].nbytes, "xxh3", hex)) != 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

/* Adds the shard-only keys: preprocs entry (none at N = 1: MLC's
 * compile.py appends the shard preproc only when tensor_parallel_shards
 * > 1), dim, segs. */
static int add_shard_fields(json_t *o, const struct tpl__tensor *t,
                            const struct tpl__strategy *s,
                            const uint64_t *shard, uint32_t nshards) {
  json_t *pre = json_object_get(o, "preprocs");
  if ((nshards > 1 &&
       json_array_append_new(pre, preproc(t, s, shard, nshards)) != 0) ||
      json_object_set_new(o, "dim", json_integer(s->spec.dim)) != 0 ||
      json_object_set_new(o, "segs", shard_segs(t, s, nshards)) != 0)
    return -ENOMEM;
  return 0;
}

json_t *tpl__shardinfo_param(const struct tpl__tensor *t,
                             const struct tpl__strategy *s, uint32_t nshards,
                             const struct tpl__rank_info *ranks,
                             int bias_scaling) {
  uint64_t shard[TPL_MAX_DIMS];
  int sharded = s->kind == TPL_RULE_SHARD;
  json_t *o;
  for (int i = 0; i < t->ndim; i++)
    shard[i] = t->shape[i];
  if (sharded) tpl__shard_shape(t->shape, t->ndim, &s->spec, nshards, shard);
  /* pipeline_stages: [0] for every param, as compile.py writes it for
   * one pipeline stage (tpload has no pipeline parallelism). */
  o = json_pack("{s:s, s:o, s:s, s:[], s:[i]}", "name", t->name, "shape",
                tpl__json_u64_array(shard, (size_t)t->ndim), "dtype",
                tpl__dtype_mlc_name(t->dtype), "preprocs", "pipeline_stages",
                0);
  if (o == NULL) return NULL;
  if ((sharded && add_shard_fields(o, t, s, shard, nshards) != 0) ||
      json_object_set_new(
          o, "bias_scale",
          json_real(tpl__bias_scale(s->kind, nshards, bias_scaling))) != 0 ||
      (ranks != NULL &&
       json_object_set_new(o, "ranks", rank_list(ranks, nshards)) != 0)) {
    json_decref(o);
    return NULL;
  }
  return o;
}

int tpl__shardinfo_build(const struct tpl_model *m,
                         const struct tpl__strategy *st, uint32_t nshards,
                         const struct tpl__rank_info *ranks, int bias_scaling,
                         json_t **out) {
  json_t *params = json_array();
  json_t *root = json_pack("{s:I, s:b, s:o}", "tensor_parallel_shards",
                           (json_int_t)nshards, "bias_scaling",
                           bias_scaling ? 1 : 0, "params", params);
  if (root == NULL) return -ENOMEM;
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__rank_info *r =
        ranks != NULL ? &ranks[i * (size_t)nshards] : NULL;
    if (json_array_append_new(
            params, tpl__shardinfo_param(&m->tensors[i], &st[i], nshards, r,
                                         bias_scaling)) != 0) {
      json_decref(root);
      return -ENOMEM;
    }
  }
  *out = root;
  return 0;
}
