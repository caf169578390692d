/* plan_for.h - the plan and strategies the program gets for a --plan
 * argument on N shards without pipeline stages, for the C unit tests of
 * plans, presets and quantized params.  Header-only (static inline). */
#ifndef TPL_TEST_PLAN_FOR_H
#define TPL_TEST_PLAN_FOR_H

#include <stdlib.h>

#include "planner.h"

/* tpl__plan_for_grid on a grid of `n` shards and one stage; on success *p
 * (tpl__plan_free) and *st (free()) are the caller's. */
static inline int plan_for(const char *arg, const struct tpl__model *m,
                           uint32_t n, struct tpl__plan **p,
                           struct tpl__strategy **st, struct tpl__error *err) {
  struct tpl__grid grid = {n, n, 1, 1, 0};
  struct tpl__stages *stages = NULL;
  int rc = tpl__plan_for_grid(arg, m, &grid, p, st, &stages, err);
  free(stages);
  return rc;
}

#endif
