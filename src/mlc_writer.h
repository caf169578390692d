/* mlc_writer.h - `preshard --layout mlc`: the sink that writes a presharded
 * MLC tensor cache (mlc_layout.h): every rank its own params_shard_*.bin
 * files, rank 0 the copied directory files, mlc-chat-config.json with the
 * job's grid and, last, tensor-cache.json. */
#ifndef TPL_MLC_WRITER_H
#define TPL_MLC_WRITER_H

#include "coord.h"
#include "outdir.h"

/* The mlc layout's sink (o->model: the source MLC weight directory).
 * Rank 0 prepares DIR (empty, or with --force the old cache removed,
 * tensor-cache.json first) and checks MODEL has an mlc-chat-config.json;
 * every rank checks DIR; after the load every rank writes the files the
 * layout gives it under temporary names, they agree, rank 0 gathers the
 * md5 sums, every rank renames its files into place, they agree, and rank
 * 0 copies the other files of MODEL (taken through its origin at
 * prepare, while it is open: tpl__outdir_take), writes mlc-chat-config.json
 * with tensor_parallel_shards and pipeline_parallel_stages set to the job's
 * and, last and atomically, the cache JSON (the source's name,
 * tensor-cache.json or ndarray-cache.json).  On any failure every rank
 * removes what it wrote, so DIR never holds a cache JSON without its
 * files. */
struct tpl__sink tpl__mlc_writer_sink(struct tpl__outdir_opts *o);

/* Nonzero when `dir` is an MLC weight directory (holds tensor-cache.json
 * or ndarray-cache.json). */
int tpl__mlc_writer_is_mlc_dir(const char *dir);

#endif
