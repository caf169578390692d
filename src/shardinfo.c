/* shardinfo.c - builds the shard-info JSON that `tpload plan` prints and
 * `preshard` writes, mirroring the `params` list of MLC's model metadata
 * so MLC tooling can read it.  Pure: a job table in (its per-rank shapes
 * and MLC-unit segs come from job.c), a jansson object out. */
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

static json_t *preproc(const struct tpl__job *job,
                       const struct tpl__job_tensor *t) {
  uint64_t out[TPL_MAX_DIMS + 1];
  size_t n = tpl__job_out_shape(job, t, out);
  return json_pack("{s:s, s:o, s:o, s:s}", "func_name", t->func_name,
                   "in_shape", tpl__json_u64_array(t->shape, (size_t)t->ndim),
                   "out_shape", tpl__json_u64_array(out, n), "out_dtype",
                   tpl__dtype_mlc_name(t->dtype));
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
static int add_shard_fields(json_t *o, const struct tpl__job *job,
                            const struct tpl__job_tensor *t) {
  json_t *pre = json_object_get(o, "preprocs");
  uint64_t segs[TPL_MAX_SEGS];
  size_t n = tpl__job_mlc_segs(job, t, segs);
  if ((job->grid.tp > 1 && json_array_append_new(pre, preproc(job, t)) != 0) ||
      json_object_set_new(o, "dim", json_integer(t->spec.dim)) != 0 ||
      json_object_set_new(o, "segs", tpl__json_u64_array(segs, n)) != 0)
    return -ENOMEM;
  return 0;
}

json_t *tpl__shardinfo_param(const struct tpl__job *job, size_t i,
                             const struct tpl__rank_info *ranks) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  double scale = tpl__bias_scale(t->kind, job->grid.tp, job->bias_scaling);
  /* pipeline_stages: [0] for every param, as compile.py writes it for
   * one pipeline stage (tpload has no pipeline parallelism). */
  json_t *o = json_pack(
      "{s:s, s:o, s:s, s:[], s:[i]}", "name", t->name, "shape",
      tpl__json_u64_array(t->rank_shape, (size_t)t->ndim), "dtype",
      tpl__dtype_mlc_name(t->dtype), "preprocs", "pipeline_stages", 0);
  if (o == NULL) return NULL;
  if ((t->kind == TPL_RULE_SHARD && add_shard_fields(o, job, t) != 0) ||
      json_object_set_new(o, "bias_scale", json_real(scale)) != 0 ||
      (ranks != NULL &&
       json_object_set_new(o, "ranks", rank_list(ranks, job->grid.world)) !=
           0)) {
    json_decref(o);
    return NULL;
  }
  return o;
}

int tpl__shardinfo_build(const struct tpl__job *job,
                         const struct tpl__rank_info *ranks, json_t **out) {
  json_t *params = json_array();
  json_t *root = json_pack("{s:I, s:b, s:o}", "tensor_parallel_shards",
                           (json_int_t)job->grid.tp, "bias_scaling",
                           job->bias_scaling ? 1 : 0, "params", params);
  if (root == NULL) return -ENOMEM;
  for (size_t i = 0; i < job->ntensors; i++) {
    const struct tpl__rank_info *r =
        ranks != NULL ? &ranks[i * (size_t)job->grid.world] : NULL;
    if (json_array_append_new(params, tpl__shardinfo_param(job, i, r)) != 0) {
      json_decref(root);
      return -ENOMEM;
    }
  }
  *out = root;
  return 0;
}
