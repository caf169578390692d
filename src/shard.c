/* shard.c - the pure shard math, byte-exact with MLC LLM's ShardSingleDim
 * (DESIGN.md section 2).  A tensor of shape F sharded along `dim` is seen
 * as `rows` = prod(F[0..dim-1]) rows of `row_stride` = F[dim] * inner
 * bytes, inner = prod(F[dim+1..]) * itemsize.  Rank r receives from every
 * row, for each segment j (per-shard length s_j = segs[j] / N, prefix sum
 * S_j), the `s_j * inner` bytes at `(N * S_j + r * s_j) * inner`.  A
 * segment cut into P < N parts (kv heads replicated, parts[j] = P) has
 * blocks of segs[j] / P, and rank r takes block floor(r * P / N): the
 * same bytes as N / P - 1 other ranks.  The
 * result is a struct tpl__layout that the engine, the verifier and the
 * tests all execute with tpl__layout_gather; the range functions work on
 * any byte window [begin, end) of the tensor, so a big tensor can be
 * streamed in chunks whose boundaries fall anywhere.  No I/O, no MPI, and
 * no per-element work: bytes move as whole pieces with memcpy. */
#include <stdio.h>
#include <string.h>

#include "shard.h"

/* Divisors listed in an indivisibility message: up to this many, and
 * none above TPL_HINT_MAX_N (nobody shards over thousands of ranks). */
#define TPL_HINT_MAX_DIVISORS 12
#define TPL_HINT_MAX_N 1024

static const char *tensor_name(const char *tname) {
  return tname != NULL ? tname : "(unnamed)";
}

/* Writes "[a, b, c]" (at most `show` values, then "...") into buf. */
static void format_list(char *buf, size_t cap, const uint64_t *v, size_t n,
                        size_t show) {
  size_t used = 0;
  int k = snprintf(buf, cap, "[");
  for (size_t i = 0; k >= 0 && i < n; i++) {
    used += (size_t)k;
    if (used >= cap) return;
    if (i == show) {
      k = snprintf(buf + used, cap - used, ", ...");
      break;
    }
    k = snprintf(buf + used, cap - used, "%s%llu", i ? ", " : "",
                 (unsigned long long)v[i]);
  }
  if (k < 0) return;
  used += (size_t)k;
  if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Writes the shard counts (<= TPL_HINT_MAX_N) dividing `g` into buf, as
 * "1, 2, 4, 8".  g == 0 (every segment empty) is divided by anything. */
static void format_divisors(char *buf, size_t cap, uint64_t g) {
  size_t used = 0, shown = 0;
  buf[0] = '\0';
  for (uint64_t d = 1; d <= TPL_HINT_MAX_N && used < cap; d++) {
    if (g != 0 && g % d != 0) continue;
    if (shown == TPL_HINT_MAX_DIVISORS) {
      snprintf(buf + used, cap - used, ", ...");
      return;
    }
    int k = snprintf(buf + used, cap - used, "%s%llu", shown ? ", " : "",
                     (unsigned long long)d);
    if (k < 0) return;
    used += (size_t)k;
    shown++;
  }
}

/* How many blocks segment j is cut into: N, or its parts when set. */
static uint64_t seg_parts(const struct tpl__shard_spec *spec, size_t j,
                          uint32_t nshards) {
  return spec->parts[j] != 0 ? spec->parts[j] : nshards;
}

/* The segments of `spec` along a dim of length `extent`: either the
 * explicit ones or the single implied segment.  Returns how many. */
static size_t spec_segs(const struct tpl__shard_spec *spec, uint64_t extent,
                        const uint64_t **segs, uint64_t *one) {
  if (spec->nsegs == 0) {
    *one = extent;
    *segs = one;
    return 1;
  }
  *segs = spec->segs;
  return spec->nsegs;
}

/* A replicated segment's parts divide N, so every block has N / P
 * holders. */
static int check_parts(const struct tpl__shard_spec *spec, uint32_t nshards,
                       const char *tname, struct tpl__error *err) {
  size_t n = spec->nsegs ? spec->nsegs : 1;
  for (size_t j = 0; j < n; j++) {
    uint32_t p = spec->parts[j];
    if (p != 0 && nshards % p != 0)
      return tpl__fail(err, TPL_EPLAN,
                       "tensor '%s': segment %zu along dim %d is cut into "
                       "%u replicated parts: expected a divisor of the %u "
                       "shards, found remainder %u",
                       tensor_name(tname), j, spec->dim, p, nshards,
                       nshards % p);
  }
  return 0;
}

static int check_shape(const uint64_t *shape, int ndim,
                       const struct tpl__shard_spec *spec, uint32_t nshards,
                       const char *tname, struct tpl__error *err) {
  char buf[256];
  if (nshards == 0)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': shard count must be at least 1, found 0",
                     tensor_name(tname));
  if (ndim < 0 || ndim > TPL_MAX_DIMS)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': expected at most %d dims, found %d",
                     tensor_name(tname), TPL_MAX_DIMS, ndim);
  if (spec->dim < 0 || spec->dim >= ndim) {
    format_list(buf, sizeof(buf), shape, (size_t)ndim, TPL_MAX_DIMS);
    if (ndim == 0)
      return tpl__fail(err, TPL_EPLAN,
                       "tensor '%s': cannot shard a scalar (shape []) "
                       "along dim %d",
                       tensor_name(tname), spec->dim);
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': shard dim %d is outside the tensor's "
                     "rank: expected 0..%d for shape %s, found %d",
                     tensor_name(tname), spec->dim, ndim - 1, buf, spec->dim);
  }
  if (spec->nsegs > TPL_MAX_SEGS)
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': expected at most %d segs, found %zu",
                     tensor_name(tname), TPL_MAX_SEGS, spec->nsegs);
  return check_parts(spec, nshards, tname, err);
}

/* Explicit segs must be positive and sum to shape[dim].  A zero-length
 * segment is refused: the implied segment of an empty dim is fine (an
 * empty tensor shards into empty shards), but an explicit empty part of a
 * fused weight means the plan or the config it was sized from is wrong. */
static int check_segs(const uint64_t *shape, const struct tpl__shard_spec *spec,
                      const char *tname, struct tpl__error *err) {
  char buf[256];
  uint64_t sum = 0;
  int overflow = 0;
  for (size_t j = 0; j < spec->nsegs; j++) {
    if (spec->segs[j] == 0) {
      format_list(buf, sizeof(buf), spec->segs, spec->nsegs, 16);
      return tpl__fail(err, TPL_EPLAN,
                       "tensor '%s': segs %s along dim %d: expected "
                       "positive lengths, found segment %zu of length 0",
                       tensor_name(tname), buf, spec->dim, j);
    }
    if (tpl__add_u64(sum, spec->segs[j], &sum) != 0) overflow = 1;
  }
  if (spec->nsegs == 0) return 0;
  if (overflow || sum != shape[spec->dim]) {
    format_list(buf, sizeof(buf), spec->segs, spec->nsegs, 16);
    if (overflow)
      return tpl__fail(err, TPL_EPLAN,
                       "tensor '%s': segs %s along dim %d: expected them to "
                       "sum to shape[%d] = %llu, found a sum overflowing "
                       "64 bits",
                       tensor_name(tname), buf, spec->dim, spec->dim,
                       (unsigned long long)shape[spec->dim]);
    return tpl__fail(err, TPL_EPLAN,
                     "tensor '%s': segs %s along dim %d: expected them to "
                     "sum to shape[%d] = %llu, found %llu",
                     tensor_name(tname), buf, spec->dim, spec->dim,
                     (unsigned long long)shape[spec->dim],
                     (unsigned long long)sum);
  }
  return 0;
}

/* A replicated segment cut into parts that do not divide it. */
static int fail_parts(const struct tpl__shard_spec *spec, size_t j,
                      uint64_t len, uint32_t nshards, const char *tname,
                      struct tpl__error *err) {
  return tpl__fail(err, TPL_EINDIVISIBLE,
                   "tensor '%s': segment %zu along dim %d has length %llu, "
                   "not divisible by its %u replicated parts (each held by "
                   "%u of the %u shards)",
                   tensor_name(tname), j, spec->dim, (unsigned long long)len,
                   spec->parts[j], nshards / spec->parts[j], nshards);
}

static int check_divisible(const uint64_t *shape,
                           const struct tpl__shard_spec *spec, uint32_t nshards,
                           const char *tname, struct tpl__error *err) {
  const uint64_t *segs;
  uint64_t one, g = 0;
  size_t n = spec_segs(spec, shape[spec->dim], &segs, &one);
  size_t bad = n;
  for (size_t j = 0; j < n; j++) {
    if (spec->parts[j] != 0) {
      if (segs[j] % spec->parts[j] != 0)
        return fail_parts(spec, j, segs[j], nshards, tname, err);
      continue; /* its parts do not depend on N */
    }
    g = tpl__gcd_u64(g, segs[j]);
    if (bad == n && segs[j] % nshards != 0) bad = j;
  }
  if (bad == n) return 0;
  char divs[160];
  format_divisors(divs, sizeof(divs), g);
  if (spec->nsegs == 0)
    return tpl__fail(err, TPL_EINDIVISIBLE,
                     "tensor '%s': dim %d has length %llu, not divisible "
                     "by %u shards; shard counts that divide it: %s",
                     tensor_name(tname), spec->dim,
                     (unsigned long long)segs[bad], nshards, divs);
  return tpl__fail(err, TPL_EINDIVISIBLE,
                   "tensor '%s': segment %zu (of %zu) along dim %d has "
                   "length %llu, not divisible by %u shards; shard counts "
                   "that divide every segment: %s",
                   tensor_name(tname), bad, n, spec->dim,
                   (unsigned long long)segs[bad], nshards, divs);
}

int tpl__shard_check(const uint64_t *shape, int ndim,
                     const struct tpl__shard_spec *spec, uint32_t nshards,
                     const char *tname, struct tpl__error *err) {
  int rc = check_shape(shape, ndim, spec, nshards, tname, err);
  if (rc == 0) rc = check_segs(shape, spec, tname, err);
  if (rc == 0) rc = check_divisible(shape, spec, nshards, tname, err);
  return rc;
}

/* Splits the tensor around `dim`: rows before it, bytes per step along it
 * (inner), and whether any extent is zero.  Returns 0 or TPL_EOVERFLOW
 * (an empty tensor never overflows: it has no bytes). */
static int split_shape(const uint64_t *shape, int ndim, int dim,
                       size_t itemsize, uint64_t *rows, uint64_t *inner,
                       int *empty) {
  uint64_t r = 1, in = itemsize;
  int ovf = 0;
  *empty = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) *empty = 1;
    if (i < dim && tpl__mul_u64(r, shape[i], &r) != 0) ovf = 1;
    if (i > dim && tpl__mul_u64(in, shape[i], &in) != 0) ovf = 1;
  }
  if (*empty) return 0;
  if (ovf) return TPL_EOVERFLOW;
  *rows = r;
  *inner = in;
  return 0;
}

/* Bytes of the layout per row. */
static uint64_t row_bytes(const struct tpl__layout *l) {
  uint64_t sum = 0;
  for (size_t i = 0; i < l->npieces; i++)
    sum += l->pieces[i].length;
  return sum;
}

/* Appends piece [off, off+len) to `out`, merging it with the previous one
 * when they touch. */
static void push_piece(struct tpl__layout *out, uint64_t off, uint64_t len) {
  if (len == 0) return;
  if (out->npieces > 0) {
    struct tpl__piece *p = &out->pieces[out->npieces - 1];
    if (p->offset + p->length == off) {
      p->length += len;
      return;
    }
  }
  out->pieces[out->npieces].offset = off;
  out->pieces[out->npieces].length = len;
  out->npieces++;
}

/* Re-validates what tpl__shard_check establishes, without a message: a
 * layout of an unchecked spec is a caller bug, not bad input. */
static int spec_is_sane(const uint64_t *shape, int ndim, size_t itemsize,
                        const struct tpl__shard_spec *spec, uint32_t nshards,
                        uint32_t rank) {
  return itemsize != 0 && nshards != 0 && rank < nshards &&
         tpl__shard_check(shape, ndim, spec, nshards, NULL, NULL) == 0;
}

int tpl__shard_layout(const uint64_t *shape, int ndim, size_t itemsize,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint32_t rank, struct tpl__layout *out) {
  uint64_t rows = 0, inner = 0, stride, nbytes, one, start = 0;
  const uint64_t *segs;
  int empty;
  if (!spec_is_sane(shape, ndim, itemsize, spec, nshards, rank))
    return TPL_EINTERNAL;
  int rc = split_shape(shape, ndim, spec->dim, itemsize, &rows, &inner, &empty);
  if (rc != 0) return rc;
  if (empty) {
    *out = (struct tpl__layout){0};
    return 0;
  }
  if (tpl__mul_u64(shape[spec->dim], inner, &stride) != 0 ||
      tpl__mul_u64(rows, stride, &nbytes) != 0)
    return TPL_EOVERFLOW;
  struct tpl__layout l = {.rows = rows, .row_stride = stride};
  size_t n = spec_segs(spec, shape[spec->dim], &segs, &one);
  /* Every offset below is < shape[dim] * inner = stride, checked above. */
  for (size_t j = 0; j < n; j++) {
    uint64_t p = seg_parts(spec, j, nshards);
    uint64_t s = segs[j] / p, block = (uint64_t)rank * p / nshards;
    push_piece(&l, (start + block * s) * inner, s * inner);
    start += segs[j];
  }
  if (l.npieces == 1 && l.pieces[0].offset == 0 &&
      l.pieces[0].length == stride) {
    /* One piece covering whole rows (N == 1): the rows are contiguous. */
    l.rows = 1;
    l.row_stride = nbytes;
    l.pieces[0].length = nbytes;
  }
  l.total = l.rows * row_bytes(&l); /* <= nbytes, fits */
  *out = l;
  return 0;
}

void tpl__layout_whole(uint64_t nbytes, struct tpl__layout *out) {
  *out = (struct tpl__layout){0};
  if (nbytes == 0) return;
  push_piece(out, 0, nbytes);
  out->rows = 1;
  out->row_stride = out->total = nbytes;
}

size_t tpl__shard_rank_segs(const struct tpl__shard_spec *spec, uint64_t extent,
                            uint32_t nshards, uint64_t *out) {
  const uint64_t *segs;
  uint64_t one;
  size_t n = spec_segs(spec, extent, &segs, &one);
  for (size_t j = 0; j < n; j++)
    out[j] = segs[j] / seg_parts(spec, j, nshards);
  return n;
}

uint32_t tpl__shard_replicas(const struct tpl__shard_spec *spec,
                             uint32_t nshards) {
  size_t n = spec->nsegs ? spec->nsegs : 1;
  uint32_t most = 1;
  for (size_t j = 0; j < n && j < TPL_MAX_SEGS; j++)
    if (spec->parts[j] != 0 && nshards / spec->parts[j] > most)
      most = nshards / spec->parts[j];
  return most;
}

void tpl__shard_shape(const uint64_t *shape, int ndim,
                      const struct tpl__shard_spec *spec, uint32_t nshards,
                      uint64_t *out) {
  uint64_t segs[TPL_MAX_SEGS], sum = 0;
  for (int i = 0; i < ndim; i++)
    out[i] = shape[i];
  if (nshards == 0 || spec->dim < 0 || spec->dim >= ndim ||
      spec->nsegs > TPL_MAX_SEGS)
    return;
  size_t n = tpl__shard_rank_segs(spec, shape[spec->dim], nshards, segs);
  for (size_t j = 0; j < n; j++)
    sum += segs[j];
  out[spec->dim] = sum;
}

/* The tensor bytes the layout spans: rows * row_stride (saturating, so a
 * hand-built layout cannot wrap). */
static uint64_t layout_span(const struct tpl__layout *l) {
  uint64_t span;
  if (tpl__mul_u64(l->rows, l->row_stride, &span) != 0) return UINT64_MAX;
  return span;
}

/* Layout bytes in [0, y) of one row, 0 <= y <= row_stride. */
static uint64_t row_prefix(const struct tpl__layout *l, uint64_t y) {
  uint64_t sum = 0;
  for (size_t i = 0; i < l->npieces; i++) {
    const struct tpl__piece *p = &l->pieces[i];
    if (y <= p->offset) break;
    sum += (y - p->offset < p->length) ? y - p->offset : p->length;
  }
  return sum;
}

/* Layout bytes in [0, x): whole rows by multiplication, then one row. */
static uint64_t layout_prefix(const struct tpl__layout *l, uint64_t x) {
  if (l->npieces == 0 || l->row_stride == 0) return 0;
  uint64_t span = layout_span(l);
  if (x >= span) return l->total;
  uint64_t row = x / l->row_stride;
  return row * row_bytes(l) + row_prefix(l, x % l->row_stride);
}

uint64_t tpl__layout_count(const struct tpl__layout *l, uint64_t begin,
                           uint64_t end) {
  if (end <= begin) return 0;
  return layout_prefix(l, end) - layout_prefix(l, begin);
}

/* Copies the layout bytes of row `row` that fall inside [begin, end)
 * between the tensor's bytes from `begin` and the shard's, in source
 * order: into the shard (a gather) or back into the tensor (scatter). */
static uint64_t copy_row(const struct tpl__layout *l, uint64_t row,
                         uint64_t begin, uint64_t end, uint8_t *tensor,
                         uint8_t *shard, int scatter) {
  uint64_t base = row * l->row_stride, n = 0;
  for (size_t i = 0; i < l->npieces; i++) {
    uint64_t a = base + l->pieces[i].offset;
    uint64_t b = a + l->pieces[i].length;
    if (a >= end) break;
    if (b <= begin) continue;
    if (a < begin) a = begin;
    if (b > end) b = end;
    if (scatter)
      memcpy(tensor + (a - begin), shard + n, (size_t)(b - a));
    else
      memcpy(shard + n, tensor + (a - begin), (size_t)(b - a));
    n += b - a;
  }
  return n;
}

static uint64_t copy_range(const struct tpl__layout *l, uint64_t begin,
                           uint64_t end, uint8_t *tensor, uint8_t *shard,
                           int scatter) {
  if (l->npieces == 0 || l->row_stride == 0) return 0;
  uint64_t span = layout_span(l);
  if (end > span) end = span;
  if (end <= begin) return 0;
  uint64_t first = begin / l->row_stride, last = (end - 1) / l->row_stride;
  uint64_t n = 0;
  for (uint64_t row = first; row <= last; row++)
    n += copy_row(l, row, begin, end, tensor, shard + n, scatter);
  return n;
}

uint64_t tpl__layout_gather(const struct tpl__layout *l, uint64_t begin,
                            uint64_t end, const uint8_t *src, uint8_t *dst) {
  return copy_range(l, begin, end, (uint8_t *)src, dst, 0);
}

uint64_t tpl__layout_scatter(const struct tpl__layout *l, uint64_t begin,
                             uint64_t end, const uint8_t *shard, uint8_t *dst) {
  return copy_range(l, begin, end, dst, (uint8_t *)shard, 1);
}

/* The first layout byte at or after x, or UINT64_MAX if none. */
static uint64_t next_byte(const struct tpl__layout *l, uint64_t x) {
  uint64_t row = x / l->row_stride, y = x % l->row_stride;
  for (size_t i = 0; i < l->npieces; i++) {
    const struct tpl__piece *p = &l->pieces[i];
    if (p->offset + p->length > y)
      return row * l->row_stride + (p->offset > y ? p->offset : y);
  }
  if (row + 1 >= l->rows) return UINT64_MAX;
  return (row + 1) * l->row_stride + l->pieces[0].offset;
}

uint64_t tpl__layout_contiguous(const struct tpl__layout *l, uint64_t begin,
                                uint64_t end, uint64_t *start) {
  uint64_t count = tpl__layout_count(l, begin, end), first;
  if (count == 0) {
    *start = begin;
    return 0;
  }
  /* count > 0, so the first byte exists; the bytes are one range exactly
   * when the `count` bytes from it are all in the layout (then they do
   * not reach past `end`, which holds only `count`). */
  first = next_byte(l, begin);
  if (count > UINT64_MAX - first ||
      tpl__layout_count(l, first, first + count) != count)
    return UINT64_MAX;
  *start = first;
  return count;
}
