/* http.h - reading objects over HTTP(S) with ranged GETs (libcurl's
 * multi interface): whole small objects (JSON), the first bytes of an
 * object with its size and validators, and many byte ranges at once
 * into the caller's buffers over a few reused connections (HTTP/1.1
 * keep-alive, HTTP/2 where the server offers it).  Failures are bounded
 * and named; a token never appears in a message. */
#ifndef TPL_HTTP_H
#define TPL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "http_multipart.h"

#define TPL_HTTP_TOKEN_ENV "TPLOAD_HTTP_TOKEN"

/* The options of a client (the --retries, --token-file, --ca-cert,
 * --http-connections and --http-timeout of the commands). */
struct tpl__http_opts {
  const char *token_file; /* a bearer token in a file; NULL: the token is
                             TPLOAD_HTTP_TOKEN's, when it is set */
  const char *ca_cert;    /* CA bundle (PEM) for https; NULL: the system's */
  unsigned retries;       /* further attempts after a transient failure */
  unsigned connections;   /* ranged GETs in flight at most */
  unsigned timeout;       /* seconds a transfer may stall (under 1 KiB/s)
                             or take to connect */
};

#define TPL_HTTP_RETRIES 3
#define TPL_HTTP_CONNECTIONS 8
#define TPL_HTTP_TIMEOUT 30
#define TPL_HTTP_OPTS_DEFAULT                                                  \
  { NULL, NULL, TPL_HTTP_RETRIES, TPL_HTTP_CONNECTIONS, TPL_HTTP_TIMEOUT }

/* What a client knows of an object's multi-range GETs: not tried yet;
 * the first in flight (the others wait for its answer, so a server that
 * refuses them is sent one, not a connection's worth); answered
 * multipart; refused (one range a GET from then on). */
enum {
  TPL_HTTP_MULTI_UNTRIED,
  TPL_HTTP_MULTI_PROBING,
  TPL_HTTP_MULTI_TAKEN,
  TPL_HTTP_MULTI_REFUSED
};

/* What the first answer said about an object; every later answer must
 * say the same (the object did not change under the load). */
struct tpl__http_obj {
  int known;          /* 0 until an answer filled it */
  uint64_t size;      /* Content-Range's total */
  char etag[256];     /* ETag, "" when the server sends none */
  char modified[128]; /* Last-Modified, "" when none */
  int multi;          /* multi-range GETs of it: TPL_HTTP_MULTI_* */
};

/* One ranged read of [off, off + len) of `url` into dst.  `shown` is the
 * URL as messages give it (without a presigned URL's signature).  With
 * obj->known the answer must match obj (else -EIO, "changed"); without,
 * the read is a probe: obj is recorded from the answer and the read may
 * come back shorter (the object is smaller), its length in `got`.  The
 * fields after `obj` are the client's. */
struct tpl__http_read {
  const char *url, *shown;
  uint64_t off, len;
  uint8_t *dst;
  struct tpl__http_obj *obj;
  /* Optional: the read is these nspans ranges (ascending, apart, in
   * [off, off + len), each landing at its own dst; off, len and dst
   * then only frame them), fetched TPL_HTTP_SPANS_MAX at most to a
   * multi-range GET (answered multipart/byteranges, http_multipart.h)
   * while the object takes them, else one range a GET.  obj must be
   * known. */
  const struct tpl__span *spans;
  size_t nspans;
  /* the client's: */
  uint64_t got;     /* bytes landed */
  unsigned pending; /* parts not finished */
  int rc;           /* the first failure */
  struct tpl__error err;
};

/* The ranges of one multi-range GET at most: its Range header stays
 * under TPL_HTTP_RANGE_MAX bytes too (nginx takes header lines of 8 KiB
 * by default, Apache's MaxRanges is 200), and a refused GET costs the
 * ranges of one more round. */
#define TPL_HTTP_SPANS_MAX 128
#define TPL_HTTP_RANGE_MAX 4096

struct tpl__http;

/* Makes a client: reads the token (--token-file, else the environment;
 * refused when empty or holding a control byte, TPL_EUSAGE), checks that
 * the CA file can be read.  *out is the caller's (tpl__http_close).
 * Returns 0, TPL_EUSAGE, -errno or -ENOMEM. */
int tpl__http_open(const struct tpl__http_opts *o, struct tpl__http **out,
                   struct tpl__error *err);

/* Ends every transfer and frees the client; NULL is accepted. */
void tpl__http_close(struct tpl__http *h);

/* GETs the whole object `url` (at most `cap` bytes) into a
 * NUL-terminated malloc'd buffer (*buf, caller frees, length *len).
 * Returns 0; -ENOENT for 404 or 410 (err names the URL); TPL_EDENIED for
 * 401 or 403; TPL_ELIMIT for an object over cap; TPL_EREMOTE when the
 * server cannot be reached or keeps failing (5xx) after the retries. */
int tpl__http_get(struct tpl__http *h, const char *url, const char *shown,
                  size_t cap, char **buf, size_t *len, struct tpl__error *err);

/* Starts reads `r[0..n)` (split into parts, at most `connections` in
 * flight, the rest queued); each is the caller's until it is waited for.
 * Returns 0 or -ENOMEM. */
int tpl__http_start(struct tpl__http *h, struct tpl__http_read *r, size_t n,
                    struct tpl__error *err);

/* Runs the transfers until read `r` is done (the others go on meanwhile).
 * Returns 0 or its failure, with err naming the URL and offset: the codes
 * of tpl__http_get, TPL_EPROTO for a server that answers a Range with 200
 * (it does not serve ranges), -EIO (exit 74) for an object that changed
 * (size, ETag or Last-Modified) or a body that ended early after the
 * retries. */
int tpl__http_wait(struct tpl__http *h, struct tpl__http_read *r,
                   struct tpl__error *err);

/* Moves the transfers in flight along without waiting (a turn at most
 * every 100 us), for a caller waiting on something else; 1 while any
 * part is in flight or queued, else 0. */
int tpl__http_pump(struct tpl__http *h);

/* tpl__http_start and tpl__http_wait of every read; the first failure. */
int tpl__http_read_all(struct tpl__http *h, struct tpl__http_read *r, size_t n,
                       struct tpl__error *err);

/* A request signer (s3.c: AWS Signature V4).  sign is called for every
 * request, retries included, with libcurl's easy handle (a CURL *): it
 * sets its options and may append headers to *headers (the client frees
 * the list when the transfer ends); 0 or -ENOMEM.  explain, when set, may
 * rewrite the message of a failed answer for `shown` (HTTP `status`, the
 * first `len` bytes of its body).  free releases ctx when the client is closed.
 */
struct curl_slist;
struct tpl__http_signer {
  int (*sign)(void *ctx, void *easy, struct curl_slist **headers);
  void (*explain)(void *ctx, const char *shown, int status, const char *body,
                  size_t len, struct tpl__error *why);
  void (*free)(void *ctx);
  void *ctx;
};

/* Signs every later request of h with s (copied; h owns s->ctx from now
 * on, and sends no bearer token). */
void tpl__http_set_signer(struct tpl__http *h,
                          const struct tpl__http_signer *s);

/* The requests client h started so far (each part of a read one GET,
 * every retry another). */
uint64_t tpl__http_gets(const struct tpl__http *h);

/* Called whenever bytes arrive (progress lines); NULL: none. */
void tpl__http_on_progress(struct tpl__http *h, void (*fn)(void *ctx),
                           void *ctx);

/* The caller's other transfers (rank 0's MPI sends, which share the
 * node's link: what the GETs bring queues ahead of the answers the sends
 * wait for) held it up before its next read (waited) or not.  The parts
 * in flight follow, like TCP's window: halved (to YIELD_MIN, 2, at the
 * least) at each wait, one more at each read not held up, never more
 * than `connections`. */
void tpl__http_yield(struct tpl__http *h, int waited);

/* Called between the turns of tpl__http_wait, at least every
 * millisecond, while it waits on the sockets (the caller's other
 * transfers); NULL: none. */
void tpl__http_on_idle(struct tpl__http *h, void (*fn)(void *ctx), void *ctx);

#endif
