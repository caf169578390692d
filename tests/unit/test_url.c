/* test_url.c - the URL forms of a MODEL (url.c), the HTTP response
 * fields the fetcher reads (http_fields.c): one case per rule; and how
 * the fetcher (http.c) lets its caller's other transfers move while it
 * waits. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "http_fields.h"
#include "tap.h"
#include "url.h"

static int parse(const char *s, struct tpl__url *u, struct tpl__error *err) {
  memset(u, 0, sizeof(*u));
  return tpl__url_parse(s, u, err);
}

static void test_remote_prefix(void) {
  CHECK(tpl__url_is_remote("http://h/m"));
  CHECK(tpl__url_is_remote("HTTPS://h/m"));
  CHECK(!tpl__url_is_remote("ftp://h/m"));
  CHECK(!tpl__url_is_remote("./http://h"));
  CHECK(!tpl__url_is_remote("models/m.safetensors"));
  CHECK(!tpl__url_is_remote(NULL));
}

static void test_file_url(void) {
  struct tpl__error err = {0};
  struct tpl__url u;
  char *m, *shown;
  REQUIRE(parse("HTTPS://Host:8443/a/b/model.safetensors?X-Sig=1&e=2", &u,
                &err) == 0);
  CHECK(strcmp(u.origin, "https://Host:8443") == 0); /* only the scheme */
  CHECK(strcmp(u.dir, "/a/b/") == 0);
  CHECK(u.name != NULL && strcmp(u.name, "model.safetensors") == 0);
  CHECK(u.query != NULL && strcmp(u.query, "X-Sig=1&e=2") == 0);
  m = tpl__url_member(&u, u.name);
  shown = tpl__url_member_shown(&u, u.name);
  CHECK(strcmp(m, "https://Host:8443/a/b/model.safetensors?X-Sig=1&e=2") == 0);
  CHECK(strcmp(shown, "https://Host:8443/a/b/model.safetensors?...") == 0);
  free(m);
  free(shown);
  /* another member of a file URL's directory: no signature */
  m = tpl__url_member(&u, "config.json");
  CHECK(strcmp(m, "https://Host:8443/a/b/config.json") == 0);
  free(m);
  m = tpl__url_dir_shown(&u);
  CHECK(strcmp(m, "https://Host:8443/a/b") == 0);
  free(m);
  tpl__url_clear(&u);
}

/* MODEL as logs show it: the query masked, a local path as it is. */
static void test_shown(void) {
  static const char *const cases[][2] = {
      {"http://h/d/?X-Amz-Signature=abc", "http://h/d/?..."},
      {"HTTPS://h/m.safetensors?s=1?t", "HTTPS://h/m.safetensors?..."},
      {"http://h/d", "http://h/d"},
      {"/models/what?.safetensors", "/models/what?.safetensors"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
    char *s = tpl__url_shown(cases[i][0]);
    CHECK(s != NULL && strcmp(s, cases[i][1]) == 0);
    free(s);
  }
}

static void test_own_name_not_encoded_again(void) {
  struct tpl__url u;
  char *m;
  REQUIRE(parse("http://h/my%20model.safetensors", &u, NULL) == 0);
  m = tpl__url_member(&u, u.name);
  CHECK(strcmp(m, "http://h/my%20model.safetensors") == 0);
  free(m);
  tpl__url_clear(&u);
}

static void test_dir_url(void) {
  struct tpl__url u;
  char *m;
  REQUIRE(parse("http://h/models/llama?sv=1&sig=x", &u, NULL) == 0);
  CHECK(u.name == NULL);
  CHECK(strcmp(u.dir, "/models/llama/") == 0); /* a last '/' added */
  m = tpl__url_member(&u, "model-00001-of-00002.safetensors");
  /* a directory's query (a container token) goes to every member */
  CHECK(strcmp(m, "http://h/models/llama/model-00001-of-00002.safetensors"
                  "?sv=1&sig=x") == 0);
  free(m);
  m = tpl__url_member_shown(&u, "config.json");
  CHECK(strcmp(m, "http://h/models/llama/config.json?...") == 0);
  free(m);
  tpl__url_clear(&u);
  REQUIRE(parse("http://h/models/", &u, NULL) == 0);
  CHECK(strcmp(u.dir, "/models/") == 0);
  m = tpl__url_dir_shown(&u);
  CHECK(strcmp(m, "http://h/models") == 0);
  free(m);
  tpl__url_clear(&u);
}

static void test_root_url(void) {
  struct tpl__url u;
  char *m;
  REQUIRE(parse("http://h:80", &u, NULL) == 0);
  CHECK(strcmp(u.dir, "/") == 0);
  m = tpl__url_member(&u, "tensor-cache.json");
  CHECK(strcmp(m, "http://h:80/tensor-cache.json") == 0);
  free(m);
  m = tpl__url_dir_shown(&u);
  CHECK(strcmp(m, "http://h:80/") == 0);
  free(m);
  tpl__url_clear(&u);
  REQUIRE(parse("http://h?q=1", &u, NULL) == 0);
  CHECK(strcmp(u.dir, "/") == 0 && strcmp(u.query, "q=1") == 0);
  tpl__url_clear(&u);
}

static void test_suffix_decides_file(void) {
  struct tpl__url u;
  REQUIRE(parse("http://h/a.safetensors/", &u, NULL) == 0);
  CHECK(u.name == NULL); /* a directory named like a file */
  tpl__url_clear(&u);
  REQUIRE(parse("http://h/.safetensors", &u, NULL) == 0);
  CHECK(u.name == NULL); /* no name before the suffix */
  tpl__url_clear(&u);
  REQUIRE(parse("http://h/x.SAFETENSORS", &u, NULL) == 0);
  CHECK(u.name == NULL); /* the suffix is case-sensitive */
  tpl__url_clear(&u);
}

static void test_refusals(void) {
  static const struct {
    const char *url, *says;
  } bad[] = {
      {"ftp://h/m.safetensors", "http:// or https://"},
      {"http:///m.safetensors", "a host"},
      {"http://?q", "a host"},
      {"http://u:p@h/m.safetensors", "no credentials"},
      {"http://h/m.safetensors#frag", "fragment"},
      {"http://h/my model.safetensors", "0x20"},
      {"http://h/m\x01.safetensors", "0x01"},
      {"http://h/\xc3\xa9.safetensors", "0xc3"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    struct tpl__error err = {0};
    struct tpl__url u;
    CHECK_EQ_INT(parse(bad[i].url, &u, &err), TPL_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, bad[i].says);
  }
}

static void test_length_cap(void) {
  struct tpl__error err = {0};
  struct tpl__url u;
  size_t n = TPL_MAX_URL + 1;
  char *s = malloc(n + 1);
  REQUIRE(s != NULL);
  memset(s, 'a', n);
  memcpy(s, "http://h/", 9);
  s[n] = '\0';
  CHECK_EQ_INT(parse(s, &u, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "at most");
  s[n - 1] = '\0'; /* exactly the cap */
  CHECK_EQ_INT(parse(s, &u, &err), 0);
  tpl__url_clear(&u);
  free(s);
}

static void test_encode_segment(void) {
  char out[64];
  CHECK_EQ_INT(
      (int)tpl__url_encode_segment("a b/%?#~_.-Z9", 13, out, sizeof(out)), 23);
  CHECK(strcmp(out, "a%20b%2F%25%3F%23~_.-Z9") == 0);
  /* cut to the buffer, still NUL-terminated, the full length returned */
  CHECK_EQ_INT((int)tpl__url_encode_segment("  ", 2, out, 4), 6);
  CHECK(strcmp(out, "%20") == 0);
}

static void test_status_line(void) {
  int st = 0;
  CHECK(tpl__http_status_line("HTTP/1.1 206 Partial Content\r\n", 30, &st) ==
            0 &&
        st == 206);
  CHECK(tpl__http_status_line("HTTP/2 404 \r\n", 13, &st) == 0 && st == 404);
  CHECK(tpl__http_status_line("HTTP/1.0 200", 12, &st) == 0 && st == 200);
  CHECK(tpl__http_status_line("HTTP/1.1 20\r\n", 13, &st) == -1);
  CHECK(tpl__http_status_line("HTTP/1.1 2000\r\n", 15, &st) == -1);
  CHECK(tpl__http_status_line("HTTP/ 200\r\n", 11, &st) == -1);
  CHECK(tpl__http_status_line("Content-Range: x\r\n", 18, &st) == -1);
}

static void test_header_split(void) {
  const char *n, *v;
  size_t nl, vl;
  const char line[] = "ETag: \t\"abc\" \r\n";
  CHECK(tpl__http_header_split(line, strlen(line), &n, &nl, &v, &vl) == 0);
  CHECK(nl == 4 && tpl__http_header_is(n, nl, "etag"));
  CHECK(vl == 5 && memcmp(v, "\"abc\"", 5) == 0);
  CHECK(tpl__http_header_split("X:\r\n", 4, &n, &nl, &v, &vl) == 0 && vl == 0);
  CHECK(tpl__http_header_split("\r\n", 2, &n, &nl, &v, &vl) == -1);
  CHECK(tpl__http_header_split(": v\r\n", 5, &n, &nl, &v, &vl) == -1);
  CHECK(tpl__http_header_split("Bad Name: v", 11, &n, &nl, &v, &vl) == -1);
  CHECK(!tpl__http_header_is("ETags", 5, "etag"));
}

static int crange(const char *s, struct tpl__http_range_field *r) {
  return tpl__http_content_range(s, strlen(s), r);
}

static void test_content_range(void) {
  struct tpl__http_range_field r;
  REQUIRE(crange("bytes 0-65535/1048576", &r) == 0);
  CHECK(r.has_range && r.first == 0 && r.last == 65535);
  CHECK(r.has_total && r.total == 1048576);
  REQUIRE(crange("Bytes 5-5/6", &r) == 0);
  CHECK(r.first == 5 && r.last == 5 && r.total == 6);
  REQUIRE(crange("bytes */0", &r) == 0); /* 416 of an empty object */
  CHECK(!r.has_range && r.has_total && r.total == 0);
  REQUIRE(crange("bytes 1-2/*", &r) == 0);
  CHECK(r.has_range && !r.has_total);
  REQUIRE(crange("bytes 0-18446744073709551614/18446744073709551615", &r) == 0);
  CHECK(r.total == UINT64_MAX);
}

static void test_content_range_refusals(void) {
  static const char *const bad[] = {
      "bytes 0-1/2 ",                   /* a stray byte */
      "bytes 2-1/9",                    /* backwards */
      "bytes 0-9/9",                    /* past the end */
      "bytes -1/9",                     /* no first */
      "bytes 0-/9",                     /* no last */
      "bytes +0-1/9",                   /* a sign */
      "bytes */*",                      /* nothing at all */
      "items 0-1/9",                    /* another unit */
      "bytes 0-1/18446744073709551616", /* 2^64 */
      "bytes 0-1",                      /* no total */
      "bytes",
  };
  struct tpl__http_range_field r;
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    if (crange(bad[i], &r) != -1) printf("# accepted '%s'\n", bad[i]);
    CHECK(crange(bad[i], &r) == -1);
  }
}

/* A loopback port nothing listens on (bound, then closed): connects to
 * it are refused at once; 0 when none could be had. */
static unsigned short closed_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  unsigned short port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static void count_idle(void *ctx) {
  ++*(unsigned *)ctx;
}

/* A read refused once is retried after 0.2 s (BACKOFF_FIRST): while it
 * waits, pump says it is in flight without waiting, and a wait calls
 * the idle hook every millisecond or so (rank 0's sends move then), not
 * once per 0.2 s poll; once it failed, nothing is in flight. */
static void test_idle_and_pump(void) {
  struct tpl__http_opts o = {.retries = 1, .connections = 2, .timeout = 5};
  struct tpl__http_obj obj = {.known = 1, .size = 64};
  struct tpl__error err = {0};
  struct tpl__http *h = NULL;
  unsigned char buf[64];
  unsigned idle = 0, port = closed_port();
  char url[64];
  struct tpl__http_read r;
  REQUIRE(port != 0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/m.safetensors", port);
  r = (struct tpl__http_read){
      .url = url, .shown = url, .len = sizeof(buf), .dst = buf, .obj = &obj};
  REQUIRE(tpl__http_open(&o, &h, &err) == 0);
  CHECK(tpl__http_pump(h) == 0); /* nothing started */
  tpl__http_on_idle(h, count_idle, &idle);
  REQUIRE(tpl__http_start(h, &r, 1, &err) == 0);
  CHECK(tpl__http_pump(h) == 1);
  CHECK(tpl__http_wait(h, &r, &err) != 0);
  CHECK(idle >= 20); /* 0.2 s of backoff; a 0.2 s poll would give 1-3 */
  CHECK(tpl__http_pump(h) == 0);
  tpl__http_close(h);
}

/* A read of 8 parts (4 MiB each, at a closed port: each fails and waits
 * for its retry) after `waits` reads held up (tpl__http_yield) and then
 * `calm` not held up starts `want` GETs in its first turn. */
static void check_first_turn(unsigned waits, unsigned calm, uint64_t want) {
  struct tpl__http_opts o = {.retries = 1, .connections = 8, .timeout = 5};
  struct tpl__http_obj obj = {.known = 1, .size = 32u << 20};
  struct tpl__error err = {0};
  struct tpl__http *h = NULL;
  unsigned char *buf = malloc(32u << 20);
  unsigned port = closed_port();
  char url[64];
  struct tpl__http_read r;
  REQUIRE(port != 0 && buf != NULL);
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/m.safetensors", port);
  r = (struct tpl__http_read){
      .url = url, .shown = url, .len = 32u << 20, .dst = buf, .obj = &obj};
  REQUIRE(tpl__http_open(&o, &h, &err) == 0);
  for (unsigned k = 0; k < waits + calm; k++)
    tpl__http_yield(h, k < waits);
  REQUIRE(tpl__http_start(h, &r, 1, &err) == 0);
  tpl__http_pump(h);
  CHECK(tpl__http_gets(h) == want);
  CHECK(tpl__http_wait(h, &r, &err) != 0);
  tpl__http_close(h);
  free(buf);
}

/* The parts in flight follow the caller's sends: all 8 connections at
 * first, halved at each wait down to 2, one more after 8 reads in a row
 * not held up. */
static void test_yield(void) {
  check_first_turn(0, 0, 8);
  check_first_turn(1, 0, 4);
  check_first_turn(3, 0, 2);
  check_first_turn(3, 7, 2);
  check_first_turn(3, 8, 3);
  check_first_turn(0, 16, 8);
}

int main(void) {
  RUN(test_remote_prefix);
  RUN(test_file_url);
  RUN(test_shown);
  RUN(test_own_name_not_encoded_again);
  RUN(test_dir_url);
  RUN(test_root_url);
  RUN(test_suffix_decides_file);
  RUN(test_refusals);
  RUN(test_length_cap);
  RUN(test_encode_segment);
  RUN(test_status_line);
  RUN(test_header_split);
  RUN(test_content_range);
  RUN(test_content_range_refusals);
  RUN(test_idle_and_pump);
  RUN(test_yield);
  return tap_done();
}
