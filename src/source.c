/* source.c - local files as a source (source.h): per file O_DIRECT
 * through io_uring, or buffered pread. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdcache.h"
#include "fileio.h"
#include "source.h"

/* Requests of this size (the last of an extent shorter), at most DEPTH
 * in flight.  Measured on this machine's virtio disk (docs/PERFORMANCE.md):
 * 1 MiB requests 16 deep read as fast as fio's 4 MiB 64 deep.
 * TPLOAD_IO_REQUEST_KIB and TPLOAD_IO_DEPTH set them. */
#define REQUEST_BYTES_DEFAULT ((uint64_t)1 << 20)
#define DEPTH_DEFAULT 16u
#define DEPTH_MAX 256u

/* A file at least this much in the page cache is read buffered by --io
 * auto, and counts as warm for --read auto. */
#define RESIDENT_ENOUGH 0.5

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture */
#endif

static const char *const mode_names[] = {
    [TPL_IO_AUTO] = "auto",
    [TPL_IO_DIRECT] = "direct",
    [TPL_IO_BUFFERED] = "buffered",
};

int tpl__io_mode_parse(const char *s, int *mode) {
  for (int i = 0; i < (int)ARRAY_SIZE(mode_names); i++)
    if (strcmp(s, mode_names[i]) == 0) {
      *mode = i;
      return 0;
    }
  return -1;
}

const char *tpl__io_used_name(int used) {
  return used == TPL_IO_USED_DIRECT     ? "direct"
         : used == TPL_IO_USED_HTTP     ? "http"
         : used == TPL_IO_USED_GATHERED ? "gathered"
                                        : "buffered";
}

/* --- residency --- */

struct cachestat_range {
  uint64_t off, len;
};

struct cachestat_out {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static double by_cachestat(int fd, uint64_t size) {
  struct cachestat_range range = {0, 0}; /* len 0: to the end */
  struct cachestat_out cs;
  long page = sysconf(_SC_PAGESIZE);
  if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0) return -1;
  return (double)cs.nr_cache * (double)page / (double)size;
}

static double by_mincore(int fd, uint64_t size) {
  long page = sysconf(_SC_PAGESIZE);
  size_t pages = (size_t)((size + (uint64_t)page - 1) / (uint64_t)page), in = 0;
  unsigned char *vec = malloc(pages);
  void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  double f = -1;
  if (vec != NULL && map != MAP_FAILED &&
      mincore(map, (size_t)size, vec) == 0) {
    for (size_t k = 0; k < pages; k++)
      in += vec[k] & 1;
    f = (double)in / (double)pages;
  }
  if (map != MAP_FAILED) munmap(map, (size_t)size);
  free(vec);
  return f;
}

double tpl__resident_fraction(int fd, uint64_t size) {
  double f;
  if (size == 0) return 1;
  f = by_cachestat(fd, size);
  return f >= 0 ? f : by_mincore(fd, size);
}

int tpl__resident_enough(int fd, uint64_t size) {
  return tpl__resident_fraction(fd, size) >= RESIDENT_ENOUGH;
}

/* --- the source --- */

/* A read's private state here (its priv, source.h). */
struct file_read {
  uint64_t next, end; /* direct: what is still to be submitted */
  uint8_t *base;      /* direct: where the aligned superset lands */
  uint64_t need_end;  /* direct: bytes past this may be missing (EOF) */
  size_t inflight;
  int direct; /* started direct (finished so, whatever the file does) */
  int dfd;    /* direct: the file's O_DIRECT descriptor, pinned open */
  int rc;
  uint64_t rc_off, rc_len; /* direct: the failed piece's bytes */
};

_Static_assert(sizeof(struct file_read) <= TPL_READ_PRIV,
               "a file read's state fits a read's priv");

static struct file_read *fr(struct tpl__read *r) {
  return (struct file_read *)r->priv;
}

struct piece {
  struct tpl__read *r;
  uint64_t off, len;
  uint8_t *dst;
  struct piece *next_free;
};

struct file_source {
  struct tpl__source base;
  struct tpl__fdcache *files; /* their descriptors, open while read */
  const char *const *paths;
  uint8_t *direct_ok; /* per file: a direct read of it succeeded */
  uint64_t *size;
  int ring_up;
  struct io_uring ring;
  uint64_t request;
  unsigned depth, inflight;
  struct piece *pieces, *free_pieces;
  struct tpl__read **open; /* reads with pieces still to submit (FIFO) */
  size_t nopen, capopen;
};

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t max) {
  const char *v = getenv(name);
  char *end;
  unsigned long long n;
  if (v == NULL || *v == '\0') return dflt;
  n = strtoull(v, &end, 10);
  return *end == '\0' && n > 0 && n <= max ? n : dflt;
}

/* A read of the `len` bytes from offset `off` (what one call asked,
 * after the bytes that did arrive) that failed: the file ended at `off`
 * (TPL_ESHORT: it shrank after it was validated), or the device failed
 * somewhere in them (EIO: a bad sector, a network filesystem's error;
 * the kernel does not say which byte). */
static int read_failed(const struct file_source *fs, uint32_t file,
                       uint64_t off, uint64_t len, int rc,
                       struct tpl__error *err) {
  if (rc == TPL_ESHORT)
    return tpl__fail(err, rc,
                     "%s: the file ended at offset %llu, shorter than when "
                     "it was validated (it shrank while loading)",
                     fs->paths[file], (unsigned long long)off);
  return tpl__fail(err, rc,
                   "%s: I/O error in the %llu bytes from offset %llu: %s",
                   fs->paths[file], (unsigned long long)len,
                   (unsigned long long)off, tpl_strerror(rc));
}

static uint64_t align_down(uint64_t x, uint64_t a) {
  return x / a * a;
}

static uint8_t *place(struct tpl__source *s, uint32_t file, uint8_t *buf,
                      uint64_t off) {
  if (!tpl__source_direct(s, file)) return buf;
  return buf + (off - align_down(off, s->align[file]));
}

/* --- buffered: the kernel's readahead, then pread --- */

/* Large reads are announced, so the kernel reads ahead while the caller
 * delivers what it has (small ones are finished at once anyway). */
static int buffered_start(struct file_source *fs, struct tpl__read *r) {
  int fd;
  if (r->len >= REQUEST_BYTES_DEFAULT &&
      tpl__fdcache_get(fs->files, r->file, &fd, NULL) == 0)
    posix_fadvise(fd, (off_t)r->off, (off_t)r->len, POSIX_FADV_WILLNEED);
  return 0; /* a file that cannot be had is told by the finish */
}

static void progressed(struct file_source *fs) {
  if (fs->base.progress != NULL) fs->base.progress(fs->base.progress_ctx);
}

/* A request's worth at a time, so progress is told inside large reads.
 * The descriptor is asked for each time: nothing else opens a file
 * meanwhile, so it is the same one unless a progress call read another
 * file (then the file is opened again and re-checked). */
static int buffered_finish(struct file_source *fs, struct tpl__read *r,
                           struct tpl__error *err) {
  for (uint64_t at = 0; at < r->len;) {
    uint64_t n = r->len - at < REQUEST_BYTES_DEFAULT ? r->len - at
                                                     : REQUEST_BYTES_DEFAULT;
    uint64_t bad = r->off + at;
    int fd, rc = tpl__fdcache_get(fs->files, r->file, &fd, err);
    if (rc != 0) return rc;
    rc = tpl__pread_at(fd, r->dst + at, (size_t)n, r->off + at, &bad);
    if (rc != 0)
      return read_failed(fs, r->file, bad, r->off + at + n - bad, rc, err);
    at += n;
    if (at < r->len) progressed(fs);
  }
  return 0;
}

/* --- direct: io_uring --- */

static void submit_piece(struct file_source *fs, struct piece *p) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&fs->ring);
  /* never NULL: the ring has room for every piece (depth entries) */
  io_uring_prep_read(sqe, fr(p->r)->dfd, p->dst, (unsigned)p->len, p->off);
  io_uring_sqe_set_data(sqe, p);
  fs->inflight++;
  fr(p->r)->inflight++;
}

/* For tests only: TPLOAD_TEST_SUBMIT_FAIL=N (read once) makes the Nth
 * submit of pieces (from 1) fail with EBUSY, its pieces left queued, as
 * a kernel short of room for requests does. */
static int test_submit(struct io_uring *ring) {
  static unsigned long long at, calls;
  static int known;
  if (!known) {
    const char *v = getenv("TPLOAD_TEST_SUBMIT_FAIL");
    char *end = NULL;
    unsigned long long n = v != NULL ? strtoull(v, &end, 10) : 0;
    if (v != NULL && *v != '\0' && *end == '\0') at = n;
    known = 1;
  }
  return at != 0 && ++calls == at ? -EBUSY : io_uring_submit(ring);
}

/* Submits pieces of the open reads, oldest first, while the depth
 * allows.  A failed submit leaves its pieces queued (drain submits them
 * again before it waits for them). */
static int pump(struct file_source *fs) {
  size_t done = 0;
  int n;
  while (done < fs->nopen && fs->free_pieces != NULL) {
    struct tpl__read *r = fs->open[done];
    struct file_read *d = fr(r);
    struct piece *p = fs->free_pieces;
    uint64_t len =
        d->end - d->next < fs->request ? d->end - d->next : fs->request;
    fs->free_pieces = p->next_free;
    p->r = r;
    p->off = d->next;
    p->len = len;
    p->dst = d->base + (d->next - align_down(r->off, fs->base.align[r->file]));
    submit_piece(fs, p);
    d->next += len;
    if (d->next == d->end) done++;
  }
  memmove(fs->open, fs->open + done, (fs->nopen - done) * sizeof(*fs->open));
  fs->nopen -= done;
  n = test_submit(&fs->ring);
  return n < 0 ? n : 0;
}

static void piece_free(struct file_source *fs, struct piece *p) {
  p->next_free = fs->free_pieces;
  fs->free_pieces = p;
}

/* A piece came back with res: done, resubmitted for its rest, or the
 * read's error (the first one is kept).  A read short of the alignment
 * is the end of the file: fine past need_end, else the file shrank. */
static void piece_done(struct file_source *fs, struct piece *p, int res) {
  struct tpl__read *r = p->r;
  struct file_read *d = fr(r);
  fs->inflight--;
  d->inflight--;
  if (res == -EAGAIN || res == -EINTR) {
    submit_piece(fs, p);
    return;
  }
  if (res > 0) {
    p->off += (uint64_t)res;
    p->dst += res;
    p->len -= (uint64_t)res;
  }
  if (p->len == 0 || p->off >= d->need_end) {
    piece_free(fs, p);
    return;
  }
  if (res > 0 && p->off % fs->base.align[r->file] == 0) {
    submit_piece(fs, p); /* short at an aligned offset: the rest */
    return;
  }
  if (d->rc == 0) {
    d->rc = res < 0 ? res : TPL_ESHORT; /* the file ended early */
    d->rc_off = p->off;
    d->rc_len = p->len;
  }
  piece_free(fs, p);
}

/* For tests only: TPLOAD_TEST_DIRECT_EINVAL=N (read once) fails every
 * direct request that reaches byte N of a file with EINVAL, as a file
 * system that takes O_DIRECT opens but not the reads does (libfuse's
 * passthrough example); 0 fails them all. */
static int test_einval(const struct piece *p, int res) {
  static uint64_t at = UINT64_MAX;
  static int known;
  if (!known) {
    const char *v = getenv("TPLOAD_TEST_DIRECT_EINVAL");
    char *end = NULL;
    unsigned long long n = v != NULL ? strtoull(v, &end, 10) : 0;
    if (v != NULL && *v != '\0' && *end == '\0') at = (uint64_t)n;
    known = 1;
  }
  return at != UINT64_MAX && p->off + p->len > at ? -EINVAL : res;
}

/* Takes completions until read r has none in flight and nothing left to
 * submit. */
static int reap(struct file_source *fs, struct tpl__read *r) {
  struct file_read *d = fr(r);
  while (d->inflight > 0 || d->next < d->end) {
    struct io_uring_cqe *cqe;
    int rc = pump(fs);
    if (rc == 0) rc = io_uring_wait_cqe(&fs->ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) return rc;
    struct piece *p = io_uring_cqe_get_data(cqe);
    piece_done(fs, p, test_einval(p, cqe->res));
    io_uring_cqe_seen(&fs->ring, cqe);
    progressed(fs);
  }
  return io_uring_submit(&fs->ring) < 0 ? -EIO : 0;
}

static void note(struct tpl__source *s, const char *path, const char *why) {
  if (s->note[0] == '\0')
    snprintf(s->note, sizeof(s->note), "%s: read buffered: %s", path, why);
}

/* The read's file's O_DIRECT descriptor into d->dfd, the file pinned
 * open until the read is finished (direct_finish).  Returns 1 when the
 * file system refuses the O_DIRECT open (a file closed to make room and
 * opened again): the file is read buffered from here on, with the note,
 * as when the first open was refused. */
static int direct_fd(struct file_source *fs, struct tpl__read *r,
                     struct tpl__error *err) {
  int fd, rc = tpl__fdcache_get(fs->files, r->file, &fd, err);
  if (rc != 0) return rc;
  rc = tpl__fdcache_direct(fs->files, r->file, &fr(r)->dfd, err);
  if (rc == -EINVAL || rc == -EOPNOTSUPP) {
    note(&fs->base, fs->paths[r->file], "its file system refuses O_DIRECT");
    fs->base.used[r->file] = TPL_IO_USED_BUFFERED;
    return 1;
  }
  if (rc != 0)
    return tpl__fail(err, rc, "%s: cannot open it again with O_DIRECT: %s",
                     fs->paths[r->file], tpl_strerror(rc));
  tpl__fdcache_pin(fs->files, r->file);
  return 0;
}

static int open_grow(struct file_source *fs, struct tpl__error *err) {
  size_t cap = fs->capopen ? fs->capopen * 2 : 8;
  struct tpl__read **o;
  if (fs->nopen < fs->capopen) return 0;
  o = realloc(fs->open, cap * sizeof(*o));
  if (o == NULL) return tpl__oom(err);
  fs->open = o;
  fs->capopen = cap;
  return 0;
}

static int direct_start(struct file_source *fs, struct tpl__read *r,
                        struct tpl__error *err) {
  struct file_read *d = fr(r);
  uint64_t a = fs->base.align[r->file];
  uint64_t end = r->off + r->len;
  int rc;
  d->next = align_down(r->off, a);
  d->end = (end + a - 1) / a * a;
  d->base = r->dst - (r->off - d->next);
  d->need_end = end;
  d->inflight = 0;
  d->rc = 0;
  d->dfd = -1;
  if (r->len == 0) return 0;
  if ((rc = open_grow(fs, err)) != 0 || (rc = direct_fd(fs, r, err)) != 0) {
    d->next = d->end; /* nothing to submit, nothing pinned */
    if (rc < 0) return rc;
    d->direct = 0; /* finished buffered (files_finish) */
    return buffered_start(fs, r);
  }
  fs->open[fs->nopen++] = r;
  rc = pump(fs);
  return rc == 0 ? 0 : read_failed(fs, r->file, r->off, r->len, rc, err);
}

/* Whether a direct read of file f that failed with rc is to be read
 * again buffered: the file fell back already (the read was started
 * before), or rc is the EINVAL or EOPNOTSUPP of a file system that took
 * the O_DIRECT open but refuses the reads (libfuse's passthrough
 * example), before any direct read of the file succeeded.  The file is
 * then read buffered from here on, with the note; its descriptor stays
 * open for the direct reads still in flight. */
static int falls_back(struct file_source *fs, uint32_t f, int rc) {
  if (!tpl__source_direct(&fs->base, f)) return 1;
  if ((rc != -EINVAL && rc != -EOPNOTSUPP) || fs->direct_ok[f]) return 0;
  note(&fs->base, fs->paths[f], "its file system refuses O_DIRECT reads");
  fs->base.used[f] = TPL_IO_USED_BUFFERED;
  return 1;
}

static int direct_finish(struct file_source *fs, struct tpl__read *r,
                         struct tpl__error *err) {
  struct file_read *d = fr(r);
  int rc = reap(fs, r);
  if (rc != 0) return read_failed(fs, r->file, r->off, r->len, rc, err);
  if (d->dfd >= 0) tpl__fdcache_unpin(fs->files, r->file);
  d->dfd = -1;
  if (d->rc != 0 && falls_back(fs, r->file, d->rc))
    return buffered_finish(fs, r, err);
  if (d->rc != 0)
    return read_failed(fs, r->file, d->rc_off, d->rc_len, d->rc, err);
  fs->direct_ok[r->file] = 1;
  return 0;
}

/* A read is finished the way it was started (its `direct`), whatever its
 * file does meanwhile (falls_back). */
static int files_start(struct tpl__source *s, struct tpl__read *r,
                       struct tpl__error *err) {
  struct file_source *fs = (struct file_source *)s;
  fr(r)->direct = tpl__source_direct(s, r->file);
  return fr(r)->direct ? direct_start(fs, r, err) : buffered_start(fs, r);
}

static int files_finish(struct tpl__source *s, struct tpl__read *r,
                        struct tpl__error *err) {
  struct file_source *fs = (struct file_source *)s;
  return fr(r)->direct ? direct_finish(fs, r, err)
                       : buffered_finish(fs, r, err);
}

/* Waits out every piece still in flight (their buffers are the caller's
 * until then).  Pieces a failed submit left queued are submitted first,
 * or no completion would come for them; when the ring takes none, the
 * job is ending (the read failed): the wait is given up. */
static void drain(struct file_source *fs) {
  fs->nopen = 0;
  while (fs->inflight > 0) {
    struct io_uring_cqe *cqe;
    int rc = io_uring_sq_ready(&fs->ring) > 0 ? io_uring_submit(&fs->ring) : 0;
    if (rc < 0 && rc != -EINTR) break;
    rc = io_uring_wait_cqe(&fs->ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) break;
    fs->inflight--;
    io_uring_cqe_seen(&fs->ring, cqe);
  }
}

static void files_close(struct tpl__source *s) {
  struct file_source *fs = (struct file_source *)s;
  if (fs->ring_up) {
    drain(fs);
    io_uring_queue_exit(&fs->ring);
  }
  free(fs->direct_ok);
  free(s->align);
  free(fs->size);
  free(fs->pieces);
  free(fs->open);
  free(s->used);
  free(fs);
}

static void files_hint(struct tpl__source *s, uint32_t file, uint64_t off,
                       uint64_t len) {
  struct file_source *fs = (struct file_source *)s;
  int fd;
  if (!tpl__source_direct(s, file) &&
      tpl__fdcache_get(fs->files, file, &fd, NULL) == 0)
    posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static const struct tpl__source_ops files_ops = {
    place,      files_start, files_finish, files_close,
    files_hint, NULL,        NULL,         NULL};

/* --- opening --- */

/* The alignment direct reads of dfd need (offsets and lengths), 0 when
 * the file system says it takes none. */
static uint64_t dio_align(int dfd) {
  struct statx sx;
  if (statx(dfd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 ||
      !(sx.stx_mask & STATX_DIOALIGN))
    return 4096; /* a kernel before 6.1: the page is always enough */
  if (sx.stx_dio_offset_align == 0) return 0;
  /* the buffers are page aligned; lengths follow the offsets */
  return sx.stx_dio_offset_align > sx.stx_dio_mem_align
             ? sx.stx_dio_offset_align
             : sx.stx_dio_mem_align;
}

/* For tests only: TPLOAD_TEST_REFUSE_DIRECT makes every O_DIRECT open
 * fail with EINVAL, as a file system that refuses O_DIRECT does. */
static int refuse_direct(void) {
  return getenv("TPLOAD_TEST_REFUSE_DIRECT") != NULL;
}

/* Whether file f is read direct: its O_DIRECT descriptor (opened from
 * its descriptor: the same file whatever its path names now) is in the
 * cache and its alignment known; 0 and a note when refused. */
static int open_direct(struct file_source *fs, uint32_t f) {
  int dfd, rc = refuse_direct() ? -EINVAL
                                : tpl__fdcache_direct(fs->files, f, &dfd, NULL);
  if (rc != 0) {
    note(&fs->base, fs->paths[f],
         rc == -EINVAL ? "its file system refuses O_DIRECT"
                       : "it cannot be opened with O_DIRECT");
    return 0;
  }
  if ((fs->base.align[f] = dio_align(dfd)) == 0) {
    note(&fs->base, fs->paths[f], "its file system refuses O_DIRECT");
    return 0;
  }
  return 1;
}

static int want_direct(struct file_source *fs, uint32_t f, int fd, int mode) {
  struct stat st;
  if (mode == TPL_IO_BUFFERED) return 0;
  if (fstat(fd, &st) != 0 || st.st_size == 0) return 0;
  fs->size[f] = (uint64_t)st.st_size;
  if (mode == TPL_IO_DIRECT) return 1;
  return !tpl__resident_enough(fd, fs->size[f]);
}

static int ring_open(struct file_source *fs) {
  fs->request =
      env_u64("TPLOAD_IO_REQUEST_KIB", REQUEST_BYTES_DEFAULT >> 10, 1u << 20)
      << 10;
  fs->depth = (unsigned)env_u64("TPLOAD_IO_DEPTH", DEPTH_DEFAULT, DEPTH_MAX);
  fs->pieces = calloc(fs->depth, sizeof(*fs->pieces));
  if (fs->pieces == NULL) return -ENOMEM;
  for (unsigned k = 0; k < fs->depth; k++)
    piece_free(fs, &fs->pieces[k]);
  if (io_uring_queue_init(fs->depth, &fs->ring, 0) != 0) return -1;
  fs->ring_up = 1;
  return 0;
}

/* Every file read buffered: io_uring is not there. */
static void all_buffered(struct file_source *fs) {
  for (size_t f = 0; f < fs->base.nfiles; f++)
    if (fs->base.used[f] == TPL_IO_USED_DIRECT) {
      note(&fs->base, fs->paths[f], "io_uring is not available");
      fs->base.used[f] = TPL_IO_USED_BUFFERED;
    }
}

static uint64_t max_align(const struct file_source *fs) {
  uint64_t a = 0;
  for (size_t f = 0; f < fs->base.nfiles; f++)
    if (tpl__source_direct(&fs->base, f) && fs->base.align[f] > a)
      a = fs->base.align[f];
  return a;
}

/* How each file is read (its used[]): a file at a time, so that only
 * the cache's bound of them is open at once. */
static int choose(struct file_source *fs, int mode, int *any,
                  struct tpl__error *err) {
  for (uint32_t f = 0; f < fs->base.nfiles; f++) {
    int fd, rc = tpl__fdcache_get(fs->files, f, &fd, err), direct;
    if (rc != 0) return rc;
    direct = want_direct(fs, f, fd, mode) && open_direct(fs, f);
    fs->base.used[f] = direct ? TPL_IO_USED_DIRECT : TPL_IO_USED_BUFFERED;
    *any |= direct;
  }
  return 0;
}

static struct file_source *files_alloc(size_t n) {
  struct file_source *fs = calloc(1, sizeof(*fs));
  if (fs == NULL) return NULL;
  fs->base.align = calloc(n + 1, sizeof(*fs->base.align));
  fs->size = calloc(n + 1, sizeof(*fs->size));
  fs->base.used = calloc(n + 1, 1);
  fs->direct_ok = calloc(n + 1, 1);
  if (!fs->base.align || !fs->size || !fs->base.used || !fs->direct_ok) {
    files_close(&fs->base);
    return NULL;
  }
  return fs;
}

int tpl__source_files_open(struct tpl__source **s, struct tpl__fdcache *files,
                           const char *const *paths, size_t n, int mode,
                           struct tpl__error *err) {
  struct file_source *fs = files_alloc(n);
  int any = 0, rc;
  if (fs == NULL) return tpl__oom(err);
  fs->base.ops = &files_ops;
  fs->base.read_size = sizeof(struct file_read);
  fs->base.nfiles = n;
  fs->files = files;
  fs->paths = paths;
  if ((rc = choose(fs, mode, &any, err)) != 0) {
    files_close(&fs->base);
    return rc;
  }
  if (any && ring_open(fs) != 0) all_buffered(fs);
  for (size_t f = 0; f < n; f++)
    if (!tpl__source_direct(&fs->base, f)) fs->base.align[f] = 0;
  fs->base.slack = 2 * max_align(fs);
  *s = &fs->base;
  return 0;
}

int tpl__source_read(struct tpl__source *s, uint32_t file, uint8_t *dst,
                     uint64_t len, uint64_t off, struct tpl__error *err) {
  struct tpl__read r = {.file = file, .off = off, .len = len, .dst = dst};
  int rc = tpl__source_start(s, &r, err);
  return rc != 0 ? rc : tpl__source_finish(s, &r, err);
}

void tpl__source_close(struct tpl__source *s) {
  if (s != NULL) s->ops->close(s);
}
