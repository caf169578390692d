/* mlc_md5.c - --verify-md5's pass over an MLC directory's files
 * (mlc_md5.h).  Reads go out in file order, READS of them in flight (for
 * a source that overlaps them: direct reads, ranged GETs), and are hashed
 * in the same order, so one MD5 context follows the file being hashed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "md5sum.h"
#include "mlc_md5.h"

#define READS 4

static const char *const format_names[] = {
    [TPL_FMT_SAFETENSORS] = "a safetensors file",
    [TPL_FMT_ST_INDEX] = "a sharded safetensors checkpoint (index JSON)",
    [TPL_FMT_MLC] = "an MLC weight directory"};

int tpl__mlc_md5_ready(const struct tpl__model *m, const char *model,
                       struct tpl__error *err) {
  if (m->format != TPL_FMT_MLC)
    return tpl__fail(err, TPL_EUSAGE,
                     "--verify-md5 checks the md5sum each file record of an "
                     "MLC weight directory's tensor-cache.json carries, and "
                     "'%s' is %s, which records none",
                     model,
                     m->format > 0 && m->format < (int)ARRAY_SIZE(format_names)
                         ? format_names[m->format]
                         : "another format");
  for (size_t f = 0; f < m->nfiles; f++)
    if (m->files[f].md5_state != TPL_MD5_OK)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: --verify-md5: expected its file record to carry "
                       "an \"md5sum\" of 32 hex digits (TVM's writer records "
                       "one for every file), found %s",
                       m->files[f].path,
                       m->files[f].md5_state == TPL_MD5_NONE ? "none"
                                                             : "another value");
  return 0;
}

struct pass {
  struct tpl__mlc_md5 *v;
  uint8_t *buf; /* READS buffers of `cap` bytes */
  uint64_t cap;
  struct tpl__read rd[READS];
  size_t issued, finished;
  uint32_t file_in; /* the next read's file and offset */
  uint64_t off_in;
  uint32_t file_out; /* the file being hashed, and its bytes hashed */
  uint64_t off_out;
  struct tpl__md5 md5;
  uint64_t total;
};

/* Starts the next read, if any file has bytes left and a buffer is free:
 * 1 when one went out, 0 when none could, or the start's failure. */
static int issue(struct pass *p, struct tpl__error *err) {
  const struct tpl__model *m = p->v->m;
  struct tpl__read *r = &p->rd[p->issued % READS];
  uint8_t *slot = p->buf + (p->issued % READS) * p->cap;
  uint64_t len;
  int rc;
  while (p->file_in < m->nfiles && p->off_in == m->files[p->file_in].size) {
    p->file_in++;
    p->off_in = 0;
  }
  if (p->file_in == m->nfiles || p->issued - p->finished == READS) return 0;
  len = m->files[p->file_in].size - p->off_in;
  if (len > p->v->chunk) len = p->v->chunk;
  *r = (struct tpl__read){.file = p->file_in, .off = p->off_in, .len = len};
  r->dst = tpl__source_place(p->v->src, p->file_in, slot, p->off_in);
  if (!tpl__source_direct(p->v->src, p->file_in))
    tpl__source_hint(p->v->src, p->file_in, p->off_in, len);
  rc = tpl__source_start(p->v->src, r, err);
  if (rc != 0) return rc;
  p->issued++;
  p->off_in += len;
  return 1;
}

/* Every file whose bytes are all hashed (empty ones too) against its
 * record, then on to the next. */
static int files_done(struct pass *p, struct tpl__error *err) {
  const struct tpl__model *m = p->v->m;
  while (p->file_out < m->nfiles && p->off_out == m->files[p->file_out].size) {
    const struct tpl__file *f = &m->files[p->file_out];
    uint8_t sum[16];
    char got[TPL_MD5_HEX];
    int rc;
    tpl__md5_digest(&p->md5, sum); /* and starts over */
    tpl__md5_hex(sum, got);
    rc = tpl__md5_check(f->path, "the cache",
                        f->md5_state == TPL_MD5_OK ? f->md5 : NULL, got,
                        TPL_EMISMATCH, err);
    if (rc != 0) return rc;
    p->file_out++;
    p->off_out = 0;
  }
  return 0;
}

/* The oldest read: waited for, hashed. */
static int hash_next(struct pass *p, struct tpl__error *err) {
  struct tpl__read *r = &p->rd[p->finished % READS];
  int rc;
  if (p->finished == p->issued)
    return tpl__fail(err, TPL_EINTERNAL, "%s: md5 pass: no read in flight",
                     p->v->m->files[p->file_out].path);
  rc = tpl__source_finish(p->v->src, r, err);
  p->finished++;
  if (rc != 0) return rc;
  tpl__md5_update(&p->md5, r->dst, (size_t)r->len);
  p->off_out += r->len;
  p->v->bytes += r->len;
  if (p->v->progress) p->v->progress(p->v->ctx, p->v->bytes, p->total);
  return 0;
}

/* The pass's buffers: each holds a read and the source's slack, aligned
 * as its direct reads need. */
static int alloc_buffers(struct pass *p, struct tpl__error *err) {
  uint64_t unit = tpl__source_slack(p->v->src) / 2;
  void *buf = NULL;
  if (unit < 4096) unit = 4096;
  p->cap =
      (p->v->chunk + tpl__source_slack(p->v->src) + unit - 1) / unit * unit;
  if (posix_memalign(&buf, (size_t)unit, (size_t)(p->cap * READS)) != 0)
    return tpl__fail(err, -ENOMEM, "cannot allocate the md5 pass's buffers");
  p->buf = buf;
  return 0;
}

int tpl__mlc_md5_verify(struct tpl__mlc_md5 *v, struct tpl__error *err) {
  struct pass p = {.v = v};
  struct tpl__error ignored;
  double t0 = tpl__now();
  int rc = alloc_buffers(&p, err);
  for (size_t f = 0; f < v->m->nfiles; f++)
    p.total += v->m->files[f].size;
  tpl__md5_init(&p.md5);
  v->bytes = 0;
  while (rc == 0 && (rc = files_done(&p, err)) == 0 &&
         p.file_out < v->m->nfiles) {
    while ((rc = issue(&p, err)) == 1)
      ;
    if (rc == 0) rc = hash_next(&p, err);
  }
  /* after a failure: the reads still out land before their buffers go */
  while (p.finished < p.issued)
    tpl__source_finish(v->src, &p.rd[p.finished++ % READS], &ignored);
  free(p.buf);
  v->seconds = tpl__now() - t0;
  return rc;
}
