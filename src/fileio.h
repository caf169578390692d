/* fileio.h - careful file access for readers and writers: regular-file
 * checks, full preads where a short read is an I/O error (a file that
 * shrank), and whole-file reads with a hard cap. */
#ifndef TPL_FILEIO_H
#define TPL_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Opens `path` read-only, refusing anything but a regular file.  Stores the
 * fd and the file size.  Returns 0, -errno (-ENOENT when missing) or
 * TPL_EFORMAT for a non-regular file; err names the path. */
int tpl__open_regular(const char *path, int *fd, uint64_t *size,
                      struct tpl_error *err);

/* Reads exactly `len` bytes at `off`, retrying on EINTR and partial reads.
 * Returns 0, -errno, or -EIO when the file ends early. */
int tpl__pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Writes exactly `len` bytes, retrying on EINTR and partial writes. */
int tpl__write_full(int fd, const void *buf, size_t len);

/* Reads a whole regular file of at most `cap` bytes into a NUL-terminated
 * malloc'd buffer (*buf, caller frees) with its length in *len. */
int tpl__read_file(const char *path, size_t cap, char **buf, size_t *len,
                   struct tpl_error *err);

/* Joins dir and name with '/' into a malloc'd string, NULL on ENOMEM. */
char *tpl__path_join(const char *dir, const char *name);

/* Returns 1 when `path` is a directory, 0 otherwise. */
int tpl__is_dir(const char *path);

/* Returns 1 when `path` exists (any type, not following links), else 0. */
int tpl__exists(const char *path);

#endif
