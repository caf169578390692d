/* verify_mlc.h - `tpload verify MODEL DIR --layout mlc`: checks a
 * presharded MLC tensor cache (what `preshard --layout mlc` writes) against
 * the MLC weight directory it came from, record by record and file by
 * file. */
#ifndef TPL_VERIFY_MLC_H
#define TPL_VERIFY_MLC_H

#include "common.h"
#include "verify.h"

/* MODEL is read through its origin (a URL with the client options
 * `http`), DIR from this host.  Reads tp (tensor_parallel_shards) and pp
 * (pipeline_parallel_stages, default 1) from DIR/mlc-chat-config.json (`want`'s
 * nonzero fields must match), plans MODEL for that grid under `plan`, and
 * checks DIR's cache: for every tensor MLC gives a preproc (cut), the records
 * "<name>_shard-<k>", k < tp, each exactly shard k of the tensor; for
 * every other tensor one record "<name>" holding it whole, unscaled; no
 * other record; dtype and shape of each; each file's bytes against its
 * md5sum; and that no file holds two workers' shard records, nor shard
 * records beside replicated ones.  Records are read through TVM's format
 * rules (f32-to-bf16 decoded on float32 records only).  Returns 0,
 * TPL_EMISMATCH naming the first difference (file, record, what
 * differs), or the code of what could not be read. */
int tpl__verify_mlc(const char *model, const char *dir, const char *plan,
                    const struct tpl__verify_grid *want,
                    const struct tpl__http_opts *http,
                    struct tpl__verify_result *out, struct tpl__error *err);

#endif
