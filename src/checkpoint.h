/* checkpoint.h - opening a checkpoint: which format a MODEL path holds
 * (one .safetensors file, a sharded index, an MLC weight directory), and
 * the driver that runs that format's parser and opens its files. */
#ifndef TPL_CHECKPOINT_H
#define TPL_CHECKPOINT_H

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

/* tpl__model_open, and with `presharded` nonzero an MLC cache presharded
 * by MLC's layout (records "NAME_shard-K") is read as it is, for listing
 * or checking it; never a model to shard. */
int tpl__model_open_flags(const char *path, int presharded,
                          struct tpl_model **out, struct tpl_error *err);

#endif
