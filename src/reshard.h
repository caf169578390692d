/* reshard.h - a presharded directory (tpload's rank layout:
 * rank{R}.safetensors + shard-info.json, any grid) read as the
 * checkpoint of full tensors it was cut from.  The model's files are the
 * rank files, then one virtual file, rank*.safetensors, holding every
 * full tensor back to back in checkpoint order; its bytes are gathered:
 * reading an extent of it reads each tensor it touches from its shards'
 * holders (one contiguous read per rank file) and scatters them into
 * place (the inverse of the cut, shard.h), each shard checked against
 * shard-info.json's XXH3 as it is read.  Replicated tensors come from
 * their first holder; a bias held as bias / N is shard 0's copy times N,
 * rounded once (approximate unless exact, tpl__reshard_approximate).
 * The state hangs on the model (m->priv); the reads go to the rank
 * files through a callback, so the same gather serves the origin's
 * small reads and rank 0's stream (origin_presharded.c). */
#ifndef TPL_RESHARD_H
#define TPL_RESHARD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fmt_shardinfo.h"
#include "model.h"

/* Reads `len` bytes at `off` of rank file `file` (an index of m->files
 * below the virtual one) into dst. */
typedef int (*tpl__reshard_read_fn)(void *ctx, uint32_t file, void *dst,
                                    uint64_t len, uint64_t off,
                                    struct tpl__error *err);

/* Builds m (format TPL_FMT_PRESHARDED, dir and origin set, no files)
 * from its shard-info.json (`member`) through m's origin: the rank files
 * added (st_member) and checked against shard-info.json (every holder's
 * tensor at its place, with its dtype, shape and bytes; nothing else in
 * a file), then the full tensors and the virtual file in their place;
 * m->priv is the map.  Bad input is TPL_EFORMAT naming the file and
 * tensor, before any tensor byte is read.  Returns 0, TPL_EFORMAT,
 * -ENOMEM or the origin's codes. */
int tpl__reshard_load(struct tpl__model *m, const char *member,
                      struct tpl__error *err);

/* Makes m, an MLC presharded cache (its records as tensors, its files
 * added), the checkpoint of full tensors `si` (taken, whatever the
 * outcome) says its records were cut from: the holders of si's params,
 * in order, lie in records rec[0], rec[1], ... of m; the virtual file,
 * `vname`, after m's files.  No XXH3 is checked (the cache records
 * none; its md5 sums are --verify-md5's).  An encoded record is
 * TPL_EFORMAT naming its file and the record.  Returns 0, TPL_EFORMAT,
 * TPL_EOVERFLOW or -ENOMEM. */
int tpl__reshard_adopt(struct tpl__model *m, struct tpl__si *si,
                       const size_t *rec, const char *vname, const char *what,
                       struct tpl__error *err);

/* The map of a presharded model, NULL for any other. */
struct tpl__reshard *tpl__reshard_of(const struct tpl__model *m);

/* The index of the virtual file in m->files (= the number of rank
 * files). */
uint32_t tpl__reshard_vfile(const struct tpl__reshard *rs);

/* The origin its rank files are read through (the MODEL's own). */
const struct tpl__origin *tpl__reshard_base(const struct tpl__reshard *rs);

/* The grid it was cut on. */
const struct tpl__si *tpl__reshard_info(const struct tpl__reshard *rs);

/* How many tensors are rebuilt approximately: biases held as bias / N
 * whose times N is not exact (not F32/F64, or N not a power of two). */
uint32_t tpl__reshard_approximate(const struct tpl__reshard *rs);

/* The bytes [off, off + len) of the virtual file into dst, each tensor
 * they touch rebuilt from rank files read through `read` (ctx its
 * first argument).  A tensor larger than the extent is rebuilt once into
 * a buffer of its size, kept for the next extent (one tensor at most);
 * one the extent covers whole is rebuilt in place.  Returns 0, the
 * read's codes, TPL_EMISMATCH naming the rank file and tensor whose
 * bytes are not their XXH3, or -ENOMEM.  Callers on several threads
 * take turns (one lock: the kept tensor and the runs are shared). */
int tpl__reshard_read(struct tpl__reshard *rs, const struct tpl__model *m,
                      tpl__reshard_read_fn read, void *ctx, void *dst,
                      uint64_t len, uint64_t off, struct tpl__error *err);

/* What the gather of the virtual file's [off, off + len) will read: each
 * rank file's range, as hint(ctx, file, offset, length), so that it can
 * be read ahead (reads nothing, changes nothing in rs). */
typedef void (*tpl__reshard_hint_fn)(void *ctx, uint32_t file, uint64_t off,
                                     uint64_t len);
void tpl__reshard_hint(const struct tpl__reshard *rs, uint64_t off,
                       uint64_t len, tpl__reshard_hint_fn hint, void *ctx);

#endif
