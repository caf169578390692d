/* fmt_st_index.h - the parser of model.safetensors.index.json (bytes in,
 * the sorted list of member files out) and the check that the files, once
 * loaded into a model, agree with its weight_map.  No I/O. */
#ifndef TPL_FMT_ST_INDEX_H
#define TPL_FMT_ST_INDEX_H

#include <stddef.h>

#include "model.h"

/* A parsed index (opaque). */
struct tpl__st_index;

/* Parses the index JSON (`buf`, `len`); `what` ("DIR/model.safetensors.
 * index.json", borrowed: it must outlive the index) names it in messages.
 * Checks its structure and that every file named is a plain name
 * (tpl__model_check_file_name).  On success *out is the caller's
 * (tpl__st_index_free).  Returns 0, TPL_EFORMAT or -ENOMEM. */
int tpl__st_index_parse(const char *buf, size_t len, const char *what,
                        struct tpl__st_index **out, struct tpl__error *err);

/* Number of distinct member files. */
size_t tpl__st_index_nfiles(const struct tpl__st_index *ix);

/* File `i` (< tpl__st_index_nfiles) in sorted name order, the order the
 * checkpoint is read in; *first_tensor is a tensor mapped to it, for
 * messages.  Both borrow from `ix`. */
const char *tpl__st_index_file(const struct tpl__st_index *ix, size_t i,
                               const char **first_tensor);

/* Checks that `m`, holding exactly the index's files, agrees with the
 * weight_map: no tensor in two files, every tensor of a file mapped to
 * it, every mapped tensor present.  Returns 0, TPL_EFORMAT naming the
 * tensor and files, or -ENOMEM. */
int tpl__st_index_check(const struct tpl__st_index *ix,
                        const struct tpl__model *m, struct tpl__error *err);

/* Frees a parsed index; NULL accepted. */
void tpl__st_index_free(struct tpl__st_index *ix);

#endif
