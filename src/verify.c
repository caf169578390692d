/* verify.c - recomputes every shard from the model and compares it, byte
 * for byte and by checksum, with what preshard wrote: on a TP x PP x DP
 * grid, every rank file against the shard t of the tensors of its stage
 * p, so every replica is held to the bytes of replica 0.  One tensor at a
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
#include "fmt_safetensors.h"
#include "job.h"
#include "jsonu.h"
#include "planner.h"
#include "preshard.h"
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
  size_t *pos;             /* per rank: its file's next tensor */
  uint8_t *src, *want, *got;
  size_t src_cap, want_cap, got_cap; /* their capacities */
  int src_fd;        /* the model file being read, -1 when none */
  uint32_t src_file; /* its index in the model */
};

/* A count of shard-info.json: 1..65536; `dflt` when absent (0: required). */
static int info_count(const char *key, uint64_t dflt, uint32_t *out,
                      const json_t *info) {
  const json_t *v = json_object_get(info, key);
  uint64_t n = dflt;
  if ((v != NULL && tpl__json_u64(v, &n) != 0) || n == 0 || n > 65536)
    return -1;
  *out = (uint32_t)n;
  return 0;
}

/* The grid shard-info.json describes (pipeline_parallel_stages and
 * data_parallel_replicas default to 1: outputs of one TP group), which
 * --tp / --pp, when given, must match. */
static int info_grid(const struct verify *v, const char *path,
                     const struct tpl__verify_grid *want, struct tpl__grid *g,
                     struct tpl_error *err) {
  uint32_t tp, pp, dp;
  if (info_count("tensor_parallel_shards", 0, &tp, v->info) != 0 ||
      info_count("pipeline_parallel_stages", 1, &pp, v->info) != 0 ||
      info_count("data_parallel_replicas", 1, &dp, v->info) != 0 ||
      (uint64_t)tp * pp * dp > 65536)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected tensor_parallel_shards, and optional "
                     "pipeline_parallel_stages and data_parallel_replicas, "
                     "of 1..65536 and at most 65536 ranks in all",
                     path);
  if ((want->tp != 0 && want->tp != tp) || (want->pp != 0 && want->pp != pp))
    return tpl__fail(err, TPL_EMISMATCH,
                     "%s: the output is tp %u x pp %u, --tp %u --pp %u was "
                     "asked for",
                     path, tp, pp, want->tp ? want->tp : tp,
                     want->pp ? want->pp : pp);
  return tpl__grid_make(tp * pp * dp, tp, pp, err, g);
}

static int read_shard_info(struct verify *v,
                           const struct tpl__verify_grid *want,
                           struct tpl__grid *g, int *scaling,
                           struct tpl_error *err) {
  char *path = tpl__path_join(v->dir, "shard-info.json"), *buf = NULL;
  size_t len;
  json_t *bs;
  int rc =
      path ? tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err) : -ENOMEM;
  if (rc == 0) rc = tpl__json_parse_object(buf, len, path, &v->info, err);
  if (rc == 0) {
    bs = json_object_get(v->info, "bias_scaling");
    if (!json_is_boolean(bs))
      rc = tpl__fail(err, TPL_EFORMAT, "%s: expected bias_scaling (boolean)",
                     path);
    *scaling = json_is_true(bs);
  }
  if (rc == 0) rc = info_grid(v, path, want, g, err);
  free(path);
  free(buf);
  return rc;
}

/* How many tensors rank r holds. */
static size_t held_count(const struct tpl__job *job, uint32_t r) {
  size_t n = 0;
  for (size_t i = 0; i < job->ntensors; i++)
    n += (size_t)tpl__job_holds(job, i, r);
  return n;
}

/* The `__metadata__` object of a safetensors header of `len` bytes at
 * `hdr` (8-byte length, then JSON), as a new reference; NULL when there is
 * none or the header does not parse. */
static json_t *header_metadata(const uint8_t *hdr, size_t len) {
  json_t *root = len > 8 ? json_loadb((const char *)hdr + 8, len - 8,
                                      JSON_DISABLE_EOF_CHECK, NULL)
                         : NULL;
  json_t *meta = json_incref(json_object_get(root, "__metadata__"));
  json_decref(root);
  return meta;
}

/* The `__metadata__` that preshard writes for rank r (its place in the
 * grid; tpl__rank_file_header is the one definition), as a new
 * reference, or NULL on ENOMEM. */
static json_t *expected_metadata(const struct verify *v, uint32_t r) {
  uint8_t *hdr = NULL;
  size_t len = 0;
  json_t *meta = NULL;
  if (tpl__rank_file_header(NULL, 0, &v->job->grid, r, &hdr, &len) == 0)
    meta = header_metadata(hdr, len);
  free(hdr);
  return meta;
}

/* Reads the __metadata__ of rank r's file (already parsed strictly by
 * tpl__st_load, so its length is sound). */
static json_t *file_metadata(const struct verify *v, uint32_t r,
                             uint64_t size) {
  uint8_t pre[8];
  uint64_t hl = 0;
  uint8_t *hdr;
  json_t *meta = NULL;
  if (tpl__pread_full(v->fds[r], pre, sizeof(pre), 0) != 0 ||
      tpl__st_header_len(pre, sizeof(pre), size, "", &hl, NULL) != 0)
    return NULL;
  hdr = malloc((size_t)hl + 8);
  if (hdr != NULL && tpl__pread_full(v->fds[r], hdr, (size_t)hl + 8, 0) == 0)
    meta = header_metadata(hdr, (size_t)hl + 8);
  free(hdr);
  return meta;
}

/* Rank r's file says where r sits in the grid, as preshard writes it. */
static int check_rank_metadata(const struct verify *v, uint32_t r,
                               const char *path, uint64_t size,
                               struct tpl_error *err) {
  json_t *want = expected_metadata(v, r), *got = file_metadata(v, r, size);
  struct tpl__pos c = tpl__grid_coord(&v->job->grid, r);
  char *w = want ? json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  int rc = 0;
  if (w == NULL)
    rc = tpl__fail(err, -ENOMEM, "out of memory");
  else if (g == NULL || strcmp(w, g) != 0)
    rc = tpl__fail(err, TPL_EMISMATCH,
                   "%s: __metadata__: expected %s (rank %u is d %u, p %u, "
                   "t %u), found %s",
                   path, w, r, c.d, c.p, c.t, g ? g : "none");
  free(w);
  free(g);
  json_decref(want);
  json_decref(got);
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
  if (rc == 0) rc = check_rank_metadata(v, r, path, size, err);
  if (rc == 0 && v->outs[r]->ntensors != held_count(v->job, r))
    rc = tpl__fail(err, TPL_EMISMATCH, "%s: expected %zu tensors, found %zu",
                   path, held_count(v->job, r), v->outs[r]->ntensors);
  free(path);
  return rc;
}

static int check_meta(const struct verify *v, uint32_t r, size_t i, size_t k,
                      const struct tpl__tensor *o, struct tpl_error *err) {
  const struct tpl__job_tensor *t = &v->job->tensors[i];
  char a[200], b[200];
  if (strcmp(o->name, t->name) != 0)
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor %zu: expected '%s', found "
                     "'%s'",
                     r, k, t->name, o->name);
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

/* shard-info.json's "ranks" entry of rank r in params entry `p`, or NULL. */
static json_t *rank_entry(json_t *p, uint32_t r) {
  json_t *ranks = json_object_get(p, "ranks"), *e;
  size_t k;
  json_array_foreach(ranks, k, e) {
    if (json_integer_value(json_object_get(e, "rank")) == (json_int_t)r)
      return e;
  }
  return NULL;
}

/* The recorded ranks of params[i] are its holders in rank order, each
 * with the bytes every holder has. */
static int same_holders(const struct verify *v, size_t i, json_t *ranks) {
  const struct tpl__job *job = v->job;
  size_t k = 0;
  for (uint32_t r = 0; r < job->grid.world; r++) {
    json_t *rk, *nb;
    if (!tpl__job_holds(job, i, r)) continue;
    rk = json_array_get(ranks, k++);
    nb = json_object_get(rk, "nbytes");
    if (json_integer_value(json_object_get(rk, "rank")) != (json_int_t)r ||
        !json_is_integer(nb) ||
        (uint64_t)json_integer_value(nb) != job->tensors[i].rank_bytes)
      return 0;
  }
  return k == json_array_size(ranks);
}

/* shard-info.json's params[i] must say what the model and plan say, apart
 * from the per-rank checksums (checked against the files' bytes) and the
 * holders' coordinates (which the grid gives). */
static int check_param(const struct verify *v, size_t i,
                       struct tpl_error *err) {
  json_t *want = json_array_get(json_object_get(v->expect, "params"), i);
  json_t *got =
      json_deep_copy(json_array_get(json_object_get(v->info, "params"), i));
  int same = same_holders(v, i, json_object_get(got, "ranks"));
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
  const char *hex =
      json_string_value(json_object_get(rank_entry(p, r), "xxh3"));
  char *end;
  if (hex == NULL || strlen(hex) != 16) return TPL_EFORMAT;
  *out = strtoull(hex, &end, 16);
  return *end == '\0' ? 0 : TPL_EFORMAT;
}

/* Rank r's copy of tensor i (the next tensor of its file) against
 * v->want, the shard the model gives for r's shard t; on a replica d > 0
 * that is also what replica 0's rank at the same (p, t) was held to. */
static int compare_rank(struct verify *v, size_t i, uint32_t r,
                        struct tpl__verify_result *res, struct tpl_error *err) {
  const struct tpl__job_tensor *t = &v->job->tensors[i];
  size_t k = v->pos[r]++;
  const struct tpl__tensor *o = &v->outs[r]->tensors[k];
  struct tpl__pos c = tpl__grid_coord(&v->job->grid, r);
  uint64_t rec;
  int rc = check_meta(v, r, i, k, o, err);
  if (rc == 0)
    rc = tpl__pread_full(v->fds[r], v->got, (size_t)t->rank_bytes, o->offset);
  if (rc != 0)
    return tpl__fail(err, rc, "rank%u.safetensors: '%s': %s", r, t->name,
                     tpl_strerror(rc));
  if (memcmp(v->want, v->got, (size_t)t->rank_bytes) != 0)
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor '%s': bytes differ from "
                     "the shard recomputed from the model (rank %u is "
                     "d %u, p %u, t %u%s)",
                     r, t->name, r, c.d, c.p, c.t,
                     c.d > 0 ? "; replica 0 holds the right bytes" : "");
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

/* Recomputes shard t of tensor i into v->want from v->src. */
static int expected_shard(struct verify *v, size_t i, uint32_t t,
                          struct tpl_error *err) {
  struct tpl__layout l;
  int rc = tpl__job_layout(v->job, i, t, &l);
  if (rc != 0) return rc;
  tpl__layout_gather(&l, 0, v->model->tensors[i].stored_bytes, v->src, v->want);
  return tpl__job_finish_bytes(v->job, i, v->want, err);
}

/* Every holder of tensor i, shard by shard: each shard t is recomputed
 * once and checked on the ranks of every stage and replica that hold
 * it. */
static int compare_holders(struct verify *v, size_t i,
                           struct tpl__verify_result *res,
                           struct tpl_error *err) {
  const struct tpl__grid *g = &v->job->grid;
  int rc = 0;
  for (uint32_t t = 0; rc == 0 && t < g->tp; t++) {
    rc = expected_shard(v, i, t, err);
    for (uint32_t r = t; rc == 0 && r < g->world; r += g->tp)
      if (tpl__job_holds(v->job, i, r)) rc = compare_rank(v, i, r, res, err);
  }
  return rc;
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
  if (rc == 0) rc = compare_holders(v, i, res, err);
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
                   const struct tpl__verify_grid *want, struct tpl_error *err) {
  struct tpl__grid grid = {0};
  uint32_t world;
  int scaling = 0;
  int rc = read_shard_info(v, want, &grid, &scaling, err);
  world = grid.world;
  if (rc == 0) rc = tpl__model_open(model, &v->model, err);
  if (rc == 0)
    rc = tpl__job_plan(plan, v->model, model, &grid, scaling, &v->plan, &v->job,
                       err);
  if (rc == 0 && tpl__shardinfo_build(v->job, NULL, &v->expect) != 0)
    rc = tpl__fail(err, -ENOMEM, "out of memory");
  if (rc == 0) rc = check_layout(v, world, err);
  if (rc != 0) return rc;
  v->outs = calloc(world, sizeof(*v->outs));
  v->fds = calloc(world, sizeof(*v->fds));
  v->pos = calloc(world, sizeof(*v->pos));
  if (v->outs == NULL || v->fds == NULL || v->pos == NULL)
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
  free(v->pos);
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
                const struct tpl__verify_grid *want,
                struct tpl__verify_result *out, struct tpl_error *err) {
  struct verify v = {0};
  struct tpl__verify_result res = {0};
  int rc;
  v.dir = dir;
  v.src_fd = -1;
  rc = prepare(&v, model, plan, want, err);
  for (size_t i = 0; rc == 0 && i < v.job->ntensors; i++)
    rc = compare_tensor(&v, i, &res, err);
  if (rc == 0) {
    res.grid = v.job->grid;
    *out = res;
  }
  verify_free(&v);
  return rc;
}
