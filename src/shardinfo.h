/* shardinfo.h - the shard-info JSON (DESIGN.md section 2): MLC's `params`
 * list (name, per-rank shape, dtype, preprocs) plus dim, per-shard segs,
 * the applied bias scale and, when known, each rank's byte count and XXH3.
 * Rendered from the job table alone: `tpload plan` prints it without
 * ranks, `inspect --shards` and `verify` read it, `preshard` writes it
 * with them. */
#ifndef TPL_SHARDINFO_H
#define TPL_SHARDINFO_H

#include <jansson.h>
#include <stdint.h>

#include "job.h"

/* What one rank received of one tensor. */
struct tpl__rank_info {
  uint64_t nbytes;
  uint64_t xxh3; /* XXH3-64 of the delivered bytes (after bias scaling) */
};

/* {"size", "experts", "ranks": [{"rank", "shard", "experts": [start,
 * count]}]}: an --ep job's group on grid `g` (g->ep > 0) and the map an
 * engine builds its expert_map from (tpl__ep_range), as shard-info.json,
 * the load report and `status` show it.  Returns a new reference, or NULL
 * on ENOMEM. */
json_t *tpl__shardinfo_ep(const struct tpl__grid *g, uint32_t experts);

/* Builds one `params` entry for job tensor `i`, with MLC's
 * "pipeline_stages" (the stages that hold it), "bias_scale" (the factor
 * shard 0's copy carries: 1/N for a scaled bias, else 1.0) and for a
 * row-parallel bias "bias" (its policy: scale, rank0 -- the other shards
 * hold zeros -- or whole).  `ranks` is NULL (no
 * "ranks" key) or job->grid.world entries, rank order, of which those of
 * the ranks holding the tensor are listed, each with its rank, replica,
 * stage and shard.  Returns a new reference, or NULL on ENOMEM. */
json_t *tpl__shardinfo_param(const struct tpl__job *job, size_t i,
                             const struct tpl__rank_info *ranks);

/* The fingerprint's length in hex digits (its buffer holds one more). */
#define TPL_FINGERPRINT_LEN 16

/* The output's fingerprint, which every rank file's `__metadata__` and
 * shard-info.json record (key "fingerprint") so a reader refuses rank
 * files of two jobs before reading a byte: XXH3-64 of the grid and every
 * holder's (tensor name, rank, bytes, XXH3) in checkpoint and rank order,
 * as TPL_FINGERPRINT_LEN lowercase hex digits and a NUL in `out`.  Equal
 * for two outputs that hold the same bytes at the same places (a
 * re-shard equal to preshard of the original has the original's), so
 * the files stay byte-identical across runs.  `ranks` as for
 * tpl__shardinfo_build, not NULL. */
void tpl__shardinfo_fingerprint(const struct tpl__job *job,
                                const struct tpl__rank_info *ranks, char *out);

/* Builds the whole shard-info object of `job`:
 * {"tensor_parallel_shards", "pipeline_parallel_stages",
 * "data_parallel_replicas", "bias_scaling" (the family is mlc),
 * "bias_policy" (the family's name), "params": [...], and with `ranks`
 * "fingerprint" (tpl__shardinfo_fingerprint)} with params
 * in checkpoint order.  `ranks` is NULL or job->ntensors *
 * job->grid.world entries, ranks[i * world + r] for tensor i and rank r
 * (entries of ranks that do not hold tensor i are not read).  On success *out
 * is a new reference the caller json_decref's.  Returns 0 or -ENOMEM. */
int tpl__shardinfo_build(const struct tpl__job *job,
                         const struct tpl__rank_info *ranks, json_t **out);

/* Every rank of job->grid and what it holds, for `plan` and `inspect`:
 * [{"rank", "replica", "stage", "shard", "bytes", "tensors": [names of
 * the tensors its stage holds, checkpoint order]}] in rank order.  Returns
 * a new reference, or NULL on ENOMEM. */
json_t *tpl__shardinfo_ranks(const struct tpl__job *job);

#endif
