/* origin_presharded.c - the origin of a presharded MODEL (origin.h,
 * reshard.h): a wrapper over the origin its directory lives in (local,
 * or HTTP for a MODEL URL).  Members, headers and the rank files are the
 * base's; the virtual file of full tensors is gathered from the rank
 * files (tpl__reshard_read), by the small reads of the model and by the
 * bulk source rank 0 streams from, whose reads of the rank files go to
 * a buffered source of the base's.  The job carries the virtual file
 * like any other, but a rank reading the files itself (--read local)
 * cannot gather: it is refused, 64. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "origin.h"
#include "reshard.h"

#define READ_LOCAL_REFUSED                                                     \
  "--read local cannot read a presharded MODEL: rank 0 rebuilds its full "     \
  "tensors from the rank files; leave --read local out"

static const struct tpl__origin *base_of(const struct tpl__model *m) {
  return tpl__reshard_base(tpl__reshard_of(m));
}

static int claims(const char *model) {
  return 0;
}

static int open_model(const char *path, const struct tpl__http_opts *http,
                      int presharded, struct tpl__model **out,
                      struct tpl__error *err) {
  return tpl__origin_for(path)->open(path, http, presharded, out, err);
}

static int probe(struct tpl__model *m, uint32_t first, const char *what,
                 struct tpl__error *err) {
  return base_of(m)->probe(m, first, what, err);
}

static char *shown(const struct tpl__model *m, const char *name) {
  return base_of(m)->shown(m, name);
}

static int st_member(struct tpl__model *m, const char *name, const char *what,
                     const char *ctx, struct tpl__error *err) {
  return base_of(m)->st_member(m, name, what, ctx, err);
}

static int get(const struct tpl__model *m, const char *name, size_t cap,
               char **buf, size_t *len, struct tpl__error *err) {
  return base_of(m)->get(m, name, cap, buf, len, err);
}

/* A rank file's bytes through the base origin's reads. */
static int base_read(void *ctx, uint32_t file, void *dst, uint64_t len,
                     uint64_t off, struct tpl__error *err) {
  const struct tpl__model *m = ctx;
  return base_of(m)->read(m, file, dst, len, off, err);
}

static int read_range(const struct tpl__model *m, uint32_t idx, void *dst,
                      uint64_t len, uint64_t off, struct tpl__error *err) {
  struct tpl__reshard *rs = tpl__reshard_of(m);
  if (idx < tpl__reshard_vfile(rs))
    return base_read((void *)m, idx, dst, len, off, err);
  return tpl__reshard_read(rs, m, base_read, (void *)m, dst, len, off, err);
}

/* The virtual file is unchanged when every rank file is. */
static int unchanged(const struct tpl__model *m, uint32_t idx,
                     struct tpl__error *err) {
  struct tpl__reshard *rs = tpl__reshard_of(m);
  uint32_t v = tpl__reshard_vfile(rs);
  int rc = 0;
  if (idx < v) return base_of(m)->unchanged(m, idx, err);
  for (uint32_t f = 0; rc == 0 && f < v; f++)
    rc = base_of(m)->unchanged(m, f, err);
  return rc;
}

static int member_open(const char *path, uint64_t size, int64_t mtime_ns,
                       int *fd, struct tpl__error *err) {
  return tpl__fail(err, TPL_EUSAGE, "%s: %s", path, READ_LOCAL_REFUSED);
}

static int member_unchanged(const char *path, uint64_t size, int64_t mtime_ns,
                            int fd, struct tpl__error *err) {
  return tpl__fail(err, TPL_EUSAGE, "%s: %s", path, READ_LOCAL_REFUSED);
}

/* --- the bulk source: gathers on a thread of its own --- */

/* A read's place in the queue, its outcome once gathered. */
struct queued {
  struct tpl__read *next;
  int hinted, done, rc;
  struct tpl__error err;
};

_Static_assert(sizeof(struct queued) <= TPL_READ_PRIV, "read priv");

/* The reads started, gathered in order by one thread (the chunks of a
 * tensor must come in order: reshard.c's runs) while the engine packs
 * and sends the ones before. */
struct gather_source {
  struct tpl__source s;
  struct tpl__source *inner; /* the rank files, buffered */
  const struct tpl__model *m;
  pthread_t thread;
  int running, stop;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct tpl__read *head, *tail;
};

static struct queued *queued_of(struct tpl__read *r) {
  return (struct queued *)(void *)r->priv;
}

static uint8_t *g_place(struct tpl__source *s, uint32_t file, uint8_t *buf,
                        uint64_t off) {
  return buf;
}

static int inner_read(void *ctx, uint32_t file, void *dst, uint64_t len,
                      uint64_t off, struct tpl__error *err) {
  return tpl__source_read(ctx, file, dst, len, off, err);
}

/* Read r's bytes: a rank file's as they are, the virtual file's
 * gathered. */
static int gather_one(struct gather_source *g, struct tpl__read *r,
                      struct tpl__error *err) {
  struct tpl__reshard *rs = tpl__reshard_of(g->m);
  if (r->file < tpl__reshard_vfile(rs))
    return tpl__source_read(g->inner, r->file, r->dst, r->len, r->off, err);
  return tpl__reshard_read(rs, g->m, inner_read, g->inner, r->dst, r->len,
                           r->off, err);
}

/* The next read queued, NULL once stopped. */
static struct tpl__read *next_read(struct gather_source *g) {
  struct tpl__read *r;
  pthread_mutex_lock(&g->lock);
  while (g->head == NULL && !g->stop)
    pthread_cond_wait(&g->cond, &g->lock);
  r = g->stop ? NULL : g->head;
  pthread_mutex_unlock(&g->lock);
  return r;
}

static void inner_hint(void *ctx, uint32_t file, uint64_t off, uint64_t len) {
  tpl__source_hint(ctx, file, off, len);
}

/* The rank files' bytes of r and of the reads queued behind it, not
 * told yet, asked of the kernel ahead (the engine starts a few chunks
 * before it finishes one): a cold rank file is read while the chunk
 * before is gathered. */
static void read_ahead(struct gather_source *g, struct tpl__read *r) {
  struct tpl__reshard *rs = tpl__reshard_of(g->m);
  pthread_mutex_lock(&g->lock); /* the engine appends to the queue */
  for (; r != NULL; r = queued_of(r)->next) {
    struct queued *q = queued_of(r);
    if (q->hinted) continue;
    q->hinted = 1;
    if (r->file < tpl__reshard_vfile(rs))
      tpl__source_hint(g->inner, r->file, r->off, r->len);
    else
      tpl__reshard_hint(rs, r->off, r->len, inner_hint, g->inner);
  }
  pthread_mutex_unlock(&g->lock);
}

static void *gather_thread(void *arg) {
  struct gather_source *g = arg;
  struct tpl__read *r;
  while ((r = next_read(g)) != NULL) {
    struct queued *q = queued_of(r);
    read_ahead(g, r);
    q->rc = gather_one(g, r, &q->err);
    pthread_mutex_lock(&g->lock);
    g->head = q->next;
    if (g->head == NULL) g->tail = NULL;
    q->done = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
  }
  return NULL;
}

static int g_start(struct tpl__source *s, struct tpl__read *r,
                   struct tpl__error *err) {
  struct gather_source *g = (struct gather_source *)s;
  struct queued *q = queued_of(r);
  q->next = NULL;
  q->hinted = 0;
  q->done = 0;
  pthread_mutex_lock(&g->lock);
  if (g->tail != NULL)
    queued_of(g->tail)->next = r;
  else
    g->head = r;
  g->tail = r;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
  return 0;
}

static int g_finish(struct tpl__source *s, struct tpl__read *r,
                    struct tpl__error *err) {
  struct gather_source *g = (struct gather_source *)s;
  struct queued *q = queued_of(r);
  pthread_mutex_lock(&g->lock);
  while (!q->done)
    pthread_cond_wait(&g->cond, &g->lock);
  pthread_mutex_unlock(&g->lock);
  if (q->rc != 0) *err = q->err;
  return q->rc;
}

/* The read in progress finished, the ones queued behind it dropped. */
static void g_close(struct tpl__source *s) {
  struct gather_source *g = (struct gather_source *)s;
  if (g->running) {
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
  }
  tpl__source_close(g->inner);
  free(s->used);
  free(s->align);
  free(g);
}

static void g_hint(struct tpl__source *s, uint32_t file, uint64_t off,
                   uint64_t len) {}

static const struct tpl__source_ops gather_ops = {
    .place = g_place,
    .start = g_start,
    .finish = g_finish,
    .close = g_close,
    .hint = g_hint,
};

static int thread_failed(int rc, struct tpl__error *err) {
  return tpl__fail(err, -rc, "cannot start the gather thread: %s",
                   strerror(rc));
}

static int start_thread(struct gather_source *g, struct tpl__error *err) {
  int rc = pthread_mutex_init(&g->lock, NULL);
  if (rc != 0) return thread_failed(rc, err);
  if ((rc = pthread_cond_init(&g->cond, NULL)) != 0) {
    pthread_mutex_destroy(&g->lock);
    return thread_failed(rc, err);
  }
  if ((rc = pthread_create(&g->thread, NULL, gather_thread, g)) != 0) {
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    return thread_failed(rc, err);
  }
  g->running = 1;
  return 0;
}

static int source(const struct tpl__origin_files *in, struct tpl__source **src,
                  struct tpl__error *err) {
  struct tpl__reshard *rs = tpl__reshard_of(in->model);
  struct tpl__origin_files rank_files = *in;
  struct gather_source *g;
  int rc;
  if (rs == NULL) return tpl__fail(err, TPL_EUSAGE, "%s", READ_LOCAL_REFUSED);
  g = calloc(1, sizeof(*g));
  if (g == NULL) return tpl__oom(err);
  g->s = (struct tpl__source){.ops = &gather_ops, .nfiles = in->n};
  g->s.used = calloc(in->n ? in->n : 1, 1); /* TPL_IO_USED_BUFFERED */
  g->s.align = calloc(in->n ? in->n : 1, sizeof(*g->s.align));
  g->m = in->model;
  rank_files.n = tpl__reshard_vfile(rs);
  rank_files.mode = TPL_IO_BUFFERED;
  rc = g->s.used && g->s.align ? 0 : tpl__oom(err);
  /* whole chunks asked for, so a tensor inside one is rebuilt in place */
  if (rc == 0) g->s.used[rank_files.n] = TPL_IO_USED_GATHERED;
  if (rc == 0) rc = tpl__reshard_base(rs)->source(&rank_files, &g->inner, err);
  if (rc == 0) rc = start_thread(g, err);
  if (rc != 0) {
    g_close(&g->s);
    return rc;
  }
  *src = &g->s;
  return 0;
}

#define PRESHARDED_ORIGIN(var, base_paths)                                     \
  static const struct tpl__origin var = {                                      \
      .name = "presharded",                                                    \
      .claims = claims,                                                        \
      .paths = base_paths,                                                     \
      .open = open_model,                                                      \
      .probe = probe,                                                          \
      .shown = shown,                                                          \
      .st_member = st_member,                                                  \
      .get = get,                                                              \
      .read = read_range,                                                      \
      .unchanged = unchanged,                                                  \
      .member_open = member_open,                                              \
      .member_unchanged = member_unchanged,                                    \
      .no_read_local = READ_LOCAL_REFUSED,                                     \
      .source = source,                                                        \
  }

PRESHARDED_ORIGIN(over_paths, 1);
PRESHARDED_ORIGIN(over_urls, 0);

const struct tpl__origin *
tpl__origin_presharded(const struct tpl__origin *base) {
  return base->paths ? &over_paths : &over_urls;
}
