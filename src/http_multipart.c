/* http_multipart.c - a multi-range GET's multipart/byteranges body, as it
 * streams in (see http_multipart.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_fields.h"
#include "http_multipart.h"

enum {
  S_PRE,   /* the preamble: lines until the first delimiter */
  S_HDR,   /* a part's header lines, until the blank one */
  S_BODY,  /* a part's bytes, as many as its Content-Range says */
  S_CRLF,  /* the line break that begins the delimiter after a body */
  S_DELIM, /* "--boundary" then padding, or "--boundary--" */
  S_CLOSED /* after the close delimiter: the epilogue, ignored */
};

static int is_space(char c) {
  return c == ' ' || c == '\t';
}

/* A byte a boundary may hold (RFC 2046 5.1.1's bchars). */
static int bchar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || (c != '\0' && strchr("'()+_,-./:=? ", c));
}

/* The value of parameter "boundary" in the parameters at p (after the
 * type's ';'), quoted or not, into out. */
static int boundary_param(const char *p, const char *e, char *out) {
  while (p < e) {
    const char *name, *v, *ve;
    size_t nl, n;
    while (p < e && (is_space(*p) || *p == ';'))
      p++;
    for (name = p; p < e && *p != '=' && *p != ';'; p++)
      ;
    nl = (size_t)(p - name);
    if (p == e || *p != '=') continue;
    v = p + 1;
    if (v < e && *v == '"') {
      v++;
      if ((ve = memchr(v, '"', (size_t)(e - v))) == NULL) return -1;
      p = ve + 1;
    } else {
      for (ve = v; ve < e && *ve != ';' && !is_space(*ve); ve++)
        ;
      p = ve;
    }
    if (nl != 8 || strncasecmp(name, "boundary", 8) != 0) continue;
    n = (size_t)(ve - v);
    if (n == 0 || n > TPL_MP_BOUNDARY_MAX || v[n - 1] == ' ') return -1;
    for (size_t i = 0; i < n; i++)
      if (!bchar(v[i])) return -1;
    memcpy(out, v, n);
    out[n] = '\0';
    return 0;
  }
  return -1;
}

int tpl__mp_boundary(const char *v, size_t len, char *out) {
  static const char type[] = "multipart/byteranges";
  const char *e = v + len;
  while (v < e && is_space(*v))
    v++;
  if ((size_t)(e - v) < sizeof(type) - 1 ||
      strncasecmp(v, type, sizeof(type) - 1) != 0)
    return -1;
  v += sizeof(type) - 1;
  while (v < e && is_space(*v))
    v++;
  if (v == e || *v != ';') return -1;
  return boundary_param(v + 1, e, out);
}

void tpl__mp_init(struct tpl__mp *m, const char *shown,
                  const struct tpl__span *spans, size_t nspans, uint64_t size,
                  const char *boundary, tpl__mp_body_fn body, void *ctx) {
  memset(m, 0, sizeof(*m));
  m->shown = shown;
  m->spans = spans;
  m->nspans = nspans;
  m->size = size;
  m->body = body;
  m->ctx = ctx;
  snprintf(m->boundary, sizeof(m->boundary), "%s", boundary);
  m->state = S_PRE;
}

static uint64_t span_end(const struct tpl__span *s) {
  return s->off + s->len;
}

/* Whether a span after the next one asked begins at byte `first`. */
static int later_span(const struct tpl__mp *m, uint64_t first) {
  for (size_t k = m->next + 1; k < m->nspans; k++)
    if (m->spans[k].off == first) return 1;
  return 0;
}

/* A part of bytes first-last of `total`: it must begin at the next span
 * asked and end where that one or a later one ends. */
static int begin_part(struct tpl__mp *m, uint64_t first, uint64_t last,
                      uint64_t total, struct tpl__error *err) {
  size_t j = m->next;
  int asked;
  uint64_t prev = m->next > 0 ? span_end(&m->spans[m->next - 1]) : 0;
  if (total != m->size)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: a part of bytes %llu-%llu says "
                     "the object is %llu bytes, it was validated as %llu",
                     m->shown, (unsigned long long)first,
                     (unsigned long long)last, (unsigned long long)total,
                     (unsigned long long)m->size);
  if (m->next > 0 && first < prev)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: part %zu (bytes %llu-%llu) is "
                     "out of order or overlaps the bytes before %llu sent "
                     "already",
                     m->shown, m->parts, (unsigned long long)first,
                     (unsigned long long)last, (unsigned long long)prev);
  while (j < m->nspans && span_end(&m->spans[j]) <= last)
    j++;
  asked = m->next < m->nspans && first == m->spans[m->next].off &&
          j < m->nspans && span_end(&m->spans[j]) == last + 1;
  if (!asked && later_span(m, first))
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: part %zu (bytes %llu-%llu) is "
                     "out of order: expected the one from byte %llu first",
                     m->shown, m->parts, (unsigned long long)first,
                     (unsigned long long)last,
                     (unsigned long long)m->spans[m->next].off);
  if (!asked)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: part %zu (bytes %llu-%llu) was "
                     "not asked for",
                     m->shown, m->parts, (unsigned long long)first,
                     (unsigned long long)last);
  m->cur = m->next;
  m->next = j + 1;
  m->pos = first;
  m->end = last + 1;
  return 0;
}

int tpl__mp_single(struct tpl__mp *m, uint64_t first, uint64_t last,
                   uint64_t total, struct tpl__error *err) {
  int rc;
  m->single = 1;
  m->parts = 1;
  rc = begin_part(m, first, last, total, err);
  if (rc == 0 && m->next != m->nspans)
    rc = tpl__fail(err, TPL_EPROTO,
                   "%s: asked for %zu ranges, the server sent bytes "
                   "%llu-%llu alone",
                   m->shown, m->nspans, (unsigned long long)first,
                   (unsigned long long)last);
  m->state = rc == 0 ? S_BODY : S_CLOSED;
  return rc;
}

/* n bytes of the part's body at p: the spans' among them to the
 * callback, the gaps' (coalesced spans) dropped. */
static int body_bytes(struct tpl__mp *m, const uint8_t *p, size_t n) {
  while (n > 0) {
    const struct tpl__span *s = &m->spans[m->cur];
    size_t c;
    int rc;
    if (m->pos < s->off) { /* a gap between coalesced spans */
      c = s->off - m->pos < n ? (size_t)(s->off - m->pos) : n;
    } else {
      c = span_end(s) - m->pos < n ? (size_t)(span_end(s) - m->pos) : n;
      rc = m->body(m->ctx, m->cur, m->pos - s->off, p, c);
      if (rc != 0) return rc;
      if (m->pos + c == span_end(s)) m->cur++;
    }
    m->pos += c;
    p += c;
    n -= c;
  }
  return 0;
}

/* Whether line l (n bytes, no line break) is a delimiter: 1 for one
 * that begins a part, 2 for the close delimiter, else 0. */
static int delimiter(const struct tpl__mp *m, const char *l, size_t n) {
  size_t b = strlen(m->boundary), i = 2 + b;
  int close = 0;
  if (n < i || l[0] != '-' || l[1] != '-' || memcmp(l + 2, m->boundary, b))
    return 0;
  if (n >= i + 2 && l[i] == '-' && l[i + 1] == '-') {
    close = 1;
    i += 2;
  }
  for (; i < n; i++) /* transport padding (RFC 2046 5.1.1) */
    if (!is_space(l[i])) return 0;
  return close ? 2 : 1;
}

static int header_line(struct tpl__mp *m, const char *l, size_t n,
                       struct tpl__error *err) {
  struct tpl__http_range_field cr;
  const char *name, *v;
  size_t nl, vl;
  if (n == 0) {
    if (!m->has_range)
      return tpl__fail(err, TPL_EPROTO,
                       "%s: multipart answer: part %zu has no Content-Range",
                       m->shown, m->parts);
    m->state = S_BODY;
    return 0;
  }
  if (tpl__http_header_split(l, n, &name, &nl, &v, &vl) != 0)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: part %zu: expected a header "
                     "line, found another",
                     m->shown, m->parts);
  if (!tpl__http_header_is(name, nl, "content-range")) return 0;
  if (m->has_range || tpl__http_content_range(v, vl, &cr) != 0 ||
      !cr.has_range || !cr.has_total)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: part %zu: expected one "
                     "Content-Range of bytes FIRST-LAST/SIZE, found %s",
                     m->shown, m->parts, m->has_range ? "two" : "another");
  m->has_range = 1;
  return begin_part(m, cr.first, cr.last, cr.total, err);
}

/* A whole line l (n bytes, its CRLF or LF taken off) in the current
 * state. */
static int line(struct tpl__mp *m, const char *l, size_t n,
                struct tpl__error *err) {
  int d = m->state == S_HDR ? 0 : delimiter(m, l, n);
  switch (m->state) {
  case S_HDR:
    return header_line(m, l, n, err);
  case S_CRLF:
    if (n == 0) {
      m->state = S_DELIM;
      return 0;
    }
    break;
  case S_PRE:
  case S_DELIM:
    if (d == 1) {
      m->state = S_HDR;
      m->has_range = 0;
      m->headers = 0;
      m->parts++;
      return 0;
    }
    if (d == 2) {
      m->state = S_CLOSED;
      return 0;
    }
    if (m->state == S_PRE) return 0; /* a preamble line */
    break;
  default:
    return 0; /* the epilogue */
  }
  return tpl__fail(err, TPL_EPROTO,
                   "%s: multipart answer: expected the delimiter "
                   "\"--%s\" after part %zu, found other bytes",
                   m->shown, m->boundary, m->parts);
}

/* Bytes of a line-wise state: up to and with a line's end into m->line,
 * bounded (a part's headers, the preamble, a delimiter).  Returns the
 * bytes taken, or -1 with err set. */
static long line_bytes(struct tpl__mp *m, const uint8_t *p, size_t n,
                       struct tpl__error *err) {
  const uint8_t *nl = memchr(p, '\n', n);
  size_t take = nl != NULL ? (size_t)(nl - p) + 1 : n;
  size_t len;
  int rc;
  if (m->state == S_CLOSED) return (long)n; /* the epilogue */
  if (m->line_len + take > TPL_MP_HEADERS_MAX ||
      m->headers + take > TPL_MP_HEADERS_MAX) {
    tpl__fail(err, TPL_EPROTO,
              "%s: multipart answer: %s over %d bytes: expected a "
              "shorter one",
              m->shown, m->state == S_HDR ? "part headers" : "preamble",
              TPL_MP_HEADERS_MAX);
    return -1;
  }
  memcpy(m->line + m->line_len, p, take);
  m->line_len += take;
  m->headers += take;
  if (nl == NULL) return (long)take;
  len = m->line_len - 1;
  if (len > 0 && m->line[len - 1] == '\r') len--;
  m->line_len = 0;
  if (m->state != S_HDR && m->state != S_PRE) m->headers = 0;
  rc = line(m, m->line, len, err);
  return rc == 0 ? (long)take : -1;
}

int tpl__mp_feed(struct tpl__mp *m, const uint8_t *p, size_t n,
                 struct tpl__error *err) {
  while (n > 0) {
    size_t take;
    if (m->single && m->state != S_BODY)
      return tpl__fail(err, TPL_EPROTO,
                       "%s: the server sent more than the bytes asked",
                       m->shown);
    if (m->state == S_BODY) {
      int rc;
      take = m->end - m->pos < n ? (size_t)(m->end - m->pos) : n;
      rc = body_bytes(m, p, take);
      if (rc != 0) return rc;
      if (m->pos == m->end) m->state = m->single ? S_CLOSED : S_CRLF;
    } else {
      long t = line_bytes(m, p, n, err);
      if (t < 0) return err != NULL ? err->code : TPL_EPROTO;
      take = (size_t)t;
    }
    p += take;
    n -= take;
  }
  return 0;
}

int tpl__mp_end(struct tpl__mp *m, struct tpl__error *err) {
  if (m->state == S_BODY)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: the body ended inside part %zu, "
                     "at byte %llu of bytes up to %llu",
                     m->shown, m->parts, (unsigned long long)m->pos,
                     (unsigned long long)m->end);
  if (m->state != S_CLOSED)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: the body ended without the "
                     "close delimiter \"--%s--\"",
                     m->shown, m->boundary);
  if (m->next < m->nspans)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: multipart answer: bytes %llu-%llu were asked for "
                     "and not sent (%zu of %zu ranges came)",
                     m->shown, (unsigned long long)m->spans[m->next].off,
                     (unsigned long long)span_end(&m->spans[m->next]) - 1,
                     m->next, m->nspans);
  return 0;
}
