/* fuzz_index.c - libFuzzer target for the sharded index parser: the input
 * is model.safetensors.index.json, fed as bytes to tpl__st_index_parse;
 * a parsed index is walked (its files in order) and checked against an
 * empty model, then freed.  No file is touched.  Any crash, leak or UB is
 * a bug. */
#include <stdint.h>
#include <stdlib.h>

#include "fmt_st_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__error err;
  struct tpl__st_index *ix = NULL;
  struct tpl__model *m;
  const char *first;
  if (tpl__st_index_parse((const char *)data, size, "fuzz", &ix, &err) != 0)
    return 0;
  for (size_t i = 0; i < tpl__st_index_nfiles(ix); i++)
    if (tpl__st_index_file(ix, i, &first) == NULL || first == NULL) abort();
  m = tpl__model_new(TPL_FMT_ST_INDEX, ".");
  if (m != NULL) tpl__st_index_check(ix, m, &err);
  tpl__model_free(m);
  tpl__st_index_free(ix);
  return 0;
}
