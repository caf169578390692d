/* fmt_shardinfo.c - shard-info.json read back (fmt_shardinfo.h): the
 * grid keys, then each param in a few steps (name and dtype, shapes, the
 * cut, the bias, the holders), each checked where it is read and said
 * with the tensor's name.  The cut comes back in full units: MLC's segs
 * are per shard (segs[j] / N, or segs[j] / P for a replicated kv
 * segment), and which segments were replicated is not written, only the
 * largest replication (kv_replicas); vLLM replicates the kv segments,
 * the trailing ones (a fused qkv's k and v, a k_proj's one), so the
 * replicated set is the one suffix whose full lengths sum to in_shape's
 * (each longer suffix sums to strictly less: unique). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fmt_shardinfo.h"
#include "jsonu.h"
#include "scope.h"

struct parse {
  const char *what;
  struct tpl__si *si;
  struct tpl__error *err;
};

static int bad(struct parse *p, const char *tensor, const char *msg) {
  if (tensor != NULL)
    return tpl__fail(p->err, TPL_EFORMAT, "%s: tensor '%s': %s", p->what,
                     tensor, msg);
  return tpl__fail(p->err, TPL_EFORMAT, "%s: %s", p->what, msg);
}

/* Key `key` of o as an integer in [lo, hi] into *out. */
static int get_u32(struct parse *p, const json_t *o, const char *key,
                   uint32_t lo, uint32_t hi, const char *tensor,
                   uint32_t *out) {
  uint64_t v;
  char msg[160];
  if (tpl__json_u64(json_object_get(o, key), &v) == 0 && v >= lo && v <= hi) {
    *out = (uint32_t)v;
    return 0;
  }
  snprintf(msg, sizeof(msg), "expected \"%s\" an integer in %u..%u", key, lo,
           hi);
  return bad(p, tensor, msg);
}

/* A JSON array of at most `cap` non-negative integers into v. */
static int get_u64s(const json_t *a, size_t cap, uint64_t *v, size_t *n) {
  size_t i;
  json_t *x;
  if (!json_is_array(a) || json_array_size(a) > cap) return TPL_EFORMAT;
  json_array_foreach(a, i, x) {
    if (tpl__json_u64(x, &v[i]) != 0) return TPL_EFORMAT;
  }
  *n = json_array_size(a);
  return 0;
}

static int grid_keys(struct parse *p, const json_t *root) {
  struct tpl__si *si = p->si;
  int rc = get_u32(p, root, "tensor_parallel_shards", 1, TPL_SI_MAX_WORLD, NULL,
                   &si->tp);
  si->pp = si->dp = 1;
  if (rc == 0 && json_object_get(root, "pipeline_parallel_stages") != NULL)
    rc = get_u32(p, root, "pipeline_parallel_stages", 1, TPL_SI_MAX_WORLD, NULL,
                 &si->pp);
  if (rc == 0 && json_object_get(root, "data_parallel_replicas") != NULL)
    rc = get_u32(p, root, "data_parallel_replicas", 1, TPL_SI_MAX_WORLD, NULL,
                 &si->dp);
  if (rc == 0 && (uint64_t)si->tp * si->pp * si->dp > TPL_SI_MAX_WORLD)
    rc = bad(p, NULL, "expected a grid of at most 4096 ranks");
  si->world = si->tp * si->pp * si->dp;
  return rc;
}

static int name_dtype(struct parse *p, const json_t *o,
                      struct tpl__si_param *t) {
  const json_t *n = json_object_get(o, "name");
  const json_t *d = json_object_get(o, "dtype");
  size_t len = json_is_string(n) ? json_string_length(n) : 0;
  if (len == 0 || len > TPL_MAX_NAME || tpl__has_nul(json_string_value(n), len))
    return bad(p, NULL,
               "expected every param to have a \"name\" of 1 to "
               "1024 bytes without NUL");
  t->name = strdup(json_string_value(n));
  if (t->name == NULL) return tpl__oom(p->err);
  t->dtype = json_is_string(d) ? tpl__dtype_from_mlc(json_string_value(d)) : -1;
  if (t->dtype < 0) return bad(p, t->name, "expected a known \"dtype\"");
  return 0;
}

/* The shape a holder holds, and the full one: preprocs[0]'s in_shape
 * when the tensor was cut at tp > 1, else the same. */
static int shapes(struct parse *p, const json_t *o, struct tpl__si_param *t) {
  const json_t *pre = json_object_get(o, "preprocs");
  const json_t *in = json_object_get(json_array_get(pre, 0), "in_shape");
  size_t n, m;
  if (get_u64s(json_object_get(o, "shape"), TPL_MAX_DIMS, t->rank_shape, &n))
    return bad(p, t->name, "expected \"shape\" a list of at most 8 sizes");
  t->ndim = (int)n;
  memcpy(t->shape, t->rank_shape, sizeof(t->shape));
  if (pre != NULL && !json_is_array(pre))
    return bad(p, t->name, "expected \"preprocs\" a list");
  if (in == NULL) return 0;
  if (get_u64s(in, TPL_MAX_DIMS, t->shape, &m) != 0 || m != n)
    return bad(p, t->name,
               "expected \"in_shape\" a list of as many sizes "
               "as \"shape\"");
  return 0;
}

/* Per-shard segs s (n of them) back to full lengths: the suffix of
 * `reps` segments replicated kv_replicas times fewer.  Returns the
 * number replicated, or -1 when no suffix sums to `extent`. */
static int full_segs(const uint64_t *s, size_t n, uint32_t tp, uint32_t kv,
                     uint64_t extent, struct tpl__shard_spec *spec) {
  for (size_t reps = kv > 1 ? 1 : 0; reps <= (kv > 1 ? n : 0); reps++) {
    uint64_t sum = 0;
    for (size_t j = 0; j < n; j++) {
      uint32_t parts = j >= n - reps ? tp / kv : tp;
      if (__builtin_mul_overflow(s[j], parts, &spec->segs[j]) ||
          __builtin_add_overflow(sum, spec->segs[j], &sum))
        return -1;
      spec->parts[j] = j >= n - reps ? parts : 0;
    }
    if (sum == extent) return (int)reps;
  }
  return -1;
}

static int cut(struct parse *p, const json_t *o, struct tpl__si_param *t) {
  uint64_t s[TPL_MAX_SEGS], out[TPL_MAX_DIMS];
  uint32_t dim, kv = 1;
  size_t n;
  int rc = get_u32(p, o, "dim", 0, (uint32_t)(t->ndim ? t->ndim - 1 : 0),
                   t->name, &dim);
  if (rc == 0 && json_object_get(o, "kv_replicas") != NULL)
    rc = get_u32(p, o, "kv_replicas", 1, p->si->tp, t->name, &kv);
  if (rc != 0) return rc;
  if (t->ndim == 0 || p->si->tp % kv != 0)
    return bad(p, t->name,
               "expected a \"dim\" of its shape and "
               "\"kv_replicas\" dividing tensor_parallel_shards");
  if (get_u64s(json_object_get(o, "segs"), TPL_MAX_SEGS, s, &n) != 0 || n == 0)
    return bad(p, t->name, "expected \"segs\" a list of 1 to 64 lengths");
  t->kind = TPL_SI_CUT;
  t->spec = (struct tpl__shard_spec){.dim = (int)dim, .nsegs = n};
  if (full_segs(s, n, p->si->tp, kv, t->shape[dim], &t->spec) < 0 ||
      tpl__shard_check(t->shape, t->ndim, &t->spec, p->si->tp, NULL, NULL))
    return bad(p, t->name, "expected \"segs\" to make in_shape's cut dim");
  tpl__shard_shape(t->shape, t->ndim, &t->spec, p->si->tp, out);
  if (memcmp(out, t->rank_shape, (size_t)t->ndim * sizeof(*out)) != 0)
    return bad(p, t->name, "expected \"shape\" to be in_shape's cut");
  return 0;
}

/* A param without a cut: its shapes must agree; a "scale" bias at
 * tp > 1 is held divided. */
static int whole(struct parse *p, const json_t *o, struct tpl__si_param *t) {
  const json_t *b = json_object_get(o, "bias");
  if (memcmp(t->shape, t->rank_shape, sizeof(t->shape)) != 0)
    return bad(p, t->name, "expected \"in_shape\" only on a cut tensor");
  if (b != NULL &&
      (!json_is_string(b) || tpl__bias_parse(json_string_value(b)) < 0))
    return bad(p, t->name, "expected \"bias\" a bias policy");
  if (b != NULL && p->si->tp > 1 &&
      tpl__bias_parse(json_string_value(b)) == TPL_BIAS_SCALE)
    t->kind = TPL_SI_SCALED;
  return 0;
}

static int hex64(const json_t *v, uint64_t *out) {
  const char *s = json_string_value(v);
  char *end;
  if (s == NULL || strlen(s) != 16) return TPL_EFORMAT;
  *out = strtoull(s, &end, 16);
  return *end == '\0' && s[0] != '-' && s[0] != '+' ? 0 : TPL_EFORMAT;
}

/* The job's "fingerprint", when recorded (absent: an older output). */
static int fingerprint(struct parse *p, const json_t *root) {
  const json_t *v = json_object_get(root, "fingerprint");
  uint64_t h;
  if (v == NULL) return 0;
  if (hex64(v, &h) != 0)
    return bad(p, NULL, "expected \"fingerprint\" as 16 hex digits");
  memcpy(p->si->fingerprint, json_string_value(v), 17);
  return 0;
}

/* One "ranks" entry: its place must be its rank's on the grid. */
static int holder(struct parse *p, const json_t *o, struct tpl__si_param *t,
                  uint64_t nbytes, struct tpl__si_holder *h) {
  const struct tpl__si *si = p->si;
  int rc = get_u32(p, o, "rank", 0, si->world - 1, t->name, &h->rank);
  h->replica = h->stage = h->shard = 0;
  if (rc == 0 && json_object_get(o, "replica") != NULL)
    rc = get_u32(p, o, "replica", 0, si->dp - 1, t->name, &h->replica);
  if (rc == 0 && json_object_get(o, "stage") != NULL)
    rc = get_u32(p, o, "stage", 0, si->pp - 1, t->name, &h->stage);
  if (rc == 0 && json_object_get(o, "shard") != NULL)
    rc = get_u32(p, o, "shard", 0, si->tp - 1, t->name, &h->shard);
  else if (rc == 0)
    h->shard = h->rank; /* a plain TP directory */
  if (rc != 0) return rc;
  if ((h->replica * si->pp + h->stage) * si->tp + h->shard != h->rank)
    return bad(p, t->name,
               "expected each holder's rank to be its "
               "(replica, stage, shard) on the grid");
  if (tpl__json_u64(json_object_get(o, "nbytes"), &h->nbytes) != 0 ||
      h->nbytes != nbytes)
    return bad(p, t->name,
               "expected each holder's \"nbytes\" to be its "
               "shape's bytes");
  if (hex64(json_object_get(o, "xxh3"), &h->xxh3) != 0)
    return bad(p, t->name, "expected each holder's \"xxh3\" as 16 hex digits");
  return 0;
}

/* Holders of the same bytes must say so: the same shard always, and
 * every holder of a tensor held whole that is not a bias (a bias under
 * rank0 is zeros off shard 0). */
static int replicas_agree(struct parse *p, const json_t *o,
                          struct tpl__si_param *t) {
  int all = t->kind == TPL_SI_WHOLE && json_object_get(o, "bias") == NULL;
  for (uint32_t s = 0; s < p->si->tp; s++) {
    const struct tpl__si_holder *first =
        all ? &t->holders[0] : tpl__si_holder_of(t, s);
    if (first == NULL && (t->kind == TPL_SI_CUT || s == 0))
      return bad(p, t->name,
                 "expected a holder of every shard it was cut "
                 "into (of shard 0 for a bias)");
    if (first == NULL) continue;
    for (size_t k = 0; k < t->nholders; k++) {
      const struct tpl__si_holder *h = &t->holders[k];
      if ((h->shard == s || all) && h->xxh3 != first->xxh3)
        return tpl__fail(p->err, TPL_EFORMAT,
                         "%s: tensor '%s': replicas disagree: rank %u's "
                         "xxh3 %016llx, rank %u's %016llx",
                         p->what, t->name, first->rank,
                         (unsigned long long)first->xxh3, h->rank,
                         (unsigned long long)h->xxh3);
    }
  }
  return 0;
}

/* The bytes of a tensor of `shape`, into *out; nonzero on overflow. */
static int shape_bytes(const struct tpl__si_param *t, const uint64_t *shape,
                       uint64_t *out) {
  uint64_t numel = 1;
  for (int d = 0; d < t->ndim; d++)
    if (__builtin_mul_overflow(numel, shape[d], &numel)) return 1;
  return __builtin_mul_overflow(numel, tpl__dtype_size(t->dtype), out);
}

static int holders(struct parse *p, const json_t *o, struct tpl__si_param *t) {
  const json_t *a = json_object_get(o, "ranks");
  uint64_t nbytes, full;
  size_t i;
  json_t *x;
  if (shape_bytes(t, t->rank_shape, &nbytes) || shape_bytes(t, t->shape, &full))
    return bad(p, t->name, "expected a shape of at most 2^64 bytes");
  if (!json_is_array(a) || json_array_size(a) == 0 ||
      json_array_size(a) > p->si->world)
    return bad(p, t->name, "expected \"ranks\", its holders");
  t->holders = calloc(json_array_size(a), sizeof(*t->holders));
  if (t->holders == NULL) return tpl__oom(p->err);
  json_array_foreach(a, i, x) {
    int rc = holder(p, x, t, nbytes, &t->holders[i]);
    if (rc == 0 && i > 0 && t->holders[i].rank <= t->holders[i - 1].rank)
      rc = bad(p, t->name, "expected \"ranks\" in rank order, once each");
    if (rc != 0) return rc;
    t->nholders = i + 1;
  }
  return replicas_agree(p, o, t);
}

static int param(struct parse *p, const json_t *o, struct tpl__si_param *t,
                 json_t *seen) {
  int rc = json_is_object(o) ? name_dtype(p, o, t)
                             : bad(p, NULL, "expected each param an object");
  if (rc == 0 && json_object_get(seen, t->name) != NULL)
    rc = bad(p, t->name, "expected each name once in \"params\"");
  if (rc == 0 && json_object_set_new(seen, t->name, json_true()) != 0)
    rc = tpl__oom(p->err);
  if (rc == 0) rc = shapes(p, o, t);
  if (rc == 0)
    rc = json_object_get(o, "dim") != NULL ? cut(p, o, t) : whole(p, o, t);
  if (rc == 0) rc = holders(p, o, t);
  return rc;
}

static int params(struct parse *p, const json_t *root) {
  const json_t *a = json_object_get(root, "params");
  json_t *seen, *x;
  size_t i;
  int rc = 0;
  if (!json_is_array(a) || json_array_size(a) == 0 ||
      json_array_size(a) > TPL_MAX_TENSORS)
    return bad(p, NULL, "expected \"params\" a list of 1 to 2^20 tensors");
  p->si->params = calloc(json_array_size(a), sizeof(*p->si->params));
  seen = json_object();
  if (p->si->params == NULL || seen == NULL) rc = tpl__oom(p->err);
  json_array_foreach(a, i, x) {
    if (rc != 0) break;
    p->si->nparams = i + 1;
    rc = param(p, x, &p->si->params[i], seen);
  }
  json_decref(seen);
  return rc;
}

int tpl__si_parse(const char *buf, size_t len, const char *what,
                  struct tpl__si **out, struct tpl__error *err) {
  struct parse p = {.what = what, .err = err};
  json_t *root = NULL;
  int rc = tpl__json_parse_object(buf, len, what, &root, err);
  if (rc != 0) return rc;
  p.si = calloc(1, sizeof(*p.si));
  rc = p.si != NULL ? grid_keys(&p, root) : tpl__oom(err);
  if (rc == 0) rc = fingerprint(&p, root);
  if (rc == 0) rc = params(&p, root);
  json_decref(root);
  if (rc == 0)
    *out = p.si;
  else
    tpl__si_free(p.si);
  return rc;
}

const struct tpl__si_holder *tpl__si_holder_of(const struct tpl__si_param *p,
                                               uint32_t shard) {
  for (size_t k = 0; k < p->nholders; k++)
    if (p->holders[k].shard == shard) return &p->holders[k];
  return NULL;
}

void tpl__si_free(struct tpl__si *si) {
  if (si == NULL) return;
  for (size_t i = 0; i < si->nparams; i++) {
    free(si->params[i].name);
    free(si->params[i].holders);
  }
  free(si->params);
  free(si);
}
