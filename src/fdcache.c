/* fdcache.c - a model's files open only while they are read, at most
 * `cap` descriptors at once, each re-open checked against the identity
 * the file had when validated (fdcache.h).  The least recently used file
 * is found by a scan: caches hold a few thousand files at most, and a
 * scan per re-open costs nothing beside the open itself. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdcache.h"
#include "fileio.h"

#define CAP_MAX 256
#define CAP_MIN 2

struct entry {
  char *path; /* owned; NULL: nothing held at this index */
  struct tpl__file_id id;
  int fd, dfd;   /* -1 when closed */
  uint64_t used; /* the tick of its last use */
  unsigned pins;
};

struct tpl__fdcache {
  struct entry *e;
  size_t n;
  size_t cap, open; /* descriptors at most, and open now */
  uint64_t tick;
};

struct tpl__file_id tpl__file_id_of(const struct stat *st) {
  return (struct tpl__file_id){(uint64_t)st->st_dev, (uint64_t)st->st_ino,
                               (uint64_t)st->st_size, tpl__mtime_ns(st)};
}

size_t tpl__fdcache_default_cap(void) {
  struct rlimit rl;
  size_t cap = CAP_MAX;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur / 4 < CAP_MAX)
    cap = (size_t)rl.rlim_cur / 4;
  return cap < CAP_MIN ? CAP_MIN : cap;
}

struct tpl__fdcache *tpl__fdcache_new(size_t cap) {
  struct tpl__fdcache *c = calloc(1, sizeof(*c));
  if (c != NULL) c->cap = cap ? cap : tpl__fdcache_default_cap();
  return c;
}

static void close_entry(struct tpl__fdcache *c, struct entry *e) {
  if (e->dfd >= 0) {
    close(e->dfd);
    c->open--;
  }
  if (e->fd >= 0) {
    close(e->fd);
    c->open--;
  }
  e->fd = e->dfd = -1;
}

void tpl__fdcache_free(struct tpl__fdcache *c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->n; i++) {
    close_entry(c, &c->e[i]);
    free(c->e[i].path);
  }
  free(c->e);
  free(c);
}

static int grow(struct tpl__fdcache *c, uint32_t idx) {
  struct entry *e;
  if (idx < c->n) return 0;
  e = realloc(c->e, ((size_t)idx + 1) * sizeof(*e));
  if (e == NULL) return -ENOMEM;
  for (size_t i = c->n; i <= idx; i++)
    e[i] = (struct entry){.fd = -1, .dfd = -1};
  c->e = e;
  c->n = (size_t)idx + 1;
  return 0;
}

/* Closes the least recently used open file other than `keep` that no
 * read has pinned; 0 when there was one, -1 when none. */
static int evict_one(struct tpl__fdcache *c, uint32_t keep) {
  struct entry *lru = NULL;
  for (size_t i = 0; i < c->n; i++) {
    struct entry *e = &c->e[i];
    if (i != keep && e->fd >= 0 && e->pins == 0 &&
        (lru == NULL || e->used < lru->used))
      lru = e;
  }
  if (lru == NULL) return -1;
  close_entry(c, lru);
  return 0;
}

/* Closes files until `more` descriptors fit in the bound (or only
 * pinned ones are left: reads in flight may take it past). */
static void make_room(struct tpl__fdcache *c, uint32_t keep, size_t more) {
  while (c->open + more > c->cap && evict_one(c, keep) == 0) {
  }
}

static void touch(struct tpl__fdcache *c, struct entry *e) {
  e->used = ++c->tick;
}

int tpl__fdcache_hold(struct tpl__fdcache *c, uint32_t idx, const char *path,
                      int fd, struct tpl__file_id *id) {
  struct stat st;
  char *p = strdup(path);
  int rc = p != NULL ? grow(c, idx) : -ENOMEM;
  if (rc == 0 && fstat(fd, &st) != 0) rc = -errno;
  if (rc != 0) {
    close(fd);
    free(p);
    return rc;
  }
  close_entry(c, &c->e[idx]);
  free(c->e[idx].path);
  c->e[idx].path = p;
  c->e[idx].id = tpl__file_id_of(&st);
  make_room(c, idx, 1);
  c->e[idx].fd = fd;
  c->open++;
  touch(c, &c->e[idx]);
  if (id != NULL) *id = c->e[idx].id;
  return 0;
}

int tpl__fdcache_held(const struct tpl__fdcache *c, uint32_t idx) {
  return c != NULL && idx < c->n && c->e[idx].path != NULL;
}

const char *tpl__fdcache_path(const struct tpl__fdcache *c, uint32_t idx) {
  return tpl__fdcache_held(c, idx) ? c->e[idx].path : NULL;
}

/* How the file open as fd differs from the identity held, NULL when it
 * does not. */
static const char *differs(const struct tpl__file_id *was, int fd) {
  struct stat st;
  struct tpl__file_id now;
  if (fstat(fd, &st) != 0) return "it can no longer be examined";
  now = tpl__file_id_of(&st);
  if (now.dev != was->dev || now.ino != was->ino)
    return "another file took its place";
  if (now.size != was->size) return "its size changed";
  if (now.mtime_ns != was->mtime_ns) return "it was modified";
  return NULL;
}

/* Opens file idx's path again: when the limit is reached, every file not
 * pinned is closed and the open tried once more. */
static int reopen(struct tpl__fdcache *c, uint32_t idx,
                  struct tpl__error *err) {
  struct entry *e = &c->e[idx];
  uint64_t size;
  const char *what;
  int fd, rc;
  make_room(c, idx, 1);
  rc = tpl__open_regular(e->path, &fd, &size, err);
  if (rc == -EMFILE) {
    make_room(c, idx, c->cap + 1);
    rc = tpl__open_regular(e->path, &fd, &size, err);
  }
  if (rc == -ENOENT || rc == TPL_EFORMAT)
    return tpl__changed_while_loading(e->path, "it is gone", err);
  if (rc != 0) return rc;
  what = differs(&e->id, fd);
  if (what != NULL) {
    close(fd);
    return tpl__changed_while_loading(e->path, what, err);
  }
  e->fd = fd;
  c->open++;
  return 0;
}

int tpl__fdcache_get(struct tpl__fdcache *c, uint32_t idx, int *fd,
                     struct tpl__error *err) {
  int rc;
  if (!tpl__fdcache_held(c, idx))
    return tpl__fail(err, TPL_EINTERNAL, "file %u of the model is not open",
                     (unsigned)idx);
  if (c->e[idx].fd < 0 && (rc = reopen(c, idx, err)) != 0) return rc;
  touch(c, &c->e[idx]);
  *fd = c->e[idx].fd;
  return 0;
}

/* file idx (open as fd) opened again with O_DIRECT; -errno when refused
 * or when it is not the same inode. */
static int open_direct(struct entry *e) {
  char proc[64];
  struct stat st;
  int dfd;
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", e->fd);
  dfd = open(proc, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (dfd < 0) return -errno;
  if (fstat(dfd, &st) != 0 || (uint64_t)st.st_ino != e->id.ino ||
      (uint64_t)st.st_dev != e->id.dev) {
    close(dfd);
    return -EINVAL;
  }
  e->dfd = dfd;
  return 0;
}

int tpl__fdcache_direct(struct tpl__fdcache *c, uint32_t idx, int *dfd,
                        struct tpl__error *err) {
  int fd, rc = tpl__fdcache_get(c, idx, &fd, err);
  if (rc != 0) return rc;
  if (c->e[idx].dfd < 0) {
    make_room(c, idx, 1);
    if ((rc = open_direct(&c->e[idx])) != 0) return rc;
    c->open++;
  }
  *dfd = c->e[idx].dfd;
  return 0;
}

void tpl__fdcache_pin(struct tpl__fdcache *c, uint32_t idx) {
  if (idx < c->n) c->e[idx].pins++;
}

void tpl__fdcache_unpin(struct tpl__fdcache *c, uint32_t idx) {
  if (idx < c->n && c->e[idx].pins > 0) c->e[idx].pins--;
}

size_t tpl__fdcache_cap(const struct tpl__fdcache *c) {
  return c->cap;
}

size_t tpl__fdcache_open_now(const struct tpl__fdcache *c) {
  return c->open;
}
