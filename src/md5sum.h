/* md5sum.h - the "md5sum" of an MLC weight directory's files as TVM's
 * tensor-cache writer records it (tvm/contrib/tvmjs.py, _calculate_md5):
 * the MD5 of the whole params_shard_*.bin file, as 32 lowercase hex
 * digits (hashlib's hexdigest), on every file record it writes.  One place
 * for the hashing (nettle), the hex form and the mismatch message: the
 * writer of presharded caches, `verify --layout mlc` and --verify-md5. */
#ifndef TPL_MD5SUM_H
#define TPL_MD5SUM_H

#include <nettle/md5.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* 32 hex digits and the NUL. */
#define TPL_MD5_HEX 33

struct tpl__md5 {
  struct md5_ctx ctx;
};

static inline void tpl__md5_init(struct tpl__md5 *m) {
  md5_init(&m->ctx);
}

static inline void tpl__md5_update(struct tpl__md5 *m, const void *p,
                                   size_t n) {
  md5_update(&m->ctx, n, p);
}

/* The 16 bytes of the sum so far (the context starts over). */
static inline void tpl__md5_digest(struct tpl__md5 *m, uint8_t sum[16]) {
  md5_digest(&m->ctx, 16, sum);
}

/* The 16 bytes `sum` as TVM writes them: 32 lowercase hex digits. */
void tpl__md5_hex(const uint8_t sum[16], char hex[TPL_MD5_HEX]);

/* The md5sum of the `size` bytes of the open file fd (pread, from offset
 * 0).  Returns 0, -errno, or TPL_ESHORT when the file ends early. */
int tpl__md5_file(int fd, uint64_t size, char hex[TPL_MD5_HEX]);

/* A recorded md5sum (`s`, `len` bytes) in the form compared: 32 hex
 * digits, lowercased into hex.  Returns 0, or -1 for anything else. */
int tpl__md5_parse(const char *s, size_t len, char hex[TPL_MD5_HEX]);

/* Compares file `path`'s md5sum `found` with the one `what` (e.g.
 * "tensor-cache.json") records (`want`, NULL when none is).  Returns 0,
 * or `code` with the one message: the file, the expected sum (or that
 * none is recorded) and the one found. */
int tpl__md5_check(const char *path, const char *what, const char *want,
                   const char *found, int code, struct tpl__error *err);

#endif
