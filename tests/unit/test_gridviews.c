/* test_gridviews.c - what users see of a TP x PP x DP grid, on jobs built
 * by hand (no MPI): shard-info.json's per-param "pipeline_stages" and
 * per-rank (replica, stage, shard) entries for TP2 x PP2 x DP2 and
 * TP1 x PP4, checked against lists written from MLC LLM's source; the
 * rank reports' grid coordinates; and rank 0's check that every replica
 * holds the same bytes as replica 0 (agreeing, and one checksum off).
 *
 * The model is llama-like with L = 4 decoder layers, u8 tensors:
 * model.embed_tokens.weight [4, 2] and lm_head.weight [4, 2] cut dim 0,
 * model.layers.<i>.w [4] cut dim 0, model.norm.weight [2] replicated. */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "report.h"
#include "shardinfo.h"
#include "tap.h"
#include "topology.h"

#define NT 7
#define LAYERS 4

static const char *const names[NT] = {"model.embed_tokens.weight",
                                      "model.layers.0.w",
                                      "model.layers.1.w",
                                      "model.layers.2.w",
                                      "model.layers.3.w",
                                      "model.norm.weight",
                                      "lm_head.weight"};

static struct tpl__job_tensor tensors[NT];
static struct tpl__job job;

static void make_tensor(struct tpl__job_tensor *t, const char *name) {
  int is_layer = strncmp(name, "model.layers.", 13) == 0;
  int is_norm = strcmp(name, "model.norm.weight") == 0;
  memset(t, 0, sizeof(*t));
  t->name = (char *)name;
  t->dtype = TPL_DT_U8;
  t->ndim = is_layer || is_norm ? 1 : 2;
  t->shape[0] = is_norm ? 2 : 4;
  t->shape[1] = 2;
  t->kind = is_norm ? TPL_RULE_REPLICATE : TPL_RULE_SHARD;
  t->func_name = is_norm ? NULL : "_shard_0";
}

/* The job of the model on a tp x pp x dp grid, stages from topology.c,
 * placed for stage 0. */
static void make_job(uint32_t tp, uint32_t pp, uint32_t dp) {
  memset(&job, 0, sizeof(job));
  if (tpl__grid_make(tp * pp * dp, tp, pp, NULL, &job.grid) != 0) abort();
  for (size_t i = 0; i < NT; i++) {
    make_tensor(&tensors[i], names[i]);
    if (tpl__tensor_stages(names[i], LAYERS, 0, pp, 0, NULL,
                           &tensors[i].stages) != 0)
      abort();
  }
  job.bias_family = TPL_BIASF_MLC;
  job.model = "M";
  job.plan_source = "plan.json";
  job.tensors = tensors;
  job.ntensors = NT;
  if (tpl__job_finish(&job, NULL) != 0) abort();
}

static json_t *param(json_t *info, size_t i) {
  return json_array_get(json_object_get(info, "params"), i);
}

static int compact_is(const json_t *v, const char *want) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  int same = s != NULL && strcmp(s, want) == 0;
  if (!same) printf("# got %s, expected %s\n", s ? s : "(null)", want);
  free(s);
  return same;
}

/* A param's "ranks" as "rank(d,p,t) ..." */
static int holders_are(const json_t *p, const char *want) {
  const json_t *ranks = json_object_get(p, "ranks");
  char got[256] = "";
  size_t n = 0;
  for (size_t k = 0; k < json_array_size(ranks); k++) {
    const json_t *e = json_array_get(ranks, k);
    n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%lld(%lld,%lld,%lld)",
                          k ? " " : "",
                          json_integer_value(json_object_get(e, "rank")),
                          json_integer_value(json_object_get(e, "replica")),
                          json_integer_value(json_object_get(e, "stage")),
                          json_integer_value(json_object_get(e, "shard")));
    if (n >= sizeof(got)) return 0;
  }
  if (strcmp(got, want) != 0) printf("# got '%s', expected '%s'\n", got, want);
  return strcmp(got, want) == 0;
}

/* Rank r's checksum of tensor i in the tests: the same for every replica,
 * as a correct load gives. */
static uint64_t sum_of(size_t i, uint32_t r) {
  return 0x1000 * (i + 1) + r % (job.grid.tp * job.grid.pp);
}

static json_t *shard_info_with_ranks(void) {
  struct tpl__rank_info *ri = calloc(NT * job.grid.world, sizeof(*ri));
  json_t *info = NULL;
  for (size_t i = 0; ri != NULL && i < NT; i++)
    for (uint32_t r = 0; r < job.grid.world; r++)
      ri[i * job.grid.world + r] = (struct tpl__rank_info){
          tpl__job_holds(&job, i, r) ? 2 : 0, sum_of(i, r)};
  if (ri == NULL || tpl__shardinfo_build(&job, ri, &info) != 0) info = NULL;
  free(ri);
  return info;
}

/* MLC's python/mlc_llm/model/llama/llama_model.py, LlamaForCausalLM
 * _set_pp(): layer i -> [i // (L // P)], model.norm.weight -> [P - 1],
 * model.embed_tokens.weight and (untied) lm_head.weight ->
 * list(range(P)); compile.py's _get_param_metadata writes that list as
 * "pipeline_stages" (after list(set(...)), ascending for small ints) and
 * "pipeline_parallel_stages": P beside "tensor_parallel_shards": T. */
static const char *const tp2pp2_stages[NT] = {"[0,1]", "[0]", "[0]",  "[1]",
                                              "[1]",   "[1]", "[0,1]"};
static const char *const tp2pp2dp2_holders[NT] = {
    "0(0,0,0) 1(0,0,1) 2(0,1,0) 3(0,1,1) 4(1,0,0) 5(1,0,1) 6(1,1,0) 7(1,1,1)",
    "0(0,0,0) 1(0,0,1) 4(1,0,0) 5(1,0,1)",
    "0(0,0,0) 1(0,0,1) 4(1,0,0) 5(1,0,1)",
    "2(0,1,0) 3(0,1,1) 6(1,1,0) 7(1,1,1)",
    "2(0,1,0) 3(0,1,1) 6(1,1,0) 7(1,1,1)",
    "2(0,1,0) 3(0,1,1) 6(1,1,0) 7(1,1,1)",
    "0(0,0,0) 1(0,0,1) 2(0,1,0) 3(0,1,1) 4(1,0,0) 5(1,0,1) 6(1,1,0) 7(1,1,1)"};

/* The grid's counts and, per param, its stages and holders. */
static void check_grid_info(json_t *info, const char *const *stages,
                            const char *const *holders) {
  CHECK_EQ_U64(
      json_integer_value(json_object_get(info, "tensor_parallel_shards")),
      job.grid.tp);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(info, "pipeline_parallel_stages")),
      job.grid.pp);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(info, "data_parallel_replicas")),
      job.grid.dp);
  for (size_t i = 0; i < NT; i++) {
    json_t *p = param(info, i);
    CHECK(compact_is(json_object_get(p, "pipeline_stages"), stages[i]));
    CHECK(holders_are(p, holders[i]));
  }
}

static void test_shard_info_tp2_pp2_dp2(void) {
  json_t *info, *p;
  make_job(2, 2, 2);
  info = shard_info_with_ranks();
  REQUIRE(info != NULL);
  check_grid_info(info, tp2pp2_stages, tp2pp2dp2_holders);
  /* sharded T = 2 ways whatever P and D: MLC's preproc names N = T */
  CHECK(compact_is(json_object_get(param(info, 0), "shape"), "[2,2]"));
  CHECK(compact_is(
      json_object_get(
          json_array_get(json_object_get(param(info, 0), "preprocs"), 0),
          "out_shape"),
      "[2,2,2]"));
  /* rank 7 = (1, 1, 1) of layer 3: its own checksum, rank 3's value */
  p = json_array_get(json_object_get(param(info, 4), "ranks"), 3);
  CHECK(compact_is(json_object_get(p, "xxh3"), "\"0000000000005003\""));
  CHECK_EQ_U64(json_integer_value(json_object_get(p, "nbytes")), 2);
  json_decref(info);
}

static const char *const tp1pp4_stages[NT] = {
    "[0,1,2,3]", "[0]", "[1]", "[2]", "[3]", "[3]", "[0,1,2,3]"};
static const char *const tp1pp4_holders[NT] = {
    "0(0,0,0) 1(0,1,0) 2(0,2,0) 3(0,3,0)",
    "0(0,0,0)",
    "1(0,1,0)",
    "2(0,2,0)",
    "3(0,3,0)",
    "3(0,3,0)",
    "0(0,0,0) 1(0,1,0) 2(0,2,0) 3(0,3,0)"};

static void test_shard_info_tp1_pp4(void) {
  json_t *info;
  make_job(1, 4, 1);
  info = shard_info_with_ranks();
  REQUIRE(info != NULL);
  check_grid_info(info, tp1pp4_stages, tp1pp4_holders);
  /* T = 1: no shard preproc, as compile.py (tensor_parallel_shards > 1) */
  for (size_t i = 0; i < NT; i++)
    CHECK(compact_is(json_object_get(param(info, i), "preprocs"), "[]"));
  CHECK(compact_is(json_object_get(param(info, 0), "shape"), "[4,2]"));
  json_decref(info);
}

/* Without per-rank results (tpload plan) there is no "ranks" key, and one
 * stage is MLC's [0] for every param. */
static void test_shard_info_one_stage(void) {
  json_t *info = NULL;
  make_job(2, 1, 1);
  CHECK_EQ_INT(tpl__shardinfo_build(&job, NULL, &info), 0);
  REQUIRE(info != NULL);
  for (size_t i = 0; i < NT; i++) {
    CHECK(
        compact_is(json_object_get(param(info, i), "pipeline_stages"), "[0]"));
    CHECK(json_object_get(param(info, i), "ranks") == NULL);
  }
  json_decref(info);
}

/* Rank r's RankReport, its store holding sum_of(i, r) (or `bad` for
 * tensor `bad_i` when bad != 0). */
static int pack_rank(uint32_t r, size_t bad_i, uint64_t bad, uint8_t **buf,
                     size_t *len) {
  uint64_t sums[NT];
  struct tpl__store store = {.fd = -1, .xxh3 = sums, .ntensors = NT};
  struct tpl__rank_stats st = {.rank = r, .pid = 100 + (int)r};
  for (size_t i = 0; i < NT; i++)
    sums[i] = bad != 0 && i == bad_i ? bad : sum_of(i, r);
  snprintf(st.host, sizeof(st.host), "node");
  if (tpl__job_place(&job, r, NULL) != 0) return -1;
  return tpl__rank_report_pack(&job, &store, &st, buf, len);
}

/* The job's LoadReport from every rank's report; rank `bad_r` reports
 * checksum `bad` for tensor `bad_i` when bad != 0. */
static int load_report(uint32_t bad_r, size_t bad_i, uint64_t bad,
                       uint8_t **buf, size_t *len, struct tpl__error *err) {
  uint32_t n = job.grid.world;
  uint8_t **parts = calloc(n, sizeof(*parts));
  size_t *lens = calloc(n, sizeof(*lens));
  int rc = parts && lens ? 0 : -1;
  for (uint32_t r = 0; rc == 0 && r < n; r++)
    rc = pack_rank(r, bad_i, r == bad_r ? bad : 0, &parts[r], &lens[r]);
  if (rc == 0)
    rc =
        tpl__load_report_pack(&job, parts, lens, 1.0, 100, NULL, buf, len, err);
  for (uint32_t r = 0; parts && r < n; r++)
    free(parts[r]);
  free(parts);
  free(lens);
  return rc;
}

static json_t *rank_json(json_t *o, size_t r) {
  return json_array_get(json_object_get(o, "ranks"), r);
}

static void check_coords(json_t *rk, int d, int p, int t) {
  CHECK_EQ_INT(json_integer_value(json_object_get(rk, "replica")), d);
  CHECK_EQ_INT(json_integer_value(json_object_get(rk, "stage")), p);
  CHECK_EQ_INT(json_integer_value(json_object_get(rk, "shard")), t);
}

/* The job's report decoded and as JSON (without the job's params), or
 * NULLs. */
static json_t *report_json(const uint8_t *buf, size_t len,
                           struct tpl__report **rep) {
  *rep = NULL;
  if (tpl__report_decode(buf, len, rep, NULL) != 0) return NULL;
  return tpl__report_json(*rep, NULL);
}

static void test_report_tp2_dp2_agrees(void) {
  struct tpl__report *rep = NULL;
  struct tpl__error err = {0};
  uint8_t *buf = NULL;
  size_t len = 0;
  char line[200] = "";
  json_t *o;
  make_job(2, 1, 2);
  CHECK_EQ_INT(load_report(0, 0, 0, &buf, &len, NULL), 0);
  REQUIRE(buf != NULL);
  o = report_json(buf, len, &rep);
  REQUIRE(o != NULL);
  CHECK_EQ_U64(json_integer_value(json_object_get(o, "tensor_parallel_shards")),
               2);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(o, "pipeline_parallel_stages")), 1);
  CHECK_EQ_U64(json_integer_value(json_object_get(o, "data_parallel_replicas")),
               2);
  CHECK(json_is_true(json_object_get(o, "replicas_agree")));
  check_coords(rank_json(o, 0), 0, 0, 0);
  check_coords(rank_json(o, 3), 1, 0, 1);
  tpl__report_grid_line(rep, line, sizeof(line));
  json_decref(o);
  tpl__report_free(rep);
  CHECK_STR_CONTAINS(line, "grid: tp 2 x pp 1 x dp 2, rank = (d*1 + p)*2 + t");
  CHECK_STR_CONTAINS(line, "replicas agree: yes");
  /* a report cut short does not decode */
  CHECK_EQ_INT(tpl__report_decode(buf, 3, &rep, &err), TPL_EPEER);
  free(buf);
}

static void test_report_replica_disagrees(void) {
  uint8_t *buf = NULL;
  size_t len = 0;
  struct tpl__error err = {0};
  make_job(2, 1, 2);
  /* rank 3 = (1, 0, 1) against replica 0's rank 1 */
  CHECK_EQ_INT(load_report(3, 5, 0xbad, &buf, &len, &err), TPL_EMISMATCH);
  CHECK(buf == NULL);
  CHECK_STR_CONTAINS(err.msg, "rank 3 (d 1, p 0, t 1)");
  CHECK_STR_CONTAINS(err.msg, "'model.norm.weight'");
  CHECK_STR_CONTAINS(err.msg, "0000000000000bad");
  CHECK_STR_CONTAINS(err.msg, "replica 0's rank 1");
  free(buf);
}

/* TP1 x PP2 x DP2: a rank reports only its stage's tensors. */
static void test_report_stages(void) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  json_t *o, *r1;
  struct tpl__error err = {0};
  char line[200] = "";
  make_job(1, 2, 2);
  CHECK_EQ_INT(load_report(0, 0, 0, &buf, &len, NULL), 0);
  REQUIRE(buf != NULL);
  o = report_json(buf, len, &rep);
  REQUIRE(o != NULL);
  r1 = rank_json(o, 1);
  check_coords(r1, 0, 1, 0);
  check_coords(rank_json(o, 2), 1, 0, 0);
  /* stage 1 of 4 layers over 2: embed, layers 2 and 3, norm, lm_head */
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "tensor_count")), 5);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "bytes")),
               8 + 4 + 4 + 2 + 8);
  /* rank 1 holds layer 2, not layer 0: the arrays index the job */
  CHECK(strcmp(job.tensors[3].name, "model.layers.2.w") == 0);
  CHECK_EQ_U64(rep->infos[3 * 4 + 1].nbytes, 4);
  CHECK_EQ_U64(rep->infos[3 * 4 + 1].xxh3, sum_of(3, 1));
  CHECK_EQ_U64(rep->infos[1 * 4 + 1].nbytes, 0);
  CHECK_EQ_U64(rep->infos[1 * 4 + 1].xxh3, 0);
  tpl__report_grid_line(rep, line, sizeof(line));
  json_decref(o);
  tpl__report_free(rep);
  CHECK_STR_CONTAINS(line, "grid: tp 1 x pp 2 x dp 2, rank = (d*2 + p)*1 + t; "
                           "replicas agree: yes");
  free(buf);
  buf = NULL;
  /* rank 3 = (1, 1, 0) off on layer 3 */
  CHECK_EQ_INT(load_report(3, 4, 0xbad, &buf, &len, &err), TPL_EMISMATCH);
  CHECK_STR_CONTAINS(err.msg, "rank 3 (d 1, p 1, t 0)");
  CHECK_STR_CONTAINS(err.msg, "'model.layers.3.w'");
  free(buf);
}

int main(void) {
  RUN(test_shard_info_tp2_pp2_dp2);
  RUN(test_shard_info_tp1_pp4);
  RUN(test_shard_info_one_stage);
  RUN(test_report_tp2_dp2_agrees);
  RUN(test_report_replica_disagrees);
  RUN(test_report_stages);
  return tap_done();
}
