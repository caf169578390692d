/* interleaved.h - the fused tensors architectures store interleaved
 * (rows alternating between the fused parts), which segs would cut
 * wrong; checked for every plan, plan files included (DESIGN.md
 * section 3). */
#ifndef TPL_INTERLEAVED_H
#define TPL_INTERLEAVED_H

#include <jansson.h>

#include "common.h"
#include "model.h"
#include "plan.h"

/* Checks the strategies `s` that plan `p` gave model `m` (one per
 * tensor) against the interleaved tensors of the architecture an HF
 * `config` names (config.json's model_type; NULL: none known).  `mlc`
 * says `config` is an MLC weight directory's mlc-chat-config.json: MLC's
 * converters store fused parts consecutively, so nothing is checked.  Refuses a
 * tensor cut with segs (they assume consecutive parts), and a cut whose slice
 * per rank is not whole groups of the alternating rows, naming the tensor, the
 * architecture and what to write instead.  Returns 0, TPL_EPLAN or
 * TPL_EINDIVISIBLE. */
int tpl__interleaved_check(const struct tpl__plan *p,
                           const struct tpl__model *m,
                           const struct tpl__strategy *s, uint32_t nshards,
                           const json_t *config, int mlc,
                           struct tpl__error *err);

#endif
