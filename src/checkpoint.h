/* checkpoint.h - opening a checkpoint: MODEL's origin (origin.h) opens
 * it, in the format its files say (format.h: one .safetensors file, a
 * sharded index, an MLC weight directory), and the model's reads after
 * go through that origin. */
#ifndef TPL_CHECKPOINT_H
#define TPL_CHECKPOINT_H

#include <stddef.h>

#include "http.h"
#include "model.h"

/* Opens MODEL (a .safetensors file, a directory with model.safetensors or
 * model.safetensors.index.json, or an MLC weight directory), validates it
 * strictly and returns the table in *out (free with tpl__model_free).
 * Every member file is opened once and stays open in the model (raising
 * the soft RLIMIT_NOFILE to the hard limit) so that readers use the
 * descriptors validated here, never the paths again.
 * Returns 0, TPL_E* for bad data, or -errno. */
int tpl__model_open(const char *path, struct tpl__model **out,
                    struct tpl__error *err);

/* tpl__model_open, and with `presharded` nonzero an MLC cache presharded
 * by MLC's layout (records "NAME_shard-K") is read as it is, for listing
 * or checking it; never a model to shard. */
int tpl__model_open_flags(const char *path, int presharded,
                          struct tpl__model **out, struct tpl__error *err);

/* tpl__model_open_flags, where MODEL may also be an http:// or https://
 * URL (url.h), read with a client of options `http` (NULL: the
 * defaults; ckpt_remote.h): its files are then recorded with their URL,
 * size and validators, not held open.  Returns tpl__model_open's codes
 * and the client's (http.h). */
int tpl__model_open_with(const char *path, const struct tpl__http_opts *http,
                         int presharded, struct tpl__model **out,
                         struct tpl__error *err);

/* Reads the bytes [off, off + len) of file `idx` of `m` into dst: from
 * the descriptor validated at open, or, for a remote file, with ranged
 * GETs checked against the size and ETag the server gave then.  Returns
 * 0 or a failure with err naming the file (-EIO for a file that ended
 * early or changed; the client's codes, http.h). */
int tpl__model_read(const struct tpl__model *m, uint32_t idx, void *dst,
                    uint64_t len, uint64_t off, struct tpl__error *err);

/* Checks that file `idx` of `m` is still the file validated at open, as
 * its origin tells (origin.h; local: its path still names the held file,
 * device and inode, with the size and mtime recorded then; http: every
 * answer is checked as it comes, so 0).  Returns 0, or -EIO (exit 74)
 * with err naming the file and what changed. */
int tpl__model_file_unchanged(const struct tpl__model *m, uint32_t idx,
                              struct tpl__error *err);

/* Reads member `name` of the model's directory (config.json), a local
 * file or one fetched from the model's server, whole, at most `cap`
 * bytes, into a NUL-terminated malloc'd *buf (caller frees).  Returns 0,
 * -ENOENT when there is none, or another code with err naming it. */
int tpl__model_read_member(const struct tpl__model *m, const char *name,
                           size_t cap, char **buf, size_t *len,
                           struct tpl__error *err);

#endif
