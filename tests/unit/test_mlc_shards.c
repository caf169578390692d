/* test_mlc_shards.c - an MLC presharded cache's record names parsed and
 * grouped (src/mlc_shards.c), one case per rule.  The names are MLC's:
 * its converter writes worker k's piece of a param with a shard preproc
 * as "<name>_shard-<k>" and every other param as "<name>", a quantized
 * param's q_weight and q_scale each so (mlc-ai/mlc-llm
 * python/mlc_llm/support/preshard.py: _sharded_param_name,
 * _update_quantize_map). */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dtype.h"
#include "mlc_shards.h"
#include "tap.h"

#define QKV "model.layers.0.self_attn.qkv_proj.q_weight"
#define NORM "model.layers.0.input_layernorm.weight"

/* `n` records named `names`, each F16 [4, 8] unless changed after. */
static void records(struct tpl__tensor *t, const char *const *names, size_t n) {
  memset(t, 0, n * sizeof(*t));
  for (size_t i = 0; i < n; i++) {
    t[i].name = (char *)names[i];
    t[i].dtype = TPL_DT_F16;
    t[i].ndim = 2;
    t[i].shape[0] = 4;
    t[i].shape[1] = 8;
  }
}

static void test_name_parse(void) {
  size_t len = 0;
  uint32_t k = 0;
  CHECK(tpl__mlc_shard_name(QKV "_shard-0", &len, &k));
  CHECK_EQ_U64(len, strlen(QKV));
  CHECK_EQ_U64(k, 0);
  CHECK(tpl__mlc_shard_name("w_shard-12", &len, &k));
  CHECK_EQ_U64(len, 1);
  CHECK_EQ_U64(k, 12);
}

static void test_name_not_shard(void) {
  size_t len = 7;
  uint32_t k = 9;
  CHECK(!tpl__mlc_shard_name(NORM, &len, &k));
  CHECK(!tpl__mlc_shard_name("w_shard-", &len, &k));   /* no digits */
  CHECK(!tpl__mlc_shard_name("_shard-1", &len, &k));   /* no base */
  CHECK(!tpl__mlc_shard_name("w_shard-01", &len, &k)); /* leading 0 */
  CHECK(!tpl__mlc_shard_name("w_shard_1", &len, &k));  /* not the tag */
  CHECK(!tpl__mlc_shard_name("w_shard-1x", &len, &k)); /* not digits */
  CHECK(!tpl__mlc_shard_name("w_shard-4294967296", &len, &k));
  CHECK_EQ_U64(len, 7);
  CHECK_EQ_U64(k, 9);
}

/* Shards out of order and a plain record between them: the param takes
 * its first record's place, its records in shard order, N = 3. */
static void test_group_order(void) {
  static const char *const names[] = {"embed", QKV "_shard-2", NORM,
                                      QKV "_shard-0", QKV "_shard-1"};
  struct tpl__tensor t[5];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 5);
  REQUIRE(tpl__mlc_group(t, 5, "c", &g, &err) == 0);
  CHECK_EQ_U64(g.shards, 3);
  REQUIRE(g.ngroups == 3);
  CHECK(strcmp(g.groups[0].name, "embed") == 0 && !g.groups[0].cut);
  CHECK_EQ_U64(g.groups[0].nrecords, 1);
  CHECK(strcmp(g.groups[1].name, QKV) == 0 && g.groups[1].cut);
  REQUIRE(g.groups[1].nrecords == 3);
  CHECK_EQ_U64(g.groups[1].records[0], 3);
  CHECK_EQ_U64(g.groups[1].records[1], 4);
  CHECK_EQ_U64(g.groups[1].records[2], 1);
  CHECK(strcmp(g.groups[2].name, NORM) == 0 && !g.groups[2].cut);
  CHECK_EQ_U64(g.groups[2].records[0], 2);
  tpl__mlc_groups_free(&g);
}

/* A cache of full tensors only: no shards. */
static void test_group_plain(void) {
  static const char *const names[] = {"embed", NORM};
  struct tpl__tensor t[2];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 2);
  REQUIRE(tpl__mlc_group(t, 2, "c", &g, &err) == 0);
  CHECK_EQ_U64(g.shards, 0);
  CHECK_EQ_U64(g.ngroups, 2);
  tpl__mlc_groups_free(&g);
}

/* N is the cache's: a param with shards 0 and 1 where another has 0..2
 * misses its "_shard-2". */
static void test_group_missing(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-1", "b_shard-0",
                                      "b_shard-1", "b_shard-2"};
  struct tpl__tensor t[5];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 5);
  CHECK_EQ_INT(tpl__mlc_group(t, 5, "cache.json", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "cache.json: tensor 'a_shard-2': missing");
  CHECK_EQ_U64(g.ngroups, 0);
}

/* A hole in the middle: shard 1 of 3. */
static void test_group_hole(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-2"};
  struct tpl__tensor t[2];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 2);
  CHECK_EQ_INT(tpl__mlc_group(t, 2, "c", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'a_shard-1': missing");
}

static void test_group_unequal_shape(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-1"};
  struct tpl__tensor t[2];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 2);
  t[1].shape[1] = 9;
  CHECK_EQ_INT(tpl__mlc_group(t, 2, "c", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'a_shard-1': expected the dtype and "
                              "shape of 'a_shard-0'");
}

static void test_group_unequal_dtype(void) {
  static const char *const names[] = {"a_shard-1", "a_shard-0"};
  struct tpl__tensor t[2];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 2);
  t[0].dtype = TPL_DT_BF16;
  CHECK_EQ_INT(tpl__mlc_group(t, 2, "c", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'a_shard-1'");
}

/* "a" and "a_shard-0" both: which is the param? */
static void test_group_both(void) {
  static const char *const names[] = {"a_shard-0", "a"};
  struct tpl__tensor t[2];
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  records(t, names, 2);
  CHECK_EQ_INT(tpl__mlc_group(t, 2, "c", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'a': expected either one record 'a'");
}

int main(void) {
  RUN(test_name_parse);
  RUN(test_name_not_shard);
  RUN(test_group_order);
  RUN(test_group_plain);
  RUN(test_group_missing);
  RUN(test_group_hole);
  RUN(test_group_unequal_shape);
  RUN(test_group_unequal_dtype);
  RUN(test_group_both);
  return tap_done();
}
