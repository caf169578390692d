/* fuzz_http.c - libFuzzer target for the URL and HTTP field parsers: the
 * first byte picks one (a MODEL URL and its member URLs, a status line, a
 * header line, a Content-Range value), the rest is its input.  Any crash,
 * leak or UB is a bug; so is a parsed range that runs backwards or past
 * its total. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_fields.h"
#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_url(const char *s) {
  struct tpl__url u;
  char *m[4];
  if (tpl__url_parse(s, &u, NULL) != 0) return;
  m[0] = tpl__url_member(&u, u.name ? u.name : "config.json");
  m[1] = tpl__url_member_shown(&u, "a b%?.json");
  m[2] = tpl__url_dir_shown(&u);
  m[3] = tpl__url_member(&u, "x");
  for (size_t i = 0; i < 4; i++) {
    if (m[i] == NULL || strncmp(m[i], u.origin, strlen(u.origin)) != 0) abort();
    free(m[i]);
  }
  tpl__url_clear(&u);
}

static void fuzz_fields(int which, const char *s, size_t len) {
  struct tpl__http_range_field r;
  const char *n, *v;
  size_t nl, vl;
  int st;
  if (which == 1 && tpl__http_status_line(s, len, &st) == 0 &&
      (st < 0 || st > 999))
    abort();
  if (which == 2 && tpl__http_header_split(s, len, &n, &nl, &v, &vl) == 0 &&
      (nl == 0 || n + nl > s + len || v + vl > s + len))
    abort();
  if (which == 3 && tpl__http_content_range(s, len, &r) == 0 &&
      ((r.has_range && r.first > r.last) ||
       (r.has_range && r.has_total && r.last >= r.total)))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s;
  if (size < 1) return 0;
  s = malloc(size);
  if (s == NULL) return 0;
  memcpy(s, data + 1, size - 1);
  s[size - 1] = '\0';
  if (data[0] % 4 == 0)
    fuzz_url(s);
  else
    fuzz_fields(data[0] % 4, s, size - 1);
  free(s);
  return 0;
}
