/* fuzz_mlc_shards.c - libFuzzer target for the `_shard-<k>` record-name
 * parser and the grouping of an MLC presharded cache's records into
 * params (src/mlc_shards.c).  The input is records, one a line: a name,
 * then optionally a tab, a dtype digit and a shape ("2:4x8"); a name
 * given again is dropped, as the cache's parser refuses it before any
 * grouping (fmt_mlc_cache.c); every name
 * goes through tpl__mlc_shard_name (a name it takes must be rebuilt
 * from its base and k), the records through tpl__mlc_group, whose
 * groups must hold each record once, a cut group N records named
 * "<base>_shard-<k>" in k order with its shard 0's dtype and shape, a
 * plain one its own name.  No file is touched.  Any crash, leak, UB or
 * abort is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlc_shards.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 256

/* Digits at *p into *v (at most 1e9), *p past them; 0 when none. */
static int number(const char **p, const char *end, uint64_t *v) {
  const char *s = *p;
  *v = 0;
  while (*p < end && **p >= '0' && **p <= '9' && *v < 1000000000)
    *v = *v * 10 + (uint64_t)(*(*p)++ - '0');
  return *p > s;
}

/* "D:AxBxC" after the name's tab: dtype D (0..9), up to TPL_MAX_DIMS
 * dims. */
static void parse_type(const char *p, const char *end, struct tpl__tensor *t) {
  uint64_t v;
  if (!number(&p, end, &v)) return;
  t->dtype = (int)(v % 10);
  if (p >= end || *p++ != ':') return;
  while (t->ndim < TPL_MAX_DIMS && number(&p, end, &v)) {
    t->shape[t->ndim++] = v;
    if (p >= end || *p++ != 'x') break;
  }
}

/* The line [p, end) as record t; 0 or -1 (out of memory). */
static int parse_record(const char *p, const char *end, struct tpl__tensor *t) {
  const char *tab = memchr(p, '\t', (size_t)(end - p));
  const char *name_end = tab != NULL ? tab : end;
  t->name = malloc((size_t)(name_end - p) + 1);
  if (t->name == NULL) return -1;
  memcpy(t->name, p, (size_t)(name_end - p));
  t->name[name_end - p] = '\0'; /* an embedded NUL just ends it early */
  if (tab != NULL) parse_type(tab + 1, end, t);
  return 0;
}

/* A name the parser takes is "<base>_shard-<k>" exactly. */
static void check_name(const char *name) {
  size_t len = 0;
  uint32_t k = 0;
  char again[64];
  if (!tpl__mlc_shard_name(name, &len, &k)) return;
  if (len == 0 || len >= strlen(name)) abort();
  snprintf(again, sizeof(again), "_shard-%u", k);
  if (strcmp(name + len, again) != 0) abort();
}

/* Record i's name is an earlier record's. */
static int seen_before(const struct tpl__tensor *recs, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (strcmp(recs[j].name, recs[i].name) == 0) return 1;
  return 0;
}

static int same_type(const struct tpl__tensor *a, const struct tpl__tensor *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(uint64_t)) == 0;
}

/* One group against the grouping's promises; `seen` counts each
 * record's groups. */
static void check_group(const struct tpl__mlc_group *g,
                        const struct tpl__mlc_groups *all,
                        const struct tpl__tensor *recs, size_t n,
                        uint8_t *seen) {
  size_t base = strlen(g->name);
  for (uint32_t j = 0; j < g->nrecords; j++) {
    const struct tpl__tensor *r = &recs[g->records[j]];
    size_t len = 0;
    uint32_t k = 0;
    if (g->records[j] >= n || seen[g->records[j]]++) abort();
    if (!g->cut) {
      if (g->nrecords != 1 || strcmp(r->name, g->name) != 0) abort();
      continue;
    }
    if (g->nrecords != all->shards || !tpl__mlc_shard_name(r->name, &len, &k) ||
        k != j || len != base || strncmp(r->name, g->name, base) != 0 ||
        !same_type(r, &recs[g->records[0]]))
      abort();
  }
}

static void check_groups(const struct tpl__mlc_groups *g,
                         const struct tpl__tensor *recs, size_t n) {
  uint8_t seen[MAX_RECORDS] = {0};
  for (size_t i = 0; i < g->ngroups; i++)
    check_group(&g->groups[i], g, recs, n, seen);
  for (size_t i = 0; i < n; i++)
    if (seen[i] != 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__tensor recs[MAX_RECORDS];
  struct tpl__mlc_groups g = {0};
  struct tpl__error err;
  const char *p = (const char *)data, *end = p + size;
  size_t n = 0;
  while (p < end && n < MAX_RECORDS) {
    memset(&recs[n], 0, sizeof(recs[n]));
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = nl != NULL ? nl : end;
    if (parse_record(p, line_end, &recs[n]) != 0) break;
    check_name(recs[n].name);
    if (seen_before(recs, n))
      free(recs[n].name);
    else
      n++;
    p = nl != NULL ? nl + 1 : end;
  }
  if (tpl__mlc_group(recs, n, "fuzz/tensor-cache.json", &g, &err) == 0)
    check_groups(&g, recs, n);
  tpl__mlc_groups_free(&g);
  for (size_t i = 0; i < n; i++)
    free(recs[i].name);
  return 0;
}
