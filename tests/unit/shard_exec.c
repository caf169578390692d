/* shard_exec.c - test helper for tests/shard_oracle.sh: runs the shard
 * math on a batch of cases written by `oracle.py gen-shard` so the numpy
 * oracle can check the bytes.  For each line of CASES (see oracle.py's
 * write_cases) it checks the spec; on success it gathers every rank's
 * bytes from the case's input tensor in windows of `chunk` bytes (so
 * window boundaries fall inside pieces) and appends them, rank by rank,
 * to OUT; it writes "ok" or "err CODE" to STATUS.
 *   usage: shard_exec CASES INPUT OUT STATUS
 * Exits 0 when every case ran (refusals included), 1 on a broken batch
 * or an internal inconsistency (count or contiguity disagreeing with the
 * gather, which the oracle cannot see). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fileio.h"
#include "shard.h"

struct exec_case {
  int ndim;
  uint64_t shape[TPL_MAX_DIMS];
  size_t itemsize;
  struct tpl__shard_spec spec;
  uint32_t nshards;
  uint64_t chunk, offset, nbytes;
};

/* Reads the next unsigned number of *p; returns 0 or -1. */
static int next_u64(char **p, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(*p, &end, 10);
  if (end == *p || errno != 0) return -1;
  *p = end;
  *out = v;
  return 0;
}

static int parse_case(char *line, struct exec_case *c) {
  uint64_t v, item, dim, nsegs, nparts, n;
  memset(c, 0, sizeof(*c));
  if (next_u64(&line, &v) != 0 || v > TPL_MAX_DIMS) return -1;
  c->ndim = (int)v;
  for (int i = 0; i < c->ndim; i++)
    if (next_u64(&line, &c->shape[i]) != 0) return -1;
  if (next_u64(&line, &item) != 0 || next_u64(&line, &dim) != 0 ||
      next_u64(&line, &nsegs) != 0 || nsegs > TPL_MAX_SEGS)
    return -1;
  c->itemsize = item;
  c->spec.dim = (int)dim;
  c->spec.nsegs = nsegs;
  for (size_t j = 0; j < nsegs; j++)
    if (next_u64(&line, &c->spec.segs[j]) != 0) return -1;
  if (next_u64(&line, &nparts) != 0 || nparts > TPL_MAX_SEGS) return -1;
  for (size_t j = 0; j < nparts; j++) {
    if (next_u64(&line, &v) != 0 || v > UINT32_MAX) return -1;
    c->spec.parts[j] = (uint32_t)v;
  }
  if (next_u64(&line, &n) != 0 || next_u64(&line, &c->chunk) != 0 ||
      next_u64(&line, &c->offset) != 0 || next_u64(&line, &c->nbytes) != 0)
    return -1;
  c->nshards = (uint32_t)n;
  return c->chunk == 0 ? -1 : 0;
}

/* Gathers one rank in windows of c->chunk bytes into dst; checks count
 * and contiguity against each window.  Returns bytes gathered or -1. */
static int64_t gather_rank(const struct exec_case *c,
                           const struct tpl__layout *l, const uint8_t *src,
                           uint8_t *dst) {
  uint64_t n = 0;
  for (uint64_t b = 0; b < c->nbytes; b += c->chunk) {
    uint64_t e = c->nbytes - b < c->chunk ? c->nbytes : b + c->chunk;
    uint64_t got = tpl__layout_gather(l, b, e, src + b, dst + n);
    uint64_t start, len = tpl__layout_contiguous(l, b, e, &start);
    if (got != tpl__layout_count(l, b, e)) return -1;
    if (len != UINT64_MAX &&
        (len != got || (len && memcmp(dst + n, src + start, len) != 0)))
      return -1;
    n += got;
  }
  return n == l->total ? (int64_t)n : -1;
}

/* Bytes of one rank's shard shape: every rank gets this many (N of them
 * are the whole tensor when no kv head is replicated). */
static uint64_t rank_bytes(const struct exec_case *c) {
  uint64_t shape[TPL_MAX_DIMS], n = c->itemsize;
  tpl__shard_shape(c->shape, c->ndim, &c->spec, c->nshards, shape);
  for (int i = 0; i < c->ndim; i++)
    n *= shape[i];
  return n;
}

/* Runs one case; appends rank outputs to `out`.  Returns 0 or -1. */
static int run_case(const struct exec_case *c, const uint8_t *input,
                    size_t inlen, FILE *out, FILE *status) {
  struct tpl__error err = {0};
  if (c->offset > inlen || c->nbytes > inlen - c->offset) return -1;
  int rc = tpl__shard_check(c->shape, c->ndim, &c->spec, c->nshards, "t", &err);
  if (rc != 0) {
    fprintf(status, "err %d\n", rc);
    return 0;
  }
  uint8_t *dst = malloc(c->nbytes ? c->nbytes : 1);
  uint64_t sum = 0;
  if (dst == NULL) return -1;
  for (uint32_t r = 0; r < c->nshards; r++) {
    struct tpl__layout l;
    int64_t n;
    if (tpl__shard_layout(c->shape, c->ndim, c->itemsize, &c->spec, c->nshards,
                          r, &l) != 0 ||
        (n = gather_rank(c, &l, input + c->offset, dst)) < 0 ||
        fwrite(dst, 1, (size_t)n, out) != (size_t)n) {
      free(dst);
      return -1;
    }
    sum += (uint64_t)n;
  }
  free(dst);
  fprintf(status, "ok\n");
  return sum == c->nshards * rank_bytes(c) ? 0 : -1;
}

static int run_batch(FILE *cases, const uint8_t *input, size_t inlen, FILE *out,
                     FILE *status) {
  char line[4096];
  unsigned long lineno = 0;
  while (fgets(line, sizeof(line), cases) != NULL) {
    struct exec_case c;
    lineno++;
    if (parse_case(line, &c) != 0 ||
        run_case(&c, input, inlen, out, status) != 0) {
      fprintf(stderr, "shard_exec: case on line %lu failed\n", lineno);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  struct tpl__error err = {0};
  char *input = NULL;
  size_t inlen = 0;
  if (argc != 5) {
    fprintf(stderr, "usage: shard_exec CASES INPUT OUT STATUS\n");
    return 64;
  }
  if (tpl__read_file(argv[2], (size_t)1 << 30, &input, &inlen, &err) != 0) {
    fprintf(stderr, "shard_exec: %s\n", err.msg);
    return 1;
  }
  FILE *cases = fopen(argv[1], "r");
  FILE *out = fopen(argv[3], "wb");
  FILE *status = fopen(argv[4], "w");
  int rc = 1;
  if (cases != NULL && out != NULL && status != NULL)
    rc = run_batch(cases, (const uint8_t *)input, inlen, out, status);
  else
    fprintf(stderr, "shard_exec: cannot open files\n");
  if (cases != NULL) fclose(cases);
  if (out != NULL && fclose(out) != 0) rc = 1;
  if (status != NULL && fclose(status) != 0) rc = 1;
  free(input);
  return rc;
}
