/* fuzz_index.c - libFuzzer target for the sharded index reader: the input
 * is model.safetensors.index.json, parsed against a temp directory made
 * once in LLVMFuzzerInitialize that holds two small valid safetensors
 * files (a.safetensors: x, y; b.safetensors: z), a subdirectory and a
 * symlink leading outside.  The model is freed after each input.  Any
 * crash, leak or UB is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "model.h"
#include "readers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/tpl-fuzz-index.XXXXXX";

static void put_st(const char *name, const char *header, size_t data_len) {
  size_t hlen = strlen(header);
  FILE *f = fixture_create(dir, name);
  for (int i = 0; i < 8; i++)
    fputc((int)(((uint64_t)hlen >> (8 * i)) & 0xff), f);
  fwrite(header, 1, hlen, f);
  for (size_t i = 0; i < data_len; i++)
    fputc((int)i, f);
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fixture_make(dir);
  put_st("a.safetensors",
         "{\"x\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
         "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         16);
  put_st("b.safetensors",
         "{\"z\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]}}",
         6);
  fixture_add_traps(dir, "evil.safetensors");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl_error err;
  struct tpl_model *m = tpl__model_new(TPL_FMT_ST_INDEX, dir);
  if (m == NULL) return 0;
  tpl__st_index_parse((const char *)data, size, dir, m, &err);
  tpl__model_free(m);
  return 0;
}
