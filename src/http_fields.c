/* http_fields.c - parsers of the few HTTP response lines tpload reads:
 * the status line (which response of a redirect chain this is, and how it
 * ended), a header's name and value, and Content-Range (which bytes of how
 * large an object a ranged GET returned).  Strict: a number that does not
 * fit, a range that runs backwards or past the object, and any stray byte
 * are refused, so the fetcher never trusts a malformed answer. */
#include <string.h>
#include <strings.h>

#include "http_fields.h"

/* Drops a trailing CRLF (or LF). */
static size_t chomp(const char *s, size_t len) {
  if (len > 0 && s[len - 1] == '\n') len--;
  if (len > 0 && s[len - 1] == '\r') len--;
  return len;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

int tpl__http_status_line(const char *line, size_t len, int *status) {
  size_t i = 5;
  len = chomp(line, len);
  if (len < 5 || memcmp(line, "HTTP/", 5) != 0) return -1;
  while (i < len && (is_digit(line[i]) || line[i] == '.'))
    i++;
  if (i == 5 || i + 4 > len || line[i] != ' ') return -1;
  for (size_t k = 1; k <= 3; k++)
    if (!is_digit(line[i + k])) return -1;
  if (i + 4 < len && line[i + 4] != ' ') return -1;
  *status = (line[i + 1] - '0') * 100 + (line[i + 2] - '0') * 10 +
            (line[i + 3] - '0');
  return 0;
}

static int is_ows(char c) {
  return c == ' ' || c == '\t';
}

int tpl__http_header_split(const char *line, size_t len, const char **name,
                           size_t *name_len, const char **value,
                           size_t *value_len) {
  const char *colon;
  size_t v0, v1;
  len = chomp(line, len);
  colon = memchr(line, ':', len);
  if (colon == NULL || colon == line) return -1;
  for (const char *p = line; p < colon; p++)
    if (is_ows(*p)) return -1; /* no space in or before a field name */
  v0 = (size_t)(colon - line) + 1;
  v1 = len;
  while (v0 < v1 && is_ows(line[v0]))
    v0++;
  while (v1 > v0 && is_ows(line[v1 - 1]))
    v1--;
  *name = line;
  *name_len = (size_t)(colon - line);
  *value = line + v0;
  *value_len = v1 - v0;
  return 0;
}

int tpl__http_header_is(const char *name, size_t len, const char *want) {
  return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* A decimal number at s[*i] up to a byte that is not a digit; at least
 * one digit, no overflow. */
static int number(const char *s, size_t len, size_t *i, uint64_t *out) {
  uint64_t v = 0;
  size_t start = *i;
  for (; *i < len && is_digit(s[*i]); (*i)++) {
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, (uint64_t)(s[*i] - '0'), &v))
      return -1;
  }
  if (*i == start) return -1;
  *out = v;
  return 0;
}

int tpl__http_content_range(const char *s, size_t len,
                            struct tpl__http_range_field *out) {
  struct tpl__http_range_field r = {0};
  size_t i = 6;
  if (len < 6 || strncasecmp(s, "bytes ", 6) != 0) return -1;
  if (i < len && s[i] == '*') {
    i++;
  } else {
    if (number(s, len, &i, &r.first) != 0 || i >= len || s[i++] != '-' ||
        number(s, len, &i, &r.last) != 0 || r.first > r.last)
      return -1;
    r.has_range = 1;
  }
  if (i >= len || s[i++] != '/') return -1;
  if (i < len && s[i] == '*' && r.has_range) {
    i++;
  } else {
    if (number(s, len, &i, &r.total) != 0) return -1;
    r.has_total = 1;
  }
  if (i != len) return -1;
  if (r.has_range && r.has_total && r.last >= r.total) return -1;
  *out = r;
  return 0;
}
