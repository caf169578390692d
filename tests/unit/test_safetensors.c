/* test_safetensors.c - the strict safetensors reader: one case per rule it
 * enforces, each building its broken file in the test, plus valid files
 * (every dtype, zero-size and scalar tensors, __metadata__, HF padding,
 * JSON order differing from data order, 100,000 tensors). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_files.h"
#include "common.h"
#include "dtype.h"
#include "fmt_safetensors.h"
#include "model.h"
#include "tap.h"

#define FNAME "t.safetensors"

/* A parsed result: the code, the message and the model (freed by done). */
struct res {
  int rc;
  struct tpl__error err;
  struct tpl__model *m;
};

/* Assembles "8-byte LE header length + header + data" into a malloc'd
 * buffer; the data bytes are 0, 1, 2, ... (mod 256). */
static unsigned char *assemble(uint64_t hlen, const char *hdr, size_t hdr_len,
                               size_t data_len, size_t *out_len) {
  size_t n = 8 + hdr_len + data_len;
  unsigned char *b = malloc(n ? n : 1);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(hlen >> (8 * i));
  memcpy(b + 8, hdr, hdr_len);
  for (size_t i = 0; i < data_len; i++)
    b[8 + hdr_len + i] = (unsigned char)i;
  *out_len = n;
  return b;
}

/* Parses a whole in-memory file (file_size = its length). */
static struct res parse_raw(const unsigned char *b, size_t len) {
  struct res r;
  uint32_t idx = 0;
  memset(&r, 0, sizeof(r));
  r.m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  tpl__model_add_file(r.m, FNAME, FNAME, len, &idx);
  r.rc = tpl__st_parse(b, len, len, FNAME, idx, r.m, &r.err);
  return r;
}

/* Parses header text `hdr` (length prefix = its length) + data_len bytes. */
static struct res parse_hdr(const char *hdr, size_t data_len) {
  size_t len, hl = strlen(hdr);
  unsigned char *b = assemble(hl, hdr, hl, data_len, &len);
  struct res r = parse_raw(b, len);
  free(b);
  return r;
}

static void done(struct res *r) {
  tpl__model_free(r->m);
}

/* Checks that parsing failed with `code` and a message holding `frag`. */
static void expect_fail(struct res r, int code, const char *frag) {
  CHECK_EQ_INT(r.rc, code);
  CHECK_STR_CONTAINS(r.err.msg, frag);
  CHECK_STR_CONTAINS(r.err.msg, FNAME);
  CHECK(strchr(r.err.msg, '\n') == NULL);
  done(&r);
}

static void expect_hdr_fail(const char *hdr, size_t data_len, int code,
                            const char *frag) {
  expect_fail(parse_hdr(hdr, data_len), code, frag);
}

/* --- the length prefix --- */

static void test_short_file(void) {
  unsigned char b[7] = {2, 0, 0, 0, 0, 0, 0};
  uint64_t n = 99;
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__st_header_len(b, sizeof(b), sizeof(b), FNAME, &n, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expected at least 8 bytes");
  CHECK_STR_CONTAINS(err.msg, "found a file of 7 bytes");
  CHECK_EQ_U64(n, 99);
  expect_fail(parse_raw(b, 0), TPL_EFORMAT, "found a file of 0 bytes");
}

static void test_header_cap(void) {
  size_t len;
  unsigned char *b = assemble(100000001ull, "{}", 2, 0, &len);
  uint64_t n = 0;
  struct tpl__error err = {0};
  /* The cap applies even when the file would be big enough. */
  CHECK_EQ_INT(tpl__st_header_len(b, 8, 200000000ull, FNAME, &n, &err),
               TPL_ELIMIT);
  CHECK_STR_CONTAINS(err.msg, "at most 100000000 bytes, found 100000001");
  CHECK_EQ_INT(tpl__st_header_len(b, 8, 100000008ull, FNAME, &n, &err),
               TPL_ELIMIT);
  free(b);
  b = assemble(100000000ull, "{}", 2, 0, &len);
  CHECK_EQ_INT(tpl__st_header_len(b, 8, 100000008ull, FNAME, &n, &err), 0);
  CHECK_EQ_U64(n, 100000000ull);
  free(b);
}

static void test_header_past_eof(void) {
  size_t len;
  unsigned char *b = assemble(3, "{}", 2, 0, &len);
  expect_fail(parse_raw(b, len), TPL_EFORMAT,
              "at most 2 (file size - 8), found 3");
  free(b);
}

static void test_header_len_no_overflow(void) {
  /* 8 + N would wrap around for N = 2^64 - 1: must be refused, not wrap. */
  size_t len;
  unsigned char *b = assemble(UINT64_MAX, "{}", 2, 0, &len);
  uint64_t n = 0;
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__st_header_len(b, 8, UINT64_MAX, FNAME, &n, &err),
               TPL_ELIMIT);
  free(b);
  b = assemble(UINT64_MAX - 7, "{}", 2, 0, &len);
  CHECK_EQ_INT(tpl__st_header_len(b, 8, 20, FNAME, &n, &err), TPL_ELIMIT);
  free(b);
  b = assemble(13, "{}", 2, 0, &len);
  CHECK_EQ_INT(tpl__st_header_len(b, 8, 20, FNAME, &n, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "at most 12 (file size - 8), found 13");
  free(b);
}

/* --- header text --- */

static void test_not_utf8(void) {
  expect_hdr_fail("{\"a\xff\":{}}", 0, TPL_EFORMAT,
                  "expected UTF-8 text, found invalid byte 0xff at header "
                  "offset 3");
  /* An overlong encoding of '/' is not UTF-8 either. */
  expect_hdr_fail("{\"\xc0\xaf\":{}}", 0, TPL_EFORMAT,
                  "found invalid byte 0xc0");
  /* Nor is a UTF-16 surrogate encoded as UTF-8. */
  expect_hdr_fail("{\"\xed\xa0\x80\":{}}", 0, TPL_EFORMAT,
                  "found invalid byte 0xed");
}

static void test_not_json(void) {
  expect_hdr_fail("{\"a\":", 0, TPL_EFORMAT, "expected valid JSON");
  expect_hdr_fail("", 0, TPL_EFORMAT, "expected valid JSON");
  /* Anything but whitespace after the object is refused... */
  expect_hdr_fail("{}x", 0, TPL_EFORMAT, "expected valid JSON");
  /* ... including NUL padding, which is not JSON whitespace. */
  {
    size_t len;
    unsigned char *b = assemble(4, "{}\0\0", 4, 0, &len);
    expect_fail(parse_raw(b, len), TPL_EFORMAT, "expected valid JSON");
    free(b);
  }
}

static void test_not_object(void) {
  expect_hdr_fail("[]", 0, TPL_EFORMAT, "expected a JSON object at top level");
  expect_hdr_fail(" [1, 2] ", 0, TPL_EFORMAT, "expected a JSON object");
}

static void test_duplicate_names(void) {
  /* Identical duplicates are refused too: a writer that emits one is
   * broken, and "last wins" hides which one the file meant. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "duplicate");
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[1,2]}}",
                  2, TPL_EFORMAT, "found a duplicate key");
  /* Inside an entry, too. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "duplicate");
}

/* --- entries --- */

static void test_entry_not_object(void) {
  expect_hdr_fail("{\"a\":[0,1]}", 0, TPL_EFORMAT,
                  "tensor 'a': expected an object with dtype, shape and "
                  "data_offsets, found another JSON value");
}

static void test_entry_missing_key(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, TPL_EFORMAT,
                  "tensor 'a': expected key 'data_offsets', found it missing");
  expect_hdr_fail("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  TPL_EFORMAT, "expected key 'dtype'");
}

static void test_entry_extra_key(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1],\"offset\":0}}",
                  1, TPL_EFORMAT, "found unknown key 'offset'");
}

static void test_unknown_dtype(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"F7\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EDTYPE, "found unknown dtype 'F7'");
  /* dtype names are case-sensitive */
  expect_hdr_fail("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],"
                  "\"data_offsets\":[0,4]}}",
                  4, TPL_EDTYPE, "unknown dtype 'f32'");
  expect_hdr_fail("{\"a\":{\"dtype\":32,\"shape\":[1],"
                  "\"data_offsets\":[0,4]}}",
                  4, TPL_EFORMAT, "expected dtype to be a string");
}

static void test_unsupported_dtype(void) {
  static const char *const names[] = {"F4", "F6_E2M3", "C64"};
  char hdr[256];
  for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
    char want[64];
    snprintf(hdr, sizeof(hdr),
             "{\"w\":{\"dtype\":\"%s\",\"shape\":[2],"
             "\"data_offsets\":[0,1]}}",
             names[i]);
    snprintf(want, sizeof(want), "unsupported dtype %s", names[i]);
    expect_hdr_fail(hdr, 1, TPL_EDTYPE, want);
  }
}

static void test_negative_dim(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "expected shape[0] to be an integer >= 0");
}

static void test_fractional_dim(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1.5],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "expected shape[1] to be an integer");
  /* 2.0 is still not an integer in JSON terms */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[2.0],"
                  "\"data_offsets\":[0,2]}}",
                  2, TPL_EFORMAT, "expected shape[0] to be an integer");
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[\"2\"],"
                  "\"data_offsets\":[0,2]}}",
                  2, TPL_EFORMAT, "expected shape[0] to be an integer");
}

static void test_oversized_dim(void) {
  /* Larger than any 64-bit integer: jansson refuses it while parsing. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT,
                  "expected integers below 2^63, found a "
                  "larger one");
}

static void test_shape_not_array(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":4,"
                  "\"data_offsets\":[0,4]}}",
                  4, TPL_EFORMAT, "expected shape to be an array");
}

static void test_too_many_dims(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_ELIMIT, "expected at most 8 dims, found 9");
}

static void test_max_dims_ok(void) {
  struct res r = parse_hdr("{\"a\":{\"dtype\":\"U8\","
                           "\"shape\":[1,1,1,1,1,1,1,2],"
                           "\"data_offsets\":[0,2]}}",
                           2);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_INT(r.m->tensors[0].ndim, 8);
  done(&r);
}

static void test_bad_offsets(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[-1,0]}}",
                  1, TPL_EFORMAT, "expected data_offsets to be integers >= 0");
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,0.5]}}",
                  1, TPL_EFORMAT, "expected data_offsets to be integers");
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1,2]}}",
                  1, TPL_EFORMAT, "expected data_offsets to be an array");
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,18446744073709551617]}}",
                  1, TPL_EFORMAT, "expected integers below 2^63");
}

static void test_empty_name(void) {
  expect_hdr_fail("{\"\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "expected non-empty tensor names");
}

static void test_name_with_nul(void) {
  expect_hdr_fail("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "expected tensor names without NUL bytes");
}

static void test_long_name(void) {
  static char hdr[4096];
  char name[TPL_MAX_NAME + 2];
  struct res r;
  memset(name, 'n', TPL_MAX_NAME + 1);
  name[TPL_MAX_NAME + 1] = '\0';
  snprintf(hdr, sizeof(hdr),
           "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
           name);
  expect_hdr_fail(hdr, 1, TPL_ELIMIT,
                  "expected a name of at most 1024 bytes, found 1025 bytes");
  /* exactly 1 KiB is fine */
  name[TPL_MAX_NAME] = '\0';
  snprintf(hdr, sizeof(hdr),
           "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
           name);
  r = parse_hdr(hdr, 1);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(strlen(r.m->tensors[0].name), TPL_MAX_NAME);
  done(&r);
}

static void test_tensor_named_metadata(void) {
  expect_hdr_fail("{\"__metadata__\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}",
                  1, TPL_EFORMAT, "a tensor may not be named __metadata__");
}

static void test_metadata_not_object(void) {
  expect_hdr_fail("{\"__metadata__\":\"pt\"}", 0, TPL_EFORMAT,
                  "'__metadata__': expected an object of string to string");
}

static void test_metadata_non_string(void) {
  expect_hdr_fail("{\"__metadata__\":{\"format\":\"pt\",\"step\":3}}", 0,
                  TPL_EFORMAT, "found key 'step' with a non-string value");
  expect_hdr_fail("{\"__metadata__\":{\"nested\":{}}}", 0, TPL_EFORMAT,
                  "found key 'nested' with a non-string value");
}

/* --- sizes and the data section --- */

static void test_size_overflow(void) {
  /* 2^32 x 2^32 x 1 byte = 2^64: overflows. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                  "\"data_offsets\":[0,0]}}",
                  0, TPL_EOVERFLOW, "overflowing");
  /* 2^62 elements x 4 bytes: the itemsize multiplication overflows. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                  "\"data_offsets\":[0,0]}}",
                  0, TPL_EOVERFLOW, "overflowing");
}

static void test_size_mismatch(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                  "\"data_offsets\":[0,20]}}",
                  20, TPL_EFORMAT,
                  "tensor 'a': expected 24 bytes (F32 shape [2, 3]), found "
                  "data_offsets [0, 20] spanning 20 bytes");
}

static void test_begin_after_end(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],"
                  "\"data_offsets\":[4,0]}}",
                  4, TPL_EFORMAT,
                  "expected data_offsets begin <= end, found begin 4 > end 0");
}

static void test_first_not_zero(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
                  "\"data_offsets\":[2,4]}}",
                  4, TPL_EFORMAT,
                  "tensor 'a': expected the first tensor's data to begin at "
                  "offset 0, found 2");
}

static void test_gap(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
                  "\"data_offsets\":[0,2]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[2],"
                  "\"data_offsets\":[3,5]}}",
                  5, TPL_EFORMAT,
                  "tensor 'b': expected data to begin at 2 (where 'a' ends), "
                  "found 3: a gap of 1 bytes");
}

static void test_overlap(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[2,6]}}",
                  6, TPL_EFORMAT,
                  "tensor 'b': expected data to begin at 4 "
                  "(where 'a' ends), found 2: overlaps it");
  /* Two tensors claiming the same bytes. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[0,4]}}",
                  4, TPL_EFORMAT, "overlaps it by 4 bytes");
  /* A zero-size tensor inside another tensor's range overlaps it too. */
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],"
                  "\"data_offsets\":[0,4]},"
                  "\"z\":{\"dtype\":\"U8\",\"shape\":[0],"
                  "\"data_offsets\":[2,2]}}",
                  4, TPL_EFORMAT, "tensor 'z': expected data to begin at 4");
}

static void test_trailing_bytes(void) {
  expect_hdr_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
                  "\"data_offsets\":[0,2]}}",
                  5, TPL_EFORMAT, ": 3 trailing bytes after the last tensor");
}

static void test_truncated(void) {
  const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],"
                  "\"data_offsets\":[0,8]}}";
  char want[128];
  size_t hl = strlen(h);
  snprintf(want, sizeof(want), "expected %zu bytes (8 + header %zu + data 8)",
           8 + hl + 8, hl);
  expect_hdr_fail(h, 5, TPL_EFORMAT, "file truncated by 3 bytes");
  expect_hdr_fail(h, 5, TPL_EFORMAT, want);
}

static void test_parse_needs_header_in_buffer(void) {
  /* The caller promised 8 + N bytes; a shorter buffer is refused. */
  size_t len;
  unsigned char *b = assemble(2, "{}", 2, 0, &len);
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__st_parse(b, 9, 10, FNAME, 0, m, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expected 2 header bytes in memory, found 1");
  CHECK_EQ_U64(m->ntensors, 0);
  tpl__model_free(m);
  free(b);
}

/* --- valid files --- */

static void test_every_dtype(void) {
  static char hdr[8192];
  size_t o = 0, data = 0;
  struct res r;
  o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "{");
  for (int d = 0; d < TPL_DT_COUNT; d++) {
    size_t nb = 6 * tpl__dtype_size(d);
    o += (size_t)snprintf(hdr + o, sizeof(hdr) - o,
                          "%s\"t%02d\":{\"dtype\":\"%s\",\"shape\":[2,3],"
                          "\"data_offsets\":[%zu,%zu]}",
                          d ? "," : "", d, tpl__dtype_st_name(d), data,
                          data + nb);
    data += nb;
  }
  snprintf(hdr + o, sizeof(hdr) - o, "}");
  r = parse_hdr(hdr, data);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, TPL_DT_COUNT);
  for (int d = 0; d < TPL_DT_COUNT && r.rc == 0; d++) {
    const struct tpl__tensor *t = &r.m->tensors[d];
    CHECK_EQ_INT(t->dtype, d);
    CHECK_EQ_INT(t->ndim, 2);
    CHECK_EQ_U64(t->shape[0], 2);
    CHECK_EQ_U64(t->shape[1], 3);
    CHECK_EQ_U64(t->nbytes, 6 * tpl__dtype_size(d));
    CHECK_EQ_U64(t->stored_bytes, t->nbytes);
    CHECK_EQ_INT(t->encoding, TPL_ENC_RAW);
  }
  done(&r);
}

static void test_zero_size_and_scalar(void) {
  /* Zero-size tensors at the start, middle and end; a scalar. */
  const char *h = "{\"e0\":{\"dtype\":\"F32\",\"shape\":[0,5],"
                  "\"data_offsets\":[0,0]},"
                  "\"s\":{\"dtype\":\"F64\",\"shape\":[],"
                  "\"data_offsets\":[0,8]},"
                  "\"e1\":{\"dtype\":\"BF16\",\"shape\":[3,0],"
                  "\"data_offsets\":[8,8]},"
                  "\"v\":{\"dtype\":\"I16\",\"shape\":[2],"
                  "\"data_offsets\":[8,12]},"
                  "\"e2\":{\"dtype\":\"U8\",\"shape\":[0],"
                  "\"data_offsets\":[12,12]}}";
  struct res r = parse_hdr(h, 12);
  uint64_t base = 8 + strlen(h);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 5);
  if (r.rc == 0 && r.m->ntensors == 5) {
    CHECK(strcmp(r.m->tensors[0].name, "e0") == 0);
    CHECK(strcmp(r.m->tensors[1].name, "s") == 0);
    CHECK(strcmp(r.m->tensors[2].name, "e1") == 0);
    CHECK(strcmp(r.m->tensors[3].name, "v") == 0);
    CHECK(strcmp(r.m->tensors[4].name, "e2") == 0);
    CHECK_EQ_U64(r.m->tensors[0].nbytes, 0);
    CHECK_EQ_INT(r.m->tensors[1].ndim, 0);
    CHECK_EQ_U64(r.m->tensors[1].nbytes, 8);
    CHECK_EQ_U64(r.m->tensors[1].offset, base);
    CHECK_EQ_U64(r.m->tensors[3].offset, base + 8);
    CHECK_EQ_U64(r.m->tensors[4].offset, base + 12);
  }
  done(&r);
}

static void test_zero_size_ties(void) {
  /* Zero-size tensors sharing an offset keep the header's order (the HF
   * writer lists tensors in data order), not name order. */
  struct res r = parse_hdr("{\"b\":{\"dtype\":\"F32\",\"shape\":[0],"
                           "\"data_offsets\":[0,0]},"
                           "\"c\":{\"dtype\":\"F16\",\"shape\":[2],"
                           "\"data_offsets\":[0,4]},"
                           "\"a\":{\"dtype\":\"F16\",\"shape\":[0],"
                           "\"data_offsets\":[0,0]}}",
                           4);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 3);
  if (r.rc == 0 && r.m->ntensors == 3) {
    CHECK(strcmp(r.m->tensors[0].name, "b") == 0);
    CHECK(strcmp(r.m->tensors[1].name, "a") == 0);
    CHECK(strcmp(r.m->tensors[2].name, "c") == 0);
  }
  done(&r);
}

static void test_empty_header(void) {
  struct res r = parse_hdr("{}", 0);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 0);
  done(&r);
}

static void test_metadata_ok(void) {
  struct res r = parse_hdr("{\"__metadata__\":{\"format\":\"pt\",\"x\":\"\"},"
                           "\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                           "\"data_offsets\":[0,1]}}",
                           1);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 1);
  done(&r);
}

static void test_hf_padding(void) {
  /* HF writers pad to a multiple of 8 with spaces; leading whitespace and
   * other JSON whitespace are fine too. */
  const char *h = " \t\r\n{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
                  "\"data_offsets\":[0,2]}}  \n     ";
  struct res r = parse_hdr(h, 2);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 1);
  if (r.rc == 0) CHECK_EQ_U64(r.m->tensors[0].offset, 8 + strlen(h));
  done(&r);
}

static void test_json_order_differs(void) {
  /* Listed c, a, b in JSON; data order is b, c, a. */
  const char *h = "{\"c\":{\"dtype\":\"F16\",\"shape\":[2],"
                  "\"data_offsets\":[4,8]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[3],"
                  "\"data_offsets\":[8,11]},"
                  "\"b\":{\"dtype\":\"I32\",\"shape\":[1],"
                  "\"data_offsets\":[0,4]}}";
  struct res r = parse_hdr(h, 11);
  uint64_t base = 8 + strlen(h);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, 3);
  if (r.rc == 0 && r.m->ntensors == 3) {
    CHECK(strcmp(r.m->tensors[0].name, "b") == 0);
    CHECK(strcmp(r.m->tensors[1].name, "c") == 0);
    CHECK(strcmp(r.m->tensors[2].name, "a") == 0);
    CHECK_EQ_U64(r.m->tensors[0].offset, base);
    CHECK_EQ_U64(r.m->tensors[1].offset, base + 4);
    CHECK_EQ_U64(r.m->tensors[2].offset, base + 8);
    CHECK_EQ_INT(r.m->tensors[1].dtype, TPL_DT_F16);
    CHECK_EQ_U64(r.m->tensors[2].nbytes, 3);
    CHECK_EQ_U64(r.m->tensors[2].file, 0);
  }
  done(&r);
}

static void test_many_tensors(void) {
  enum { N = 100000 };
  size_t cap = (size_t)N * 80 + 16, o = 0;
  char *h = malloc(cap);
  struct res r;
  h[o++] = '{';
  /* Listed in reverse data order to exercise the sort. */
  for (size_t i = 0; i < N; i++) {
    size_t k = N - 1 - i;
    o += (size_t)snprintf(h + o, cap - o,
                          "%s\"layer.%zu.w\":{\"dtype\":\"F32\",\"shape\":[2],"
                          "\"data_offsets\":[%zu,%zu]}",
                          i ? "," : "", k, k * 8, k * 8 + 8);
  }
  h[o++] = '}';
  h[o] = '\0';
  r = parse_hdr(h, (size_t)N * 8);
  CHECK_EQ_INT(r.rc, 0);
  CHECK_EQ_U64(r.m->ntensors, N);
  if (r.rc == 0) {
    CHECK(strcmp(r.m->tensors[0].name, "layer.0.w") == 0);
    CHECK(strcmp(r.m->tensors[N - 1].name, "layer.99999.w") == 0);
    CHECK_EQ_U64(r.m->tensors[N - 1].offset, 8 + o + (N - 1) * 8);
  }
  done(&r);
  free(h);
}

/* --- tpl__st_load --- */

static char tmpdir[64];

static char *tmp_path(const char *name) {
  static char buf[128];
  snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
  return buf;
}

static void write_file(const char *path, const void *b, size_t len) {
  FILE *f = fopen(path, "wb");
  REQUIRE(f != NULL);
  CHECK_EQ_U64(fwrite(b, 1, len, f), len);
  fclose(f);
}

static int load(const char *path, struct tpl__model **m,
                struct tpl__error *err) {
  *m = tpl__model_new(TPL_FMT_SAFETENSORS, tmpdir);
  return tpl__st_load(path, "x.safetensors", *m, err);
}

static void test_load_valid(void) {
  const char *h = "{\"a\":{\"dtype\":\"U16\",\"shape\":[2],"
                  "\"data_offsets\":[0,4]}}    ";
  size_t len, hl = strlen(h);
  unsigned char *b = assemble(hl, h, hl, 4, &len);
  struct tpl__model *m;
  struct tpl__error err = {0};
  write_file(tmp_path("ok.safetensors"), b, len);
  CHECK_EQ_INT(load(tmp_path("ok.safetensors"), &m, &err), 0);
  CHECK_EQ_U64(m->nfiles, 1);
  CHECK_EQ_U64(m->ntensors, 1);
  if (m->nfiles == 1 && m->ntensors == 1) {
    CHECK_EQ_U64(m->files[0].size, len);
    CHECK(strcmp(m->files[0].name, "x.safetensors") == 0);
    CHECK_STR_CONTAINS(m->files[0].path, "ok.safetensors");
    CHECK_EQ_U64(m->tensors[0].offset, 8 + hl);
    CHECK_EQ_U64(m->tensors[0].file, 0);
  }
  tpl__model_free(m);
  free(b);
}

static void test_load_directory(void) {
  struct tpl__model *m;
  struct tpl__error err = {0};
  mkdir(tmp_path("dir.safetensors"), 0700);
  CHECK_EQ_INT(load(tmp_path("dir.safetensors"), &m, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expected a regular file");
  CHECK_STR_CONTAINS(err.msg, "dir.safetensors");
  tpl__model_free(m);
}

static void test_load_fifo(void) {
  struct tpl__model *m;
  struct tpl__error err = {0};
  CHECK_EQ_INT(mkfifo(tmp_path("fifo.safetensors"), 0600), 0);
  /* Must not block waiting for a writer. */
  CHECK_EQ_INT(load(tmp_path("fifo.safetensors"), &m, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expected a regular file");
  tpl__model_free(m);
}

static void test_load_short_file(void) {
  struct tpl__model *m;
  struct tpl__error err = {0};
  write_file(tmp_path("short.safetensors"), "\x02\x00\x00", 3);
  CHECK_EQ_INT(load(tmp_path("short.safetensors"), &m, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "short.safetensors: expected at least 8 bytes");
  CHECK_STR_CONTAINS(err.msg, "found a file of 3 bytes");
  tpl__model_free(m);
}

static void test_load_missing(void) {
  struct tpl__model *m;
  struct tpl__error err = {0};
  CHECK_EQ_INT(load(tmp_path("missing.safetensors"), &m, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "missing.safetensors");
  CHECK_EQ_U64(m->nfiles, 0);
  tpl__model_free(m);
}

static void test_load_header_past_eof(void) {
  size_t len;
  unsigned char *b = assemble(1000, "{}", 2, 0, &len);
  struct tpl__model *m;
  struct tpl__error err = {0};
  write_file(tmp_path("hdr.safetensors"), b, len);
  CHECK_EQ_INT(load(tmp_path("hdr.safetensors"), &m, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "at most 2 (file size - 8), found 1000");
  tpl__model_free(m);
  free(b);
}

static void cleanup(void) {
  static const char *const names[] = {"ok.safetensors", "fifo.safetensors",
                                      "short.safetensors", "hdr.safetensors"};
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    unlink(tmp_path(names[i]));
  rmdir(tmp_path("dir.safetensors"));
  rmdir(tmpdir);
}

int main(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmpdir, sizeof(tmpdir), "%s/tplst.XXXXXX", t && *t ? t : "/tmp");
  if (strlen(tmpdir) > 40 || mkdtemp(tmpdir) == NULL) {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tplst.XXXXXX");
    if (mkdtemp(tmpdir) == NULL) return 1;
  }
  RUN(test_short_file);
  RUN(test_header_cap);
  RUN(test_header_past_eof);
  RUN(test_header_len_no_overflow);
  RUN(test_not_utf8);
  RUN(test_not_json);
  RUN(test_not_object);
  RUN(test_duplicate_names);
  RUN(test_entry_not_object);
  RUN(test_entry_missing_key);
  RUN(test_entry_extra_key);
  RUN(test_unknown_dtype);
  RUN(test_unsupported_dtype);
  RUN(test_negative_dim);
  RUN(test_fractional_dim);
  RUN(test_oversized_dim);
  RUN(test_shape_not_array);
  RUN(test_too_many_dims);
  RUN(test_max_dims_ok);
  RUN(test_bad_offsets);
  RUN(test_empty_name);
  RUN(test_name_with_nul);
  RUN(test_long_name);
  RUN(test_tensor_named_metadata);
  RUN(test_metadata_not_object);
  RUN(test_metadata_non_string);
  RUN(test_size_overflow);
  RUN(test_size_mismatch);
  RUN(test_begin_after_end);
  RUN(test_first_not_zero);
  RUN(test_gap);
  RUN(test_overlap);
  RUN(test_trailing_bytes);
  RUN(test_truncated);
  RUN(test_parse_needs_header_in_buffer);
  RUN(test_every_dtype);
  RUN(test_zero_size_and_scalar);
  RUN(test_zero_size_ties);
  RUN(test_empty_header);
  RUN(test_metadata_ok);
  RUN(test_hf_padding);
  RUN(test_json_order_differs);
  RUN(test_many_tensors);
  RUN(test_load_valid);
  RUN(test_load_directory);
  RUN(test_load_fifo);
  RUN(test_load_short_file);
  RUN(test_load_missing);
  RUN(test_load_header_past_eof);
  cleanup();
  return tap_done();
}
