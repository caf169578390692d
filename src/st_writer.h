/* st_writer.h - builds safetensors headers for tensors laid out back to
 * back in a given order (synth, preshard and dump all write through it). */
#ifndef TPL_ST_WRITER_H
#define TPL_ST_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct tpl__st_out {
  const char *name;
  int dtype; /* enum tpl_dtype */
  int ndim;
  const uint64_t *shape;
  uint64_t nbytes; /* must equal numel x itemsize */
};

/* Builds the 8-byte little-endian length plus the JSON header for
 * `n` tensors whose data follow in exactly this order (data_offsets are
 * assigned back to back), with `__metadata__` from `nmeta` key/value
 * string pairs (meta[2*i], meta[2*i+1]; may be NULL when nmeta is 0).
 * The JSON is padded with spaces so the data starts 8-byte aligned.
 * *out is malloc'd (caller frees), *out_len its length.  Returns 0,
 * -ENOMEM or TPL_EOVERFLOW. */
int tpl__st_build_header(const struct tpl__st_out *t, size_t n,
                         const char *const *meta, size_t nmeta, uint8_t **out,
                         size_t *out_len);

#endif
