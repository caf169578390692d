/* test_topology.c - the grid (src/topology.c): refusals of worlds the grid
 * does not divide, the rank numbering rank = (d * P + p) * T + t against
 * tables written from that formula for TP2xDP2, TP2xPP2, TP2xPP2xDP2 and
 * TP1xPP4, round trips over many grids, and pipeline stages against tables
 * written from MLC LLM's source: mlc-ai/mlc-llm
 * python/mlc_llm/model/llama/llama_model.py (LlamaConfig.__post_init__
 * refuses P <= 0 or P > L; LlamaForCausalLM._set_pp gives layer i the
 * stage i // (L // P), model.norm.weight [P - 1], embed_tokens and untied
 * lm_head every stage) and python/mlc_llm/interface/compile.py
 * (_apply_preproc_to_params_and_check_pipeline: [0] for all when P == 1,
 * an error for a param without stages when P != 1).  The chains' node
 * order (tpl__node_order) against tables written by hand from each
 * rank's host: block, round-robin (mpirun --map-by node) and uneven
 * placements, grouped by shard, and its refusals. */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "tap.h"
#include "topology.h"

static struct tpl__grid grid(uint32_t n, uint32_t t, uint32_t p) {
  struct tpl__grid g = {0};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__grid_make(n, t, p, &err, &g), 0);
  return g;
}

/* want[r] = {d, p, t} of rank r, written by hand from the formula. */
static void check_table(uint32_t n, uint32_t t, uint32_t p,
                        const uint32_t (*want)[3]) {
  struct tpl__grid g = grid(n, t, p);
  REQUIRE(g.world == n);
  for (uint32_t r = 0; r < n; r++) {
    struct tpl__pos c = tpl__grid_coord(&g, r);
    CHECK_EQ_U64(c.d, want[r][0]);
    CHECK_EQ_U64(c.p, want[r][1]);
    CHECK_EQ_U64(c.t, want[r][2]);
  }
}

static void test_grid_fields(void) {
  struct tpl__grid g = grid(8, 2, 2);
  CHECK_EQ_U64(g.world, 8);
  CHECK_EQ_U64(g.tp, 2);
  CHECK_EQ_U64(g.pp, 2);
  CHECK_EQ_U64(g.dp, 2);
  g = grid(6, 6, 1);
  CHECK_EQ_U64(g.dp, 1);
  g = grid(1, 1, 1);
  CHECK_EQ_U64(g.dp, 1);
  g = grid(12, 1, 3);
  CHECK_EQ_U64(g.dp, 4);
}

static void test_table_tp2_dp2(void) {
  static const uint32_t want[][3] = {
      {0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}};
  check_table(4, 2, 1, want);
}

static void test_table_tp2_pp2(void) {
  static const uint32_t want[][3] = {
      {0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}};
  check_table(4, 2, 2, want);
}

static void test_table_tp2_pp2_dp2(void) {
  static const uint32_t want[][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0},
                                     {0, 1, 1}, {1, 0, 0}, {1, 0, 1},
                                     {1, 1, 0}, {1, 1, 1}};
  check_table(8, 2, 2, want);
}

static void test_table_tp1_pp4(void) {
  static const uint32_t want[][3] = {
      {0, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}};
  check_table(4, 1, 4, want);
}

/* Today's world (one TP group) keeps rank == shard. */
static void test_tp_only_is_identity(void) {
  struct tpl__grid g = grid(5, 5, 1);
  for (uint32_t r = 0; r < 5; r++) {
    struct tpl__pos c = tpl__grid_coord(&g, r);
    CHECK_EQ_U64(c.t, r);
    CHECK_EQ_U64(c.p, 0);
    CHECK_EQ_U64(c.d, 0);
  }
}

/* The ranks of many grids, in order, visit every coordinate once, with t
 * fastest, then p, then d. */
static void test_round_trips(void) {
  static const uint32_t grids[][3] = {{1, 1, 1}, {2, 1, 3}, {3, 2, 2},
                                      {4, 4, 1}, {1, 5, 2}, {8, 2, 3},
                                      {2, 8, 4}, {7, 3, 5}};
  for (size_t i = 0; i < ARRAY_SIZE(grids); i++) {
    uint32_t t = grids[i][0], p = grids[i][1], d = grids[i][2];
    struct tpl__grid g = grid(t * p * d, t, p);
    CHECK_EQ_U64(g.dp, d);
    uint32_t next = 0;
    for (uint32_t cd = 0; cd < d; cd++)
      for (uint32_t cp = 0; cp < p; cp++)
        for (uint32_t ct = 0; ct < t; ct++) {
          struct tpl__pos b = tpl__grid_coord(&g, next);
          CHECK(b.d == cd && b.p == cp && b.t == ct);
          next++;
        }
    CHECK_EQ_U64(next, g.world);
  }
}

static void check_grid_refused(uint32_t n, uint32_t t, uint32_t p,
                               const char *msg) {
  struct tpl__grid g = {.world = 99, .tp = 99, .pp = 99, .dp = 99};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__grid_make(n, t, p, &err, &g), TPL_EUSAGE);
  CHECK_EQ_INT(err.code, TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, msg);
  CHECK_EQ_U64(g.world, 99); /* untouched on failure */
}

static void test_grid_refusals(void) {
  check_grid_refused(6, 2, 2, "-np 6 is not a multiple of --tp 2 x --pp 2 = 4");
  check_grid_refused(4, 3, 1, "-np 4 is not a multiple of --tp 3 x --pp 1");
  check_grid_refused(2, 2, 2, "-np 2 is not a multiple of --tp 2 x --pp 2");
  check_grid_refused(4, 0, 1, "--tp 0");
  check_grid_refused(4, 1, 0, "--pp 0");
  check_grid_refused(0, 1, 1, "-np 0");
  /* tp * pp beyond 32 bits is computed in 64 and never divides. */
  check_grid_refused(4, 65536, 65536, "= 4294967296");
  CHECK_EQ_INT(tpl__grid_make(4, 1, 1, NULL, &(struct tpl__grid){0}), 0);
  CHECK_EQ_INT(tpl__grid_make(3, 2, 1, NULL, &(struct tpl__grid){0}),
               TPL_EUSAGE);
}

/* --pp alone: the stages share the world (T = N / P, so -np 4 --pp 4 is
 * TP1 x PP4); 1 when P does not divide N; no --pp: T = N. */
static void test_default_tp(void) {
  CHECK_EQ_U64(tpl__grid_default_tp(4, 4), 1);
  CHECK_EQ_U64(tpl__grid_default_tp(8, 2), 4);
  CHECK_EQ_U64(tpl__grid_default_tp(4, 1), 4);
  CHECK_EQ_U64(tpl__grid_default_tp(6, 4), 1);
  CHECK_EQ_U64(tpl__grid_default_tp(4, 0), 1);
}

/* The one stage tpl__tensor_stages gives a tensor of decoder layer i. */
static uint32_t layer_stage(uint32_t layers, uint32_t pp, uint32_t i) {
  char name[64];
  struct tpl__stages s = {99, 99};
  snprintf(name, sizeof(name), "model.layers.%u.mlp.down_proj.weight", i);
  CHECK_EQ_INT(tpl__tensor_stages(name, layers, 0, pp, 0, NULL, &s), 0);
  CHECK_EQ_U64(s.count, 1);
  return s.first;
}

/* L = 32, P = 4: L // P = 8, so layers 0-7, 8-15, 16-23, 24-31. */
static void test_stages_32_over_4(void) {
  CHECK_EQ_INT(tpl__stage_check(32, 4, NULL), 0);
  {
    struct tpl__error e; /* 0 layers: never "expected 1..0" */
    CHECK_EQ_INT(tpl__stage_check(0, 2, &e), TPL_EFORMAT);
    CHECK(strstr(e.msg, "1..0") == NULL);
    CHECK_STR_CONTAINS(e.msg, "no layers");
  }
  for (uint32_t i = 0; i < 32; i++)
    CHECK_EQ_U64(layer_stage(32, 4, i), i < 8    ? 0
                                        : i < 16 ? 1
                                        : i < 24 ? 2
                                                 : 3);
}

/* L = 4, P = 4: one layer per stage; L = 6, P = 1: everything on 0. */
static void test_stages_edges(void) {
  CHECK_EQ_INT(tpl__stage_check(4, 4, NULL), 0);
  for (uint32_t i = 0; i < 4; i++)
    CHECK_EQ_U64(layer_stage(4, 4, i), i);
  CHECK_EQ_INT(tpl__stage_check(6, 1, NULL), 0);
  for (uint32_t i = 0; i < 6; i++)
    CHECK_EQ_U64(layer_stage(6, 1, i), 0);
}

static void check_stage_refused(uint32_t layers, uint32_t pp, const char *msg) {
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__stage_check(layers, pp, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, msg);
}

/* L = 3, P = 4 is refused by LlamaConfig.__post_init__ (P > L).  L = 30,
 * P = 4: _set_pp computes 30 // 4 = 7, so layers 28 and 29 would get stage
 * 28 // 7 = 4 and 29 // 7 = 4, a stage that does not exist (while the
 * compute graph cuts at multiples of ceil(30 / 4) = 8): refused. */
static void test_stage_refusals(void) {
  check_stage_refused(3, 4, "--pp 4: expected 1..3");
  check_stage_refused(32, 0, "--pp 0: expected 1..32");
  check_stage_refused(30, 4, "layers 28..29 on a stage 4");
  check_stage_refused(10, 3, "layers 9..9 on a stage 3");
}

static void check_tensor(const char *name, uint32_t layers, uint32_t pp,
                         int tied, uint32_t first, uint32_t count) {
  struct tpl__stages s = {99, 99};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__tensor_stages(name, layers, 0, pp, tied, &err, &s), 0);
  if (s.first != first || s.count != count) printf("# tensor %s\n", name);
  CHECK_EQ_U64(s.first, first);
  CHECK_EQ_U64(s.count, count);
}

static void check_tensor_refused(const char *name, uint32_t layers, uint32_t pp,
                                 int tied) {
  struct tpl__stages s = {99, 99};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__tensor_stages(name, layers, 0, pp, tied, &err, &s),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, name);
  CHECK_EQ_U64(s.first, 99);
}

static void test_tensor_stages_untied(void) {
  check_tensor("model.layers.0.self_attn.qkv_proj.weight", 32, 4, 0, 0, 1);
  check_tensor("model.layers.7.mlp.down_proj.weight", 32, 4, 0, 0, 1);
  check_tensor("model.layers.8.input_layernorm.weight", 32, 4, 0, 1, 1);
  check_tensor("model.layers.23.mlp.gate_up_proj.weight", 32, 4, 0, 2, 1);
  check_tensor("model.layers.31.self_attn.o_proj.weight", 32, 4, 0, 3, 1);
  check_tensor("model.norm.weight", 32, 4, 0, 3, 1);
  check_tensor("model.embed_tokens.weight", 32, 4, 0, 0, 4);
  check_tensor("lm_head.weight", 32, 4, 0, 0, 4);
}

/* Tied: no lm_head param exists in MLC's model; the embedding is still on
 * every stage. */
static void test_tensor_stages_tied(void) {
  check_tensor("model.embed_tokens.weight", 4, 2, 1, 0, 2);
  check_tensor("model.norm.weight", 4, 2, 1, 1, 1);
  check_tensor("model.layers.1.mlp.down_proj.weight", 4, 2, 1, 0, 1);
  check_tensor("model.layers.2.mlp.down_proj.weight", 4, 2, 1, 1, 1);
  check_tensor_refused("lm_head.weight", 4, 2, 1);
}

/* P == 1: compile.py writes [0] for every param, known or not. */
static void test_tensor_stages_single(void) {
  check_tensor("model.layers.5.mlp.down_proj.weight", 6, 1, 0, 0, 1);
  check_tensor("lm_head.weight", 6, 1, 1, 0, 1);
  check_tensor("transformer.h.0.attn.c_attn.weight", 6, 1, 0, 0, 1);
}

/* P != 1: a param _set_pp does not name fails compile.py's assertion. */
static void test_tensor_stages_refused(void) {
  check_tensor_refused("model.layers.32.mlp.down_proj.weight", 32, 4, 0);
  check_tensor_refused("model.layers.99999999999.mlp.weight", 32, 4, 0);
  check_tensor_refused("transformer.h.0.attn.c_attn.weight", 32, 4, 0);
  check_tensor_refused("model.norm.bias", 32, 4, 0);
  check_tensor_refused("model.layers.x.mlp.weight", 32, 4, 0);
  check_tensor_refused("model.layers.3", 32, 4, 0);
  check_tensor_refused("model.layers.-1.mlp.weight", 32, 4, 0);
  check_tensor_refused("lm_head.q_weight", 32, 4, 0);
}

static void test_stages_has(void) {
  struct tpl__stages s = {.first = 1, .count = 2};
  CHECK(!tpl__stages_has(s, 0));
  CHECK(tpl__stages_has(s, 1));
  CHECK(tpl__stages_has(s, 2));
  CHECK(!tpl__stages_has(s, 3));
}

/* --- the chains' node order --- */

#define MAX_RANKS 16

/* Each rank's node as its first rank, from its host's name: what the
 * engine learns from MPI_COMM_TYPE_SHARED. */
static void first_ranks_of(const char *const *hosts, uint32_t n,
                           uint32_t *node) {
  for (uint32_t r = 0; r < n; r++) {
    node[r] = r;
    for (uint32_t q = 0; q < r && node[r] == r; q++)
      if (strcmp(hosts[q], hosts[r]) == 0) node[r] = q;
  }
}

/* hosts[] of n ranks cut into `stride` groups: want_order as written by
 * hand, and each rank's place in its group read back from it. */
static void check_order(const char *const *hosts, uint32_t n, uint32_t stride,
                        const uint32_t *want_order) {
  uint32_t node[MAX_RANKS], order[MAX_RANKS], place[MAX_RANKS];
  REQUIRE(n <= MAX_RANKS);
  first_ranks_of(hosts, n, node);
  CHECK_EQ_INT(tpl__node_order(node, n, stride, order, place), 0);
  for (uint32_t k = 0; k < n; k++) {
    CHECK_EQ_U64(order[k], want_order[k]);
    CHECK_EQ_U64(place[want_order[k]], k % (n / stride));
  }
}

/* Block placement (3 nodes x 2): node order is rank order. */
static void test_order_block(void) {
  static const char *const h[] = {"a", "a", "b", "b", "c", "c"};
  static const uint32_t all[] = {0, 1, 2, 3, 4, 5};
  static const uint32_t by_t2[] = {0, 2, 4, 1, 3, 5};
  check_order(h, 6, 1, all);
  check_order(h, 6, 2, by_t2);
  check_order(h, 6, 6, all);
}

/* Round-robin, rank r on node r % 3: a node's ranks follow each other,
 * nodes in the order of their first rank. */
static void test_order_round_robin(void) {
  static const char *const h[] = {"a", "b", "c", "a", "b", "c"};
  static const uint32_t all[] = {0, 3, 1, 4, 2, 5};
  /* shard 0: ranks 0 (a), 2 (c), 4 (b); shard 1: 1 (b), 3 (a), 5 (c) */
  static const uint32_t by_t2[] = {0, 4, 2, 3, 1, 5};
  static const uint32_t by_t3[] = {0, 3, 1, 4, 2, 5};
  check_order(h, 6, 1, all);
  check_order(h, 6, 2, by_t2);
  check_order(h, 6, 3, by_t3);
}

/* 4 nodes x 2 round-robin (the cluster), and uneven nodes. */
static void test_order_uneven(void) {
  static const char *const h8[] = {"a", "b", "c", "d", "a", "b", "c", "d"};
  static const uint32_t all8[] = {0, 4, 1, 5, 2, 6, 3, 7};
  static const char *const h6[] = {"a", "b", "a", "a", "c", "b"};
  static const uint32_t all6[] = {0, 2, 3, 1, 5, 4};
  check_order(h8, 8, 1, all8);
  check_order(h6, 6, 1, all6);
}

/* One node, or a node per rank: rank order. */
static void test_order_trivial(void) {
  static const char *const one[] = {"a", "a", "a", "a"};
  static const char *const each[] = {"a", "b", "c", "d"};
  static const uint32_t all[] = {0, 1, 2, 3};
  check_order(one, 4, 1, all);
  check_order(each, 4, 1, all);
  check_order(each, 1, 1, all);
}

static void test_order_refused(void) {
  uint32_t order[6], place[6];
  static const uint32_t ok[] = {0, 1, 2, 0, 1, 2};
  static const uint32_t later[] = {0, 2, 2};   /* rank 1 on rank 2's */
  static const uint32_t chained[] = {0, 0, 1}; /* 1 is not a first rank */
  CHECK_EQ_INT(tpl__node_order(ok, 6, 4, order, place), -EINVAL);
  CHECK_EQ_INT(tpl__node_order(ok, 6, 0, order, place), -EINVAL);
  CHECK_EQ_INT(tpl__node_order(later, 3, 1, order, place), -EINVAL);
  CHECK_EQ_INT(tpl__node_order(chained, 3, 1, order, place), -EINVAL);
}

int main(void) {
  RUN(test_grid_fields);
  RUN(test_table_tp2_dp2);
  RUN(test_table_tp2_pp2);
  RUN(test_table_tp2_pp2_dp2);
  RUN(test_table_tp1_pp4);
  RUN(test_tp_only_is_identity);
  RUN(test_round_trips);
  RUN(test_grid_refusals);
  RUN(test_default_tp);
  RUN(test_stages_32_over_4);
  RUN(test_stages_edges);
  RUN(test_stage_refusals);
  RUN(test_tensor_stages_untied);
  RUN(test_tensor_stages_tied);
  RUN(test_tensor_stages_single);
  RUN(test_tensor_stages_refused);
  RUN(test_stages_has);
  RUN(test_order_block);
  RUN(test_order_round_robin);
  RUN(test_order_uneven);
  RUN(test_order_trivial);
  RUN(test_order_refused);
  return tap_done();
}
