/* verify_mlc.c - checks a presharded MLC tensor cache against its source:
 * recomputes every record from the source directory (the shard k of a cut
 * tensor as MLC's shard functions give it, every other tensor whole and
 * unscaled: MLC's graph scales row-parallel biases itself) and compares
 * it with the record the runtime would load, after the file's md5 sum.
 * One tensor at a time: memory is a few times the largest tensor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dtype.h"
#include "fileio.h"
#include "job.h"
#include "jsonu.h"
#include "md5sum.h"
#include "mlc_cut.h"
#include "planner.h"
#include "verify_mlc.h"

struct check {
  const char *dir;
  struct tpl__model *src, *out;
  struct tpl__plan *plan;
  struct tpl__job *job;
  json_t *cache;  /* DIR's cache JSON, for the md5 sums */
  json_t *index;  /* record name -> its index in out->tensors */
  int32_t *owner; /* per file of out: -2 none yet, -1 whole, k */
  uint8_t *seen;  /* per record of out */
  uint8_t *buf;   /* a source tensor as stored in MODEL */
  uint8_t *rec;   /* a record as stored in DIR */
  uint8_t *want, *got;
  struct tpl__verify_result res;
};

/* A count of mlc-chat-config.json: 1..65536, `dflt` when absent. */
static int config_count(const json_t *cfg, const char *key, uint64_t dflt,
                        uint32_t *out) {
  const json_t *v = json_object_get(cfg, key);
  uint64_t n = dflt;
  if ((v != NULL && tpl__json_u64(v, &n) != 0) || n == 0 || n > 65536)
    return -1;
  *out = (uint32_t)n;
  return 0;
}

static int read_grid(const struct check *c, const struct tpl__verify_grid *want,
                     struct tpl__grid *g, struct tpl__error *err) {
  char *path = tpl__path_join(c->dir, "mlc-chat-config.json"), *buf = NULL;
  json_t *cfg = NULL;
  size_t len;
  uint32_t tp = 0, pp = 0;
  int rc =
      path ? tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err) : -ENOMEM;
  if (rc == 0) rc = tpl__json_parse_object(buf, len, path, &cfg, err);
  if (rc == 0 && (config_count(cfg, "tensor_parallel_shards", 0, &tp) != 0 ||
                  config_count(cfg, "pipeline_parallel_stages", 1, &pp) != 0 ||
                  (uint64_t)tp * pp > 65536))
    rc = tpl__fail(err, TPL_EFORMAT,
                   "%s: expected tensor_parallel_shards and optional "
                   "pipeline_parallel_stages of 1..65536, at most 65536 "
                   "workers in all",
                   path);
  if (rc == 0 && ((want->tp && want->tp != tp) || (want->pp && want->pp != pp)))
    rc = tpl__fail(err, TPL_EMISMATCH,
                   "%s: the output is tp %u x pp %u, --tp %u --pp %u was "
                   "asked for",
                   path, tp, pp, want->tp ? want->tp : tp,
                   want->pp ? want->pp : pp);
  if (rc == 0) rc = tpl__grid_make(tp * pp, tp, pp, err, g);
  json_decref(cfg);
  free(buf);
  free(path);
  return rc;
}

/* The output as a presharded MLC cache, and its JSON for the sums. */
static int open_output(struct check *c, struct tpl__error *err) {
  const char *name;
  char *path, *buf = NULL;
  size_t len;
  int rc = tpl__model_open_flags(c->dir, 1, &c->out, err);
  if (rc == 0 && c->out->format != TPL_FMT_MLC)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected an MLC tensor cache (tensor-cache.json), "
                     "found another format",
                     c->dir);
  if (rc != 0) return rc;
  path = tpl__path_join(c->dir, "tensor-cache.json");
  if (path != NULL && !tpl__exists(path)) {
    free(path);
    path = tpl__path_join(c->dir, "ndarray-cache.json");
  }
  rc =
      path ? tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err) : -ENOMEM;
  if (rc == 0) rc = tpl__json_parse_object(buf, len, path, &c->cache, err);
  free(buf);
  free(path);
  c->index = json_object();
  if (rc == 0 && c->index == NULL) rc = -ENOMEM;
  for (size_t i = 0; rc == 0 && i < c->out->ntensors; i++) {
    name = c->out->tensors[i].name;
    if (json_object_set_new(c->index, name, json_integer((json_int_t)i)))
      rc = tpl__oom(err);
  }
  return rc;
}

/* Every file's bytes against the md5sum its record gives. */
static int check_sums(struct check *c, struct tpl__error *err) {
  json_t *recs = json_object_get(c->cache, "records");
  int rc = 0;
  for (size_t f = 0; rc == 0 && f < c->out->nfiles; f++) {
    const struct tpl__file *fi = &c->out->files[f];
    const char *want =
        json_string_value(json_object_get(json_array_get(recs, f), "md5sum"));
    char got[TPL_MD5_HEX];
    int fd;
    rc = tpl__model_fd(c->out, (uint32_t)f, &fd, NULL);
    if (rc == 0) rc = tpl__md5_file(fd, fi->size, got);
    if (rc != 0)
      rc = tpl__fail(err, rc, "%s: %s", fi->path, tpl_strerror(rc));
    else
      rc = tpl__md5_check(fi->path, "the cache", want, got, TPL_EMISMATCH, err);
  }
  return rc;
}

/* Record `o` sits in a file of worker `who` (-1: replicated params). */
static int check_owner(struct check *c, const struct tpl__tensor *o,
                       int32_t who, struct tpl__error *err) {
  int32_t *f = &c->owner[o->file];
  if (*f == -2) *f = who;
  if (*f == who) return 0;
  return tpl__fail(err, TPL_EMISMATCH,
                   "%s: record '%s': expected each file to hold one "
                   "worker's shard records or replicated params only, found "
                   "%s%d's beside %s%d's",
                   c->out->files[o->file].path, o->name,
                   who < 0 ? "replicated (" : "worker ", (int)who,
                   *f < 0 ? "replicated (" : "worker ", (int)*f);
}

/* The record's bytes as TVM's loader gives them into c->got. */
static int read_record(struct check *c, const struct tpl__tensor *o,
                       struct tpl__error *err) {
  const struct tpl__file *f = &c->out->files[o->file];
  int rc = tpl__model_pread(c->out, o->file, c->rec, (size_t)o->stored_bytes,
                            o->offset);
  if (rc != 0)
    return tpl__fail(err, rc, "%s: '%s': %s", f->path, o->name,
                     tpl_strerror(rc));
  if (o->encoding != TPL_ENC_F32_TO_BF16) {
    memcpy(c->got, c->rec, (size_t)o->stored_bytes);
    return 0;
  }
  for (uint64_t e = 0; e < o->stored_bytes / 2; e++) {
    uint32_t v = (uint32_t)(c->rec[2 * e] | c->rec[2 * e + 1] << 8) << 16;
    memcpy(c->got + 4 * e, &v, 4);
  }
  return 0;
}

/* Record `name` holds c->want (tensor i's shard, or all of it). */
static int compare_record(struct check *c, size_t i, const char *name,
                          int32_t who, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &c->job->tensors[i];
  json_t *at = json_object_get(c->index, name);
  const struct tpl__tensor *o;
  char a[200], b[200];
  int rc;
  if (at == NULL)
    return tpl__fail(err, TPL_EMISMATCH,
                     "%s: expected a record '%s', found none", c->dir, name);
  o = &c->out->tensors[json_integer_value(at)];
  c->seen[json_integer_value(at)] = 1;
  if (o->dtype != t->dtype || o->ndim != t->ndim ||
      memcmp(o->shape, t->rank_shape, sizeof(uint64_t) * (size_t)t->ndim))
    return tpl__fail(
        err, TPL_EMISMATCH, "%s: record '%s': expected %s %s, found %s %s",
        c->out->files[o->file].path, name, tpl__dtype_mlc_name(t->dtype),
        tpl__shape_str(t->rank_shape, t->ndim, a, sizeof(a)),
        tpl__dtype_mlc_name(o->dtype),
        tpl__shape_str(o->shape, o->ndim, b, sizeof(b)));
  rc = check_owner(c, o, who, err);
  if (rc == 0) rc = read_record(c, o, err);
  if (rc == 0 && memcmp(c->want, c->got, (size_t)t->rank_bytes) != 0)
    rc = tpl__fail(err, TPL_EMISMATCH,
                   "%s: record '%s': bytes differ from the %s recomputed "
                   "from the source",
                   c->out->files[o->file].path, name,
                   who < 0 ? "tensor" : "shard");
  c->res.tensors++;
  c->res.bytes += t->rank_bytes;
  return rc;
}

static int expected(struct check *c, size_t i, uint32_t k,
                    struct tpl__error *err) {
  struct tpl__layout l;
  int rc = tpl__job_layout(c->job, i, k, &l);
  if (rc != 0)
    return tpl__fail(err, rc, "cannot lay out '%s'", c->src->tensors[i].name);
  tpl__layout_gather(&l, 0, c->src->tensors[i].stored_bytes, c->buf, c->want);
  return tpl__job_finish_bytes(c->job, i, k, c->want, err);
}

/* Tensor i: its tp shard records, or its one whole record. */
static int check_tensor(struct check *c, size_t i, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &c->job->tensors[i];
  const struct tpl__tensor *s = &c->src->tensors[i];
  int cut = t->kind == TPL_RULE_SHARD && c->job->grid.tp > 1;
  char name[TPL_MAX_NAME + 32];
  /* the source once (a URL's: one ranged GET), for every shard */
  int rc =
      tpl__model_read(c->src, s->file, c->buf, s->stored_bytes, s->offset, err);
  for (uint32_t k = 0; rc == 0 && k < (cut ? c->job->grid.tp : 1); k++) {
    rc = expected(c, i, k, err);
    if (cut)
      snprintf(name, sizeof(name), "%s_shard-%u", t->name, k);
    else
      snprintf(name, sizeof(name), "%s", t->name);
    if (rc == 0) rc = compare_record(c, i, name, cut ? (int32_t)k : -1, err);
  }
  return rc;
}

static int alloc_buffers(struct check *c, struct tpl__error *err) {
  uint64_t most = 1;
  for (size_t i = 0; i < c->src->ntensors; i++)
    if (c->src->tensors[i].nbytes > most) most = c->src->tensors[i].nbytes;
  for (size_t i = 0; i < c->out->ntensors; i++)
    if (c->out->tensors[i].nbytes > most) most = c->out->tensors[i].nbytes;
  c->buf = malloc((size_t)most);
  c->rec = malloc((size_t)most);
  c->want = malloc((size_t)most);
  c->got = malloc((size_t)most);
  c->owner = malloc((c->out->nfiles + 1) * sizeof(*c->owner));
  c->seen = calloc(c->out->ntensors + 1, 1);
  if (!c->buf || !c->rec || !c->want || !c->got || !c->owner || !c->seen)
    return tpl__oom(err);
  for (size_t f = 0; f < c->out->nfiles; f++)
    c->owner[f] = -2;
  return 0;
}

static int check_all_seen(const struct check *c, struct tpl__error *err) {
  for (size_t i = 0; i < c->out->ntensors; i++)
    if (!c->seen[i])
      return tpl__fail(err, TPL_EMISMATCH,
                       "%s: record '%s': expected only the source's tensors "
                       "and their shards, found another",
                       c->out->files[c->out->tensors[i].file].path,
                       c->out->tensors[i].name);
  return 0;
}

static void check_free(struct check *c) {
  free(c->buf);
  free(c->rec);
  free(c->want);
  free(c->got);
  free(c->owner);
  free(c->seen);
  json_decref(c->cache);
  json_decref(c->index);
  tpl__job_free(c->job);
  tpl__plan_free(c->plan);
  tpl__model_free(c->src);
  tpl__model_free(c->out);
}

int tpl__verify_mlc(const char *model, const char *dir, const char *plan,
                    const struct tpl__verify_grid *want,
                    const struct tpl__http_opts *http,
                    struct tpl__verify_result *out, struct tpl__error *err) {
  struct check c = {.dir = dir};
  struct tpl__grid grid = {0};
  int rc = read_grid(&c, want, &grid, err);
  if (rc == 0) rc = tpl__model_open_with(model, http, 0, &c.src, err);
  if (rc == 0) rc = tpl__mlc_cut_model(c.src, plan, err);
  if (rc == 0)
    rc = tpl__job_plan(plan, c.src, model, &grid, TPL_BIASF_WHOLE, &c.plan,
                       &c.job, err);
  if (rc == 0) rc = open_output(&c, err);
  if (rc == 0) rc = alloc_buffers(&c, err);
  if (rc == 0) rc = check_sums(&c, err);
  for (size_t i = 0; rc == 0 && i < c.job->ntensors; i++)
    rc = check_tensor(&c, i, err);
  if (rc == 0) rc = check_all_seen(&c, err);
  if (rc == 0) {
    c.res.grid = c.job->grid;
    *out = c.res;
  }
  check_free(&c);
  return rc;
}
