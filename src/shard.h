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

/* What a shard rule asks for. nsegs == 0 means one segment [shape[dim]].
 * parts[j] == 0 (the default) cuts segment j into N blocks, one a rank
 * (MLC's ShardSingleDim).  parts[j] = P, P dividing N, cuts it into P
 * blocks of segs[j] / P and gives rank r block floor(r * P / N): N / P
 * consecutive ranks hold the same block (vLLM's kv-head replication when
 * N exceeds the kv heads, DESIGN.md section 2).  For nsegs == 0, parts[0]
 * applies to the one segment. */
struct tpl__shard_spec {
  int dim;
  size_t nsegs;
  uint64_t segs[TPL_MAX_SEGS];  /* full (unsharded) segment lengths */
  uint32_t parts[TPL_MAX_SEGS]; /* 0: N parts; else P, dividing N */
};

/* Checks `spec` against a tensor of `shape`/`ndim` for N shards: dim in
 * range, segs sum to shape[dim], every segment divisible by its parts
 * (N, or parts[j], which must divide N).  `tname` is
 * the tensor's name for messages (which segment, its length, and N).
 * TPL_EPLAN also covers N == 0, ndim > TPL_MAX_DIMS, nsegs > TPL_MAX_SEGS
 * and an explicit segment of length 0 (an empty dim without segs is
 * fine: an empty tensor shards into empty shards) and parts[j] not
 * dividing N.  The
 * TPL_EINDIVISIBLE message lists the shard counts that would divide.
 * Returns 0, TPL_EPLAN or TPL_EINDIVISIBLE; tname and err may be NULL. */
int tpl__shard_check(const uint64_t *shape, int ndim,
                     const struct tpl__shard_spec *spec, uint32_t nshards,
                     const char *tname, struct tpl__error *err);

/* Computes rank `rank`'s layout of a checked spec over a tensor of element
 * size `itemsize`.  An empty tensor (some extent 0) gives rows = 0,
 * npieces = 0, total = 0.  When rank r's piece covers whole rows (N == 1)
 * the rows are collapsed into one (rows = 1).  Returns 0, TPL_EOVERFLOW
 * (the tensor's byte size exceeds 64 bits), or TPL_EINTERNAL for a caller
 * bug (spec not passing tpl__shard_check, rank >= N, itemsize 0); *out is
 * written only on success. */
int tpl__shard_layout(const uint64_t *shape, int ndim, size_t itemsize,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint32_t rank, struct tpl__layout *out);

/* The layout of a whole (replicated) tensor of `nbytes`: one piece. */
void tpl__layout_whole(uint64_t nbytes, struct tpl__layout *out);

/* Rank's shard shape: shape with shape[dim] replaced by the sum of each
 * segment's block length (segs[j] / N, or segs[j] / parts[j]). */
void tpl__shard_shape(const uint64_t *shape, int ndim,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint64_t *out);

/* How many ranks hold each block of the spec's most replicated segment:
 * N / parts[j] at its largest, 1 when no segment is replicated (every
 * rank's bytes disjoint from every other's).  For a spec that passed
 * tpl__shard_check. */
uint32_t tpl__shard_replicas(const struct tpl__shard_spec *spec,
                             uint32_t nshards);

/* The per-rank length of each segment of a checked spec over a dim of
 * length `extent` (segs[j] / N, or segs[j] / parts[j]: MLC's per-shard
 * segs) into out (TPL_MAX_SEGS entries); returns how many (1 without
 * segs). */
size_t tpl__shard_rank_segs(const struct tpl__shard_spec *spec, uint64_t extent,
                            uint32_t nshards, uint64_t *out);

/* Copies into `dst` the part of layout `l` that falls inside the tensor
 * byte range [begin, end) (offsets from the tensor's start; any range,
 * boundaries may fall inside a piece), given `src` = the tensor's bytes
 * from `begin` to `end`.  Bytes are written in source order; returns how
 * many (= tpl__layout_count(l, begin, end); dst must hold that many).
 * Gathering consecutive ranges [b0,b1), [b1,b2), ... back to back gives
 * the same bytes as gathering [b0, bn) at once.  Cost: O(rows touched *
 * npieces), the first row found by division. */
uint64_t tpl__layout_gather(const struct tpl__layout *l, uint64_t begin,
                            uint64_t end, const uint8_t *src, uint8_t *dst);

/* The inverse of tpl__layout_gather: the bytes of layout `l` inside
 * the tensor byte range [begin, end), given in source order at `shard`
 * (tpl__layout_count(l, begin, end) of them: the rank's shard from byte
 * tpl__layout_count(l, 0, begin) on), written back to their places in
 * `dst`, the tensor's bytes from `begin`.  Re-sharding rebuilds a full
 * tensor from its shards so, whole or a run at a time; a block two
 * ranks hold (a replicated kv segment) is written by each of them, the
 * same bytes.  Returns the bytes written. */
uint64_t tpl__layout_scatter(const struct tpl__layout *l, uint64_t begin,
                             uint64_t end, const uint8_t *shard, uint8_t *dst);

/* Returns how many bytes of layout `l` fall inside [begin, end); O(npieces)
 * whatever the range. */
uint64_t tpl__layout_count(const struct tpl__layout *l, uint64_t begin,
                           uint64_t end);

/* If the bytes of `l` within [begin, end) are one contiguous source range,
 * stores its start in *start and returns its length; else returns
 * UINT64_MAX.  Returns 0 (with *start = begin) when none fall inside. */
uint64_t tpl__layout_contiguous(const struct tpl__layout *l, uint64_t begin,
                                uint64_t end, uint64_t *start);

#endif
