/* origin_local.c - the local origin (origin.h): a MODEL on this host's
 * file systems.  Its members are paths under the model directory,
 * confined and opened once (ckpt_files.c), held with their
 * dev/ino/size/mtime and open only while read (fdcache.h); it reads them
 * with pread, re-checks that identity, and streams them through source.c
 * (O_DIRECT through io_uring, or buffered).  A rank reading the files
 * itself (--read local) opens the paths rank 0 validated and refuses a
 * file of another size or time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "ckpt_files.h"
#include "fdcache.h"
#include "fileio.h"
#include "origin.h"

#define SAME_FILES_HINT                                                        \
  "--read local needs every rank to see the files rank 0 validated"

static int claims(const char *model) {
  return 1;
}

static int open_model(const char *path, const struct tpl__http_opts *http,
                      int presharded, struct tpl__model **out,
                      struct tpl__error *err) {
  return tpl__model_open_flags(path, presharded, out, err);
}

/* File i of an MLC model is the cache's file record i, at the path
 * dir/dataPath the parser gave it. */
static int probe(struct tpl__model *m, uint32_t first, const char *what,
                 struct tpl__error *err) {
  for (uint32_t i = first; i < m->nfiles; i++) {
    char ctx[64];
    int rc;
    snprintf(ctx, sizeof(ctx), "file record %u", i);
    rc = tpl__member_open(m, i, what, ctx, err);
    if (rc != 0) return rc;
  }
  return 0;
}

static char *shown(const struct tpl__model *m, const char *name) {
  return tpl__path_join(m->dir, name);
}

static int st_member(struct tpl__model *m, const char *name, const char *what,
                     const char *ctx, struct tpl__error *err) {
  char *path = tpl__path_join(m->dir, name);
  int rc = path ? 0 : tpl__oom(err);
  if (rc == 0 && what != NULL)
    rc = tpl__member_confine(m->dir, path, name, what, ctx, err);
  if (rc == 0) rc = tpl__st_load(path, name, m, err);
  free(path);
  return rc;
}

static int get(const struct tpl__model *m, const char *name, size_t cap,
               char **buf, size_t *len, struct tpl__error *err) {
  char *path = tpl__path_join(m->dir, name);
  int rc;
  if (path == NULL) return tpl__oom(err);
  rc = tpl__read_file(path, cap, buf, len, err);
  free(path);
  return rc;
}

static int read_range(const struct tpl__model *m, uint32_t idx, void *dst,
                      uint64_t len, uint64_t off, struct tpl__error *err) {
  const struct tpl__file *f = &m->files[idx];
  int fd, rc = tpl__model_fd(m, idx, &fd, err);
  if (rc != 0) return rc;
  rc = tpl__pread_full(fd, dst, (size_t)len, off);
  if (rc != 0)
    return tpl__fail(err, rc, "%s: cannot read %llu bytes at offset %llu: %s",
                     f->path, (unsigned long long)len, (unsigned long long)off,
                     tpl_strerror(rc));
  return 0;
}

/* The bytes come from a descriptor of the file validated (the model's
 * fdcache re-checks its identity at every re-open), but a path that
 * names another file means the model was replaced under the load: say
 * so rather than deliver the old one silently.  A file never held (a
 * model built by hand) has nothing to check. */
static int unchanged(const struct tpl__model *m, uint32_t idx,
                     struct tpl__error *err) {
  const struct tpl__file *f = &m->files[idx];
  struct stat st, at_path;
  const char *what = NULL;
  int fd, rc;
  if (!tpl__fdcache_held(m->fds, idx)) return 0;
  if ((rc = tpl__model_fd(m, idx, &fd, err)) != 0) return rc;
  if (fstat(fd, &st) != 0 || stat(f->path, &at_path) != 0)
    what = "it can no longer be examined";
  else if ((uint64_t)at_path.st_dev != f->dev ||
           (uint64_t)at_path.st_ino != f->ino)
    what = "another file took its place";
  else if ((uint64_t)st.st_size != f->size)
    what = "its size changed";
  else if (tpl__mtime_ns(&st) != f->mtime_ns)
    what = "it was modified";
  return what == NULL ? 0 : tpl__changed_while_loading(f->path, what, err);
}

/* How the file open as fd differs from rank 0's record of it (`size`
 * bytes, modified at `mtime_ns`), into buf; NULL when it does not. */
static const char *differs(uint64_t size, int64_t mtime_ns, int fd, char *buf,
                           size_t len) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    snprintf(buf, len, "it cannot be examined: %s", strerror(errno));
  else if ((uint64_t)st.st_size != size)
    snprintf(buf, len, "%llu bytes here, %llu on rank 0",
             (unsigned long long)st.st_size, (unsigned long long)size);
  else if (tpl__mtime_ns(&st) != mtime_ns)
    snprintf(buf, len, "modified at another time than on rank 0");
  else
    return NULL;
  return buf;
}

/* At open: not the file rank 0 validated (65). */
static int member_open(const char *path, uint64_t size, int64_t mtime_ns,
                       int *fd, struct tpl__error *err) {
  char buf[128];
  const char *what;
  uint64_t here;
  int rc = tpl__open_regular(path, fd, &here, err);
  if (rc != 0)
    return tpl__fail(err, TPL_ENOMODEL, "%s: cannot open it: %s (%s)", path,
                     tpl_strerror(rc), SAME_FILES_HINT);
  what = differs(size, mtime_ns, *fd, buf, sizeof(buf));
  if (what == NULL) return 0;
  return tpl__fail(err, TPL_EMISMATCH, "%s: %s (%s)", path, what,
                   SAME_FILES_HINT);
}

static int member_unchanged(const char *path, uint64_t size, int64_t mtime_ns,
                            int fd, struct tpl__error *err) {
  char buf[128];
  const char *what = differs(size, mtime_ns, fd, buf, sizeof(buf));
  return what == NULL ? 0 : tpl__changed_while_loading(path, what, err);
}

static int source(const struct tpl__origin_files *in, struct tpl__source **src,
                  struct tpl__error *err) {
  return tpl__source_files_open(src, in->files, in->paths, in->n, in->mode,
                                err);
}

const struct tpl__origin tpl__origin_local = {
    .name = "local",
    .claims = claims,
    .paths = 1,
    .open = open_model,
    .probe = probe,
    .shown = shown,
    .st_member = st_member,
    .get = get,
    .read = read_range,
    .unchanged = unchanged,
    .member_open = member_open,
    .member_unchanged = member_unchanged,
    .source = source,
};
