/* mlc_cut.h - how an MLC presharded cache's params were cut, which the
 * cache does not record: MLC's converter cuts each param with a shard
 * strategy along its dim, the full shape being the shard's with that dim
 * times N (mlc-ai/mlc-llm python/mlc_llm/support/preshard.py,
 * _create_shard_func), and the strategies are the model's, which the
 * preset mirrors.  So the preset, run as the cache's writer ran it, gives
 * each param its full shape and its cut: the shard-info a re-shard reads
 * (fmt_shardinfo.h, reshard.h). */
#ifndef TPL_MLC_CUT_H
#define TPL_MLC_CUT_H

#include "common.h"
#include "fmt_shardinfo.h"
#include "mlc_shards.h"
#include "model.h"
#include "plan.h"

/* The shard-info of cache `m` (its records as tensors, grouped into `g`,
 * N = g->shards >= 1) under plan `p`: per group its full tensor (the
 * group's name and dtype, the record's shape with the cut dim times N)
 * and, for a cut one, the plan's spec for it (tpl__plan_apply on the
 * full tensors: divisibility checked); holders k = 0 .. N-1 of a cut
 * param (rank and shard k, the record's bytes, no XXH3), holder 0 of a
 * whole one.  `what` names the cache.  Refused (TPL_EFORMAT naming the
 * record): a param cut in the cache that the plan holds whole, one held
 * whole that it cuts.  On success *out is the caller's (tpl__si_free).
 * Returns 0, TPL_EFORMAT, the plan's codes (TPL_EINDIVISIBLE, ...) or
 * -ENOMEM. */
int tpl__mlc_cut(const struct tpl__plan *p, const struct tpl__model *m,
                 const struct tpl__mlc_groups *g, const char *what,
                 struct tpl__si **out, struct tpl__error *err);

/* Makes `m`, when its format is TPL_FMT_MLC_SHARDED (an MLC cache of
 * "X_shard-K" records, format.c), the checkpoint of the full tensors its
 * records were cut from (reshard.h, tpl__reshard_adopt), the cut from
 * --plan `arg` (NULL: auto) at the cache's N; any other model is left
 * as it is.  An N other than mlc-chat-config.json's
 * tensor_parallel_shards (where it says one) is TPL_EFORMAT.  Returns 0,
 * tpl__mlc_group's, tpl__plan_resolve's, tpl__mlc_cut's or tpl__reshard_adopt's
 * codes. */
int tpl__mlc_cut_model(struct tpl__model *m, const char *arg,
                       struct tpl__error *err);

#endif
