/* dtype.c - the table of element types: safetensors name, MLC name, size. */
#include <string.h>

#include "common.h"
#include "dtype.h"

struct dtype_info {
  const char *st;
  const char *mlc;
  size_t size;
};

static const struct dtype_info dtypes[TPL_DT_COUNT] = {
    [TPL_DT_BOOL] = {"BOOL", "bool", 1},
    [TPL_DT_U8] = {"U8", "uint8", 1},
    [TPL_DT_I8] = {"I8", "int8", 1},
    [TPL_DT_I16] = {"I16", "int16", 2},
    [TPL_DT_U16] = {"U16", "uint16", 2},
    [TPL_DT_F16] = {"F16", "float16", 2},
    [TPL_DT_BF16] = {"BF16", "bfloat16", 2},
    [TPL_DT_I32] = {"I32", "int32", 4},
    [TPL_DT_U32] = {"U32", "uint32", 4},
    [TPL_DT_F32] = {"F32", "float32", 4},
    [TPL_DT_F64] = {"F64", "float64", 8},
    [TPL_DT_I64] = {"I64", "int64", 8},
    [TPL_DT_U64] = {"U64", "uint64", 8},
    [TPL_DT_F8_E4M3] = {"F8_E4M3", "float8_e4m3fn", 1},
    [TPL_DT_F8_E5M2] = {"F8_E5M2", "float8_e5m2", 1},
};

static const char *const refused_by_name[] = {
    "F4",   "F6_E2M3",     "F6_E3M2",     "F8_E8M0", "E8M0", "C64",
    "C128", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I4",      "U4",   "BOOL1"};

int tpl__dtype_from_st(const char *name, size_t len) {
  for (int i = 0; i < TPL_DT_COUNT; i++)
    if (strlen(dtypes[i].st) == len && memcmp(dtypes[i].st, name, len) == 0)
      return i;
  return -1;
}

int tpl__dtype_from_mlc(const char *name) {
  for (int i = 0; i < TPL_DT_COUNT; i++)
    if (strcmp(dtypes[i].mlc, name) == 0) return i;
  return -1;
}

int tpl__dtype_is_known_unsupported(const char *name) {
  for (size_t i = 0; i < ARRAY_SIZE(refused_by_name); i++)
    if (strcmp(refused_by_name[i], name) == 0) return 1;
  return 0;
}

const char *tpl__dtype_st_name(int dtype) {
  return dtypes[dtype].st;
}
const char *tpl__dtype_mlc_name(int dtype) {
  return dtypes[dtype].mlc;
}
size_t tpl__dtype_size(int dtype) {
  return dtypes[dtype].size;
}
