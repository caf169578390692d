/* test_format.c - the checkpoint formats (format.h): the table's rows,
 * the probe order DESIGN.md 4.2 gives a directory, and each format's
 * load over the local origin, detected from a directory; the single-file
 * rows a MODEL that is one file is read by. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "format.h"
#include "origin.h"
#include "tap.h"
#include "tmpdir.h"

/* DESIGN.md 4.2: a directory is "probed for model.safetensors.index.json,
 * tensor-cache.json, ndarray-cache.json and model.safetensors in that
 * order"; the rows in table order, probe by probe, are that order. */
static void test_probe_order(void) {
  static const char *const want[] = {
      "shard-info.json", "model.safetensors.index.json", "tensor-cache.json",
      "ndarray-cache.json", "model.safetensors"};
  size_t k = 0;
  for (size_t i = 0; i < tpl__nformats; i++)
    for (const char *const *p = tpl__formats[i]->probes; *p != NULL; p++) {
      REQUIRE(k < ARRAY_SIZE(want));
      CHECK(strcmp(*p, want[k]) == 0);
      k++;
    }
  CHECK_EQ_U64(k, ARRAY_SIZE(want));
}

/* Each id has its row; only MLC's records carry md5sums (a weight
 * directory's and a presharded cache's, TVM's writer records them on
 * both); its config is
 * mlc-chat-config.json (MLC LLM's), as is a presharded directory's cut
 * from an MLC one, the others config.json (HF's). */
static void test_rows(void) {
  static const struct {
    int id;
    const char *name, *config;
    int md5, mlc;
  } want[] = {
      {TPL_FMT_SAFETENSORS, "safetensors", "config.json", 0, 0},
      {TPL_FMT_ST_INDEX, "safetensors-index", "config.json", 0, 0},
      {TPL_FMT_MLC, "mlc", "mlc-chat-config.json", 1, 1},
      {TPL_FMT_PRESHARDED, "presharded", "config.json", 0, 0},
      {TPL_FMT_PRESHARDED_MLC, "presharded", "mlc-chat-config.json", 0, 1},
      {TPL_FMT_MLC_SHARDED, "mlc-presharded", "mlc-chat-config.json", 1, 1},
  };
  CHECK_EQ_U64(tpl__nformats, ARRAY_SIZE(want));
  for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
    const struct tpl__format *f = tpl__format_of(want[i].id);
    REQUIRE(f != NULL);
    CHECK_EQ_INT(f->id, want[i].id);
    CHECK(strcmp(f->name, want[i].name) == 0);
    CHECK(strcmp(f->config, want[i].config) == 0);
    CHECK_EQ_INT(f->md5, want[i].md5);
    CHECK_EQ_INT(f->config_mlc, want[i].mlc);
    CHECK(f->what != NULL && f->load != NULL);
  }
  CHECK(tpl__format_of(0) == NULL);
}

/* One U8 tensor `name` of 4 bytes as a safetensors file dir/file. */
static void write_st(const char *dir, const char *file, const char *name) {
  char hdr[128];
  uint8_t buf[8 + sizeof(hdr) + 4];
  int n = snprintf(hdr, sizeof(hdr),
                   "{\"%s\":{\"dtype\":\"U8\",\"shape\":[4],"
                   "\"data_offsets\":[0,4]}}",
                   name);
  for (int i = 0; i < 8; i++)
    buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(buf + 8, hdr, (size_t)n);
  memcpy(buf + 8 + n, "abcd", 4);
  write_bytes(dir, file, buf, 8 + (size_t)n + 4);
}

/* A directory with an index and model.safetensors both: the index, the
 * earlier probe, decides, and its two member files are loaded. */
static void test_index_probed_first(void) {
  static const char ix[] = "{\"weight_map\": {\"a\": \"one.safetensors\", "
                           "\"b\": \"two.safetensors\"}}";
  char *dir = make_dir("tpl-format");
  struct tpl__model *m = NULL;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  write_st(dir, "one.safetensors", "a");
  write_st(dir, "two.safetensors", "b");
  write_st(dir, "model.safetensors", "c");
  write_bytes(dir, "model.safetensors.index.json", ix, strlen(ix));
  CHECK_EQ_INT(tpl__model_open(dir, &m, &err), 0);
  if (m != NULL) {
    CHECK_EQ_INT(m->format, TPL_FMT_ST_INDEX);
    CHECK_EQ_U64(m->nfiles, 2);
    CHECK_EQ_U64(m->ntensors, 2);
    CHECK(tpl__model_origin(m) == &tpl__origin_local);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

/* model.safetensors alone: the safetensors row. */
static void test_single_file_directory(void) {
  char *dir = make_dir("tpl-format");
  struct tpl__model *m = NULL;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  write_st(dir, "model.safetensors", "c");
  CHECK_EQ_INT(tpl__model_open(dir, &m, &err), 0);
  if (m != NULL) {
    CHECK_EQ_INT(m->format, TPL_FMT_SAFETENSORS);
    CHECK(strcmp(m->tensors[0].name, "c") == 0);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

/* A MODEL that is one file: the row its name's suffix says, else the
 * first single-file row (any file has always been read as safetensors);
 * every single-file row can open a local file by path; a local file
 * opens as its row's format. */
static void test_single_file_rows(void) {
  static const char *const names[] = {"m.safetensors", "/a/b/x.safetensors",
                                      "weights.bin", "safetensors"};
  char *dir = make_dir("tpl-format"), path[512];
  struct tpl__model *m = NULL;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
    const struct tpl__format *f = tpl__format_for_file(names[i]);
    REQUIRE(f != NULL);
    CHECK_EQ_INT(f->id, TPL_FMT_SAFETENSORS);
  }
  for (size_t i = 0; i < tpl__nformats; i++)
    CHECK((tpl__formats[i]->file_suffix == NULL) ==
          (tpl__formats[i]->load_file == NULL));
  write_st(dir, "one.safetensors", "s");
  snprintf(path, sizeof(path), "%s/one.safetensors", dir);
  CHECK_EQ_INT(tpl__model_open(path, &m, &err), 0);
  if (m != NULL) {
    CHECK_EQ_INT(m->format, TPL_FMT_SAFETENSORS);
    CHECK(strcmp(m->files[0].path, path) == 0); /* the path as given */
    CHECK(strcmp(m->tensors[0].name, "s") == 0);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

int main(void) {
  RUN(test_probe_order);
  RUN(test_rows);
  RUN(test_index_probed_first);
  RUN(test_single_file_directory);
  RUN(test_single_file_rows);
  return tap_done();
}
