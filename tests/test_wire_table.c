/* test_wire_table.c - the compact tensor table of the attach reply
 * (src/wire_table.c): tables built by hand byte by byte from the format
 * its header comment gives, decoded and compared; the encoder's bytes
 * against the same hand-built table; one case per rule the decoder
 * enforces; a Response carrying the table round trips. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "tap.h"
#include "wire.h"

struct buf {
  uint8_t b[512];
  size_t n;
};

static void le(struct buf *t, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    t->b[t->n++] = (uint8_t)(v >> (8 * i));
}

static void head(struct buf *t, uint32_t count) {
  memcpy(t->b, "TPLT", 4);
  t->n = 4;
  le(t, count, 4);
}

/* One entry: offset, nbytes, xxh3, name length, dtype, dims, name. */
static void entry(struct buf *t, uint64_t off, uint64_t nbytes, uint64_t h,
                  int dtype, int ndim, const uint64_t *shape,
                  const char *name) {
  le(t, off, 8);
  le(t, nbytes, 8);
  le(t, h, 8);
  le(t, strlen(name), 2);
  le(t, (uint64_t)dtype, 1);
  le(t, (uint64_t)ndim, 1);
  for (int d = 0; d < ndim; d++)
    le(t, shape[d], 8);
  memcpy(t->b + t->n, name, strlen(name));
  t->n += strlen(name);
}

static const uint64_t shape23[] = {2, 3};

static void two_entries(struct buf *t) {
  head(t, 2);
  entry(t, 0, 12, 0x1122334455667788ull, TPL_DT_BF16, 2, shape23, "a.w");
  entry(t, 64, 4, 7, TPL_DT_F32, 0, NULL, "b");
}

static int decode(const struct buf *t, struct tpl__wire_response *r,
                  struct tpl_error *err) {
  memset(r, 0, sizeof(*r));
  return tpl__wire_table_decode(t->b, t->n, r, err);
}

static void test_decode_hand_built(void) {
  struct buf t;
  struct tpl__wire_response r;
  two_entries(&t);
  CHECK_EQ_INT(decode(&t, &r, NULL), 0);
  CHECK_EQ_U64(r.ntensors, 2);
  if (r.ntensors == 2) {
    CHECK(strcmp(r.tensors[0].name, "a.w") == 0);
    CHECK(strcmp(r.tensors[0].dtype, "bfloat16") == 0);
    CHECK_EQ_INT(r.tensors[0].ndim, 2);
    CHECK_EQ_U64(r.tensors[0].shape[1], 3);
    CHECK_EQ_U64(r.tensors[0].nbytes, 12);
    CHECK_EQ_U64(r.tensors[0].xxh3, 0x1122334455667788ull);
    CHECK(strcmp(r.tensors[1].name, "b") == 0);
    CHECK(strcmp(r.tensors[1].dtype, "float32") == 0);
    CHECK_EQ_INT(r.tensors[1].ndim, 0);
    CHECK_EQ_U64(r.tensors[1].offset, 64);
  }
  tpl__wire_response_free(&r);
}

static void test_encode_matches_hand_built(void) {
  struct buf want;
  struct tpl__wire_tensor t[2] = {
      {"a.w", "bfloat16", 2, {2, 3}, 0, 12, 0x1122334455667788ull},
      {"b", "float32", 0, {0}, 64, 4, 7}};
  uint8_t *got = NULL;
  size_t len = 0;
  two_entries(&want);
  CHECK_EQ_INT(tpl__wire_table_encode(t, 2, &got, &len), 0);
  CHECK_EQ_U64(len, want.n);
  CHECK(got != NULL && memcmp(got, want.b, want.n) == 0);
  free(got);
}

static void test_encode_refuses_what_it_cannot_carry(void) {
  struct tpl__wire_tensor t = {"x", "complex64", 1, {1}, 0, 8, 0};
  uint8_t *got = NULL;
  size_t len;
  CHECK_EQ_INT(tpl__wire_table_encode(&t, 1, &got, &len), -EINVAL);
  t.dtype = "float32";
  t.ndim = 9;
  CHECK_EQ_INT(tpl__wire_table_encode(&t, 1, &got, &len), -EINVAL);
  CHECK(got == NULL);
}

static void test_empty_table(void) {
  struct buf t;
  struct tpl__wire_response r;
  head(&t, 0);
  CHECK_EQ_INT(decode(&t, &r, NULL), 0);
  CHECK_EQ_U64(r.ntensors, 0);
  tpl__wire_response_free(&r);
}

/* Decodes `t`, expecting TPL_EPROTO and `what` in the message. */
static void refused(const struct buf *t, const char *what) {
  struct tpl__wire_response r;
  struct tpl_error err = {0};
  CHECK_EQ_INT(decode(t, &r, &err), TPL_EPROTO);
  CHECK_STR_CONTAINS(err.msg, what);
  tpl__wire_response_free(&r);
}

static void test_rule_magic_and_count(void) {
  struct buf t;
  two_entries(&t);
  t.b[0] = 'X';
  refused(&t, "expected \"TPLT\"");
  t.n = 6; /* shorter than the head */
  refused(&t, "expected \"TPLT\"");
}

static void test_rule_count_fits_the_bytes(void) {
  struct buf t;
  head(&t, 1000000); /* refused before anything is allocated */
  entry(&t, 0, 4, 0, TPL_DT_F32, 0, NULL, "b");
  refused(&t, "found a count of 1000000");
}

static void test_rule_fixed_fields(void) {
  struct buf t;
  head(&t, 2);
  entry(&t, 0, 4, 0, TPL_DT_F32, 0, NULL, "a.long.name.that.pads.more");
  le(&t, 0, 8); /* the second entry stops after its offset */
  refused(&t, "entry 1: expected its fixed fields");
}

static void test_rule_known_dtype(void) {
  struct buf t;
  head(&t, 1);
  entry(&t, 0, 4, 0, TPL_DT_COUNT, 0, NULL, "b");
  refused(&t, "entry 0: expected a known dtype");
}

static void test_rule_dims(void) {
  static const uint64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  struct buf t;
  head(&t, 1);
  entry(&t, 0, 4, 0, TPL_DT_F32, 9, nine, "b");
  refused(&t, "entry 0: expected at most 8 dims");
}

static void test_rule_name(void) {
  struct buf t;
  head(&t, 1);
  entry(&t, 0, 4, 0, TPL_DT_F32, 0, NULL, "");
  le(&t, 0, 1); /* a byte so the count still fits */
  refused(&t, "entry 0: expected a name, found an empty one");
  head(&t, 1);
  entry(&t, 0, 4, 0, TPL_DT_F32, 0, NULL, "ab");
  t.b[t.n - 1] = '\0';
  refused(&t, "entry 0: expected a name without NUL bytes");
}

static void test_rule_shape_and_name_inside(void) {
  struct buf t;
  head(&t, 1);
  entry(&t, 0, 12, 0, TPL_DT_BF16, 2, shape23, "abc");
  t.n -= 2; /* the name runs past the end */
  refused(&t, "entry 0: expected its shape and name");
}

static void test_rule_no_trailing_bytes(void) {
  struct buf t;
  two_entries(&t);
  le(&t, 0, 3);
  refused(&t, "expected its end after 2 entries, found 3 more bytes");
}

static void test_response_carries_the_table(void) {
  struct tpl__wire_tensor t[2] = {{"a.w", "bfloat16", 2, {2, 3}, 0, 12, 5},
                                  {"b", "float32", 0, {0}, 64, 4, 7}};
  struct tpl__wire_response r = {
      .ok = 1, .tensors = t, .ntensors = 2, .store_bytes = 68, .compact = 1};
  struct tpl__wire_response back = {0};
  uint8_t *f = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__wire_encode_response(&r, &f, &len, NULL), 0);
  CHECK_EQ_INT(tpl__wire_decode_response(f + TPL_WIRE_HEADER,
                                         len - TPL_WIRE_HEADER, &back, NULL),
               0);
  CHECK_EQ_U64(back.ntensors, 2);
  CHECK_EQ_U64(back.store_bytes, 68);
  if (back.ntensors == 2) {
    CHECK(strcmp(back.tensors[1].name, "b") == 0);
    CHECK_EQ_U64(back.tensors[0].xxh3, 5);
  }
  tpl__wire_response_free(&back);
  free(f);
}

int main(void) {
  RUN(test_decode_hand_built);
  RUN(test_encode_matches_hand_built);
  RUN(test_encode_refuses_what_it_cannot_carry);
  RUN(test_empty_table);
  RUN(test_rule_magic_and_count);
  RUN(test_rule_count_fits_the_bytes);
  RUN(test_rule_fixed_fields);
  RUN(test_rule_known_dtype);
  RUN(test_rule_dims);
  RUN(test_rule_name);
  RUN(test_rule_shape_and_name_inside);
  RUN(test_rule_no_trailing_bytes);
  RUN(test_response_carries_the_table);
  return tap_done();
}
