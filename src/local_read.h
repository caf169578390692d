/* local_read.h - `--read local`: a rank copies its own slice of every
 * tensor it holds from the checkpoint's files into its store itself,
 * instead of receiving it from rank 0.  A slice that is contiguous in the
 * file is read straight into the store (one copy, page cache to store), and
 * so is a strided one (a dim-1 cut) of long pieces, a read per piece; one
 * of short pieces is read through a window and gathered.  From a file the
 * source reads direct (O_DIRECT), every step goes through the window: its
 * contiguous part, or the whole step of a strided slice.  From a URL, a
 * strided slice is fetched as its own pieces only, a ranged GET per run of
 * them (pieces a short gap apart joined), several in flight at once.  A tensor
 * whose bytes land as the rank holds them is hashed a window at a time, while
 * the window is still in cache.  No MPI: the engine broadcasts the job (with
 * its files) and agrees on the outcome. */
#ifndef TPL_LOCAL_READ_H
#define TPL_LOCAL_READ_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fdcache.h"
#include "http_multipart.h"
#include "job.h"
#include "source.h"
#include "store.h"

/* Opens every file of job->files and holds it in a new cache, *files
 * (fdcache.h: index f is job file f; open while read, re-checked at each
 * re-open), checking that each is the file rank 0 validated: a regular
 * file of the same size and modification time.  Returns 0, TPL_ENOMODEL
 * (a file is missing or cannot be opened), TPL_EMISMATCH (its size or
 * time differs) or TPL_EINTERNAL (the job has no files); err names the
 * file and what differs.  A remote file (a MODEL URL's: its url is set)
 * is not opened nor held.  Free with tpl__fdcache_free. */
int tpl__local_open(const struct tpl__job *job, struct tpl__fdcache **files,
                    struct tpl__error *err);

/* Whether every file of the job, held in `files`, is warm: the page cache
 * holds enough of it that --io auto reads it buffered (source.h).  A
 * file that cannot be reopened or measured is not warm. */
int tpl__local_warm(const struct tpl__job *job, struct tpl__fdcache *files);

/* Checks that file f, held in `files` (not held: remote), still has the
 * size and time of job->files[f].  Returns 0 or -EIO (74) naming it: it
 * changed while loading.  A remote file is 0: its source checked every
 * answer. */
int tpl__local_unchanged(const struct tpl__job *job, uint32_t f,
                         struct tpl__fdcache *files, struct tpl__error *err);

struct tpl__local_read {
  const struct tpl__job *job; /* placed for this rank's stage */
  uint32_t rank;              /* global rank: what it holds, its shard */
  struct tpl__fdcache *files; /* job->nfiles files (fdcache.h) */
  struct tpl__source *src;    /* reads them (source.h) */
  struct tpl__store *store;
  uint8_t *window; /* for strided slices; also the step of reads */
  uint64_t window_len;
  uint64_t direct_len;    /* the step of files read direct: each step is
                             read into the window (placed by the source,
                             which needs direct_len + its slack) */
  uint64_t piece_min;     /* strided slices of pieces this long and longer
                             are read piece by piece, not through the window */
  uint64_t run_gap;       /* from a URL: pieces at most this many bytes apart
                             are one GET (see tpl__read_gap_default) */
  uint64_t run_gap_multi; /* ... while the file's runs go to multi-range
                             GETs (a run costs a part there, not a GET) */
  /* Called with each held tensor whose bytes need finishing (decoding,
   * scaling: see tpl__job_bytes_final) once they are in the store; it
   * sets the tensor's checksum.  The others' are set here. */
  int (*finish)(void *ctx, size_t i, struct tpl__error *err);
  /* Optional: nonzero for a tensor this rank holds but does not read
   * (another rank of its node reads it and hands it over after). */
  int (*skip)(void *ctx, size_t i);
  /* Optional: called every window_len bytes or so (inside a tensor too)
   * and at the end with the bytes read into the store so far and the
   * rank's total. */
  void (*progress)(void *ctx, uint64_t done, uint64_t total);
  void *ctx;
  /* out: bytes read from the files, seconds reading, gathering and
   * hashing */
  uint64_t bytes_read;
  double t_read, t_pack, t_hash;
  uint64_t landed, shown, total; /* inside: progress so far */
  struct tpl__read *runs;        /* inside: an HTTP source's GETs */
  struct tpl__span *spans;       /* inside: their ranges (multi-range) */
};

/* --read-gap's defaults: the bytes a GET costs, below which a gap
 * between two pieces is fetched rather than a GET more made.  Plain
 * http(s): a request's headers and its turn through the client and
 * server (measured on loopback nginx, DESIGN.md); s3:// and hf://: a GET
 * there is priced, rate-limited per prefix (S3: about 5,500 GET/s) and
 * tens of milliseconds to its first byte (hf:// a redirect more). */
#define TPL_READ_GAP_HTTP ((uint64_t)8 << 10)
#define TPL_READ_GAP_PRICED ((uint64_t)256 << 10)
/* The default while a file's runs go to multi-range GETs: a run costs a
 * part of one (its framing, ~130 bytes, and ~7 us of CPU: about 1 KB at
 * 1 Gbit/s; DESIGN.md). */
#define TPL_READ_GAP_MULTI ((uint64_t)1 << 10)
#define TPL_READ_GAP_AUTO UINT64_MAX /* --read-gap not given */

/* The gap for MODEL `model` when --read-gap is not given: priced for an
 * s3:// or hf:// one, else plain http's. */
uint64_t tpl__read_gap_default(const char *model);

/* Reads this rank's slice of every tensor it holds (and does not skip)
 * into its store, in job order, then checks every file is unchanged.  Returns
 * 0, -errno from a read (-EIO when a file ended early; err names the file,
 * offset and tensor), -EIO when a file changed, or what `finish` returned. */
int tpl__local_read_all(struct tpl__local_read *lr, struct tpl__error *err);

#endif
