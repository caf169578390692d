/* preshard.h - writing one rank's shard to DIR/rank{R}.safetensors with no
 * partial file ever visible: the data go to an anonymous file in DIR
 * (O_TMPFILE) that is fsynced and only then given its name.  The sink
 * runs the job-wide order itself (write, agree, publish, shard-info.json)
 * through the engine's coordination interface (coord.h). */
#ifndef TPL_PRESHARD_H
#define TPL_PRESHARD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"
#include "fileio.h" /* tpl__write_file_atomic, used with these */
#include "job.h"
#include "st_writer.h"
#include "store.h"

/* The safetensors header of global rank `rank`'s file on grid `g`: the
 * `n` tensors `t` back to back in that order, `__metadata__` {"tp_rank":
 * t, "tp_size": T}, and on a grid with P x D > 1 also "rank",
 * "world_size", "pp_rank": p, "pp_size": P, "dp_rank": d, "dp_size": D
 * (so one TP group's files are what they always were).  The one
 * definition preshard and `tpload dump` share, so a dump is byte for byte
 * the rank file.  *hdr is malloc'd (caller frees).  Returns 0, -ENOMEM or
 * TPL_EOVERFLOW. */
int tpl__rank_file_header(const struct tpl__st_out *t, size_t n,
                          const struct tpl__grid *g, uint32_t rank,
                          uint8_t **hdr, size_t *len);

/* Rank 0's check before loading: DIR exists or can be created; without
 * `force`, it must be empty (old output, the model's own files or
 * anything else is refused).  With
 * `force`, removes the old shard-info.json (so a half-replaced directory
 * never looks complete) and every old rank<digits>.safetensors (so fewer
 * ranks than last time leave no stale file).  Returns 0 or TPL_EOUTPUT /
 * -errno. */
int tpl__preshard_prepare(const char *dir, int force, struct tpl_error *err);

/* Every rank's check of DIR before any byte moves (what its own node
 * sees): creates it if missing; it must be a directory owned by this
 * user, writable by no one else (or sticky), and this process must be
 * able to create files in it (tested by creating one).  Returns 0 or
 * TPL_EOUTPUT. */
int tpl__preshard_check_dir(const char *dir, struct tpl_error *err);

/* A rank file being written: unnamed (O_TMPFILE) where the filesystem
 * allows it, else a hidden temp name that is removed on failure. */
struct tpl__shard_file {
  int fd;    /* -1 when none */
  int named; /* 1: lives at DIR/.rank{R}.safetensors.tmp */
};

/* Writes this rank's safetensors file (header with its place in the
 * grid, tpl__rank_file_header; the tensors its stage holds, in
 * checkpoint order) to a file no reader will take for
 * output and fsyncs it.  Disk full is -ENOSPC (exit 74).  On failure
 * nothing is left in DIR and f->fd is -1. */
int tpl__preshard_write(const char *dir, const struct tpl__job *job,
                        const struct tpl__store *store, uint32_t rank,
                        struct tpl__shard_file *f, struct tpl_error *err);

/* Gives the written file its name DIR/rank{R}.safetensors (replacing an
 * old one), fsyncs DIR and closes it.  On failure the file is gone. */
int tpl__preshard_publish(const char *dir, uint32_t rank,
                          struct tpl__shard_file *f, struct tpl_error *err);

/* Drops a written but unpublished file (after a failure elsewhere). */
void tpl__preshard_discard(const char *dir, uint32_t rank,
                           struct tpl__shard_file *f);

/* Removes DIR/rank{R}.safetensors (after a failure elsewhere). */
void tpl__preshard_unpublish(const char *dir, uint32_t rank);

/* The preshard sink's options; must outlive the load. */
struct tpl__preshard_opts {
  const char *dir;
  int force; /* replace existing output */
};

/* The preshard sink: rank 0 prepares DIR (tpl__preshard_prepare), every
 * rank checks it (tpl__preshard_check_dir), then after the load every
 * rank writes its file, they agree, publish, agree, and rank 0 writes
 * shard-info.json last; on any failure every rank removes what it
 * published, so DIR holds a complete output or none. */
struct tpl__sink tpl__preshard_sink(const struct tpl__preshard_opts *o);

#endif
