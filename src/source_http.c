/* source_http.c - a source (source.h) whose files are objects on an
 * HTTP(S) server.  start hands the read to the client (http.c) as ranged
 * GETs, which the client keeps in flight while the caller does other
 * work; finish drives the transfers until that read's bytes are all in
 * place.  Buffers need no alignment (no slack).  Progress: the client
 * calls back as bytes arrive, which is the engine's heartbeat.  While
 * finish waits it calls the caller's idle hook, and pump moves the
 * transfers along while the caller waits on its own (source.h). */
#include <errno.h>
#include <stdlib.h>

#include "source_http.h"

/* A read's private state here (its priv, source.h): the client's read,
 * and its place in the list of reads in flight, which close waits out
 * (finish unlinks it at once: no search). */
struct http_read {
  int started;
  struct tpl__http_read hr;
  struct http_read *prev, *next;
};

_Static_assert(sizeof(struct http_read) <= TPL_READ_PRIV,
               "an HTTP read's state fits a read's priv");

struct http_source {
  struct tpl__source base;
  struct tpl__http *http;
  int own;
  const struct tpl__source_url *files;
  struct http_read *open;
  uint64_t gets0; /* the client's count at open (rank 0's validated) */
};

static struct http_read *hrd(struct tpl__read *r) {
  return (struct http_read *)r->priv;
}

static uint8_t *place(struct tpl__source *s, uint32_t file, uint8_t *buf,
                      uint64_t off) {
  return buf;
}

static void link_open(struct http_source *hs, struct http_read *o) {
  o->prev = NULL;
  o->next = hs->open;
  if (hs->open != NULL) hs->open->prev = o;
  hs->open = o;
}

static void unlink_open(struct http_source *hs, struct http_read *o) {
  if (o->prev != NULL)
    o->prev->next = o->next;
  else
    hs->open = o->next;
  if (o->next != NULL) o->next->prev = o->prev;
  o->started = 0;
}

static int start(struct tpl__source *s, struct tpl__read *r,
                 struct tpl__error *err) {
  struct http_source *hs = (struct http_source *)s;
  const struct tpl__source_url *f = &hs->files[r->file];
  struct http_read *o = hrd(r);
  o->hr = (struct tpl__http_read){.url = f->url,
                                  .shown = f->shown,
                                  .off = r->off,
                                  .len = r->len,
                                  .dst = r->dst,
                                  .obj = f->obj,
                                  .spans = r->spans,
                                  .nspans = r->nspans};
  int rc = tpl__http_start(hs->http, &o->hr, 1, err);
  /* a failed start's queued parts name it: wait them out now, as the
   * caller may drop a read it could not start */
  if (rc != 0) {
    tpl__http_wait(hs->http, &o->hr, NULL);
    return rc;
  }
  o->started = 1;
  link_open(hs, o);
  return 0;
}

static int finish(struct tpl__source *s, struct tpl__read *r,
                  struct tpl__error *err) {
  struct http_source *hs = (struct http_source *)s;
  struct http_read *o = hrd(r);
  int rc;
  if (!o->started) {
    rc = start(s, r, err); /* finish alone: the whole read, now */
    if (rc != 0) return rc;
  }
  rc = tpl__http_wait(hs->http, &o->hr, err);
  unlink_open(hs, o);
  s->gets = tpl__http_gets(hs->http) - hs->gets0;
  return rc;
}

static void on_bytes(void *ctx) {
  struct tpl__source *s = ctx;
  if (s->progress != NULL) s->progress(s->progress_ctx);
}

static void on_idle(void *ctx) {
  struct tpl__source *s = ctx;
  if (s->idle != NULL) s->idle(s->idle_ctx);
}

static int pump(struct tpl__source *s) {
  return tpl__http_pump(((struct http_source *)s)->http);
}

static void yield(struct tpl__source *s, int waited) {
  tpl__http_yield(((struct http_source *)s)->http, waited);
}

/* The transfers still in flight land in the caller's buffers: wait them
 * out before the buffers go. */
static void close_source(struct tpl__source *s) {
  struct http_source *hs = (struct http_source *)s;
  while (hs->open != NULL) {
    struct http_read *o = hs->open;
    tpl__http_wait(hs->http, &o->hr, NULL);
    unlink_open(hs, o);
  }
  if (hs->own)
    tpl__http_close(hs->http);
  else { /* a borrowed client outlives the source: forget its callbacks */
    tpl__http_on_progress(hs->http, NULL, NULL);
    tpl__http_on_idle(hs->http, NULL, NULL);
  }
  free(s->used);
  free(s->align);
  free(hs);
}

/* A file's runs go to multi-range GETs until its server refused one. */
static size_t spans(struct tpl__source *s, uint32_t file) {
  const struct tpl__http_obj *o = ((struct http_source *)s)->files[file].obj;
  return o != NULL && o->multi == TPL_HTTP_MULTI_REFUSED ? 1 : s->spans_max;
}

/* Reads are started when they are wanted: nothing to announce. */
static void hint(struct tpl__source *s, uint32_t file, uint64_t off,
                 uint64_t len) {}

static const struct tpl__source_ops http_ops = {
    place, start, finish, close_source, hint, pump, spans, yield};

void tpl__source_http_multi(struct tpl__source *s, int on) {
  s->spans_max = on ? TPL_HTTP_SPANS_MAX : 0;
}

int tpl__source_http_open(struct tpl__source **s, struct tpl__http *http,
                          int own, const struct tpl__source_url *files,
                          size_t n, struct tpl__error *err) {
  struct http_source *hs = calloc(1, sizeof(*hs));
  if (hs != NULL) {
    hs->base.used = malloc(n + 1);
    hs->base.align = calloc(n + 1, sizeof(*hs->base.align));
  }
  if (hs == NULL || hs->base.used == NULL || hs->base.align == NULL) {
    if (hs != NULL) {
      free(hs->base.used);
      free(hs->base.align);
    }
    free(hs);
    if (own) tpl__http_close(http);
    return tpl__oom(err);
  }
  hs->base.ops = &http_ops;
  hs->base.read_size = sizeof(struct http_read);
  hs->base.nfiles = n;
  for (size_t f = 0; f < n; f++)
    hs->base.used[f] = TPL_IO_USED_HTTP;
  hs->http = http;
  hs->own = own;
  hs->files = files;
  hs->gets0 = tpl__http_gets(http);
  tpl__http_on_progress(http, on_bytes, &hs->base);
  tpl__http_on_idle(http, on_idle, &hs->base);
  *s = &hs->base;
  return 0;
}
