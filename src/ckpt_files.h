/* ckpt_files.h - the checkpoint loader's file side: confining, opening and
 * holding the files a checkpoint is made of, and loading one safetensors
 * file (header read here, parsed by fmt_safetensors). */
#ifndef TPL_CKPT_FILES_H
#define TPL_CKPT_FILES_H

#include <stdint.h>

#include "model.h"

/* Confines `path` (dir/name, `name` as a checkpoint's JSON gives it and
 * its parser checked, tpl__model_check_file_name) to `dir`: the file must
 * exist, and a symlink must resolve inside realpath(dir) (or, for a
 * snapshot of the HF hub cache, inside its repository's blobs).  A missing
 * file is -ENOENT.  `what` (the JSON file) and `ctx` (e.g. "tensor 'x'")
 * go into messages. */
int tpl__member_confine(const char *dir, const char *path, const char *name,
                        const char *what, const char *ctx,
                        struct tpl__error *err);

/* Confines file `idx` of `m` to m->dir (tpl__member_confine) and opens
 * it, refusing a non-regular file and a size other than the one the parser
 * recorded from the JSON (`what`, the JSON file, and `ctx` go into messages),
 * and hands the descriptor to the model (tpl__model_hold_fd).  Returns 0,
 * -errno, or TPL_EFORMAT. */
int tpl__member_open(struct tpl__model *m, uint32_t idx, const char *what,
                     const char *ctx, struct tpl__error *err);

/* Opens `path` (refusing non-regular files), reads its header with pread
 * and appends its tensors to `m` as file `name`, whose descriptor the
 * model keeps.  Returns 0, TPL_E* for bad data, or -errno. */
int tpl__st_load(const char *path, const char *name, struct tpl__model *m,
                 struct tpl__error *err);

#endif
