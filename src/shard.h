/* shard.h - the pure shard math (MLC LLM's ShardSingleDim): from a tensor's
 * full shape, element size, dim, full segment lengths, shard count N and
 * rank r, compute which source bytes rank r receives and the shard info.
 * No I/O, no MPI: everything that moves bytes executes a struct
 * tpl__layout, so there is one definition of "which bytes go where". */
#ifndef TPL_SHARD_H
#define TPL_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* One piece of a row: `length` bytes at `offset` from the row's start. */
struct tpl__piece {
  uint64_t offset;
  uint64_t length;
};

/* The bytes of one rank, as a source-order pattern: for each of `rows`
 * rows (row i starts at i * row_stride bytes from the tensor's start),
 * the pieces in order.  Pieces are sorted by offset, do not overlap and
 * adjacent ones are merged, so taking the source bytes in source order
 * gives the rank's output in order.  total = rows * sum(piece lengths). */
struct tpl__layout {
  uint64_t rows;
  uint64_t row_stride;
  size_t npieces;
  struct tpl__piece pieces[TPL_MAX_SEGS];
  uint64_t total;
};

/* What a shard rule asks for. nsegs == 0 means one segment [shape[dim]]. */
struct tpl__shard_spec {
  int dim;
  size_t nsegs;
  uint64_t segs[TPL_MAX_SEGS]; /* full (unsharded) segment lengths */
};

/* Checks `spec` against a tensor of `shape`/`ndim` for N shards: dim in
 * range, segs sum to shape[dim], every segment divisible by N.  `tname` is
 * the tensor's name for messages (which segment, its length, and N).
 * Returns 0, TPL_EPLAN or TPL_EINDIVISIBLE. */
int tpl__shard_check(const uint64_t *shape, int ndim,
                     const struct tpl__shard_spec *spec, uint32_t nshards,
                     const char *tname, struct tpl_error *err);

/* Computes rank `rank`'s layout of a checked spec over a tensor of element
 * size `itemsize`.  Returns 0 or TPL_EOVERFLOW. */
int tpl__shard_layout(const uint64_t *shape, int ndim, size_t itemsize,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint32_t rank, struct tpl__layout *out);

/* The layout of a whole (replicated) tensor of `nbytes`: one piece. */
void tpl__layout_whole(uint64_t nbytes, struct tpl__layout *out);

/* Rank's shard shape: shape with shape[dim] divided by N. */
void tpl__shard_shape(const uint64_t *shape, int ndim,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint64_t *out);

/* Copies into `dst` the part of layout `l` that falls inside the tensor
 * byte range [begin, end), given `src` = the tensor's bytes from `begin`
 * to `end`.  Bytes are written in source order; returns how many. */
uint64_t tpl__layout_gather(const struct tpl__layout *l, uint64_t begin,
                            uint64_t end, const uint8_t *src, uint8_t *dst);

/* Returns how many bytes of layout `l` fall inside [begin, end). */
uint64_t tpl__layout_count(const struct tpl__layout *l, uint64_t begin,
                           uint64_t end);

/* If the bytes of `l` within [begin, end) are one contiguous source range,
 * stores its start in *start and returns its length; else returns
 * UINT64_MAX.  Returns 0 (with *start = begin) when none fall inside. */
uint64_t tpl__layout_contiguous(const struct tpl__layout *l, uint64_t begin,
                                uint64_t end, uint64_t *start);

#endif
