/* mlc_md5.c - --verify-md5's pass over an MLC directory's files
 * (mlc_md5.h).  MD5 runs at 0.5-0.7 GB/s on a core, slower than warm or
 * direct reads, and a file's sum is sequential: so files are hashed
 * side by side.  Up to LANES files are open at once, each in a lane with
 * a hashing thread of its own (on rank 0's NUMA node: affinity.h) and
 * SLOTS buffers.  This thread, the only one that touches the source (and
 * calls progress, which may use MPI), keeps every free buffer of every
 * lane reading, finishes the reads in the order it started them and
 * hands each to its lane, which hashes its file's buffers in order and
 * compares the sum at the file's end.  When a lane has no thread it is
 * hashed here.  After a mismatch no new file is started, the open ones
 * end, and the lowest file that failed is told. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "affinity.h"
#include "format.h"
#include "md5sum.h"
#include "mlc_md5.h"
#include "origin.h"
#include "reshard.h"

#define LANES 4
#define SLOTS 2

size_t tpl__mlc_md5_nfiles(const struct tpl__model *m) {
  const struct tpl__reshard *rs = tpl__reshard_of(m);
  return rs != NULL ? tpl__reshard_vfile(rs) : m->nfiles;
}

int tpl__mlc_md5_ready(const struct tpl__model *m, const char *model,
                       struct tpl__error *err) {
  const struct tpl__format *fmt = tpl__format_of(m->format);
  if (fmt == NULL || !fmt->md5)
    return tpl__fail(err, TPL_EUSAGE,
                     "--verify-md5 checks the md5sum each file record of an "
                     "MLC weight directory's tensor-cache.json carries, and "
                     "'%s' is %s, which records none",
                     model, fmt != NULL ? fmt->what : "another format");
  for (size_t f = 0; f < tpl__mlc_md5_nfiles(m); f++)
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

enum slot_state { FREE, READING, FULL };

struct slot {
  struct tpl__read rd;
  uint8_t *buf; /* cap bytes */
  int state;    /* enum slot_state */
  uint64_t seq; /* READING: the order its read was started in */
};

struct pass;

struct lane {
  struct pass *p;
  pthread_t thread;
  int started;
  uint32_t file;    /* the file hashed here; UINT32_MAX: none */
  uint64_t off_in;  /* its next read's offset */
  uint64_t off_out; /* its bytes hashed */
  size_t next_in;   /* the slot its next read goes to */
  size_t next_out;  /* the slot hashed next */
  struct tpl__md5 md5;
  struct slot slots[SLOTS];
};

struct pass {
  struct tpl__mlc_md5 *v;
  pthread_mutex_t lock; /* guards the slots' states, lanes' files, below */
  pthread_cond_t work;  /* a slot is FULL, or quit */
  pthread_cond_t freed; /* a slot is FREE again, a lane is idle */
  int quit;
  size_t nlanes;
  struct lane lanes[LANES];
  uint8_t *mem;
  uint64_t cap;
  uint32_t next_file;           /* the next file to give a lane */
  uint64_t seq;                 /* reads started so far */
  uint64_t hashed, total, told; /* bytes hashed, in all, in progress */
  uint32_t failed; /* the lowest file whose sum differs; UINT32_MAX */
  struct tpl__error failed_err;
};

/* --- a lane's side: its file's buffers in order, the sum at its end --- */

/* The file's sum against its record (lock held). */
static void file_done(struct pass *p, struct lane *l) {
  const struct tpl__file *f = &p->v->m->files[l->file];
  uint8_t sum[16];
  char got[TPL_MD5_HEX];
  struct tpl__error e;
  tpl__md5_digest(&l->md5, sum); /* and starts over */
  tpl__md5_hex(sum, got);
  if (tpl__md5_check(f->path, "the cache",
                     f->md5_state == TPL_MD5_OK ? f->md5 : NULL, got,
                     TPL_EMISMATCH, &e) != 0 &&
      l->file < p->failed) {
    p->failed = l->file;
    p->failed_err = e;
  }
  l->file = UINT32_MAX;
  l->off_out = 0;
}

/* Hashes lane l's next buffer, which is FULL (called with the lock held,
 * released while hashing). */
static void hash_slot(struct pass *p, struct lane *l) {
  struct slot *s = &l->slots[l->next_out];
  pthread_mutex_unlock(&p->lock);
  tpl__md5_update(&l->md5, s->rd.dst, (size_t)s->rd.len);
  pthread_mutex_lock(&p->lock);
  s->state = FREE;
  l->next_out = (l->next_out + 1) % SLOTS;
  l->off_out += s->rd.len;
  p->hashed += s->rd.len;
  if (l->off_out == p->v->m->files[l->file].size) file_done(p, l);
  pthread_cond_signal(&p->freed);
}

static void *lane_main(void *arg) {
  struct lane *l = arg;
  struct pass *p = l->p;
  tpl__thread_widen_to_node();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->quit && l->slots[l->next_out].state != FULL)
      pthread_cond_wait(&p->work, &p->lock);
    if (l->slots[l->next_out].state != FULL) break; /* quit, nothing left */
    hash_slot(p, l);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* --- this thread's side: files to lanes, reads in flight --- */

/* Gives idle lanes the next files (an empty one is checked at once);
 * none after a mismatch.  Lock held. */
static void assign_files(struct pass *p) {
  const struct tpl__model *m = p->v->m;
  for (size_t h = 0; h < p->nlanes; h++) {
    struct lane *l = &p->lanes[h];
    while (l->file == UINT32_MAX && p->next_file < tpl__mlc_md5_nfiles(m) &&
           p->failed == UINT32_MAX) {
      l->file = p->next_file++;
      l->off_in = l->off_out = 0;
      if (m->files[l->file].size == 0) file_done(p, l);
    }
  }
}

/* Starts a read into every free buffer of a lane whose file has bytes
 * left to read.  Lock held (no lane touches a FREE slot). */
static int start_reads(struct pass *p, struct tpl__error *err) {
  for (size_t h = 0; h < p->nlanes; h++) {
    struct lane *l = &p->lanes[h];
    while (l->file != UINT32_MAX && l->off_in < p->v->m->files[l->file].size &&
           l->slots[l->next_in].state == FREE) {
      struct slot *s = &l->slots[l->next_in];
      uint64_t len = p->v->m->files[l->file].size - l->off_in;
      int rc;
      if (len > p->v->chunk) len = p->v->chunk;
      s->rd = (struct tpl__read){.file = l->file, .off = l->off_in, .len = len};
      s->rd.dst = tpl__source_place(p->v->src, l->file, s->buf, l->off_in);
      if (!tpl__source_direct(p->v->src, l->file))
        tpl__source_hint(p->v->src, l->file, l->off_in, len);
      rc = tpl__source_start(p->v->src, &s->rd, err);
      if (rc != 0) return rc;
      s->state = READING;
      s->seq = p->seq++;
      l->off_in += len;
      l->next_in = (l->next_in + 1) % SLOTS;
    }
  }
  return 0;
}

/* The read started first of those in flight, NULL when none is. */
static struct slot *oldest_read(struct pass *p, struct lane **lane) {
  struct slot *best = NULL;
  for (size_t h = 0; h < p->nlanes; h++)
    for (size_t k = 0; k < SLOTS; k++) {
      struct slot *s = &p->lanes[h].slots[k];
      if (s->state == READING && (best == NULL || s->seq < best->seq)) {
        best = s;
        *lane = &p->lanes[h];
      }
    }
  return best;
}

/* Whether every lane is idle with nothing in its buffers. */
static int all_idle(const struct pass *p) {
  for (size_t h = 0; h < p->nlanes; h++)
    if (p->lanes[h].file != UINT32_MAX) return 0;
  return 1;
}

/* Finishes the oldest read and hands it to its lane (hashing it here
 * when the lane has no thread); with no read in flight, waits for a
 * lane to free a buffer.  Lock held, released while waiting. */
static int advance(struct pass *p, struct tpl__error *err) {
  struct lane *l = NULL;
  struct slot *s = oldest_read(p, &l);
  int rc;
  if (s == NULL) {
    pthread_cond_wait(&p->freed, &p->lock);
    return 0;
  }
  pthread_mutex_unlock(&p->lock);
  rc = tpl__source_finish(p->v->src, &s->rd, err);
  pthread_mutex_lock(&p->lock);
  if (rc != 0) {
    s->state = FREE;
    return rc;
  }
  s->state = FULL;
  if (l->started)
    pthread_cond_broadcast(&p->work);
  else
    while (l->slots[l->next_out].state == FULL)
      hash_slot(p, l);
  return 0;
}

static void progress(struct pass *p) {
  uint64_t done = p->hashed;
  if (p->v->progress == NULL || done == p->told) return;
  p->told = done;
  pthread_mutex_unlock(&p->lock);
  p->v->progress(p->v->ctx, done, p->total);
  pthread_mutex_lock(&p->lock);
}

static int run(struct pass *p, struct tpl__error *err) {
  int rc = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    assign_files(p);
    if (all_idle(p)) break;
    rc = start_reads(p, err);
    if (rc == 0) rc = advance(p, err);
    if (rc != 0) break;
    progress(p);
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}

/* --- setting up and ending --- */

/* Lanes: one a file up to LANES, each thread of its own where one
 * starts; buffers of a read and the source's slack, aligned as its
 * direct reads need. */
static int lanes_open(struct pass *p, struct tpl__error *err) {
  uint64_t unit = tpl__source_slack(p->v->src) / 2;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n = tpl__mlc_md5_nfiles(p->v->m);
  void *mem = NULL;
  if (unit < 4096) unit = 4096;
  p->cap =
      (p->v->chunk + tpl__source_slack(p->v->src) + unit - 1) / unit * unit;
  p->nlanes = n < LANES ? n : LANES;
  if (cpus > 0 && (size_t)cpus < p->nlanes) p->nlanes = (size_t)cpus;
  if (p->nlanes == 0) p->nlanes = 1;
  if (posix_memalign(&mem, (size_t)unit,
                     (size_t)(p->cap * SLOTS * p->nlanes)) != 0)
    return tpl__fail(err, -ENOMEM, "cannot allocate the md5 pass's buffers");
  p->mem = mem;
  for (size_t h = 0; h < p->nlanes; h++) {
    struct lane *l = &p->lanes[h];
    l->p = p;
    l->file = UINT32_MAX;
    tpl__md5_init(&l->md5);
    for (size_t k = 0; k < SLOTS; k++)
      l->slots[k].buf = p->mem + (h * SLOTS + k) * p->cap;
    l->started = pthread_create(&l->thread, NULL, lane_main, l) == 0;
  }
  return 0;
}

/* After a failure the reads still out land before their buffers go;
 * then every lane's thread hashes what it holds and ends. */
static void lanes_close(struct pass *p) {
  struct tpl__error ignored;
  struct lane *l;
  struct slot *s;
  pthread_mutex_lock(&p->lock);
  while ((s = oldest_read(p, &l)) != NULL) {
    tpl__source_finish(p->v->src, &s->rd, &ignored);
    s->state = FREE;
  }
  p->quit = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (size_t h = 0; h < p->nlanes; h++)
    if (p->lanes[h].started) pthread_join(p->lanes[h].thread, NULL);
  free(p->mem);
}

int tpl__mlc_md5_verify(struct tpl__mlc_md5 *v, struct tpl__error *err) {
  struct pass p = {.v = v, .failed = UINT32_MAX};
  double t0 = tpl__now();
  int rc;
  for (size_t f = 0; f < tpl__mlc_md5_nfiles(v->m); f++)
    p.total += v->m->files[f].size;
  pthread_mutex_init(&p.lock, NULL);
  pthread_cond_init(&p.work, NULL);
  pthread_cond_init(&p.freed, NULL);
  rc = lanes_open(&p, err);
  if (rc == 0) rc = run(&p, err);
  if (p.mem != NULL) lanes_close(&p);
  pthread_mutex_destroy(&p.lock);
  pthread_cond_destroy(&p.work);
  pthread_cond_destroy(&p.freed);
  if (rc == 0 && p.failed != UINT32_MAX) {
    *err = p.failed_err;
    rc = p.failed_err.code;
  }
  v->bytes = p.hashed;
  v->seconds = tpl__now() - t0;
  return rc;
}

/* A source over m's files as its origin opens one: their URLs read by
 * m's client, or the files m holds; an MLC presharded cache's own files
 * by the origin under its re-shard's.  `urls` and paths must outlive
 * it. */
static int open_source(struct tpl__model *m, struct tpl__source_url *urls,
                       const char **paths, struct tpl__source **src,
                       struct tpl__error *err) {
  const struct tpl__reshard *rs = tpl__reshard_of(m);
  const struct tpl__origin *o =
      rs != NULL ? tpl__reshard_base(rs) : tpl__model_origin(m);
  for (size_t f = 0; f < m->nfiles; f++) {
    urls[f] = (struct tpl__source_url){m->files[f].url, m->files[f].path,
                                       &m->files[f].obj};
    paths[f] = m->files[f].path;
  }
  return o->source(&(struct tpl__origin_files){.n = tpl__mlc_md5_nfiles(m),
                                               .files = m->fds,
                                               .paths = paths,
                                               .mode = TPL_IO_AUTO,
                                               .urls = urls,
                                               .http = m->http},
                   src, err);
}

int tpl__mlc_md5_model(struct tpl__model *m, struct tpl__mlc_md5 *v,
                       struct tpl__error *err) {
  struct tpl__source_url *urls = calloc(m->nfiles + 1, sizeof(*urls));
  const char **paths = calloc(m->nfiles + 1, sizeof(*paths));
  int rc = urls && paths ? 0 : tpl__oom(err);
  v->m = m;
  v->src = NULL;
  if (rc == 0) rc = open_source(m, urls, paths, &v->src, err);
  if (rc == 0) rc = tpl__mlc_md5_verify(v, err);
  tpl__source_close(v->src);
  v->src = NULL;
  free(urls);
  free(paths);
  return rc;
}
