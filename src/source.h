/* source.h - where the checkpoint's bytes come from.  A reader (rank 0's
 * stream, --read local) asks a source for "the bytes [off, off + len) of
 * file f into this buffer" and does not know how they are fetched.  A
 * request is started, then finished (several may be open at once, so a
 * reader can deliver one extent while the next ones are read); a source
 * with nothing to overlap does all of it in finish.
 *
 * The one implementation here reads local files (tpl__source_files_open):
 * per file, either O_DIRECT through io_uring (large aligned requests, many
 * in flight, completed out of order; the aligned superset of an extent is
 * read and the extent sliced from it, see tpl__source_place) or buffered
 * pread as before.  The second implementation reads objects on an HTTP
 * server with ranged GETs (source_http.h). */
#ifndef TPL_SOURCE_H
#define TPL_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct tpl__fdcache; /* fdcache.h */
struct tpl__span;    /* http_multipart.h */

/* --io: how files are read. */
enum tpl__io_mode {
  TPL_IO_AUTO,    /* direct when the file is mostly not in the page cache */
  TPL_IO_DIRECT,  /* O_DIRECT when the file system takes it */
  TPL_IO_BUFFERED /* through the page cache */
};

/* Parses auto|direct|buffered into *mode; -1 when it is none of them. */
int tpl__io_mode_parse(const char *s, int *mode);

/* How a file was read in the end (the report's word for it). */
enum tpl__io_used {
  TPL_IO_USED_BUFFERED,
  TPL_IO_USED_DIRECT,
  TPL_IO_USED_HTTP,    /* ranged GETs (source_http.h): whole reads in flight */
  TPL_IO_USED_GATHERED /* a presharded MODEL's full tensors, rebuilt from
                          its rank files (reshard.h): whole reads */
};

const char *tpl__io_used_name(int used);

/* The bytes of a read that are its source's, private (SQLite's
 * szOsFile): each source says how many of them it uses
 * (tpl__source.read_size) and checks at compile time that they fit.  The
 * largest is the HTTP source's (the client's read, with room for its
 * error message). */
#define TPL_READ_PRIV 2048

/* One read: the bytes [off, off + len) of file `file` land at dst (placed
 * by tpl__source_place when the buffer is to hold them).  The source's
 * own state lives in `priv`, zeroed by the caller before the start (a
 * compound literal does it); the caller owns the struct, and must not
 * move it, until it is finished. */
struct tpl__read {
  uint32_t file;
  uint64_t off, len;
  uint8_t *dst;
  /* Optional, where the source's spans_max is over 1: the read is these
   * ranges of the file ([off, off + len) frames them), each landing at
   * its own dst (a multi-range GET, http.h). */
  const struct tpl__span *spans;
  size_t nspans;
  _Alignas(16) unsigned char priv[TPL_READ_PRIV]; /* the source's */
};

struct tpl__source;

struct tpl__source_ops {
  /* Where in buf (of tpl__source_slack(s) bytes more than the extents it
   * holds) an extent of `file` starting at `off` is to land. */
  uint8_t *(*place)(struct tpl__source *s, uint32_t file, uint8_t *buf,
                    uint64_t off);
  /* Starts the read (it may not complete before finish). */
  int (*start)(struct tpl__source *s, struct tpl__read *r,
               struct tpl__error *err);
  /* Waits until the read's bytes are at r->dst.  Returns 0 or -errno
   * (-EIO when the file ended early); err names the file and offset. */
  int (*finish)(struct tpl__source *s, struct tpl__read *r,
                struct tpl__error *err);
  /* Waits for whatever is still in flight and frees the source. */
  void (*close)(struct tpl__source *s);
  /* The bytes [off, off + len) of `file` are wanted soon (buffered: the
   * kernel reads them ahead; a source may do nothing). */
  void (*hint)(struct tpl__source *s, uint32_t file, uint64_t off,
               uint64_t len);
  /* Optional: moves the reads in flight along without waiting, for a
   * caller that waits on something else; 1 while any is in flight. */
  int (*pump)(struct tpl__source *s);
  /* Optional: the ranges a read of `file` may have now (tpl__read.spans):
   * spans_max, or 1 where the file's server refused a multi-range GET. */
  size_t (*spans)(struct tpl__source *s, uint32_t file);
  /* Optional: the caller's own transfers held it up before its next read
   * (waited) or not; a source sharing their link may start fewer
   * requests while they do (HTTP: tpl__http_yield). */
  void (*yield)(struct tpl__source *s, int waited);
};

struct tpl__source {
  const struct tpl__source_ops *ops;
  uint64_t slack;   /* bytes a buffer needs beyond its extents */
  size_t read_size; /* bytes of a read's priv the source uses */
  size_t nfiles;
  uint8_t *used;   /* per file: enum tpl__io_used */
  uint64_t *align; /* per file: what offsets, lengths and buffers of its
                      direct reads are aligned to (bytes; 0: buffered) */
  char note[256];  /* a fallback to tell (one line), "" when none: at
                      open, or at a file's first direct read (a file
                      system that takes O_DIRECT opens, not the reads) */
  uint64_t gets;   /* requests made so far (HTTP: GETs; files: 0) */
  /* Optional: called as parts of a read complete (every request). */
  void (*progress)(void *ctx);
  void *progress_ctx;
  /* Optional: called at least every millisecond while finish waits on a
   * remote read (the caller's own transfers then move, e.g. MPI's). */
  void (*idle)(void *ctx);
  void *idle_ctx;
  /* The ranges a read may have (tpl__read.spans; 0: none): over 1 where
   * the source asks for them in one request (HTTP's multi-range GETs). */
  size_t spans_max;
};

static inline void tpl__source_on_progress(struct tpl__source *s,
                                           void (*fn)(void *ctx), void *ctx) {
  s->progress = fn;
  s->progress_ctx = ctx;
}

static inline void tpl__source_on_idle(struct tpl__source *s,
                                       void (*fn)(void *ctx), void *ctx) {
  s->idle = fn;
  s->idle_ctx = ctx;
}

/* Opens a source over the n files held in `files` (fdcache.h: open while
 * they are read, a bounded number at once, each re-open checked against
 * the identity validated; paths name them in messages; both must outlive
 * the source), reading each as `mode` says: auto reads a file most of
 * which is in the page cache buffered, any other direct.  Direct needs
 * O_DIRECT on the file (reopened from the descriptor, never the path)
 * and io_uring; where either is refused the file is read buffered and
 * s->note says why.  A file whose first direct read fails with EINVAL or
 * EOPNOTSUPP is read again, and from then on, buffered, with the note
 * (its s->used changes then).  A direct read pins its file open until it
 * is finished.  Returns 0, -ENOMEM, or what tpl__fdcache_get returns for
 * a file that cannot be had (err names it). */
int tpl__source_files_open(struct tpl__source **s, struct tpl__fdcache *files,
                           const char *const *paths, size_t n, int mode,
                           struct tpl__error *err);

static inline uint64_t tpl__source_slack(const struct tpl__source *s) {
  return s->slack;
}

static inline uint8_t *tpl__source_place(struct tpl__source *s, uint32_t file,
                                         uint8_t *buf, uint64_t off) {
  return s->ops->place(s, file, buf, off);
}

static inline int tpl__source_start(struct tpl__source *s, struct tpl__read *r,
                                    struct tpl__error *err) {
  return s->ops->start(s, r, err);
}

static inline int tpl__source_finish(struct tpl__source *s, struct tpl__read *r,
                                     struct tpl__error *err) {
  return s->ops->finish(s, r, err);
}

static inline void tpl__source_hint(struct tpl__source *s, uint32_t file,
                                    uint64_t off, uint64_t len) {
  s->ops->hint(s, file, off, len);
}

/* The ranges one read of `file` may have now (1: one range a read). */
static inline size_t tpl__source_spans(struct tpl__source *s, uint32_t file) {
  size_t n = s->ops->spans != NULL ? s->ops->spans(s, file) : s->spans_max;
  return n > 1 ? n : 1;
}

static inline void tpl__source_yield(struct tpl__source *s, int waited) {
  if (s->ops->yield != NULL) s->ops->yield(s, waited);
}

/* The source's pump, if it has one; 0 when nothing is in flight. */
static inline int tpl__source_pump(struct tpl__source *s) {
  return s->ops->pump != NULL ? s->ops->pump(s) : 0;
}

/* start and finish: the whole read, now. */
int tpl__source_read(struct tpl__source *s, uint32_t file, uint8_t *dst,
                     uint64_t len, uint64_t off, struct tpl__error *err);

/* Whether file `file` is read direct or over HTTP: in whole reads that
 * are started and finished (in flight meanwhile), into buffers placed by
 * tpl__source_place, not piece by piece. */
static inline int tpl__source_direct(const struct tpl__source *s,
                                     uint32_t file) {
  return s->used[file] != TPL_IO_USED_BUFFERED;
}

/* Frees the source (NULL is ignored). */
void tpl__source_close(struct tpl__source *s);

/* The fraction of the open file fd (size bytes) in the page cache, by
 * cachestat(2), else mincore on a mapping; -1 when neither answers. */
double tpl__resident_fraction(int fd, uint64_t size);

/* Whether the page cache holds enough of it that --io auto reads it
 * buffered (and --read auto counts it warm). */
int tpl__resident_enough(int fd, uint64_t size);

#endif
