/* shardinfo.h - the shard-info JSON (DESIGN.md section 2): MLC's `params`
 * list (name, per-rank shape, dtype, preprocs) plus dim, per-shard segs,
 * the applied bias scale and, when known, each rank's byte count and XXH3.
 * `tpload plan` prints it without ranks; `preshard` writes it with them. */
#ifndef TPL_SHARDINFO_H
#define TPL_SHARDINFO_H

#include <jansson.h>
#include <stdint.h>

#include "model.h"
#include "plan.h"

/* What one rank received of one tensor. */
struct tpl__rank_info {
  uint64_t nbytes;
  uint64_t xxh3; /* XXH3-64 of the delivered bytes (after bias scaling) */
};

/* The factor a rank applies to a tensor of rule kind `kind`: 1/N for a
 * scale_bias tensor when `bias_scaling` is on, else 1.0 (so always 1.0 for
 * N = 1).  The one definition: shard info and rank reports both use it. */
double tpl__bias_scale(int kind, uint32_t nshards, int bias_scaling);

/* Builds one `params` entry for tensor `t` under strategy `s`.  `ranks` is
 * NULL (no "ranks" key) or `nshards` entries, rank order.  Returns a new
 * reference, or NULL on ENOMEM. */
json_t *tpl__shardinfo_param(const struct tpl__tensor *t,
                             const struct tpl__strategy *s, uint32_t nshards,
                             const struct tpl__rank_info *ranks,
                             int bias_scaling);

/* Builds the whole shard-info object for model `m` and its strategies `st`
 * (one per tensor, as from tpl__plan_apply with the same nshards):
 * {"tensor_parallel_shards", "bias_scaling", "params": [...]} with params
 * in checkpoint order.  `ranks` is NULL or m->ntensors * nshards entries,
 * ranks[i * nshards + r] for tensor i and rank r.  On success *out is a
 * new reference the caller json_decref's.  Returns 0 or -ENOMEM. */
int tpl__shardinfo_build(const struct tpl_model *m,
                         const struct tpl__strategy *st, uint32_t nshards,
                         const struct tpl__rank_info *ranks, int bias_scaling,
                         json_t **out);

#endif
