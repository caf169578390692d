/* fuzz_mlc.c - libFuzzer target for the MLC weight-directory reader: the
 * input is tensor-cache.json, parsed against a temp directory made once in
 * LLVMFuzzerInitialize that holds two shard files (params_shard_0.bin, 64
 * bytes; params_shard_1.bin, 32 bytes), a subdirectory and a symlink
 * leading outside.  The model is freed after each input.  Any crash, leak
 * or UB is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "model.h"
#include "readers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/tpl-fuzz-mlc.XXXXXX";

static void put_bin(const char *name, size_t size) {
  FILE *f = fixture_create(dir, name);
  for (size_t i = 0; i < size; i++)
    fputc((int)(i & 0xff), f);
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fixture_make(dir);
  put_bin("params_shard_0.bin", 64);
  put_bin("params_shard_1.bin", 32);
  fixture_add_traps(dir, "evil.bin");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl_error err;
  struct tpl_model *m = tpl__model_new(TPL_FMT_MLC, dir);
  if (m == NULL) return 0;
  tpl__mlc_parse((const char *)data, size, dir, "tensor-cache.json", m, &err);
  tpl__model_free(m);
  return 0;
}
