/* fileio.h - careful file access for readers and writers: regular-file
 * checks, full preads where a short read is an I/O error (a file that
 * shrank), whole-file reads with a hard cap, and atomic file writes (a
 * temp file beside the target, fsynced, renamed over it, the directory
 * fsynced) so that no reader ever sees a partial file. */
#ifndef TPL_FILEIO_H
#define TPL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common.h"

/* Opens `path` read-only, refusing anything but a regular file.  Stores the
 * fd and the file size.  Returns 0, -errno (-ENOENT when missing) or
 * TPL_EFORMAT for a non-regular file; err names the path. */
int tpl__open_regular(const char *path, int *fd, uint64_t *size,
                      struct tpl__error *err);

/* A file's modification time in nanoseconds, from its stat. */
int64_t tpl__mtime_ns(const struct stat *st);

/* -EIO for file `path`, which is no longer the file validated at the
 * start of the load (`what`: how it differs, "another file took its
 * place"): "PATH: changed while loading (WHAT); ...". */
int tpl__changed_while_loading(const char *path, const char *what,
                               struct tpl__error *err);

/* Raises the soft limit on open descriptors to the hard one, so that
 * more of a model's files may stay open at once (fdcache.h bounds them
 * by a quarter of it).  Best effort. */
void tpl__raise_fd_limit(void);

/* Reads exactly `len` bytes at `off`, retrying on EINTR and partial reads.
 * Returns 0, -errno (the device's error: -EIO for a bad sector), or
 * TPL_ESHORT when the file ends early; on failure *at (when not NULL) is
 * the offset of the first byte not read, where the failing read began.
 * For tests only: TPLOAD_TEST_EIO_OFFSET=N (read once) makes the byte at
 * offset N of every file fail with EIO, as a bad sector does: the read
 * before it returns the bytes up to N, the one at N fails. */
int tpl__pread_at(int fd, void *buf, size_t len, uint64_t off, uint64_t *at);

/* tpl__pread_at without the offset. */
int tpl__pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Writes exactly `len` bytes, retrying on EINTR and partial writes. */
int tpl__write_full(int fd, const void *buf, size_t len);

/* Reads a whole regular file of at most `cap` bytes into a NUL-terminated
 * malloc'd buffer (*buf, caller frees) with its length in *len. */
int tpl__read_file(const char *path, size_t cap, char **buf, size_t *len,
                   struct tpl__error *err);

/* Joins dir and name with '/' into a malloc'd string, NULL on ENOMEM. */
char *tpl__path_join(const char *dir, const char *name);

/* The directory part of `path` as a malloc'd string: "." for a bare
 * name, "/" for a name in the root; NULL on ENOMEM. */
char *tpl__dir_of(const char *path);

/* Returns 1 when `path` is a directory, 0 otherwise. */
int tpl__is_dir(const char *path);

/* Returns 1 when `path` exists (any type, not following links), else 0. */
int tpl__exists(const char *path);

/* Fsyncs the directory `dir` so that a rename in it is durable.  Returns
 * 0 or -errno. */
int tpl__fsync_dir(const char *dir);

/* Which step of tpl__atomic_commit failed. */
enum tpl__atomic_step {
  TPL__ATOMIC_SYNC = 1, /* fsync or close of the temp file */
  TPL__ATOMIC_RENAME,   /* renaming it over the target */
  TPL__ATOMIC_DIRSYNC   /* fsyncing the directory (the target is removed) */
};

/* A file being written under a temporary name beside its target. */
struct tpl__atomic {
  int fd;     /* the temp file, open for writing; -1 once closed */
  int step;   /* after a failed commit, the enum tpl__atomic_step */
  char *path; /* the target (owned) */
  char *tmp;  /* the temp file, in the target's directory (owned) */
  char *dir;  /* the target's directory (owned) */
};

/* Creates the temp file for writing `path` atomically and fills `a`; the
 * caller writes to a->fd, then calls tpl__atomic_commit or
 * tpl__atomic_abort.  `tmp` names the temp file, which must be in the same
 * directory as `path`; NULL means DIR/.NAME.tmp.PID.  A stale file at the
 * temp name is replaced.  Returns 0, -ENOMEM, or -errno with err naming
 * the temp file ("TMP: cannot create: ..."); on failure `a` holds
 * nothing. */
int tpl__atomic_open(const char *path, const char *tmp, struct tpl__atomic *a,
                     struct tpl__error *err);

/* Fsyncs and closes the temp file, renames it over the target and fsyncs
 * the directory.  Always releases `a`.  Returns 0 or -errno with a->step
 * and err naming the step: "PATH: cannot write: ..." (fsync, close),
 * "PATH: cannot rename into place: ..." or "DIR: cannot sync directory:
 * ..."; on failure neither the temp file nor the target remains. */
int tpl__atomic_commit(struct tpl__atomic *a, struct tpl__error *err);

/* Closes and removes the temp file and releases `a`; the target is left
 * as it was.  Safe on an `a` already released. */
void tpl__atomic_abort(struct tpl__atomic *a);

/* Writes `len` bytes to DIR/NAME atomically (temp DIR/.NAME.tmp.PID,
 * fsync, rename, directory fsync).  Returns 0 or -errno with err reading
 * "DIR/NAME: cannot write: ..."; on failure neither the temp file nor
 * DIR/NAME remains (a failed directory fsync removes the new file). */
int tpl__write_file_atomic(const char *dir, const char *name, const void *data,
                           size_t len, struct tpl__error *err);

#endif
