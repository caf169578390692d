/* test_reshard.c - re-sharding's pure parts: the scatter that puts a
 * rank's shard back into the full tensor (src/shard.c,
 * tpl__layout_scatter) against DESIGN.md section 2's worked examples,
 * whose rank slices are copied here from its table (hand-computed there,
 * not by tpload), and the rules of shard-info.json's parser
 * (src/fmt_shardinfo.c), one case each, each building its broken file
 * from one valid document; and the bias rebuilt times N (scope.c). */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dtype.h"
#include "fmt_shardinfo.h"
#include "scope.h"
#include "shard.h"
#include "tap.h"

#define U32S(...) ((const uint32_t[]){__VA_ARGS__})

/* One worked example: full `shape`, the spec, and per rank its slice. */
struct example {
  uint64_t shape[3];
  int ndim;
  struct tpl__shard_spec spec;
  uint32_t n;
  const uint32_t *slices[4];
  size_t len; /* elements of each slice */
};

/* The same scattered in two runs, [0, mid) and [mid, end) of the
 * tensor's bytes, each rank's bytes of a run taken from its slice in
 * order (tpl__layout_count says where): the same tensor. */
static void check_runs(const struct example *x, uint64_t count, uint64_t mid) {
  uint32_t full[64];
  memset(full, 0xff, sizeof(full));
  for (uint32_t r = 0; r < x->n; r++) {
    struct tpl__layout l;
    const uint8_t *slice = (const uint8_t *)x->slices[r];
    uint64_t first;
    REQUIRE(tpl__shard_layout(x->shape, x->ndim, 4, &x->spec, x->n, r, &l) ==
            0);
    first = tpl__layout_count(&l, 0, mid);
    CHECK_EQ_U64(tpl__layout_scatter(&l, 0, mid, slice, (uint8_t *)full),
                 first);
    CHECK_EQ_U64(tpl__layout_scatter(&l, mid, count * 4, slice + first,
                                     (uint8_t *)full + mid),
                 x->len * 4 - first);
  }
  for (uint64_t i = 0; i < count; i++)
    CHECK_EQ_U64(full[i], i);
}

/* Scatters every rank's slice into a full tensor that starts all
 * 0xffffffff: it must come out 0, 1, 2, ... whole, and so in two runs
 * split anywhere (mid-element included). */
static void check_example(const struct example *x) {
  uint32_t full[64];
  uint64_t count = 1;
  for (int d = 0; d < x->ndim; d++)
    count *= x->shape[d];
  memset(full, 0xff, sizeof(full));
  for (uint32_t r = 0; r < x->n; r++) {
    struct tpl__layout l;
    CHECK_EQ_INT(tpl__shard_layout(x->shape, x->ndim, 4, &x->spec, x->n, r, &l),
                 0);
    CHECK_EQ_U64(tpl__layout_scatter(&l, 0, UINT64_MAX,
                                     (const uint8_t *)x->slices[r],
                                     (uint8_t *)full),
                 x->len * 4);
  }
  for (uint64_t i = 0; i < count; i++)
    CHECK_EQ_U64(full[i], i);
  for (uint64_t mid = 1; mid < count * 4; mid += 3)
    check_runs(x, count, mid);
}

static void test_scatter_segs(void) {
  struct example x = {{12},
                      1,
                      {.dim = 0, .nsegs = 3, .segs = {4, 4, 4}},
                      2,
                      {U32S(0, 1, 4, 5, 8, 9), U32S(2, 3, 6, 7, 10, 11)},
                      6};
  check_example(&x);
}

static void test_scatter_gqa(void) {
  struct example x = {
      {8, 2},
      2,
      {.dim = 0, .nsegs = 3, .segs = {4, 2, 2}},
      2,
      {U32S(0, 1, 2, 3, 8, 9, 12, 13), U32S(4, 5, 6, 7, 10, 11, 14, 15)},
      8};
  check_example(&x);
}

static void test_scatter_dim1(void) {
  struct example x = {{3, 4},
                      2,
                      {.dim = 1},
                      2,
                      {U32S(0, 1, 4, 5, 8, 9), U32S(2, 3, 6, 7, 10, 11)},
                      6};
  check_example(&x);
}

static void test_scatter_middle_dim(void) {
  uint32_t r0[24], r1[24];
  for (uint32_t i = 0; i < 24; i++) { /* 0..5 12..17 24..29 36..41 */
    r0[i] = (i / 6) * 12 + i % 6;
    r1[i] = r0[i] + 6;
  }
  struct example x = {{2, 8, 3}, 3, {.dim = 1, .nsegs = 2, .segs = {4, 4}}, 2,
                      {r0, r1},  24};
  check_example(&x);
}

static void test_scatter_three_ranks(void) {
  struct example x = {{12},
                      1,
                      {.dim = 0, .nsegs = 3, .segs = {6, 3, 3}},
                      3,
                      {U32S(0, 1, 6, 9), U32S(2, 3, 7, 10), U32S(4, 5, 8, 11)},
                      4};
  check_example(&x);
}

static void test_scatter_kv_replicated(void) {
  struct example x = {
      {12},
      1,
      {.dim = 0, .nsegs = 3, .segs = {8, 2, 2}, .parts = {0, 2, 2}},
      4,
      {U32S(0, 1, 8, 10), U32S(2, 3, 8, 10), U32S(4, 5, 9, 11),
       U32S(6, 7, 9, 11)},
      4};
  check_example(&x);
}

static void test_scatter_one_kv_head(void) {
  struct example x = {
      {6},
      1,
      {.dim = 0, .nsegs = 3, .segs = {4, 1, 1}, .parts = {0, 1, 1}},
      4,
      {U32S(0, 4, 5), U32S(1, 4, 5), U32S(2, 4, 5), U32S(3, 4, 5)},
      3};
  check_example(&x);
}

/* --- shard-info.json --- */

/* A valid document: a weight [4, 3] f32 cut along dim 0 over 2 shards
 * (24 bytes each), and a row-parallel bias [3] held as bias / 2. */
static const char valid[] =
    "{\"tensor_parallel_shards\": 2, \"pipeline_parallel_stages\": 1,"
    " \"data_parallel_replicas\": 1, \"params\": ["
    "{\"name\": \"w\", \"shape\": [2, 3], \"dtype\": \"float32\","
    " \"preprocs\": [{\"func_name\": \"_s\", \"in_shape\": [4, 3],"
    " \"out_shape\": [2, 2, 3], \"out_dtype\": \"float32\"}],"
    " \"dim\": 0, \"segs\": [2], \"bias_scale\": 1.0, \"ranks\": ["
    "{\"rank\": 0, \"replica\": 0, \"stage\": 0, \"shard\": 0,"
    " \"nbytes\": 24, \"xxh3\": \"00000000000000a1\"},"
    "{\"rank\": 1, \"replica\": 0, \"stage\": 0, \"shard\": 1,"
    " \"nbytes\": 24, \"xxh3\": \"00000000000000a2\"}]},"
    "{\"name\": \"b\", \"shape\": [3], \"dtype\": \"float32\","
    " \"preprocs\": [], \"bias\": \"scale\", \"bias_scale\": 0.5,"
    " \"ranks\": [{\"rank\": 0, \"nbytes\": 12, \"xxh3\": "
    "\"00000000000000b1\"},"
    "{\"rank\": 1, \"nbytes\": 12, \"xxh3\": \"00000000000000b2\"}]}]}";

/* valid with the first `from` replaced by `to`. */
static char *edited(const char *from, const char *to) {
  const char *at = strstr(valid, from);
  size_t n = strlen(valid) + strlen(to) + 1, head;
  char *s = malloc(n);
  if (s == NULL || at == NULL) {
    free(s);
    return NULL;
  }
  head = (size_t)(at - valid);
  memcpy(s, valid, head);
  snprintf(s + head, n - head, "%s%s", to, at + strlen(from));
  return s;
}

/* The edited document is refused, TPL_EFORMAT, the message naming
 * `needle`. */
static void refused(const char *from, const char *to, const char *needle) {
  struct tpl__error err = {0};
  struct tpl__si *si = NULL;
  char *doc = edited(from, to);
  REQUIRE(doc != NULL);
  CHECK_EQ_INT(tpl__si_parse(doc, strlen(doc), "d/shard-info.json", &si, &err),
               TPL_EFORMAT);
  CHECK(si == NULL);
  CHECK_STR_CONTAINS(err.msg, "d/shard-info.json");
  CHECK_STR_CONTAINS(err.msg, needle);
  free(doc);
}

static void test_si_valid(void) {
  struct tpl__error err = {0};
  struct tpl__si *si = NULL;
  REQUIRE(tpl__si_parse(valid, strlen(valid), "s", &si, &err) == 0);
  CHECK_EQ_U64(si->world, 2);
  CHECK_EQ_U64(si->nparams, 2);
  CHECK_EQ_INT(si->params[0].kind, TPL_SI_CUT);
  CHECK_EQ_U64(si->params[0].shape[0], 4);
  CHECK_EQ_U64(si->params[0].spec.segs[0], 4);
  CHECK_EQ_U64(si->params[0].holders[1].xxh3, 0xa2);
  CHECK_EQ_INT(si->params[1].kind, TPL_SI_SCALED);
  CHECK(tpl__si_holder_of(&si->params[1], 1) == &si->params[1].holders[1]);
  tpl__si_free(si);
}

/* Per-shard segs [2, 1, 1] with kv_replicas 2 at N = 4 over [12]: the
 * trailing two were cut into 2 parts (DESIGN.md's [8, 2, 2] example). */
static void test_si_kv_suffix(void) {
  struct tpl__error err = {0};
  struct tpl__si *si = NULL;
  const char *doc =
      "{\"tensor_parallel_shards\": 4, \"params\": [{\"name\": \"qkv\","
      " \"shape\": [4], \"dtype\": \"int32\", \"preprocs\": [{\"in_shape\":"
      " [12]}], \"dim\": 0, \"segs\": [2, 1, 1], \"kv_replicas\": 2,"
      " \"ranks\": [{\"rank\": 0, \"nbytes\": 16, \"xxh3\": "
      "\"0000000000000001\"}, {\"rank\": 1, \"nbytes\": 16, \"xxh3\": "
      "\"0000000000000002\"}, {\"rank\": 2, \"nbytes\": 16, \"xxh3\": "
      "\"0000000000000003\"}, {\"rank\": 3, \"nbytes\": 16, \"xxh3\": "
      "\"0000000000000004\"}]}]}";
  REQUIRE(tpl__si_parse(doc, strlen(doc), "s", &si, &err) == 0);
  CHECK_EQ_U64(si->params[0].spec.segs[0], 8);
  CHECK_EQ_U64(si->params[0].spec.segs[1], 2);
  CHECK_EQ_U64(si->params[0].spec.segs[2], 2);
  CHECK_EQ_U64(si->params[0].spec.parts[0], 0);
  CHECK_EQ_U64(si->params[0].spec.parts[1], 2);
  CHECK_EQ_U64(si->params[0].spec.parts[2], 2);
  tpl__si_free(si);
}

static void test_si_no_grid(void) {
  refused("\"tensor_parallel_shards\": 2", "\"tp\": 2",
          "tensor_parallel_shards");
}

static void test_si_grid_too_big(void) {
  refused("\"data_parallel_replicas\": 1", "\"data_parallel_replicas\": 4000",
          "4096 ranks");
}

static void test_si_no_params(void) {
  refused("\"params\": [", "\"params\": [], \"x\": [", "\"params\"");
}

static void test_si_bad_dtype(void) {
  refused("\"dtype\": \"float32\"", "\"dtype\": \"float128\"", "\"dtype\"");
}

static void test_si_name_twice(void) {
  refused("\"name\": \"b\"", "\"name\": \"w\"", "once");
}

static void test_si_segs_not_in_shape(void) {
  refused("\"segs\": [2]", "\"segs\": [3]", "tensor 'w'");
}

static void test_si_shape_not_cut(void) {
  refused("\"in_shape\": [4, 3]", "\"in_shape\": [4, 6]", "in_shape's cut");
}

static void test_si_dim_out_of_range(void) {
  refused("\"dim\": 0", "\"dim\": 2", "\"dim\"");
}

static void test_si_rank_not_its_place(void) {
  refused("\"rank\": 1, \"replica\": 0, \"stage\": 0, \"shard\": 1",
          "\"rank\": 1, \"replica\": 0, \"stage\": 0, \"shard\": 0",
          "(replica, stage, shard)");
}

static void test_si_nbytes(void) {
  refused("\"nbytes\": 24", "\"nbytes\": 25", "\"nbytes\"");
}

static void test_si_xxh3_hex(void) {
  refused("00000000000000a1", "0000000000000z01", "\"xxh3\"");
}

static void test_si_ranks_order(void) {
  refused("{\"rank\": 0, \"nbytes\": 12", "{\"rank\": 1, \"nbytes\": 12",
          "rank order");
}

static void test_si_shard_unheld(void) {
  refused("{\"rank\": 0, \"replica\": 0, \"stage\": 0, \"shard\": 0,"
          " \"nbytes\": 24, \"xxh3\": \"00000000000000a1\"},",
          "", "every shard");
}

/* Two replicas of one shard whose XXH3 differ: both ranks named. */
static void test_si_replicas_disagree(void) {
  struct tpl__error err = {0};
  struct tpl__si *si = NULL;
  const char *doc =
      "{\"tensor_parallel_shards\": 1, \"data_parallel_replicas\": 2,"
      " \"params\": [{\"name\": \"n\", \"shape\": [2], \"dtype\": "
      "\"float16\", \"ranks\": [{\"rank\": 0, \"replica\": 0, \"shard\": 0,"
      " \"nbytes\": 4, \"xxh3\": \"0000000000000001\"}, {\"rank\": 1,"
      " \"replica\": 1, \"shard\": 0, \"nbytes\": 4, \"xxh3\": "
      "\"0000000000000002\"}]}]}";
  CHECK_EQ_INT(tpl__si_parse(doc, strlen(doc), "s", &si, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "replicas disagree: rank 0's");
  CHECK_STR_CONTAINS(err.msg, "rank 1's");
}

/* The job's "fingerprint" is kept as written; absent (an older
 * output) it is "". */
static void test_si_fingerprint(void) {
  struct tpl__error err = {0};
  struct tpl__si *si = NULL;
  char *doc = edited("\"params\": [",
                     "\"fingerprint\": \"0123456789abcdef\", \"params\": [");
  REQUIRE(doc != NULL);
  REQUIRE(tpl__si_parse(doc, strlen(doc), "s", &si, &err) == 0);
  CHECK_STR_EQ(si->fingerprint, "0123456789abcdef");
  tpl__si_free(si);
  si = NULL;
  REQUIRE(tpl__si_parse(valid, strlen(valid), "s", &si, &err) == 0);
  CHECK_STR_EQ(si->fingerprint, "");
  tpl__si_free(si);
  free(doc);
}

static void test_si_fingerprint_hex(void) {
  refused("\"params\": [", "\"fingerprint\": \"0123\", \"params\": [",
          "\"fingerprint\"");
  refused("\"params\": [", "\"fingerprint\": 12, \"params\": [",
          "\"fingerprint\"");
}

static void test_si_bad_bias(void) {
  refused("\"bias\": \"scale\"", "\"bias\": \"half\"", "bias policy");
}

/* bias / 2 in f32 times 2 is the bias, exactly; bf16 bias / 3 times 3 is
 * within one bf16 ulp of it. */
static void test_unscale_bias(void) {
  float v[3] = {0.75f / 2, -1.5f / 2, 3.0f / 2};
  uint16_t h = 0x3f80 /* 1.0 */, third;
  float back;
  CHECK_EQ_INT(tpl__unscale_bias(v, sizeof(v), TPL_DT_F32, 2), 0);
  CHECK(v[0] == 0.75f && v[1] == -1.5f && v[2] == 3.0f);
  third = h;
  CHECK_EQ_INT(tpl__scale_bias(&third, 2, TPL_DT_BF16, 3), 0);
  CHECK_EQ_INT(tpl__unscale_bias(&third, 2, TPL_DT_BF16, 3), 0);
  CHECK(third == h || third == h - 1 || third == h + 1);
  memcpy(&back, &(uint32_t){(uint32_t)third << 16}, 4);
  CHECK(back > 0.99f && back < 1.01f);
  CHECK_EQ_INT(tpl__unscale_bias(v, 4, TPL_DT_I32, 2), TPL_EDTYPE);
}

/* The bound the report states: a bias held as bias / N (rounded to its
 * dtype) and rebuilt times N is within one unit of its last place, for
 * N not a power of two: every positive bf16 from 2^-122 and every
 * positive f16 from 2^-10 (where bias / N is still a normal number) up
 * to where bias x N would overflow. */
/* Units in the last place between half-float `v` and v / n * n. */
static int ulps_back(int dtype, uint16_t v, uint32_t n) {
  uint16_t x = v;
  tpl__scale_bias(&x, 2, dtype, n);
  tpl__unscale_bias(&x, 2, dtype, n);
  return abs((int)x - (int)v);
}

static void test_unscale_within_ulp(void) {
  static const uint32_t ns[] = {3, 5, 6, 7, 12};
  int worst = 0, u;
  for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
    for (uint32_t bits = 0x0280; bits < 0x7b00; bits++) {
      u = ulps_back(TPL_DT_BF16, (uint16_t)bits, ns[k]);
      if (u > worst) worst = u;
      u = bits >= 0x1400 ? ulps_back(TPL_DT_F16, (uint16_t)bits, ns[k]) : 0;
      if (u > worst) worst = u;
    }
  CHECK_EQ_INT(worst, 1);
}

int main(void) {
  RUN(test_scatter_segs);
  RUN(test_scatter_gqa);
  RUN(test_scatter_dim1);
  RUN(test_scatter_middle_dim);
  RUN(test_scatter_three_ranks);
  RUN(test_scatter_kv_replicated);
  RUN(test_scatter_one_kv_head);
  RUN(test_si_valid);
  RUN(test_si_kv_suffix);
  RUN(test_si_no_grid);
  RUN(test_si_grid_too_big);
  RUN(test_si_no_params);
  RUN(test_si_bad_dtype);
  RUN(test_si_name_twice);
  RUN(test_si_segs_not_in_shape);
  RUN(test_si_shape_not_cut);
  RUN(test_si_dim_out_of_range);
  RUN(test_si_rank_not_its_place);
  RUN(test_si_nbytes);
  RUN(test_si_xxh3_hex);
  RUN(test_si_ranks_order);
  RUN(test_si_shard_unheld);
  RUN(test_si_replicas_disagree);
  RUN(test_si_fingerprint);
  RUN(test_si_fingerprint_hex);
  RUN(test_si_bad_bias);
  RUN(test_unscale_bias);
  RUN(test_unscale_within_ulp);
  return tap_done();
}
