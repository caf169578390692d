/* test_layout.c - the output layout table (layout.c) and its one
 * --layout parser: one case per rule it enforces for `preshard` and
 * `verify`; the messages are the ones cmd_load.c and cmd_verify.c gave
 * before the table existed (issue 35: unchanged word for word). */
#include <string.h>

#include "layout.h"
#include "scope.h"
#include "tap.h"
#include "tmpdir.h"

static const struct tpl__output_layout *sentinel =
    (const struct tpl__output_layout *)&sentinel;

/* Parses `name` for `verb` with MODEL `model` and --ep `ep`: the code;
 * the row in *out (left as the sentinel on a refusal). */
static int parse(const char *name, enum tpl__layout_verb verb,
                 const char *model, int ep,
                 const struct tpl__output_layout **out,
                 struct tpl__error *err) {
  struct tpl__layout_use u = {verb, model, ep, -1};
  memset(err, 0, sizeof(*err));
  *out = sentinel;
  return tpl__layout_parse(name, &u, out, err);
}

/* An MLC weight directory: `cache` is the cache JSON it holds. */
static char *mlc_dir(const char *cache) {
  char *d = make_dir("tpl-layout");
  if (d != NULL) write_bytes(d, cache, "{}", 2);
  return d;
}

static void test_default_is_rank(void) {
  const struct tpl__output_layout *l;
  struct tpl__error err;
  for (int verb = TPL_LAYOUT_WRITE; verb <= TPL_LAYOUT_VERIFY; verb++) {
    REQUIRE(parse(NULL, verb, "/no/such/model", 0, &l, &err) == 0);
    CHECK(strcmp(l->name, "rank") == 0);
    CHECK(l == tpl__layout_at(0));
  }
}

/* rank takes any grid (--ep included) and any MODEL (a URL too). */
static void test_rank_takes_everything(void) {
  static const char *const models[] = {"/no/such/model",
                                       "https://h/m.safetensors"};
  const struct tpl__output_layout *l;
  struct tpl__error err;
  for (size_t i = 0; i < ARRAY_SIZE(models); i++)
    for (int verb = TPL_LAYOUT_WRITE; verb <= TPL_LAYOUT_VERIFY; verb++) {
      REQUIRE(parse("rank", verb, models[i], 1, &l, &err) == 0);
      CHECK(strcmp(l->name, "rank") == 0);
      CHECK(!l->unscaled_bias);
    }
}

static void test_unknown_names(void) {
  static const char *const names[] = {"ranks", "MLC", "", "mlc "};
  const struct tpl__output_layout *l;
  struct tpl__error err;
  char want[128];
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    for (int verb = TPL_LAYOUT_WRITE; verb <= TPL_LAYOUT_VERIFY; verb++) {
      CHECK_EQ_INT(parse(names[i], verb, "/m", 0, &l, &err), TPL_EUSAGE);
      snprintf(want, sizeof(want), "--layout expects rank or mlc, got '%s'",
               names[i]);
      CHECK(strcmp(err.msg, want) == 0);
      CHECK(l == sentinel);
    }
}

/* mlc from an MLC weight directory (either cache JSON's name). */
static void test_mlc_from_mlc_dir(void) {
  static const char *const caches[] = {"tensor-cache.json",
                                       "ndarray-cache.json"};
  const struct tpl__output_layout *l;
  struct tpl__error err;
  for (size_t i = 0; i < ARRAY_SIZE(caches); i++) {
    char *d = mlc_dir(caches[i]);
    REQUIRE(d != NULL);
    CHECK(parse("mlc", TPL_LAYOUT_WRITE, d, 0, &l, &err) == 0);
    CHECK(l != sentinel && strcmp(l->name, "mlc") == 0);
    CHECK(l->unscaled_bias); /* MLC's compiled model scales them */
    drop_dir(d);
  }
}

/* A layout whose biases are whole for its engine (mlc) takes --bias-policy
 * mlc and whole (and none given), refuses vllm for both verbs with one
 * message; rank takes every family. */
static void test_bias_policy_per_layout(void) {
  static const char want[] =
      "--layout mlc writes row-parallel biases whole (its engine divides "
      "them): --bias-policy vllm cannot hold; use mlc or whole";
  static const int fams[] = {-1, TPL_BIASF_MLC, TPL_BIASF_WHOLE,
                             TPL_BIASF_VLLM};
  const struct tpl__output_layout *l;
  struct tpl__error err = {0};
  char *d = mlc_dir("tensor-cache.json");
  REQUIRE(d != NULL);
  for (int verb = TPL_LAYOUT_WRITE; verb <= TPL_LAYOUT_VERIFY; verb++)
    for (size_t i = 0; i < ARRAY_SIZE(fams); i++) {
      struct tpl__layout_use u = {verb, d, 0, fams[i]};
      int refused = fams[i] == TPL_BIASF_VLLM;
      l = sentinel;
      CHECK_EQ_INT(tpl__layout_parse("mlc", &u, &l, &err),
                   refused ? TPL_EUSAGE : 0);
      if (refused) CHECK(strcmp(err.msg, want) == 0);
      CHECK(refused ? l == sentinel : l == tpl__layout_at(1));
      CHECK_EQ_INT(tpl__layout_parse("rank", &u, &l, &err), 0);
    }
  drop_dir(d);
}

static void test_mlc_refuses_other_models(void) {
  static const char *const models[] = {"/no/such/model"};
  const struct tpl__output_layout *l;
  struct tpl__error err;
  char want[512];
  char *plain = make_dir("tpl-layout"); /* a directory, no cache JSON */
  REQUIRE(plain != NULL);
  write_bytes(plain, "model.safetensors", "x", 1);
  for (size_t i = 0; i < ARRAY_SIZE(models) + 1; i++) {
    const char *m = i < ARRAY_SIZE(models) ? models[i] : plain;
    CHECK_EQ_INT(parse("mlc", TPL_LAYOUT_WRITE, m, 0, &l, &err), TPL_EUSAGE);
    snprintf(want, sizeof(want),
             "--layout mlc writes MLC's presharded cache from an MLC weight "
             "directory (tensor-cache.json or ndarray-cache.json), and '%s' "
             "is none",
             m);
    CHECK(strcmp(err.msg, want) == 0);
    CHECK(l == sentinel);
  }
  /* a URL is looked at once it is open (the writer, verify_mlc) */
  CHECK(parse("mlc", TPL_LAYOUT_WRITE, "https://h/mlc-dir/", 0, &l, &err) == 0);
  CHECK(l != sentinel && strcmp(l->name, "mlc") == 0);
  /* verify's mlc leaves MODEL to verify_mlc (its own errors) */
  CHECK(parse("mlc", TPL_LAYOUT_VERIFY, plain, 0, &l, &err) == 0);
  CHECK(l != sentinel && strcmp(l->name, "mlc") == 0);
  drop_dir(plain);
}

/* --ep: MLC's runtime cuts every expert; each command says it its way,
 * before MODEL is looked at. */
static void test_mlc_refuses_ep(void) {
  const struct tpl__output_layout *l;
  struct tpl__error err;
  char *d = mlc_dir("tensor-cache.json");
  REQUIRE(d != NULL);
  CHECK_EQ_INT(parse("mlc", TPL_LAYOUT_WRITE, d, 1, &l, &err), TPL_EUSAGE);
  CHECK(strcmp(err.msg, "preshard: --layout mlc writes MLC's cache, whose "
                        "runtime cuts every expert; --ep is for --layout "
                        "rank") == 0);
  CHECK(l == sentinel);
  CHECK_EQ_INT(parse("mlc", TPL_LAYOUT_WRITE, "/no/such", 1, &l, &err),
               TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "--ep is for --layout rank");
  CHECK_EQ_INT(parse("mlc", TPL_LAYOUT_VERIFY, d, 1, &l, &err), TPL_EUSAGE);
  CHECK(strcmp(err.msg, "--ep checks --layout rank outputs") == 0);
  CHECK(l == sentinel);
  drop_dir(d);
}

/* The help texts' list is the table's names in order. */
static void test_help_list_is_the_table(void) {
  char names[128] = "";
  const struct tpl__output_layout *l;
  for (size_t i = 0; (l = tpl__layout_at(i)) != NULL; i++) {
    if (i > 0) strncat(names, "|", sizeof(names) - strlen(names) - 1);
    strncat(names, l->name, sizeof(names) - strlen(names) - 1);
    CHECK(l->sink != NULL && l->verify != NULL && l->accepts != NULL);
    CHECK(l->wrote != NULL && l->members != NULL && l->checked != NULL);
  }
  CHECK(strcmp(names, TPL_LAYOUT_NAMES) == 0);
}

/* preshard's closing line and verify's summary words, per layout. */
static void test_summaries(void) {
  const struct tpl__output_layout *rank = tpl__layout_at(0),
                                  *mlc = tpl__layout_at(1);
  char line[256];
  REQUIRE(rank != NULL && mlc != NULL);
  rank->wrote(line, sizeof(line), "/out", 4);
  CHECK(strcmp(line, "wrote 4 rank files and shard-info.json to /out") == 0);
  mlc->wrote(line, sizeof(line), "/out", 4);
  CHECK(strcmp(line, "wrote MLC's presharded cache to /out (load it with "
                     "MLC_INTERNAL_PRESHARD_NUM set)") == 0);
  CHECK(strcmp(rank->members, "ranks") == 0);
  CHECK(strcmp(rank->checked, "tensor shards") == 0);
  CHECK(strcmp(mlc->members, "workers") == 0);
  CHECK(strcmp(mlc->checked, "records and every md5sum") == 0);
}

int main(void) {
  RUN(test_default_is_rank);
  RUN(test_rank_takes_everything);
  RUN(test_unknown_names);
  RUN(test_mlc_from_mlc_dir);
  RUN(test_mlc_refuses_other_models);
  RUN(test_mlc_refuses_ep);
  RUN(test_bias_policy_per_layout);
  RUN(test_help_list_is_the_table);
  RUN(test_summaries);
  return tap_done();
}
