/* verify.c - recomputes every shard from the model and compares it, byte
 * for byte and by checksum, with what preshard wrote.  One tensor at a
 * time: memory is about three times the largest tensor (source, expected
 * and found bytes), not the model's size. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "checkpoint.h"
#include "ckpt_files.h"
#include "dtype.h"
#include "fileio.h"
#include "job.h"
#include "jsonu.h"
#include "planner.h"
#include "shardinfo.h"
#include "verify.h"

struct verify {
  const char *dir;
  struct tpl_model *model;
  struct tpl__plan *plan;
  struct tpl__job *job;
  json_t *info;            /* shard-info.json */
  json_t *expect;          /* shard info recomputed from the model */
  struct tpl_model **outs; /* one per rank */
  int *fds;                /* rank files, open */
  uint8_t *src, *want, *got;
  size_t src_cap, want_cap, got_cap; /* their capacities */
  int src_fd;        /* the model file being read, -1 when none */
  uint32_t src_file; /* its index in the model */
};

static int read_shard_info(struct verify *v, uint32_t *world, int *scaling,
                           struct tpl_error *err) {
  char *path = tpl__path_join(v->dir, "shard-info.json"), *buf = NULL;
  size_t len;
  uint64_t n = 0;
  json_t *bs;
  int rc =
      path ? tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err) : -ENOMEM;
  if (rc == 0) rc = tpl__json_parse_object(buf, len, path, &v->info, err);
  if (rc == 0) {
    bs = json_object_get(v->info, "bias_scaling");
    if (tpl__json_u64(json_object_get(v->info, "tensor_parallel_shards"), &n) !=
            0 ||
        n == 0 || n > 65536 || !json_is_boolean(bs))
      rc = tpl__fail(err, TPL_EFORMAT,
                     "%s: expected tensor_parallel_shards (1..65536) and "
                     "bias_scaling (boolean)",
                     path);
    *world = (uint32_t)n;
    *scaling = json_is_true(bs);
  }
  free(path);
  free(buf);
  return rc;
}

static int open_rank_file(struct verify *v, uint32_t r, struct tpl_error *err) {
  char name[64], *path;
  uint64_t size;
  int rc;
  snprintf(name, sizeof(name), "rank%u.safetensors", r);
  path = tpl__path_join(v->dir, name);
  if (path == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  v->outs[r] = tpl__model_new(TPL_FMT_SAFETENSORS, v->dir);
  rc = v->outs[r] ? tpl__st_load(path, name, v->outs[r], err) : -ENOMEM;
  if (rc == 0) rc = tpl__open_regular(path, &v->fds[r], &size, err);
  if (rc == 0 && v->outs[r]->ntensors != v->job->ntensors)
    rc = tpl__fail(err, TPL_EMISMATCH, "%s: expected %zu tensors, found %zu",
                   path, v->job->ntensors, v->outs[r]->ntensors);
  free(path);
  return rc;
}

static int check_meta(const struct verify *v, uint32_t r, size_t i,
                      const struct tpl__tensor *o, struct tpl_error *err) {
  const struct tpl__job_tensor *t = &v->job->tensors[i];
  char a[200], b[200];
  if (strcmp(o->name, t->name) != 0)
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor %zu: expected '%s', found "
                     "'%s'",
                     r, i, t->name, o->name);
  if (o->dtype != t->dtype || o->ndim != t->ndim ||
      memcmp(o->shape, t->rank_shape, sizeof(uint64_t) * (size_t)t->ndim))
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor '%s': expected %s %s, "
                     "found %s %s",
                     r, t->name, tpl__dtype_st_name(t->dtype),
                     tpl__shape_str(t->rank_shape, t->ndim, a, sizeof(a)),
                     tpl__dtype_st_name(o->dtype),
                     tpl__shape_str(o->shape, o->ndim, b, sizeof(b)));
  return 0;
}

/* shard-info.json's params[i] must say what the model and plan say, apart
 * from the per-rank checksums (checked against the files' bytes). */
static int check_param(const struct verify *v, size_t i,
                       struct tpl_error *err) {
  json_t *want = json_array_get(json_object_get(v->expect, "params"), i);
  json_t *got =
      json_deep_copy(json_array_get(json_object_get(v->info, "params"), i));
  json_t *ranks = json_object_get(got, "ranks");
  int same = 1;
  for (uint32_t r = 0; r < v->job->grid.world; r++) {
    json_t *rk = json_array_get(ranks, r);
    json_t *nb = json_object_get(rk, "nbytes");
    same = same && json_array_size(ranks) == v->job->grid.world &&
           json_integer_value(json_object_get(rk, "rank")) == r &&
           json_is_integer(nb) &&
           (uint64_t)json_integer_value(nb) == v->job->tensors[i].rank_bytes;
  }
  json_object_del(got, "ranks");
  same = same && json_equal(want, got);
  json_decref(got);
  if (!same)
    return tpl__fail(err, TPL_EMISMATCH,
                     "shard-info.json: params[%zu] ('%s'): expected the "
                     "shard info the model and plan give, found another",
                     i, v->job->tensors[i].name);
  return 0;
}

/* shard-info.json's recorded checksum of tensor i on rank r. */
static int recorded_xxh3(const struct verify *v, size_t i, uint32_t r,
                         uint64_t *out) {
  json_t *p = json_array_get(json_object_get(v->info, "params"), i);
  json_t *rk = json_array_get(json_object_get(p, "ranks"), r);
  const char *hex = json_string_value(json_object_get(rk, "xxh3"));
  char *end;
  if (hex == NULL || strlen(hex) != 16) return TPL_EFORMAT;
  *out = strtoull(hex, &end, 16);
  return *end == '\0' ? 0 : TPL_EFORMAT;
}

static int compare_rank(struct verify *v, size_t i, uint32_t r,
                        struct tpl__verify_result *res, struct tpl_error *err) {
  const struct tpl__job_tensor *t = &v->job->tensors[i];
  const struct tpl__tensor *o = &v->outs[r]->tensors[i];
  struct tpl__layout l;
  uint64_t full = v->model->tensors[i].stored_bytes, rec;
  int rc = check_meta(v, r, i, o, err);
  if (rc == 0) rc = tpl__job_layout(v->job, i, r, &l);
  if (rc != 0) return rc;
  tpl__layout_gather(&l, 0, full, v->src, v->want);
  rc = tpl__job_finish_bytes(v->job, i, v->want, err);
  if (rc == 0)
    rc = tpl__pread_full(v->fds[r], v->got, (size_t)t->rank_bytes, o->offset);
  if (rc != 0)
    return tpl__fail(err, rc, "rank%u.safetensors: '%s': %s", r, t->name,
                     tpl_strerror(rc));
  if (memcmp(v->want, v->got, (size_t)t->rank_bytes) != 0)
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor '%s': bytes differ from the "
                     "shard recomputed from the model",
                     r, t->name);
  if (recorded_xxh3(v, i, r, &rec) != 0 ||
      rec != XXH3_64bits(v->got, (size_t)t->rank_bytes))
    return tpl__fail(err, TPL_EMISMATCH,
                     "shard-info.json: tensor '%s' rank %u: checksum missing "
                     "or different from the file's bytes",
                     t->name, r);
  res->tensors++;
  res->bytes += t->rank_bytes;
  return 0;
}

/* Makes *p hold at least `need` bytes, keeping the larger buffer. */
static int reserve(uint8_t **p, size_t *cap, size_t need) {
  uint8_t *n;
  if (*p != NULL && *cap >= need) return 0;
  n = realloc(*p, need ? need : 1);
  if (n == NULL) return -ENOMEM;
  *p = n;
  *cap = need;
  return 0;
}

/* Tensors come file by file, so each model file is opened once. */
static int source_fd(struct verify *v, uint32_t file, struct tpl_error *err) {
  uint64_t size;
  int rc;
  if (v->src_fd >= 0 && v->src_file == file) return 0;
  if (v->src_fd >= 0) close(v->src_fd);
  v->src_fd = -1;
  rc = tpl__open_regular(v->model->files[file].path, &v->src_fd, &size, err);
  if (rc == 0) v->src_file = file;
  return rc;
}

static int compare_tensor(struct verify *v, size_t i,
                          struct tpl__verify_result *res,
                          struct tpl_error *err) {
  const struct tpl__tensor *t = &v->model->tensors[i];
  const struct tpl__job_tensor *jt = &v->job->tensors[i];
  int rc;
  if (reserve(&v->src, &v->src_cap, (size_t)t->stored_bytes) != 0 ||
      reserve(&v->want, &v->want_cap, (size_t)jt->rank_bytes) != 0 ||
      reserve(&v->got, &v->got_cap, (size_t)jt->rank_bytes) != 0)
    return tpl__fail(err, -ENOMEM, "tensor '%s': out of memory", t->name);
  rc = source_fd(v, t->file, err);
  if (rc != 0) return rc;
  rc = tpl__pread_full(v->src_fd, v->src, (size_t)t->stored_bytes, t->offset);
  if (rc != 0)
    return tpl__fail(err, rc, "%s: tensor '%s': %s",
                     v->model->files[t->file].path, t->name, tpl_strerror(rc));
  rc = check_param(v, i, err);
  for (uint32_t r = 0; rc == 0 && r < v->job->grid.world; r++)
    rc = compare_rank(v, i, r, res, err);
  return rc;
}

/* The directory holds exactly rank0..rank{N-1}, and shard-info.json one
 * params entry per tensor. */
static int check_layout(const struct verify *v, uint32_t world,
                        struct tpl_error *err) {
  size_t n = json_array_size(json_object_get(v->info, "params"));
  DIR *d;
  struct dirent *de;
  int rc = 0;
  if (n != v->job->ntensors)
    return tpl__fail(err, TPL_EMISMATCH,
                     "%s/shard-info.json: expected %zu params, found %zu",
                     v->dir, v->job->ntensors, n);
  d = opendir(v->dir);
  if (d == NULL)
    return tpl__fail(err, -errno, "%s: cannot list: %s", v->dir,
                     strerror(errno));
  while (rc == 0 && (de = readdir(d)) != NULL) {
    unsigned r;
    char tail[32];
    if (sscanf(de->d_name, "rank%u.safetensor%31s", &r, tail) == 2 &&
        strcmp(tail, "s") == 0 && r >= world)
      rc = tpl__fail(err, TPL_EMISMATCH,
                     "%s: expected rank files 0..%u only, found %s", v->dir,
                     world - 1, de->d_name);
  }
  closedir(d);
  return rc;
}

static int prepare(struct verify *v, const char *model, const char *plan,
                   struct tpl_error *err) {
  uint32_t world = 0;
  int scaling = 0;
  int rc = read_shard_info(v, &world, &scaling, err);
  if (rc == 0) rc = tpl__model_open(model, &v->model, err);
  if (rc == 0)
    rc = tpl__job_plan(plan, v->model, model,
                       &(struct tpl__grid){world, world, 1, 1}, scaling,
                       &v->plan, &v->job, err);
  if (rc == 0 && tpl__shardinfo_build(v->job, NULL, &v->expect) != 0)
    rc = tpl__fail(err, -ENOMEM, "out of memory");
  if (rc == 0) rc = check_layout(v, world, err);
  if (rc != 0) return rc;
  v->outs = calloc(world, sizeof(*v->outs));
  v->fds = calloc(world, sizeof(*v->fds));
  if (v->outs == NULL || v->fds == NULL)
    return tpl__fail(err, -ENOMEM, "out of memory");
  for (uint32_t r = 0; r < world; r++)
    v->fds[r] = -1;
  for (uint32_t r = 0; rc == 0 && r < world; r++)
    rc = open_rank_file(v, r, err);
  return rc;
}

static void verify_free(struct verify *v) {
  for (uint32_t r = 0; v->job && v->outs && r < v->job->grid.world; r++) {
    tpl__model_free(v->outs[r]);
    if (v->fds[r] >= 0) close(v->fds[r]);
  }
  free(v->outs);
  free(v->fds);
  free(v->src);
  free(v->want);
  free(v->got);
  if (v->src_fd >= 0) close(v->src_fd);
  json_decref(v->info);
  json_decref(v->expect);
  tpl__job_free(v->job);
  tpl__plan_free(v->plan);
  tpl__model_free(v->model);
}

int tpl__verify(const char *model, const char *dir, const char *plan,
                struct tpl__verify_result *out, struct tpl_error *err) {
  struct verify v = {0};
  struct tpl__verify_result res = {0};
  int rc;
  v.dir = dir;
  v.src_fd = -1;
  rc = prepare(&v, model, plan, err);
  for (size_t i = 0; rc == 0 && i < v.job->ntensors; i++)
    rc = compare_tensor(&v, i, &res, err);
  if (rc == 0) {
    res.ranks = v.job->grid.world;
    *out = res;
  }
  verify_free(&v);
  return rc;
}
