/* test_shard.c - the shard math (src/shard.c): DESIGN.md's worked
 * examples checked by hand, refusals with their messages, overflow,
 * empty tensors, N = 1, width-1 slices, 8-dim tensors, and chunked
 * gathers over random layouts (any window [begin, end) must agree with
 * the whole gather, with tpl__layout_count and tpl__layout_contiguous).
 * The numpy oracle cross-check lives in tests/shard_oracle.sh. */
#include <stdlib.h>

#include "common.h"
#include "shard.h"
#include "tap.h"

#define ARR(...) ((const uint64_t[]){__VA_ARGS__})

static struct tpl__shard_spec make_spec(int dim, size_t nsegs,
                                        const uint64_t *segs) {
  struct tpl__shard_spec s = {.dim = dim, .nsegs = nsegs};
  for (size_t j = 0; j < nsegs; j++)
    s.segs[j] = segs[j];
  return s;
}

static uint64_t elems_of(const uint64_t *shape, int ndim) {
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  return n;
}

/* Shards a uint32 tensor filled with 0,1,2,... by `spec` and compares
 * rank r's gathered elements with `want`. */
static void check_spec(const uint64_t *shape, int ndim,
                       const struct tpl__shard_spec *spec, uint32_t n,
                       uint32_t r, const uint32_t *want, size_t nwant) {
  struct tpl__layout l;
  uint64_t count = elems_of(shape, ndim);
  uint32_t src[64], dst[64];
  for (uint64_t i = 0; i < count; i++)
    src[i] = (uint32_t)i;
  CHECK_EQ_INT(tpl__shard_check(shape, ndim, spec, n, "t", NULL), 0);
  CHECK_EQ_INT(tpl__shard_layout(shape, ndim, 4, spec, n, r, &l), 0);
  CHECK_EQ_U64(l.total, nwant * 4);
  uint64_t got = tpl__layout_gather(&l, 0, count * 4, (const uint8_t *)src,
                                    (uint8_t *)dst);
  CHECK_EQ_U64(got, nwant * 4);
  for (size_t i = 0; i < nwant && i < got / 4; i++)
    CHECK_EQ_U64(dst[i], want[i]);
}

static void check_example(const uint64_t *shape, int ndim, int dim,
                          size_t nsegs, const uint64_t *segs, uint32_t n,
                          uint32_t r, const uint32_t *want, size_t nwant) {
  struct tpl__shard_spec spec = make_spec(dim, nsegs, segs);
  check_spec(shape, ndim, &spec, n, r, want, nwant);
}

/* DESIGN.md's replication rows: `parts` per segment (0: N ways). */
static void check_replicated(const uint64_t *shape, int ndim, size_t nsegs,
                             const uint64_t *segs, const uint32_t *parts,
                             uint32_t n, const uint32_t *want, size_t nwant) {
  struct tpl__shard_spec spec = make_spec(0, nsegs, segs);
  for (size_t j = 0; j < (nsegs ? nsegs : 1); j++)
    spec.parts[j] = parts[j];
  for (uint32_t r = 0; r < n; r++)
    check_spec(shape, ndim, &spec, n, r, want + r * nwant, nwant);
}

static void test_example_12_segs_444(void) {
  check_example(ARR(12), 1, 0, 3, ARR(4, 4, 4), 2, 0,
                (const uint32_t[]){0, 1, 4, 5, 8, 9}, 6);
  check_example(ARR(12), 1, 0, 3, ARR(4, 4, 4), 2, 1,
                (const uint32_t[]){2, 3, 6, 7, 10, 11}, 6);
}

static void test_example_gqa_8x2(void) {
  check_example(ARR(8, 2), 2, 0, 3, ARR(4, 2, 2), 2, 0,
                (const uint32_t[]){0, 1, 2, 3, 8, 9, 12, 13}, 8);
  check_example(ARR(8, 2), 2, 0, 3, ARR(4, 2, 2), 2, 1,
                (const uint32_t[]){4, 5, 6, 7, 10, 11, 14, 15}, 8);
}

static void test_example_3x4_dim1(void) {
  check_example(ARR(3, 4), 2, 1, 0, NULL, 2, 0,
                (const uint32_t[]){0, 1, 4, 5, 8, 9}, 6);
  check_example(ARR(3, 4), 2, 1, 0, NULL, 2, 1,
                (const uint32_t[]){2, 3, 6, 7, 10, 11}, 6);
}

static void test_example_2x8x3_dim1(void) {
  uint32_t w0[24], w1[24];
  for (uint32_t k = 0; k < 4; k++)
    for (uint32_t i = 0; i < 6; i++) {
      w0[k * 6 + i] = k * 12 + i;     /* 0..5 12..17 24..29 36..41 */
      w1[k * 6 + i] = k * 12 + 6 + i; /* 6..11 18..23 30..35 42..47 */
    }
  check_example(ARR(2, 8, 3), 3, 1, 2, ARR(4, 4), 2, 0, w0, 24);
  check_example(ARR(2, 8, 3), 3, 1, 2, ARR(4, 4), 2, 1, w1, 24);
}

static void test_example_12_segs_633(void) {
  check_example(ARR(12), 1, 0, 3, ARR(6, 3, 3), 3, 0,
                (const uint32_t[]){0, 1, 6, 9}, 4);
  check_example(ARR(12), 1, 0, 3, ARR(6, 3, 3), 3, 1,
                (const uint32_t[]){2, 3, 7, 10}, 4);
  check_example(ARR(12), 1, 0, 3, ARR(6, 3, 3), 3, 2,
                (const uint32_t[]){4, 5, 8, 11}, 4);
}

static void test_example_3x2_n1(void) {
  check_example(ARR(3, 2), 2, 1, 0, NULL, 1, 0,
                (const uint32_t[]){0, 1, 2, 3, 4, 5}, 6);
}

/* [12] segs [8,2,2], 2 kv heads at N = 4: every kv head on 2 ranks. */
static void test_example_kv_fused_n4(void) {
  check_replicated(
      ARR(12), 1, 3, ARR(8, 2, 2), (const uint32_t[]){0, 2, 2}, 4,
      (const uint32_t[]){0, 1, 8, 10, 2, 3, 8, 10, 4, 5, 9, 11, 6, 7, 9, 11},
      4);
}

/* A separate k_proj [4, 2] of 2 kv heads at N = 4. */
static void test_example_kv_separate_n4(void) {
  check_replicated(
      ARR(4, 2), 2, 0, NULL, (const uint32_t[]){2}, 4,
      (const uint32_t[]){0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7}, 4);
}

/* One kv head (MQA) at N = 4 = 4 x kv heads. */
static void test_example_kv_mqa_n4(void) {
  check_replicated(ARR(6), 1, 3, ARR(4, 1, 1), (const uint32_t[]){0, 1, 1}, 4,
                   (const uint32_t[]){0, 4, 5, 1, 4, 5, 2, 4, 5, 3, 4, 5}, 3);
}

/* parts equal to N, or unset, give the same layout as MLC's cut. */
static void test_parts_n_is_plain(void) {
  struct tpl__shard_spec a = make_spec(0, 3, ARR(8, 4, 4)), b = a;
  struct tpl__layout la, lb;
  b.parts[1] = b.parts[2] = 4;
  for (uint32_t r = 0; r < 4; r++) {
    CHECK_EQ_INT(tpl__shard_layout(ARR(16, 3), 2, 2, &a, 4, r, &la), 0);
    CHECK_EQ_INT(tpl__shard_layout(ARR(16, 3), 2, 2, &b, 4, r, &lb), 0);
    CHECK(memcmp(&la, &lb, sizeof(la)) == 0);
  }
  CHECK_EQ_U64(tpl__shard_replicas(&a, 4), 1);
  CHECK_EQ_U64(tpl__shard_replicas(&b, 4), 1);
}

static void test_replicated_shape_and_segs(void) {
  struct tpl__shard_spec s = make_spec(0, 3, ARR(8, 2, 2));
  uint64_t out[2], segs[TPL_MAX_SEGS];
  s.parts[1] = s.parts[2] = 2;
  tpl__shard_shape(ARR(12, 5), 2, &s, 8, out);
  CHECK_EQ_U64(out[0], 1 + 1 + 1);
  CHECK_EQ_U64(out[1], 5);
  CHECK_EQ_U64(tpl__shard_rank_segs(&s, 12, 8, segs), 3);
  CHECK_EQ_U64(segs[0], 1);
  CHECK_EQ_U64(segs[1], 1);
  CHECK_EQ_U64(tpl__shard_replicas(&s, 8), 4);
  CHECK_EQ_U64(tpl__shard_replicas(&s, 2), 1);
}

static void test_refuse_replicated(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 3, ARR(6, 2, 2));
  s.parts[1] = s.parts[2] = 2;
  /* 2 kv heads over 3 shards: the parts must divide N */
  CHECK_EQ_INT(tpl__shard_check(ARR(10), 1, &s, 3, "qkv", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "tensor 'qkv'");
  CHECK_STR_CONTAINS(err.msg, "segment 1 along dim 0 is cut into 2");
  CHECK_STR_CONTAINS(err.msg, "divisor of the 3 shards");
  /* a segment its kv heads do not divide */
  s = make_spec(0, 3, ARR(8, 3, 3));
  s.parts[1] = s.parts[2] = 2;
  CHECK_EQ_INT(tpl__shard_check(ARR(14), 1, &s, 4, "qkv", &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "segment 1 along dim 0 has length 3");
  CHECK_STR_CONTAINS(err.msg, "its 2 replicated parts (each held by 2 of "
                              "the 4 shards)");
  /* the q segment still divides by N */
  s = make_spec(0, 3, ARR(6, 2, 2));
  s.parts[1] = s.parts[2] = 2;
  CHECK_EQ_INT(tpl__shard_check(ARR(10), 1, &s, 4, "qkv", &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "segment 0 (of 3)");
}

/* Every byte of a segment of P parts has N / P holders, any other one. */
static void test_replicated_owners(void) {
  struct tpl__shard_spec s = make_spec(1, 3, ARR(8, 4, 4));
  struct tpl__layout l[8];
  s.parts[1] = s.parts[2] = 2;
  for (uint32_t r = 0; r < 8; r++)
    CHECK_EQ_INT(tpl__shard_layout(ARR(3, 16, 2), 3, 1, &s, 8, r, &l[r]), 0);
  for (uint64_t x = 0; x < 3 * 16 * 2; x++) {
    uint64_t owners = 0, col = (x / 2) % 16;
    for (uint32_t r = 0; r < 8; r++)
      owners += tpl__layout_count(&l[r], x, x + 1);
    CHECK_EQ_U64(owners, col < 8 ? 1 : 4);
  }
}

static void test_layout_pieces_by_hand(void) {
  struct tpl__shard_spec s = make_spec(1, 0, NULL);
  struct tpl__layout l;
  /* [3,4] dim 1, 2-byte items, rank 1: columns 2,3 = bytes 4..7 a row */
  CHECK_EQ_INT(tpl__shard_layout(ARR(3, 4), 2, 2, &s, 2, 1, &l), 0);
  CHECK_EQ_U64(l.rows, 3);
  CHECK_EQ_U64(l.row_stride, 8);
  CHECK_EQ_U64(l.npieces, 1);
  CHECK_EQ_U64(l.pieces[0].offset, 4);
  CHECK_EQ_U64(l.pieces[0].length, 4);
  CHECK_EQ_U64(l.total, 12);
  /* [12] segs [4,4,4] rank 1 of 2: elements 2,3 6,7 10,11 */
  s = make_spec(0, 3, ARR(4, 4, 4));
  CHECK_EQ_INT(tpl__shard_layout(ARR(12), 1, 1, &s, 2, 1, &l), 0);
  CHECK_EQ_U64(l.rows, 1);
  CHECK_EQ_U64(l.npieces, 3);
  CHECK_EQ_U64(l.pieces[0].offset, 2);
  CHECK_EQ_U64(l.pieces[1].offset, 6);
  CHECK_EQ_U64(l.pieces[2].offset, 10);
  CHECK_EQ_U64(l.pieces[2].length, 2);
  CHECK_EQ_U64(l.total, 6);
}

static void test_n1_merges_and_collapses(void) {
  struct tpl__shard_spec s = make_spec(2, 2, ARR(2, 3));
  struct tpl__layout l;
  /* [4,6,5] dim 2 segs [2,3], N = 1: both pieces merge into the whole
   * row, and the 24 rows collapse into one piece of 120 * 8 bytes. */
  CHECK_EQ_INT(tpl__shard_layout(ARR(4, 6, 5), 3, 8, &s, 1, 0, &l), 0);
  CHECK_EQ_U64(l.rows, 1);
  CHECK_EQ_U64(l.npieces, 1);
  CHECK_EQ_U64(l.pieces[0].offset, 0);
  CHECK_EQ_U64(l.pieces[0].length, 960);
  CHECK_EQ_U64(l.row_stride, 960);
  CHECK_EQ_U64(l.total, 960);
  uint64_t start = 7;
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 100, 300, &start), 200);
  CHECK_EQ_U64(start, 100);
}

static void test_width1_slices(void) {
  struct tpl__shard_spec s = make_spec(1, 0, NULL);
  struct tpl__layout l;
  uint16_t src[20], dst[20];
  for (int i = 0; i < 20; i++)
    src[i] = (uint16_t)(100 + i);
  /* [5,4] dim 1 N = 4: rank 3 gets column 3, one element per row */
  CHECK_EQ_INT(tpl__shard_layout(ARR(5, 4), 2, 2, &s, 4, 3, &l), 0);
  CHECK_EQ_U64(l.rows, 5);
  CHECK_EQ_U64(l.pieces[0].offset, 6);
  CHECK_EQ_U64(l.pieces[0].length, 2);
  CHECK_EQ_U64(
      tpl__layout_gather(&l, 0, 40, (const uint8_t *)src, (uint8_t *)dst), 10);
  for (int i = 0; i < 5; i++)
    CHECK_EQ_U64(dst[i], 100 + 4 * i + 3);
  /* segs of width 1 with N = 1 merge into one piece */
  s = make_spec(0, 3, ARR(1, 1, 1));
  CHECK_EQ_INT(tpl__shard_layout(ARR(3), 1, 4, &s, 1, 0, &l), 0);
  CHECK_EQ_U64(l.npieces, 1);
  CHECK_EQ_U64(l.pieces[0].length, 12);
}

static void test_zero_size(void) {
  struct tpl__shard_spec s = make_spec(0, 0, NULL);
  struct tpl__layout l = {.rows = 99};
  uint8_t buf[1] = {42};
  uint64_t shp[2], start = 5;
  CHECK_EQ_INT(tpl__shard_check(ARR(0, 4), 2, &s, 2, "t", NULL), 0);
  CHECK_EQ_INT(tpl__shard_layout(ARR(0, 4), 2, 4, &s, 2, 1, &l), 0);
  CHECK_EQ_U64(l.rows, 0);
  CHECK_EQ_U64(l.npieces, 0);
  CHECK_EQ_U64(l.total, 0);
  CHECK_EQ_U64(tpl__layout_gather(&l, 0, 100, buf, buf), 0);
  CHECK_EQ_U64(buf[0], 42);
  CHECK_EQ_U64(tpl__layout_count(&l, 0, 100), 0);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 3, 100, &start), 0);
  CHECK_EQ_U64(start, 3);
  tpl__shard_shape(ARR(0, 4), 2, &s, 2, shp);
  CHECK_EQ_U64(shp[0], 0);
  /* empty along another dim, and empty with absurd other extents: no
   * bytes, so no overflow */
  s = make_spec(1, 0, NULL);
  CHECK_EQ_INT(tpl__shard_layout(ARR(3, 6, 0), 3, 2, &s, 3, 2, &l), 0);
  CHECK_EQ_U64(l.total, 0);
  CHECK_EQ_INT(
      tpl__shard_layout(ARR(0, 1ull << 40, 1ull << 40), 3, 8, &s, 2, 0, &l), 0);
  CHECK_EQ_U64(l.total, 0);
  tpl__layout_whole(0, &l);
  CHECK_EQ_U64(l.npieces, 0);
  CHECK_EQ_U64(tpl__layout_count(&l, 0, 10), 0);
}

static void test_layout_whole(void) {
  struct tpl__layout l;
  uint8_t src[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, dst[10] = {0};
  uint64_t start = 0;
  tpl__layout_whole(10, &l);
  CHECK_EQ_U64(l.total, 10);
  CHECK_EQ_U64(tpl__layout_gather(&l, 3, 7, src + 3, dst), 4);
  CHECK_EQ_U64(dst[0], 3);
  CHECK_EQ_U64(dst[3], 6);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 3, 70, &start), 7);
  CHECK_EQ_U64(start, 3);
}

static void test_overflow(void) {
  struct tpl__shard_spec s = make_spec(0, 0, NULL);
  struct tpl__layout l = {.rows = 7};
  /* 2^64 elements of 2 bytes */
  CHECK_EQ_INT(
      tpl__shard_check(ARR(1ull << 32, 1ull << 32), 2, &s, 2, "t", NULL), 0);
  CHECK_EQ_INT(
      tpl__shard_layout(ARR(1ull << 32, 1ull << 32), 2, 2, &s, 2, 0, &l),
      TPL_EOVERFLOW);
  CHECK_EQ_U64(l.rows, 7);
  /* rows fit, rows * row_stride does not */
  s = make_spec(1, 0, NULL);
  CHECK_EQ_INT(tpl__shard_layout(ARR(1ull << 62, 8), 2, 1, &s, 2, 0, &l),
               TPL_EOVERFLOW);
  /* inner alone overflows */
  s = make_spec(0, 0, NULL);
  CHECK_EQ_INT(
      tpl__shard_layout(ARR(2, 1ull << 33, 1ull << 33), 3, 1, &s, 2, 0, &l),
      TPL_EOVERFLOW);
  /* itemsize pushes it over */
  CHECK_EQ_INT(tpl__shard_layout(ARR(1ull << 61), 1, 8, &s, 1, 0, &l),
               TPL_EOVERFLOW);
  /* just fits: 2^63 bytes */
  s = make_spec(1, 0, NULL);
  CHECK_EQ_INT(
      tpl__shard_layout(ARR(1ull << 31, 1ull << 31), 2, 2, &s, 2, 1, &l), 0);
  CHECK_EQ_U64(l.total, 1ull << 62);
  CHECK_EQ_U64(tpl__layout_count(&l, 0, UINT64_MAX), 1ull << 62);
}

/* A window at the very end of a tensor with 2^40 rows: must be found by
 * division (scanning rows from 0 would never finish). */
static void test_huge_rows_window(void) {
  struct tpl__shard_spec s = make_spec(1, 0, NULL);
  struct tpl__layout l;
  const uint64_t end = 1ull << 42;
  uint8_t src[6] = {10, 11, 12, 13, 14, 15}, dst[6] = {0};
  uint64_t start = 0;
  CHECK_EQ_INT(tpl__shard_layout(ARR(1ull << 40, 4), 2, 1, &s, 2, 0, &l), 0);
  /* [end-6, end) = bytes 2,3 of the second-last row, the last row whole;
   * rank 0 holds bytes 0,1 of each row: src[2], src[3] */
  CHECK_EQ_U64(tpl__layout_gather(&l, end - 6, end, src, dst), 2);
  CHECK_EQ_U64(dst[0], 12);
  CHECK_EQ_U64(dst[1], 13);
  CHECK_EQ_U64(tpl__layout_count(&l, 0, end), 1ull << 41);
  CHECK_EQ_U64(tpl__layout_count(&l, 1, end - 1), (1ull << 41) - 1);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, end - 6, end, &start), 2);
  CHECK_EQ_U64(start, end - 4);
}

static void test_contiguous_by_hand(void) {
  struct tpl__shard_spec s = make_spec(1, 0, NULL);
  struct tpl__layout l;
  uint64_t start = 99;
  /* [3,4] bytes dim 1, rank 0: bytes 0,1 4,5 8,9 */
  CHECK_EQ_INT(tpl__shard_layout(ARR(3, 4), 2, 1, &s, 2, 0, &l), 0);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 0, 2, &start), 2);
  CHECK_EQ_U64(start, 0);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 1, 3, &start), 1);
  CHECK_EQ_U64(start, 1);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 3, 6, &start), 2);
  CHECK_EQ_U64(start, 4);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 0, 5, &start), UINT64_MAX);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 2, 4, &start), 0);
  CHECK_EQ_U64(start, 2);
  CHECK_EQ_U64(tpl__layout_contiguous(&l, 10, 12, &start), 0);
  CHECK_EQ_U64(start, 10);
  CHECK_EQ_U64(tpl__layout_count(&l, 1, 9), 4);
}

static void test_refuse_dim_out_of_range(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(2, 0, NULL);
  CHECK_EQ_INT(tpl__shard_check(ARR(3, 4), 2, &s, 2, "w.weight", &err),
               TPL_EPLAN);
  CHECK_EQ_INT(err.code, TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "tensor 'w.weight'");
  CHECK_STR_CONTAINS(err.msg, "expected 0..1");
  CHECK_STR_CONTAINS(err.msg, "[3, 4]");
  CHECK_STR_CONTAINS(err.msg, "found 2");
  s.dim = -1;
  CHECK_EQ_INT(tpl__shard_check(ARR(3, 4), 2, &s, 2, "w", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "found -1");
  s.dim = 0;
  CHECK_EQ_INT(tpl__shard_check(ARR(1), 0, &s, 2, "scalar", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "scalar");
}

static void test_refuse_segs_sum(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 2, ARR(4, 4));
  CHECK_EQ_INT(tpl__shard_check(ARR(12, 3), 2, &s, 2, "qkv", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "tensor 'qkv'");
  CHECK_STR_CONTAINS(err.msg, "[4, 4]");
  CHECK_STR_CONTAINS(err.msg, "shape[0] = 12");
  CHECK_STR_CONTAINS(err.msg, "found 8");
  s = make_spec(0, 2, ARR(UINT64_MAX, 2));
  CHECK_EQ_INT(tpl__shard_check(ARR(1), 1, &s, 1, "qkv", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "overflow");
}

static void test_refuse_too_many_segs(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 0, NULL);
  s.nsegs = TPL_MAX_SEGS + 1;
  CHECK_EQ_INT(tpl__shard_check(ARR(65), 1, &s, 1, "t", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "at most 64 segs, found 65");
}

static void test_refuse_zero_segment(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 3, ARR(4, 0, 4));
  CHECK_EQ_INT(tpl__shard_check(ARR(8), 1, &s, 2, "t", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "segment 1 of length 0");
}

static void test_refuse_bad_counts(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 0, NULL);
  CHECK_EQ_INT(tpl__shard_check(ARR(8), 1, &s, 0, "t", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "at least 1");
  CHECK_EQ_INT(
      tpl__shard_check(ARR(1, 1, 1, 1, 1, 1, 1, 1, 1), 9, &s, 1, "t", &err),
      TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "at most 8 dims, found 9");
  /* NULL err and NULL name are accepted */
  CHECK_EQ_INT(tpl__shard_check(ARR(8), 1, &s, 3, NULL, NULL),
               TPL_EINDIVISIBLE);
}

static void test_refuse_indivisible(void) {
  struct tpl__error err = {0};
  struct tpl__shard_spec s = make_spec(0, 3, ARR(4096, 1000, 1000));
  CHECK_EQ_INT(tpl__shard_check(ARR(6096, 64), 2, &s, 3,
                                "model.layers.0.qkv_proj.weight", &err),
               TPL_EINDIVISIBLE);
  CHECK_EQ_INT(err.code, TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "tensor 'model.layers.0.qkv_proj.weight'");
  CHECK_STR_CONTAINS(err.msg, "segment 0 (of 3)");
  CHECK_STR_CONTAINS(err.msg, "length 4096");
  CHECK_STR_CONTAINS(err.msg, "3 shards");
  /* gcd(4096, 1000, 1000) = 8 */
  CHECK_STR_CONTAINS(err.msg, "divide every segment: 1, 2, 4, 8");
  CHECK_EQ_INT(tpl__shard_check(ARR(6096, 64), 2, &s, 16, "q", &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "segment 1 (of 3)");
  CHECK_STR_CONTAINS(err.msg, "length 1000");
  s = make_spec(1, 0, NULL);
  CHECK_EQ_INT(tpl__shard_check(ARR(2, 10), 2, &s, 4, "o", &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "dim 1 has length 10");
  CHECK_STR_CONTAINS(err.msg, "4 shards");
  CHECK_STR_CONTAINS(err.msg, "divide it: 1, 2, 5, 10");
  CHECK_EQ_INT(tpl__shard_check(ARR(2, 10), 2, &s, 5, "o", &err), 0);
}

static void test_layout_refuses_unchecked(void) {
  struct tpl__shard_spec s = make_spec(0, 0, NULL);
  struct tpl__layout l = {.rows = 5};
  CHECK_EQ_INT(tpl__shard_layout(ARR(8), 1, 1, &s, 2, 2, &l), TPL_EINTERNAL);
  CHECK_EQ_INT(tpl__shard_layout(ARR(9), 1, 1, &s, 2, 0, &l), TPL_EINTERNAL);
  CHECK_EQ_INT(tpl__shard_layout(ARR(8), 1, 0, &s, 2, 0, &l), TPL_EINTERNAL);
  CHECK_EQ_U64(l.rows, 5);
}

static void test_shard_shape(void) {
  struct tpl__shard_spec s = make_spec(1, 2, ARR(4, 4));
  uint64_t out[3];
  tpl__shard_shape(ARR(2, 8, 3), 3, &s, 2, out);
  CHECK_EQ_U64(out[0], 2);
  CHECK_EQ_U64(out[1], 4);
  CHECK_EQ_U64(out[2], 3);
}

/* ---- element-wise reference: the closed form applied per element ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n) { /* splitmix64, uniform-ish in [0, n) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return n ? (z ^ (z >> 31)) % n : 0;
}

/* Writes rank r's output of a checked spec element by element: for each
 * output index, the source index along dim is N*S_j + r*s_j + (c - S_j). */
static uint64_t naive_shard(const uint64_t *shape, int ndim, size_t item,
                            const struct tpl__shard_spec *sp, uint32_t n,
                            uint32_t r, const uint8_t *src, uint8_t *dst) {
  uint64_t oshape[TPL_MAX_DIMS], idx[TPL_MAX_DIMS] = {0};
  uint64_t segs1 = shape[sp->dim];
  const uint64_t *segs = sp->nsegs ? sp->segs : &segs1;
  tpl__shard_shape(shape, ndim, sp, n, oshape);
  uint64_t count = elems_of(oshape, ndim);
  for (uint64_t e = 0; e < count; e++) {
    uint64_t rem = e, c, sj = 0, src_el = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      idx[d] = rem % oshape[d];
      rem /= oshape[d];
    }
    c = idx[sp->dim];
    size_t j = 0;
    while (c >= sj + segs[j] / n)
      sj += segs[j++] / n;
    for (int d = 0; d < ndim; d++) {
      uint64_t v =
          d == sp->dim ? n * sj + r * (segs[j] / n) + (c - sj) : idx[d];
      src_el = src_el * shape[d] + v;
    }
    memcpy(dst + e * item, src + src_el * item, item);
  }
  return count * item;
}

/* A random valid case: up to `maxdim` dims, segs multiple of N. */
static void random_case(int maxdim, uint64_t *shape, int *ndim, size_t *item,
                        struct tpl__shard_spec *s, uint32_t *n) {
  *ndim = 1 + (int)rnd((uint64_t)maxdim);
  *item = (size_t)1 << rnd(4);
  *n = 1 + (uint32_t)rnd(6);
  for (int i = 0; i < *ndim; i++)
    shape[i] = 1 + rnd(*ndim > 4 ? 3 : 6);
  *s = make_spec((int)rnd((uint64_t)*ndim), 0, NULL);
  s->nsegs = rnd(4);
  shape[s->dim] = 0;
  for (size_t j = 0; j < s->nsegs; j++) {
    s->segs[j] = *n * (1 + rnd(3));
    shape[s->dim] += s->segs[j];
  }
  if (s->nsegs == 0) shape[s->dim] = *n * (1 + rnd(4));
}

static void test_eight_dims(void) {
  uint64_t shape[8] = {2, 1, 3, 2, 1, 2, 4, 2};
  uint8_t src[192 * 2], a[192 * 2], b[192 * 2]; /* 192 elements */
  for (size_t i = 0; i < sizeof(src); i++)
    src[i] = (uint8_t)(i * 7 + 3);
  for (int d = 0; d < 8; d++) {
    struct tpl__shard_spec s = make_spec(d, 0, NULL);
    uint32_t n = (uint32_t)shape[d];
    CHECK_EQ_INT(tpl__shard_check(shape, 8, &s, n, "t", NULL), 0);
    for (uint32_t r = 0; r < n; r++) {
      struct tpl__layout l;
      CHECK_EQ_INT(tpl__shard_layout(shape, 8, 2, &s, n, r, &l), 0);
      uint64_t got = tpl__layout_gather(&l, 0, sizeof(src), src, a);
      uint64_t want = naive_shard(shape, 8, 2, &s, n, r, src, b);
      CHECK_EQ_U64(got, want);
      CHECK(memcmp(a, b, (size_t)want) == 0);
    }
  }
}

/* Contiguity decided byte by byte through tpl__layout_count. */
static int window_contiguous(const struct tpl__layout *l, uint64_t b,
                             uint64_t e, uint64_t *first, uint64_t *len) {
  uint64_t lo = UINT64_MAX, hi = 0, n = 0;
  for (uint64_t x = b; x < e; x++)
    if (tpl__layout_count(l, x, x + 1) == 1) {
      if (lo == UINT64_MAX) lo = x;
      hi = x;
      n++;
    }
  *first = lo;
  *len = n;
  return n == 0 || hi - lo + 1 == n;
}

/* Gathers layout l over random back-to-back windows of [0, nbytes) and
 * checks each window's count and contiguity; returns bytes gathered. */
static uint64_t chunked_gather(const struct tpl__layout *l, uint64_t nbytes,
                               const uint8_t *src, uint8_t *dst) {
  uint64_t b = 0, n = 0;
  while (b < nbytes) {
    uint64_t e = b + 1 + rnd(rnd(2) ? 8 : nbytes);
    if (e > nbytes) e = nbytes;
    uint64_t got = tpl__layout_gather(l, b, e, src + b, dst + n);
    uint64_t first, len, start = 12345;
    CHECK_EQ_U64(got, tpl__layout_count(l, b, e));
    int contig = window_contiguous(l, b, e, &first, &len);
    uint64_t c = tpl__layout_contiguous(l, b, e, &start);
    CHECK_EQ_U64(len, got);
    if (!contig) {
      CHECK_EQ_U64(c, UINT64_MAX);
    } else {
      CHECK_EQ_U64(c, got);
      CHECK_EQ_U64(start, got ? first : b);
    }
    n += got;
    b = e;
  }
  return n;
}

static void test_chunked_gather_random(void) {
  static uint8_t src[1 << 16], whole[1 << 16], chunk[1 << 16], ref[1 << 16];
  int ran = 0;
  for (size_t i = 0; i < sizeof(src); i++)
    src[i] = (uint8_t)rnd(256);
  for (int iter = 0; iter < 300; iter++) {
    uint64_t shape[TPL_MAX_DIMS];
    int ndim;
    size_t item;
    uint32_t n;
    struct tpl__shard_spec s;
    random_case(5, shape, &ndim, &item, &s, &n);
    uint64_t nbytes = elems_of(shape, ndim) * item, sum = 0;
    if (nbytes > sizeof(src)) continue;
    ran++;
    CHECK_EQ_INT(tpl__shard_check(shape, ndim, &s, n, "t", NULL), 0);
    for (uint32_t r = 0; r < n; r++) {
      struct tpl__layout l;
      CHECK_EQ_INT(tpl__shard_layout(shape, ndim, item, &s, n, r, &l), 0);
      uint64_t w = tpl__layout_gather(&l, 0, nbytes, src, whole);
      CHECK_EQ_U64(w, l.total);
      CHECK_EQ_U64(w, naive_shard(shape, ndim, item, &s, n, r, src, ref));
      CHECK(memcmp(whole, ref, (size_t)w) == 0);
      CHECK_EQ_U64(chunked_gather(&l, nbytes, src, chunk), w);
      CHECK(memcmp(whole, chunk, (size_t)w) == 0);
      sum += l.total;
    }
    CHECK_EQ_U64(sum, nbytes);
    if (tap_case_failed) {
      printf("# iteration %d failed\n", iter);
      break;
    }
  }
  printf("# %d random layouts\n", ran);
  CHECK(ran >= 250);
}

/* The ranks partition the tensor: every byte belongs to exactly one. */
static void test_ranks_partition(void) {
  for (int iter = 0; iter < 100; iter++) {
    uint64_t shape[TPL_MAX_DIMS];
    int ndim;
    size_t item;
    uint32_t n;
    struct tpl__shard_spec s;
    struct tpl__layout l[8];
    random_case(4, shape, &ndim, &item, &s, &n);
    uint64_t nbytes = elems_of(shape, ndim) * item;
    if (nbytes > 4096) continue;
    for (uint32_t r = 0; r < n; r++)
      CHECK_EQ_INT(tpl__shard_layout(shape, ndim, item, &s, n, r, &l[r]), 0);
    for (uint64_t x = 0; x < nbytes; x++) {
      uint64_t owners = 0;
      for (uint32_t r = 0; r < n; r++)
        owners += tpl__layout_count(&l[r], x, x + 1);
      CHECK_EQ_U64(owners, 1);
      if (owners != 1) return;
    }
  }
}

int main(void) {
  RUN(test_example_12_segs_444);
  RUN(test_example_gqa_8x2);
  RUN(test_example_3x4_dim1);
  RUN(test_example_2x8x3_dim1);
  RUN(test_example_12_segs_633);
  RUN(test_example_3x2_n1);
  RUN(test_example_kv_fused_n4);
  RUN(test_example_kv_separate_n4);
  RUN(test_example_kv_mqa_n4);
  RUN(test_parts_n_is_plain);
  RUN(test_replicated_shape_and_segs);
  RUN(test_refuse_replicated);
  RUN(test_replicated_owners);
  RUN(test_layout_pieces_by_hand);
  RUN(test_n1_merges_and_collapses);
  RUN(test_width1_slices);
  RUN(test_zero_size);
  RUN(test_layout_whole);
  RUN(test_overflow);
  RUN(test_huge_rows_window);
  RUN(test_contiguous_by_hand);
  RUN(test_refuse_dim_out_of_range);
  RUN(test_refuse_segs_sum);
  RUN(test_refuse_too_many_segs);
  RUN(test_refuse_zero_segment);
  RUN(test_refuse_bad_counts);
  RUN(test_refuse_indivisible);
  RUN(test_layout_refuses_unchecked);
  RUN(test_shard_shape);
  RUN(test_eight_dims);
  RUN(test_chunked_gather_random);
  RUN(test_ranks_partition);
  return tap_done();
}
