/* fmt_mlc_cache.h - the parser of an MLC weight directory's
 * tensor-cache.json / ndarray-cache.json: bytes in, the model's files and
 * tensors out.  No I/O. */
#ifndef TPL_FMT_MLC_CACHE_H
#define TPL_FMT_MLC_CACHE_H

#include <stddef.h>

#include "model.h"

/* Parses the cache JSON (`buf`, `len`; `what` names it in messages,
 * e.g. "DIR/tensor-cache.json") and appends to `m` one file per shard
 * record (path m->dir/dataPath, size as its "nbytes" declares, fd -1:
 * the caller opens it and checks the size) and every tensor record.  On
 * failure `m` may hold some of them; callers free it.  Returns 0,
 * TPL_EFORMAT, TPL_EDTYPE, TPL_EOVERFLOW, TPL_ELIMIT or -ENOMEM. */
/* With `presharded` nonzero a cache MLC's preshard layout names
 * ("NAME_shard-K" records, each a worker's cut) is read as it is instead
 * of refused: for reading such a cache (inspect, verify), never as a
 * model to shard. */
int tpl__mlc_parse_flags(const char *buf, size_t len, const char *what,
                         int presharded, struct tpl__model *m,
                         struct tpl__error *err);

/* The last rule, checked once the files are open (a missing or foreign
 * shard file is the more useful message): the cache holds at least one
 * tensor.  Returns 0 or TPL_EFORMAT naming `what`. */
int tpl__mlc_check_nonempty(const struct tpl__model *m, const char *what,
                            struct tpl__error *err);

#endif
