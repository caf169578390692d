/* preshard.h - the rank layout: every rank's shard to
 * DIR/rank{R}.safetensors with no partial file ever visible (outdir.h),
 * shard-info.json last.  The sink runs the job-wide order itself (write,
 * agree, publish, shard-info.json) through coord.h. */
#ifndef TPL_PRESHARD_H
#define TPL_PRESHARD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"
#include "fileio.h" /* tpl__write_file_atomic, used with these */
#include "job.h"
#include "outdir.h"
#include "st_writer.h"
#include "store.h"

/* The safetensors header of global rank `rank`'s file on grid `g`: the
 * `n` tensors `t` back to back in that order, `__metadata__` {"tp_rank":
 * t, "tp_size": T}, and on a grid with P x D > 1 also "rank",
 * "world_size", "pp_rank": p, "pp_size": P, "dp_rank": d, "dp_size": D
 * (so one TP group's files are what they always were), and when
 * `fingerprint` is not NULL, "fingerprint": the job's
 * (tpl__shardinfo_fingerprint, also in shard-info.json).  The one
 * definition preshard and `tpload dump` share, so a dump is byte for byte
 * the rank file.  *hdr is malloc'd (caller frees).  Returns 0, -ENOMEM or
 * TPL_EOVERFLOW. */
int tpl__rank_file_header(const struct tpl__st_out *t, size_t n,
                          const struct tpl__grid *g, uint32_t rank,
                          const char *fingerprint, uint8_t **hdr, size_t *len);

/* The rank layout's sink (o->model unused): rank 0 prepares DIR (empty,
 * or with --force the old output removed, shard-info.json first), every
 * rank checks it (tpl__outdir_check), then after the load every
 * rank writes its file, they agree, publish, agree, and rank 0 writes
 * shard-info.json last; on any failure every rank removes what it
 * published, so DIR holds a complete output or none. */
struct tpl__sink tpl__preshard_sink(struct tpl__outdir_opts *o);

#endif
