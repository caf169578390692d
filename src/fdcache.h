/* fdcache.h - a model's files held by identity, open only while they are
 * read.  A file is validated once, by descriptor, and its identity kept
 * (device, inode, size, modification time); from then on the cache hands
 * out a descriptor of it, opening the path again when the one it had was
 * closed, and refusing (-EIO, "changed while loading") a path that now
 * names another file or the same file changed.  At most `cap`
 * descriptors are open at once (a file's O_DIRECT one counts too): the
 * least recently used one that no read has pinned is closed to make
 * room.  So a directory of more files than the descriptor limit loads,
 * and the bytes still come from the files that were validated.
 * Single-threaded: one cache is used by one thread at a time. */
#ifndef TPL_FDCACHE_H
#define TPL_FDCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common.h"

/* What a file was when validated. */
struct tpl__file_id {
  uint64_t dev, ino, size;
  int64_t mtime_ns;
};

/* The identity in st. */
struct tpl__file_id tpl__file_id_of(const struct stat *st);

struct tpl__fdcache;

/* The default bound: a quarter of the descriptor limit (RLIMIT_NOFILE's
 * soft limit, which tpl__raise_fd_limit raises to the hard one), at most
 * 256 and at least 2 (a file's descriptor and its O_DIRECT one).  The
 * rest of the limit is MPI's, the sockets' and a second model's (a
 * reload holds two). */
size_t tpl__fdcache_default_cap(void);

/* An empty cache of at most `cap` open descriptors (0: the default);
 * NULL on ENOMEM.  Free with tpl__fdcache_free. */
struct tpl__fdcache *tpl__fdcache_new(size_t cap);

/* Closes every descriptor and frees the cache; NULL is accepted. */
void tpl__fdcache_free(struct tpl__fdcache *c);

/* Takes fd, open on file `idx` at `path` (copied), with its identity
 * from fstat, into *id when id is not NULL.  The cache owns fd from here
 * (it is closed on failure) and may close it, or others, to stay within
 * its bound.  A file held before at idx is replaced.  Returns 0, -ENOMEM
 * or fstat's -errno. */
int tpl__fdcache_hold(struct tpl__fdcache *c, uint32_t idx, const char *path,
                      int fd, struct tpl__file_id *id);

/* Whether file idx was held (remote files and unknown indexes are not). */
int tpl__fdcache_held(const struct tpl__fdcache *c, uint32_t idx);

/* The path file idx was held at (the cache's), NULL when not held. */
const char *tpl__fdcache_path(const struct tpl__fdcache *c, uint32_t idx);

/* A descriptor of file idx into *fd, opened again by its path when it
 * was closed and checked against the identity held.  It stays valid
 * until the next call on c that opens a file (which may close it),
 * unless idx is pinned.  Returns 0, -EIO naming the file when the path
 * names another file now or the file changed ("changed while loading"),
 * -EMFILE naming the limit when not even one more descriptor can be
 * opened, another -errno naming it, or TPL_EINTERNAL when idx was not
 * held. */
int tpl__fdcache_get(struct tpl__fdcache *c, uint32_t idx, int *fd,
                     struct tpl__error *err);

/* An O_DIRECT descriptor of file idx into *dfd: opened from its
 * descriptor (/proc/self/fd, the same file whatever the path names) when
 * there is none, checked to be the same inode, kept with it and closed
 * with it.  Returns 0, what tpl__fdcache_get returns, or -errno of the
 * O_DIRECT open (-EINVAL: the file system refuses O_DIRECT), without a
 * message for that one (err untouched). */
int tpl__fdcache_direct(struct tpl__fdcache *c, uint32_t idx, int *dfd,
                        struct tpl__error *err);

/* Pins file idx's descriptors open while reads of them are in flight
 * (io_uring holds the number): a pinned file is never closed to make
 * room.  Each pin is undone by one unpin. */
void tpl__fdcache_pin(struct tpl__fdcache *c, uint32_t idx);
void tpl__fdcache_unpin(struct tpl__fdcache *c, uint32_t idx);

/* The bound, and the descriptors open now (for tests and messages). */
size_t tpl__fdcache_cap(const struct tpl__fdcache *c);
size_t tpl__fdcache_open_now(const struct tpl__fdcache *c);

#endif
