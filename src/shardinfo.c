/* shardinfo.c - builds the shard-info JSON that `tpload plan` prints and
 * `preshard` writes, mirroring the `params` list of MLC's model metadata
 * so MLC tooling can read it (mlc-ai/mlc-llm
 * python/mlc_llm/interface/compile.py, _get_param_metadata: name, shape,
 * dtype, preprocs, pipeline_stages; the metadata's
 * tensor_parallel_shards and pipeline_parallel_stages).  tpload adds the
 * per-rank entries: each holder's global rank, (replica, stage, shard),
 * bytes and checksum.  Pure: a job table in (its per-rank shapes
 * and MLC-unit segs come from job.c), a jansson object out. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "dtype.h"
#include "experts.h"
#include "jsonu.h"
#include "shardinfo.h"

static json_t *preproc(const struct tpl__job *job,
                       const struct tpl__job_tensor *t) {
  uint64_t out[TPL_MAX_DIMS + 1];
  size_t n = tpl__job_out_shape(job, t, out);
  return json_pack("{s:s, s:o, s:o, s:s}", "func_name", t->func_name,
                   "in_shape", tpl__json_u64_array(t->shape, (size_t)t->ndim),
                   "out_shape", tpl__json_u64_array(out, n), "out_dtype",
                   tpl__dtype_mlc_name(t->dtype));
}

/* Appends `v` (a new reference) to array `a`; on failure (ENOMEM) drops
 * `a` and returns NULL, else returns `a`. */
static json_t *append(json_t *a, json_t *v) {
  if (json_array_append_new(a, v) == 0) return a;
  json_decref(a);
  return NULL;
}

/* One "ranks" entry: the global rank, where it sits in the grid, and what
 * it received. */
static json_t *rank_entry(const struct tpl__job *job, uint32_t r,
                          const struct tpl__rank_info *info) {
  struct tpl__pos c = tpl__grid_coord(&job->grid, r);
  char hex[17];
  snprintf(hex, sizeof(hex), "%016" PRIx64, info->xxh3);
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:s}", "rank", (json_int_t)r,
                   "replica", (json_int_t)c.d, "stage", (json_int_t)c.p,
                   "shard", (json_int_t)c.t, "nbytes", (json_int_t)info->nbytes,
                   "xxh3", hex);
}

/* The ranks that hold tensor i (its stages' ranks in every replica), in
 * rank order; ranks[r] is what rank r received. */
static json_t *rank_list(const struct tpl__job *job, size_t i,
                         const struct tpl__rank_info *ranks) {
  json_t *a = json_array();
  for (uint32_t r = 0; a != NULL && r < job->grid.world; r++)
    if (tpl__job_holds(job, i, r)) a = append(a, rank_entry(job, r, &ranks[r]));
  return a;
}

/* MLC's "pipeline_stages": the stages that hold the tensor, ascending
 * (compile.py's list(set(...)) of _set_pp's list; [0] with one stage). */
static json_t *stage_list(struct tpl__stages s) {
  json_t *a = json_array();
  for (uint32_t k = 0; a != NULL && k < s.count; k++)
    a = append(a, json_integer(s.first + k));
  return a;
}

/* Adds the shard-only keys: preprocs entry (none at N = 1: MLC's
 * compile.py appends the shard preproc only when tensor_parallel_shards
 * > 1), dim, segs and, where kv heads are replicated, kv_replicas (how
 * many ranks hold each kv head: vLLM's num_kv_head_replicas). */
static int add_shard_fields(json_t *o, const struct tpl__job *job,
                            const struct tpl__job_tensor *t) {
  json_t *pre = json_object_get(o, "preprocs");
  uint64_t segs[TPL_MAX_SEGS];
  size_t n = tpl__job_mlc_segs(job, t, segs);
  uint32_t replicas = tpl__shard_replicas(&t->spec, job->grid.tp);
  if ((job->grid.tp > 1 && json_array_append_new(pre, preproc(job, t)) != 0) ||
      json_object_set_new(o, "dim", json_integer(t->spec.dim)) != 0 ||
      json_object_set_new(o, "segs", tpl__json_u64_array(segs, n)) != 0 ||
      (replicas > 1 &&
       json_object_set_new(o, "kv_replicas", json_integer(replicas)) != 0))
    return -ENOMEM;
  return 0;
}

/* Under --ep: the group rank holding one expert's tensor whole (its
 * shard t when the group is the TP group, "expert_shard"; d x T + t when
 * it spans the replicas, "expert_ep_rank"), or the dim a stacked one is
 * cut along (its experts). */
static int add_ep_fields(json_t *o, const struct tpl__job *job,
                         const struct tpl__job_tensor *t) {
  if (t->ep == TPL_EP_WHOLE)
    return json_object_set_new(
        o, job->grid.ep > job->grid.tp ? "expert_ep_rank" : "expert_shard",
        json_integer(t->owner));
  if (t->ep == TPL_EP_STACKED)
    return json_object_set_new(o, "expert_dim", json_integer(0));
  return 0;
}

json_t *tpl__shardinfo_param(const struct tpl__job *job, size_t i,
                             const struct tpl__rank_info *ranks) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  int bias = t->kind == TPL_RULE_SCALE_BIAS;
  double scale = bias ? tpl__bias_factor(t->bias, job->grid.tp) : 1.0;
  json_t *o = json_pack("{s:s, s:o, s:s, s:[], s:o}", "name", t->name, "shape",
                        tpl__json_u64_array(t->rank_shape, (size_t)t->ndim),
                        "dtype", tpl__dtype_mlc_name(t->dtype), "preprocs",
                        "pipeline_stages", stage_list(t->stages));
  if (o == NULL) return NULL;
  if ((t->kind == TPL_RULE_SHARD && add_shard_fields(o, job, t) != 0) ||
      add_ep_fields(o, job, t) != 0 ||
      (bias && json_object_set_new(
                   o, "bias", json_string(tpl__bias_name(t->bias))) != 0) ||
      json_object_set_new(o, "bias_scale", json_real(scale)) != 0 ||
      (ranks != NULL &&
       json_object_set_new(o, "ranks", rank_list(job, i, ranks)) != 0)) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* Rank r's experts, [start, count] in global ids (tpl__ep_range of its
 * group rank, tpl__grid_ep_rank). */
static json_t *rank_experts(const struct tpl__grid *g, uint32_t experts,
                            uint32_t r) {
  struct tpl__ep_range e =
      tpl__ep_range(experts, g->ep, tpl__grid_ep_rank(g, r));
  return json_pack("[I, I]", (json_int_t)e.start, (json_int_t)e.count);
}

json_t *tpl__shardinfo_ep(const struct tpl__grid *g, uint32_t experts) {
  json_t *a = json_array();
  for (uint32_t r = 0; a != NULL && r < g->world; r++)
    a = append(a, json_pack("{s:I, s:I, s:o}", "rank", (json_int_t)r, "shard",
                            (json_int_t)tpl__grid_coord(g, r).t, "experts",
                            rank_experts(g, experts, r)));
  return json_pack("{s:I, s:I, s:o}", "size", (json_int_t)g->ep, "experts",
                   (json_int_t)experts, "ranks", a);
}

void tpl__shardinfo_fingerprint(const struct tpl__job *job,
                                const struct tpl__rank_info *ranks, char *out) {
  uint32_t w = job->grid.world, g[3] = {job->grid.tp, job->grid.pp, w};
  /* Chained: each field hashed with the digest so far as its seed. */
  uint64_t h = XXH3_64bits(g, sizeof(g));
  for (size_t i = 0; i < job->ntensors; i++) {
    const char *name = job->tensors[i].name;
    h = XXH3_64bits_withSeed(name, strlen(name) + 1, h);
    for (uint32_t r = 0; r < w; r++) {
      const struct tpl__rank_info *ri = &ranks[i * (size_t)w + r];
      uint64_t rec[3] = {r, ri->nbytes, ri->xxh3};
      if (tpl__job_holds(job, i, r))
        h = XXH3_64bits_withSeed(rec, sizeof(rec), h);
    }
  }
  snprintf(out, TPL_FINGERPRINT_LEN + 1, "%016" PRIx64, h);
}

/* With `ranks`, root's "fingerprint"; returns 0 or -ENOMEM. */
static int add_fingerprint(json_t *root, const struct tpl__job *job,
                           const struct tpl__rank_info *ranks) {
  char fp[TPL_FINGERPRINT_LEN + 1];
  if (ranks == NULL) return 0;
  tpl__shardinfo_fingerprint(job, ranks, fp);
  return json_object_set_new(root, "fingerprint", json_string(fp)) == 0
             ? 0
             : -ENOMEM;
}

int tpl__shardinfo_build(const struct tpl__job *job,
                         const struct tpl__rank_info *ranks, json_t **out) {
  json_t *params = json_array();
  /* compile.py's metadata: tensor_parallel_shards = T and
   * pipeline_parallel_stages = P; tpload adds the replicas D. */
  json_t *root =
      json_pack("{s:I, s:I, s:I, s:b, s:s, s:o}", "tensor_parallel_shards",
                (json_int_t)job->grid.tp, "pipeline_parallel_stages",
                (json_int_t)job->grid.pp, "data_parallel_replicas",
                (json_int_t)job->grid.dp, "bias_scaling",
                job->bias_family == TPL_BIASF_MLC, "bias_policy",
                tpl__bias_family_name(job->bias_family), "params", params);
  if (root == NULL || add_fingerprint(root, job, ranks) != 0) {
    json_decref(root);
    return -ENOMEM;
  }
  if (job->grid.ep > 0 &&
      json_object_set_new(root, "expert_parallel",
                          tpl__shardinfo_ep(&job->grid, job->experts)) != 0) {
    json_decref(root);
    return -ENOMEM;
  }
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

/* What rank r holds: its tensors' names and their bytes. */
static json_t *held_by(const struct tpl__job *job, uint32_t r) {
  struct tpl__pos c = tpl__grid_coord(&job->grid, r);
  json_t *names = json_array();
  uint64_t bytes = 0;
  for (size_t i = 0; names != NULL && i < job->ntensors; i++) {
    if (!tpl__job_holds(job, i, r)) continue;
    bytes += job->tensors[i].rank_bytes;
    names = append(names, json_string(job->tensors[i].name));
  }
  json_t *o =
      json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "rank", (json_int_t)r,
                "replica", (json_int_t)c.d, "stage", (json_int_t)c.p, "shard",
                (json_int_t)c.t, "bytes", (json_int_t)bytes, "tensors", names);
  if (o != NULL && job->grid.ep > 0 &&
      json_object_set_new(o, "experts",
                          rank_experts(&job->grid, job->experts, r)) != 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *tpl__shardinfo_ranks(const struct tpl__job *job) {
  json_t *a = json_array();
  for (uint32_t r = 0; a != NULL && r < job->grid.world; r++)
    a = append(a, held_by(job, r));
  return a;
}
