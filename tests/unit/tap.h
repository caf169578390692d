/* tap.h - a tiny TAP producer for unit tests.  Each test binary is one
 * file of small named cases; assertions print both values and never
 * compile out.  Usage:
 *   static void test_x(void) { CHECK_EQ_U64(a, b); }
 * CHECK_* record a failure and go on; REQUIRE records it and ends the case
 * (for a precondition the rest of the case cannot do without).
 *   int main(void) { RUN(test_x); return tap_done(); }
 * TAP_ONLY=test_x runs that case alone (the others are skipped).
 */
#ifndef TPL_TAP_H
#define TPL_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count, tap_failed, tap_case_failed;

/* TAP_ONLY=name runs only the case of that name; the others are reported
 * as skipped, so one case can be run alone under a debugger. */
static inline int tap_skipped(const char *name) {
  const char *only = getenv("TAP_ONLY");
  if (only == NULL || *only == '\0' || strcmp(only, name) == 0) return 0;
  printf("ok %d - %s # SKIP TAP_ONLY=%s\n", ++tap_count, name, only);
  return 1;
}

#define RUN(fn)                                                                \
  do {                                                                         \
    if (tap_skipped(#fn)) break;                                               \
    tap_case_failed = 0;                                                       \
    fn();                                                                      \
    tap_count++;                                                               \
    if (tap_case_failed) tap_failed++;                                         \
    printf("%s %d - %s\n", tap_case_failed ? "not ok" : "ok", tap_count, #fn); \
    fflush(stdout);                                                            \
  } while (0)

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("# %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);        \
      tap_case_failed = 1;                                                     \
    }                                                                          \
  } while (0)

/* Ends the case (a void function) when cond is false. */
#define REQUIRE(cond)                                                          \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("# %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #cond);      \
      tap_case_failed = 1;                                                     \
      return;                                                                  \
    }                                                                          \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                     \
  do {                                                                         \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                           \
    if (a_ != b_) {                                                            \
      printf("# %s:%d: %s == %s: %" PRIu64 " != %" PRIu64 "\n", __FILE__,      \
             __LINE__, #a, #b, a_, b_);                                        \
      tap_case_failed = 1;                                                     \
    }                                                                          \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                     \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_) {                                                            \
      printf("# %s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
             a_, b_);                                                          \
      tap_case_failed = 1;                                                     \
    }                                                                          \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                        \
  do {                                                                         \
    const char *h_ = (hay), *n_ = (needle);                                    \
    if (h_ == NULL || strstr(h_, n_) == NULL) {                                \
      printf("# %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,  \
             h_ ? h_ : "(null)", n_);                                          \
      tap_case_failed = 1;                                                     \
    }                                                                          \
  } while (0)

#define CHECK_STR_EQ(got, want)                                                \
  do {                                                                         \
    const char *g_ = (got), *w_ = (want);                                      \
    if (g_ == NULL || strcmp(g_, w_) != 0) {                                   \
      printf("# %s:%d: %s: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #got,      \
             g_ ? g_ : "(null)", w_);                                          \
      tap_case_failed = 1;                                                     \
    }                                                                          \
  } while (0)

static inline int tap_done(void) {
  printf("1..%d\n", tap_count);
  return tap_failed ? 1 : 0;
}

#endif
