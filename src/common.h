/* common.h - private helpers shared by every module: array sizes, overflow
 * checked arithmetic, hard limits, and the error record that library code
 * fills instead of printing.
 */
#ifndef TPL_COMMON_H
#define TPL_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tpload.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define TPL_MAX_DIMS 8                 /* tensors of higher rank are refused */
#define TPL_MAX_SEGS 64                /* segments of one fused weight */
#define TPL_MAX_NAME 1024              /* bytes in a tensor name */
#define TPL_MAX_ST_HEADER 100000000u   /* safetensors header cap (bytes) */
#define TPL_MAX_JSON_FILE (256u << 20) /* index / config / plan JSON cap */
#define TPL_MAX_TENSORS (1u << 20)     /* tensors in one model */
#define TPL_MAX_NAME_BYTES (64u << 20) /* all tensor names of a model */

/* An error as library code reports it: a code and one line of text naming
 * the file, the tensor, what was expected and what was found.  Functions
 * that take a `struct tpl__error *` fill it only when they fail; NULL is
 * accepted and means "caller does not want the text". */
struct tpl__error {
  int code;
  char msg[1536];
};

/* Records `code` and a printf-style message in `err`; returns `code`, so
 * failures read `return tpl__fail(err, TPL_EFORMAT, "...", ...);`. */
int tpl__fail(struct tpl__error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The one out-of-memory failure: records "out of memory" and returns
 * -ENOMEM (exit 70). */
int tpl__oom(struct tpl__error *err);

/* Copies the text of a failure into a caller's buffer of `len` bytes (the
 * public API's errbuf convention): "" when rc is 0, else err->msg, or
 * tpl_strerror(rc) when no message was recorded.  buf may be NULL. */
void tpl__error_text(const struct tpl__error *err, int rc, char *buf,
                     size_t len);

/* Overflow-checked arithmetic: return 0 and store the result, or return
 * TPL_EOVERFLOW and leave *out untouched. */
static inline int tpl__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return TPL_EOVERFLOW;
  *out = r;
  return 0;
}

static inline int tpl__mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return TPL_EOVERFLOW;
  *out = r;
  return 0;
}

/* The greatest common divisor (gcd(a, 0) = a). */
static inline uint64_t tpl__gcd_u64(uint64_t a, uint64_t b) {
  while (b != 0) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* Seconds on the monotonic clock, for timing phases. */
static inline double tpl__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* TPL_COMMON_H */
