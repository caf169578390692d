/* test_origin.c - the origins (origin.h): the table and the one choice
 * of a MODEL's, the local origin's members (whole, by range, identity
 * re-checked), and what the HTTP origin leaves to its source. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fileio.h"
#include "job.h"
#include "origin.h"
#include "tap.h"
#include "tmpdir.h"

/* Every row has every operation and a name of its own; the last claims
 * any MODEL, so the choice always ends somewhere. */
static void test_table_rows_are_whole(void) {
  REQUIRE(tpl__norigins >= 2);
  for (size_t i = 0; i < tpl__norigins; i++) {
    const struct tpl__origin *o = tpl__origins[i];
    CHECK(o->name != NULL && o->claims != NULL && o->open != NULL);
    CHECK(o->probe != NULL && o->get != NULL && o->read != NULL);
    CHECK(o->unchanged != NULL && o->member_open != NULL);
    CHECK(o->member_unchanged != NULL && o->source != NULL);
    for (size_t k = 0; k < i; k++)
      CHECK(strcmp(o->name, tpl__origins[k]->name) != 0);
  }
  CHECK(tpl__origins[tpl__norigins - 1] == &tpl__origin_local);
  CHECK(tpl__origin_local.claims("anything at all"));
}

/* The schemes url.h names remote go to http (s3:// and hf:// are
 * resolved into HTTP URLs later); anything else is a path. */
static void test_choice_by_model(void) {
  static const char *const remote[] = {"http://h/m.safetensors", "HTTPS://h/d/",
                                       "s3://bucket/prefix",
                                       "hf://org/name@main"};
  static const char *const local[] = {"model.safetensors", "./http://h",
                                      "/models/m", "ftp://h/m", ""};
  for (size_t i = 0; i < ARRAY_SIZE(remote); i++)
    CHECK(tpl__origin_for(remote[i]) == &tpl__origin_http);
  for (size_t i = 0; i < ARRAY_SIZE(local); i++)
    CHECK(tpl__origin_for(local[i]) == &tpl__origin_local);
  CHECK(tpl__origin_http.paths == 0);
  CHECK(tpl__origin_local.paths == 1);
}

/* A job-table file with a URL is http, one without (NULL or proto3's
 * "") local; a model or job built by hand is local. */
static void test_choice_by_file_and_default(void) {
  struct tpl__model m = {0};
  struct tpl__job job = {0};
  CHECK(tpl__origin_for_file(NULL) == &tpl__origin_local);
  CHECK(tpl__origin_for_file("") == &tpl__origin_local);
  CHECK(tpl__origin_for_file("https://h/d/a.bin?X-Sig=1") == &tpl__origin_http);
  CHECK(tpl__model_origin(&m) == &tpl__origin_local);
  CHECK(tpl__job_origin(&job) == &tpl__origin_local);
  m.origin = &tpl__origin_http;
  job.origin = &tpl__origin_http;
  CHECK(tpl__model_origin(&m) == &tpl__origin_http);
  CHECK(tpl__job_origin(&job) == &tpl__origin_http);
}

/* get: a member whole and NUL-terminated; a missing one is -ENOENT. */
static void test_local_get(void) {
  static const char cfg[] = "{\"model_type\": \"llama\"}";
  char *dir = make_dir("tpl-origin");
  struct tpl__model *m;
  struct tpl__error err = {0};
  char *buf = NULL;
  size_t len = 0;
  REQUIRE(dir != NULL);
  write_bytes(dir, "config.json", cfg, strlen(cfg));
  m = tpl__model_new(0, dir);
  REQUIRE(m != NULL);
  CHECK_EQ_INT(tpl__origin_local.get(m, "config.json", 4096, &buf, &len, &err),
               0);
  CHECK_EQ_U64(len, strlen(cfg));
  CHECK(buf != NULL && strcmp(buf, cfg) == 0);
  free(buf);
  buf = NULL;
  CHECK_EQ_INT(tpl__origin_local.get(m, "absent.json", 4096, &buf, &len, &err),
               -ENOENT);
  tpl__model_free(m);
  drop_dir(dir);
}

/* One U8 tensor "a" of 4 bytes: the 8-byte header length, the header
 * JSON, the bytes. */
static void write_st(const char *dir, const char *name, const char *bytes4) {
  static const char hdr[] =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
  uint8_t file[8 + sizeof(hdr) - 1 + 4];
  uint64_t n = sizeof(hdr) - 1;
  for (int i = 0; i < 8; i++)
    file[i] = (uint8_t)(n >> (8 * i));
  memcpy(file + 8, hdr, n);
  memcpy(file + 8 + n, bytes4, 4);
  write_bytes(dir, name, file, sizeof(file));
}

/* read by range from the held descriptor; unchanged while the path names
 * it, -EIO naming the file once another file takes its place. */
static void test_local_read_and_identity(void) {
  char *dir = make_dir("tpl-origin");
  char path[1024], other[1024], got[4] = {0};
  struct tpl__model *m = NULL;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  write_st(dir, "model.safetensors", "wxyz");
  snprintf(path, sizeof(path), "%s/model.safetensors", dir);
  REQUIRE(tpl__model_open_with(path, NULL, 0, &m, &err) == 0);
  CHECK(tpl__model_origin(m) == &tpl__origin_local);
  CHECK_EQ_INT(tpl__model_read(m, 0, got, 4, m->tensors[0].offset, &err), 0);
  CHECK(memcmp(got, "wxyz", 4) == 0);
  CHECK_EQ_INT(tpl__model_file_unchanged(m, 0, &err), 0);
  write_st(dir, "other.safetensors", "WXYZ");
  snprintf(other, sizeof(other), "%s/other.safetensors", dir);
  REQUIRE(rename(other, path) == 0);
  CHECK_EQ_INT(tpl__model_file_unchanged(m, 0, &err), -EIO);
  CHECK_STR_CONTAINS(err.msg, "another file took its place");
  CHECK_STR_CONTAINS(err.msg, path);
  /* the held descriptor still reads the file validated */
  CHECK_EQ_INT(tpl__model_read(m, 0, got, 4, m->tensors[0].offset, &err), 0);
  CHECK(memcmp(got, "wxyz", 4) == 0);
  tpl__model_free(m);
  drop_dir(dir);
}

/* A remote file has no descriptor for another rank to open, and nothing
 * to re-check: its source checks every answer. */
static void test_http_leaves_it_to_the_source(void) {
  struct tpl__job_file f = {.path = "https://h/d/a.bin", .size = 4};
  struct tpl__model m = {0};
  struct tpl__error err = {0};
  int fd = 7;
  CHECK_EQ_INT(tpl__origin_http.member_open(f.path, f.size, 0, &fd, &err), 0);
  CHECK_EQ_INT(fd, -1);
  CHECK_EQ_INT(tpl__origin_http.member_unchanged(f.path, f.size, 0, -1, &err),
               0);
  CHECK_EQ_INT(tpl__origin_http.unchanged(&m, 0, &err), 0);
}

/* A source's private state per read fits the slot every read has. */
static void test_read_state_fits(void) {
  char *dir = make_dir("tpl-origin");
  char path[1024];
  const char *paths[1] = {path};
  struct tpl__source *src = NULL;
  struct tpl__error err = {0};
  struct tpl__fdcache *files = tpl__fdcache_new(0);
  int fd;
  uint64_t size;
  REQUIRE(dir != NULL && files != NULL);
  write_st(dir, "model.safetensors", "wxyz");
  snprintf(path, sizeof(path), "%s/model.safetensors", dir);
  REQUIRE(tpl__open_regular(path, &fd, &size, &err) == 0);
  REQUIRE(tpl__fdcache_hold(files, 0, path, fd, NULL) == 0);
  REQUIRE(
      tpl__origin_local.source(
          &(struct tpl__origin_files){
              .n = 1, .files = files, .paths = paths, .mode = TPL_IO_BUFFERED},
          &src, &err) == 0);
  CHECK(src->read_size > 0 && src->read_size <= TPL_READ_PRIV);
  tpl__source_close(src);
  tpl__fdcache_free(files);
  drop_dir(dir);
}

int main(void) {
  RUN(test_table_rows_are_whole);
  RUN(test_choice_by_model);
  RUN(test_choice_by_file_and_default);
  RUN(test_local_get);
  RUN(test_local_read_and_identity);
  RUN(test_http_leaves_it_to_the_source);
  RUN(test_read_state_fits);
  return tap_done();
}
