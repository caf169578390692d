/* verify.h - `tpload verify`'s core: recomputes every rank's shard of every
 * tensor from the model and compares it with a preshard output directory
 * (shapes, sizes, bytes, and the checksums shard-info.json records). */
#ifndef TPL_VERIFY_H
#define TPL_VERIFY_H

#include <stdint.h>

#include "common.h"
#include "http.h"
#include "topology.h"

struct tpl__verify_result {
  struct tpl__grid grid; /* the grid of the output (grid.world ranks) */
  uint64_t tensors;      /* tensor shards compared */
  uint64_t bytes;        /* bytes compared */
};

/* The grid the caller expects (--tp, --pp); 0 where not given.  `ep`
 * nonzero (--ep): the output must be expert-parallel, over `ep_size`
 * ranks when that is nonzero (--ep-size). */
struct tpl__verify_grid {
  uint32_t tp, pp;
  int ep;
  uint32_t ep_size;
  int skip_mtp; /* --skip-mtp: DIR holds the main model only */
  /* --bias-policy: the enum tpl__bias_family DIR must have been written
   * with (--layout rank); -1 for any. */
  int bias_family;
};

/* Checks DIR (rank{R}.safetensors + shard-info.json) against MODEL under
 * `plan` ("auto", a preset or a file).  The grid (T, P, D, and expert
 * parallelism: "expert_parallel") and the bias policy come from
 * shard-info.json; `want`'s nonzero fields must match
 * it.  Every rank file must hold exactly the tensors of its stage, each
 * the shard t the model gives (so replicas d > 0 hold replica 0's bytes),
 * and shard-info.json must list each tensor's holders with their
 * checksums.  MODEL may be a URL, read with a client of options `http`
 * (NULL: the defaults).  Returns 0, TPL_EMISMATCH naming the first mismatch
 * (rank, tensor, what differs), or the code of what could not be read. */
int tpl__verify(const char *model, const char *dir, const char *plan,
                const struct tpl__verify_grid *want,
                const struct tpl__http_opts *http,
                struct tpl__verify_result *out, struct tpl__error *err);

#endif
