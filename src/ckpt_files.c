/* ckpt_files.c - the checkpoint loader's file side: every member file a
 * checkpoint's JSON names is confined to the model directory (symlinks
 * only inside it, or inside the HF hub cache's blobs of a snapshot),
 * opened once, checked against what the JSON declared, and held by the
 * model with its identity (tpl__model_hold_fd: open while read, each
 * re-open checked), so that the engine reads the very bytes that were
 * validated.  A safetensors file's header
 * is read here and handed to the parser (fmt_safetensors.c); the parsers
 * themselves never touch a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_files.h"
#include "fileio.h"
#include "fmt_safetensors.h"

/* --- confinement of member files to the model directory --- */

/* Returns 1 when `path` (a resolved path) lies inside `root` (resolved). */
static int path_inside(const char *path, const char *root) {
  size_t n = strlen(root);
  if (strcmp(root, "/") == 0) return 1;
  return strncmp(path, root, n) == 0 && path[n] == '/';
}

/* The HF hub cache keeps a model as REPO/snapshots/REV/NAME -> symlinks
 * into REPO/blobs/HASH.  When the resolved model directory is such a
 * snapshot, returns REPO/blobs (malloc'd), else NULL. */
static char *hub_blobs(const char *rdir) {
  const char *rev = strrchr(rdir, '/'), *snaps;
  size_t repo_len;
  char *out;
  if (rev == NULL || rev == rdir) return NULL;
  for (snaps = rev - 1; snaps > rdir && *snaps != '/'; snaps--) {
  }
  if ((size_t)(rev - snaps) != strlen("/snapshots") ||
      strncmp(snaps, "/snapshots", strlen("/snapshots")) != 0)
    return NULL;
  repo_len = (size_t)(snaps - rdir);
  out = malloc(repo_len + sizeof("/blobs"));
  if (out == NULL) return NULL;
  memcpy(out, rdir, repo_len);
  memcpy(out + repo_len, "/blobs", sizeof("/blobs"));
  return out;
}

static int inside_hub_blobs(const char *rpath, const char *rdir) {
  char *blobs = hub_blobs(rdir);
  int in = blobs != NULL && path_inside(rpath, blobs);
  free(blobs);
  return in;
}

/* A symlink is followed only when it resolves inside the directory, or,
 * for a snapshot of the HF hub cache, inside its repository's blobs. */
static int check_symlink(const char *dir, const char *path, const char *name,
                         const char *what, const char *ctx,
                         struct tpl__error *err) {
  char *rdir = realpath(dir, NULL), *rpath;
  int rc = 0;
  if (rdir == NULL) {
    int e = errno;
    return tpl__fail(err, -e, "%s: cannot resolve directory: %s", dir,
                     strerror(e));
  }
  rpath = realpath(path, NULL);
  if (rpath == NULL) {
    int e = errno;
    rc = tpl__fail(err, -e,
                   "%s: %s: expected file '%s' (a symlink) to resolve, "
                   "found: %s",
                   what, ctx, name, strerror(e));
  } else if (!path_inside(rpath, rdir) && !inside_hub_blobs(rpath, rdir)) {
    rc = tpl__fail(err, TPL_EFORMAT,
                   "%s: %s: expected file '%s' inside the model directory, "
                   "found a symlink to '%s' outside it",
                   what, ctx, name, rpath);
  }
  free(rdir);
  free(rpath);
  return rc;
}

int tpl__member_confine(const char *dir, const char *path, const char *name,
                        const char *what, const char *ctx,
                        struct tpl__error *err) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "%s: %s: expected file '%s', found %s", what, ctx,
                     name, e == ENOENT ? "no such file" : strerror(e));
  }
  if (S_ISLNK(st.st_mode))
    return check_symlink(dir, path, name, what, ctx, err);
  return 0;
}

int tpl__member_open(struct tpl__model *m, uint32_t idx, const char *what,
                     const char *ctx, struct tpl__error *err) {
  const struct tpl__file *f = &m->files[idx];
  uint64_t size;
  int fd, rc = tpl__member_confine(m->dir, f->path, f->name, what, ctx, err);
  if (rc != 0) return rc;
  rc = tpl__open_regular(f->path, &fd, &size, err);
  if (rc == TPL_EFORMAT)
    return tpl__fail(err, rc,
                     "%s: %s: expected '%s' to be a regular file, found "
                     "another file type",
                     what, ctx, f->name);
  if (rc != 0) return rc;
  if (size != f->size) {
    close(fd);
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': expected %llu bytes on disk as "
                     "\"nbytes\" says, found %llu",
                     what, f->name, (unsigned long long)f->size,
                     (unsigned long long)size);
  }
  rc = tpl__model_hold_fd(m, idx, fd); /* read once */
  if (rc != 0) return tpl__fail(err, rc, "%s: %s", f->path, tpl_strerror(rc));
  return 0;
}

/* --- one safetensors file --- */

/* Reads the 8-byte prefix and the header of an open file into a malloc'd
 * buffer of 8 + N bytes (*out, caller frees). */
static int read_header(int fd, uint64_t size, const char *path, uint8_t **out,
                       size_t *out_len, struct tpl__error *err) {
  uint8_t prefix[8];
  size_t got = size < 8 ? (size_t)size : 8;
  uint64_t hlen, at = 0;
  uint8_t *b;
  int rc = tpl__pread_at(fd, prefix, got, 0, &at);
  if (rc == TPL_ESHORT)
    return tpl__fail(err, rc,
                     "%s: expected %zu bytes of header length, found the "
                     "file ending at offset %llu (it shrank or lies about "
                     "its size)",
                     path, got, (unsigned long long)at);
  if (rc != 0)
    return tpl__fail(err, rc,
                     "%s: I/O error reading the header length at offset "
                     "%llu: %s",
                     path, (unsigned long long)at, tpl_strerror(rc));
  rc = tpl__st_header_len(prefix, got, size, path, &hlen, err);
  if (rc != 0) return rc;
  b = malloc((size_t)hlen + 8);
  if (b == NULL) return tpl__fail(err, -ENOMEM, "%s: out of memory", path);
  memcpy(b, prefix, 8);
  rc = tpl__pread_at(fd, b + 8, (size_t)hlen, 8, &at);
  if (rc != 0) {
    free(b);
    if (rc == TPL_ESHORT)
      return tpl__fail(err, rc,
                       "%s: expected a %llu-byte header, found the file "
                       "ending at offset %llu (it shrank while being read)",
                       path, (unsigned long long)hlen, (unsigned long long)at);
    return tpl__fail(err, rc,
                     "%s: I/O error reading the %llu-byte header at offset "
                     "%llu: %s",
                     path, (unsigned long long)hlen, (unsigned long long)at,
                     tpl_strerror(rc));
  }
  *out = b;
  *out_len = (size_t)hlen + 8;
  return 0;
}

int tpl__st_load(const char *path, const char *name, struct tpl__model *m,
                 struct tpl__error *err) {
  uint8_t *buf = NULL;
  size_t len = 0;
  uint64_t size;
  uint32_t idx;
  int fd, rc = tpl__open_regular(path, &fd, &size, err);
  if (rc != 0) return rc;
  rc = read_header(fd, size, path, &buf, &len, err);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  /* The model keeps this descriptor: the engine reads what was checked. */
  rc = tpl__model_add_file(m, path, name, size, &idx);
  if (rc != 0) {
    close(fd);
    rc = tpl__fail(err, rc, "%s: out of memory", path);
  } else if ((rc = tpl__model_hold_fd(m, idx, fd)) != 0) {
    rc = tpl__fail(err, rc, "%s: cannot stat: %s", path, strerror(-rc));
  } else {
    rc = tpl__st_parse(buf, len, size, path, idx, m, err);
  }
  free(buf);
  return rc;
}
