/* mlc_layout.h - where `preshard --layout mlc` puts every record of the
 * presharded tensor cache MLC LLM's runtime loads (LoadMultiGPUPresharded
 * in mlc-ai/mlc-llm cpp/multi_gpu/multi_gpu_loader.cc): which
 * params_shard_<i>.bin holds it, at which offset, written by which rank,
 * and the tensor-cache.json that describes it.  Computed from the job
 * alone, so every rank knows every rank's files.  Pure: no I/O, no MPI. */
#ifndef TPL_MLC_LAYOUT_H
#define TPL_MLC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "job.h"
#include "jsonu.h"

/* MLC's cap on one .bin file (tvmjs.dump_tensor_cache, shard_cap_mb). */
#define TPL_MLC_FILE_CAP ((uint64_t)32 << 20)

/* One record: tensor `tensor` of the job, whole (shard -1, under its own
 * name) or its shard k (under "<name>_shard-<k>"). */
struct tpl__mlc_rec {
  size_t tensor;
  int32_t shard;
  uint64_t offset; /* byteOffset in its file */
};

/* One params_shard_<index>.bin: records[first .. first + count), back to
 * back, written by global rank `owner` from its store. */
struct tpl__mlc_file {
  uint32_t owner;
  uint32_t stage;
  int32_t shard; /* -1: replicated params; k: worker k's shard records */
  size_t first, count;
  uint64_t nbytes;
};

struct tpl__mlc_layout {
  struct tpl__mlc_file *files;
  size_t nfiles;
  struct tpl__mlc_rec *recs; /* grouped by file, in file order */
  size_t nrecs;
};

/* Lays out job's tensors, each once: a tensor that is cut (SHARD at tp >
 * 1, as MLC gives it a preproc) as tp records "<name>_shard-<k>" in files
 * of worker k of its stage (written by rank (stage, shard k) of replica
 * 0); any other tensor once under its name in files of its stage's
 * replicated params (written by rank (stage, 0)).  A tensor of several
 * stages (an embedding) goes to files of such tensors only, with its
 * first stage's writers.  Files follow the job's order and end where a
 * worker's walk through the params would leave them (a param of its
 * stage goes elsewhere), so a worker reads each file it enters once and
 * no file of another stage's params; each is at most TPL_MLC_FILE_CAP
 * bytes, or holds a single larger tensor alone.  *out is freed with
 * tpl__mlc_layout_free. Returns 0 or -ENOMEM. */
int tpl__mlc_layout_build(const struct tpl__job *job,
                          struct tpl__mlc_layout *out);

void tpl__mlc_layout_free(struct tpl__mlc_layout *l);

/* Record r's name into buf: the tensor's, or "<name>_shard-<k>". */
void tpl__mlc_rec_name(const struct tpl__job *job, const struct tpl__mlc_rec *r,
                       char *buf, size_t len);

/* "params_shard_<i>.bin" into buf. */
void tpl__mlc_file_name(size_t i, char *buf, size_t len);

/* The most files one rank owns (the length of what it reports). */
size_t tpl__mlc_max_owned(const struct tpl__mlc_layout *l, uint32_t world);

/* The tensor-cache.json of layout `l` as TVM writes it ({"metadata",
 * "records": [{"dataPath", "format": "raw-shard", "nbytes", "records":
 * [{"name", "shape", "dtype", "format": "raw", "nbytes", "byteOffset"}],
 * "md5sum"}]}), `md5` holding each file's 32 hex digits, 33 bytes apart.
 * The metadata is `src_meta`'s (the source cache's; may be NULL) with
 * ParamSize and ParamBytes counted as MLC's converter counts them.  A new
 * reference, or NULL on ENOMEM. */
json_t *tpl__mlc_layout_json(const struct tpl__job *job,
                             const struct tpl__mlc_layout *l, const char *md5,
                             const json_t *src_meta);

#endif
