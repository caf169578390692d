/* ckpt_files.h - the checkpoint loader's file side: confining, opening and
 * holding the files a checkpoint is made of, and loading one safetensors
 * file (header read here, parsed by fmt_safetensors). */
#ifndef TPL_CKPT_FILES_H
#define TPL_CKPT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Confines a file name read from a model's JSON (`name`, `len` bytes) to
 * `dir`: the syntax rule of tpl__model_check_file_name, then a symlink
 * must resolve inside realpath(dir) (or, for a snapshot of the HF hub
 * cache, inside its repository's blobs).  A missing file is -ENOENT.
 * `what` (the JSON file) and `ctx` (e.g. "tensor 'x'") go into messages.
 * On success *path is dir/name, malloc'd (caller frees). */
int tpl__member_path(const char *dir, const char *name, size_t len,
                     const char *what, const char *ctx, char **path,
                     struct tpl_error *err);

/* Opens file `idx` of `m` (its path already confined), refusing a
 * non-regular file and a size other than the one the parser recorded
 * from the JSON (`what`, the JSON file, and `ctx` go into messages), and
 * hands the descriptor to the model (tpl__model_hold_fd).  Returns 0,
 * -errno, or TPL_EFORMAT. */
int tpl__member_open(struct tpl_model *m, uint32_t idx, const char *what,
                     const char *ctx, struct tpl_error *err);

/* Opens `path` (refusing non-regular files), reads its header with pread
 * and appends its tensors to `m` as file `name`, whose descriptor the
 * model keeps.  Returns 0, TPL_E* for bad data, or -errno. */
int tpl__st_load(const char *path, const char *name, struct tpl_model *m,
                 struct tpl_error *err);

#endif
