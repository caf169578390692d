/* tmpdir.h - scratch directories for the C unit tests: a fresh directory
 * under $TMPDIR (or /tmp), files written into it, and its removal with
 * everything it holds.  Header-only (static inline) so each test binary
 * takes just what it uses. */
#ifndef TPL_TMPDIR_H
#define TPL_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Creates $TMPDIR/PREFIX.XXXXXX; returns its malloc'd path (free it with
 * drop_dir) or NULL. */
static inline char *make_dir(const char *prefix) {
  const char *tmp = getenv("TMPDIR");
  char buf[512];
  snprintf(buf, sizeof(buf), "%s/%s.XXXXXX", tmp ? tmp : "/tmp", prefix);
  if (mkdtemp(buf) == NULL) return NULL;
  return strdup(buf);
}

static inline int rm_one(const char *p, const struct stat *st, int flag,
                         struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

/* Removes `dir` and everything under it, then frees the path.  NULL is
 * accepted. */
static inline void drop_dir(char *dir) {
  if (dir != NULL) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  free(dir);
}

/* Writes `len` bytes of `buf` to dir/name (replacing it); silently does
 * nothing when the file cannot be created, which the test then sees. */
static inline void write_bytes(const char *dir, const char *name,
                               const void *buf, size_t len) {
  char path[1024];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL) return;
  if (len) fwrite(buf, 1, len, f);
  fclose(f);
}

#endif
