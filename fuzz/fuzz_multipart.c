/* fuzz_multipart.c - libFuzzer target for the multipart/byteranges parser
 * (http_multipart.h).  The first byte picks: even, the boundary of a
 * Content-Type value (the rest); odd, a body (the rest) fed in chunks of
 * 1 + the first byte / 2 bytes against three spans of an object of 1000
 * bytes (a plain 206 of bytes 10-500 when the second byte is 's').  Any
 * crash, leak or UB is a bug; so is a span byte placed outside its span,
 * or twice, and a parse that ends well without every span placed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SIZE 1000

static uint8_t placed[SIZE];

static int place(void *ctx, size_t k, uint64_t at, const uint8_t *p, size_t n) {
  const struct tpl__span *s = ctx;
  if (k >= 3 || at + n > s[k].len) abort();
  for (size_t i = 0; i < n; i++)
    if (placed[s[k].off + at + i]++ != 0) abort();
  return 0;
}

static void fuzz_body(const uint8_t *d, size_t n, size_t chunk) {
  static const struct tpl__span spans[3] = {
      {10, 10, NULL}, {100, 50, NULL}, {500, 1, NULL}};
  struct tpl__error err;
  struct tpl__mp m;
  int rc = 0;
  memset(placed, 0, sizeof(placed));
  tpl__mp_init(&m, "u", spans, 3, SIZE, "b", place, (void *)spans);
  if (n > 0 && d[0] == 's') rc = tpl__mp_single(&m, 10, 500, SIZE, &err);
  for (size_t at = 0; rc == 0 && at < n; at += chunk)
    rc = tpl__mp_feed(&m, d + at, n - at < chunk ? n - at : chunk, &err);
  if (rc != 0 || tpl__mp_end(&m, &err) != 0) return;
  for (size_t k = 0; k < 3; k++)
    for (uint64_t i = 0; i < spans[k].len; i++)
      if (placed[spans[k].off + i] != 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char b[TPL_MP_BOUNDARY_MAX + 1];
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    if (tpl__mp_boundary((const char *)data + 1, size - 1, b) == 0 &&
        (b[0] == '\0' || strlen(b) > TPL_MP_BOUNDARY_MAX))
      abort();
    return 0;
  }
  fuzz_body(data + 1, size - 1, 1 + data[0] / 2);
  return 0;
}
