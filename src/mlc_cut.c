/* mlc_cut.c - an MLC presharded cache's params back to their full
 * tensors and cuts (mlc_cut.h): the cut dim from the plan's rule for
 * the param (a quantized param's from its weight's, as MLC derives it),
 * the full shapes from it, then the plan applied to the full tensors for
 * the segments, and its verdicts held to the cache's records. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fileio.h"
#include "mlc_cut.h"
#include "planner.h"
#include "quant.h"
#include "reshard.h"

/* The dim the plan cuts `name` along (a quantized param: its weight's;
 * a 1-D activation scale: 0); -1 when no shard rule matches. */
static int rule_dim(const struct tpl__plan *p, const char *name, int ndim) {
  char base[TPL_MAX_NAME + 16];
  int qp = tpl__quant_param(name, base, sizeof(base));
  const char *key = qp != TPL_QP_NONE ? base : name;
  for (size_t i = 0; i < p->nrules; i++) {
    const struct tpl__rule *r = &p->rules[i];
    if (!tpl__glob_match(r->match, key)) continue;
    if (r->kind != TPL_RULE_SHARD) return -1;
    return ndim == 1 ? 0 : r->spec.dim;
  }
  return -1;
}

static const struct tpl__tensor *first_record(const struct tpl__model *m,
                                              const struct tpl__mlc_group *g) {
  return &m->tensors[g->records[0]];
}

/* grp's full tensor into *full (its name borrowed from grp). */
static int full_tensor(const struct tpl__plan *p, const struct tpl__model *m,
                       const struct tpl__mlc_group *grp, uint32_t n,
                       const char *what, struct tpl__tensor *full,
                       struct tpl__error *err) {
  const struct tpl__tensor *r = first_record(m, grp);
  int dim = grp->cut ? rule_dim(p, grp->name, r->ndim) : -1;
  memset(full, 0, sizeof(*full));
  full->name = grp->name;
  full->dtype = r->dtype;
  full->ndim = r->ndim;
  memcpy(full->shape, r->shape, sizeof(full->shape));
  if (!grp->cut) return 0;
  if (dim < 0 || dim >= r->ndim)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': the cache holds it cut in %u shards, "
                     "%s cuts it along no dim of its %d",
                     what, r->name, n, p->source, r->ndim);
  if (__builtin_mul_overflow(full->shape[dim], n, &full->shape[dim]))
    return tpl__fail(err, TPL_EFORMAT, "%s: tensor '%s': shape overflows", what,
                     r->name);
  full->nbytes = tpl__tensor_numel(full) * tpl__dtype_size(full->dtype);
  return 0;
}

/* 1 when the full shape is the record's with dim `dim` times n. */
static int cut_along(const struct tpl__tensor *full,
                     const struct tpl__tensor *r, int dim, uint32_t n) {
  for (int d = 0; d < r->ndim; d++)
    if (full->shape[d] != r->shape[d] * (d == dim ? n : 1)) return 0;
  return dim >= 0 && dim < r->ndim;
}

/* The plan's verdict on grp agrees with the cache's records: cut or not
 * as they are, and along the dim the full shape was made on. */
static int agrees(const struct tpl__plan *p, const struct tpl__model *m,
                  const struct tpl__mlc_group *grp, uint32_t n,
                  const struct tpl__tensor *full, const struct tpl__strategy *s,
                  const char *what, struct tpl__error *err) {
  int cut = s->kind == TPL_RULE_SHARD;
  if (cut && grp->cut && !cut_along(full, first_record(m, grp), s->spec.dim, n))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': %s cuts it along dim %d, which does "
                     "not make its records' shape",
                     what, first_record(m, grp)->name, p->source, s->spec.dim);
  if (cut == grp->cut) return 0;
  return tpl__fail(err, TPL_EFORMAT,
                   "%s: tensor '%s': the cache holds it %s, %s %s it at %u "
                   "shards",
                   what, first_record(m, grp)->name, grp->cut ? "cut" : "whole",
                   p->source, cut ? "cuts" : "does not cut", n);
}

static int fill_param(const struct tpl__model *m,
                      const struct tpl__mlc_group *grp,
                      const struct tpl__tensor *full,
                      const struct tpl__strategy *s, uint32_t n,
                      struct tpl__si_param *q) {
  const struct tpl__tensor *r = first_record(m, grp);
  uint32_t nh = grp->cut ? n : 1;
  q->name = strdup(grp->name);
  q->holders = calloc(nh, sizeof(*q->holders));
  if (q->name == NULL || q->holders == NULL) return -ENOMEM;
  q->dtype = full->dtype;
  q->ndim = full->ndim;
  memcpy(q->shape, full->shape, sizeof(q->shape));
  memcpy(q->rank_shape, r->shape, sizeof(q->rank_shape));
  q->kind = grp->cut ? TPL_SI_CUT : TPL_SI_WHOLE;
  if (grp->cut) q->spec = s->spec;
  q->nholders = nh;
  for (uint32_t k = 0; k < nh; k++) {
    q->holders[k].rank = k;
    q->holders[k].shard = k;
    q->holders[k].nbytes = m->tensors[grp->records[k]].nbytes;
  }
  return 0;
}

static int new_si(const struct tpl__mlc_groups *g, struct tpl__si **out,
                  struct tpl__error *err) {
  struct tpl__si *si = calloc(1, sizeof(*si));
  if (si != NULL)
    si->params = calloc(g->ngroups ? g->ngroups : 1, sizeof(*si->params));
  if (si == NULL || si->params == NULL) {
    free(si);
    return tpl__oom(err);
  }
  si->tp = si->world = g->shards;
  si->pp = si->dp = 1;
  si->nparams = g->ngroups;
  *out = si;
  return 0;
}

/* The full tensors in a model of their own, for the plan. */
static int full_model(const struct tpl__plan *p, const struct tpl__model *m,
                      const struct tpl__mlc_groups *g, const char *what,
                      struct tpl__model **out, struct tpl__error *err) {
  struct tpl__model *full = tpl__model_new(m->format, m->dir);
  int rc = full != NULL ? 0 : tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < g->ngroups; i++) {
    struct tpl__tensor t;
    rc = full_tensor(p, m, &g->groups[i], g->shards, what, &t, err);
    if (rc == 0 && (t.name = strdup(t.name)) == NULL) rc = tpl__oom(err);
    if (rc == 0) rc = tpl__model_take_tensor(full, &t, what, err);
  }
  if (rc != 0) {
    tpl__model_free(full);
    return rc;
  }
  *out = full;
  return 0;
}

/* N as the cache's mlc-chat-config.json says it (tpload's `--layout
 * mlc` and MLC's gen_config write tensor_parallel_shards), when it says
 * it: a cache missing every record of its last shard has one fewer. */
static int check_shards(const struct tpl__model *m,
                        const struct tpl__mlc_groups *g, const char *what,
                        struct tpl__error *err) {
  struct tpl__quant_info q;
  uint32_t want;
  int rc = tpl__plan_quant(m, &q, err);
  if (rc == -ENOENT) return 0; /* no config: the plan file's cut alone */
  if (rc != 0) return rc;
  want = q.config_shards;
  if (want == 0 || want == g->shards) return 0;
  return tpl__fail(err, TPL_EFORMAT,
                   "%s: expected '_shard-0' .. '_shard-%u' records, as "
                   "mlc-chat-config.json's tensor_parallel_shards %u says, "
                   "found '_shard-0' .. '_shard-%u'",
                   what, want - 1, want, g->shards - 1);
}

/* The groups' records in order: where si's holders lie. */
static size_t *holder_records(const struct tpl__mlc_groups *g) {
  size_t n = 0, *rec;
  for (size_t i = 0; i < g->ngroups; i++)
    n += g->groups[i].nrecords;
  rec = calloc(n + 1, sizeof(*rec));
  n = 0;
  for (size_t i = 0; rec != NULL && i < g->ngroups; i++)
    for (uint32_t k = 0; k < g->groups[i].nrecords; k++)
      rec[n++] = g->groups[i].records[k];
  return rec;
}

int tpl__mlc_cut_model(struct tpl__model *m, const char *arg,
                       struct tpl__error *err) {
  struct tpl__mlc_groups g = {0};
  struct tpl__plan *p = NULL;
  struct tpl__si *si = NULL;
  size_t *rec = NULL;
  char *what;
  int rc;
  if (m->format != TPL_FMT_MLC_SHARDED) return 0;
  what =
      tpl__path_join(m->shown != NULL ? m->shown : m->dir, "tensor-cache.json");
  rc = what != NULL ? 0 : tpl__oom(err);
  if (rc == 0) rc = tpl__mlc_group(m->tensors, m->ntensors, what, &g, err);
  if (rc == 0) rc = check_shards(m, &g, what, err);
  if (rc == 0) rc = tpl__plan_resolve(arg, m, g.shards, &p, err);
  if (rc == 0) rc = tpl__mlc_cut(p, m, &g, what, &si, err);
  if (rc == 0 && (rec = holder_records(&g)) == NULL) rc = tpl__oom(err);
  if (rc == 0) {
    rc = tpl__reshard_adopt(m, si, rec, "params_shard_*.bin", what, err);
    si = NULL;
  }
  tpl__si_free(si);
  free(rec);
  tpl__plan_free(p);
  tpl__mlc_groups_free(&g);
  free(what);
  return rc;
}

int tpl__mlc_cut(const struct tpl__plan *p, const struct tpl__model *m,
                 const struct tpl__mlc_groups *g, const char *what,
                 struct tpl__si **out, struct tpl__error *err) {
  struct tpl__model *full = NULL;
  struct tpl__strategy *s = NULL;
  struct tpl__si *si = NULL;
  int rc = g->shards > 0 ? 0
                         : tpl__fail(err, TPL_EFORMAT,
                                     "%s: no '_shard-<k>' record", what);
  if (rc == 0) rc = full_model(p, m, g, what, &full, err);
  if (rc == 0 && (s = calloc(g->ngroups + 1, sizeof(*s))) == NULL)
    rc = tpl__oom(err);
  if (rc == 0) rc = tpl__plan_apply(p, full, g->shards, s, err);
  if (rc == 0) rc = new_si(g, &si, err);
  for (size_t i = 0; rc == 0 && i < g->ngroups; i++) {
    rc = agrees(p, m, &g->groups[i], g->shards, &full->tensors[i], &s[i], what,
                err);
    if (rc == 0 && fill_param(m, &g->groups[i], &full->tensors[i], &s[i],
                              g->shards, &si->params[i]) != 0)
      rc = tpl__oom(err);
  }
  free(s);
  tpl__model_free(full);
  if (rc != 0) {
    tpl__si_free(si);
    return rc;
  }
  *out = si;
  return 0;
}
