/* ready.h - the ready file's lifecycle (`serve --ready-file F`): claimed
 * before the load (a stale one removed, one of a live job refused, an
 * unsafe path refused), written atomically by rank 0 once every rank
 * serves, and removed at exit only by the job that wrote it. */
#ifndef TPL_READY_H
#define TPL_READY_H

#include <stdint.h>

#include "common.h"

/* Before any byte moves: `path` must be nothing or a regular file (no
 * symbolic link, no directory) in an existing directory this process can
 * write.  A ready file left by a job that is gone (its pid is not a
 * running process) is removed; one whose pid still runs is refused.
 * Returns 0 or TPL_EOUTPUT / -errno with err naming the path. */
int tpl__ready_claim(const char *path, struct tpl__error *err);

/* Writes {"socket_dir", "world_size", "pid", "job_id", "generation"} to
 * `path` atomically (temp file, fsync, rename, directory fsync): again
 * after each reload.  Returns 0 or TPL_EOUTPUT with err naming the path. */
int tpl__ready_write(const char *path, const char *socket_dir, uint32_t world,
                     const char *job_id, uint64_t generation,
                     struct tpl__error *err);

/* Removes `path` when it still carries `job_id` (another job's ready
 * file is left alone). */
void tpl__ready_release(const char *path, const char *job_id);

#endif
