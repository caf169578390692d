/* verify.h - `tpload verify`'s core: recomputes every rank's shard of every
 * tensor from the model and compares it with a preshard output directory
 * (shapes, sizes, bytes, and the checksums shard-info.json records). */
#ifndef TPL_VERIFY_H
#define TPL_VERIFY_H

#include <stdint.h>

#include "common.h"

struct tpl__verify_result {
  uint32_t ranks;
  uint64_t tensors; /* tensor shards compared */
  uint64_t bytes;   /* bytes compared */
};

/* Checks DIR (rank{R}.safetensors + shard-info.json) against MODEL under
 * `plan` ("auto", a preset or a file).  N and bias scaling come from
 * shard-info.json.  Returns 0, TPL_EMISMATCH naming the first mismatch
 * (rank, tensor, what differs), or the code of what could not be read. */
int tpl__verify(const char *model, const char *dir, const char *plan,
                struct tpl__verify_result *out, struct tpl_error *err);

#endif
