/* test_st_writer.c - the safetensors header writer: exact bytes for small
 * headers (written out by hand below), padding to 8 bytes, back-to-back
 * data offsets, escaping of awkward names (checked by decoding the JSON
 * and by a round trip through the reader), and every refusal. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fmt_safetensors.h"
#include "model.h"
#include "st_writer.h"
#include "tap.h"

static uint64_t le64(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | b[i];
  return v;
}

/* Checks prefix, padding and that the unpadded JSON equals `json`. */
static void check_exact(const uint8_t *h, size_t len, const char *json) {
  size_t jlen = strlen(json), padded = (jlen + 7) / 8 * 8;
  CHECK_EQ_U64(len, 8 + padded);
  CHECK_EQ_U64(le64(h), padded);
  CHECK(len >= 8 + jlen && memcmp(h + 8, json, jlen) == 0);
  for (size_t i = 8 + jlen; i < len; i++)
    CHECK_EQ_INT(h[i], ' ');
}

static void test_empty_header(void) {
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(NULL, 0, NULL, 0, &h, &len), 0);
  /* "{}" padded with 6 spaces to 8: 16 bytes in all. */
  CHECK_EQ_U64(len, 16);
  if (h != NULL) check_exact(h, len, "{}");
  free(h);
}

static void test_one_tensor_exact(void) {
  static const uint64_t shape[2] = {2, 3};
  struct tpl__st_out t = {"a", TPL_DT_F32, 2, shape, 24};
  const char *meta[2] = {"format", "pt"};
  const char *want = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                     "\"data_offsets\":[0,24]}}";
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(&t, 1, meta, 1, &h, &len), 0);
  /* 88 bytes of JSON: already a multiple of 8, no padding. */
  CHECK_EQ_U64(strlen(want), 88);
  CHECK_EQ_U64(len, 8 + 88);
  if (h != NULL) check_exact(h, len, want);
  free(h);
}

static void test_scalar_and_order(void) {
  static const uint64_t s3[1] = {3}, s0[1] = {0};
  struct tpl__st_out t[3] = {{"z", TPL_DT_BF16, 1, s3, 6},
                             {"s", TPL_DT_F64, 0, NULL, 8},
                             {"e", TPL_DT_F32, 1, s0, 0}};
  const char *want = "{\"z\":{\"dtype\":\"BF16\",\"shape\":[3],"
                     "\"data_offsets\":[0,6]},"
                     "\"s\":{\"dtype\":\"F64\",\"shape\":[],"
                     "\"data_offsets\":[6,14]},"
                     "\"e\":{\"dtype\":\"F32\",\"shape\":[0],"
                     "\"data_offsets\":[14,14]}}";
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(t, 3, NULL, 0, &h, &len), 0);
  if (h != NULL) check_exact(h, len, want);
  free(h);
}

static void test_metadata_first_in_order(void) {
  static const uint64_t s1[1] = {1};
  struct tpl__st_out t = {"w", TPL_DT_U8, 1, s1, 1};
  const char *meta[4] = {"zeta", "1", "alpha", "x\"y"};
  const char *want = "{\"__metadata__\":{\"zeta\":\"1\",\"alpha\":"
                     "\"x\\\"y\"},\"w\":{\"dtype\":\"U8\",\"shape\":[1],"
                     "\"data_offsets\":[0,1]}}";
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(&t, 1, meta, 2, &h, &len), 0);
  if (h != NULL) check_exact(h, len, want);
  free(h);
}

/* Every JSON length from 1 to 24 extra name bytes pads to a multiple of 8
 * with fewer than 8 spaces. */
static void test_padding_all_lengths(void) {
  static const uint64_t s1[1] = {1};
  char name[32];
  for (int n = 1; n <= 24; n++) {
    struct tpl__st_out t = {name, TPL_DT_U8, 1, s1, 1};
    uint8_t *h = NULL;
    size_t len = 0, end;
    memset(name, 'n', (size_t)n);
    name[n] = '\0';
    CHECK_EQ_INT(tpl__st_build_header(&t, 1, NULL, 0, &h, &len), 0);
    if (h == NULL) continue;
    CHECK_EQ_U64(len % 8, 0);
    CHECK_EQ_U64(le64(h), len - 8);
    end = len;
    while (end > 8 && h[end - 1] == ' ')
      end--;
    CHECK_EQ_INT(h[end - 1], '}');
    CHECK(len - end < 8);
    free(h);
  }
}

static const char *const odd_names[] = {"q\"uote",
                                        "back\\slash",
                                        "new\nline",
                                        "tab\there",
                                        "ctl\x01\x1f",
                                        "slash/name",
                                        "caf\xc3\xa9",
                                        "\xe6\x97\xa5\xe6\x9c\xac",
                                        "emoji\xf0\x9f\x98\x80",
                                        "sp ace",
                                        "\x7f"
                                        "del"};

static void build_odd(struct tpl__st_out *t, uint64_t *shape) {
  for (size_t i = 0; i < ARRAY_SIZE(odd_names); i++) {
    t[i].name = odd_names[i];
    t[i].dtype = TPL_DT_U8;
    t[i].ndim = 1;
    t[i].shape = shape;
    t[i].nbytes = 2;
  }
}

static void test_escaping_decodes_exactly(void) {
  struct tpl__st_out t[ARRAY_SIZE(odd_names)];
  uint64_t shape[1] = {2};
  uint8_t *h = NULL;
  size_t len = 0;
  json_t *root;
  build_odd(t, shape);
  CHECK_EQ_INT(tpl__st_build_header(t, ARRAY_SIZE(t), NULL, 0, &h, &len), 0);
  REQUIRE(h != NULL);
  /* Raw control characters never appear inside the header. */
  for (size_t i = 8; i < len; i++)
    CHECK(h[i] >= 0x20);
  root = json_loadb((const char *)h + 8, len - 8, JSON_REJECT_DUPLICATES, NULL);
  CHECK(root != NULL);
  for (size_t i = 0; root != NULL && i < ARRAY_SIZE(odd_names); i++) {
    json_t *e = json_object_get(root, odd_names[i]);
    json_t *offs = json_object_get(e, "data_offsets");
    CHECK(e != NULL);
    CHECK_EQ_INT(json_integer_value(json_array_get(offs, 0)), 2 * i);
  }
  CHECK_EQ_U64(json_object_size(root), ARRAY_SIZE(odd_names));
  json_decref(root);
  free(h);
}

/* Header + data through the real reader: names, shapes, offsets back. */
static void test_round_trip_reader(void) {
  struct tpl__st_out t[ARRAY_SIZE(odd_names)];
  uint64_t shape[1] = {2};
  uint8_t *h = NULL, *file;
  size_t len = 0, data = 2 * ARRAY_SIZE(odd_names);
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  struct tpl__error err = {0};
  build_odd(t, shape);
  CHECK_EQ_INT(tpl__st_build_header(t, ARRAY_SIZE(t), NULL, 0, &h, &len), 0);
  file = calloc(1, len + data);
  if (h == NULL || file == NULL || m == NULL) goto out;
  memcpy(file, h, len);
  CHECK_EQ_INT(tpl__st_parse(file, len + data, len + data, "mem", 0, m, &err),
               0);
  if (err.msg[0]) printf("# %s\n", err.msg);
  CHECK_EQ_U64(m->ntensors, ARRAY_SIZE(odd_names));
  for (size_t i = 0; i < m->ntensors && i < ARRAY_SIZE(odd_names); i++) {
    CHECK(strcmp(m->tensors[i].name, odd_names[i]) == 0);
    CHECK_EQ_INT(m->tensors[i].dtype, TPL_DT_U8);
    CHECK_EQ_INT(m->tensors[i].ndim, 1);
    CHECK_EQ_U64(m->tensors[i].shape[0], 2);
    CHECK_EQ_U64(m->tensors[i].offset, len + 2 * i);
    CHECK_EQ_U64(m->tensors[i].nbytes, 2);
  }
out:
  tpl__model_free(m);
  free(file);
  free(h);
}

static int build_one(const char *name, int dtype, int ndim,
                     const uint64_t *shape, uint64_t nbytes) {
  struct tpl__st_out t = {name, dtype, ndim, shape, nbytes};
  uint8_t *h = (uint8_t *)"untouched";
  size_t len = 12345;
  int rc = tpl__st_build_header(&t, 1, NULL, 0, &h, &len);
  if (rc == 0)
    free(h);
  else
    CHECK(len == 12345 && strcmp((char *)h, "untouched") == 0);
  return rc;
}

static void test_refuses_wrong_nbytes(void) {
  static const uint64_t s[2] = {2, 3};
  CHECK_EQ_INT(build_one("w", TPL_DT_F16, 2, s, 11), TPL_EINTERNAL);
  CHECK_EQ_INT(build_one("w", TPL_DT_F16, 2, s, 13), TPL_EINTERNAL);
  CHECK_EQ_INT(build_one("w", TPL_DT_F16, 2, s, 12), 0);
}

static void test_refuses_bad_dtype(void) {
  static const uint64_t s[1] = {1};
  CHECK_EQ_INT(build_one("w", TPL_DT_COUNT, 1, s, 1), TPL_EDTYPE);
  CHECK_EQ_INT(build_one("w", -1, 1, s, 1), TPL_EDTYPE);
}

static void test_refuses_bad_rank(void) {
  static const uint64_t s[TPL_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_EQ_INT(build_one("w", TPL_DT_U8, TPL_MAX_DIMS + 1, s, 1),
               TPL_EINTERNAL);
  CHECK_EQ_INT(build_one("w", TPL_DT_U8, -1, s, 1), TPL_EINTERNAL);
  CHECK_EQ_INT(build_one("w", TPL_DT_U8, TPL_MAX_DIMS, s, 1), 0);
}

static void test_refuses_size_overflow(void) {
  static const uint64_t s[2] = {1ull << 62, 8};
  static const uint64_t big[1] = {1ull << 63};
  CHECK_EQ_INT(build_one("w", TPL_DT_F32, 2, s, 0), TPL_EOVERFLOW);
  /* 2^63 fits uint64 but not a JSON (signed 64-bit) integer. */
  CHECK_EQ_INT(build_one("w", TPL_DT_U8, 1, big, 1ull << 63), TPL_EOVERFLOW);
}

static void test_refuses_offset_overflow(void) {
  static const uint64_t s[1] = {1ull << 62};
  struct tpl__st_out t[3] = {{"a", TPL_DT_U8, 1, s, 1ull << 62},
                             {"b", TPL_DT_U8, 1, s, 1ull << 62},
                             {"c", TPL_DT_U8, 1, s, 1ull << 62}};
  uint8_t *h = NULL;
  size_t len = 0;
  /* Ends at 3 x 2^62 > INT64_MAX: not representable in the header. */
  CHECK_EQ_INT(tpl__st_build_header(t, 3, NULL, 0, &h, &len), TPL_EOVERFLOW);
  CHECK(h == NULL);
  /* Two of them end at exactly 2^63: also out of range. */
  CHECK_EQ_INT(tpl__st_build_header(t, 2, NULL, 0, &h, &len), TPL_EOVERFLOW);
  CHECK_EQ_INT(tpl__st_build_header(t, 1, NULL, 0, &h, &len), 0);
  free(h);
}

static void test_refuses_duplicate_name(void) {
  static const uint64_t s[1] = {1};
  struct tpl__st_out t[2] = {{"a", TPL_DT_U8, 1, s, 1},
                             {"a", TPL_DT_U8, 1, s, 1}};
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(t, 2, NULL, 0, &h, &len), TPL_EFORMAT);
}

static void test_refuses_metadata_name(void) {
  static const uint64_t s[1] = {1};
  CHECK_EQ_INT(build_one("__metadata__", TPL_DT_U8, 1, s, 1), TPL_EFORMAT);
}

static void test_refuses_invalid_utf8(void) {
  static const uint64_t s[1] = {1};
  const char *meta[2] = {"format", "\xff"};
  struct tpl__st_out t = {"ok", TPL_DT_U8, 1, s, 1};
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(build_one("bad\xc3", TPL_DT_U8, 1, s, 1), TPL_EFORMAT);
  CHECK_EQ_INT(build_one("\xed\xa0\x80", TPL_DT_U8, 1, s, 1), TPL_EFORMAT);
  CHECK_EQ_INT(tpl__st_build_header(&t, 1, meta, 1, &h, &len), TPL_EFORMAT);
}

static void test_refuses_duplicate_metadata_key(void) {
  const char *meta[4] = {"k", "1", "k", "2"};
  uint8_t *h = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__st_build_header(NULL, 0, meta, 2, &h, &len), TPL_EFORMAT);
}

int main(void) {
  RUN(test_empty_header);
  RUN(test_one_tensor_exact);
  RUN(test_scalar_and_order);
  RUN(test_metadata_first_in_order);
  RUN(test_padding_all_lengths);
  RUN(test_escaping_decodes_exactly);
  RUN(test_round_trip_reader);
  RUN(test_refuses_wrong_nbytes);
  RUN(test_refuses_bad_dtype);
  RUN(test_refuses_bad_rank);
  RUN(test_refuses_size_overflow);
  RUN(test_refuses_offset_overflow);
  RUN(test_refuses_duplicate_name);
  RUN(test_refuses_metadata_name);
  RUN(test_refuses_invalid_utf8);
  RUN(test_refuses_duplicate_metadata_key);
  return tap_done();
}
