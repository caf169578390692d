/* preshard.h - writing one rank's shard to DIR/rank{R}.safetensors with no
 * partial file ever visible: the data go to an anonymous file in DIR
 * (O_TMPFILE) that is fsynced and only then given its name; the engine
 * coordinates the ranks between the steps. */
#ifndef TPL_PRESHARD_H
#define TPL_PRESHARD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "job.h"
#include "store.h"

/* Rank 0's check before loading: DIR exists or can be created; without
 * `force`, it must hold no rank*.safetensors or shard-info.json.  With
 * `force`, removes the old shard-info.json (so a half-replaced directory
 * never looks complete) and every old rank<digits>.safetensors (so fewer
 * ranks than last time leave no stale file).  Returns 0 or TPL_EOUTPUT /
 * -errno. */
int tpl__preshard_prepare(const char *dir, int force, struct tpl_error *err);

/* Writes this rank's safetensors file (header with metadata tp_rank,
 * tp_size; tensors in checkpoint order) to an unnamed file in DIR and
 * fsyncs it; *fd receives it.  Disk full is -ENOSPC (exit 74). */
int tpl__preshard_write(const char *dir, const struct tpl__job *job,
                        const struct tpl__store *store, uint32_t rank,
                        int *fd, struct tpl_error *err);

/* Gives the file written by tpl__preshard_write its name
 * DIR/rank{R}.safetensors (replacing an old one), fsyncs DIR, closes fd. */
int tpl__preshard_publish(const char *dir, uint32_t rank, int fd,
                          struct tpl_error *err);

/* Removes DIR/rank{R}.safetensors (after a failure elsewhere). */
void tpl__preshard_unpublish(const char *dir, uint32_t rank);

/* Writes `len` bytes to DIR/NAME atomically (temp name, fsync, rename,
 * directory fsync). */
int tpl__write_file_atomic(const char *dir, const char *name,
                           const void *data, size_t len,
                           struct tpl_error *err);

#endif
