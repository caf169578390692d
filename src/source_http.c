/* source_http.c - a source (source.h) whose files are objects on an
 * HTTP(S) server.  start hands the read to the client (http.c) as ranged
 * GETs, which the client keeps in flight while the caller does other
 * work; finish drives the transfers until that read's bytes are all in
 * place.  Buffers need no alignment (no slack).  Progress: the client
 * calls back as bytes arrive, which is the engine's heartbeat. */
#include <errno.h>
#include <stdlib.h>

#include "source_http.h"

/* A read in flight: the caller's struct and the client's. */
struct open_read {
  struct tpl__read *r;
  struct tpl__http_read hr;
  struct open_read *next;
};

struct http_source {
  struct tpl__source base;
  struct tpl__http *http;
  int own;
  const struct tpl__source_url *files;
  struct open_read *open;
};

static uint8_t *place(struct tpl__source *s, uint32_t file, uint8_t *buf,
                      uint64_t off) {
  return buf;
}

static int start(struct tpl__source *s, struct tpl__read *r,
                 struct tpl__error *err) {
  struct http_source *hs = (struct http_source *)s;
  const struct tpl__source_url *f = &hs->files[r->file];
  struct open_read *o = calloc(1, sizeof(*o));
  int rc;
  if (o == NULL) return tpl__oom(err);
  o->r = r;
  o->hr = (struct tpl__http_read){.url = f->url,
                                  .shown = f->shown,
                                  .off = r->off,
                                  .len = r->len,
                                  .dst = r->dst,
                                  .obj = f->obj};
  rc = tpl__http_start(hs->http, &o->hr, 1, err);
  o->next = hs->open; /* even a failed start: its queued parts name it */
  hs->open = o;
  return rc;
}

/* Takes r's entry off the list; NULL when r was never started. */
static struct open_read *take(struct http_source *hs,
                              const struct tpl__read *r) {
  for (struct open_read **p = &hs->open; *p != NULL; p = &(*p)->next)
    if ((*p)->r == r) {
      struct open_read *o = *p;
      *p = o->next;
      return o;
    }
  return NULL;
}

static int finish(struct tpl__source *s, struct tpl__read *r,
                  struct tpl__error *err) {
  struct http_source *hs = (struct http_source *)s;
  struct open_read *o = take(hs, r);
  int rc;
  if (o == NULL) {
    rc = start(s, r, err); /* finish alone: the whole read, now */
    o = take(hs, r);
    if (rc != 0 || o == NULL) {
      free(o);
      return rc != 0 ? rc : tpl__oom(err);
    }
  }
  rc = tpl__http_wait(hs->http, &o->hr, err);
  free(o);
  return rc;
}

static void on_bytes(void *ctx) {
  struct tpl__source *s = ctx;
  if (s->progress != NULL) s->progress(s->progress_ctx);
}

/* The transfers still in flight land in the caller's buffers: wait them
 * out before the buffers go. */
static void close_source(struct tpl__source *s) {
  struct http_source *hs = (struct http_source *)s;
  while (hs->open != NULL) {
    struct open_read *o = hs->open;
    hs->open = o->next;
    tpl__http_wait(hs->http, &o->hr, NULL);
    free(o);
  }
  if (hs->own)
    tpl__http_close(hs->http);
  else /* a borrowed client outlives the source: forget its callback */
    tpl__http_on_progress(hs->http, NULL, NULL);
  free(s->used);
  free(s->align);
  free(hs);
}

/* Reads are started when they are wanted: nothing to announce. */
static void hint(struct tpl__source *s, uint32_t file, uint64_t off,
                 uint64_t len) {}

static const struct tpl__source_ops http_ops = {place, start, finish,
                                                close_source, hint};

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
  hs->base.nfiles = n;
  for (size_t f = 0; f < n; f++)
    hs->base.used[f] = TPL_IO_USED_HTTP;
  hs->http = http;
  hs->own = own;
  hs->files = files;
  tpl__http_on_progress(http, on_bytes, &hs->base);
  *s = &hs->base;
  return 0;
}
