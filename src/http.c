/* http.c - the HTTP(S) fetcher: libcurl's multi interface driving a few
 * transfers at once over reused connections.  A read is split into parts
 * of PART_BYTES, each one ranged GET; at most `connections` parts are in
 * flight, the rest wait in FIFO order, so the reads started first finish
 * first.  Every answer is checked before its body is taken: the status
 * (206 for a range; 200 to a Range is a server that ignores ranges),
 * Content-Range (exactly the bytes asked, of an object of the size first
 * seen) and the validators (ETag, else Last-Modified), so an object
 * replaced mid-load is noticed.  Transient failures (connect, reset, a
 * stalled or cut transfer, 5xx, 429) are retried with a doubling backoff,
 * resuming a part from the bytes it already holds; the rest fail at once
 * with one message naming the URL.  The bearer token goes to libcurl
 * only (which does not send it on to another host after a redirect),
 * never into a message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "curl_dl.h"
#include "fileio.h"
#include "http.h"
#include "http_fields.h"

#define PART_BYTES (4u << 20)
#define LOW_SPEED_BYTES 1024 /* a transfer slower than this stalls */
#define BACKOFF_FIRST 0.2    /* seconds before the first retry, doubling */
#define BACKOFF_MAX 5.0
#define MAX_REDIRECTS 5
#define RECV_BUFFER (256L << 10) /* libcurl's per transfer (default 16 KiB) */
#define DISCARD_MAX (64u << 10)  /* error bodies read to keep the connection */
#define ERROR_BODY 1024          /* of an error body kept for the signer */
#define SPARE_EASY 64   /* ended transfers' handles kept for the next ones */
#define IDLE_MS 1       /* a wait with an idle callback polls this long */
#define PUMP_GAP 100e-6 /* seconds between two turns of tpl__http_pump */
#define PROBE_POLL 1e-3 /* seconds between looks at an object's probe */
#define YIELD_MIN 2     /* parts in flight tpl__http_yield keeps at least */
#define YIELD_CALM 8    /* reads not held up before one more part */

/* What a part fills: a range of a read, or a whole object's buffer. */
struct whole {
  char *buf;
  size_t len, alloc, cap;
  unsigned pending;
  int rc;
  struct tpl__error err;
};

struct part {
  struct tpl__http *h;
  struct tpl__http_read *r; /* a range of this read, or ... */
  struct whole *w;          /* ... the whole object */
  const char *url, *shown;
  uint64_t off, len; /* of the object (ranges) */
  uint8_t *dst;      /* where byte off lands (ranges) */
  /* a multi-range GET of these spans of p->r (off and len frame them, len
   * their sum), its Range value and its answer's parse; NULL: none */
  const struct tpl__span *spans;
  size_t nspans;
  char *mrange;
  struct tpl__mp *mp;
  int refused;     /* its answer was not multipart: one range a GET instead */
  int probe;       /* the first multi-range GET of its object */
  char ctype[128]; /* Content-Type */
  uint64_t got;    /* bytes landed (kept across retries) */
  uint64_t discarded; /* of an error answer's body */
  unsigned attempt;
  double start_at; /* a retry waits until then */
  CURL *easy;
  struct curl_slist *headers; /* the signer's */
  char range[48];
  char errbuf[CURL_ERROR_SIZE];
  /* the answer being read (reset by every status line: redirects) */
  int status, has_range;
  int in_header; /* between a status line and the blank line ending it */
  struct tpl__http_range_field cr;
  char etag[256], modified[128];
  char body[ERROR_BODY]; /* the start of an error answer's body */
  size_t body_len;
  char encoding[64]; /* Content-Encoding, "" when none */
  int verdict;       /* 0, or the failure the headers showed */
  int transient;     /* ... which a retry may cure */
  struct tpl__error why;
  struct part *next; /* in the queue, while not in flight */
};

struct tpl__http {
  CURLM *multi;
  char *token;
  struct tpl__http_opts o;
  struct part *queue, *queue_tail; /* not in flight: new or retrying */
  unsigned active;
  unsigned allowed;  /* parts in flight at most (tpl__http_yield) */
  unsigned calm;     /* reads not held up since the last change */
  uint64_t received; /* body bytes so far: what progress reports */
  void (*progress)(void *ctx);
  void *progress_ctx;
  void (*idle)(void *ctx); /* between the turns of a wait */
  void *idle_ctx;
  double pumped;                  /* when tpl__http_pump last turned */
  struct tpl__http_signer signer; /* sign NULL: none */
  /* Easy handles of ended transfers, reset and reused by the next ones
   * (a new handle per GET costs its allocations, receive buffer
   * included; the connections live in the multi's cache either way). */
  CURL *spare[SPARE_EASY];
  unsigned nspare;
  uint64_t gets; /* requests started, retries included */
};

/* --- the client --- */

/* The token from its file or the environment: one line, no control
 * bytes (a newline would end the header it travels in). */
static int check_token(const char *t, const char *from,
                       struct tpl__error *err) {
  if (*t == '\0')
    return tpl__fail(err, TPL_EUSAGE,
                     "%s: expected a bearer token, found "
                     "an empty one",
                     from);
  for (const char *p = t; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
      return tpl__fail(err, TPL_EUSAGE,
                       "%s: expected a bearer token on one line, found a "
                       "control byte in it",
                       from);
  return 0;
}

static int read_token(const struct tpl__http_opts *o, char **out,
                      struct tpl__error *err) {
  const char *env = getenv(TPL_HTTP_TOKEN_ENV);
  char *t = NULL;
  size_t len = 0;
  int rc;
  *out = NULL;
  if (o->token_file == NULL && (env == NULL || *env == '\0')) return 0;
  if (o->token_file != NULL) {
    rc = tpl__read_file(o->token_file, 64u << 10, &t, &len, err);
    if (rc != 0)
      return tpl__fail(err, rc == -ENOENT ? TPL_EUSAGE : rc,
                       "--token-file %s: cannot read: %s", o->token_file,
                       tpl_strerror(rc));
    while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == '\r' ||
                       t[len - 1] == ' ' || t[len - 1] == '\t'))
      t[--len] = '\0';
  } else if ((t = strdup(env)) == NULL) {
    return tpl__oom(err);
  }
  rc = check_token(t, o->token_file ? o->token_file : TPL_HTTP_TOKEN_ENV, err);
  if (rc != 0) {
    free(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tpl__http_open(const struct tpl__http_opts *o, struct tpl__http **out,
                   struct tpl__error *err) {
  struct tpl__http *h;
  int rc;
  if (o->ca_cert != NULL && !tpl__exists(o->ca_cert))
    return tpl__fail(err, TPL_EUSAGE, "--ca-cert %s: no such file", o->ca_cert);
  if ((rc = tpl__curl_load(err)) != 0) return rc;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return tpl__fail(err, TPL_EINTERNAL, "libcurl: cannot initialize");
  h = calloc(1, sizeof(*h));
  if (h == NULL) return tpl__oom(err);
  h->o = *o;
  if (h->o.connections == 0) h->o.connections = 1;
  h->allowed = h->o.connections;
  rc = read_token(o, &h->token, err);
  if (rc == 0 && (h->multi = curl_multi_init()) == NULL)
    rc = tpl__fail(err, -ENOMEM, "libcurl: out of memory");
  if (rc != 0) {
    free(h);
    return rc;
  }
  curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                    (long)h->o.connections);
  curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                    (long)h->o.connections);
  curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  *out = h;
  return 0;
}

/* An easy handle for the next transfer: a spare one, reset, or a new
 * one; NULL on ENOMEM. */
static CURL *easy_take(struct tpl__http *h) {
  if (h->nspare == 0) return curl_easy_init();
  CURL *e = h->spare[--h->nspare];
  curl_easy_reset(e);
  return e;
}

/* Keeps easy handle e (out of the multi) for the next transfer, or
 * cleans it up when enough are kept. */
static void easy_give(struct tpl__http *h, CURL *e) {
  if (e == NULL) return;
  if (h->nspare < SPARE_EASY)
    h->spare[h->nspare++] = e;
  else
    curl_easy_cleanup(e);
}

static void part_end_transfer(struct part *p) {
  if (p->easy == NULL) return;
  curl_multi_remove_handle(p->h->multi, p->easy);
  easy_give(p->h, p->easy);
  p->easy = NULL;
  curl_slist_free_all(p->headers);
  p->headers = NULL;
  p->h->active--;
}

void tpl__http_close(struct tpl__http *h) {
  if (h == NULL) return;
  while (h->nspare > 0)
    curl_easy_cleanup(h->spare[--h->nspare]);
  curl_multi_cleanup(h->multi);
  if (h->signer.free != NULL) h->signer.free(h->signer.ctx);
  if (h->token != NULL) {
    memset(h->token, 0, strlen(h->token));
    free(h->token);
  }
  free(h);
}

void tpl__http_set_signer(struct tpl__http *h,
                          const struct tpl__http_signer *s) {
  if (h->signer.free != NULL) h->signer.free(h->signer.ctx);
  h->signer = *s;
}

uint64_t tpl__http_gets(const struct tpl__http *h) {
  return h->gets;
}

void tpl__http_on_progress(struct tpl__http *h, void (*fn)(void *ctx),
                           void *ctx) {
  h->progress = fn;
  h->progress_ctx = ctx;
}

void tpl__http_yield(struct tpl__http *h, int waited) {
  unsigned n = h->allowed;
  h->calm = waited ? 0 : h->calm + 1;
  if (waited) n /= 2;
  if (h->calm == YIELD_CALM) {
    n++;
    h->calm = 0;
  }
  if (n < YIELD_MIN) n = YIELD_MIN;
  h->allowed = n < h->o.connections ? n : h->o.connections;
}

void tpl__http_on_idle(struct tpl__http *h, void (*fn)(void *ctx), void *ctx) {
  h->idle = fn;
  h->idle_ctx = ctx;
}

/* --- reading an answer --- */

static void copy_value(char *dst, size_t cap, const char *v, size_t len) {
  if (len >= cap) len = cap - 1;
  memcpy(dst, v, len);
  dst[len] = '\0';
}

static void answer_reset(struct part *p, int status) {
  p->status = status;
  p->has_range = 0;
  p->in_header = 1;
  p->etag[0] = p->modified[0] = p->encoding[0] = p->ctype[0] = '\0';
}

/* Records the verdict on the answer; returns 0 (the transfer stops,
 * unless the caller returns 1 to read a short error body off the
 * connection so that it can be reused). */
static int verdict(struct part *p, int rc, int transient, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int verdict(struct part *p, int rc, int transient, const char *fmt,
                   ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->why.msg, sizeof(p->why.msg), fmt, ap);
  va_end(ap);
  p->why.code = p->verdict = rc;
  p->transient = transient;
  return 0;
}

/* The failures of a status shared by every kind of request: access,
 * absence, server trouble. */
static int status_failure(struct part *p) {
  int s = p->status;
  if (s == 401 || s == 403)
    return verdict(p, TPL_EDENIED, 0, "%s: HTTP %d: access denied; %s",
                   p->shown, s,
                   p->h->token ? "the server refused the bearer token"
                               : "it needs a bearer token (TPLOAD_HTTP_TOKEN "
                                 "or --token-file) or a presigned URL");
  if (s == 404 || s == 410)
    return verdict(p, -ENOENT, 0, "%s: HTTP %d: not found", p->shown, s);
  if (s >= 500 || s == 429 || s == 408)
    return verdict(p, TPL_EREMOTE, 1, "%s: HTTP %d from the server", p->shown,
                   s);
  return verdict(p, TPL_EREMOTE, 0, "%s: expected HTTP %d, found HTTP %d",
                 p->shown, p->r ? 206 : 200, s);
}

static int same_object(struct part *p, const struct tpl__http_obj *o,
                       uint64_t total) {
  const char *what = NULL;
  if (total != o->size)
    what = "its size changed";
  else if (o->etag[0] && p->etag[0] && strcmp(o->etag, p->etag) != 0)
    what = "its ETag changed";
  else if (!o->etag[0] && o->modified[0] && p->modified[0] &&
           strcmp(o->modified, p->modified) != 0)
    what = "its Last-Modified changed";
  if (what == NULL) return 1;
  verdict(p, -EIO, 0,
          "%s: changed while loading (%s: validated as %llu bytes with "
          "ETag %s, now %llu bytes with ETag %s); expected the object "
          "validated at start",
          p->shown, what, (unsigned long long)o->size,
          o->etag[0] ? o->etag : "none", (unsigned long long)total,
          p->etag[0] ? p->etag : "none");
  return 0;
}

static void record_object(struct part *p, struct tpl__http_obj *o,
                          uint64_t total) {
  o->known = 1;
  o->size = total;
  snprintf(o->etag, sizeof(o->etag), "%s", p->etag);
  snprintf(o->modified, sizeof(o->modified), "%s", p->modified);
}

/* A probe of an empty object: 416 with "bytes * /0". */
static int empty_object(struct part *p) {
  struct tpl__http_obj *o = p->r->obj;
  if (p->has_range != 1 || p->cr.has_range || !p->cr.has_total) return 0;
  if (!o->known && p->cr.total == 0 && p->off == 0) {
    record_object(p, o, 0);
    p->len = 0;
    return 1;
  }
  return 0;
}

/* The checks of a ranged answer before its body: 206 with exactly the
 * bytes asked of the same object. */
static int check_range_answer(struct part *p) {
  struct tpl__http_obj *o = p->r->obj;
  uint64_t first = p->off + p->got, last = p->off + p->len - 1;
  if (p->status == 200)
    return verdict(p, TPL_EPROTO, 0,
                   "%s: the server answered a Range request with the whole "
                   "object (HTTP 200): it does not serve byte ranges, which "
                   "tpload needs",
                   p->shown);
  if (p->status == 416 && empty_object(p)) return 1;
  if (p->status == 416 && o->known && p->has_range == 1 && p->cr.has_total &&
      !same_object(p, o, p->cr.total))
    return 0;
  if (p->status != 206) {
    status_failure(p);
    return 1; /* its error body is read off (on_body) */
  }
  if (p->has_range != 1 || !p->cr.has_range || !p->cr.has_total)
    return verdict(p, TPL_EPROTO, 0,
                   "%s: expected a Content-Range of bytes %llu-%llu with the "
                   "object's size in the 206 answer, found %s",
                   p->shown, (unsigned long long)first,
                   (unsigned long long)last,
                   p->has_range == 0   ? "none"
                   : p->has_range == 1 ? "one without them"
                                       : "a malformed one");
  if (o->known && !same_object(p, o, p->cr.total)) return 0;
  if (!o->known) { /* a probe: the object may be shorter than asked */
    record_object(p, o, p->cr.total);
    if (p->cr.total <= last) last = p->cr.total - 1;
    if (p->cr.total > first) p->len = last + 1 - p->off;
  }
  if (p->cr.first != first || p->cr.last != last)
    return verdict(p, TPL_EPROTO, 0,
                   "%s: asked for bytes %llu-%llu, the server sent %llu-%llu",
                   p->shown, (unsigned long long)first,
                   (unsigned long long)last, (unsigned long long)p->cr.first,
                   (unsigned long long)p->cr.last);
  return 1;
}

/* --- multi-range GETs (http_multipart.h) --- */

/* The answer to a multi-range GET is another (the whole object, 416, one
 * range alone): it is not read; its spans are fetched one range a GET,
 * and so is every later read of the object. */
static int refuse_multi(struct part *p, const char *what) {
  p->refused = 1;
  p->r->obj->multi = TPL_HTTP_MULTI_REFUSED;
  verdict(p, TPL_EPROTO, 0, "%s: a multi-range GET was answered with %s",
          p->shown, what);
  return p->status == 416; /* its short error body is read off */
}

static int multi_place(void *ctx, size_t k, uint64_t at, const uint8_t *d,
                       size_t n) {
  struct part *p = ctx;
  memcpy(p->spans[k].dst + at, d, n);
  p->got += n;
  return 0;
}

/* The checks of a multi-range answer before its body: 206, multipart with
 * a boundary (or one part covering every span), the same object. */
static int check_multi_answer(struct part *p) {
  struct tpl__http_obj *o = p->r->obj;
  char b[TPL_MP_BOUNDARY_MAX + 1];
  if (p->status == 200) return refuse_multi(p, "the whole object (HTTP 200)");
  if (p->status == 416) return refuse_multi(p, "HTTP 416");
  if (p->status != 206) {
    status_failure(p);
    return 1;
  }
  if (p->has_range == 1 && p->cr.has_total && !same_object(p, o, p->cr.total))
    return 0;
  if (p->has_range == 0 && !same_object(p, o, o->size)) return 0;
  tpl__mp_init(p->mp, p->shown, p->spans, p->nspans, o->size, "", multi_place,
               p);
  if (p->has_range == 1 && p->cr.has_range && p->cr.has_total) {
    if (tpl__mp_single(p->mp, p->cr.first, p->cr.last, p->cr.total, NULL))
      return refuse_multi(p, "one range alone");
    o->multi = TPL_HTTP_MULTI_TAKEN; /* coalesced: the ranges are served */
    return 1;
  }
  if (tpl__mp_boundary(p->ctype, strlen(p->ctype), b) != 0)
    return verdict(p, TPL_EPROTO, 0,
                   "%s: expected a 206 answer of Content-Type "
                   "multipart/byteranges with a boundary, found \"%s\"",
                   p->shown, p->ctype);
  tpl__mp_init(p->mp, p->shown, p->spans, p->nspans, o->size, b, multi_place,
               p);
  o->multi = TPL_HTTP_MULTI_TAKEN;
  return 1;
}

/* Bytes of a multipart answer, to the parser. */
static size_t take_multi(struct part *p, const char *data, size_t len) {
  struct tpl__error e;
  int rc = tpl__mp_feed(p->mp, (const uint8_t *)data, len, &e);
  if (rc == 0) return len;
  verdict(p, rc, 0, "%s", e.msg);
  return 0;
}

/* A body encoded (gzip, br ...) though no request asks for one (no
 * Accept-Encoding): its bytes are not the object's, a server fault. */
static int refuse_encoding(struct part *p) {
  return verdict(p, TPL_EPROTO, 0,
                 "%s: the server sent the body with Content-Encoding: %s, "
                 "which tpload never asks for (it reads the bytes as stored): "
                 "a server fault",
                 p->shown, p->encoding);
}

/* At the end of an answer's headers: whether to take its body. */
static int headers_done(struct part *p) {
  p->in_header = 0;
  if (p->status < 200 ||
      (p->status >= 300 && p->status < 400 && p->status != 304))
    return 1; /* an interim answer or a redirect libcurl follows */
  if ((p->status == 200 || p->status == 206) && p->encoding[0] != '\0' &&
      strcasecmp(p->encoding, "identity") != 0)
    return refuse_encoding(p);
  if (p->mp != NULL) return check_multi_answer(p);
  if (p->r != NULL) return check_range_answer(p);
  if (p->status != 200) status_failure(p);
  return 1; /* a failed answer's body is read off (on_body) */
}

static size_t on_header(char *line, size_t size, size_t n, void *ctx) {
  struct part *p = ctx;
  size_t len = size * n, nl, vl;
  const char *name, *value;
  int status;
  if (tpl__http_status_line(line, len, &status) == 0) {
    answer_reset(p, status);
  } else if (tpl__http_header_split(line, len, &name, &nl, &value, &vl) == 0) {
    if (tpl__http_header_is(name, nl, "content-range"))
      p->has_range = tpl__http_content_range(value, vl, &p->cr) == 0 ? 1 : -1;
    else if (tpl__http_header_is(name, nl, "etag"))
      copy_value(p->etag, sizeof(p->etag), value, vl);
    else if (tpl__http_header_is(name, nl, "last-modified"))
      copy_value(p->modified, sizeof(p->modified), value, vl);
    else if (tpl__http_header_is(name, nl, "content-encoding"))
      copy_value(p->encoding, sizeof(p->encoding), value, vl);
    else if (tpl__http_header_is(name, nl, "content-type"))
      copy_value(p->ctype, sizeof(p->ctype), value, vl);
  } else if (len <= 2 && p->verdict == 0 && !headers_done(p)) {
    return 0; /* the verdict stops the transfer */
  }
  return len;
}

static size_t take_whole(struct part *p, const char *data, size_t len) {
  struct whole *w = p->w;
  if (len > w->cap - w->len) {
    verdict(p, TPL_ELIMIT, 0, "%s: expected at most %zu bytes, found more",
            p->shown, w->cap);
    return 0;
  }
  if (w->len + len + 1 > w->alloc) {
    size_t want = (w->len + len + 1) * 2;
    char *b = realloc(w->buf, want);
    if (b == NULL) {
      verdict(p, -ENOMEM, 0, "%s: out of memory", p->shown);
      return 0;
    }
    w->buf = b;
    w->alloc = want;
  }
  memcpy(w->buf + w->len, data, len);
  w->len += len;
  w->buf[w->len] = '\0';
  return len;
}

/* Whether the read or object this part fills failed already (its other
 * parts stop at their next bytes). */
static int owner_failed(const struct part *p) {
  return p->r ? p->r->rc != 0 : p->w->rc != 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx) {
  struct part *p = ctx;
  size_t len = size * n;
  if (p->verdict != 0 && !owner_failed(p) && p->discarded < DISCARD_MAX) {
    size_t keep =
        len < ERROR_BODY - p->body_len ? len : ERROR_BODY - p->body_len;
    memcpy(p->body + p->body_len, data, keep);
    p->body_len += keep;
    p->discarded += len; /* an error page: read it off the connection */
    return len;
  }
  if (p->verdict != 0 || owner_failed(p)) return 0;
  p->h->received += len;
  if (p->w != NULL) return take_whole(p, data, len);
  if (p->mp != NULL) return take_multi(p, data, len);
  if (len > p->len - p->got) {
    verdict(p, TPL_EPROTO, 0,
            "%s: the server sent more than the %llu bytes "
            "asked at offset %llu",
            p->shown, (unsigned long long)p->len, (unsigned long long)p->off);
    return 0;
  }
  memcpy(p->dst + p->got, data, len);
  p->got += len;
  return len;
}

/* --- transfers --- */

static int set_common(struct part *p, CURL *e) {
  const struct tpl__http_opts *o = &p->h->o;
  curl_easy_setopt(e, CURLOPT_URL, p->url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, p);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p->errbuf);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, p);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, p);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  /* no redirect from https down to http */
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR,
                   strncasecmp(p->url, "https:", 6) == 0 ? "https"
                                                         : "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)o->timeout);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)LOW_SPEED_BYTES);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)o->timeout);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, RECV_BUFFER);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "tpload/" PACKAGE_VERSION);
  if (o->ca_cert != NULL) curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_cert);
  if (p->h->signer.sign != NULL) {
    if (p->h->signer.sign(p->h->signer.ctx, e, &p->headers) != 0)
      return -ENOMEM;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, p->headers);
  } else if (p->h->token != NULL) {
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
    curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, p->h->token);
  }
  return 0;
}

static int part_launch(struct part *p) {
  CURL *e = easy_take(p->h);
  if (e == NULL || set_common(p, e) != 0) {
    easy_give(p->h, e);
    curl_slist_free_all(p->headers);
    p->headers = NULL;
    return -ENOMEM;
  }
  if (p->mp != NULL) {
    p->got = 0; /* a retry asks for every span again */
    curl_easy_setopt(e, CURLOPT_RANGE, p->mrange);
  } else if (p->r != NULL) {
    snprintf(p->range, sizeof(p->range), "%llu-%llu",
             (unsigned long long)(p->off + p->got),
             (unsigned long long)(p->off + p->len - 1));
    curl_easy_setopt(e, CURLOPT_RANGE, p->range);
  }
  p->verdict = p->transient = 0;
  p->discarded = p->body_len = 0;
  p->errbuf[0] = '\0';
  answer_reset(p, 0);
  if (curl_multi_add_handle(p->h->multi, e) != CURLM_OK) {
    easy_give(p->h, e);
    return -ENOMEM;
  }
  p->easy = e;
  p->h->active++;
  p->h->gets++;
  return 0;
}

static void enqueue(struct tpl__http *h, struct part *p) {
  p->next = NULL;
  if (h->queue_tail != NULL)
    h->queue_tail->next = p;
  else
    h->queue = p;
  h->queue_tail = p;
}

static void owner_fail(struct part *p, int rc, const struct tpl__error *why) {
  int *owner_rc = p->r ? &p->r->rc : &p->w->rc;
  struct tpl__error *e = p->r ? &p->r->err : &p->w->err;
  if (*owner_rc != 0) return;
  *owner_rc = rc;
  *e = *why;
}

static void part_finished(struct part *p) {
  if (p->r != NULL) {
    p->r->got += p->got;
    p->r->pending--;
  } else {
    p->w->pending--;
  }
  if (p->probe && p->r->obj->multi == TPL_HTTP_MULTI_PROBING)
    p->r->obj->multi = TPL_HTTP_MULTI_UNTRIED; /* unanswered: the next */
  free(p->mrange);
  free(p->mp);
  free(p);
}

/* Whether the peer's certificate failed for want of its issuer (a
 * private CA, a self-signed certificate), not for its dates or name.
 * The numbers are OpenSSL's X509_V_ERR_* (include/openssl/x509_vfy.h),
 * the backend configure asks libcurl for: 2 UNABLE_TO_GET_ISSUER_CERT,
 * 18 DEPTH_ZERO_SELF_SIGNED_CERT, 19 SELF_SIGNED_CERT_IN_CHAIN, 20
 * UNABLE_TO_GET_ISSUER_CERT_LOCALLY, 21 UNABLE_TO_VERIFY_LEAF_SIGNATURE. */
static int unknown_issuer(struct part *p) {
  long v = 0;
  if (curl_easy_getinfo(p->easy, CURLINFO_SSL_VERIFYRESULT, &v) != CURLE_OK)
    return 0;
  return v == 2 || (v >= 18 && v <= 21);
}

/* A TLS failure: the --ca-cert hint only where a CA is what is missing. */
static void tls_failure(struct part *p, const char *text) {
  verdict(p, TPL_EREMOTE, 0, "%s: TLS: %s%s", p->shown, text,
          unknown_issuer(p) ? " (for a private CA pass --ca-cert FILE)" : "");
}

/* A curl failure: whether a retry may cure it, and its message.  Called
 * before the transfer is ended (its TLS verdict is read). */
static void curl_failure(struct part *p, CURLcode c) {
  const char *text = p->errbuf[0] ? p->errbuf : curl_easy_strerror(c);
  switch (c) {
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CERTPROBLEM:
    tls_failure(p, text);
    return;
  case CURLE_OUT_OF_MEMORY: /* libcurl's answer to a header over its cap */
#if LIBCURL_VERSION_NUM >= 0x080600
  case CURLE_TOO_LARGE: /* ... since 8.6 */
#endif
    if (!p->in_header) break;
    verdict(p, TPL_EPROTO, 0,
            "%s: response header larger than libcurl accepts (%d KiB a "
            "line, 300 KiB in all): a server fault",
            p->shown, CURL_MAX_HTTP_HEADER / 1024);
    return;
  case CURLE_PARTIAL_FILE:
  case CURLE_RECV_ERROR:
    if (p->w != NULL) { /* a whole object starts again */
      verdict(p, p->w->len > 0 ? -EIO : TPL_EREMOTE, 1,
              "%s: the transfer was cut after %zu bytes: %s", p->shown,
              p->w->len, text);
      return;
    }
    verdict(p, p->got > 0 ? -EIO : TPL_EREMOTE, 1,
            "%s: the transfer was cut after %llu of %llu bytes at offset "
            "%llu: %s",
            p->shown, (unsigned long long)p->got, (unsigned long long)p->len,
            (unsigned long long)p->off, text);
    return;
  case CURLE_UNSUPPORTED_PROTOCOL: /* a redirect only (MODEL is checked) */
    verdict(p, TPL_EREMOTE, 0,
            "%s: %s (redirects go to http or https only, from https to "
            "https only)",
            p->shown, text);
    return;
  case CURLE_OPERATION_TIMEDOUT:
    verdict(p, TPL_EREMOTE, 1,
            "%s: stalled (under %d bytes/s for %u s, --http-timeout): %s",
            p->shown, LOW_SPEED_BYTES, p->h->o.timeout, text);
    return;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    verdict(p, TPL_EREMOTE, 1, "%s: %s", p->shown, text);
    return;
  default:
    break;
  }
  verdict(p, TPL_EREMOTE, 0, "%s: %s", p->shown, text);
}

/* The body ended without an error: did all of it come? */
static void check_complete(struct part *p) {
  struct tpl__error e;
  if (p->mp != NULL && tpl__mp_end(p->mp, &e) != 0) {
    verdict(p, e.code, 0, "%s", e.msg);
    return;
  }
  if (p->r == NULL || p->got == p->len) return;
  verdict(p, -EIO, 1,
          "%s: the body ended after %llu of %llu bytes at offset %llu",
          p->shown, (unsigned long long)p->got, (unsigned long long)p->len,
          (unsigned long long)p->off);
}

static double backoff(unsigned attempt) {
  double d = BACKOFF_FIRST;
  for (unsigned i = 1; i < attempt && d < BACKOFF_MAX; i++)
    d *= 2;
  return d < BACKOFF_MAX ? d : BACKOFF_MAX;
}

static int multi_fallback(struct part *p);

/* A multi-range part whose object refused them: its spans queued one
 * range a GET instead, the part ended. */
static void multi_unasked(struct part *p) {
  if (!owner_failed(p) && multi_fallback(p) != 0) {
    struct tpl__error e = {0};
    tpl__fail(&e, -ENOMEM, "%s: out of memory", p->shown);
    owner_fail(p, -ENOMEM, &e);
  }
  part_finished(p);
}

static void part_done(struct part *p, CURLcode c) {
  struct tpl__http *h = p->h;
  int failed_owner = owner_failed(p);
  if (p->verdict == 0 && c != CURLE_OK) curl_failure(p, c);
  part_end_transfer(p);
  if (p->refused) {
    multi_unasked(p);
    return;
  }
  if (p->verdict == 0) check_complete(p);
  if (p->verdict == 0 || failed_owner) {
    part_finished(p);
    return;
  }
  if (p->transient && p->attempt < h->o.retries) {
    p->attempt++;
    if (p->w != NULL) p->w->len = 0; /* a whole object starts again */
    p->start_at = tpl__now() + backoff(p->attempt);
    enqueue(h, p);
    return;
  }
  if (p->transient && h->o.retries > 0) {
    size_t l = strlen(p->why.msg);
    snprintf(p->why.msg + l, sizeof(p->why.msg) - l, " (after %u retries)",
             h->o.retries);
  }
  if (h->signer.explain != NULL && p->status >= 400)
    h->signer.explain(h->signer.ctx, p->shown, p->status, p->body, p->body_len,
                      &p->why);
  owner_fail(p, p->verdict, &p->why);
  part_finished(p);
}

/* A multi-range part of an object whose first one is unanswered yet. */
static int awaits_probe(const struct part *p) {
  return p->mp != NULL && !p->probe &&
         p->r->obj->multi == TPL_HTTP_MULTI_PROBING;
}

/* Launches queued parts whose time has come while a slot is free (of
 * h->allowed: tpl__http_yield); a part whose owner already failed is
 * dropped.  Returns the seconds until the next queued part is due (or 1
 * when none waits). */
static double launch_due(struct tpl__http *h) {
  struct part **pp = &h->queue, *last = NULL, *late = NULL;
  double now = tpl__now(), next = 1.0;
  while (*pp != NULL) {
    struct part *p = *pp;
    int dead = owner_failed(p);
    if (!dead &&
        (p->start_at > now || h->active >= h->allowed || awaits_probe(p))) {
      if (p->start_at > now && p->start_at - now < next)
        next = p->start_at - now;
      if (awaits_probe(p) && next > PROBE_POLL)
        next = PROBE_POLL; /* no socket wakes it when the probe ends */
      last = p;
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    if (dead) {
      part_finished(p);
      continue;
    }
    if (p->mp != NULL && p->r->obj->multi == TPL_HTTP_MULTI_REFUSED) {
      p->next = late; /* queued before its object refused one */
      late = p;
      continue;
    }
    if (p->mp != NULL && p->r->obj->multi == TPL_HTTP_MULTI_UNTRIED) {
      p->r->obj->multi = TPL_HTTP_MULTI_PROBING;
      p->probe = 1;
    }
    if (part_launch(p) != 0) {
      struct tpl__error e = {0};
      tpl__fail(&e, -ENOMEM, "%s: out of memory", p->shown);
      owner_fail(p, -ENOMEM, &e);
      part_finished(p);
    }
  }
  h->queue_tail = last;
  while (late != NULL) {
    struct part *p = late;
    late = p->next;
    multi_unasked(p);
  }
  return next;
}

static void collect(struct tpl__http *h) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(h->multi, &left)) != NULL) {
    struct part *p = NULL;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&p);
    part_done(p, msg->data.result);
  }
}

/* One turn of the transfers: launches the queued parts that are due,
 * takes what arrived, and calls back when bytes did.  Returns the
 * seconds until the next queued part is due (launch_due). */
static double turn(struct tpl__http *h) {
  uint64_t before = h->received;
  double wait = launch_due(h);
  int running;
  curl_multi_perform(h->multi, &running);
  collect(h);
  if (h->progress != NULL && h->received != before)
    h->progress(h->progress_ctx);
  return wait;
}

/* Drives the transfers until *pending is 0.  With an idle callback the
 * wait for the sockets is cut to IDLE_MS, and the callback runs between
 * turns: the caller's own transfers (rank 0's MPI sends) move only when
 * it calls into them. */
static void drive(struct tpl__http *h, const unsigned *pending) {
  while (*pending > 0) {
    double wait = turn(h);
    int ms = (int)(wait * 1000) + 1;
    if (*pending == 0) break;
    if (h->idle != NULL) {
      h->idle(h->idle_ctx);
      ms = IDLE_MS;
    }
    curl_multi_poll(h->multi, NULL, 0, ms, NULL);
  }
}

int tpl__http_pump(struct tpl__http *h) {
  double now;
  if (h->active == 0 && h->queue == NULL) return 0;
  now = tpl__now();
  if (now - h->pumped >= PUMP_GAP) {
    h->pumped = now;
    turn(h);
  }
  return 1;
}

static struct part *new_part(struct tpl__http *h, const char *url,
                             const char *shown) {
  struct part *p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->h = h;
  p->url = url;
  p->shown = shown;
  return p;
}

int tpl__http_get(struct tpl__http *h, const char *url, const char *shown,
                  size_t cap, char **buf, size_t *len, struct tpl__error *err) {
  struct whole w = {.cap = cap, .pending = 1};
  struct part *p = new_part(h, url, shown);
  if (p == NULL) return tpl__oom(err);
  p->w = &w;
  enqueue(h, p);
  drive(h, &w.pending);
  if (w.rc != 0) {
    free(w.buf);
    if (err != NULL) *err = w.err;
    return w.rc;
  }
  if (w.buf == NULL && (w.buf = calloc(1, 1)) == NULL) return tpl__oom(err);
  *buf = w.buf;
  *len = w.len;
  return 0;
}

/* Queues the GETs of bytes [off, off + len) of read r, landing at dst:
 * parts of PART_BYTES (a probe: one part, its answer tells the size the
 * rest needs).  0 or -ENOMEM. */
static int enqueue_range(struct tpl__http *h, struct tpl__http_read *r,
                         uint64_t off, uint64_t len, uint8_t *dst) {
  uint64_t step = r->obj->known ? PART_BYTES : len;
  for (uint64_t at = 0; at < len;) {
    struct part *p = new_part(h, r->url, r->shown);
    if (p == NULL) return -ENOMEM;
    p->r = r;
    p->off = off + at;
    p->len = len - at < step ? len - at : step;
    p->dst = dst + at;
    r->pending++;
    enqueue(h, p);
    at += p->len;
  }
  return 0;
}

/* The spans of a multi-range part refused by the server, one range a GET
 * (queued last: nothing of them has landed). */
static int multi_fallback(struct part *p) {
  for (size_t k = 0; k < p->nspans; k++)
    if (enqueue_range(p->h, p->r, p->spans[k].off, p->spans[k].len,
                      p->spans[k].dst) != 0)
      return -ENOMEM;
  return 0;
}

/* A span's bytes as a Range value's element: "first-last" and a comma,
 * 42 characters at most. */
#define SPAN_TEXT_MAX 43
_Static_assert(TPL_HTTP_SPANS_MAX >= 2 &&
                   TPL_HTTP_RANGE_MAX >= sizeof("bytes=") + 2 * SPAN_TEXT_MAX,
               "a multi-range GET always holds two spans");

/* Writes into p->mrange the Range value of spans s[0..n) (n > 1) one GET
 * asks for: TPL_HTTP_SPANS_MAX at most, "bytes=" and the spans within
 * TPL_HTTP_RANGE_MAX bytes (two always fit); sets p's spans, off and
 * len from them.  Returns how many it took. */
static size_t multi_ranges(struct part *p, const struct tpl__span *s,
                           size_t n) {
  size_t k, at = 0, used = sizeof("bytes=");
  for (k = 0; k < n && k < TPL_HTTP_SPANS_MAX; k++) {
    char one[SPAN_TEXT_MAX + 1];
    int l =
        snprintf(one, sizeof(one), "%llu-%llu,", (unsigned long long)s[k].off,
                 (unsigned long long)(s[k].off + s[k].len - 1));
    if (used + (size_t)l > TPL_HTTP_RANGE_MAX) break;
    memcpy(p->mrange + at, one, (size_t)l);
    at += (size_t)l;
    used += (size_t)l;
    p->len += s[k].len;
  }
  p->mrange[at - 1] = '\0'; /* the last comma */
  p->spans = s;
  p->nspans = k;
  p->off = s[0].off;
  return k;
}

/* Queues one multi-range GET of the first spans of s[0..n) (n > 1) of
 * read r, as many as one GET holds (*took); 0 or -ENOMEM. */
static int enqueue_multi(struct tpl__http *h, struct tpl__http_read *r,
                         const struct tpl__span *s, size_t n, size_t *took) {
  struct part *p = new_part(h, r->url, r->shown);
  if (p == NULL) return -ENOMEM;
  p->mp = malloc(sizeof(*p->mp));
  p->mrange = malloc(TPL_HTTP_RANGE_MAX);
  if (p->mp == NULL || p->mrange == NULL) {
    free(p->mp);
    free(p->mrange);
    free(p);
    return -ENOMEM;
  }
  p->r = r;
  *took = multi_ranges(p, s, n);
  r->pending++;
  enqueue(h, p);
  return 0;
}

/* Queues the GETs of read r's spans: multi-range ones while its object
 * takes them, else one range a GET. */
static int enqueue_spans(struct tpl__http *h, struct tpl__http_read *r) {
  int multi = r->obj->known && r->obj->multi != TPL_HTTP_MULTI_REFUSED;
  for (size_t k = 0; k < r->nspans;) {
    const struct tpl__span *s = r->spans + k;
    size_t n = 1;
    int rc = multi && r->nspans - k > 1
                 ? enqueue_multi(h, r, s, r->nspans - k, &n)
                 : enqueue_range(h, r, s->off, s->len, s->dst);
    if (rc != 0) return rc;
    k += n;
  }
  return 0;
}

int tpl__http_start(struct tpl__http *h, struct tpl__http_read *r, size_t n,
                    struct tpl__error *err) {
  for (size_t i = 0; i < n; i++) {
    int rc;
    r[i].got = 0;
    r[i].rc = 0;
    r[i].pending = 0;
    rc = r[i].nspans > 0
             ? enqueue_spans(h, &r[i])
             : enqueue_range(h, &r[i], r[i].off, r[i].len, r[i].dst);
    if (rc != 0) return tpl__oom(err);
  }
  return 0;
}

int tpl__http_wait(struct tpl__http *h, struct tpl__http_read *r,
                   struct tpl__error *err) {
  drive(h, &r->pending);
  if (r->rc != 0 && err != NULL) *err = r->err;
  return r->rc;
}

int tpl__http_read_all(struct tpl__http *h, struct tpl__http_read *r, size_t n,
                       struct tpl__error *err) {
  int rc = tpl__http_start(h, r, n, err), first = 0;
  for (size_t i = 0; i < n; i++) {
    int one = tpl__http_wait(h, &r[i], first == 0 ? err : NULL);
    if (first == 0) first = one;
  }
  return rc != 0 ? rc : first;
}
