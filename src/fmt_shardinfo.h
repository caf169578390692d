/* fmt_shardinfo.h - the parser of a presharded directory's
 * shard-info.json (bytes in, records out, no I/O): the grid, and per
 * param the full tensor it was cut from (name, dtype, shape), how it was
 * cut (the shard spec in full units, its parts inferred from MLC's
 * per-shard segs and kv_replicas), its bias policy, and every holder
 * with what it received (bytes, XXH3).  The inverse of shardinfo.c's
 * writer, so a re-shard can rebuild the full tensors (reshard.h). */
#ifndef TPL_FMT_SHARDINFO_H
#define TPL_FMT_SHARDINFO_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "shard.h"

#define TPL_SI_MAX_WORLD 4096 /* ranks of a presharded directory */

/* How a param's holders' bytes make its full tensor. */
enum tpl__si_kind {
  TPL_SI_WHOLE = 0, /* every holder holds the whole tensor */
  TPL_SI_CUT,       /* shard t holds the spec's block t (shard.h) */
  TPL_SI_SCALED     /* a bias held as bias / tp: shard 0's copy x tp */
};

/* One holder of a param: its place in the grid and what it received. */
struct tpl__si_holder {
  uint32_t rank, replica, stage, shard;
  uint64_t nbytes;
  uint64_t xxh3;
};

struct tpl__si_param {
  char *name; /* owned */
  int dtype;  /* enum tpl_dtype */
  int ndim;
  uint64_t shape[TPL_MAX_DIMS];      /* the full tensor's */
  uint64_t rank_shape[TPL_MAX_DIMS]; /* what a holder holds */
  int kind;                          /* enum tpl__si_kind */
  struct tpl__shard_spec spec;       /* TPL_SI_CUT: full segment lengths */
  struct tpl__si_holder *holders;    /* owned, rank order */
  size_t nholders;
};

struct tpl__si {
  uint32_t tp, pp, dp, world;
  /* The job's "fingerprint" (16 hex digits, every rank file's
   * __metadata__ records it too); "" in an output older than it. */
  char fingerprint[17];
  struct tpl__si_param *params; /* owned, checkpoint order */
  size_t nparams;
};

/* Parses shard-info.json (`buf`, `len`; `what` names it in messages).
 * Refused (TPL_EFORMAT, naming the key and, for a param, the tensor): a
 * grid outside 1..TPL_SI_MAX_WORLD, a param without a name, a known
 * dtype or a shape, a name given twice, a cut whose dim, segs,
 * kv_replicas or in_shape do not make the shape it records, a holder
 * whose rank is not its place (replica, stage, shard) on the grid or
 * whose bytes are not its shape's, a shard no holder holds, and holders
 * of the same shard whose XXH3 differ, a "fingerprint" not of 16 hex
 * digits.  On success *out is the caller's
 * (tpl__si_free).  Returns 0, TPL_EFORMAT or -ENOMEM. */
int tpl__si_parse(const char *buf, size_t len, const char *what,
                  struct tpl__si **out, struct tpl__error *err);

/* The holder of shard `shard` of param p that a reader takes: the
 * first in rank order (replica 0's, the lowest stage holding it); NULL
 * when none holds it (the parser refuses such a param). */
const struct tpl__si_holder *tpl__si_holder_of(const struct tpl__si_param *p,
                                               uint32_t shard);

/* Frees a parsed shard-info; NULL is accepted. */
void tpl__si_free(struct tpl__si *si);

#endif
