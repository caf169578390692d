/* test_mlc.c - MLC weight directories (tensor-cache.json /
 * ndarray-cache.json): one case per rule the reader enforces, each
 * building its broken directory here, plus a valid directory of two shard
 * files (one record f32-to-bf16) whose order, offsets and sizes are
 * derived by hand from the records written below. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dtype.h"
#include "fdcache.h"
#include "fmt_mlc_cache.h"
#include "md5sum.h"
#include "mlc_md5.h"
#include "model.h"
#include "source.h"
#include "tap.h"
#include "tmpdir.h"

/* Writes `size` bytes (0, 1, 2, ...) to dir/name. */
static void write_bin(const char *dir, const char *name, size_t size) {
  char path[1024];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL) return;
  for (size_t i = 0; i < size; i++)
    fputc((int)(i & 0xff), f);
  fclose(f);
}

static struct tpl__error err;

/* Opens `dir` with `json` as its tensor-cache.json. */
static int parse(const char *dir, const char *json, struct tpl__model **out) {
  struct tpl__model *m = NULL;
  int rc;
  memset(&err, 0, sizeof(err));
  write_bytes(dir, "tensor-cache.json", json, strlen(json));
  rc = tpl__model_open(dir, &m, &err);
  if (out != NULL && rc == 0)
    *out = m;
  else
    tpl__model_free(m);
  return rc;
}

/* Shard files every case has: params_shard_0.bin (64 bytes) and
 * params_shard_1.bin (24 bytes). */
#define S0 "params_shard_0.bin"
#define S1 "params_shard_1.bin"

static char *make_shards(void) {
  char *dir = make_dir("tpl-mlc");
  if (dir == NULL) return NULL;
  write_bin(dir, S0, 64);
  write_bin(dir, S1, 24);
  return dir;
}

static void expect_fail_in(char *dir, const char *json, int code,
                           const char *frag) {
  CHECK(dir != NULL);
  CHECK_EQ_INT(parse(dir, json, NULL), code);
  CHECK_STR_CONTAINS(err.msg, frag);
  CHECK_STR_CONTAINS(err.msg, "tensor-cache.json");
  drop_dir(dir);
}

static void expect_fail(const char *json, int code, const char *frag) {
  expect_fail_in(make_shards(), json, code, frag);
}

/* A cache with one file record for S0 holding the tensor records `recs`. */
static void recs_json(char *json, size_t len, const char *recs) {
  snprintf(json, len,
           "{\"metadata\":{},\"records\":[{\"dataPath\":\"" S0 "\","
           "\"format\":\"raw-shard\",\"nbytes\":64,\"records\":[%s]}]}",
           recs);
}

static void expect_fail_recs(const char *recs, int code, const char *frag) {
  char json[4096];
  recs_json(json, sizeof(json), recs);
  expect_fail(json, code, frag);
}

/* Parses recs_json(recs) in a fresh directory; *out as parse(). */
static int parse_recs(const char *recs, struct tpl__model **out) {
  char *dir = make_shards(), json[4096];
  int rc = -1;
  recs_json(json, sizeof(json), recs);
  if (dir != NULL) rc = parse(dir, json, out);
  drop_dir(dir);
  return rc;
}

/* A file record for S0 with the given fields and one valid tensor. */
static void expect_fail_file(const char *fields, int code, const char *frag) {
  char json[4096];
  snprintf(json, sizeof(json),
           "{\"records\":[{%s,\"records\":[{\"name\":\"w\",\"shape\":[4],"
           "\"dtype\":\"float16\",\"format\":\"raw\",\"nbytes\":8,"
           "\"byteOffset\":0}]}]}",
           fields);
  expect_fail(json, code, frag);
}

#define REC(name, shape, dtype, fmt, nbytes, off)                              \
  "{\"name\":\"" name "\",\"shape\":" shape ",\"dtype\":\"" dtype              \
  "\",\"format\":\"" fmt "\",\"nbytes\":" nbytes ",\"byteOffset\":" off "}"

static const char valid_json[] =
    "{\"metadata\":{\"ParamSize\":4,\"ParamBytes\":64},\"records\":["
    "{\"dataPath\":\"" S0 "\",\"format\":\"raw-shard\",\"nbytes\":64,"
    "\"md5sum\":\"00\",\"records\":[" REC(
        "w2", "[4,2]", "float16", "raw", "16",
        "32") "," REC("w1", "[4]", "float32", "f32-to-bf16", "8",
                      "0") "," REC("w3", "[8]", "int8", "raw", "8",
                                   "16") "]},"
                                         "{\"dataPath\":\"" S1
                                         "\",\"format\":\"raw-shard\","
                                         "\"nbytes\":24,"
                                         "\"records\":[" REC("e", "[3,4]",
                                                             "bfloat16", "raw",
                                                             "24", "0") "]}]}";

static void test_valid_two_shards(void) {
  char *dir = make_shards();
  struct tpl__model *m = NULL;
  const struct tpl__tensor *t;
  CHECK_EQ_INT(parse(dir, valid_json, &m), 0);
  if (m == NULL) goto out;
  CHECK_EQ_U64(m->nfiles, 2);
  CHECK_EQ_U64(m->ntensors, 4);
  if (m->ntensors != 4 || m->nfiles != 2) goto out;
  CHECK(strcmp(m->files[0].name, S0) == 0);
  CHECK(strcmp(m->files[1].name, S1) == 0);
  CHECK_EQ_U64(m->files[0].size, 64);
  CHECK_EQ_U64(m->files[1].size, 24);
  /* File 0 in byteOffset order: w1 at 0, w3 at 16, w2 at 32; then e. */
  t = m->tensors;
  CHECK(strcmp(t[0].name, "w1") == 0);
  CHECK(strcmp(t[1].name, "w3") == 0);
  CHECK(strcmp(t[2].name, "w2") == 0);
  CHECK(strcmp(t[3].name, "e") == 0);
  CHECK_EQ_U64(t[0].offset, 0);
  CHECK_EQ_U64(t[1].offset, 16);
  CHECK_EQ_U64(t[2].offset, 32);
  CHECK_EQ_U64(t[3].offset, 0);
  CHECK_EQ_U64(t[0].file, 0);
  CHECK_EQ_U64(t[2].file, 0);
  CHECK_EQ_U64(t[3].file, 1);
  /* f32-to-bf16: 4 floats stored as 4 bf16 (8 bytes), decoded 16. */
  CHECK_EQ_INT(t[0].dtype, TPL_DT_F32);
  CHECK_EQ_INT(t[0].encoding, TPL_ENC_F32_TO_BF16);
  CHECK_EQ_U64(t[0].stored_bytes, 8);
  CHECK_EQ_U64(t[0].nbytes, 16);
  CHECK_EQ_INT(t[2].dtype, TPL_DT_F16);
  CHECK_EQ_INT(t[2].encoding, TPL_ENC_RAW);
  CHECK_EQ_U64(t[2].stored_bytes, 16);
  CHECK_EQ_U64(t[2].nbytes, 16);
  CHECK_EQ_INT(t[2].ndim, 2);
  CHECK_EQ_U64(t[2].shape[1], 2);
  CHECK_EQ_INT(t[1].dtype, TPL_DT_I8);
  CHECK_EQ_INT(t[3].dtype, TPL_DT_BF16);
  CHECK_EQ_U64(t[3].nbytes, 24);
  CHECK_EQ_U64(tpl__model_bytes(m), 16 + 8 + 16 + 24);
out:
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_valid_via_model_open(void) {
  char *dir = make_shards(), path[1024];
  struct tpl__model *m = NULL;
  FILE *f;
  snprintf(path, sizeof(path), "%s/ndarray-cache.json", dir);
  f = fopen(path, "w");
  if (f != NULL) {
    fputs(valid_json, f);
    fclose(f);
  }
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__model_open(dir, &m, &err), 0);
  if (m != NULL) {
    CHECK_EQ_INT(m->format, TPL_FMT_MLC);
    CHECK_EQ_U64(m->ntensors, 4);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_scalar_and_empty(void) {
  /* A scalar (shape []) and an empty tensor sharing its offset. */
  char *dir = make_shards();
  struct tpl__model *m = NULL;
  const char *json =
      "{\"records\":[{\"dataPath\":\"" S1 "\",\"format\":\"raw-shard\","
      "\"nbytes\":24,\"records\":[" REC("s", "[]", "float32", "raw", "4",
                                        "0") "," REC("z", "[0,3]", "float32",
                                                     "raw", "0", "0") "]}]}";
  CHECK_EQ_INT(parse(dir, json, &m), 0);
  if (m != NULL && m->ntensors == 2) {
    CHECK_EQ_INT(m->tensors[0].ndim + m->tensors[1].ndim, 2);
    CHECK_EQ_U64(tpl__model_bytes(m), 4);
  }
  tpl__model_free(m);
  drop_dir(dir);
}

static void test_invalid_json(void) {
  expect_fail("{\"records\":[", TPL_EFORMAT, "expected valid JSON");
}

static void test_top_not_object(void) {
  expect_fail("[]", TPL_EFORMAT, "JSON object at top level");
}

static void test_metadata_not_object(void) {
  expect_fail("{\"metadata\":1,\"records\":[]}", TPL_EFORMAT,
              "\"metadata\" to be an object");
}

static void test_records_missing(void) {
  expect_fail("{\"metadata\":{}}", TPL_EFORMAT,
              "expected a \"records\" array of files, found none");
}

static void test_no_tensors(void) {
  expect_fail("{\"records\":[]}", TPL_EFORMAT, "at least one tensor record");
}

static void test_file_record_not_object(void) {
  expect_fail("{\"records\":[\"" S0 "\"]}", TPL_EFORMAT,
              "file record 0: expected an object");
}

static void test_data_path_missing(void) {
  expect_fail_file("\"format\":\"raw-shard\",\"nbytes\":64", TPL_EFORMAT,
                   "expected a \"dataPath\" string, found none");
}

static void test_data_path_empty(void) {
  expect_fail_file("\"dataPath\":\"\",\"format\":\"raw-shard\","
                   "\"nbytes\":64",
                   TPL_EFORMAT, "found an empty name");
}

static void test_data_path_absolute(void) {
  expect_fail_file("\"dataPath\":\"/etc/hostname\",\"format\":"
                   "\"raw-shard\",\"nbytes\":64",
                   TPL_EFORMAT, "absolute path '/etc/hostname'");
}

static void test_data_path_slash(void) {
  expect_fail_file("\"dataPath\":\"x/" S0 "\",\"format\":\"raw-shard\","
                   "\"nbytes\":64",
                   TPL_EFORMAT, "without '/'");
}

static void test_data_path_dotdot(void) {
  expect_fail_file("\"dataPath\":\"..\",\"format\":\"raw-shard\","
                   "\"nbytes\":64",
                   TPL_EFORMAT, "found '..'");
}

static void test_data_path_symlink_outside(void) {
  char *dir = make_shards(), *other = make_dir("tpl-mlc"), link[1024];
  char tgt[1024];
  write_bin(other, "secret.bin", 64);
  snprintf(tgt, sizeof(tgt), "%s/secret.bin", other);
  snprintf(link, sizeof(link), "%s/evil.bin", dir);
  CHECK_EQ_INT(symlink(tgt, link), 0);
  expect_fail_in(dir,
                 "{\"records\":[{\"dataPath\":\"evil.bin\",\"format\":"
                 "\"raw-shard\",\"nbytes\":64,\"records\":[]}]}",
                 TPL_EFORMAT, "symlink to");
  drop_dir(other);
}

static void test_data_path_missing_file(void) {
  expect_fail_file("\"dataPath\":\"params_shard_9.bin\",\"format\":"
                   "\"raw-shard\",\"nbytes\":64",
                   -ENOENT, "'params_shard_9.bin', found no such file");
}

static void test_data_path_not_regular(void) {
  char *dir = make_shards(), sub[1024];
  snprintf(sub, sizeof(sub), "%s/shard_dir.bin", dir);
  CHECK_EQ_INT(mkdir(sub, 0700), 0);
  expect_fail_in(dir,
                 "{\"records\":[{\"dataPath\":\"shard_dir.bin\",\"format\":"
                 "\"raw-shard\",\"nbytes\":64,\"records\":[]}]}",
                 TPL_EFORMAT, "regular file");
}

static void test_data_path_twice(void) {
  expect_fail("{\"records\":["
              "{\"dataPath\":\"" S1 "\",\"format\":\"raw-shard\","
              "\"nbytes\":24,\"records\":[]},"
              "{\"dataPath\":\"" S1 "\",\"format\":\"raw-shard\","
              "\"nbytes\":24,\"records\":[]}]}",
              TPL_EFORMAT, "file record 1: expected each dataPath once");
}

static void test_file_format_unknown(void) {
  expect_fail_file("\"dataPath\":\"" S0 "\",\"format\":\"zip\","
                   "\"nbytes\":64",
                   TPL_EFORMAT, "expected format \"raw-shard\", found 'zip'");
}

static void test_file_nbytes_mismatch(void) {
  expect_fail_file("\"dataPath\":\"" S0 "\",\"format\":\"raw-shard\","
                   "\"nbytes\":65",
                   TPL_EFORMAT, "expected 65 bytes on disk");
}

static void test_file_nbytes_missing(void) {
  expect_fail_file("\"dataPath\":\"" S0 "\",\"format\":\"raw-shard\"",
                   TPL_EFORMAT, "file '" S0 "': expected \"nbytes\"");
}

static void test_file_records_not_array(void) {
  expect_fail("{\"records\":[{\"dataPath\":\"" S0 "\",\"format\":"
              "\"raw-shard\",\"nbytes\":64,\"records\":{}}]}",
              TPL_EFORMAT, "expected a \"records\" array, found another");
}

static void test_record_not_object(void) {
  expect_fail_recs("[1]", TPL_EFORMAT, "record 0: expected an object");
}

static void test_name_missing(void) {
  expect_fail_recs("{\"shape\":[4],\"dtype\":\"int8\",\"format\":\"raw\","
                   "\"nbytes\":4,\"byteOffset\":0}",
                   TPL_EFORMAT, "expected a \"name\" string, found none");
}

static void test_name_empty(void) {
  expect_fail_recs(REC("", "[4]", "int8", "raw", "4", "0"), TPL_EFORMAT,
                   "expected a name of 1 to");
}

static void test_name_duplicate(void) {
  expect_fail("{\"records\":["
              "{\"dataPath\":\"" S0 "\",\"format\":\"raw-shard\","
              "\"nbytes\":64,\"records\":[" REC(
                  "w", "[4]", "int8", "raw", "4",
                  "0") "]},"
                       "{\"dataPath\":\"" S1 "\",\"format\":\"raw-shard\","
                       "\"nbytes\":24,\"records\":[" REC(
                           "w", "[4]", "int8", "raw", "4", "0") "]}]}",
              TPL_EFORMAT, "tensor 'w': expected one record per name");
  CHECK_STR_CONTAINS(err.msg, "'" S0 "' and again in '" S1 "'");
}

static void test_shape_not_array(void) {
  expect_fail_recs(REC("w", "4", "int8", "raw", "4", "0"), TPL_EFORMAT,
                   "tensor 'w': expected a \"shape\" array");
}

static void test_shape_negative(void) {
  expect_fail_recs(REC("w", "[2,-2]", "int8", "raw", "4", "0"), TPL_EFORMAT,
                   "expected dim 1 to be a non-negative integer");
}

static void test_shape_fraction(void) {
  expect_fail_recs(REC("w", "[2.5]", "int8", "raw", "4", "0"), TPL_EFORMAT,
                   "expected dim 0 to be a non-negative integer");
}

static void test_shape_too_many_dims(void) {
  expect_fail_recs(REC("w", "[1,1,1,1,1,1,1,1,4]", "int8", "raw", "4", "0"),
                   TPL_EFORMAT, "expected at most 8 dims, found 9");
}

static void test_dtype_missing(void) {
  expect_fail_recs("{\"name\":\"w\",\"shape\":[4],\"format\":\"raw\","
                   "\"nbytes\":4,\"byteOffset\":0}",
                   TPL_EFORMAT, "expected a \"dtype\" string, found none");
}

static void test_dtype_unknown(void) {
  expect_fail_recs(REC("w", "[4]", "int4", "raw", "2", "0"), TPL_EDTYPE,
                   "tensor 'w': expected an MLC dtype");
  CHECK_STR_CONTAINS(err.msg, "found 'int4'");
  CHECK_EQ_INT(tpl_exit_code(TPL_EDTYPE), 65);
}

static void test_format_missing(void) {
  expect_fail_recs("{\"name\":\"w\",\"shape\":[4],\"dtype\":\"int8\","
                   "\"nbytes\":4,\"byteOffset\":0}",
                   TPL_EFORMAT, "expected a \"format\" string, found none");
}

static void test_format_unknown(void) {
  expect_fail_recs(REC("w", "[4]", "int8", "q4f16", "4", "0"), TPL_EFORMAT,
                   "expected format \"raw\" or \"f32-to-bf16\", found "
                   "'q4f16'");
}

/* TVM's dump_tensor_cache (python/tvm/contrib/tvmjs.py) writes the
 * cache's encode_format on every record and converts float32 only; its
 * loaders decode only dtype float32 with f32-to-bf16.  So a float16,
 * uint32 or bfloat16 record under f32-to-bf16 is raw, numel x itemsize. */
static void test_bf16_format_on_other_dtypes_is_raw(void) {
  struct tpl__model *m = NULL;
  CHECK_EQ_INT(
      parse_recs(REC("h", "[4]", "float16", "f32-to-bf16", "8", "0") "," REC(
                     "q", "[2,2]", "uint32", "f32-to-bf16", "16",
                     "8") "," REC("f", "[4]", "float32", "f32-to-bf16", "8",
                                  "24") "," REC("b", "[4]", "bfloat16",
                                                "f32-to-bf16", "8", "32"),
                 &m),
      0);
  if (m != NULL && m->ntensors == 4) {
    const struct tpl__tensor *t = m->tensors;
    CHECK(strcmp(t[0].name, "h") == 0);
    CHECK_EQ_INT(t[0].encoding, TPL_ENC_RAW);
    CHECK_EQ_U64(t[0].stored_bytes, 8);
    CHECK_EQ_U64(t[0].nbytes, 8);
    CHECK_EQ_INT(t[1].dtype, TPL_DT_U32);
    CHECK_EQ_INT(t[1].encoding, TPL_ENC_RAW);
    CHECK_EQ_U64(t[1].nbytes, 16);
    CHECK_EQ_INT(t[2].encoding, TPL_ENC_F32_TO_BF16);
    CHECK_EQ_U64(t[2].stored_bytes, 8);
    CHECK_EQ_U64(t[2].nbytes, 16);
    CHECK_EQ_INT(t[3].encoding, TPL_ENC_RAW);
  } else {
    CHECK(m != NULL && m->ntensors == 4);
  }
  tpl__model_free(m);
}

/* A raw float16 record's nbytes is numel x 2 even under f32-to-bf16. */
static void test_bf16_format_other_dtype_nbytes(void) {
  expect_fail_recs(REC("w", "[4]", "uint32", "f32-to-bf16", "8", "0"),
                   TPL_EFORMAT, "tensor 'w': expected nbytes 16");
}

/* MLC_INTERNAL_PRESHARD_NUM caches (support/preshard.py) name worker K's
 * piece "X_shard-K". */
/* A cache MLC presharded opens as its own format, records as they are:
 * its cut comes from the plan later (src/mlc_cut.c). */
static void test_preshard_opened(void) {
  struct tpl__model *m = NULL;
  CHECK_EQ_INT(
      parse_recs(REC("w_shard-0", "[4]", "float16", "raw", "8", "0") "," REC(
                     "w_shard-1", "[4]", "float16", "raw", "8", "8"),
                 &m),
      0);
  REQUIRE(m != NULL);
  CHECK_EQ_INT(m->format, TPL_FMT_MLC_SHARDED);
  CHECK_EQ_U64(m->ntensors, 2);
  tpl__model_free(m);
}

/* safetensors reserves __metadata__: refused where it is read (issue 31:
 * it passed inspect, load and serve, then preshard and dump failed). */
static void test_metadata_name_refused(void) {
  expect_fail_recs(REC("__metadata__", "[4]", "float16", "raw", "8", "0"),
                   TPL_EFORMAT, "tensor '__metadata__'");
  CHECK_STR_CONTAINS(err.msg, "record 0");
  CHECK_STR_CONTAINS(err.msg, "reserves __metadata__");
  /* Only the exact name. */
  CHECK_EQ_INT(parse_recs(REC("__metadata__x", "[4]", "float16", "raw", "8",
                              "0") "," REC("_metadata__", "[4]", "float16",
                                           "raw", "8", "8"),
                          NULL),
               0);
}

/* A dataPath no file system could hold (64 KiB) is the cache's bad
 * data (65), not an I/O error at open (ENAMETOOLONG, 74). */
static void test_data_path_too_long(void) {
  static char json[70000];
  char *name = malloc(65537);
  CHECK(name != NULL);
  if (name == NULL) return;
  memset(name, 'p', 65536);
  name[65536] = '\0';
  snprintf(json, sizeof(json),
           "{\"records\":[{\"dataPath\":\"%s\",\"format\":\"raw-shard\","
           "\"nbytes\":64,\"records\":[]}]}",
           name);
  free(name);
  expect_fail(json, TPL_EFORMAT,
              "expected a file name of at most 255 bytes, "
              "found 65536 bytes");
}

/* Names that merely contain the tag are ordinary tensors. */
static void test_preshard_lookalike_accepted(void) {
  CHECK_EQ_INT(
      parse_recs(REC("a_shard-", "[4]", "float16", "raw", "8",
                     "0") "," REC("b_shard-1x", "[4]", "float16", "raw", "8",
                                  "8") "," REC("_shard1", "[4]", "float16",
                                               "raw", "8", "16"),
                 NULL),
      0);
}

static void test_nbytes_raw_mismatch(void) {
  /* [4,2] float16 is 8 x 2 = 16 bytes. */
  expect_fail_recs(REC("w", "[4,2]", "float16", "raw", "8", "0"), TPL_EFORMAT,
                   "expected nbytes 16 (8 elements x 2 bytes)"
                   ", found 8");
}

static void test_nbytes_bf16_mismatch(void) {
  /* f32-to-bf16 stores 4 x 2 = 8 bytes, not the decoded 16. */
  expect_fail_recs(REC("w", "[4]", "float32", "f32-to-bf16", "16", "0"),
                   TPL_EFORMAT,
                   "expected nbytes 8 (4 elements x 2 bytes)"
                   ", found 16");
}

static void test_nbytes_missing(void) {
  expect_fail_recs("{\"name\":\"w\",\"shape\":[4],\"dtype\":\"int8\","
                   "\"format\":\"raw\",\"byteOffset\":0}",
                   TPL_EFORMAT, "tensor 'w': expected \"nbytes\"");
}

static void test_numel_overflow(void) {
  expect_fail_recs(REC("w", "[4294967296,4294967296]", "int8", "raw", "0", "0"),
                   TPL_EOVERFLOW, "element count fits 64 bits");
}

static void test_bytes_overflow(void) {
  /* 2^62 elements fit; x 8 bytes does not. */
  expect_fail_recs(
      REC("w", "[4611686018427387904]", "float64", "raw", "0", "0"),
      TPL_EOVERFLOW, "byte size that fits 64 bits");
}

static void test_offset_missing(void) {
  expect_fail_recs("{\"name\":\"w\",\"shape\":[4],\"dtype\":\"int8\","
                   "\"format\":\"raw\",\"nbytes\":4}",
                   TPL_EFORMAT, "expected \"byteOffset\"");
}

static void test_offset_huge(void) {
  expect_fail_recs(REC("w", "[4]", "int8", "raw", "4", "9223372036854775807"),
                   TPL_EFORMAT, "past its end");
}

static void test_range_past_end(void) {
  /* 8 bytes at 60 end at 68 > 64. */
  expect_fail_recs(REC("w", "[8]", "uint8", "raw", "8", "60"), TPL_EFORMAT,
                   "expected bytes [60, 68) inside '" S0 "' of 64 bytes");
}

static void test_overlap(void) {
  expect_fail_recs(REC("a", "[8]", "uint8", "raw", "8", "0") "," REC(
                       "b", "[16]", "uint8", "raw", "16",
                       "32") "," REC("c", "[4]", "float32", "raw", "16", "40"),
                   TPL_EFORMAT, "tensor 'c': expected bytes [40, 56)");
  CHECK_STR_CONTAINS(err.msg, "overlapping tensor 'b' at [32, 48)");
}

/* The parser alone touches no file: a cache of a directory that does not
 * exist gives its files, unopened, at the sizes the cache declares. */
static void test_parse_only_reads_no_file(void) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, "/nonexistent");
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__mlc_parse_flags(valid_json, strlen(valid_json),
                                    "/nonexistent/tensor-cache.json", 0, m,
                                    &err),
               0);
  CHECK_EQ_U64(m->ntensors, 4);
  CHECK_EQ_U64(m->nfiles, 2);
  if (m->nfiles == 2) {
    CHECK(strcmp(m->files[0].name, S0) == 0);
    CHECK(strcmp(m->files[0].path, "/nonexistent/" S0) == 0);
    CHECK_EQ_U64(m->files[0].size, 64);
    CHECK_EQ_U64(m->files[1].size, 24);
    CHECK(!tpl__fdcache_held(m->fds, 0)); /* nothing opened yet */
  }
  tpl__model_free(m);
}

/* --- md5sum: recorded as TVM's writer records it, checked on request --- */

/* hashlib.md5(bytes(range(64))).hexdigest() and of range(24): the two
 * shard files make_shards writes (computed with Python's hashlib). */
#define MD5_S0 "b2d3f56bc197fd985d5965079b5e7148"
#define MD5_S1 "8bd9c8efbbac58748951ca5a45cfd386"

/* Exactly the string `want` (a contained one of the same length). */
#define CHECK_STR(got, want)                                                   \
  do {                                                                         \
    CHECK_STR_CONTAINS(got, want);                                             \
    CHECK_EQ_U64(strlen(got), strlen(want));                                   \
  } while (0)

/* RFC 1321's test suite: MD5 ("") and MD5 ("abc"). */
static void test_md5_rfc1321(void) {
  char *dir = make_dir("tpl-md5"), path[1024], hex[TPL_MD5_HEX];
  struct tpl__md5 m;
  uint8_t sum[16];
  int fd;
  tpl__md5_init(&m);
  tpl__md5_digest(&m, sum);
  tpl__md5_hex(sum, hex);
  CHECK_STR(hex, "d41d8cd98f00b204e9800998ecf8427e");
  REQUIRE(dir != NULL);
  write_bytes(dir, "abc", "abc", 3);
  snprintf(path, sizeof(path), "%s/abc", dir);
  fd = open(path, O_RDONLY);
  CHECK_EQ_INT(tpl__md5_file(fd, 3, hex), 0);
  CHECK_STR(hex, "900150983cd24fb0d6963f7d28e17f72");
  CHECK_EQ_INT(tpl__md5_file(fd, 4, hex), TPL_ESHORT); /* ends early */
  close(fd);
  drop_dir(dir);
}

static void test_md5_parse(void) {
  char hex[TPL_MD5_HEX];
  CHECK_EQ_INT(tpl__md5_parse("B2D3F56BC197FD985D5965079B5E7148", 32, hex), 0);
  CHECK_STR(hex, MD5_S0);
  CHECK_EQ_INT(tpl__md5_parse(MD5_S0, 31, hex), -1);
  CHECK_EQ_INT(tpl__md5_parse(MD5_S0 "0", 33, hex), -1);
  CHECK_EQ_INT(tpl__md5_parse("g2d3f56bc197fd985d5965079b5e7148", 32, hex), -1);
  CHECK_EQ_INT(tpl__md5_parse("", 0, hex), -1);
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__md5_check("d/f.bin", "the cache", MD5_S0, MD5_S1,
                              TPL_EMISMATCH, &err),
               TPL_EMISMATCH);
  CHECK_STR(err.msg, "d/f.bin: expected md5sum " MD5_S0
                     " as the cache records, found " MD5_S1);
  CHECK_EQ_INT(tpl__md5_check("d/f.bin", "the cache", MD5_S0, MD5_S0,
                              TPL_EMISMATCH, &err),
               0);
}

/* valid_json's file records: S0 has md5sum "00", S1 none.  Without
 * --verify-md5 nothing judges them: the cache opens as before. */
static void test_md5_states(void) {
  char *dir = make_shards();
  struct tpl__model *m = NULL;
  CHECK_EQ_INT(parse(dir, valid_json, &m), 0);
  REQUIRE(m != NULL);
  CHECK_EQ_INT(m->files[0].md5_state, TPL_MD5_BAD);
  CHECK_EQ_INT(m->files[1].md5_state, TPL_MD5_NONE);
  CHECK_EQ_INT(tpl__mlc_md5_ready(m, dir, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, S0 ": --verify-md5: expected its file record");
  CHECK_STR_CONTAINS(err.msg, "found another value");
  m->files[0].md5_state = TPL_MD5_OK;
  CHECK_EQ_INT(tpl__mlc_md5_ready(m, dir, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, S1 ": --verify-md5:");
  CHECK_STR_CONTAINS(err.msg, "found none");
  m->format = TPL_FMT_SAFETENSORS;
  CHECK_EQ_INT(tpl__mlc_md5_ready(m, "x.safetensors", &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "'x.safetensors' is a safetensors file");
  tpl__model_free(m);
  drop_dir(dir);
}

/* A cache whose records carry md5sums: `s0` and `s1` (JSON values). */
static void md5_json(char *json, size_t len, const char *s0, const char *s1) {
  snprintf(json, len,
           "{\"records\":["
           "{\"dataPath\":\"" S0 "\",\"format\":\"raw-shard\",\"nbytes\":64,"
           "\"md5sum\":%s,\"records\":[" REC(
               "a", "[64]", "int8", "raw", "64",
               "0") "]},"
                    "{\"dataPath\":\"" S1
                    "\",\"format\":\"raw-shard\",\"nbytes\":24,"
                    "\"md5sum\":%s,\"records\":[" REC("b", "[8]", "int8", "raw",
                                                      "8", "8") "]}]}",
           s0, s1);
}

static void test_md5_recorded(void) {
  char *dir = make_shards(), json[4096];
  struct tpl__model *m = NULL;
  md5_json(json, sizeof(json), "\"" MD5_S0 "\"", "5");
  CHECK_EQ_INT(parse(dir, json, &m), 0);
  REQUIRE(m != NULL);
  CHECK_EQ_INT(m->files[0].md5_state, TPL_MD5_OK);
  CHECK_STR(m->files[0].md5, MD5_S0);
  CHECK_EQ_INT(m->files[1].md5_state, TPL_MD5_BAD); /* a number */
  tpl__model_free(m);
  drop_dir(dir);
}

/* The pass over the files through a source: `chunk` bytes a read (10:
 * several reads per file, in flight across the files' boundary). */
static int md5_pass(const char *s0_md5, const char *s1_md5, uint64_t chunk,
                    uint64_t *bytes) {
  char *dir = make_shards(), json[4096];
  struct tpl__model *m = NULL;
  struct tpl__source *src = NULL;
  struct tpl__mlc_md5 v = {.chunk = chunk};
  int rc;
  const char *paths[2];
  md5_json(json, sizeof(json), s0_md5, s1_md5);
  rc = parse(dir, json, &m);
  if (rc == 0) {
    for (int f = 0; f < 2; f++)
      paths[f] = m->files[f].path;
    rc = tpl__source_files_open(&src, m->fds, paths, 2, TPL_IO_BUFFERED, &err);
  }
  v.src = src;
  v.m = m;
  if (rc == 0) rc = tpl__mlc_md5_verify(&v, &err);
  *bytes = v.bytes;
  tpl__source_close(src);
  tpl__model_free(m);
  drop_dir(dir);
  return rc;
}

#define GOOD0 "\"" MD5_S0 "\""
#define GOOD1 "\"" MD5_S1 "\""

/* Files are hashed side by side (a lane each): whichever ends first,
 * the lowest file whose sum differs is the one told. */
static void test_md5_pass(void) {
  uint64_t bytes = 0;
  CHECK_EQ_INT(md5_pass(GOOD0, GOOD1, 10, &bytes), 0);
  CHECK_EQ_U64(bytes, 64 + 24);
  CHECK_EQ_INT(md5_pass(GOOD0, GOOD1, 1 << 20, &bytes), 0);
  CHECK_EQ_U64(bytes, 64 + 24);
  CHECK_EQ_INT(md5_pass(GOOD0, GOOD0, 10, &bytes), TPL_EMISMATCH);
  CHECK_STR_CONTAINS(err.msg, S1 ": expected md5sum " MD5_S0
                                 " as the cache records, found " MD5_S1);
  CHECK_EQ_INT(md5_pass(GOOD1, GOOD0, 10, &bytes), TPL_EMISMATCH);
  CHECK_STR_CONTAINS(err.msg, S0 ": expected md5sum " MD5_S1
                                 " as the cache records, found " MD5_S0);
}

int main(void) {
  RUN(test_parse_only_reads_no_file);
  RUN(test_valid_two_shards);
  RUN(test_valid_via_model_open);
  RUN(test_scalar_and_empty);
  RUN(test_invalid_json);
  RUN(test_top_not_object);
  RUN(test_metadata_not_object);
  RUN(test_records_missing);
  RUN(test_no_tensors);
  RUN(test_file_record_not_object);
  RUN(test_data_path_missing);
  RUN(test_data_path_empty);
  RUN(test_data_path_absolute);
  RUN(test_data_path_slash);
  RUN(test_data_path_dotdot);
  RUN(test_data_path_symlink_outside);
  RUN(test_data_path_missing_file);
  RUN(test_data_path_not_regular);
  RUN(test_data_path_twice);
  RUN(test_file_format_unknown);
  RUN(test_file_nbytes_mismatch);
  RUN(test_file_nbytes_missing);
  RUN(test_file_records_not_array);
  RUN(test_record_not_object);
  RUN(test_name_missing);
  RUN(test_name_empty);
  RUN(test_name_duplicate);
  RUN(test_shape_not_array);
  RUN(test_shape_negative);
  RUN(test_shape_fraction);
  RUN(test_shape_too_many_dims);
  RUN(test_dtype_missing);
  RUN(test_dtype_unknown);
  RUN(test_format_missing);
  RUN(test_format_unknown);
  RUN(test_bf16_format_on_other_dtypes_is_raw);
  RUN(test_bf16_format_other_dtype_nbytes);
  RUN(test_preshard_opened);
  RUN(test_metadata_name_refused);
  RUN(test_data_path_too_long);
  RUN(test_preshard_lookalike_accepted);
  RUN(test_nbytes_raw_mismatch);
  RUN(test_nbytes_bf16_mismatch);
  RUN(test_nbytes_missing);
  RUN(test_numel_overflow);
  RUN(test_bytes_overflow);
  RUN(test_offset_missing);
  RUN(test_offset_huge);
  RUN(test_range_past_end);
  RUN(test_overlap);
  RUN(test_md5_rfc1321);
  RUN(test_md5_parse);
  RUN(test_md5_states);
  RUN(test_md5_recorded);
  RUN(test_md5_pass);
  return tap_done();
}
