/* mlc_md5.h - --verify-md5 (DESIGN.md section 4.3): every shard file of
 * an MLC directory read whole through a source and checked against its
 * record's md5sum, by rank 0 before the load or by `inspect`; no MPI. */
#ifndef TPL_MLC_MD5_H
#define TPL_MLC_MD5_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "source.h"

/* The files of m a pass hashes: all of them, but for an MLC presharded
 * cache (reshard.h) its own files, not the virtual one its full tensors
 * are read from. */
size_t tpl__mlc_md5_nfiles(const struct tpl__model *m);

/* The refusals before a byte is read: `m` (opened from `model`) must be
 * an MLC weight directory or an MLC presharded cache, whose file records
 * carry the same md5sums, else TPL_EUSAGE naming its format (no other
 * format records an md5sum); every file record must carry an md5sum of
 * 32 hex digits, else TPL_EFORMAT naming the file (TVM's writer records
 * one on every file it writes: a cache without one was written by
 * something else, and the check asked for cannot be made). */
int tpl__mlc_md5_ready(const struct tpl__model *m, const char *model,
                       struct tpl__error *err);

struct tpl__mlc_md5 {
  struct tpl__source *src;    /* over m's files, in order */
  const struct tpl__model *m; /* the files: path, size, md5 */
  uint64_t chunk;             /* bytes per read (several in flight) */
  /* Optional: called on the caller's thread as bytes are hashed. */
  void (*progress)(void *ctx, uint64_t done, uint64_t total);
  void *ctx;
  uint64_t bytes; /* out: bytes hashed */
  double seconds; /* out: the pass's time */
};

/* Hashes every file of v->m (several side by side, each by a thread of
 * its own; only the calling thread uses the source) and compares each
 * with its record as it ends.  Returns 0, TPL_EMISMATCH for the lowest
 * file whose sum differs (one message: the file, the md5sum recorded and the
 * one found), or the source's failure.  No read is in flight on return. */
int tpl__mlc_md5_verify(struct tpl__mlc_md5 *v, struct tpl__error *err);

/* One process (`inspect --verify-md5`): tpl__mlc_md5_verify over m's
 * files through a source of its own (the files m holds, --io auto;
 * or m's client's ranged GETs for a URL), in v->src meanwhile. */
int tpl__mlc_md5_model(struct tpl__model *m, struct tpl__mlc_md5 *v,
                       struct tpl__error *err);

#endif
