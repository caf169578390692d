/* test_index.c - model.safetensors.index.json: one case per rule the
 * index reader enforces, each building its broken directory here, plus
 * a valid multi-file checkpoint whose order, file indices and absolute
 * offsets are derived by hand from the headers written below. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dtype.h"
#include "fmt_st_index.h"
#include "model.h"
#include "tap.h"
#include "tmpdir.h"

/* A safetensors file: 8-byte little-endian header length, the header
 * (no padding), then `data_len` bytes of data (0, 1, 2, ...). */
static void write_st(const char *dir, const char *name, const char *header,
                     size_t data_len) {
  size_t hlen = strlen(header), total = 8 + hlen + data_len;
  unsigned char *b = malloc(total);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  memcpy(b + 8, header, hlen);
  for (size_t i = 0; i < data_len; i++)
    b[8 + hlen + i] = (unsigned char)i;
  write_bytes(dir, name, b, total);
  free(b);
}

/* Two valid shard files used by most cases. */
static const char hdr_a[] =
    "{\"z\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
static const char hdr_b[] =
    "{\"c\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]}}";
#define FA "model-00001-of-00002.safetensors"
#define FB "model-00002-of-00002.safetensors"

static char *make_two_files(void) {
  char *dir = make_dir("tpl-index");
  if (dir == NULL) return NULL;
  write_st(dir, FA, hdr_a, 16);
  write_st(dir, FB, hdr_b, 6);
  return dir;
}

static struct tpl__error err;

/* Opens `dir` with `json` as its index; returns the code, frees the model
 * unless `out` wants it. */
static int parse(const char *dir, const char *json, struct tpl__model **out) {
  struct tpl__model *m = NULL;
  int rc;
  memset(&err, 0, sizeof(err));
  write_bytes(dir, "model.safetensors.index.json", json, strlen(json));
  rc = tpl__model_open(dir, &m, &err);
  if (out != NULL && rc == 0)
    *out = m;
  else
    tpl__model_free(m);
  return rc;
}

/* Expects `json` over the two standard files to fail with `code` and a
 * message containing `frag`. */
static void expect_fail(const char *json, int code, const char *frag) {
  char *dir = make_two_files();
  CHECK(dir != NULL);
  CHECK_EQ_INT(parse(dir, json, NULL), code);
  CHECK_STR_CONTAINS(err.msg, frag);
  CHECK_STR_CONTAINS(err.msg, "model.safetensors.index.json");
  drop_dir(dir);
}

#define MAP_OK "\"z\":\"" FA "\",\"a\":\"" FA "\",\"c\":\"" FB "\""

static void test_valid_two_files(void) {
  /* The map lists file B first: files still load in sorted order. */
  const char *json = "{\"metadata\":{\"total_size\":30},\"weight_map\":{"
                     "\"c\":\"" FB "\",\"a\":\"" FA "\",\"z\":\"" FA "\"}}";
  char *dir = make_two_files();
  struct tpl__model *m = NULL;
  uint64_t na = strlen(hdr_a), nb = strlen(hdr_b);
  CHECK_EQ_INT(parse(dir, json, &m), 0);
  if (m == NULL) goto out;
  CHECK_EQ_U64(m->nfiles, 2);
  CHECK_EQ_U64(m->ntensors, 3);
  if (m->ntensors != 3 || m->nfiles != 2) goto out;
  CHECK(strcmp(m->files[0].name, FA) == 0);
  CHECK(strcmp(m->files[1].name, FB) == 0);
  CHECK_EQ_U64(m->files[0].size, 8 + na + 16);
  CHECK_EQ_U64(m->files[1].size, 8 + nb + 6);
  /* File A in offset order (z at 0, a at 8), then file B. */
  CHECK(strcmp(m->tensors[0].name, "z") == 0);
  CHECK(strcmp(m->tensors[1].name, "a") == 0);
  CHECK(strcmp(m->tensors[2].name, "c") == 0);
  CHECK_EQ_U64(m->tensors[0].file, 0);
  CHECK_EQ_U64(m->tensors[1].file, 0);
  CHECK_EQ_U64(m->tensors[2].file, 1);
  CHECK_EQ_U64(m->tensors[0].offset, 8 + na + 0);
  CHECK_EQ_U64(m->tensors[1].offset, 8 + na + 8);
  CHECK_EQ_U64(m->tensors[2].offset, 8 + nb + 0);
  CHECK_EQ_INT(m->tensors[0].dtype, TPL_DT_F16);
  CHECK_EQ_INT(m->tensors[1].dtype, TPL_DT_F32);
  CHECK_EQ_INT(m->tensors[2].dtype, TPL_DT_BF16);
  CHECK_EQ_U64(m->tensors[0].nbytes, 8);
  CHECK_EQ_U64(m->tensors[2].nbytes, 6);
  CHECK_EQ_INT(m->tensors[0].ndim, 2);
  CHECK_EQ_U64(m->tensors[2].shape[0], 3);
  CHECK_EQ_U64(tpl__model_bytes(m), 22);
out:
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_valid_via_model_open(void) {
  const char *json = "{\"weight_map\":{" MAP_OK "}}";
  char *dir = make_two_files();
  struct tpl__model *m = NULL;
  write_bytes(dir, "model.safetensors.index.json", json, strlen(json));
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__model_open(dir, &m, &err), 0);
  if (m != NULL) {
    CHECK_EQ_INT(m->format, TPL_FMT_ST_INDEX);
    CHECK_EQ_U64(m->ntensors, 3);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_valid_symlink_inside(void) {
  const char *json = "{\"weight_map\":{\"c\":\"link.safetensors\"}}";
  char *dir = make_two_files(), link[1024];
  struct tpl__model *m = NULL;
  snprintf(link, sizeof(link), "%s/link.safetensors", dir);
  CHECK_EQ_INT(symlink(FB, link), 0);
  CHECK_EQ_INT(parse(dir, json, &m), 0);
  if (m != NULL) CHECK_EQ_U64(m->ntensors, 1);
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_invalid_json(void) {
  expect_fail("{\"weight_map\":{", TPL_EFORMAT, "expected valid JSON");
}

static void test_top_not_object(void) {
  expect_fail("[1,2]", TPL_EFORMAT, "JSON object at top level");
}

static void test_metadata_not_object(void) {
  expect_fail("{\"metadata\":[],\"weight_map\":{" MAP_OK "}}", TPL_EFORMAT,
              "\"metadata\" to be an object");
}

static void test_weight_map_missing(void) {
  expect_fail("{\"metadata\":{}}", TPL_EFORMAT,
              "expected a \"weight_map\" object, found none");
}

static void test_weight_map_not_object(void) {
  expect_fail("{\"weight_map\":[\"" FA "\"]}", TPL_EFORMAT,
              "\"weight_map\" to be an object");
}

static void test_weight_map_empty(void) {
  expect_fail("{\"weight_map\":{}}", TPL_EFORMAT, "found an empty map");
}

static void test_value_not_string(void) {
  expect_fail("{\"weight_map\":{\"z\":1}}", TPL_EFORMAT,
              "tensor 'z': expected a file name string");
}

static void test_name_empty(void) {
  expect_fail("{\"weight_map\":{\"z\":\"\"}}", TPL_EFORMAT,
              "found an empty name");
}

static void test_name_nul(void) {
  expect_fail("{\"weight_map\":{\"z\":\"a\\u0000b\"}}", TPL_EFORMAT,
              "NUL byte");
}

static void test_name_absolute(void) {
  expect_fail("{\"weight_map\":{\"z\":\"/etc/passwd\"}}", TPL_EFORMAT,
              "absolute path '/etc/passwd'");
}

static void test_name_slash(void) {
  expect_fail("{\"weight_map\":{\"z\":\"sub/" FA "\"}}", TPL_EFORMAT,
              "without '/'");
}

static void test_name_dotdot(void) {
  expect_fail("{\"weight_map\":{\"z\":\"..\"}}", TPL_EFORMAT, "found '..'");
}

static void test_symlink_outside(void) {
  char *dir = make_two_files(), *other = make_dir("tpl-index"), link[1024];
  char target[1024];
  const char *json = "{\"weight_map\":{\"c\":\"evil.safetensors\"}}";
  write_st(other, "x.safetensors", hdr_b, 6);
  snprintf(target, sizeof(target), "%s/x.safetensors", other);
  snprintf(link, sizeof(link), "%s/evil.safetensors", dir);
  CHECK_EQ_INT(symlink(target, link), 0);
  CHECK_EQ_INT(parse(dir, json, NULL), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "symlink to");
  CHECK_STR_CONTAINS(err.msg, "evil.safetensors");
  drop_dir(dir);
  drop_dir(other);
}

static void test_missing_file(void) {
  expect_fail("{\"weight_map\":{" MAP_OK
              ",\"q\":\"model-00003-of-00003.safetensors\"}}",
              -ENOENT, "'model-00003-of-00003.safetensors', found no such");
  CHECK_EQ_INT(tpl_exit_code(-ENOENT), 66);
}

static void test_mapped_tensor_absent(void) {
  expect_fail("{\"weight_map\":{" MAP_OK ",\"ghost\":\"" FB "\"}}", TPL_EFORMAT,
              "tensor 'ghost': expected it in '" FB);
  CHECK_STR_CONTAINS(err.msg, "found no such tensor there");
}

static void test_tensor_unmapped(void) {
  expect_fail("{\"weight_map\":{\"z\":\"" FA "\",\"c\":\"" FB "\"}}",
              TPL_EFORMAT, "tensor 'a': expected every tensor of '" FA);
  CHECK_STR_CONTAINS(err.msg, "missing from the map");
}

static void test_tensor_wrong_file(void) {
  expect_fail("{\"weight_map\":{\"z\":\"" FA "\",\"a\":\"" FB "\",\"c\":\"" FB
              "\"}}",
              TPL_EFORMAT, "tensor 'a': expected it in '" FB);
  CHECK_STR_CONTAINS(err.msg, "found it in '" FA "'");
}

static void test_tensor_in_two_files(void) {
  char *dir = make_two_files();
  const char *json =
      "{\"weight_map\":{" MAP_OK ",\"extra\":\"dup.safetensors\"}}";
  /* dup.safetensors holds 'extra' and also 'a', which FA holds. */
  write_st(dir, "dup.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"extra\":{\"dtype\":\"U8\",\"shape\":[1],"
           "\"data_offsets\":[8,9]}}",
           9);
  CHECK_EQ_INT(parse(dir, json, NULL), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'a'");
  CHECK_STR_CONTAINS(err.msg, "'dup.safetensors'");
  CHECK_STR_CONTAINS(err.msg, "'" FA "'");
  drop_dir(dir);
}

/* The parser alone touches no file: the index of a directory that does
 * not exist lists its files in sorted order, and checking it against a
 * model without their tensors names a mapped tensor that is absent. */
static void test_parse_only_reads_no_file(void) {
  const char *json =
      "{\"weight_map\":{\"c\":\"" FB "\",\"a\":\"" FA "\",\"z\":\"" FA "\"}}";
  struct tpl__st_index *ix = NULL;
  struct tpl__model *m = tpl__model_new(TPL_FMT_ST_INDEX, "/nonexistent");
  const char *first = NULL;
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(
      tpl__st_index_parse(json, strlen(json), "/nonexistent/x.json", &ix, &err),
      0);
  if (ix != NULL && tpl__st_index_nfiles(ix) == 2) {
    CHECK(strcmp(tpl__st_index_file(ix, 0, &first), FA) == 0);
    CHECK(first != NULL && (!strcmp(first, "a") || !strcmp(first, "z")));
    CHECK(strcmp(tpl__st_index_file(ix, 1, &first), FB) == 0);
    CHECK(first != NULL && strcmp(first, "c") == 0);
    CHECK_EQ_INT(tpl__st_index_check(ix, m, &err), TPL_EFORMAT);
    CHECK_STR_CONTAINS(err.msg, "found no such tensor there");
  } else {
    CHECK(!"expected an index of 2 files");
  }
  tpl__st_index_free(ix);
  tpl__model_free(m);
}

int main(void) {
  RUN(test_parse_only_reads_no_file);
  RUN(test_valid_two_files);
  RUN(test_valid_via_model_open);
  RUN(test_valid_symlink_inside);
  RUN(test_invalid_json);
  RUN(test_top_not_object);
  RUN(test_metadata_not_object);
  RUN(test_weight_map_missing);
  RUN(test_weight_map_not_object);
  RUN(test_weight_map_empty);
  RUN(test_value_not_string);
  RUN(test_name_empty);
  RUN(test_name_nul);
  RUN(test_name_absolute);
  RUN(test_name_slash);
  RUN(test_name_dotdot);
  RUN(test_symlink_outside);
  RUN(test_missing_file);
  RUN(test_mapped_tensor_absent);
  RUN(test_tensor_unmapped);
  RUN(test_tensor_wrong_file);
  RUN(test_tensor_in_two_files);
  return tap_done();
}
