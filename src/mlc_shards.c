/* mlc_shards.c - an MLC presharded cache's records grouped into params
 * (mlc_shards.h): each record's name parsed once, the records of one
 * param collected in the order the cache gives them, then each cut
 * param's records put in shard order and held to its `_shard-0`. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "mlc_shards.h"

static const char shard_tag[] = "_shard-";

int tpl__mlc_shard_name(const char *name, size_t *base_len, uint32_t *k) {
  size_t len = strlen(name), digits = 0, tag = sizeof(shard_tag) - 1;
  uint64_t v = 0;
  while (digits < len && name[len - 1 - digits] >= '0' &&
         name[len - 1 - digits] <= '9')
    digits++;
  if (digits == 0 || digits > 10 || len < digits + tag + 1) return 0;
  if (memcmp(name + len - digits - tag, shard_tag, tag) != 0) return 0;
  if (digits > 1 && name[len - digits] == '0') return 0;
  for (size_t i = len - digits; i < len; i++)
    v = v * 10 + (uint64_t)(name[i] - '0');
  if (v > INT32_MAX) return 0;
  *base_len = len - digits - tag;
  *k = (uint32_t)v;
  return 1;
}

void tpl__mlc_groups_free(struct tpl__mlc_groups *g) {
  for (size_t i = 0; g->groups != NULL && i < g->ngroups; i++) {
    free(g->groups[i].name);
    free(g->groups[i].records);
  }
  free(g->groups);
  memset(g, 0, sizeof(*g));
}

struct grouping {
  const struct tpl__tensor *recs;
  const char *what;
  struct tpl__mlc_groups *out;
  json_t *index; /* param name -> its group */
  size_t cap;
  struct tpl__error *err;
};

static int push(size_t **v, uint32_t n, size_t x) {
  size_t *p = realloc(*v, ((size_t)n + 1) * sizeof(**v));
  if (p == NULL) return -ENOMEM;
  p[n] = x;
  *v = p;
  return 0;
}

static int new_group(struct grouping *g, const char *name, size_t len, int cut,
                     struct tpl__mlc_group **out) {
  struct tpl__mlc_groups *o = g->out;
  struct tpl__mlc_group *grp;
  if (o->ngroups == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    void *p = realloc(o->groups, cap * sizeof(*o->groups));
    if (p == NULL) return tpl__oom(g->err);
    o->groups = p;
    g->cap = cap;
  }
  grp = &o->groups[o->ngroups];
  memset(grp, 0, sizeof(*grp));
  grp->cut = cut;
  grp->name = strndup(name, len);
  if (grp->name == NULL ||
      json_object_set_new_nocheck(g->index, grp->name,
                                  json_integer((json_int_t)o->ngroups)) != 0) {
    free(grp->name);
    return tpl__oom(g->err);
  }
  o->ngroups++;
  *out = grp;
  return 0;
}

/* Record i into its param's group (a new one at its first record). */
static int add_record(struct grouping *g, size_t i) {
  const char *name = g->recs[i].name;
  size_t len = strlen(name);
  uint32_t k = 0;
  int cut = tpl__mlc_shard_name(name, &len, &k);
  char base[TPL_MAX_NAME + 1];
  struct tpl__mlc_group *grp = NULL;
  const json_t *at;
  int rc;
  if (len > TPL_MAX_NAME) len = TPL_MAX_NAME;
  memcpy(base, name, len);
  base[len] = '\0';
  at = json_object_get(g->index, base);
  if (at == NULL) {
    rc = new_group(g, base, len, cut, &grp);
    if (rc != 0) return rc;
  } else {
    grp = &g->out->groups[json_integer_value(at)];
  }
  if (grp->cut != cut)
    return tpl__fail(g->err, TPL_EFORMAT,
                     "%s: tensor '%s': expected either one record '%s' or "
                     "its shards' '%s_shard-<k>', found both",
                     g->what, name, base, base);
  if (cut && k + 1 > g->out->shards) g->out->shards = k + 1;
  if (push(&grp->records, grp->nrecords, i) != 0) return tpl__oom(g->err);
  grp->nrecords++;
  return 0;
}

/* The record of shard k of a cut group's (unordered) records, or n. */
static size_t find_shard(const struct grouping *g,
                         const struct tpl__mlc_group *grp, uint32_t k) {
  for (uint32_t j = 0; j < grp->nrecords; j++) {
    size_t len;
    uint32_t got;
    if (tpl__mlc_shard_name(g->recs[grp->records[j]].name, &len, &got) &&
        got == k)
      return grp->records[j];
  }
  return SIZE_MAX;
}

static int same_shape(const struct tpl__tensor *a,
                      const struct tpl__tensor *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(uint64_t)) == 0;
}

/* Shard k of a cut group has no record. */
static int missing(struct grouping *g, const struct tpl__mlc_group *grp,
                   uint32_t k) {
  uint32_t n = g->out->shards;
  return tpl__fail(g->err, TPL_EFORMAT,
                   "%s: tensor '%s_shard-%u': missing: the cache has %u "
                   "shards ('_shard-%u' records), every param cut needs "
                   "one record per shard",
                   g->what, grp->name, k, n, n - 1);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* A cut group with fewer records than N lacks one: refused naming the
 * smallest k missing, found from its own records (N may be 2^31: no
 * N-sized table). */
static int too_few(struct grouping *g, const struct tpl__mlc_group *grp) {
  uint32_t *ks = calloc(grp->nrecords + 1, sizeof(*ks)), k = 0;
  size_t len;
  if (ks == NULL) return tpl__oom(g->err);
  for (uint32_t j = 0; j < grp->nrecords; j++)
    tpl__mlc_shard_name(g->recs[grp->records[j]].name, &len, &ks[j]);
  qsort(ks, grp->nrecords, sizeof(*ks), cmp_u32);
  for (uint32_t j = 0; j < grp->nrecords && ks[j] <= k; j++)
    if (ks[j] == k) k++;
  free(ks);
  return missing(g, grp, k);
}

/* The shard k record of a cut group is there and is as its shard 0. */
static int check_shard(struct grouping *g, const struct tpl__mlc_group *grp,
                       const size_t *sorted, uint32_t k) {
  if (sorted[k] == SIZE_MAX) return missing(g, grp, k);
  if (!same_shape(&g->recs[sorted[k]], &g->recs[sorted[0]]))
    return tpl__fail(g->err, TPL_EFORMAT,
                     "%s: tensor '%s': expected the dtype and shape of "
                     "'%s' (every shard of a param the same), found "
                     "another",
                     g->what, g->recs[sorted[k]].name, g->recs[sorted[0]].name);
  return 0;
}

/* A cut group's records in shard order 0 .. N-1, each as its shard 0. */
static int order_group(struct grouping *g, struct tpl__mlc_group *grp) {
  uint32_t n = g->out->shards;
  size_t *sorted;
  int rc;
  if (grp->nrecords < n) return too_few(g, grp);
  sorted = calloc(n, sizeof(*sorted));
  rc = sorted != NULL ? 0 : tpl__oom(g->err);
  for (uint32_t k = 0; rc == 0 && k < n; k++)
    sorted[k] = find_shard(g, grp, k);
  for (uint32_t k = 0; rc == 0 && k < n; k++)
    rc = check_shard(g, grp, sorted, k);
  if (rc != 0) {
    free(sorted);
    return rc;
  }
  free(grp->records);
  grp->records = sorted;
  grp->nrecords = n;
  return 0;
}

int tpl__mlc_group(const struct tpl__tensor *recs, size_t n, const char *what,
                   struct tpl__mlc_groups *out, struct tpl__error *err) {
  struct grouping g = {recs, what, out, json_object(), 0, err};
  int rc = g.index != NULL ? 0 : tpl__oom(err);
  memset(out, 0, sizeof(*out));
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = add_record(&g, i);
  for (size_t i = 0; rc == 0 && i < out->ngroups; i++)
    if (out->groups[i].cut) rc = order_group(&g, &out->groups[i]);
  json_decref(g.index);
  if (rc != 0) tpl__mlc_groups_free(out);
  return rc;
}
