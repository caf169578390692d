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

/* A sink's check of output directory DIR on `rank` (its own node's
 * view): creates it if missing; it must be a directory owned by this
 * user, writable by no one else (or sticky), and files can be created in
 * it.  Returns 0 or TPL_EOUTPUT / -errno. */
int tpl__preshard_check_dir(const char *dir, uint32_t rank,
                            struct tpl__error *err);

/* 0 when DIR holds no entry; else TPL_EOUTPUT naming one ("pass --force
 * to replace"). */
int tpl__preshard_require_empty(const char *dir, struct tpl__error *err);

/* --force's cleaning of DIR: removes the `nmarks` files `marks` first
 * (what vouches for a complete output: a half-replaced directory never
 * looks complete), then every entry `is_old` says is an earlier run's.
 * Missing files are fine.  Returns 0 or TPL_EOUTPUT. */
int tpl__preshard_remove_old(const char *dir, const char *const *marks,
                             size_t nmarks, int (*is_old)(const char *name),
                             struct tpl__error *err);

/* `n` bytes at `p` to fd, a MiB at a time, beating (c->beat) between
 * steps.  Returns 0 or -errno. */
int tpl__preshard_write_beating(int fd, const uint8_t *p, size_t n,
                                const struct tpl__coord *c);

/* fsync(fd), beating every 100 ms while it runs.  Returns 0 or -errno. */
int tpl__preshard_fsync_beating(int fd, const struct tpl__coord *c);

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
