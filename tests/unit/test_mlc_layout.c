/* test_mlc_layout.c - the files of `preshard --layout mlc`
 * (src/mlc_layout.c) on hand-built jobs: worker k's shard records in
 * files of their own, written by rank (stage, k); replicated params in
 * shared files written by shard 0; files ending where a worker's walk
 * leaves them; MLC's 32 MiB cap with a larger tensor alone; a tensor of
 * several stages stored once; at tp 1 no shard records; the
 * tensor-cache.json TVM's reader expects; and the parser reading
 * "NAME_shard-K" records only when asked to (inspect, verify). */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fmt_mlc_cache.h"
#include "job.h"
#include "mlc_layout.h"
#include "tap.h"

#define MIB ((uint64_t)1 << 20)
#define CHECK_STR(a, b) CHECK((a) != NULL && strcmp((a), (b)) == 0)

/* A one-dimensional u8 tensor of n bytes: cut in tp shards or whole. */
static struct tpl__job_tensor tensor(const char *name, uint64_t n, int cut) {
  struct tpl__job_tensor t = {.name = (char *)name,
                              .dtype = TPL_DT_U8,
                              .ndim = 1,
                              .kind = cut ? TPL_RULE_SHARD : TPL_RULE_REPLICATE,
                              .func_name = cut ? "_shard" : NULL};
  t.shape[0] = n;
  t.stages.count = 1;
  return t;
}

static struct tpl__job job_of(struct tpl__job_tensor *t, size_t n, uint32_t tp,
                              uint32_t pp) {
  struct tpl__job job = {
      .grid = {tp * pp, tp, pp, 1}, .tensors = t, .ntensors = n};
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  return job;
}

/* File f: owner, shard, and its records' tensors in order (-1 ends),
 * each 64 bytes. */
static void check_file(const struct tpl__mlc_layout *l, size_t f,
                       uint32_t owner, int32_t shard, const int *tensors) {
  const struct tpl__mlc_file *fi = &l->files[f];
  size_t n = 0;
  uint64_t at = 0;
  CHECK_EQ_U64(fi->owner, owner);
  CHECK_EQ_INT(fi->shard, shard);
  while (tensors[n] >= 0)
    n++;
  REQUIRE(fi->count == n);
  for (size_t r = 0; r < n; r++) {
    CHECK_EQ_U64(l->recs[fi->first + r].tensor, (uint64_t)tensors[r]);
    CHECK_EQ_INT(l->recs[fi->first + r].shard, shard);
    CHECK_EQ_U64(l->recs[fi->first + r].offset, at);
    at += 64; /* every record of these jobs is 64 bytes */
  }
}

/* A, B cut; a norm; C cut (tp 2): A and B share each worker's file, the
 * norm gets the shared one, C new ones (the walk left the first). */
static void test_walk_cuts_files(void) {
  struct tpl__job_tensor t[] = {tensor("a", 128, 1), tensor("b", 128, 1),
                                tensor("norm", 64, 0), tensor("c", 128, 1)};
  struct tpl__job job = job_of(t, 4, 2, 1);
  struct tpl__mlc_layout l;
  REQUIRE(tpl__mlc_layout_build(&job, &l) == 0);
  REQUIRE(l.nfiles == 5);
  check_file(&l, 0, 0, 0, (const int[]){0, 1, -1});
  check_file(&l, 1, 1, 1, (const int[]){0, 1, -1});
  check_file(&l, 2, 0, -1, (const int[]){2, -1});
  check_file(&l, 3, 0, 0, (const int[]){3, -1});
  check_file(&l, 4, 1, 1, (const int[]){3, -1});
  CHECK_EQ_U64(tpl__mlc_max_owned(&l, 2), 3);
  tpl__mlc_layout_free(&l);
}

/* 20 + 20 MiB: two files; 40 MiB: alone; 1 MiB after it: a new file. */
static void test_cap(void) {
  struct tpl__job_tensor t[] = {
      tensor("x", 20 * MIB, 0), tensor("y", 20 * MIB, 0),
      tensor("big", 40 * MIB, 0), tensor("z", 1 * MIB, 0),
      tensor("w", 1 * MIB, 0)};
  struct tpl__job job = job_of(t, 5, 1, 1);
  struct tpl__mlc_layout l;
  REQUIRE(tpl__mlc_layout_build(&job, &l) == 0);
  REQUIRE(l.nfiles == 4);
  CHECK_EQ_U64(l.files[0].nbytes, 20 * MIB);
  CHECK_EQ_U64(l.files[1].nbytes, 20 * MIB);
  CHECK_EQ_U64(l.files[2].nbytes, 40 * MIB);
  CHECK_EQ_U64(l.files[2].count, 1);
  CHECK_EQ_U64(l.files[3].nbytes, 2 * MIB);
  for (size_t f = 0; f < l.nfiles; f++)
    CHECK_EQ_INT(l.files[f].shard, -1); /* tp 1: nothing is cut */
  tpl__mlc_layout_free(&l);
}

/* tp 2 x pp 2: stage 1's files are written by ranks 2 and 3; a tensor of
 * both stages is stored once, with stage 0's writers, in a file of its
 * own (not beside stage 0's norm, which stage 1 would read too), and the
 * next such tensor in a new one (stage 1 has been elsewhere since). */
static void test_stages(void) {
  struct tpl__job_tensor t[] = {tensor("emb", 64, 0), tensor("norm0", 64, 0),
                                tensor("a", 128, 1), tensor("b", 128, 1),
                                tensor("head", 64, 0)};
  struct tpl__job job;
  struct tpl__mlc_layout l;
  t[0].stages.count = t[4].stages.count = 2;
  t[3].stages.first = 1;
  job = job_of(t, 5, 2, 2);
  REQUIRE(tpl__mlc_layout_build(&job, &l) == 0);
  REQUIRE(l.nfiles == 7);
  check_file(&l, 0, 0, -1, (const int[]){0, -1});
  check_file(&l, 1, 0, -1, (const int[]){1, -1});
  check_file(&l, 2, 0, 0, (const int[]){2, -1});
  check_file(&l, 3, 1, 1, (const int[]){2, -1});
  check_file(&l, 4, 2, 0, (const int[]){3, -1});
  check_file(&l, 5, 3, 1, (const int[]){3, -1});
  check_file(&l, 6, 0, -1, (const int[]){4, -1});
  tpl__mlc_layout_free(&l);
}

/* The JSON: names, formats, offsets, sums, MLC's counts. */
static void test_json(void) {
  struct tpl__job_tensor t[] = {tensor("a", 128, 1), tensor("norm", 64, 0)};
  struct tpl__job job = job_of(t, 2, 2, 1);
  struct tpl__mlc_layout l;
  char md5[3 * 33];
  json_t *j, *meta, *f1, *r0;
  for (int f = 0; f < 3; f++)
    memset(md5 + f * 33, 'a' + f, 32), md5[f * 33 + 32] = '\0';
  REQUIRE(tpl__mlc_layout_build(&job, &l) == 0);
  meta = json_pack("{s:s, s:f}", "Other", "kept", "BitsPerParam", 8.0);
  j = tpl__mlc_layout_json(&job, &l, md5, meta);
  REQUIRE(j != NULL);
  CHECK_STR(json_string_value(
                json_object_get(json_object_get(j, "metadata"), "Other")),
            "kept");
  CHECK_EQ_U64(json_integer_value(json_object_get(
                   json_object_get(j, "metadata"), "ParamSize")),
               3);
  CHECK(json_real_value(json_object_get(json_object_get(j, "metadata"),
                                        "ParamBytes")) == 192.0);
  f1 = json_array_get(json_object_get(j, "records"), 1);
  CHECK_STR(json_string_value(json_object_get(f1, "dataPath")),
            "params_shard_1.bin");
  CHECK_STR(json_string_value(json_object_get(f1, "format")), "raw-shard");
  CHECK_STR(json_string_value(json_object_get(f1, "md5sum")), md5 + 33);
  CHECK_EQ_U64(json_integer_value(json_object_get(f1, "nbytes")), 64);
  r0 = json_array_get(json_object_get(f1, "records"), 0);
  CHECK_STR(json_string_value(json_object_get(r0, "name")), "a_shard-1");
  CHECK_STR(json_string_value(json_object_get(r0, "dtype")), "uint8");
  CHECK_STR(json_string_value(json_object_get(r0, "format")), "raw");
  CHECK_EQ_U64(json_integer_value(json_object_get(r0, "byteOffset")), 0);
  CHECK_EQ_U64(
      json_integer_value(json_array_get(json_object_get(r0, "shape"), 0)), 64);
  json_decref(j);
  json_decref(meta);
  tpl__mlc_layout_free(&l);
}

/* A cache with a shard record: refused as a model, read when presharded
 * reading is asked for. */
static void test_parser_reads_shard_records_on_request(void) {
  static const char cache[] =
      "{\"records\": [{\"dataPath\": \"params_shard_0.bin\", \"format\": "
      "\"raw-shard\", \"nbytes\": 8, \"md5sum\": \"\", \"records\": "
      "[{\"name\": \"w_shard-1\", \"shape\": [8], \"dtype\": \"uint8\", "
      "\"format\": \"raw\", \"nbytes\": 8, \"byteOffset\": 0}]}]}";
  struct tpl__error err = {0};
  struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, "/nonexistent");
  REQUIRE(m != NULL);
  CHECK_EQ_INT(tpl__mlc_parse_flags(cache, strlen(cache), "c", 0, m, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "already cut");
  tpl__model_free(m);
  m = tpl__model_new(TPL_FMT_MLC, "/nonexistent");
  REQUIRE(m != NULL);
  CHECK_EQ_INT(tpl__mlc_parse_flags(cache, strlen(cache), "c", 1, m, &err), 0);
  CHECK_EQ_U64(m->ntensors, 1);
  if (m->ntensors == 1) CHECK_STR(m->tensors[0].name, "w_shard-1");
  tpl__model_free(m);
}

int main(void) {
  RUN(test_walk_cuts_files);
  RUN(test_cap);
  RUN(test_stages);
  RUN(test_json);
  RUN(test_parser_reads_shard_records_on_request);
  return tap_done();
}
