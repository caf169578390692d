/* mlc_shards.h - the records of an MLC presharded tensor cache grouped
 * into its params (bytes in, groups out, no I/O).  MLC's runtime
 * (LoadMultiGPUPresharded) has worker k of N read "<name>_shard-<k>" for
 * a param with a shard preproc and "<name>" for the others; tpload's
 * `--layout mlc` writes the same.  The cut itself is recorded nowhere in
 * the cache: the preset gives it; N is the number of `_shard-k` records
 * of each cut param. */
#ifndef TPL_MLC_SHARDS_H
#define TPL_MLC_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"

/* One param of the cache: a cut one's N records in shard order, or a
 * plain one's single record (indices into the records given). */
struct tpl__mlc_group {
  char *name;      /* owned: the param's name, without "_shard-<k>" */
  size_t *records; /* owned: `nrecords` record indices */
  uint32_t nrecords;
  int cut; /* 1: from "_shard-<k>" records */
};

struct tpl__mlc_groups {
  struct tpl__mlc_group *groups; /* owned, in the order of first records */
  size_t ngroups;
  uint32_t shards; /* N, 0 when no record is a shard's */
};

/* 1 when `name` is "<base>_shard-<k>": a non-empty base, k decimal
 * without a leading zero (but "0") and below 2^31; *base_len and *k are
 * then set.  0 otherwise. */
int tpl__mlc_shard_name(const char *name, size_t *base_len, uint32_t *k);

/* Groups `n` records (an MLC cache's tensors, `what` naming the cache in
 * messages).  Refused, TPL_EFORMAT naming the record: a param with
 * `_shard-k` records missing one of 0 .. N-1 (N the largest k + 1 of
 * the cache), a shard record of another dtype or shape than its
 * `_shard-0`, a record "<base>" beside "<base>_shard-<k>" records.  On
 * success *out is the caller's (tpl__mlc_groups_free).  Returns 0,
 * TPL_EFORMAT or -ENOMEM. */
int tpl__mlc_group(const struct tpl__tensor *recs, size_t n, const char *what,
                   struct tpl__mlc_groups *out, struct tpl__error *err);

/* Frees the groups' contents; a zeroed struct is accepted. */
void tpl__mlc_groups_free(struct tpl__mlc_groups *g);

#endif
