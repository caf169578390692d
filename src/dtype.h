/* dtype.h - the element types tpload knows, with their safetensors and MLC
 * names and sizes. */
#ifndef TPL_DTYPE_H
#define TPL_DTYPE_H

#include <stddef.h>

#include "tpload.h"

/* The element types are enum tpl_dtype of include/tpload.h (public: the
 * consumer API gives them, and the wire and the daemon's tensor table
 * carry them as these numbers); TPL_DT_COUNT is one past the last. */
#define TPL_DT_COUNT (TPL_DT_F8_E5M2 + 1)

/* Returns the dtype whose safetensors name is `name` (e.g. "BF16"), or -1.
 * `len` is the name's length (names need not be NUL-terminated). */
int tpl__dtype_from_st(const char *name, size_t len);

/* Returns the dtype whose MLC name is `name` (e.g. "bfloat16"), or -1. */
int tpl__dtype_from_mlc(const char *name);

/* Returns 1 when `name` is a safetensors dtype tpload refuses by name
 * (sub-byte or complex types such as F4, F6_E2M3, C64), else 0. */
int tpl__dtype_is_known_unsupported(const char *name);

/* Static names and element size in bytes of a valid dtype. */
const char *tpl__dtype_st_name(int dtype);
const char *tpl__dtype_mlc_name(int dtype);
size_t tpl__dtype_size(int dtype);

#endif
