/* md5sum.c - MD5 sums of whole files in TVM's hex form (md5sum.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "md5sum.h"

void tpl__md5_hex(const uint8_t sum[16], char hex[TPL_MD5_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    hex[2 * i] = digits[sum[i] >> 4];
    hex[2 * i + 1] = digits[sum[i] & 15];
  }
  hex[32] = '\0';
}

int tpl__md5_file(int fd, uint64_t size, char hex[TPL_MD5_HEX]) {
  const size_t cap = (size_t)1 << 20;
  uint8_t *buf = malloc(cap), sum[16];
  struct tpl__md5 m;
  int rc = buf != NULL ? 0 : -ENOMEM;
  tpl__md5_init(&m);
  for (uint64_t at = 0; rc == 0 && at < size;) {
    size_t n = size - at < cap ? (size_t)(size - at) : cap;
    rc = tpl__pread_full(fd, buf, n, at);
    if (rc == 0) tpl__md5_update(&m, buf, n);
    at += n;
  }
  tpl__md5_digest(&m, sum);
  tpl__md5_hex(sum, hex);
  free(buf);
  return rc;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int tpl__md5_parse(const char *s, size_t len, char hex[TPL_MD5_HEX]) {
  static const char digits[] = "0123456789abcdef";
  if (len != 32) return -1;
  for (size_t i = 0; i < 32; i++) {
    int v = hex_value(s[i]);
    if (v < 0) return -1;
    hex[i] = digits[v];
  }
  hex[32] = '\0';
  return 0;
}

int tpl__md5_check(const char *path, const char *what, const char *want,
                   const char *found, int code, struct tpl__error *err) {
  if (want != NULL && strcmp(want, found) == 0) return 0;
  return tpl__fail(err, code, "%s: expected md5sum %s as %s records, found %s",
                   path, want != NULL ? want : "(none recorded)", what, found);
}
