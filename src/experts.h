/* experts.h - expert parallelism (`--ep`): vLLM's map of experts to the
 * ranks of an expert-parallel group, which tensors belong to one expert
 * or stack every expert, and the rewrite of a plan's strategies that
 * gives each rank its experts whole (docs/TOPOLOGY.md).  Pure: no I/O. */
#ifndef TPL_EXPERTS_H
#define TPL_EXPERTS_H

#include <jansson.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "plan.h"
#include "topology.h"

/* A contiguous run of global expert ids [start, start + count). */
struct tpl__ep_range {
  uint32_t start, count;
};

/* The experts rank `rank` (< size) of an expert-parallel group of `size`
 * ranks holds out of `experts`: vLLM's determine_expert_map, linear
 * placement: experts / size each, the remainder one more each to the
 * first ranks. */
struct tpl__ep_range tpl__ep_range(uint32_t experts, uint32_t size,
                                   uint32_t rank);

/* The group rank that holds expert `expert` (< experts) under
 * tpl__ep_range. */
uint32_t tpl__ep_owner(uint32_t experts, uint32_t size, uint32_t expert);

/* The expert a tensor's name gives (`...experts.3.w1.weight` is 3), or
 * -1 when it names none. */
long tpl__expert_of(const char *name);

/* 1 when tensor `name` is what tpl__ep_apply rewrites: one expert's
 * (quantized params included) or a stacked tensor of every expert. */
int tpl__ep_is_expert(const char *name);

/* Rewrites the strategies `s` (one per tensor of `m`, as plan `p` gave
 * them for grid->tp shards) for expert parallelism over the group of
 * grid->ep ranks (topology.h): a tensor of one expert (named
 * `.experts.<e>.`, quantized params included, or matched by a plan rule
 * with "expert": true, the id the digits its last '*' stands for)
 * becomes whole on its owner,
 * a group rank (TPL_EP_WHOLE, replicated kind,
 * unscaled), a stacked [E, ...] tensor of every expert a cut along dim 0
 * (TPL_EP_STACKED, or "expert": "stacked"); a rule's "expert" overrides
 * the names; everything else is left as it is.  E comes from
 * `config` (n_routed_experts, num_local_experts or num_experts, at its
 * top, under model_config or text_config; NULL: unknown).  Refuses (65,
 * before any byte moves) a model with no expert tensor, an unknown E,
 * fewer experts than ranks, an expert id of E or more, a one-expert
 * tensor that some expert of its layer lacks (`...experts.2.w1.weight`
 * missing where experts 0, 1 and 3 have it: the message names it), and a
 * stacked tensor whose dim 0 is not E or whose E does not divide by
 * the group's size, or that a group spanning the replicas would hold
 * (not built).
 * Also TPL_EPLAN naming the plan, rule and tensor when an "expert": true
 * rule's last '*' stands for no digits.
 * Returns 0 with *experts = E, TPL_EPLAN or TPL_EFORMAT. */
int tpl__ep_apply(const struct tpl__plan *p, const struct tpl__model *m,
                  const json_t *config, const struct tpl__grid *grid,
                  struct tpl__strategy *s, uint32_t *experts,
                  struct tpl__error *err);

#endif
