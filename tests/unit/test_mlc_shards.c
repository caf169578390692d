/* test_mlc_shards.c - an MLC presharded cache's record names parsed and
 * grouped (src/mlc_shards.c), one case per rule.  The names are MLC's:
 * its converter writes worker k's piece of a param with a shard preproc
 * as "<name>_shard-<k>" and every other param as "<name>", a quantized
 * param's q_weight and q_scale each so (mlc-ai/mlc-llm
 * python/mlc_llm/support/preshard.py: _sharded_param_name,
 * _update_quantize_map).  Then the cut the cache does not record, from
 * the plan: MLC's full shape is the shard's with the cut dim times N
 * (preshard.py, _create_shard_func), a q4f16_1 q_weight and q_scale cut
 * along their weight's dim (src/mlc_cut.c); the shapes below are
 * worked by hand from that rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dtype.h"
#include "mlc_cut.h"
#include "mlc_shards.h"
#include "plan.h"
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

/* Grouping the records t[0 .. n) is refused (65) with `want` in the
 * message, and leaves no group. */
static void group_refused(const struct tpl__tensor *t, size_t n,
                          const char *want) {
  struct tpl__mlc_groups g;
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__mlc_group(t, n, "cache.json", &g, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, want);
  CHECK_EQ_U64(g.ngroups, 0);
}

/* N is the cache's: a param with shards 0 and 1 where another has 0..2
 * misses its "_shard-2". */
static void test_group_missing(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-1", "b_shard-0",
                                      "b_shard-1", "b_shard-2"};
  struct tpl__tensor t[5];
  records(t, names, 5);
  group_refused(t, 5, "cache.json: tensor 'a_shard-2': missing");
}

/* A hole in the middle: shard 1 of 3. */
static void test_group_hole(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-2"};
  struct tpl__tensor t[2];
  records(t, names, 2);
  group_refused(t, 2, "tensor 'a_shard-1': missing");
}

/* k = 2^31 - 1 makes N 2^31: refused for the shards it lacks, without
 * a table of N (fuzz_mlc_shards found calloc(2^31, 8) here). */
static void test_group_huge_k(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-1", "c",
                                      "d_shard-2147483647"};
  struct tpl__tensor t[4];
  records(t, names, 4);
  group_refused(t, 4, "tensor 'a_shard-2': missing: the cache has 2147483648");
}

static void test_group_unequal_shape(void) {
  static const char *const names[] = {"a_shard-0", "a_shard-1"};
  struct tpl__tensor t[2];
  records(t, names, 2);
  t[1].shape[1] = 9;
  group_refused(t, 2,
                "tensor 'a_shard-1': expected the dtype and shape of "
                "'a_shard-0'");
}

static void test_group_unequal_dtype(void) {
  static const char *const names[] = {"a_shard-1", "a_shard-0"};
  struct tpl__tensor t[2];
  records(t, names, 2);
  t[0].dtype = TPL_DT_BF16;
  group_refused(t, 2, "tensor 'a_shard-1'");
}

/* "a" and "a_shard-0" both: which is the param? */
static void test_group_both(void) {
  static const char *const names[] = {"a_shard-0", "a"};
  struct tpl__tensor t[2];
  records(t, names, 2);
  group_refused(t, 2, "tensor 'a': expected either one record 'a'");
}

/* --- the cut, from the plan --- */

#define QKVW "l.qkv_proj.q_weight"
#define QKVS "l.qkv_proj.q_scale"
#define OW "l.o_proj.q_weight"
#define OS "l.o_proj.q_scale"

/* A q4f16_1 plan: qkv cut along its rows as q 8, k 4, v 4; o_proj along
 * its input. */
static struct tpl__plan *q4_plan(void) {
  struct tpl__plan *p = tpl__plan_new("test plan");
  struct tpl__shard_spec qkv = {.dim = 0, .nsegs = 3, .segs = {8, 4, 4}};
  struct tpl__shard_spec o = {.dim = 1};
  if (p == NULL) return NULL;
  CHECK(tpl__plan_add_rule(p, "*.qkv_proj.weight", TPL_RULE_SHARD, NULL,
                           &qkv) == 0);
  CHECK(tpl__plan_add_rule(p, "*.o_proj.weight", TPL_RULE_SHARD, NULL, &o) ==
        0);
  p->quant.scheme = tpl__quant_find("q4f16_1");
  return p;
}

/* A record of the cache model. */
static void add_rec(struct tpl__model *m, const char *name, int dtype,
                    uint64_t d0, uint64_t d1, int ndim) {
  struct tpl__tensor t = {.dtype = dtype, .ndim = ndim, .shape = {d0, d1}};
  t.nbytes = d0 * (ndim > 1 ? d1 : 1) * tpl__dtype_size(dtype);
  t.name = strdup(name);
  REQUIRE(t.name != NULL && tpl__model_add_tensor(m, &t) == 0);
}

/* The q4f16_1 records of one layer at N = 2: a qkv of 16 rows and 64
 * inputs (q_weight [16, 8] u32, q_scale [16, 2]), an o_proj of 64 x 64
 * (q_weight [64, 8], q_scale [64, 2]), a norm of 64 held whole. */
static struct tpl__model *q4_cache(int norm_cut) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, "/nonexistent");
  if (m == NULL) return NULL;
  for (int k = 0; k < 2; k++) {
    char n[64];
    snprintf(n, sizeof(n), QKVW "_shard-%d", k);
    add_rec(m, n, TPL_DT_U32, 8, 8, 2);
    snprintf(n, sizeof(n), QKVS "_shard-%d", k);
    add_rec(m, n, TPL_DT_F16, 8, 2, 2);
    snprintf(n, sizeof(n), OW "_shard-%d", k);
    add_rec(m, n, TPL_DT_U32, 64, 4, 2);
    snprintf(n, sizeof(n), OS "_shard-%d", k);
    add_rec(m, n, TPL_DT_F16, 64, 1, 2);
    snprintf(n, sizeof(n), "l.norm.weight_shard-%d", k);
    if (norm_cut || k == 0)
      add_rec(m, norm_cut ? n : "l.norm.weight", TPL_DT_F16, 64, 0, 1);
  }
  return m;
}

static void check_param(const struct tpl__si_param *q, const char *name,
                        uint64_t d0, uint64_t d1, int kind, int dim) {
  CHECK(strcmp(q->name, name) == 0);
  CHECK_EQ_U64(q->shape[0], d0);
  CHECK_EQ_U64(q->shape[1], d1);
  CHECK_EQ_INT(q->kind, kind);
  if (kind == TPL_SI_CUT) CHECK_EQ_INT(q->spec.dim, dim);
  CHECK_EQ_U64(q->nholders, kind == TPL_SI_CUT ? 2 : 1);
}

static int cut(struct tpl__model *m, struct tpl__plan *p, struct tpl__si **si,
               struct tpl__error *err) {
  struct tpl__mlc_groups g;
  int rc = tpl__mlc_group(m->tensors, m->ntensors, "c", &g, err);
  if (rc == 0) rc = tpl__mlc_cut(p, m, &g, "c", si, err);
  tpl__mlc_groups_free(&g);
  return rc;
}

static void test_cut_q4f16_1(void) {
  struct tpl__plan *p = q4_plan();
  struct tpl__model *m = q4_cache(0);
  struct tpl__si *si = NULL;
  struct tpl__error err = {0};
  REQUIRE(p != NULL && m != NULL);
  REQUIRE(cut(m, p, &si, &err) == 0);
  CHECK_EQ_U64(si->tp, 2);
  REQUIRE(si->nparams == 5);
  check_param(&si->params[0], QKVW, 16, 8, TPL_SI_CUT, 0);
  CHECK_EQ_U64(si->params[0].spec.nsegs, 3);
  CHECK_EQ_U64(si->params[0].spec.segs[0], 8);
  check_param(&si->params[1], QKVS, 16, 2, TPL_SI_CUT, 0);
  check_param(&si->params[2], OW, 64, 8, TPL_SI_CUT, 1);
  check_param(&si->params[3], OS, 64, 2, TPL_SI_CUT, 1);
  CHECK(strcmp(si->params[4].name, "l.norm.weight") == 0);
  CHECK_EQ_U64(si->params[4].shape[0], 64);
  CHECK_EQ_INT(si->params[4].kind, TPL_SI_WHOLE);
  CHECK_EQ_U64(si->params[2].holders[1].shard, 1);
  CHECK_EQ_U64(si->params[2].holders[1].nbytes, 64 * 4 * 4);
  tpl__si_free(si);
  tpl__model_free(m);
  tpl__plan_free(p);
}

/* Shards of a param the plan does not cut. */
static void test_cut_unplanned(void) {
  struct tpl__plan *p = q4_plan();
  struct tpl__model *m = q4_cache(1);
  struct tpl__si *si = NULL;
  struct tpl__error err = {0};
  CHECK_EQ_INT(cut(m, p, &si, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'l.norm.weight_shard-0': the cache "
                              "holds it cut in 2 shards, test plan cuts it");
  tpl__model_free(m);
  tpl__plan_free(p);
}

/* A param the plan cuts held whole. */
static void test_cut_whole(void) {
  struct tpl__plan *p = q4_plan();
  struct tpl__model *m = q4_cache(0);
  struct tpl__si *si = NULL;
  struct tpl__error err = {0};
  add_rec(m, "l2.o_proj.q_scale", TPL_DT_F16, 64, 2, 2);
  CHECK_EQ_INT(cut(m, p, &si, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "tensor 'l2.o_proj.q_scale': the cache holds "
                              "it whole, test plan cuts it at 2 shards");
  tpl__model_free(m);
  tpl__plan_free(p);
}

int main(void) {
  RUN(test_name_parse);
  RUN(test_name_not_shard);
  RUN(test_group_order);
  RUN(test_group_plain);
  RUN(test_group_missing);
  RUN(test_group_hole);
  RUN(test_group_huge_k);
  RUN(test_group_unequal_shape);
  RUN(test_group_unequal_dtype);
  RUN(test_group_both);
  RUN(test_cut_q4f16_1);
  RUN(test_cut_unplanned);
  RUN(test_cut_whole);
  return tap_done();
}
