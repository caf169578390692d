/* fmt_safetensors.h - the strict safetensors header parser: bytes in,
 * tensors out.  No I/O (the checkpoint loader reads the header). */
#ifndef TPL_FMT_SAFETENSORS_H
#define TPL_FMT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Checks the 8-byte length prefix of a safetensors file of `file_size`
 * bytes whose first `len` bytes are in `buf`; stores the header length N.
 * Fails (TPL_EFORMAT / TPL_ELIMIT) when the file is shorter than 8 bytes or
 * N > 100,000,000 or N > file_size - 8.  `fname` is used in messages. */
int tpl__st_header_len(const void *buf, size_t len, uint64_t file_size,
                       const char *fname, uint64_t *header_len,
                       struct tpl__error *err);

/* Parses a whole safetensors header: `buf` holds at least the first
 * 8 + N bytes of a file of `file_size` bytes.  Appends its tensors (file
 * index `file_idx`, absolute offsets) to `m` in data-offset order.  On
 * failure `m` may hold some of the tensors; callers free it. */
int tpl__st_parse(const void *buf, size_t len, uint64_t file_size,
                  const char *fname, uint32_t file_idx, struct tpl__model *m,
                  struct tpl__error *err);

#endif
