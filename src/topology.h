/* topology.h - the TP x PP x DP grid of an MPI world and MLC LLM's
 * pipeline-stage assignment; pure arithmetic, no I/O, no MPI. */
#ifndef TPL_TOPOLOGY_H
#define TPL_TOPOLOGY_H

#include <stdint.h>

#include "common.h"

/* A world of `world` ranks seen as `dp` replicas of a `tp` x `pp` grid:
 * world == tp * pp * dp, every field >= 1.  `ep` is the size of the
 * expert-parallel group (--ep: tp, the tensor-parallel group; --ep-size
 * tp * dp: the TP groups of every replica at one stage; 0 without
 * expert parallelism); tpl__grid_make leaves it 0. */
struct tpl__grid {
  uint32_t world, tp, pp, dp;
  uint32_t ep;
};

/* Where one rank sits: replica d, pipeline stage p, tensor shard t. */
struct tpl__pos {
  uint32_t d, p, t;
};

/* A contiguous run of pipeline stages [first, first + count): every list
 * MLC writes as a param's "pipeline_stages" is one ([s], [P-1] or
 * range(P)). */
struct tpl__stages {
  uint32_t first, count;
};

/* --tp when only --pp (or neither) is given: the stages share the world,
 * T = world / pp; 1 when pp does not divide world, so that
 * tpl__grid_make's refusal names the numbers given. */
uint32_t tpl__grid_default_tp(uint32_t world, uint32_t pp);

/* Validates a world of `world` ranks against --tp `tp` and --pp `pp` and
 * fills *out with dp = world / (tp * pp).  Returns 0, or TPL_EUSAGE with a
 * message giving the numbers when tp or pp is 0 or tp * pp does not divide
 * world.  *out is written only on success. */
int tpl__grid_make(uint32_t world, uint32_t tp, uint32_t pp,
                   struct tpl__error *err, struct tpl__grid *out);

/* Where global rank `rank` (< g->world) sits: rank = (d * pp + p) * tp +
 * t.  This numbering is stable (rank files, sockets and reports depend on
 * it): shards of one stage are adjacent, then stages of one replica, then
 * replicas.  With pp == dp == 1 it is today's rank == shard. */
struct tpl__pos tpl__grid_coord(const struct tpl__grid *g, uint32_t rank);

/* Sets g->ep for --ep (`ep` nonzero) with --ep-size `size` (0: not
 * given, the TP group): vLLM's ep_size = tp_size x dp_size under
 * --enable-expert-parallel, so `size` must be g->tp (one replica's TP
 * group) or g->tp * g->dp (every replica's).  Returns 0, or TPL_EUSAGE
 * naming the allowed values; g->ep is written only on success. */
int tpl__grid_set_ep(struct tpl__grid *g, int ep, uint32_t size,
                     struct tpl__error *err);

/* The rank of global rank `rank` within its expert-parallel group (g->ep
 * > 0): vLLM's ep_rank = dp_rank x tp_size + tp_rank, so t when the
 * group is the TP group, d x tp + t when it spans the replicas; the
 * group is the ranks of one pipeline stage p. */
uint32_t tpl__grid_ep_rank(const struct tpl__grid *g, uint32_t rank);

/* What the expert-parallel group of g (g->ep > 0) is, for messages:
 * "the TP group" or "TP x DP" (every replica's TP group). */
const char *tpl__grid_ep_what(const struct tpl__grid *g);

/* Checks that `layers` decoder layers can be split over `pp` stages as MLC
 * LLM does: 1 <= pp <= layers (MLC's config check) and pp divides layers
 * (MLC's metadata and its compute graph disagree otherwise; see
 * topology.c).  Returns 0 or TPL_EUSAGE with the numbers. */
int tpl__stage_check(uint32_t layers, uint32_t pp, struct tpl__error *err);

/* MLC's "pipeline_stages" for the tensor `name` of a llama-family model of
 * `layers` layers over `pp` stages (tied != 0: the model ties lm_head to
 * the embedding), plus `mtp` multi-token-prediction layers numbered from
 * `layers` on (DeepSeek-V3's num_nextn_predict_layers; 0 for others).
 * With pp == 1 every tensor is [0].  Otherwise
 * model.layers.<i>.* -> [i / (layers / pp)], an MTP layer's tensors ->
 * [pp - 1] (the drafter runs on the last stage, after the final hidden
 * state), model.norm.weight -> [pp - 1],
 * model.embed_tokens.weight and (untied) lm_head.weight -> every stage.
 * Returns 0, or TPL_EPLAN naming the tensor when MLC assigns it no stage
 * (any other name, a layer index out of range, lm_head of a tied model).
 * Requires tpl__stage_check(layers, pp) == 0. */
int tpl__tensor_stages(const char *name, uint32_t layers, uint32_t mtp,
                       uint32_t pp, int tied, struct tpl__error *err,
                       struct tpl__stages *out);

/* Nonzero when stage p is in s. */
static inline int tpl__stages_has(struct tpl__stages s, uint32_t p) {
  return p >= s.first && p - s.first < s.count;
}

/* The order the chains of holders visit the ranks in (engine_core.c):
 * node by node, nodes in the order of their first rank (rank 0's node
 * first), the ranks of a node consecutive and in rank order, so that a
 * byte enters a node once and is forwarded inside it.  node[r] names rank
 * r's node by its first rank (node[r] <= r and node[node[r]] == node[r]).
 * The world is cut into `stride` groups, the ranks r with r mod stride ==
 * g (a cut tensor's shard g when stride is T; everyone when it is 1):
 * order[g * world / stride + j] is group g's j-th rank in node order and
 * place[r] is j for rank r.  Returns 0, or -EINVAL when stride does not
 * divide world or node[] does not name first ranks (order and place are
 * then undefined).  Both out arrays hold `world` entries; no memory is
 * allocated, and the work is world x stride steps (once per load). */
int tpl__node_order(const uint32_t *node, uint32_t world, uint32_t stride,
                    uint32_t *order, uint32_t *place);

#endif /* TPL_TOPOLOGY_H */
