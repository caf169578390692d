/* fuzz_shard.c - libFuzzer target for the shard math.  The input bytes are
 * a small spec: ndim, shape, itemsize, dim, N, a mode byte (segs built to
 * be valid or taken raw, huge first dim), segs, then chunk sizes.  It runs
 * tpl__shard_check, and for accepted specs every rank's layout, and
 * aborts when an invariant breaks: the ranks partition the tensor (each
 * byte owned once, totals summing to the tensor's bytes), pieces sorted
 * and merged, the gather equal to a per-element closed-form reference,
 * and a gather over the fuzzer's chunk splits equal to the whole gather,
 * with count and contiguity agreeing on every chunk.  Tensors are capped
 * at 1 MiB. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "shard.h"

#define FUZZ_MAX_BYTES (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_spec {
  uint64_t shape[TPL_MAX_DIMS];
  int ndim;
  size_t itemsize;
  struct tpl__shard_spec spec;
  uint32_t nshards;
  int huge;
  const uint8_t *chunks;
  size_t nchunks;
};

struct reader {
  const uint8_t *p;
  size_t left;
};

static uint8_t take(struct reader *r) {
  if (r->left == 0) return 0;
  r->left--;
  return *r->p++;
}

static void parse_spec(const uint8_t *data, size_t size, struct fuzz_spec *f) {
  struct reader r = {data, size};
  memset(f, 0, sizeof(*f));
  f->ndim = 1 + take(&r) % TPL_MAX_DIMS;
  for (int i = 0; i < f->ndim; i++)
    f->shape[i] = take(&r) % 9;
  f->itemsize = (size_t)1 << (take(&r) % 4);
  f->spec.dim = take(&r) % f->ndim;
  f->nshards = 1 + take(&r) % 8;
  uint8_t mode = take(&r);
  int valid = mode & 1;
  f->huge = (mode & 0x10) != 0;
  f->spec.nsegs = (mode >> 1) % 5;
  if (valid && f->spec.nsegs) f->shape[f->spec.dim] = 0;
  for (size_t j = 0; j < f->spec.nsegs; j++) {
    uint8_t b = take(&r);
    f->spec.segs[j] = valid ? f->nshards * (1u + b % 4) : b % 17;
    if (valid) f->shape[f->spec.dim] += f->spec.segs[j];
  }
  if (f->huge) f->shape[0] <<= 40;
  f->chunks = r.p;
  f->nchunks = r.left;
}

static int tensor_bytes(const struct fuzz_spec *f, uint64_t *n) {
  uint64_t v = f->itemsize;
  for (int i = 0; i < f->ndim; i++)
    if (f->shape[i] == 0) v = 0;
  for (int i = 0; i < f->ndim; i++)
    if (tpl__mul_u64(v, f->shape[i], &v) != 0) return -1;
  *n = v;
  return 0;
}

/* Pieces sorted, non-empty, non-touching, inside the row. */
static void check_pieces(const struct tpl__layout *l) {
  uint64_t end = 0, sum = 0;
  for (size_t i = 0; i < l->npieces; i++) {
    const struct tpl__piece *p = &l->pieces[i];
    if (p->length == 0 || (i > 0 && p->offset <= end)) abort();
    if (p->offset > l->row_stride || p->length > l->row_stride - p->offset)
      abort();
    end = p->offset + p->length;
    sum += p->length;
  }
  if (l->rows * sum != l->total) abort();
}

/* Rank r's bytes element by element from the closed form. */
static uint64_t naive(const struct fuzz_spec *f, uint32_t r, const uint8_t *src,
                      uint8_t *dst) {
  uint64_t oshape[TPL_MAX_DIMS], idx[TPL_MAX_DIMS], count = 1, one;
  const struct tpl__shard_spec *sp = &f->spec;
  one = f->shape[sp->dim];
  const uint64_t *segs = sp->nsegs ? sp->segs : &one;
  uint32_t n = f->nshards;
  tpl__shard_shape(f->shape, f->ndim, sp, n, oshape);
  for (int d = 0; d < f->ndim; d++)
    count *= oshape[d];
  for (uint64_t e = 0; e < count; e++) {
    uint64_t rem = e, sj = 0, at = 0;
    size_t j = 0;
    for (int d = f->ndim - 1; d >= 0; d--) {
      idx[d] = rem % oshape[d];
      rem /= oshape[d];
    }
    uint64_t c = idx[sp->dim];
    while (c >= sj + segs[j] / n)
      sj += segs[j++] / n;
    for (int d = 0; d < f->ndim; d++)
      at = at * f->shape[d] +
           (d == sp->dim ? n * sj + r * (segs[j] / n) + c - sj : idx[d]);
    memcpy(dst + e * f->itemsize, src + at * f->itemsize, f->itemsize);
  }
  return count * f->itemsize;
}

static void mark_owned(const struct tpl__layout *l, uint8_t *owners) {
  for (uint64_t row = 0; row < l->rows; row++)
    for (size_t i = 0; i < l->npieces; i++)
      for (uint64_t k = 0; k < l->pieces[i].length; k++)
        owners[row * l->row_stride + l->pieces[i].offset + k]++;
}

/* Gathers over the fuzzer's chunk sizes (cycled) and checks each chunk. */
static uint64_t gather_chunks(const struct fuzz_spec *f,
                              const struct tpl__layout *l, uint64_t nbytes,
                              const uint8_t *src, uint8_t *dst) {
  uint64_t b = 0, n = 0;
  for (size_t k = 0; b < nbytes; k++) {
    uint64_t len = f->nchunks ? 1 + f->chunks[k % f->nchunks] : 7;
    if (f->nchunks && (f->chunks[k % f->nchunks] & 0x80))
      len = (len & 0x7f) * 97 + 1;
    uint64_t e = nbytes - b < len ? nbytes : b + len, start;
    uint64_t got = tpl__layout_gather(l, b, e, src + b, dst + n);
    if (got != tpl__layout_count(l, b, e)) abort();
    uint64_t c = tpl__layout_contiguous(l, b, e, &start);
    if (c != UINT64_MAX) {
      if (c != got) abort();
      if (c && memcmp(dst + n, src + start, c) != 0) abort();
      if (!c && start != b) abort();
    }
    n += got;
    b = e;
  }
  return n;
}

static void check_huge(const struct fuzz_spec *f) {
  uint64_t nbytes;
  int ok = tensor_bytes(f, &nbytes) == 0;
  for (uint32_t r = 0; r < f->nshards; r++) {
    struct tpl__layout l;
    int rc = tpl__shard_layout(f->shape, f->ndim, f->itemsize, &f->spec,
                               f->nshards, r, &l);
    if (rc != (ok ? 0 : TPL_EOVERFLOW)) abort();
    if (rc != 0) continue;
    check_pieces(&l);
    if (l.total != nbytes / f->nshards) abort();
    if (tpl__layout_count(&l, 0, UINT64_MAX) != l.total) abort();
  }
}

static void check_small(const struct fuzz_spec *f, uint64_t nbytes) {
  uint8_t *src = malloc(nbytes + 1), *whole = malloc(nbytes + 1);
  uint8_t *ref = malloc(nbytes + 1), *chunk = malloc(nbytes + 1);
  uint8_t *owners = calloc(nbytes + 1, 1);
  uint64_t sum = 0;
  if (!src || !whole || !ref || !chunk || !owners) abort();
  for (uint64_t i = 0; i < nbytes; i++)
    src[i] = (uint8_t)((i * 2654435761u) >> 13);
  for (uint32_t r = 0; r < f->nshards; r++) {
    struct tpl__layout l;
    if (tpl__shard_layout(f->shape, f->ndim, f->itemsize, &f->spec, f->nshards,
                          r, &l) != 0)
      abort();
    check_pieces(&l);
    mark_owned(&l, owners);
    uint64_t w = tpl__layout_gather(&l, 0, nbytes, src, whole);
    if (w != l.total || naive(f, r, src, ref) != w) abort();
    if (memcmp(whole, ref, w) != 0) abort();
    if (gather_chunks(f, &l, nbytes, src, chunk) != w) abort();
    if (memcmp(whole, chunk, w) != 0) abort();
    sum += w;
  }
  if (sum != nbytes) abort();
  for (uint64_t i = 0; i < nbytes; i++)
    if (owners[i] != 1) abort();
  free(src);
  free(whole);
  free(ref);
  free(chunk);
  free(owners);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_spec f;
  struct tpl__error err = {0};
  uint64_t nbytes;
  parse_spec(data, size, &f);
  int rc = tpl__shard_check(f.shape, f.ndim, &f.spec, f.nshards, "fuzz", &err);
  if (rc != 0) {
    if (rc != TPL_EPLAN && rc != TPL_EINDIVISIBLE) abort();
    if (err.code != rc || strstr(err.msg, "tensor 'fuzz'") == NULL) abort();
    return 0;
  }
  if (f.huge) {
    check_huge(&f);
    return 0;
  }
  if (tensor_bytes(&f, &nbytes) != 0) abort();
  if (nbytes <= FUZZ_MAX_BYTES) check_small(&f, nbytes);
  return 0;
}
