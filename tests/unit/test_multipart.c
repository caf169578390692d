/* test_multipart.c - the multipart/byteranges parser (http_multipart.h):
 * the boundary of a Content-Type, a body fed in every split of its bytes,
 * and a case per rule it enforces.  Bodies are built here as RFC 9110
 * 14.6's example frames them (and as nginx sends them: a CRLF before the
 * first delimiter). */
#include <stdio.h>
#include <string.h>

#include "http_multipart.h"
#include "tap.h"

#define URL "http://h/m.safetensors"
#define SIZE 1000 /* the object's bytes: byte i is (i * 7 + 3) % 251 */

static uint8_t byte_at(uint64_t i) {
  return (uint8_t)((i * 7 + 3) % 251);
}

/* A part of bytes first-last of an object of `total` bytes, appended to
 * the body at b (cap bytes, *n used). */
static void add_part(char *b, size_t cap, size_t *n, const char *bd,
                     uint64_t first, uint64_t last, uint64_t total) {
  *n += (size_t)snprintf(b + *n, cap - *n,
                         "\r\n--%s\r\nContent-Type: application/octet-stream"
                         "\r\nContent-Range: bytes %llu-%llu/%llu\r\n\r\n",
                         bd, (unsigned long long)first,
                         (unsigned long long)last, (unsigned long long)total);
  for (uint64_t i = first; i <= last && *n < cap; i++)
    b[(*n)++] = (char)byte_at(i);
}

static void add_close(char *b, size_t cap, size_t *n, const char *bd) {
  *n += (size_t)snprintf(b + *n, cap - *n, "\r\n--%s--\r\n", bd);
}

/* Where the spans' bytes land: one buffer, each span at its offset. */
static uint8_t out[SIZE];

static int place(void *ctx, size_t k, uint64_t at, const uint8_t *p, size_t n) {
  const struct tpl__span *s = ctx;
  memcpy(s[k].dst + at, p, n);
  return 0;
}

static struct tpl__span spans[3];

/* Spans 10-19, 100-149 and 500-500, landing in `out` at their offsets. */
static void three_spans(void) {
  static const uint64_t off[3] = {10, 100, 500}, len[3] = {10, 50, 1};
  memset(out, 0, sizeof(out));
  for (int k = 0; k < 3; k++)
    spans[k] = (struct tpl__span){off[k], len[k], out + off[k]};
}

/* Parses body b (n bytes) in chunks of `chunk` bytes; the first failure
 * (err set), else what the end says. */
static int parse(const char *b, size_t n, size_t chunk,
                 struct tpl__error *err) {
  struct tpl__mp m;
  tpl__mp_init(&m, URL, spans, 3, SIZE, "XyZ", place, spans);
  for (size_t at = 0; at < n; at += chunk) {
    size_t c = n - at < chunk ? n - at : chunk;
    int rc = tpl__mp_feed(&m, (const uint8_t *)b + at, c, err);
    if (rc != 0) return rc;
  }
  return tpl__mp_end(&m, err);
}

/* Whether every span's bytes landed, and nothing else did. */
static int landed_right(void) {
  for (uint64_t i = 0; i < SIZE; i++) {
    int in = (i >= 10 && i < 20) || (i >= 100 && i < 150) || i == 500;
    if (out[i] != (in ? byte_at(i) : 0)) return 0;
  }
  return 1;
}

static char body[8192];

static size_t good_body(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 100, 149, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 500, 500, SIZE);
  add_close(body, sizeof(body), &n, "XyZ");
  return n;
}

/* Fails the case unless body b refuses with TPL_EPROTO naming the URL
 * and saying `what`, fed whole and a byte at a time. */
static void refused(const char *b, size_t n, const char *what) {
  struct tpl__error err = {0};
  for (size_t chunk = 1; chunk <= n; chunk = chunk == 1 ? n : n + 1) {
    three_spans();
    err.msg[0] = '\0';
    CHECK_EQ_INT(parse(b, n, chunk, &err), TPL_EPROTO);
    CHECK(strstr(err.msg, URL) != NULL);
    if (strstr(err.msg, what) == NULL) {
      printf("# expected '%s' in: %s\n", what, err.msg);
      tap_case_failed = 1;
    }
  }
}

static void test_boundary(void) {
  char b[TPL_MP_BOUNDARY_MAX + 1];
  const char *quoted = "multipart/byteranges; boundary=\"a b:c\"";
  const char *plain = "Multipart/ByteRanges;charset=x; BOUNDARY=00000042";
  char longer[128];
  CHECK_EQ_INT(tpl__mp_boundary(quoted, strlen(quoted), b), 0);
  CHECK_STR_EQ(b, "a b:c");
  CHECK_EQ_INT(tpl__mp_boundary(plain, strlen(plain), b), 0);
  CHECK_STR_EQ(b, "00000042");
  CHECK_EQ_INT(tpl__mp_boundary("multipart/mixed; boundary=x", 27, b), -1);
  CHECK_EQ_INT(tpl__mp_boundary("multipart/byteranges", 20, b), -1);
  CHECK_EQ_INT(tpl__mp_boundary("multipart/byteranges; boundary=", 31, b), -1);
  CHECK_EQ_INT(tpl__mp_boundary("multipart/byteranges; xboundary=y", 33, b),
               -1);
  CHECK_EQ_INT(tpl__mp_boundary("multipart/byteranges; boundary=a\x01b", 34, b),
               -1);
  CHECK_EQ_INT(
      tpl__mp_boundary("multipart/byteranges; boundary=\"ab \"", 36, b), -1);
  snprintf(longer, sizeof(longer), "multipart/byteranges; boundary=%071d", 7);
  CHECK_EQ_INT(tpl__mp_boundary(longer, strlen(longer), b), -1);
}

/* Every chunk size, so that delimiters, headers and bodies straddle
 * every possible pair of chunks. */
static void test_any_split(void) {
  size_t n = good_body();
  for (size_t chunk = 1; chunk <= n; chunk++) {
    struct tpl__error err = {0};
    three_spans();
    CHECK_EQ_INT(parse(body, n, chunk, &err), 0);
    if (!landed_right()) {
      printf("# chunks of %zu: wrong bytes landed\n", chunk);
      tap_case_failed = 1;
      return;
    }
  }
}

/* A preamble, transport padding after a delimiter, bare LFs and an
 * epilogue are RFC 2046's, and taken. */
static void test_framing_variants(void) {
  struct tpl__error err = {0};
  size_t n = (size_t)snprintf(body, sizeof(body), "preamble line\n");
  size_t at;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  at = n;
  add_part(body, sizeof(body), &n, "XyZ", 100, 149, SIZE);
  /* the second delimiter padded (RFC 2046's transport padding) */
  memmove(body + at + 8, body + at + 7, n - at - 7);
  body[at + 7] = ' ';
  n++;
  add_part(body, sizeof(body), &n, "XyZ", 500, 500, SIZE);
  add_close(body, sizeof(body), &n, "XyZ");
  n += (size_t)snprintf(body + n, sizeof(body) - n, "epilogue");
  three_spans();
  CHECK_EQ_INT(parse(body, n, 3, &err), 0);
  CHECK(landed_right());
  if (err.msg[0]) printf("# %s\n", err.msg);
}

/* A server may coalesce ranges into one part (RFC 9110 14.2): the gaps'
 * bytes are dropped. */
static void test_coalesced(void) {
  struct tpl__error err = {0};
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 149, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 500, 500, SIZE);
  add_close(body, sizeof(body), &n, "XyZ");
  three_spans();
  CHECK_EQ_INT(parse(body, n, 7, &err), 0);
  CHECK(landed_right());
}

static void test_not_asked(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 100, 148, SIZE); /* ends early */
  add_close(body, sizeof(body), &n, "XyZ");
  refused(body, n, "not asked for");
  n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 11, 19, SIZE); /* begins late */
  refused(body, n, "not asked for");
}

static void test_out_of_order(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 100, 149, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  refused(body, n, "out of order");
}

static void test_overlapping(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  refused(body, n, "overlaps");
}

static void test_no_close_delimiter(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 100, 149, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 500, 500, SIZE);
  refused(body, n, "without the close delimiter");
  n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_part(body, sizeof(body), &n, "XyZ", 100, 149, SIZE);
  refused(body, n - 5, "ended inside part 2"); /* cut in a body */
}

static void test_range_missing(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  add_close(body, sizeof(body), &n, "XyZ");
  refused(body, n, "bytes 100-149 were asked for and not sent");
}

static void test_other_size(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE + 1);
  refused(body, n, "validated as 1000");
}

static void test_headers_bounded(void) {
  size_t n = (size_t)snprintf(body, sizeof(body), "\r\n--XyZ\r\nX-Pad: ");
  memset(body + n, 'a', TPL_MP_HEADERS_MAX);
  n += TPL_MP_HEADERS_MAX;
  refused(body, n, "part headers over");
  n = 0;
  memset(body, 'p', TPL_MP_HEADERS_MAX + 10);
  refused(body, TPL_MP_HEADERS_MAX + 10, "preamble over");
}

static void test_no_content_range(void) {
  size_t n = (size_t)snprintf(body, sizeof(body),
                              "\r\n--XyZ\r\nContent-Type: x\r\n\r\nabc");
  refused(body, n, "has no Content-Range");
  n = (size_t)snprintf(body, sizeof(body),
                       "\r\n--XyZ\r\nContent-Range: bytes 10-19/1000\r\n"
                       "Content-Range: bytes 10-19/1000\r\n\r\n");
  refused(body, n, "found two");
}

static void test_bytes_after_body(void) {
  size_t n = 0;
  add_part(body, sizeof(body), &n, "XyZ", 10, 19, SIZE);
  body[n++] = 'x'; /* the part is one byte longer than it says */
  add_close(body, sizeof(body), &n, "XyZ");
  refused(body, n, "expected the delimiter");
}

/* A plain 206 of one range: taken when it covers every span asked. */
static void test_single(void) {
  struct tpl__error err = {0};
  uint8_t all[SIZE];
  struct tpl__mp m;
  for (uint64_t i = 0; i < SIZE; i++)
    all[i] = byte_at(i);
  three_spans();
  tpl__mp_init(&m, URL, spans, 3, SIZE, "", place, spans);
  CHECK_EQ_INT(tpl__mp_single(&m, 10, 500, SIZE, &err), 0);
  CHECK_EQ_INT(tpl__mp_feed(&m, all + 10, 100, &err), 0);
  CHECK_EQ_INT(tpl__mp_feed(&m, all + 110, 391, &err), 0);
  CHECK_EQ_INT(tpl__mp_end(&m, &err), 0);
  CHECK(landed_right());
  CHECK_EQ_INT(tpl__mp_feed(&m, all, 1, &err), TPL_EPROTO);
  CHECK(strstr(err.msg, "more than the bytes asked") != NULL);
  tpl__mp_init(&m, URL, spans, 3, SIZE, "", place, spans);
  CHECK_EQ_INT(tpl__mp_single(&m, 10, 19, SIZE, &err), TPL_EPROTO);
  CHECK(strstr(err.msg, "asked for 3 ranges") != NULL);
}

int main(void) {
  RUN(test_boundary);
  RUN(test_any_split);
  RUN(test_framing_variants);
  RUN(test_coalesced);
  RUN(test_not_asked);
  RUN(test_out_of_order);
  RUN(test_overlapping);
  RUN(test_no_close_delimiter);
  RUN(test_range_missing);
  RUN(test_other_size);
  RUN(test_headers_bounded);
  RUN(test_no_content_range);
  RUN(test_bytes_after_body);
  RUN(test_single);
  return tap_done();
}
