/* fuzz_mlc.c - libFuzzer target for the MLC weight-directory reader: the
 * input is tensor-cache.json, parsed against a temp directory made once in
 * LLVMFuzzerInitialize that holds two shard files (params_shard_0.bin, 64
 * bytes; params_shard_1.bin, 32 bytes), a subdirectory and a symlink
 * leading outside.  The model is freed after each input.  Any crash, leak
 * or UB is a bug. */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"
#include "readers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/tpl-fuzz-mlc.XXXXXX";

static void put_bin(const char *name, size_t size) {
  char path[256];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL) abort();
  for (size_t i = 0; i < size; i++) fputc((int)(i & 0xff), f);
  fclose(f);
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *f) {
  return remove(p);
}

static void cleanup(void) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char path[256];
  if (mkdtemp(dir) == NULL) abort();
  atexit(cleanup);
  put_bin("params_shard_0.bin", 64);
  put_bin("params_shard_1.bin", 32);
  snprintf(path, sizeof(path), "%s/sub", dir);
  mkdir(path, 0700);
  snprintf(path, sizeof(path), "%s/evil.bin", dir);
  if (symlink("/dev/null", path) != 0) abort();
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
