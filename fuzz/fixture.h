/* fixture.h - the temp directory a directory reader's fuzz target parses
 * against: made once in LLVMFuzzerInitialize, removed at exit, holding
 * the target's files, a subdirectory "sub" and a symlink leading outside
 * (to /dev/null).  Header-only (static inline); any failure aborts, since
 * a target without its fixture would fuzz nothing. */
#ifndef TPL_FUZZ_FIXTURE_H
#define TPL_FUZZ_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fixture_dir;

static inline int fixture_rm_one(const char *p, const struct stat *st, int flag,
                                 struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

static inline void fixture_cleanup(void) {
  nftw(fixture_dir, fixture_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdtemp(`templ`) (it must outlive the process, e.g. a static array) and
 * removes the directory with everything in it at exit. */
static inline void fixture_make(char *templ) {
  if (mkdtemp(templ) == NULL) abort();
  fixture_dir = templ;
  atexit(fixture_cleanup);
}

/* Creates DIR/NAME for writing; the caller fcloses it. */
static inline FILE *fixture_create(const char *dir, const char *name) {
  char path[256];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL) abort();
  return f;
}

/* Adds DIR/sub (a directory) and DIR/EVIL, a symlink to /dev/null. */
static inline void fixture_add_traps(const char *dir, const char *evil) {
  char path[256];
  snprintf(path, sizeof(path), "%s/sub", dir);
  mkdir(path, 0700);
  snprintf(path, sizeof(path), "%s/%s", dir, evil);
  if (symlink("/dev/null", path) != 0) abort();
}

#endif
