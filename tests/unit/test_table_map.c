/* test_table_map.c - the tensor table read in place (TPLM,
 * src/table_map.c): a built table's bytes checked against the layout
 * table_map.h documents (slots computed here from XXH3), lookups of every
 * name, what building refuses, and one case per rule tpl__tmap_open
 * enforces, each corrupting a valid table in one place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dtype.h"
#include "table_map.h"
#include "tap.h"

/* ---- the table read in place (TPLM) ---- */

static const struct tpl__tmap_tensor two_tensors[2] = {
    {"a.w", "bfloat16", 2, {2, 3}, 0, 12, 0x1122334455667788ull},
    {"b", "float32", 0, {0}, 64, 4, 7}};

static uint64_t u64_at(const uint8_t *b, size_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

static uint32_t u32_at(const uint8_t *b, size_t off) {
  uint32_t v;
  memcpy(&v, b + off, 4);
  return v;
}

static void test_tmap_layout(void) {
  uint8_t *b = NULL;
  /* 2 entries of 40 bytes, then 2 dims (a.w's), 16 slots, the names */
  size_t len = 0, idx = TPL_TMAP_HEADER + 2 * 40 + 2 * 8, names = idx + 16 * 8;
  size_t slot_a = XXH3_64bits("a.w", 3) & 15, slot_b = XXH3_64bits("b", 1) & 15;
  CHECK_EQ_INT(tpl__tmap_build(two_tensors, 2, &b, &len, NULL), 0);
  CHECK_EQ_U64(len, names + 6); /* "a.w\0b\0" */
  if (b == NULL || len != names + 6) return;
  CHECK(memcmp(b, "TPLM", 4) == 0);
  CHECK_EQ_U64(u32_at(b, 4), 0x01020304u);
  CHECK_EQ_U64(u32_at(b, 8), 1);
  CHECK_EQ_U64(u64_at(b, 16), 2);  /* count */
  CHECK_EQ_U64(u64_at(b, 24), 16); /* slots: >= 1.25 x count, at least 16 */
  CHECK_EQ_U64(u64_at(b, 32), 6);  /* names_len */
  CHECK_EQ_U64(u64_at(b, 40), 2);  /* ndims */
  CHECK_EQ_U64(u64_at(b, 64), 0);  /* entry 0: offset, nbytes, xxh3 */
  CHECK_EQ_U64(u64_at(b, 72), 12);
  CHECK_EQ_U64(u64_at(b, 80), 0x1122334455667788ull);
  CHECK_EQ_U64(u32_at(b, 88), 0); /* name_off, dims_off */
  CHECK_EQ_U64(u32_at(b, 92), 0);
  CHECK_EQ_U64(b[96] | b[97] << 8, 3); /* name_len, dtype, ndim */
  CHECK_EQ_U64(b[98], TPL_DT_BF16);
  CHECK_EQ_U64(b[99], 2);
  CHECK_EQ_U64(u32_at(b, 104 + 24), 4); /* entry 1: name_off, dims_off */
  CHECK_EQ_U64(u32_at(b, 104 + 28), 2);
  CHECK_EQ_U64(b[104 + 34], TPL_DT_F32);
  CHECK_EQ_U64(b[104 + 35], 0);
  CHECK_EQ_U64(u64_at(b, 144), 2); /* the dims: a.w's shape */
  CHECK_EQ_U64(u64_at(b, 152), 3);
  size_t at_b = idx + 8 * ((slot_b + (slot_a == slot_b)) & 15);
  CHECK_EQ_U64(u32_at(b, idx + 8 * slot_a), 1); /* entry + 1, then tag */
  CHECK_EQ_U64(u32_at(b, idx + 8 * slot_a + 4), XXH3_64bits("a.w", 3) >> 32);
  CHECK_EQ_U64(u32_at(b, at_b), 2);
  CHECK_EQ_U64(u32_at(b, at_b + 4), XXH3_64bits("b", 1) >> 32);
  CHECK(memcmp(b + names, "a.w\0b\0", 6) == 0);
  free(b);
}

static void test_tmap_open_and_find(void) {
  uint8_t *b = NULL;
  size_t len = 0, i = 99;
  struct tpl__tmap m;
  CHECK_EQ_INT(tpl__tmap_build(two_tensors, 2, &b, &len, NULL), 0);
  CHECK_EQ_INT(tpl__tmap_open(b, len, 68, &m, NULL), 0);
  CHECK_EQ_U64(m.count, 2);
  CHECK_EQ_INT(tpl__tmap_find(&m, "b", &i), 0);
  CHECK_EQ_U64(i, 1);
  CHECK_EQ_INT(tpl__tmap_find(&m, "a.w", &i), 0);
  CHECK_EQ_U64(i, 0);
  CHECK(strcmp(m.names + m.entries[1].name_off, "b") == 0);
  CHECK_EQ_U64(m.dims[m.entries[0].dims_off + 1], 3);
  CHECK_EQ_INT(tpl__tmap_find(&m, "a", &i), -ENOENT);
  CHECK_EQ_INT(tpl__tmap_find(&m, "a.w.x", &i), -ENOENT);
  CHECK_EQ_INT(tpl__tmap_find(&m, "", &i), -ENOENT);
  CHECK_EQ_U64(i, 0); /* untouched by the misses */
  free(b);
}

/* 20,001 names, as the benchmark's model: every one is found at its
 * index, probing through whatever collisions XXH3 gives. */
static void test_tmap_find_many(void) {
  enum { N = 20001 };
  struct tpl__tmap_tensor *t = calloc(N, sizeof(*t));
  char(*names)[48] = calloc(N, 48);
  uint8_t *b = NULL;
  size_t len = 0, i, wrong = 0;
  struct tpl__tmap m;
  if (t == NULL || names == NULL) abort();
  for (size_t k = 0; k < N; k++) {
    snprintf(names[k], 48, "model.layers.%zu.mlp.w%zu", k / 10, k % 10);
    t[k] = (struct tpl__tmap_tensor){names[k], "int8", 1, {4}, 4 * k, 4, k};
  }
  CHECK_EQ_INT(tpl__tmap_build(t, N, &b, &len, NULL), 0);
  CHECK_EQ_INT(tpl__tmap_open(b, len, 4 * N, &m, NULL), 0);
  CHECK_EQ_U64(m.mask + 1, 32768); /* >= 1.25 x 20,001 */
  for (size_t k = 0; k < N; k++)
    wrong += tpl__tmap_find(&m, names[k], &i) != 0 || i != k;
  CHECK_EQ_U64(wrong, 0);
  free(b);
  free(names);
  free(t);
}

static void test_tmap_empty(void) {
  uint8_t *b = NULL;
  size_t len = 0, i;
  struct tpl__tmap m;
  CHECK_EQ_INT(tpl__tmap_build(NULL, 0, &b, &len, NULL), 0);
  CHECK_EQ_U64(len, TPL_TMAP_HEADER + 16 * 8);
  CHECK_EQ_INT(tpl__tmap_open(b, len, 0, &m, NULL), 0);
  CHECK_EQ_U64(m.count, 0);
  CHECK_EQ_INT(tpl__tmap_find(&m, "x", &i), -ENOENT);
  free(b);
}

static void refused_build(struct tpl__tmap_tensor *t, size_t n,
                          const char *why) {
  struct tpl__error err = {0};
  uint8_t *b = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__tmap_build(t, n, &b, &len, &err), TPL_EFORMAT);
  CHECK(b == NULL);
  CHECK_STR_CONTAINS(err.msg, why);
}

static void test_tmap_build_refuses(void) {
  struct tpl__tmap_tensor t[2] = {two_tensors[0], two_tensors[1]};
  t[1].name = "a.w";
  refused_build(t, 2, "found two");
  t[1] = two_tensors[1];
  t[1].dtype = "float4";
  refused_build(t, 2, "known dtype");
  t[1] = two_tensors[1];
  t[1].ndim = 9;
  refused_build(t, 2, "at most 8 dims");
  t[1] = two_tensors[1];
  t[1].name = "";
  refused_build(t, 2, "expected a name");
}

/* A valid two-tensor table in 8-byte aligned memory, to corrupt. */
struct region {
  uint64_t words[64];
  size_t len;
};

static uint8_t *valid_region(struct region *r) {
  uint8_t *b = NULL;
  if (tpl__tmap_build(two_tensors, 2, &b, &r->len, NULL) != 0 ||
      r->len > sizeof(r->words) - 8)
    abort();
  memcpy(r->words, b, r->len);
  free(b);
  return (uint8_t *)r->words;
}

static struct tpl__tmap_entry *entry_of(struct region *r, size_t i) {
  return (struct tpl__tmap_entry *)((uint8_t *)r->words + TPL_TMAP_HEADER) + i;
}

static uint64_t *dims_of(struct region *r) {
  return (uint64_t *)entry_of(r, 2);
}

static struct tpl__tmap_slot *index_of(struct region *r) {
  return (struct tpl__tmap_slot *)(dims_of(r) + 2);
}

static void refused_open(const uint8_t *b, size_t len, const char *why) {
  struct tpl__error err = {0};
  struct tpl__tmap m = {.count = 77};
  CHECK_EQ_INT(tpl__tmap_open(b, len, 68, &m, &err), TPL_EPROTO);
  CHECK_EQ_U64(m.count, 77); /* untouched on failure */
  CHECK_STR_CONTAINS(err.msg, why);
}

static void test_tmap_rule_header(void) {
  struct region r;
  uint8_t *b = valid_region(&r);
  refused_open(b, 63, "64-byte header");
  memmove(b + 1, b, r.len);
  refused_open(b + 1, r.len, "aligned to 8 bytes");
  b = valid_region(&r);
  b[3] = 'X';
  refused_open(b, r.len, "\"TPLM\" version 1");
  b = valid_region(&r);
  b[4] = 1; /* the other byte order */
  refused_open(b, r.len, "byte order");
  b = valid_region(&r);
  b[8] = 2;
  refused_open(b, r.len, "version 1");
}

static void set_u64(uint8_t *b, size_t off, uint64_t v) {
  memcpy(b + off, &v, 8);
}

static void test_tmap_rule_sizes(void) {
  struct region r;
  uint8_t *b = valid_region(&r);
  set_u64(b, 16, TPL_MAX_TENSORS + 1ull);
  refused_open(b, r.len, "power-of-two slot count");
  b = valid_region(&r);
  set_u64(b, 24, 12); /* not a power of two */
  refused_open(b, r.len, "power-of-two slot count");
  b = valid_region(&r);
  set_u64(b, 24, 2); /* not above the count */
  refused_open(b, r.len, "power-of-two slot count");
  b = valid_region(&r);
  refused_open(b, r.len - 1, "bytes for its header");
  refused_open(b, r.len + 1, "found a region of");
  set_u64(b, 40, 17); /* ndims above 8 x count */
  refused_open(b, r.len, "dims within the caps");
  b = valid_region(&r);
  set_u64(b, 40, 3); /* ndims one more than there is */
  refused_open(b, r.len, "found a region of");
  b = valid_region(&r);
  set_u64(b, 32, 7); /* names_len one more than there is */
  refused_open(b, r.len, "found a region of");
  b = valid_region(&r);
  b[r.len - 1] = 'x';
  refused_open(b, r.len, "ending in a NUL");
}

static void test_tmap_rule_entries(void) {
  struct region r;
  valid_region(&r);
  entry_of(&r, 1)->dtype = TPL_DT_COUNT;
  refused_open((uint8_t *)r.words, r.len, "entry 1: expected a known dtype");
  valid_region(&r);
  entry_of(&r, 0)->ndim = 9;
  refused_open((uint8_t *)r.words, r.len, "at most 8 dims");
  valid_region(&r);
  entry_of(&r, 0)->dims_off = 1; /* its 2 dims would end past the 2 */
  refused_open((uint8_t *)r.words, r.len,
               "entry 0: expected a known dtype "
               "and at most 8 dims inside");
  valid_region(&r);
  entry_of(&r, 0)->name_len = 0;
  refused_open((uint8_t *)r.words, r.len, "entry 0: expected a name inside");
  valid_region(&r);
  entry_of(&r, 1)->name_off = 5; /* its NUL would be past the names */
  refused_open((uint8_t *)r.words, r.len, "entry 1: expected a name inside");
  valid_region(&r);
  entry_of(&r, 0)->nbytes = 13;
  refused_open((uint8_t *)r.words, r.len, "elements x dtype size");
  valid_region(&r);
  dims_of(&r)[0] = 1ull << 62; /* 2^63 x 3 x 2 overflows */
  refused_open((uint8_t *)r.words, r.len, "elements x dtype size");
  valid_region(&r);
  entry_of(&r, 1)->offset = 65; /* 65 + 4 > 68 */
  refused_open((uint8_t *)r.words, r.len, "entry 1: expected its bytes inside");
  valid_region(&r);
  entry_of(&r, 1)->offset = UINT64_MAX - 1;
  refused_open((uint8_t *)r.words, r.len, "inside the store");
}

/* The slot holding entry `i` (+1), or 16 when none does. */
static size_t slot_holding(struct region *r, uint32_t v) {
  size_t j = 0;
  while (j < 16 && index_of(r)[j].entry != v)
    j++;
  return j;
}

static void test_tmap_rule_index(void) {
  struct region r;
  size_t j;
  valid_region(&r);
  index_of(&r)[slot_holding(&r, 2)].entry = 3; /* names no entry */
  refused_open((uint8_t *)r.words, r.len, "distinct entry");
  valid_region(&r);
  j = slot_holding(&r, 0);   /* an empty slot */
  index_of(&r)[j].entry = 1; /* entry 0 twice */
  refused_open((uint8_t *)r.words, r.len, "distinct entry");
  valid_region(&r);
  index_of(&r)[slot_holding(&r, 2)].entry = 0; /* entry 1 unreachable */
  refused_open((uint8_t *)r.words, r.len, "every entry in the index");
}

int main(void) {
  RUN(test_tmap_layout);
  RUN(test_tmap_open_and_find);
  RUN(test_tmap_find_many);
  RUN(test_tmap_empty);
  RUN(test_tmap_build_refuses);
  RUN(test_tmap_rule_header);
  RUN(test_tmap_rule_sizes);
  RUN(test_tmap_rule_entries);
  RUN(test_tmap_rule_index);
  return tap_done();
}
