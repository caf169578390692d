/* job.c - the job table: per tensor, the plan's verdict, the pipeline
 * stages that hold it, where its bytes are (rank 0) and what each of its
 * holders holds (shard t of grid.tp); per stage, where each tensor it
 * holds lives in the store of that stage's ranks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "experts.h"
#include "job.h"
#include "origin.h"
#include "planner.h"
#include "scope.h"

/* Element size as stored in the source (2 for f32-to-bf16 records). */
static size_t stored_itemsize(const struct tpl__job_tensor *t) {
  return t->encoding == TPL_ENC_F32_TO_BF16 ? 2 : tpl__dtype_size(t->dtype);
}

/* Element count of a validated shape (cannot overflow: checked when the
 * model was read). */
static uint64_t numel(const uint64_t *shape, int ndim) {
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  return n;
}

static int finish_tensor(const struct tpl__job *job, struct tpl__job_tensor *t,
                         struct tpl__error *err) {
  uint64_t elems;
  memcpy(t->rank_shape, t->shape, sizeof(t->shape));
  if (t->kind == TPL_RULE_SHARD)
    tpl__shard_shape(t->shape, t->ndim, &t->spec, job->grid.tp, t->rank_shape);
  if (t->stages.count == 0 && job->grid.pp <= 1)
    t->stages = (struct tpl__stages){0, 1};
  elems = numel(t->rank_shape, t->ndim);
  if (tpl__mul_u64(elems, stored_itemsize(t), &t->rank_stored) != 0 ||
      tpl__mul_u64(elems, tpl__dtype_size(t->dtype), &t->rank_bytes) != 0 ||
      tpl__mul_u64(numel(t->shape, t->ndim), stored_itemsize(t),
                   &t->stored_bytes) != 0)
    return tpl__fail(err, TPL_EOVERFLOW, "tensor '%s': size overflows",
                     t->name);
  return 0;
}

int tpl__job_place(struct tpl__job *job, uint32_t rank,
                   struct tpl__error *err) {
  uint64_t off = 0;
  for (size_t i = 0; i < job->ntensors; i++) {
    struct tpl__job_tensor *t = &job->tensors[i];
    t->store_offset = UINT64_MAX;
    if (!tpl__job_holds(job, i, rank)) continue;
    off = (off + TPL_STORE_ALIGN - 1) & ~(uint64_t)(TPL_STORE_ALIGN - 1);
    t->store_offset = off;
    if (tpl__add_u64(off, t->rank_bytes, &off) != 0)
      return tpl__fail(err, TPL_EOVERFLOW, "tensor '%s': size overflows",
                       t->name);
  }
  job->stage = tpl__grid_coord(&job->grid, rank).p;
  job->store_size = off;
  return 0;
}

int tpl__job_finish(struct tpl__job *job, struct tpl__error *err) {
  uint64_t src = 0;
  for (size_t i = 0; i < job->ntensors; i++) {
    struct tpl__job_tensor *t = &job->tensors[i];
    int rc = finish_tensor(job, t, err);
    if (rc != 0) return rc;
    if (tpl__add_u64(src, t->stored_bytes, &src) != 0)
      return tpl__fail(err, TPL_EOVERFLOW, "tensor '%s': size overflows",
                       t->name);
  }
  job->source_bytes = src;
  return tpl__job_place(job, 0, err);
}

int tpl__job_holds(const struct tpl__job *job, size_t i, uint32_t rank) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  struct tpl__pos c = tpl__grid_coord(&job->grid, rank);
  return tpl__stages_has(t->stages, c.p) &&
         (t->ep != TPL_EP_WHOLE ||
          t->owner == tpl__grid_ep_rank(&job->grid, rank));
}

static int copy_tensor(struct tpl__job_tensor *jt, const struct tpl__tensor *t,
                       const struct tpl__strategy *s, int bias_family) {
  jt->name = strdup(t->name);
  if (jt->name == NULL) return -ENOMEM;
  jt->dtype = t->dtype;
  jt->ndim = t->ndim;
  memcpy(jt->shape, t->shape, sizeof(jt->shape));
  jt->encoding = t->encoding;
  jt->file = t->file;
  jt->file_offset = t->offset;
  jt->kind = s->kind;
  if (s->kind == TPL_RULE_SCALE_BIAS)
    jt->bias = tpl__bias_resolve(s->bias, s->bias_vllm, bias_family);
  jt->rule = s->rule;
  jt->ep = s->ep;
  jt->owner = s->owner;
  if (s->kind == TPL_RULE_SHARD) {
    jt->spec = s->spec;
    jt->func_name = strdup(s->func_name ? s->func_name : "_shard");
    if (jt->func_name == NULL) return -ENOMEM;
  }
  return 0;
}

/* *out = a copy of s, NULL for NULL; -ENOMEM when the copy fails. */
static int dup_optional(const char *s, char **out) {
  *out = s ? strdup(s) : NULL;
  return s && *out == NULL ? -ENOMEM : 0;
}

static int copy_files(struct tpl__job *job, const struct tpl__model *m) {
  job->files = calloc(m->nfiles ? m->nfiles : 1, sizeof(*job->files));
  if (job->files == NULL) return -ENOMEM;
  job->nfiles = m->nfiles;
  for (size_t f = 0; f < m->nfiles; f++) {
    job->files[f].path = strdup(m->files[f].path);
    job->files[f].size = m->files[f].size;
    job->files[f].mtime_ns = m->files[f].mtime_ns;
    if (job->files[f].path == NULL) return -ENOMEM;
    job->files[f].obj = m->files[f].obj;
    if (dup_optional(m->files[f].url, &job->files[f].url) != 0) return -ENOMEM;
  }
  job->origin = m->origin;
  return 0;
}

int tpl__job_from_model(const struct tpl__model *m,
                        const struct tpl__strategy *strategies,
                        const struct tpl__stages *stages,
                        const char *plan_source, const char *model_arg,
                        const struct tpl__grid *grid, int bias_family,
                        struct tpl__job **out, struct tpl__error *err) {
  struct tpl__job *job = calloc(1, sizeof(*job));
  int rc;
  if (job == NULL) return tpl__oom(err);
  job->grid = *grid;
  job->bias_family = bias_family;
  job->model = strdup(m->shown ? m->shown : model_arg);
  job->plan_source = strdup(plan_source ? plan_source : "");
  job->tensors = calloc(m->ntensors ? m->ntensors : 1, sizeof(*job->tensors));
  if (job->model == NULL || job->plan_source == NULL || job->tensors == NULL ||
      copy_files(job, m) != 0)
    goto nomem;
  job->ntensors = m->ntensors;
  for (size_t i = 0; i < m->ntensors; i++) {
    if (copy_tensor(&job->tensors[i], &m->tensors[i], &strategies[i],
                    bias_family) != 0)
      goto nomem;
    if (stages != NULL) job->tensors[i].stages = stages[i];
  }
  rc = tpl__job_finish(job, err);
  if (rc != 0) {
    tpl__job_free(job);
    return rc;
  }
  *out = job;
  return 0;
nomem:
  tpl__job_free(job);
  return tpl__oom(err);
}

int tpl__job_plan(const char *plan_arg, const struct tpl__model *m,
                  const char *model_arg, const struct tpl__grid *grid,
                  int bias_family, struct tpl__plan **plan,
                  struct tpl__job **out, struct tpl__error *err) {
  struct tpl__strategy *st = NULL;
  struct tpl__stages *stages = NULL;
  int rc = tpl__plan_for_grid(plan_arg, m, grid, plan, &st, &stages, err);
  if (rc != 0) return rc;
  rc = tpl__job_from_model(m, st, stages, (*plan)->source, model_arg, grid,
                           bias_family, out, err);
  free(st);
  free(stages);
  if (rc != 0) {
    tpl__plan_free(*plan);
    *plan = NULL;
  } else {
    (*out)->experts = (*plan)->experts;
    (*out)->quant = (*plan)->quant;
    (*out)->approximate = m->approximate;
  }
  return rc;
}

size_t tpl__job_out_shape(const struct tpl__job *job,
                          const struct tpl__job_tensor *t, uint64_t *out) {
  out[0] = job->grid.tp;
  memcpy(out + 1, t->rank_shape, (size_t)t->ndim * sizeof(uint64_t));
  return (size_t)t->ndim + 1;
}

size_t tpl__job_mlc_segs(const struct tpl__job *job,
                         const struct tpl__job_tensor *t, uint64_t *out) {
  return tpl__shard_rank_segs(&t->spec, t->shape[t->spec.dim], job->grid.tp,
                              out);
}

int tpl__job_check_unused(const struct tpl__job *job, const struct tpl__plan *p,
                          int strict, struct tpl__error *err) {
  size_t unused = 0, first = 0;
  unsigned char *used;
  if (!p->from_file || p->nrules == 0) return 0;
  used = calloc(p->nrules, 1);
  if (used == NULL) return tpl__oom(err);
  for (size_t i = 0; i < job->ntensors; i++) {
    int r = job->tensors[i].rule;
    if (r >= 0 && (size_t)r < p->nrules) used[r] = 1;
  }
  for (size_t r = 0; r < p->nrules; r++) {
    if (used[r]) continue;
    if (unused == 0) first = r;
    unused++;
  }
  free(used);
  if (unused == 0) return 0;
  tpl__fail(err, TPL_EPLAN,
            "%s: rule %zu ('%s') matches no tensor of the model (%zu "
            "unused rule%s): a typo in a glob leaves tensors replicated",
            p->source, first, p->rules[first].match, unused,
            unused == 1 ? "" : "s");
  return strict ? TPL_EPLAN : 1;
}

int tpl__job_layout(const struct tpl__job *job, size_t i, uint32_t shard,
                    struct tpl__layout *out) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  if (t->kind != TPL_RULE_SHARD) {
    tpl__layout_whole(t->rank_stored, out);
    return 0;
  }
  return tpl__shard_layout(t->shape, t->ndim, stored_itemsize(t), &t->spec,
                           job->grid.tp, shard, out);
}

int tpl__job_finish_bytes(const struct tpl__job *job, size_t i, uint32_t shard,
                          uint8_t *p, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  if (t->encoding == TPL_ENC_F32_TO_BF16)
    tpl__bf16_expand_inplace(p, t->rank_stored / 2);
  if (t->kind == TPL_RULE_SCALE_BIAS &&
      tpl__bias_apply(p, t->rank_bytes, t->dtype, t->bias, job->grid.tp,
                      shard) != 0)
    return tpl__fail(err, TPL_EDTYPE,
                     "tensor '%s': cannot apply bias policy %s to a %s bias",
                     t->name, tpl__bias_name(t->bias),
                     tpl__dtype_st_name(t->dtype));
  return 0;
}

int tpl__job_bytes_final(const struct tpl__job *job, size_t i) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  return t->encoding == TPL_ENC_RAW &&
         !(t->kind == TPL_RULE_SCALE_BIAS && t->bias != TPL_BIAS_WHOLE &&
           job->grid.tp > 1);
}

void tpl__job_free(struct tpl__job *job) {
  if (job == NULL) return;
  for (size_t i = 0; job->tensors != NULL && i < job->ntensors; i++) {
    free(job->tensors[i].name);
    free(job->tensors[i].func_name);
  }
  free(job->tensors);
  for (size_t f = 0; job->files != NULL && f < job->nfiles; f++) {
    free(job->files[f].path);
    free(job->files[f].url);
  }
  free(job->files);
  free(job->model);
  free(job->plan_source);
  free(job);
}

const struct tpl__origin *tpl__job_origin(const struct tpl__job *job) {
  return job->origin != NULL ? job->origin : &tpl__origin_local;
}
