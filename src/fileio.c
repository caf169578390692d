/* fileio.c - careful file access: regular-file checks, full preads and
 * writes, capped whole-file reads.  A short read is -EIO: a file that
 * shrank while we read it is an I/O error, never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

int tpl__open_regular(const char *path, int *fd, uint64_t *size,
                      struct tpl_error *err) {
  struct stat st;
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f < 0) {
    int e = errno;
    return tpl__fail(err, -e, "%s: cannot open: %s", path, strerror(e));
  }
  if (fstat(f, &st) != 0) {
    int e = errno;
    close(f);
    return tpl__fail(err, -e, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a regular file, found another file type",
                     path);
  }
  /* O_NONBLOCK only kept open() from hanging on a FIFO; clear it. */
  fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK);
  *fd = f;
  *size = (uint64_t)st.st_size;
  return 0;
}

int tpl__pread_full(int fd, void *buf, size_t len, uint64_t off) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = pread(fd, p, len, (off_t)off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -EIO;
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}

int tpl__write_full(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int tpl__read_file(const char *path, size_t cap, char **buf, size_t *len,
                   struct tpl_error *err) {
  int fd, rc;
  uint64_t size;
  char *b;
  rc = tpl__open_regular(path, &fd, &size, err);
  if (rc != 0) return rc;
  if (size > cap) {
    close(fd);
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: expected at most %zu bytes, found %llu", path, cap,
                     (unsigned long long)size);
  }
  b = malloc((size_t)size + 1);
  if (b == NULL) {
    close(fd);
    return tpl__fail(err, -ENOMEM, "%s: out of memory", path);
  }
  rc = tpl__pread_full(fd, b, (size_t)size, 0);
  close(fd);
  if (rc != 0) {
    free(b);
    return tpl__fail(err, rc, "%s: read failed: %s", path, tpl_strerror(rc));
  }
  b[size] = '\0';
  *buf = b;
  *len = (size_t)size;
  return 0;
}

char *tpl__path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (p == NULL) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

int tpl__is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tpl__exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}
