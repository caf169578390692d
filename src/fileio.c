/* fileio.c - careful file access: regular-file checks, full preads and
 * writes, capped whole-file reads, atomic writes.  A short read is
 * TPL_ESHORT (exit 74, as the device's own -EIO): a file that shrank while
 * we read it is an I/O error, never a crash, and told apart from a bad
 * sector.  An atomic write goes to a temp file in the target's directory
 * that is fsynced, renamed over the target, and the directory fsynced: a
 * reader sees the old file or the whole new one, and a failure leaves
 * neither the temp file nor a half-durable target. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

/* EMFILE names the limit: a model's files are open only while they are
 * read, at most a quarter of the limit at once (fdcache.h; the soft limit
 * is raised to the hard one first, tpl__raise_fd_limit), so this is a
 * limit too low even for that, or one the rest of the process used up. */
static int too_many_open(const char *path, struct tpl__error *err) {
  struct rlimit rl = {0, 0};
  getrlimit(RLIMIT_NOFILE, &rl);
  return tpl__fail(err, -EMFILE,
                   "%s: cannot open: %s (the limit is %llu open files, hard "
                   "limit %llu: too few for a model's files read a few at a "
                   "time beside MPI's and the sockets'; raise `ulimit -Hn`)",
                   path, strerror(EMFILE), (unsigned long long)rl.rlim_cur,
                   (unsigned long long)rl.rlim_max);
}

int tpl__changed_while_loading(const char *path, const char *what,
                               struct tpl__error *err) {
  return tpl__fail(err, -EIO,
                   "%s: changed while loading (%s); expected the file "
                   "validated at start",
                   path, what);
}

int tpl__open_regular(const char *path, int *fd, uint64_t *size,
                      struct tpl__error *err) {
  struct stat st;
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f < 0 && errno == EMFILE) return too_many_open(path, err);
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

int64_t tpl__mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

void tpl__raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* The test-only bad byte (tpl__pread_at), UINT64_MAX when none. */
static uint64_t test_eio_offset(void) {
  static uint64_t at;
  static int known;
  if (!known) {
    const char *v = getenv("TPLOAD_TEST_EIO_OFFSET");
    char *end = NULL;
    unsigned long long n = v != NULL ? strtoull(v, &end, 10) : 0;
    at = v != NULL && *v != '\0' && *end == '\0' ? (uint64_t)n : UINT64_MAX;
    known = 1;
  }
  return at;
}

/* pread, or as much of it as comes before the test's bad byte, which
 * fails with EIO. */
static ssize_t pread_once(int fd, uint8_t *p, size_t len, uint64_t off) {
  uint64_t bad = test_eio_offset();
  if (bad != UINT64_MAX && bad >= off && bad - off < len) {
    if (bad == off) {
      errno = EIO;
      return -1;
    }
    len = (size_t)(bad - off);
  }
  return pread(fd, p, len, (off_t)off);
}

int tpl__pread_at(int fd, void *buf, size_t len, uint64_t off, uint64_t *at) {
  uint8_t *p = buf;
  int rc = 0;
  while (len > 0 && rc == 0) {
    ssize_t n = pread_once(fd, p, len, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = n < 0 ? -errno : TPL_ESHORT;
      break;
    }
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  if (rc != 0 && at != NULL) *at = off;
  return rc;
}

int tpl__pread_full(int fd, void *buf, size_t len, uint64_t off) {
  return tpl__pread_at(fd, buf, len, off, NULL);
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
                   struct tpl__error *err) {
  int fd, rc;
  uint64_t size, at = 0;
  char *b = NULL;
  rc = tpl__open_regular(path, &fd, &size, err);
  if (rc != 0) return rc;
  if (size > cap)
    rc =
        tpl__fail(err, TPL_ELIMIT, "%s: expected at most %zu bytes, found %llu",
                  path, cap, (unsigned long long)size);
  else if ((b = malloc((size_t)size + 1)) == NULL)
    rc = tpl__fail(err, -ENOMEM, "%s: out of memory", path);
  else if ((rc = tpl__pread_at(fd, b, (size_t)size, 0, &at)) != 0)
    rc = tpl__fail(err, rc, "%s: read failed at offset %llu: %s", path,
                   (unsigned long long)at, tpl_strerror(rc));
  close(fd);
  if (rc != 0) {
    free(b);
    return rc;
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

char *tpl__dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return strdup(".");
  return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

int tpl__is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tpl__exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

int tpl__fsync_dir(const char *dir) {
  int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
  if (d < 0) return -errno;
  if (fsync(d) != 0) rc = -errno;
  close(d);
  return rc;
}

static void atomic_free(struct tpl__atomic *a) {
  free(a->path);
  free(a->tmp);
  free(a->dir);
  a->path = a->tmp = a->dir = NULL;
}

/* The directory part of `path` ("." for a bare name) and, when `tmp` is
 * NULL, the default temp name DIR/.NAME.tmp.PID.  Returns 0 or -ENOMEM. */
static int atomic_names(const char *path, const char *tmp,
                        struct tpl__atomic *a) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  a->path = strdup(path);
  a->dir = tpl__dir_of(path);
  if (tmp != NULL) {
    a->tmp = strdup(tmp);
  } else {
    size_t n = strlen(path) + 32;
    a->tmp = malloc(n);
    if (a->tmp != NULL)
      snprintf(a->tmp, n, "%.*s.%s.tmp.%ld", (int)(base - path), path, base,
               (long)getpid());
  }
  if (a->path != NULL && a->dir != NULL && a->tmp != NULL) return 0;
  atomic_free(a);
  return -ENOMEM;
}

int tpl__atomic_open(const char *path, const char *tmp, struct tpl__atomic *a,
                     struct tpl__error *err) {
  int e;
  a->fd = -1;
  a->step = 0;
  if (atomic_names(path, tmp, a) != 0)
    return tpl__fail(err, -ENOMEM, "%s: out of memory", path);
  /* O_EXCL after the unlink: never write through a planted symlink. */
  unlink(a->tmp);
  a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (a->fd >= 0) return 0;
  e = errno;
  tpl__fail(err, -e, "%s: cannot create: %s", a->tmp, strerror(e));
  atomic_free(a);
  return -e;
}

static int atomic_finish(struct tpl__atomic *a) {
  int rc = 0;
  a->step = TPL__ATOMIC_SYNC;
  if (fsync(a->fd) != 0) rc = -errno;
  if (close(a->fd) != 0 && rc == 0) rc = -errno;
  a->fd = -1;
  if (rc != 0) return rc;
  a->step = TPL__ATOMIC_RENAME;
  if (rename(a->tmp, a->path) != 0) return -errno;
  a->step = TPL__ATOMIC_DIRSYNC;
  rc = tpl__fsync_dir(a->dir);
  if (rc != 0) unlink(a->path);
  return rc;
}

int tpl__atomic_commit(struct tpl__atomic *a, struct tpl__error *err) {
  int rc = atomic_finish(a);
  if (rc == 0) {
    a->step = 0;
  } else if (a->step == TPL__ATOMIC_DIRSYNC) {
    tpl__fail(err, rc, "%s: cannot sync directory: %s", a->dir, strerror(-rc));
  } else {
    unlink(a->tmp);
    tpl__fail(err, rc, "%s: %s: %s", a->path,
              a->step == TPL__ATOMIC_SYNC ? "cannot write"
                                          : "cannot rename into place",
              strerror(-rc));
  }
  atomic_free(a);
  return rc;
}

void tpl__atomic_abort(struct tpl__atomic *a) {
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
  if (a->tmp != NULL) unlink(a->tmp);
  atomic_free(a);
}

int tpl__write_file_atomic(const char *dir, const char *name, const void *data,
                           size_t len, struct tpl__error *err) {
  struct tpl__atomic a;
  char *path = tpl__path_join(dir, name);
  int rc;
  if (path == NULL) return tpl__oom(err);
  rc = tpl__atomic_open(path, NULL, &a, err);
  if (rc == 0) {
    rc = tpl__write_full(a.fd, data, len);
    if (rc != 0)
      tpl__atomic_abort(&a);
    else
      rc = tpl__atomic_commit(&a, err);
  }
  if (rc != 0)
    tpl__fail(err, rc, "%s: cannot write: %s", path, tpl_strerror(rc));
  free(path);
  return rc;
}
