/* checkpoint.h - opening a checkpoint: which format a MODEL path holds
 * (one .safetensors file, a sharded index, an MLC weight directory), and
 * the driver that runs that format's parser and opens its files. */
#ifndef TPL_CHECKPOINT_H
#define TPL_CHECKPOINT_H

#include <stddef.h>

#include "model.h"

/* Opens MODEL (a .safetensors file, a directory with model.safetensors or
 * model.safetensors.index.json, or an MLC weight directory), validates it
 * strictly and returns the table in *out (free with tpl__model_free).
 * Every member file is opened once and stays open in the model (raising
 * the soft RLIMIT_NOFILE to the hard limit) so that readers use the
 * descriptors validated here, never the paths again.
 * Returns 0, TPL_E* for bad data, or -errno. */
int tpl__model_open(const char *path, struct tpl_model **out,
                    struct tpl_error *err);

/* Builds a sharded checkpoint into `m` from its index JSON (`buf`, `len`,
 * as read from dir/model.safetensors.index.json): parses it, loads each
 * member file once in sorted name order, and checks that the map and the
 * files agree.  On failure `m` may hold part of it; callers free it. */
int tpl__checkpoint_index(const char *buf, size_t len, const char *dir,
                          struct tpl_model *m, struct tpl_error *err);

/* Builds an MLC weight directory into `m` from its cache JSON (`buf`,
 * `len`, as read from dir/`cache_name`): parses every record, then
 * confines and opens each shard file, checking its size.  On failure `m`
 * may hold part of it; callers free it. */
int tpl__checkpoint_mlc(const char *buf, size_t len, const char *dir,
                        const char *cache_name, struct tpl_model *m,
                        struct tpl_error *err);

#endif
