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
#include <xxhash.h>

#include "checkpoint.h"
#include "ckpt_files.h"
#include "dtype.h"
#include "fileio.h"
#include "fmt_safetensors.h"
#include "job.h"
#include "jsonu.h"
#include "mlc_cut.h"
#include "planner.h"
#include "preshard.h"
#include "shardinfo.h"
#include "verify.h"

struct verify {
  const char *dir;
  struct tpl__model *model;
  struct tpl__plan *plan;
  struct tpl__job *job;
  json_t *info;             /* shard-info.json */
  struct tpl__model **outs; /* one per rank: its file, held */
  size_t *pos;              /* per rank: its file's next tensor */
  /* per rank: its bytes and checksum of the tensor being compared */
  struct tpl__rank_info *found;
  /* the largest tensor as stored, the largest shard, twice */
  uint8_t *src, *want, *got;
  struct tpl__verify_result res; /* what was compared so far */
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

/* An expert-parallel output names its group: "expert_parallel" {"size"}
 * of T (the TP group) or T x D (every replica's, tpl__grid_set_ep); --ep
 * asks for one, --ep-size for its size.  `rc` is the grid's. */
static int info_ep(const struct verify *v, const char *path,
                   const struct tpl__verify_grid *want, int rc,
                   struct tpl__grid *g, struct tpl__error *err) {
  const json_t *ep = json_object_get(v->info, "expert_parallel");
  uint64_t size = 0;
  if (rc != 0) return rc;
  if (ep != NULL &&
      (tpl__json_u64(json_object_get(ep, "size"), &size) != 0 || size == 0 ||
       size > UINT32_MAX || tpl__grid_set_ep(g, 1, (uint32_t)size, NULL) != 0))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected expert_parallel.size = %u (the "
                     "tensor-parallel group) or %llu (T x D)",
                     path, g->tp, (unsigned long long)g->tp * g->dp);
  if (want->ep && ep == NULL)
    return tpl__fail(err, TPL_EMISMATCH,
                     "%s: the output is not expert-parallel, --ep was "
                     "asked for",
                     path);
  if (want->ep_size != 0 && size != want->ep_size)
    return tpl__fail(err, TPL_EMISMATCH,
                     "%s: the output's expert-parallel group has %llu ranks, "
                     "--ep-size %u was asked for",
                     path, (unsigned long long)size, want->ep_size);
  g->ep = (uint32_t)size;
  return 0;
}

/* The grid shard-info.json describes (pipeline_parallel_stages and
 * data_parallel_replicas default to 1: outputs of one TP group), which
 * --tp / --pp, when given, must match. */
static int info_grid(const struct verify *v, const char *path,
                     const struct tpl__verify_grid *want, struct tpl__grid *g,
                     struct tpl__error *err) {
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
  return info_ep(v, path, want, tpl__grid_make(tp * pp * dp, tp, pp, err, g), g,
                 err);
}

/* The bias family the directory was written with: "bias_policy" (mlc,
 * vllm or whole), or from files that predate it "bias_scaling" (true:
 * mlc, false: whole). */
static int info_bias(const json_t *info, const char *path, int *family,
                     struct tpl__error *err) {
  const json_t *bp = json_object_get(info, "bias_policy");
  const json_t *bs = json_object_get(info, "bias_scaling");
  if (bp != NULL) {
    *family =
        json_is_string(bp) ? tpl__bias_family_parse(json_string_value(bp)) : -1;
    if (*family < 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: expected bias_policy \"mlc\", \"vllm\" or "
                       "\"whole\"",
                       path);
    return 0;
  }
  if (!json_is_boolean(bs))
    return tpl__fail(err, TPL_EFORMAT, "%s: expected bias_scaling (boolean)",
                     path);
  *family = json_is_true(bs) ? TPL_BIASF_MLC : TPL_BIASF_WHOLE;
  return 0;
}

static int read_shard_info(struct verify *v,
                           const struct tpl__verify_grid *want,
                           struct tpl__grid *g, int *family,
                           struct tpl__error *err) {
  char *path = tpl__path_join(v->dir, "shard-info.json"), *buf = NULL;
  size_t len;
  int rc =
      path ? tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err) : -ENOMEM;
  if (rc == 0) rc = tpl__json_parse_object(buf, len, path, &v->info, err);
  if (rc == 0) rc = info_bias(v->info, path, family, err);
  if (rc == 0 && want->bias_family >= 0 && want->bias_family != *family)
    rc = tpl__fail(err, TPL_EMISMATCH,
                   "%s: bias_policy %s, expected %s (--bias-policy): the "
                   "row-parallel biases are not what that engine expects",
                   path, tpl__bias_family_name(*family),
                   tpl__bias_family_name(want->bias_family));
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
 * grid and the fingerprint shard-info.json records, none in an output
 * older than it; tpl__rank_file_header is the one definition), as a new
 * reference, or NULL on ENOMEM. */
static json_t *expected_metadata(const struct verify *v, uint32_t r) {
  const char *fp = json_string_value(json_object_get(v->info, "fingerprint"));
  uint8_t *hdr = NULL;
  size_t len = 0;
  json_t *meta = NULL;
  if (tpl__rank_file_header(NULL, 0, &v->job->grid, r, fp, &hdr, &len) == 0)
    meta = header_metadata(hdr, len);
  free(hdr);
  return meta;
}

/* Reads the __metadata__ of rank r's file (already parsed strictly by
 * tpl__st_load, so its length is sound). */
static json_t *file_metadata(const struct verify *v, uint32_t r) {
  const struct tpl__file *f = &v->outs[r]->files[0];
  uint8_t pre[8];
  uint64_t hl = 0;
  uint8_t *hdr;
  json_t *meta = NULL;
  if (tpl__model_pread(v->outs[r], 0, pre, sizeof(pre), 0) != 0 ||
      tpl__st_header_len(pre, sizeof(pre), f->size, "", &hl, NULL) != 0)
    return NULL;
  hdr = malloc((size_t)hl + 8);
  if (hdr != NULL &&
      tpl__model_pread(v->outs[r], 0, hdr, (size_t)hl + 8, 0) == 0)
    meta = header_metadata(hdr, (size_t)hl + 8);
  free(hdr);
  return meta;
}

/* Rank r's file says where r sits in the grid, as preshard writes it. */
static int check_rank_metadata(const struct verify *v, uint32_t r,
                               const char *path, struct tpl__error *err) {
  json_t *want = expected_metadata(v, r), *got = file_metadata(v, r);
  struct tpl__pos c = tpl__grid_coord(&v->job->grid, r);
  char *w = want ? json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  int rc = 0;
  if (w == NULL)
    rc = tpl__oom(err);
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

static int open_rank_file(struct verify *v, uint32_t r,
                          struct tpl__error *err) {
  char name[64], *path;
  int rc;
  snprintf(name, sizeof(name), "rank%u.safetensors", r);
  path = tpl__path_join(v->dir, name);
  if (path == NULL) return tpl__oom(err);
  v->outs[r] = tpl__model_new(TPL_FMT_SAFETENSORS, v->dir);
  rc = v->outs[r] ? tpl__st_load(path, name, v->outs[r], err) : -ENOMEM;
  if (rc == 0) rc = check_rank_metadata(v, r, path, err);
  if (rc == 0 && v->outs[r]->ntensors != held_count(v->job, r))
    rc = tpl__fail(err, TPL_EMISMATCH, "%s: expected %zu tensors, found %zu",
                   path, held_count(v->job, r), v->outs[r]->ntensors);
  free(path);
  return rc;
}

static int check_meta(const struct verify *v, uint32_t r, size_t i, size_t k,
                      const struct tpl__tensor *o, struct tpl__error *err) {
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

/* Rank r's copy of tensor i (the next tensor of its file) against
 * v->want, the shard the model gives for r's shard t; on a replica d > 0
 * that is also what replica 0's rank at the same (p, t) was held to. */
static int compare_rank(struct verify *v, size_t i, uint32_t r,
                        struct tpl__error *err) {
  const struct tpl__job_tensor *t = &v->job->tensors[i];
  size_t k = v->pos[r]++;
  const struct tpl__tensor *o = &v->outs[r]->tensors[k];
  struct tpl__pos c = tpl__grid_coord(&v->job->grid, r);
  uint32_t cell = v->job->grid.tp * v->job->grid.pp;
  int rc = check_meta(v, r, i, k, o, err);
  if (rc == 0)
    rc = tpl__model_pread(v->outs[r], 0, v->got, (size_t)t->rank_bytes,
                          o->offset);
  if (rc != 0)
    return tpl__fail(err, rc, "rank%u.safetensors: '%s': %s", r, t->name,
                     tpl_strerror(rc));
  if (memcmp(v->want, v->got, (size_t)t->rank_bytes) != 0)
    return tpl__fail(err, TPL_EMISMATCH,
                     "rank%u.safetensors: tensor '%s': bytes differ from "
                     "the shard recomputed from the model (rank %u is "
                     "d %u, p %u, t %u%s)",
                     r, t->name, r, c.d, c.p, c.t,
                     c.d > 0 && tpl__job_holds(v->job, i, r % cell)
                         ? "; replica 0 holds the right bytes"
                         : "");
  v->found[r].nbytes = t->rank_bytes;
  v->found[r].xxh3 = XXH3_64bits(v->got, (size_t)t->rank_bytes);
  v->res.tensors++;
  v->res.bytes += t->rank_bytes;
  return 0;
}

/* Recomputes shard t of tensor i into v->want from v->src. */
static int expected_shard(struct verify *v, size_t i, uint32_t t,
                          struct tpl__error *err) {
  struct tpl__layout l;
  int rc = tpl__job_layout(v->job, i, t, &l);
  if (rc != 0) return rc;
  tpl__layout_gather(&l, 0, v->model->tensors[i].stored_bytes, v->src, v->want);
  return tpl__job_finish_bytes(v->job, i, t, v->want, err);
}

/* Every holder of tensor i, shard by shard: each shard t is recomputed
 * once and checked on the ranks of every stage and replica that hold
 * it. */
static int compare_holders(struct verify *v, size_t i, struct tpl__error *err) {
  const struct tpl__grid *g = &v->job->grid;
  int rc = 0;
  for (uint32_t t = 0; rc == 0 && t < g->tp; t++) {
    rc = expected_shard(v, i, t, err);
    for (uint32_t r = t; rc == 0 && r < g->world; r += g->tp)
      if (tpl__job_holds(v->job, i, r)) rc = compare_rank(v, i, r, err);
  }
  return rc;
}

/* Gives `want`'s ranks the checksums `got` records for them; returns the
 * first rank whose recorded checksum is missing or another, or -1. */
static json_int_t adopt_checksums(json_t *want, json_t *got) {
  json_t *ranks = json_object_get(got, "ranks"), *e;
  json_int_t first = -1;
  size_t k;
  json_array_foreach(json_object_get(want, "ranks"), k, e) {
    json_t *sum = json_object_get(json_array_get(ranks, k), "xxh3");
    if (first < 0 && !json_equal(sum, json_object_get(e, "xxh3")))
      first = json_integer_value(json_object_get(e, "rank"));
    json_object_del(e, "xxh3");
    if (sum != NULL) json_object_set(e, "xxh3", sum);
  }
  return first;
}

/* shard-info.json's params[i] must be what preshard writes for it: the
 * shard info the model and plan give, with the checksums of the bytes the
 * rank files hold (v->found). A difference in checksums alone names the
 * rank. */
static int check_param(const struct verify *v, size_t i,
                       struct tpl__error *err) {
  json_t *want = tpl__shardinfo_param(v->job, i, v->found);
  if (want == NULL) return tpl__oom(err);
  json_t *got = json_array_get(json_object_get(v->info, "params"), i);
  int same = json_equal(want, got);
  json_int_t r = same ? -1 : adopt_checksums(want, got);
  int sums_only = r >= 0 && json_equal(want, got);
  json_decref(want);
  if (sums_only)
    return tpl__fail(err, TPL_EMISMATCH,
                     "shard-info.json: tensor '%s' rank %u: checksum missing "
                     "or different from the file's bytes",
                     v->job->tensors[i].name, (uint32_t)r);
  if (!same)
    return tpl__fail(err, TPL_EMISMATCH,
                     "shard-info.json: params[%zu] ('%s'): expected the "
                     "shard info the model and plan give, with the rank "
                     "files' checksums, found another",
                     i, v->job->tensors[i].name);
  return 0;
}

static int compare_tensor(struct verify *v, size_t i, struct tpl__error *err) {
  const struct tpl__tensor *t = &v->model->tensors[i];
  struct tpl__error why = {0};
  int rc = tpl__model_read(v->model, t->file, v->src, t->stored_bytes,
                           t->offset, &why);
  if (rc != 0) return tpl__fail(err, rc, "tensor '%s': %s", t->name, why.msg);
  rc = compare_holders(v, i, err);
  return rc != 0 ? rc : check_param(v, i, err);
}

/* The buffers, for the largest tensor and the largest shard. */
static int alloc_buffers(struct verify *v) {
  uint64_t src = 1, shard = 1;
  for (size_t i = 0; i < v->job->ntensors; i++) {
    if (v->model->tensors[i].stored_bytes > src)
      src = v->model->tensors[i].stored_bytes;
    if (v->job->tensors[i].rank_bytes > shard)
      shard = v->job->tensors[i].rank_bytes;
  }
  v->src = malloc((size_t)src);
  v->want = malloc((size_t)shard);
  v->got = malloc((size_t)shard);
  return v->src && v->want && v->got ? 0 : -ENOMEM;
}

/* The directory holds exactly rank0..rank{N-1}, and shard-info.json one
 * params entry per tensor. */
static int check_layout(const struct verify *v, uint32_t world,
                        struct tpl__error *err) {
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
                   const struct tpl__verify_grid *want,
                   const struct tpl__http_opts *http, struct tpl__error *err) {
  struct tpl__grid grid = {0};
  uint32_t world;
  int family = TPL_BIASF_MLC;
  int rc = read_shard_info(v, want, &grid, &family, err);
  world = grid.world;
  if (rc == 0) rc = tpl__model_open_with(model, http, 0, &v->model, err);
  if (rc == 0) rc = tpl__mlc_cut_model(v->model, plan, err);
  if (rc == 0 && want->skip_mtp) rc = tpl__plan_skip_mtp(v->model, err);
  if (rc == 0)
    rc = tpl__job_plan(plan, v->model, model, &grid, family, &v->plan, &v->job,
                       err);
  if (rc == 0) rc = check_layout(v, world, err);
  if (rc != 0) return rc;
  v->outs = calloc(world, sizeof(*v->outs));
  v->pos = calloc(world, sizeof(*v->pos));
  v->found = calloc(world, sizeof(*v->found));
  if (v->outs == NULL || v->pos == NULL || v->found == NULL ||
      alloc_buffers(v) != 0)
    return tpl__oom(err);
  for (uint32_t r = 0; rc == 0 && r < world; r++)
    rc = open_rank_file(v, r, err);
  return rc;
}

static void verify_free(struct verify *v) {
  for (uint32_t r = 0; v->job && v->outs && r < v->job->grid.world; r++)
    tpl__model_free(v->outs[r]);
  free(v->outs);
  free(v->pos);
  free(v->found);
  free(v->src);
  free(v->want);
  free(v->got);
  json_decref(v->info);
  tpl__job_free(v->job);
  tpl__plan_free(v->plan);
  tpl__model_free(v->model);
}

int tpl__verify(const char *model, const char *dir, const char *plan,
                const struct tpl__verify_grid *want,
                const struct tpl__http_opts *http,
                struct tpl__verify_result *out, struct tpl__error *err) {
  struct verify v = {0};
  int rc;
  v.dir = dir;
  rc = prepare(&v, model, plan, want, http, err);
  for (size_t i = 0; rc == 0 && i < v.job->ntensors; i++)
    rc = compare_tensor(&v, i, err);
  if (rc == 0) {
    v.res.grid = v.job->grid;
    *out = v.res;
  }
  verify_free(&v);
  return rc;
}
