/* readers.h - the checkpoint readers.  Each parser takes a buffer and a
 * length (never a path), checks every size against overflow, the bytes
 * really present and a hard cap before allocating, and appends to a
 * struct tpl_model.  The *_load wrappers do the file I/O. */
#ifndef TPL_READERS_H
#define TPL_READERS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* --- safetensors (src/safetensors.c) --- */

/* Checks the 8-byte length prefix of a safetensors file of `file_size`
 * bytes whose first `len` bytes are in `buf`; stores the header length N.
 * Fails (TPL_EFORMAT / TPL_ELIMIT) when the file is shorter than 8 bytes or
 * N > 100,000,000 or N > file_size - 8.  `fname` is used in messages. */
int tpl__st_header_len(const void *buf, size_t len, uint64_t file_size,
                       const char *fname, uint64_t *header_len,
                       struct tpl_error *err);

/* Parses a whole safetensors header: `buf` holds at least the first
 * 8 + N bytes of a file of `file_size` bytes.  Appends its tensors (file
 * index `file_idx`, absolute offsets) to `m` in data-offset order.  On
 * failure `m` may hold some of the tensors; callers free it. */
int tpl__st_parse(const void *buf, size_t len, uint64_t file_size,
                  const char *fname, uint32_t file_idx, struct tpl_model *m,
                  struct tpl_error *err);

/* Opens `path` (refusing non-regular files), reads its header with pread
 * and appends its tensors to `m` as file `name`.  The first tensor added is
 * at index *first (may be NULL). */
int tpl__st_load(const char *path, const char *name, struct tpl_model *m,
                 struct tpl_error *err);

/* --- sharded index (src/st_index.c) --- */

/* Parses model.safetensors.index.json (`buf`, `len`) from directory `dir`:
 * checks every weight_map file stays inside `dir`, loads each file once in
 * sorted name order, and checks the map and the files agree exactly. */
int tpl__st_index_parse(const char *buf, size_t len, const char *dir,
                        struct tpl_model *m, struct tpl_error *err);

/* Confines a file name read from a model's JSON (`name`, `len` bytes) to
 * `dir`: refuses an empty name, a NUL byte, an absolute path, any '/',
 * "." and "..", and a symlink resolving outside realpath(dir).  A missing
 * file is -ENOENT.  `what` (the JSON file) and `ctx` (e.g. "tensor 'x'")
 * go into messages.  On success *path is dir/name, malloc'd (caller
 * frees).  Shared by the index and MLC readers. */
int tpl__member_path(const char *dir, const char *name, size_t len,
                     const char *what, const char *ctx, char **path,
                     struct tpl_error *err);

/* --- MLC weight directory (src/mlc_cache.c) --- */

/* Parses tensor-cache.json / ndarray-cache.json (`buf`, `len`) found in
 * `dir` as file `cache_name` and appends every record to `m`. */
int tpl__mlc_parse(const char *buf, size_t len, const char *dir,
                   const char *cache_name, struct tpl_model *m,
                   struct tpl_error *err);

#endif
