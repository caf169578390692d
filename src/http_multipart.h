/* http_multipart.h - the body of a multi-range GET's answer (RFC 9110
 * 14.6 and 15.3.7: `206` with `Content-Type: multipart/byteranges;
 * boundary=...`, the parts framed as RFC 2046 5.1.1 says), parsed as it
 * streams in: a part, its headers or a delimiter may straddle any two
 * chunks.  Strict: every part carries a Content-Range of the object's
 * size that begins where an asked span begins and ends where one ends
 * (one span, or several coalesced with the gaps between: the gaps'
 * bytes are dropped), in the order asked, none twice; the headers of a
 * part and the preamble are bounded; the body ends with the close
 * delimiter and every span sent.  Pure: bytes in, the spans' bytes out
 * through a callback; messages name the URL. */
#ifndef TPL_HTTP_MULTIPART_H
#define TPL_HTTP_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* One byte range asked for, [off, off + len) of the object, whose bytes
 * land at dst (the caller's use: the parser only reads off and len). */
struct tpl__span {
  uint64_t off, len;
  uint8_t *dst;
};

#define TPL_MP_BOUNDARY_MAX 70  /* RFC 2046 5.1.1 */
#define TPL_MP_HEADERS_MAX 1024 /* a part's headers, or the preamble */

/* The boundary of a Content-Type value `v` (`len` bytes) of
 * multipart/byteranges, its boundary parameter quoted or not, into out
 * (TPL_MP_BOUNDARY_MAX + 1 bytes, NUL-terminated).  Returns 0, or -1 when
 * the type is another or the boundary is missing, empty or too long. */
int tpl__mp_boundary(const char *v, size_t len, char *out);

/* Called with bytes of span k from `at` bytes into it on; 0 or a failure,
 * which stops the parse with that code. */
typedef int (*tpl__mp_body_fn)(void *ctx, size_t k, uint64_t at,
                               const uint8_t *p, size_t n);

struct tpl__mp {
  /* given: */
  const char *shown; /* the URL as messages name it */
  const struct tpl__span *spans;
  size_t nspans; /* ascending, not overlapping, none empty */
  uint64_t size; /* the object's */
  tpl__mp_body_fn body;
  void *ctx;
  char boundary[TPL_MP_BOUNDARY_MAX + 1];
  /* the parse: */
  int state;
  int single;        /* a plain 206: one part, no delimiters */
  size_t next;       /* the first span not sent yet */
  size_t cur;        /* the span the part is at */
  uint64_t pos, end; /* the part's next byte and its end (of the object) */
  int has_range;     /* a Content-Range among the part's headers */
  size_t parts;      /* parts begun */
  size_t headers;    /* bytes of the part's headers (or preamble) so far */
  char line[TPL_MP_HEADERS_MAX + 1];
  size_t line_len;
};

/* Starts the parse of a multipart/byteranges body with `boundary` (from
 * tpl__mp_boundary) for the spans asked of object `shown` of `size`
 * bytes. */
void tpl__mp_init(struct tpl__mp *m, const char *shown,
                  const struct tpl__span *spans, size_t nspans, uint64_t size,
                  const char *boundary, tpl__mp_body_fn body, void *ctx);

/* Instead, the body of a plain 206 answer of bytes first-last of an
 * object of `total` bytes: one part, checked as the parts of a multipart
 * one are (it must cover every span asked).  Returns 0 or TPL_EPROTO
 * (err says why). */
int tpl__mp_single(struct tpl__mp *m, uint64_t first, uint64_t last,
                   uint64_t total, struct tpl__error *err);

/* The next n bytes of the body.  Returns 0, TPL_EPROTO (err says why) or
 * what the body callback returned. */
int tpl__mp_feed(struct tpl__mp *m, const uint8_t *p, size_t n,
                 struct tpl__error *err);

/* The body ended: 0 when it was whole (closed, every span sent), else
 * TPL_EPROTO naming what is missing. */
int tpl__mp_end(struct tpl__mp *m, struct tpl__error *err);

#endif
