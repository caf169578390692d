/* local_read.c - `--read local`: this rank's slices, straight from the
 * checkpoint's files (see local_read.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fdcache.h"
#include "fileio.h"
#include "hf.h"
#include "local_read.h"
#include "origin.h"
#include "s3.h"
#include "shard.h"
#include "source.h"

int tpl__local_unchanged(const struct tpl__job *job, uint32_t f,
                         struct tpl__fdcache *files, struct tpl__error *err) {
  const struct tpl__job_file *jf = &job->files[f];
  int fd = -1; /* a remote file: its origin needs none */
  if (tpl__fdcache_held(files, f)) {
    int rc = tpl__fdcache_get(files, f, &fd, err);
    if (rc != 0) return rc;
  }
  return tpl__job_origin(job)->member_unchanged(jf->path, jf->size,
                                                jf->mtime_ns, fd, err);
}

/* File f of the job, opened and checked by its origin, into c (a remote
 * file is not held). */
static int open_one(const struct tpl__job *job, uint32_t f,
                    struct tpl__fdcache *c, struct tpl__error *err) {
  const struct tpl__job_file *jf = &job->files[f];
  int fd = -1, rc = tpl__job_origin(job)->member_open(jf->path, jf->size,
                                                      jf->mtime_ns, &fd, err);
  if (rc != 0 || fd < 0) return rc;
  rc = tpl__fdcache_hold(c, f, jf->path, fd, NULL);
  return rc == 0 ? 0 : tpl__fail(err, rc, "%s: %s", jf->path, tpl_strerror(rc));
}

int tpl__local_open(const struct tpl__job *job, struct tpl__fdcache **files,
                    struct tpl__error *err) {
  struct tpl__fdcache *c;
  int rc = 0;
  if (job->nfiles == 0 && job->ntensors > 0)
    return tpl__fail(err, TPL_EINTERNAL, "the job table names no files");
  tpl__raise_fd_limit(); /* room for more of them open at once */
  if ((c = tpl__fdcache_new(0)) == NULL) return tpl__oom(err);
  for (uint32_t f = 0; rc == 0 && f < job->nfiles; f++)
    rc = open_one(job, f, c, err);
  if (rc != 0) {
    tpl__fdcache_free(c);
    return rc;
  }
  *files = c;
  return 0;
}

int tpl__local_warm(const struct tpl__job *job, struct tpl__fdcache *files) {
  struct tpl__error ignored;
  for (uint32_t f = 0; f < job->nfiles; f++) {
    int fd;
    if (!tpl__fdcache_held(files, f) ||
        tpl__fdcache_get(files, f, &fd, &ignored) != 0 ||
        !tpl__resident_enough(fd, job->files[f].size))
      return 0;
  }
  return 1;
}

/* Reads n bytes of tensor i's source from `begin` (tensor-relative). */
static int read_part(struct tpl__local_read *lr, size_t i, uint8_t *dst,
                     uint64_t n, uint64_t begin, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  uint64_t off = t->file_offset + begin;
  double t0 = tpl__now();
  int rc = tpl__source_read(lr->src, t->file, dst, n, off, err);
  lr->t_read += tpl__now() - t0;
  lr->bytes_read += n;
  char msg[sizeof(err->msg)];
  if (rc == 0) return 0;
  snprintf(msg, sizeof(msg), "%s", err->msg);
  return tpl__fail(err, rc, "%s (tensor '%s')", msg, t->name);
}

/* The shortest piece of a row in layout l. */
static uint64_t shortest_piece(const struct tpl__layout *l) {
  uint64_t n = UINT64_MAX;
  for (size_t k = 0; k < l->npieces; k++)
    if (l->pieces[k].length < n) n = l->pieces[k].length;
  return n;
}

/* The slice's bytes within source range [b, e) of tensor i, a read per
 * piece of each row, straight to dst + *got. */
static int read_pieces(struct tpl__local_read *lr, size_t i,
                       const struct tpl__layout *l, uint64_t b, uint64_t e,
                       uint8_t *dst, uint64_t *got, struct tpl__error *err) {
  for (uint64_t r = b / l->row_stride; r * l->row_stride < e; r++)
    for (size_t k = 0; k < l->npieces; k++) {
      uint64_t pb = r * l->row_stride + l->pieces[k].offset;
      uint64_t pe = pb + l->pieces[k].length;
      int rc;
      if (pb < b) pb = b;
      if (pe > e) pe = e;
      if (pb >= pe) continue;
      rc = read_part(lr, i, dst + *got, pe - pb, pb, err);
      if (rc != 0) return rc;
      *got += pe - pb;
    }
  return 0;
}

/* The direct way of read_range: the range (its contiguous part when it
 * has one) is read into the window, placed as the source needs, and
 * copied or gathered from there. */
static int read_range_direct(struct tpl__local_read *lr, size_t i,
                             const struct tpl__layout *l, uint64_t b,
                             uint64_t e, uint8_t *dst, uint64_t *got,
                             struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  uint64_t start, n = tpl__layout_contiguous(l, b, e, &start);
  uint64_t from = n != UINT64_MAX ? start : b,
           len = n != UINT64_MAX ? n : e - b;
  uint8_t *at;
  double t0;
  int rc;
  if (len == 0) return 0;
  at = tpl__source_place(lr->src, t->file, lr->window, t->file_offset + from);
  rc = read_part(lr, i, at, len, from, err);
  if (rc != 0) return rc;
  t0 = tpl__now();
  if (n != UINT64_MAX)
    memcpy(dst + *got, at, (size_t)n);
  else
    n = tpl__layout_gather(l, b, e, at, dst + *got);
  *got += n;
  lr->t_pack += tpl__now() - t0;
  return 0;
}

/* --- from an HTTP source: only the slice's own byte ranges --- */

/* GETs of a strided slice kept in flight (the client runs as many as it
 * has connections, the rest queued): the oldest is finished when one more
 * is due, so the queue never drains inside a step. */
#define LOCAL_RUNS 64

uint64_t tpl__read_gap_default(const char *model) {
  if (tpl__s3_is_url(model) || tpl__hf_is_url(model))
    return TPL_READ_GAP_PRICED;
  return TPL_READ_GAP_HTTP;
}

/* Whether tensor i's file is fetched by ranged GETs. */
static int remote(const struct tpl__local_read *lr, size_t i) {
  return lr->src->used[lr->job->tensors[i].file] == TPL_IO_USED_HTTP;
}

/* The next piece of layout l within [b, e) from row *row, piece *k on:
 * its range in [*pb, *pe); 0 when there is none.  The cursor moves past
 * it. */
static int next_piece(const struct tpl__layout *l, uint64_t b, uint64_t e,
                      uint64_t *row, size_t *k, uint64_t *pb, uint64_t *pe) {
  for (; *row < l->rows && *row * l->row_stride < e; (*row)++, *k = 0)
    for (; *k < l->npieces; (*k)++) {
      uint64_t x = *row * l->row_stride + l->pieces[*k].offset;
      uint64_t y = x + l->pieces[*k].length;
      if (x < b) x = b;
      if (y > e) y = e;
      if (x >= y) continue;
      *pb = x;
      *pe = y;
      (*k)++;
      return 1;
    }
  return 0;
}

/* The GETs in flight: lr->runs as a ring, [head, head + count) mod
 * LOCAL_RUNS, oldest first (the client finishes them in that order).
 * The next one's runs are gathered in its slot's spans (lr->spans, at
 * most spans_of(lr) a slot) until it is started. */
struct ring {
  size_t head, count, nspans;
};

/* The runs one read may ask for: several where the source makes them a
 * multi-range GET (source.h's spans_max), else one. */
static size_t spans_of(const struct tpl__local_read *lr) {
  return lr->src->spans_max > 1 ? lr->src->spans_max : 1;
}

/* Finishes the oldest GET in flight; returns its result (err names the
 * tensor when err is not NULL). */
static int finish_oldest(struct tpl__local_read *lr, size_t i, struct ring *q,
                         struct tpl__error *err) {
  struct tpl__error e2;
  double t0 = tpl__now();
  int rc = tpl__source_finish(lr->src, &lr->runs[q->head], &e2);
  lr->t_read += tpl__now() - t0;
  q->head = (q->head + 1) % LOCAL_RUNS;
  q->count--;
  if (rc == 0) return 0;
  return tpl__fail(err, rc, "%s (tensor '%s')", e2.msg,
                   lr->job->tensors[i].name);
}

/* Finishes every GET in flight (their buffer and state are ours, failed
 * or not); returns the first failure. */
static int finish_all(struct tpl__local_read *lr, size_t i, struct ring *q,
                      struct tpl__error *err) {
  int first = 0;
  while (q->count > 0) {
    int rc = finish_oldest(lr, i, q, first == 0 ? err : NULL);
    if (first == 0) first = rc;
  }
  return first;
}

/* Starts read r of tensor i; err names the tensor. */
static int start_one(struct tpl__local_read *lr, size_t i, struct tpl__read *r,
                     struct tpl__error *err) {
  struct tpl__error e2;
  int rc = tpl__source_start(lr->src, r, &e2);
  if (rc == 0) return 0;
  return tpl__fail(err, rc, "%s (tensor '%s')", e2.msg,
                   lr->job->tensors[i].name);
}

/* Starts the read of the runs gathered (none: nothing) as the ring's
 * newest: one range, or several (a multi-range GET). */
static int start_read(struct tpl__local_read *lr, size_t i, struct ring *q,
                      struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  size_t slot = (q->head + q->count) % LOCAL_RUNS, n = q->nspans;
  const struct tpl__span *s = lr->spans + slot * spans_of(lr);
  struct tpl__read *r = &lr->runs[slot];
  int rc;
  if (n == 0) return 0;
  memset(r, 0, sizeof(*r));
  r->file = t->file;
  r->off = s[0].off;
  r->len = s[n - 1].off + s[n - 1].len - s[0].off;
  r->dst = s[0].dst;
  r->spans = n > 1 ? s : NULL;
  r->nspans = n > 1 ? n : 0;
  q->nspans = 0;
  rc = start_one(lr, i, r, err);
  q->count += rc == 0;
  return rc;
}

/* Adds source range [rb, re) of tensor i (tensor-relative), landing in
 * the window where range [b, ...) starts, to the ring's next read
 * (finishing the oldest first when the ring is full), which starts when
 * it holds as many runs as a read may. */
static int add_run(struct tpl__local_read *lr, size_t i, uint64_t b,
                   uint64_t rb, uint64_t re, struct ring *q,
                   struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  size_t slot, k = spans_of(lr);
  struct tpl__span *s;
  int rc = q->nspans == 0 && q->count == LOCAL_RUNS
               ? finish_oldest(lr, i, q, err)
               : 0;
  if (rc != 0) return rc;
  slot = (q->head + q->count) % LOCAL_RUNS;
  s = &lr->spans[slot * k + q->nspans++];
  s->off = t->file_offset + rb;
  s->len = re - rb;
  s->dst = lr->window + (rb - b);
  lr->bytes_read += re - rb;
  return q->nspans == k ? start_read(lr, i, q, err) : 0;
}

/* The slice's bytes within source range [b, e) of tensor i from an HTTP
 * source: a range per run of pieces (pieces at most lr->run_gap apart
 * joined: a gap that short costs less than another GET; run_gap_multi
 * while the file's runs go to multi-range GETs), a GET per range
 * or per spans_of(lr) of them (a multi-range GET),
 * LOCAL_RUNS of them kept in flight, each landing at its place in the
 * window; then gathered from there (see DESIGN.md on --read local). */
static int read_range_remote(struct tpl__local_read *lr, size_t i,
                             const struct tpl__layout *l, uint64_t b,
                             uint64_t e, uint8_t *dst, uint64_t *got,
                             struct tpl__error *err) {
  uint64_t row = b / l->row_stride, pb = 0, pe = 0, rb = 0, re = 0;
  uint64_t gap = tpl__source_spans(lr->src, lr->job->tensors[i].file) > 1
                     ? lr->run_gap_multi
                     : lr->run_gap;
  struct ring q = {0, 0, 0};
  size_t k = 0;
  int rc = 0, more, last;
  double t0;
  do {
    more = next_piece(l, b, e, &row, &k, &pb, &pe);
    if (more && re > rb && pb >= re && pb - re <= gap) {
      re = pe; /* joined to the run */
      continue;
    }
    if (re > rb) rc = add_run(lr, i, b, rb, re, &q, err);
    rb = pb;
    re = pe;
  } while (rc == 0 && more);
  if (rc == 0) rc = start_read(lr, i, &q, err);
  last = finish_all(lr, i, &q, rc != 0 ? NULL : err);
  if (rc == 0) rc = last;
  if (rc != 0) return rc;
  t0 = tpl__now();
  *got += tpl__layout_gather(l, b, e, lr->window, dst + *got);
  lr->t_pack += tpl__now() - t0;
  return 0;
}

/* The slice's bytes within source range [b, e) of tensor i, to dst: from
 * a file read direct through the window (read_range_direct); else read
 * straight there when they are one contiguous range or pieces of at least
 * lr->piece_min bytes, else the range is read into the window and
 * gathered (a read per short piece costs more than the bytes between).
 * *got grows by their count. */
static int read_range(struct tpl__local_read *lr, size_t i,
                      const struct tpl__layout *l, uint64_t b, uint64_t e,
                      uint8_t *dst, uint64_t *got, struct tpl__error *err) {
  uint64_t start, n;
  double t0;
  int rc;
  if (remote(lr, i) && tpl__layout_contiguous(l, b, e, &start) == UINT64_MAX)
    return read_range_remote(lr, i, l, b, e, dst, got, err);
  if (tpl__source_direct(lr->src, lr->job->tensors[i].file))
    return read_range_direct(lr, i, l, b, e, dst, got, err);
  n = tpl__layout_contiguous(l, b, e, &start);
  if (n != UINT64_MAX) {
    rc = n ? read_part(lr, i, dst + *got, n, start, err) : 0;
    *got += n;
    return rc;
  }
  if (shortest_piece(l) >= lr->piece_min)
    return read_pieces(lr, i, l, b, e, dst, got, err);
  rc = read_part(lr, i, lr->window, e - b, b, err);
  if (rc != 0) return rc;
  t0 = tpl__now();
  *got += tpl__layout_gather(l, b, e, lr->window, dst + *got);
  lr->t_pack += tpl__now() - t0;
  return 0;
}

/* n more bytes landed: the progress callback every window_len bytes and
 * at the end (every step, inside a long tensor too, is a heartbeat). */
static void landed(struct tpl__local_read *lr, uint64_t n) {
  lr->landed += n;
  if (lr->progress == NULL ||
      (lr->landed - lr->shown < lr->window_len && lr->landed != lr->total))
    return;
  lr->progress(lr->ctx, lr->landed, lr->total);
  lr->shown = lr->landed;
}

static void hash_step(struct tpl__local_read *lr, XXH3_state_t *h,
                      const uint8_t *p, uint64_t n) {
  double t0 = tpl__now();
  if (h != NULL) XXH3_64bits_update(h, p, (size_t)n);
  lr->t_hash += tpl__now() - t0;
}

/* Tells the source which bytes of tensor i this rank is about to read
 * (its contiguous range, or every row of a strided slice), so a buffered
 * file is read ahead by more than the kernel's default readahead (with
 * every rank reading a part of each tensor, that alone keeps the device
 * a request or two deep). */
#define HINT_MIN ((uint64_t)1 << 20) /* smaller: one syscall too many */

static void hint_slice(struct tpl__local_read *lr, size_t i,
                       const struct tpl__layout *l) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  uint64_t start, n = tpl__layout_contiguous(l, 0, t->stored_bytes, &start);
  if (n == UINT64_MAX) {
    start = 0;
    n = t->stored_bytes;
  }
  if (n >= HINT_MIN)
    tpl__source_hint(lr->src, t->file, t->file_offset + start, n);
}

/* Steps of a contiguous slice from a URL kept in flight. */
#define REMOTE_AHEAD 4

/* Tensor i's slice from an HTTP source when it is one range of it, n
 * bytes from `start` (tensor-relative): read a step at a time straight
 * into the store at dst, REMOTE_AHEAD steps in flight (the next ones
 * fetched while one is hashed, no step waiting for the one before), each
 * hashed into h (when not NULL) as it is finished, oldest first. */
static int read_remote_range(struct tpl__local_read *lr, size_t i,
                             uint64_t start, uint64_t n, uint8_t *dst,
                             XXH3_state_t *h, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  struct ring q = {0, 0, 0};
  uint64_t off = 0, done = 0;
  int rc = 0;
  while (rc == 0 && done < n) {
    struct tpl__read *r = &lr->runs[(q.head + q.count) % LOCAL_RUNS];
    uint64_t len;
    if (off < n && q.count < REMOTE_AHEAD) {
      memset(r, 0, sizeof(*r));
      r->file = t->file;
      r->off = t->file_offset + start + off;
      r->len = n - off < lr->direct_len ? n - off : lr->direct_len;
      r->dst = dst + off;
      rc = start_one(lr, i, r, err);
      q.count += rc == 0;
      off += r->len;
      lr->bytes_read += r->len;
      continue;
    }
    len = lr->runs[q.head].len;
    rc = finish_oldest(lr, i, &q, err);
    if (rc != 0) break;
    hash_step(lr, h, dst + done, len);
    landed(lr, len);
    done += len;
  }
  if (rc != 0) finish_all(lr, i, &q, NULL);
  return rc;
}

/* Tensor i's slice into the store a window at a time, each window hashed
 * into h right after it lands when h is not NULL. */
static int read_slice(struct tpl__local_read *lr, size_t i, XXH3_state_t *h,
                      struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  uint32_t shard = tpl__grid_coord(&lr->job->grid, lr->rank).t;
  uint8_t *dst = lr->store->base + t->store_offset;
  uint64_t step =
      tpl__source_direct(lr->src, t->file) ? lr->direct_len : lr->window_len;
  struct tpl__layout l;
  uint64_t got = 0, start, n;
  int rc = tpl__job_layout(lr->job, i, shard, &l);
  if (rc != 0)
    return tpl__fail(err, rc, "tensor '%s': layout for shard %u: %s", t->name,
                     shard, tpl_strerror(rc));
  rc = tpl__store_prepare(lr->store, t->store_offset + t->rank_bytes, err);
  if (rc == 0) hint_slice(lr, i, &l);
  if (rc == 0 && remote(lr, i) &&
      (n = tpl__layout_contiguous(&l, 0, t->stored_bytes, &start)) !=
          UINT64_MAX) {
    rc = read_remote_range(lr, i, start, n, dst, h, err);
    got = n; /* the loop below has nothing left */
  }
  for (uint64_t b = 0; rc == 0 && got < l.total && b < t->stored_bytes;
       b += step) {
    uint64_t e = t->stored_bytes - b < step ? t->stored_bytes : b + step;
    uint64_t before = got;
    rc = read_range(lr, i, &l, b, e, dst, &got, err);
    if (rc != 0) break;
    hash_step(lr, h, dst + before, got - before);
    landed(lr, got - before);
  }
  if (rc == 0 && got != t->rank_stored)
    rc = tpl__fail(err, TPL_EINTERNAL, "tensor '%s': read %llu of %llu bytes",
                   t->name, (unsigned long long)got,
                   (unsigned long long)t->rank_stored);
  return rc;
}

/* Reads tensor i and sets its checksum: hashed as it lands when its bytes
 * are final, else by `finish` after. */
static int read_tensor(struct tpl__local_read *lr, size_t i, XXH3_state_t *h,
                       struct tpl__error *err) {
  int final = tpl__job_bytes_final(lr->job, i), rc;
  if (!final) h = NULL;
  if (h != NULL) XXH3_64bits_reset(h);
  rc = read_slice(lr, i, h, err);
  if (rc != 0) return rc;
  if (!final) return lr->finish(lr->ctx, i, err);
  lr->store->xxh3[i] = XXH3_64bits_digest(h);
  return 0;
}

/* Whether this rank reads tensor i: it holds it, and no rank of its
 * node reads it for it. */
static int reads(const struct tpl__local_read *lr, size_t i) {
  return tpl__job_holds(lr->job, i, lr->rank) &&
         (lr->skip == NULL || !lr->skip(lr->ctx, i));
}

/* A tensor another rank reads for this one: its place in the store is
 * made ready now, while the reads wait on the source, not when it comes. */
static int prepare_skipped(struct tpl__local_read *lr, size_t i,
                           struct tpl__error *err) {
  const struct tpl__job_tensor *t = &lr->job->tensors[i];
  return tpl__store_populate(lr->store, t->store_offset,
                             t->store_offset + t->rank_bytes, err);
}

/* The source bytes this rank reads: what progress counts up to. */
static uint64_t held_bytes(const struct tpl__local_read *lr) {
  uint64_t n = 0;
  for (size_t i = 0; i < lr->job->ntensors; i++)
    if (reads(lr, i)) n += lr->job->tensors[i].rank_stored;
  return n;
}

int tpl__local_read_all(struct tpl__local_read *lr, struct tpl__error *err) {
  XXH3_state_t *h = XXH3_createState();
  int rc;
  lr->runs = calloc(LOCAL_RUNS, sizeof(*lr->runs));
  lr->spans = calloc(LOCAL_RUNS * spans_of(lr), sizeof(*lr->spans));
  rc = h != NULL && lr->runs != NULL && lr->spans != NULL ? 0 : tpl__oom(err);
  lr->total = held_bytes(lr);
  lr->landed = lr->shown = 0;
  for (size_t i = 0; rc == 0 && i < lr->job->ntensors; i++)
    if (reads(lr, i))
      rc = read_tensor(lr, i, h, err);
    else if (tpl__job_holds(lr->job, i, lr->rank))
      rc = prepare_skipped(lr, i, err);
  XXH3_freeState(h);
  free(lr->runs);
  free(lr->spans);
  lr->runs = NULL;
  lr->spans = NULL;
  for (uint32_t f = 0; rc == 0 && f < lr->job->nfiles; f++)
    rc = tpl__local_unchanged(lr->job, f, lr->files, err);
  return rc;
}
