/* test_plan.c - plans: the glob, one case per rule the plan-file parser
 * enforces (each building its broken plan here), first-match-wins and the
 * replicate default, plan application checks, every preset on an in-memory
 * tensor table with its config (expected strategies derived by hand from
 * DESIGN.md section 3), divisibility refusals, --plan resolution from a
 * model directory, and the shard-info JSON. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "experts.h"
#include "fileio.h"
#include "model.h"
#include "plan.h"
#include "plan_for.h"
#include "planner.h"
#include "presets.h"
#include "shardinfo.h"
#include "tap.h"

/* --- helpers --- */

/* Appends tensor `name` of `dtype` with `ndim` dims given as varargs
 * (uint64_t each); data offsets are not used by plans. */
static void add(struct tpl__model *m, const char *name, int dtype, int ndim,
                ...) {
  struct tpl__tensor t;
  va_list ap;
  memset(&t, 0, sizeof(t));
  t.name = strdup(name);
  t.dtype = dtype;
  t.ndim = ndim;
  va_start(ap, ndim);
  for (int i = 0; i < ndim; i++)
    t.shape[i] = va_arg(ap, uint64_t);
  va_end(ap);
  t.nbytes = tpl__tensor_numel(&t) * tpl__dtype_size(dtype);
  t.stored_bytes = t.nbytes;
  if (tpl__model_add_tensor(m, &t) != 0) free(t.name);
}

#define U(x) ((uint64_t)(x))

static struct tpl__model *new_model(int format, const char *dir) {
  struct tpl__model *m = tpl__model_new(format, dir);
  uint32_t idx;
  tpl__model_add_file(m, "/dev/null", "model.safetensors", 0, &idx);
  return m;
}

static int parse(const char *json, struct tpl__plan **p,
                 struct tpl__error *err) {
  memset(err, 0, sizeof(*err));
  *p = NULL;
  return tpl__plan_parse(json, strlen(json), "plan.json", p, err);
}

/* Parses `json` expecting failure `code` with `fragment` in the message. */
static void expect_refused(const char *json, int code, const char *fragment) {
  struct tpl__plan *p;
  struct tpl__error err;
  int rc = parse(json, &p, &err);
  CHECK_EQ_INT(rc, code);
  CHECK_EQ_INT(err.code, code);
  CHECK(p == NULL);
  CHECK_STR_CONTAINS(err.msg, "plan.json");
  CHECK_STR_CONTAINS(err.msg, fragment);
  tpl__plan_free(p);
}

static int find_tensor(const struct tpl__model *m, const char *name) {
  for (size_t i = 0; i < m->ntensors; i++)
    if (strcmp(m->tensors[i].name, name) == 0) return (int)i;
  printf("# no tensor %s\n", name);
  return -1;
}

/* Checks tensor `name` got a shard strategy (func, dim, segs...). */
static void expect_shard(const struct tpl__model *m,
                         const struct tpl__strategy *st, const char *name,
                         const char *func, int dim, size_t nsegs, ...) {
  int i = find_tensor(m, name);
  va_list ap;
  REQUIRE(i >= 0);
  if (st[i].kind != TPL_RULE_SHARD) printf("# %s: not sharded\n", name);
  CHECK_EQ_INT(st[i].kind, TPL_RULE_SHARD);
  CHECK(st[i].func_name != NULL && strcmp(st[i].func_name, func) == 0);
  if (st[i].func_name != NULL && strcmp(st[i].func_name, func) != 0)
    printf("# %s: func %s, expected %s\n", name, st[i].func_name, func);
  CHECK_EQ_INT(st[i].spec.dim, dim);
  CHECK_EQ_U64(st[i].spec.nsegs, nsegs);
  va_start(ap, nsegs);
  for (size_t j = 0; j < nsegs; j++)
    CHECK_EQ_U64(st[i].spec.segs[j], va_arg(ap, uint64_t));
  va_end(ap);
}

static void expect_kind(const struct tpl__model *m,
                        const struct tpl__strategy *st, const char *name,
                        int kind, int explicit_rule) {
  int i = find_tensor(m, name);
  REQUIRE(i >= 0);
  if (st[i].kind != kind) printf("# %s: kind %d\n", name, st[i].kind);
  CHECK_EQ_INT(st[i].kind, kind);
  if (explicit_rule)
    CHECK(st[i].rule >= 0);
  else
    CHECK_EQ_INT(st[i].rule, -1);
}

static struct tpl__plan *kept[128];
static size_t nkept;

/* Builds preset `name` from config JSON text and applies it to `m`.
 * Returns the apply/build code; *st is malloc'd (free it). */
static int run_preset(const char *name, int mlc, const char *config,
                      const struct tpl__model *m, uint32_t n,
                      struct tpl__strategy **st, struct tpl__error *err) {
  json_error_t je;
  json_t *cfg = json_loads(config, 0, &je);
  struct tpl__plan *p = NULL;
  int rc;
  memset(err, 0, sizeof(*err));
  *st = calloc(m->ntensors + 1, sizeof(**st));
  if (cfg == NULL) {
    printf("# bad test config: %s\n", je.text);
    return -1;
  }
  rc = tpl__preset_from_config(name, mlc, cfg, "config.json", n, 0, &p, err);
  if (rc == 0) rc = tpl__plan_apply(p, m, n, *st, err);
  if (rc != 0) printf("# %s\n", err->msg);
  json_decref(cfg);
  /* Strategies borrow func_name from the plan: keep plans alive. */
  if (p != NULL) {
    if (nkept < ARRAY_SIZE(kept))
      kept[nkept++] = p;
    else
      tpl__plan_free(p);
  }
  return rc;
}

/* Builds preset `name` from config JSON `text` at `n` shards, with or
 * without --ep, and frees it; returns the build's code (err says why). */
static int preset_ep(const char *name, const char *text, uint32_t n, int ep,
                     struct tpl__error *err) {
  json_t *cfg = json_loads(text, 0, NULL);
  struct tpl__plan *p = NULL;
  int rc = cfg == NULL ? -1
                       : tpl__preset_from_config(name, 0, cfg, "config.json", n,
                                                 ep, &p, err);
  tpl__plan_free(p);
  json_decref(cfg);
  return rc;
}

/* --ep: the routed experts are not cut, so a preset does not require
 * moe_intermediate_size to divide (6 at 4 shards); without --ep it does,
 * and the other sizes stay required either way. */
static void test_preset_ep_moe_size(void) {
  static const char cfg[] =
      "{\"hidden_size\": 64, \"num_attention_heads\": 8, "
      "\"num_key_value_heads\": 4, \"head_dim\": 8, "
      "\"intermediate_size\": 32, \"moe_intermediate_size\": 6, "
      "\"num_experts\": 8}";
  struct tpl__error err = {0};
  CHECK_EQ_INT(preset_ep("qwen3_moe", cfg, 4, 0, &err), TPL_EINDIVISIBLE);
  CHECK(strstr(err.msg, "moe_intermediate_size = 6") != NULL);
  CHECK_EQ_INT(preset_ep("qwen3_moe", cfg, 4, 1, &err), 0);
  CHECK_EQ_INT(preset_ep("qwen3_moe", cfg, 16, 1, &err), TPL_EINDIVISIBLE);
  CHECK(strstr(err.msg, "num_attention_heads = 8") != NULL);
}

/* mixtral's only MLP is its experts: under --ep its intermediate_size (6
 * at 4 shards) need not divide; qwen3_moe's is a dense MLP's: it must. */
static void test_preset_ep_expert_mlp(void) {
  static const char cfg[] =
      "{\"hidden_size\": 64, \"num_attention_heads\": 8, "
      "\"num_key_value_heads\": 4, \"head_dim\": 8, "
      "\"intermediate_size\": 6, \"moe_intermediate_size\": 8, "
      "\"num_local_experts\": 8}";
  struct tpl__error err = {0};
  CHECK_EQ_INT(preset_ep("mixtral", cfg, 4, 0, &err), TPL_EINDIVISIBLE);
  CHECK(strstr(err.msg, "intermediate_size = 6") != NULL);
  CHECK_EQ_INT(preset_ep("mixtral", cfg, 4, 1, &err), 0);
  CHECK_EQ_INT(preset_ep("qwen3_moe", cfg, 4, 1, &err), TPL_EINDIVISIBLE);
  CHECK(strstr(err.msg, "intermediate_size = 6") != NULL);
}

static void free_kept_plans(void) {
  while (nkept > 0)
    tpl__plan_free(kept[--nkept]);
}

/* --- glob --- */

static void test_glob_literal(void) {
  CHECK(tpl__glob_match("lm_head.weight", "lm_head.weight"));
  CHECK(!tpl__glob_match("lm_head.weight", "lm_head.weights"));
  CHECK(!tpl__glob_match("lm_head.weight", "lm_head.weigh"));
  CHECK(!tpl__glob_match("lm_head.weight", "xlm_head.weight"));
  CHECK(tpl__glob_match("", ""));
  CHECK(!tpl__glob_match("", "a"));
  /* Only * and ? are special. */
  CHECK(tpl__glob_match("a[0].b", "a[0].b"));
  CHECK(!tpl__glob_match("a[0].b", "a0.b"));
  CHECK(tpl__glob_match("a\\b", "a\\b"));
}

static void test_glob_star(void) {
  CHECK(tpl__glob_match("*", ""));
  CHECK(tpl__glob_match("*", "model.layers.0.x"));
  CHECK(tpl__glob_match("*.o_proj.weight",
                        "model.layers.31.self_attn.o_proj.weight"));
  CHECK(!tpl__glob_match("*.o_proj.weight",
                         "model.layers.31.self_attn.o_proj.weight.x"));
  CHECK(!tpl__glob_match("*.o_proj.weight", "o_proj.weight"));
  CHECK(tpl__glob_match("model.*.weight", "model.a.b.c.weight"));
  CHECK(tpl__glob_match("*experts.*.w1.weight",
                        "m.block_sparse_moe.experts.7.w1.weight"));
  CHECK(!tpl__glob_match("*experts.*.w1.weight",
                         "m.block_sparse_moe.experts.7.w2.weight"));
  CHECK(tpl__glob_match("a**b", "ab"));
  CHECK(tpl__glob_match("a*b*c", "a-b-b-c-c"));
  CHECK(!tpl__glob_match("a*b*c", "a-b-b-c-d"));
  CHECK(tpl__glob_match("*norm*", "model.layers.0.input_layernorm.weight"));
}

static void test_glob_question(void) {
  CHECK(tpl__glob_match("h.?.attn", "h.7.attn"));
  CHECK(!tpl__glob_match("h.?.attn", "h.17.attn"));
  CHECK(!tpl__glob_match("h.?.attn", "h..attn"));
  CHECK(tpl__glob_match("??", "ab"));
  CHECK(!tpl__glob_match("??", "a"));
  CHECK(tpl__glob_match("*?", "a"));
  CHECK(!tpl__glob_match("*?", ""));
}

/* `?` is one UTF-8 character, of any length (issue 31: `w?` cut `wx`
 * but left `w\xc3\xa9` whole); `*` over multi-byte names swallows whole
 * characters. */
static void test_glob_utf8(void) {
  CHECK(tpl__glob_match("w?", "w\xc3\xa9"));         /* U+00E9: 2 bytes */
  CHECK(tpl__glob_match("w?", "w\xe2\x82\xac"));     /* U+20AC: 3 bytes */
  CHECK(tpl__glob_match("w?", "w\xf0\x9f\x98\x80")); /* U+1F600: 4 bytes */
  CHECK(!tpl__glob_match("w??", "w\xc3\xa9"));       /* one, not two */
  CHECK(tpl__glob_match("w?.x", "w\xc3\xa9.x"));
  CHECK(!tpl__glob_match("w?.x", "w\xc3\xa9\xc3\xa9.x"));
  CHECK(tpl__glob_match("??", "\xc3\xa9\xe2\x82\xac"));
  CHECK(!tpl__glob_match("???", "\xc3\xa9\xe2\x82\xac"));
  CHECK(tpl__glob_match("*?", "\xc3\xa9"));
  CHECK(!tpl__glob_match("*??", "\xc3\xa9"));
  CHECK(tpl__glob_match("*\xc3\xa9", "\xc3\xa9\xc3\xa9"));
  CHECK(tpl__glob_match("*.\xc3\xa9.*", "a.\xc3\xa9.b"));
  CHECK(!tpl__glob_match("*.\xc3\xa9.*", "a.\xc3\xa8.b"));
  CHECK(tpl__glob_match("*?.x", "\xe2\x82\xac\xc3\xa9.x"));
  CHECK(tpl__glob_match("*\xa9", "\xc3\xa9") == 0); /* no half character */
  CHECK(tpl__glob_match("?\xa9", "\xc3\xa9") == 0);
  /* A byte that starts no character still counts as one. */
  CHECK(tpl__glob_match("a?b", "a\xff"
                               "b"));
  CHECK(tpl__glob_match("a?", "a\xc3")); /* truncated: never past the end */
}

/* The classic exponential case for recursive matchers must be instant. */
static void test_glob_no_backtracking_blowup(void) {
  static char name[20001], pat[64];
  clock_t t0 = clock();
  memset(name, 'a', sizeof(name) - 1);
  snprintf(pat, sizeof(pat), "a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
  CHECK(!tpl__glob_match(pat, name));
  snprintf(pat, sizeof(pat), "*a*a*a*a*a*a*a*a*a*a*a*a*a*a");
  CHECK(tpl__glob_match(pat, name));
  CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
}

/* --- plan-file parser: valid plans --- */

static void test_parse_design_example(void) {
  const char *json =
      "{ \"rules\": [\n"
      "  {\"match\": \"model.layers.*.self_attn.qkv_proj.weight\", \"name\": "
      "\"_shard_qkv\", \"dim\": 0, \"segs\": [4096, 1024, 1024]},\n"
      "  {\"match\": \"*.o_proj.weight\", \"name\": \"_shard_o\", \"dim\": "
      "1},\n"
      "  {\"match\": \"*.attn.c_proj.bias\", \"scale_bias\": true},\n"
      "  {\"match\": \"lm_head.weight\", \"replicate\": true}\n"
      "] }";
  struct tpl__plan *p;
  struct tpl__error err;
  CHECK_EQ_INT(parse(json, &p, &err), 0);
  REQUIRE(p != NULL);
  CHECK_EQ_U64(p->nrules, 4);
  CHECK_EQ_INT(p->rules[0].kind, TPL_RULE_SHARD);
  CHECK(strcmp(p->rules[0].name, "_shard_qkv") == 0);
  CHECK_EQ_U64(p->rules[0].spec.nsegs, 3);
  CHECK_EQ_U64(p->rules[0].spec.segs[0], 4096);
  CHECK_EQ_U64(p->rules[0].spec.segs[2], 1024);
  CHECK_EQ_INT(p->rules[1].spec.dim, 1);
  CHECK_EQ_U64(p->rules[1].spec.nsegs, 0);
  CHECK_EQ_INT(p->rules[2].kind, TPL_RULE_SCALE_BIAS);
  CHECK_EQ_INT(p->rules[3].kind, TPL_RULE_REPLICATE);
  CHECK(strcmp(p->rules[3].match, "lm_head.weight") == 0);
  CHECK_STR_CONTAINS(p->source, "plan.json");
  tpl__plan_free(p);
}

static void test_parse_default_name(void) {
  struct tpl__plan *p;
  struct tpl__error err;
  CHECK_EQ_INT(parse("{\"rules\": [{\"match\": \"x\", \"dim\": 2}]}", &p, &err),
               0);
  REQUIRE(p != NULL);
  CHECK(strcmp(p->rules[0].name, "_shard_2") == 0);
  tpl__plan_free(p);
}

static void test_parse_empty_rules(void) {
  struct tpl__plan *p;
  struct tpl__error err;
  CHECK_EQ_INT(parse("{\"rules\": []}", &p, &err), 0);
  if (p != NULL) CHECK_EQ_U64(p->nrules, 0);
  tpl__plan_free(p);
}

/* --- plan-file parser: one case per rule --- */

static void test_refuse_not_json(void) {
  expect_refused("{\"rules\": [", TPL_EPLAN, "valid JSON");
}

static void test_refuse_not_object(void) {
  expect_refused("[{\"match\": \"x\", \"replicate\": true}]", TPL_EPLAN,
                 "object");
}

static void test_refuse_duplicate_key(void) {
  expect_refused("{\"rules\": [], \"rules\": []}", TPL_EPLAN, "plan.json");
}

static void test_refuse_no_rules(void) {
  expect_refused("{}", TPL_EPLAN, "'rules' array");
}

static void test_refuse_rules_not_array(void) {
  expect_refused("{\"rules\": {\"match\": \"x\"}}", TPL_EPLAN,
                 "found an object");
}

static void test_refuse_unknown_top_key(void) {
  expect_refused("{\"rules\": [], \"rule\": []}", TPL_EPLAN,
                 "unknown key 'rule'");
}

static void test_refuse_rule_not_object(void) {
  expect_refused("{\"rules\": [\"*.weight\"]}", TPL_EPLAN,
                 "rule 0: expected an object, found a string");
}

static void test_refuse_unknown_rule_key(void) {
  expect_refused("{\"rules\": [{\"match\": \"a\", \"replicate\": true},"
                 "{\"match\": \"b\", \"replicate\": true},"
                 "{\"match\": \"c\", \"replicate\": true},"
                 "{\"match\": \"d\", \"dims\": 0}]}",
                 TPL_EPLAN, "rule 3: unknown key 'dims'");
}

static void test_refuse_match_missing(void) {
  expect_refused("{\"rules\": [{\"dim\": 0}]}", TPL_EPLAN,
                 "rule 0: expected a 'match' glob");
}

static void test_refuse_match_not_string(void) {
  expect_refused("{\"rules\": [{\"match\": 7, \"dim\": 0}]}", TPL_EPLAN,
                 "rule 0: expected 'match' to be a string");
}

static void test_refuse_match_empty(void) {
  expect_refused("{\"rules\": [{\"match\": \"\", \"dim\": 0}]}", TPL_EPLAN,
                 "non-empty");
}

static void test_refuse_match_with_nul(void) {
  expect_refused("{\"rules\": [{\"match\": \"a\\u0000b\", \"dim\": 0}]}",
                 TPL_EPLAN, "without NUL");
}

static void test_refuse_no_action(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\"}]}", TPL_EPLAN,
                 "rule 0: expected exactly one of 'dim', 'scale_bias' (or "
                 "'bias'), 'replicate', found 0");
}

static void test_refuse_two_actions(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, "
                 "\"replicate\": true}]}",
                 TPL_EPLAN, "found 2");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"scale_bias\": true, "
                 "\"replicate\": true}]}",
                 TPL_EPLAN, "found 2");
}

static void test_refuse_dim_negative(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": -1}]}", TPL_EPLAN,
                 "'dim' to be a non-negative integer");
}

static void test_refuse_dim_not_integer(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 1.0}]}", TPL_EPLAN,
                 "'dim' to be a non-negative integer");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": \"0\"}]}", TPL_EPLAN,
                 "'dim' to be a non-negative integer");
}

static void test_refuse_dim_too_large(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 8}]}", TPL_EPLAN,
                 "'dim' below 8");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": "
                 "99999999999999999}]}",
                 TPL_EPLAN, "'dim' below 8");
}

static void test_refuse_name_without_dim(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"name\": \"_f\", "
                 "\"replicate\": true}]}",
                 TPL_EPLAN, "'name' without 'dim'");
}

static void test_refuse_segs_without_dim(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"segs\": [2, 2], "
                 "\"scale_bias\": true}]}",
                 TPL_EPLAN, "'segs' without 'dim'");
}

static void test_refuse_name_not_string(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, \"name\": "
                 "[\"a\"]}]}",
                 TPL_EPLAN, "'name' to be a string");
}

static void test_refuse_segs_not_array(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, \"segs\": "
                 "4}]}",
                 TPL_EPLAN, "'segs' to be an array");
}

static void test_refuse_segs_empty(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, \"segs\": "
                 "[]}]}",
                 TPL_EPLAN, "'segs' to be an array of 1 to 64");
}

static void test_refuse_segs_zero(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, \"segs\": "
                 "[4, 0]}]}",
                 TPL_EPLAN, "segs[1] to be a positive integer");
}

static void test_refuse_segs_not_integer(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, \"segs\": "
                 "[4, -2]}]}",
                 TPL_EPLAN, "segs[1] to be a positive integer");
}

static void test_refuse_segs_too_many(void) {
  char json[1024];
  size_t used = (size_t)snprintf(json, sizeof(json),
                                 "{\"rules\": [{\"match\": \"x\", \"dim\": 0, "
                                 "\"segs\": [1");
  for (int i = 1; i < 65; i++)
    used += (size_t)snprintf(json + used, sizeof(json) - used, ",1");
  snprintf(json + used, sizeof(json) - used, "]}]}");
  expect_refused(json, TPL_EPLAN,
                 "1 to 64 positive integers, found an "
                 "array of 65");
}

static void test_refuse_scale_bias_false(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"scale_bias\": false}]}",
                 TPL_EPLAN, "'scale_bias': true, found false");
}

static void test_refuse_bias_key(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"bias\": \"half\"}]}",
                 TPL_EPLAN,
                 "rule 0: expected 'bias' to be \"scale\", \"rank0\" or "
                 "\"whole\", found \"half\"");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"bias\": 2}]}", TPL_EPLAN,
                 "found an integer");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"bias\": \"default\"}]}",
                 TPL_EPLAN, "found \"default\"");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, "
                 "\"bias\": \"whole\"}]}",
                 TPL_EPLAN, "found 2");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"replicate\": true, "
                 "\"bias\": \"rank0\"}]}",
                 TPL_EPLAN, "found 2");
}

static void test_refuse_replicate_false(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"replicate\": false}]}",
                 TPL_EPLAN, "'replicate': true, found false");
}

static void test_refuse_flag_not_bool(void) {
  expect_refused("{\"rules\": [{\"match\": \"x\", \"replicate\": 1}]}",
                 TPL_EPLAN, "'replicate': true, found an integer");
}

/* "interleave": K, 2..64, with dim, without segs. */
static void test_parse_interleave(void) {
  struct tpl__plan *p;
  struct tpl__error err;
  CHECK_EQ_INT(parse("{\"rules\": [{\"match\": \"x\", \"dim\": 1, "
                     "\"interleave\": 2}]}",
                     &p, &err),
               0);
  REQUIRE(p != NULL);
  CHECK_EQ_INT(p->rules[0].interleave, 2);
  CHECK_EQ_U64(p->rules[0].spec.nsegs, 0);
  tpl__plan_free(p);
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 1, "
                 "\"interleave\": 1}]}",
                 TPL_EPLAN, "rule 0: expected 'interleave' to be the number");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 1, "
                 "\"interleave\": 65}]}",
                 TPL_EPLAN, "2 to 64, found an integer");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 1, "
                 "\"interleave\": \"2\"}]}",
                 TPL_EPLAN, "found a string");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"replicate\": true, "
                 "\"interleave\": 2}]}",
                 TPL_EPLAN, "expected 'dim' with 'interleave'");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"dim\": 0, "
                 "\"segs\": [2, 2], \"interleave\": 2}]}",
                 TPL_EPLAN, "expected 'segs' or 'interleave', found both");
}

/* "expert": true or "stacked", alone (replicated without --ep) or with
 * one cut; anything else, two cuts, or true without the '*' that stands
 * for the expert id, is refused naming the file and rule. */
static void test_parse_expert(void) {
  struct tpl__plan *p;
  struct tpl__error err;
  CHECK_EQ_INT(parse("{\"rules\": [{\"match\": \"*.e*.w1.weight\", "
                     "\"expert\": true}, {\"match\": \"*.e*.w2.weight\", "
                     "\"expert\": true, \"dim\": 1}, {\"match\": \"*.stk\", "
                     "\"expert\": \"stacked\", \"replicate\": true}]}",
                     &p, &err),
               0);
  REQUIRE(p != NULL);
  CHECK_EQ_INT(p->rules[0].expert, TPL_EP_WHOLE);
  CHECK_EQ_INT(p->rules[0].kind, TPL_RULE_REPLICATE);
  CHECK_EQ_INT(p->rules[1].expert, TPL_EP_WHOLE);
  CHECK_EQ_INT(p->rules[1].kind, TPL_RULE_SHARD);
  CHECK_EQ_INT(p->rules[1].spec.dim, 1);
  CHECK_EQ_INT(p->rules[2].expert, TPL_EP_STACKED);
  tpl__plan_free(p);
  expect_refused("{\"rules\": [{\"match\": \"x*\", \"expert\": false}]}",
                 TPL_EPLAN,
                 "rule 0: expected 'expert' to be true (one expert's "
                 "tensor) or \"stacked\" (every expert's, [E, ...]), found "
                 "false");
  expect_refused("{\"rules\": [{\"match\": \"x*\", \"expert\": \"whole\"}]}",
                 TPL_EPLAN,
                 "or \"stacked\" (every expert's, [E, ...]), "
                 "found \"whole\"");
  expect_refused("{\"rules\": [{\"match\": \"x*\", \"expert\": 1}]}", TPL_EPLAN,
                 "found an integer");
  expect_refused("{\"rules\": [{\"match\": \"x*\", \"expert\": true, "
                 "\"dim\": 0, \"replicate\": true}]}",
                 TPL_EPLAN,
                 "rule 0: expected at most one of 'dim', 'scale_bias' (or "
                 "'bias'), 'replicate' with 'expert', found 2");
  expect_refused("{\"rules\": [{\"match\": \"a.e3.w1\", \"expert\": true}]}",
                 TPL_EPLAN,
                 "rule 0: expected a '*' in 'match' with 'expert': true (its "
                 "last '*' stands for the expert id), found 'a.e3.w1'");
  expect_refused("{\"rules\": [{\"match\": \"x\", \"expert\": \"stacked\", "
                 "\"name\": \"f\"}]}",
                 TPL_EPLAN, "expected 'dim' with 'name'");
}

static void test_refuse_too_many_rules(void) {
  const char *one = "{\"match\":\"a\",\"replicate\":true},";
  size_t n = 65537, len = strlen(one), used = 0;
  char *json = malloc(n * len + 32);
  struct tpl__plan *p;
  struct tpl__error err;
  memcpy(json, "{\"rules\":[", 10);
  used = 10;
  for (size_t i = 0; i < n; i++, used += len)
    memcpy(json + used, one, len);
  memcpy(json + used - 1, "]}", 3); /* drop the last comma */
  CHECK_EQ_INT(parse(json, &p, &err), TPL_ELIMIT);
  CHECK_STR_CONTAINS(err.msg, "at most 65536 rules");
  tpl__plan_free(p);
  free(json);
}

/* --- applying a plan --- */

/* Parses `json` and applies it to `m` with `n` shards. */
static int apply_json(const char *json, const struct tpl__model *m, uint32_t n,
                      struct tpl__strategy *st, struct tpl__error *err) {
  struct tpl__plan *p;
  int rc = parse(json, &p, err);
  if (rc != 0) return rc;
  rc = tpl__plan_apply(p, m, n, st, err);
  /* func_name borrows from p: callers here only look at kinds/rules. */
  for (size_t i = 0; i < m->ntensors; i++)
    st[i].func_name = NULL;
  tpl__plan_free(p);
  return rc;
}

/* Each rank's slice of an interleaved dim is whole groups: 12 rows of 2
 * alternating parts cut 2 ways (6 rows, 3 pairs) pass; 4 ways (3 rows)
 * do not. */
static void test_apply_interleave(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  struct tpl__error err;
  const char *plan = "{\"rules\": [{\"match\": \"*\", \"dim\": 0, "
                     "\"interleave\": 2}]}";
  add(m, "w", TPL_DT_F32, 2, U(12), U(4));
  CHECK_EQ_INT(apply_json(plan, m, 2, st, &err), 0);
  CHECK_EQ_INT(st[0].kind, TPL_RULE_SHARD);
  CHECK_EQ_INT(apply_json(plan, m, 4, st, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "tensor 'w': expected each of the 4 shards' 3 "
                              "rows along dim 0 to be whole groups of the 2 "
                              "interleaved parts, found 1 left over");
  tpl__model_free(m);
}

/* Under --ep (ep_expert set) the tensors of "expert" rules are left
 * replicated, their cut never checked (w2's 3 rows do not divide by 2);
 * without it the rule's dim cuts, and is checked. */
static void test_apply_expert_rule(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  struct tpl__plan *p;
  struct tpl__error err;
  const char *plan = "{\"rules\": [{\"match\": \"moe.x*.w2\", \"dim\": 0, "
                     "\"expert\": true}]}";
  add(m, "moe.x0.w2", TPL_DT_F32, 2, U(3), U(4));
  CHECK_EQ_INT(apply_json(plan, m, 2, st, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "rule 0 ('moe.x*.w2')");
  REQUIRE(parse(plan, &p, &err) == 0);
  p->ep_expert = tpl__ep_is_expert;
  CHECK_EQ_INT(tpl__plan_apply(p, m, 2, st, &err), 0);
  CHECK_EQ_INT(st[0].kind, TPL_RULE_REPLICATE);
  CHECK_EQ_INT(st[0].rule, 0);
  tpl__plan_free(p);
  tpl__model_free(m);
}

/* Adds experts 0..3's tensor `fmt` (one %d: the id) of `dtype` and
 * shape {rows, cols} to `m`. */
static void add_experts(struct tpl__model *m, const char *fmt, int dtype,
                        uint64_t rows, uint64_t cols) {
  char name[64];
  for (int e = 0; e < 4; e++) {
    snprintf(name, sizeof(name), fmt, e);
    add(m, name, dtype, 2, rows, cols);
  }
}

/* tpl__ep_apply with plan `json` over `m` (num_local_experts 4, a TP
 * group of 2 = the EP group): strategies into st. */
static int ep_with_plan(const char *json, const struct tpl__model *m,
                        struct tpl__strategy *st, struct tpl__error *err) {
  json_t *config = json_pack("{s:i}", "num_local_experts", 4);
  struct tpl__grid g = {2, 2, 1, 1, 2};
  struct tpl__plan *p;
  uint32_t experts = 0;
  int rc = parse(json, &p, err);
  if (rc == 0) p->ep_expert = tpl__ep_is_expert;
  if (rc == 0) rc = tpl__plan_apply(p, m, 2, st, err);
  if (rc == 0) rc = tpl__ep_apply(p, m, config, &g, st, &experts, err);
  if (rc == 0 && experts != 4) rc = -1;
  for (size_t i = 0; i < m->ntensors; i++)
    st[i].func_name = NULL;
  tpl__plan_free(p);
  json_decref(config);
  return rc;
}

/* An "expert" rule classifies as the built-in names do: renamed experts
 * `moe.x<e>.w1` by a rule get the owners `.experts.<e>.` get by name
 * (4 experts over 2 ranks: 0, 0, 1, 1), a stacked rule the dim-0 cut,
 * and a rule over the built-in names themselves the same again;
 * the same renamed model without the rules has no experts (65); a
 * rule whose last '*' is not the id is refused naming it. */
static void test_ep_expert_rule(void) {
  struct tpl__model *a = new_model(TPL_FMT_SAFETENSORS, "a");
  struct tpl__model *b = new_model(TPL_FMT_SAFETENSORS, "b");
  struct tpl__strategy sa[5], sb[5];
  struct tpl__error err;
  add_experts(a, "model.layers.0.mlp.experts.%d.w1.weight", TPL_DT_F32, U(4),
              U(4));
  add_experts(b, "model.layers.0.moe.x%d.w1.weight", TPL_DT_F32, U(4), U(4));
  add(a, "model.layers.0.mlp.moe_down_proj.weight", TPL_DT_F32, 2, U(4), U(4));
  add(b, "model.layers.0.stack", TPL_DT_F32, 2, U(4), U(4));
  CHECK_EQ_INT(ep_with_plan("{\"rules\": []}", a, sa, &err), 0);
  CHECK_EQ_INT(ep_with_plan("{\"rules\": [{\"match\": \"*.moe.x*.w1.weight\""
                            ", \"expert\": true}, {\"match\": \"*.stack\", "
                            "\"expert\": \"stacked\"}]}",
                            b, sb, &err),
               0);
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(sb[i].ep, sa[i].ep);
    CHECK_EQ_INT(sb[i].owner, sa[i].owner);
    CHECK_EQ_INT(sb[i].kind, sa[i].kind);
  }
  CHECK_EQ_INT(ep_with_plan("{\"rules\": [{\"match\": "
                            "\"model.layers.*.mlp.experts.*.w1.weight\", "
                            "\"expert\": true}]}",
                            a, sb, &err),
               0);
  for (int i = 0; i < 5; i++)
    CHECK(sb[i].ep == sa[i].ep && sb[i].owner == sa[i].owner);
  CHECK_EQ_INT(sa[2].owner, 1);
  CHECK_EQ_INT(sa[4].ep, TPL_EP_STACKED);
  CHECK_EQ_INT(ep_with_plan("{\"rules\": []}", b, sb, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "b: --ep: the model has no experts");
  CHECK_EQ_INT(ep_with_plan("{\"rules\": [{\"match\": \"*.w1.*\", "
                            "\"expert\": true}]}",
                            b, sb, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg,
                     "file plan.json, rule 0 ('*.w1.*'): tensor "
                     "'model.layers.0.moe.x0.w1.weight': expected the last "
                     "'*' of an \"expert\": true rule to stand for the expert "
                     "id (digits), found none");
  tpl__model_free(a);
  tpl__model_free(b);
}

/* A quantized param follows its weight's "expert" rule: each renamed
 * expert's weight_scale_inv is held whole by its weight's owner. */
static void test_ep_expert_rule_scales(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, "q");
  struct tpl__strategy st[8];
  struct tpl__error err;
  add_experts(m, "l.0.moe.x%d.w1.weight", TPL_DT_U8, U(128), U(128));
  add_experts(m, "l.0.moe.x%d.w1.weight_scale_inv", TPL_DT_F32, U(1), U(1));
  CHECK_EQ_INT(ep_with_plan("{\"rules\": [{\"match\": \"l.*.moe.x*.w1.weight\""
                            ", \"expert\": true, \"dim\": 0}]}",
                            m, st, &err),
               0);
  for (int i = 0; i < 8; i++) {
    CHECK_EQ_INT(st[i].ep, TPL_EP_WHOLE);
    CHECK_EQ_INT(st[i].owner, (uint32_t)(i % 4 / 2));
  }
  tpl__model_free(m);
}

/* tpl__model_drop_layers (--skip-mtp): layers >= first go, in order. */
static void test_drop_layers(void) {
  static const char *const names[] = {
      "model.layers.0.a", "model.layers.10.b",  "model.layers.2.c",
      "model.layers.1.d", "model.layers.x.e",   "model.norm.weight",
      "model.layers.2",   "lm.model.layers.5.f"};
  static const char *const left[] = {"model.layers.0.a", "model.layers.1.d",
                                     "model.layers.x.e", "model.norm.weight",
                                     "model.layers.2",   "lm.model.layers.5.f"};
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    add(m, names[i], TPL_DT_F32, 1, U(4));
  CHECK_EQ_U64(tpl__model_drop_layers(m, 2), 2);
  REQUIRE(m->ntensors == ARRAY_SIZE(left));
  for (size_t i = 0; i < ARRAY_SIZE(left); i++)
    CHECK(strcmp(m->tensors[i].name, left[i]) == 0);
  CHECK_EQ_U64(tpl__model_drop_layers(m, 2), 0);
  tpl__model_free(m);
}

static void test_first_match_wins(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[2];
  struct tpl__error err;
  add(m, "a.weight", TPL_DT_F32, 2, U(4), U(4));
  add(m, "b.weight", TPL_DT_F32, 2, U(4), U(4));
  CHECK_EQ_INT(apply_json("{\"rules\": [{\"match\": \"a.*\", \"replicate\": "
                          "true}, {\"match\": \"*.weight\", \"dim\": 1}]}",
                          m, 2, st, &err),
               0);
  CHECK_EQ_INT(st[0].kind, TPL_RULE_REPLICATE);
  CHECK_EQ_INT(st[0].rule, 0);
  CHECK_EQ_INT(st[1].kind, TPL_RULE_SHARD);
  CHECK_EQ_INT(st[1].rule, 1);
  CHECK_EQ_INT(st[1].spec.dim, 1);
  /* The same rules the other way round: the shard rule takes both. */
  CHECK_EQ_INT(apply_json("{\"rules\": [{\"match\": \"*.weight\", \"dim\": "
                          "1}, {\"match\": \"a.*\", \"replicate\": true}]}",
                          m, 2, st, &err),
               0);
  CHECK_EQ_INT(st[0].kind, TPL_RULE_SHARD);
  CHECK_EQ_INT(st[0].rule, 0);
  tpl__model_free(m);
}

static void test_unmatched_replicated(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[2];
  struct tpl__error err;
  add(m, "x.weight", TPL_DT_F16, 2, U(4), U(6));
  add(m, "y.bias", TPL_DT_I64, 1, U(3));
  CHECK_EQ_INT(apply_json("{\"rules\": [{\"match\": \"x.*\", \"dim\": 1}]}", m,
                          3, st, &err),
               0);
  CHECK_EQ_INT(st[0].kind, TPL_RULE_SHARD);
  CHECK_EQ_INT(st[1].kind, TPL_RULE_REPLICATE);
  CHECK_EQ_INT(st[1].rule, -1);
  CHECK(st[1].func_name == NULL);
  CHECK(strcmp(tpl__rule_name(st[1].kind, st[1].func_name), "replicate") == 0);
  tpl__model_free(m);
}

static void expect_apply_refused(const char *json, int ndim, uint64_t d0,
                                 uint64_t d1, int dtype, uint32_t n, int code,
                                 const char *fragment) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  struct tpl__error err;
  add(m, "t.w", dtype, ndim, d0, d1);
  CHECK_EQ_INT(apply_json(json, m, n, st, &err), code);
  CHECK_STR_CONTAINS(err.msg, "'t.w'");
  CHECK_STR_CONTAINS(err.msg, fragment);
  tpl__model_free(m);
}

static void test_apply_scalar_refused(void) {
  expect_apply_refused("{\"rules\": [{\"match\": \"*\", \"dim\": 0}]}", 0, 0, 0,
                       TPL_DT_F32, 1, TPL_EPLAN, "rule 0");
}

static void test_apply_dim_out_of_range(void) {
  expect_apply_refused("{\"rules\": [{\"match\": \"t.*\", \"dim\": 2}]}", 2, 4,
                       4, TPL_DT_F32, 2, TPL_EPLAN, "plan.json");
}

static void test_apply_segs_do_not_sum(void) {
  expect_apply_refused("{\"rules\": [{\"match\": \"t.w\", \"dim\": 0, "
                       "\"segs\": [4, 2]}]}",
                       2, 8, 2, TPL_DT_F32, 2, TPL_EPLAN, "8");
}

static void test_apply_indivisible(void) {
  expect_apply_refused("{\"rules\": [{\"match\": \"t.w\", \"dim\": 1}]}", 2, 4,
                       6, TPL_DT_F32, 4, TPL_EINDIVISIBLE, "6");
  expect_apply_refused("{\"rules\": [{\"match\": \"t.w\", \"dim\": 0, "
                       "\"segs\": [4, 2, 2]}]}",
                       2, 8, 2, TPL_DT_F32, 4, TPL_EINDIVISIBLE, "2");
}

/* "bias": a row-parallel bias's own policy; alone or beside
 * "scale_bias": true it makes a scale_bias rule, and the strategy of a
 * tensor it matches carries it. */
static void test_parse_bias_key(void) {
  static const char *const names[] = {"scale", "rank0", "whole"};
  for (int b = TPL_BIAS_SCALE; b <= TPL_BIAS_WHOLE; b++) {
    char json[160];
    struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
    struct tpl__strategy st[1];
    struct tpl__error err;
    snprintf(json, sizeof(json),
             "{\"rules\": [{\"match\": \"o.bias\", \"bias\": \"%s\"%s}]}",
             names[b - TPL_BIAS_SCALE],
             b == TPL_BIAS_WHOLE ? ", \"scale_bias\": true" : "");
    add(m, "o.bias", TPL_DT_BF16, 1, U(4));
    CHECK_EQ_INT(apply_json(json, m, 2, st, &err), 0);
    CHECK_EQ_INT(st[0].kind, TPL_RULE_SCALE_BIAS);
    CHECK_EQ_INT(st[0].bias, b);
    tpl__model_free(m);
  }
}

static void test_apply_scale_bias_dtype(void) {
  static const int bad[] = {TPL_DT_I32, TPL_DT_U8, TPL_DT_F8_E4M3, TPL_DT_BOOL};
  static const int good[] = {TPL_DT_F16, TPL_DT_BF16, TPL_DT_F32, TPL_DT_F64};
  const char *json = "{\"rules\": [{\"match\": \"t.w\", \"scale_bias\": "
                     "true}]}";
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
    expect_apply_refused(json, 1, 4, 0, bad[i], 2, TPL_EDTYPE,
                         tpl__dtype_st_name(bad[i]));
  for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
    struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
    struct tpl__strategy st[1];
    struct tpl__error err;
    add(m, "t.w", good[i], 1, U(4));
    CHECK_EQ_INT(apply_json(json, m, 2, st, &err), 0);
    CHECK_EQ_INT(st[0].kind, TPL_RULE_SCALE_BIAS);
    CHECK(strcmp(tpl__rule_name(st[0].kind, st[0].func_name), "scale_bias") ==
          0);
    tpl__model_free(m);
  }
}

static void test_apply_zero_shards(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  struct tpl__error err;
  add(m, "t.w", TPL_DT_F32, 1, U(4));
  CHECK_EQ_INT(apply_json("{\"rules\": []}", m, 0, st, &err), TPL_EPLAN);
  tpl__model_free(m);
}

/* --- presets (in memory) --- */

#define LLAMA_CFG                                                              \
  "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": "               \
  "\"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, "               \
  "\"num_key_value_heads\": 2, \"intermediate_size\": 48}"

static void add_llama_layer(struct tpl__model *m, int l, int bias) {
  char n[128];
#define NAME(s) (snprintf(n, sizeof(n), "model.layers.%d.%s", l, s), n)
  add(m, NAME("input_layernorm.weight"), TPL_DT_BF16, 1, U(32));
  add(m, NAME("self_attn.q_proj.weight"), TPL_DT_BF16, 2, U(32), U(32));
  add(m, NAME("self_attn.k_proj.weight"), TPL_DT_BF16, 2, U(16), U(32));
  add(m, NAME("self_attn.v_proj.weight"), TPL_DT_BF16, 2, U(16), U(32));
  if (bias) {
    add(m, NAME("self_attn.q_proj.bias"), TPL_DT_BF16, 1, U(32));
    add(m, NAME("self_attn.k_proj.bias"), TPL_DT_BF16, 1, U(16));
    add(m, NAME("self_attn.v_proj.bias"), TPL_DT_BF16, 1, U(16));
  }
  add(m, NAME("self_attn.o_proj.weight"), TPL_DT_BF16, 2, U(32), U(32));
  add(m, NAME("self_attn.rotary_emb.inv_freq"), TPL_DT_F32, 1, U(4));
  add(m, NAME("post_attention_layernorm.weight"), TPL_DT_BF16, 1, U(32));
  add(m, NAME("mlp.gate_proj.weight"), TPL_DT_BF16, 2, U(48), U(32));
  add(m, NAME("mlp.up_proj.weight"), TPL_DT_BF16, 2, U(48), U(32));
  add(m, NAME("mlp.down_proj.weight"), TPL_DT_BF16, 2, U(32), U(48));
#undef NAME
}

static struct tpl__model *llama_model(int bias) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  add(m, "model.embed_tokens.weight", TPL_DT_BF16, 2, U(64), U(32));
  add_llama_layer(m, 0, bias);
  add_llama_layer(m, 1, bias);
  add(m, "model.norm.weight", TPL_DT_BF16, 1, U(32));
  add(m, "lm_head.weight", TPL_DT_BF16, 2, U(64), U(32));
  return m;
}

static void check_llama_strategies(const struct tpl__model *m,
                                   const struct tpl__strategy *st) {
  const char *l1 = "model.layers.1.";
  char n[128];
#define L1(s) (snprintf(n, sizeof(n), "%s%s", l1, s), n)
  expect_shard(m, st, "model.layers.0.self_attn.q_proj.weight", "_shard_q", 0,
               0);
  expect_shard(m, st, L1("self_attn.q_proj.weight"), "_shard_q", 0, 0);
  expect_shard(m, st, L1("self_attn.k_proj.weight"), "_shard_k", 0, 0);
  expect_shard(m, st, L1("self_attn.v_proj.weight"), "_shard_v", 0, 0);
  expect_shard(m, st, L1("self_attn.o_proj.weight"), "_shard_o", 1, 0);
  expect_shard(m, st, L1("mlp.gate_proj.weight"), "_shard_gate", 0, 0);
  expect_shard(m, st, L1("mlp.up_proj.weight"), "_shard_up", 0, 0);
  expect_shard(m, st, L1("mlp.down_proj.weight"), "_shard_down", 1, 0);
  expect_kind(m, st, L1("input_layernorm.weight"), TPL_RULE_REPLICATE, 1);
  /* Named by a replicate rule with its reason (it is [head_dim / 2], here
   * as many as the heads). */
  expect_kind(m, st, L1("self_attn.rotary_emb.inv_freq"), TPL_RULE_REPLICATE,
              1);
  expect_kind(m, st, "model.embed_tokens.weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "model.norm.weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "lm_head.weight", TPL_RULE_REPLICATE, 1);
#undef L1
}

static void test_preset_llama(void) {
  struct tpl__model *m = llama_model(0);
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("llama", 0, LLAMA_CFG, m, 2, &st, &err), 0);
  check_llama_strategies(m, st);
  free(st);
  /* N = 1 applies the same rules (every cut is the whole tensor). */
  CHECK_EQ_INT(run_preset("llama", 0, LLAMA_CFG, m, 1, &st, &err), 0);
  check_llama_strategies(m, st);
  free(st);
  tpl__model_free(m);
}

static void test_preset_mistral_gemma(void) {
  struct tpl__model *m = llama_model(0);
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("mistral", 0, LLAMA_CFG, m, 2, &st, &err), 0);
  check_llama_strategies(m, st);
  free(st);
  /* Gemma: head_dim given explicitly (not hidden / heads). */
  CHECK_EQ_INT(run_preset("gemma", 0,
                          "{\"hidden_size\": 32, \"num_attention_heads\": "
                          "4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                          "\"intermediate_size\": 48}",
                          m, 2, &st, &err),
               0);
  check_llama_strategies(m, st);
  free(st);
  tpl__model_free(m);
}

static void test_preset_qwen2_biases(void) {
  struct tpl__model *m = llama_model(1);
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("qwen2", 0, LLAMA_CFG, m, 2, &st, &err), 0);
  check_llama_strategies(m, st);
  expect_shard(m, st, "model.layers.0.self_attn.q_proj.bias", "_shard_q_bias",
               0, 0);
  expect_shard(m, st, "model.layers.1.self_attn.k_proj.bias", "_shard_k_bias",
               0, 0);
  expect_shard(m, st, "model.layers.1.self_attn.v_proj.bias", "_shard_v_bias",
               0, 0);
  free(st);
  tpl__model_free(m);
}

static void test_preset_mixtral(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  const char *p = "model.layers.0.block_sparse_moe.";
  char n[128];
  struct tpl__strategy *st;
  struct tpl__error err;
#define P(s) (snprintf(n, sizeof(n), "%s%s", p, s), n)
  add(m, "model.embed_tokens.weight", TPL_DT_BF16, 2, U(64), U(32));
  add(m, "model.layers.0.self_attn.q_proj.weight", TPL_DT_BF16, 2, U(32),
      U(32));
  add(m, "model.layers.0.self_attn.k_proj.weight", TPL_DT_BF16, 2, U(16),
      U(32));
  add(m, "model.layers.0.self_attn.o_proj.weight", TPL_DT_BF16, 2, U(32),
      U(32));
  add(m, P("gate.weight"), TPL_DT_BF16, 2, U(2), U(32));
  for (int e = 0; e < 2; e++) {
    char q[160];
    snprintf(q, sizeof(q), "%sexperts.%d.w1.weight", p, e);
    add(m, q, TPL_DT_BF16, 2, U(48), U(32));
    snprintf(q, sizeof(q), "%sexperts.%d.w2.weight", p, e);
    add(m, q, TPL_DT_BF16, 2, U(32), U(48));
    snprintf(q, sizeof(q), "%sexperts.%d.w3.weight", p, e);
    add(m, q, TPL_DT_BF16, 2, U(48), U(32));
  }
  CHECK_EQ_INT(run_preset("mixtral", 0,
                          "{\"architectures\": [\"MixtralForCausalLM\"], "
                          "\"hidden_size\": 32, \"num_attention_heads\": 4, "
                          "\"num_key_value_heads\": 2, "
                          "\"intermediate_size\": 48, "
                          "\"num_local_experts\": 2}",
                          m, 2, &st, &err),
               0);
  expect_shard(m, st, "model.layers.0.self_attn.q_proj.weight", "_shard_q", 0,
               0);
  expect_shard(m, st, "model.layers.0.self_attn.k_proj.weight", "_shard_k", 0,
               0);
  expect_shard(m, st, "model.layers.0.self_attn.o_proj.weight", "_shard_o", 1,
               0);
  expect_shard(m, st, P("experts.0.w1.weight"), "_shard_w1", 0, 0);
  expect_shard(m, st, P("experts.1.w3.weight"), "_shard_w3", 0, 0);
  expect_shard(m, st, P("experts.1.w2.weight"), "_shard_w2", 1, 0);
  expect_kind(m, st, P("gate.weight"), TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "model.embed_tokens.weight", TPL_RULE_REPLICATE, 1);
#undef P
  free(st);
  tpl__model_free(m);
}

#define PHI3_CFG                                                               \
  "{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 32, "           \
  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "                   \
  "\"intermediate_size\": 48}"

static struct tpl__model *phi3_model(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  add(m, "model.embed_tokens.weight", TPL_DT_BF16, 2, U(64), U(32));
  /* q = 4 heads x 8, k = v = 2 heads x 8: 32 + 16 + 16 = 64 rows. */
  add(m, "model.layers.0.self_attn.qkv_proj.weight", TPL_DT_BF16, 2, U(64),
      U(32));
  add(m, "model.layers.0.self_attn.o_proj.weight", TPL_DT_BF16, 2, U(32),
      U(32));
  add(m, "model.layers.0.mlp.gate_up_proj.weight", TPL_DT_BF16, 2, U(96),
      U(32));
  add(m, "model.layers.0.mlp.down_proj.weight", TPL_DT_BF16, 2, U(32), U(48));
  add(m, "model.layers.0.input_layernorm.weight", TPL_DT_BF16, 1, U(32));
  add(m, "lm_head.weight", TPL_DT_BF16, 2, U(64), U(32));
  return m;
}

static void test_preset_phi3(void) {
  struct tpl__model *m = phi3_model();
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("phi3", 0, PHI3_CFG, m, 2, &st, &err), 0);
  expect_shard(m, st, "model.layers.0.self_attn.qkv_proj.weight", "_shard_qkv",
               0, 3, U(32), U(16), U(16));
  /* HF's fused tensors are MLC's: MLC's func_names (phi3_model.py
   * Phi3ParallelBlock._set_tp). */
  expect_shard(m, st, "model.layers.0.mlp.gate_up_proj.weight", "_shard_mlp_up",
               0, 2, U(48), U(48));
  expect_shard(m, st, "model.layers.0.self_attn.o_proj.weight", "_shard_o", 1,
               0);
  expect_shard(m, st, "model.layers.0.mlp.down_proj.weight", "_shard_mlp_down",
               1, 0);
  expect_kind(m, st, "model.layers.0.input_layernorm.weight",
              TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "lm_head.weight", TPL_RULE_REPLICATE, 1);
  free(st);
  tpl__model_free(m);
}

/* A phi3 whose fused qkv does not match the config is refused by the
 * segs check (segs sum 64, tensor has 48 rows). */
static void test_preset_phi3_wrong_fused_rows(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  add(m, "model.layers.0.self_attn.qkv_proj.weight", TPL_DT_BF16, 2, U(48),
      U(32));
  CHECK_EQ_INT(run_preset("phi3", 0, PHI3_CFG, m, 2, &st, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "qkv_proj.weight");
  CHECK_STR_CONTAINS(err.msg, "preset phi3");
  free(st);
  tpl__model_free(m);
}

static void test_preset_gpt2(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  add(m, "transformer.wte.weight", TPL_DT_F32, 2, U(64), U(32));
  add(m, "transformer.wpe.weight", TPL_DT_F32, 2, U(16), U(32));
  add(m, "transformer.h.0.ln_1.weight", TPL_DT_F32, 1, U(32));
  add(m, "transformer.h.0.ln_1.bias", TPL_DT_F32, 1, U(32));
  add(m, "transformer.h.0.attn.bias", TPL_DT_F32, 4, U(1), U(1), U(16), U(16));
  add(m, "transformer.h.0.attn.c_attn.weight", TPL_DT_F32, 2, U(32), U(96));
  add(m, "transformer.h.0.attn.c_attn.bias", TPL_DT_F32, 1, U(96));
  add(m, "transformer.h.0.attn.c_proj.weight", TPL_DT_F32, 2, U(32), U(32));
  add(m, "transformer.h.0.attn.c_proj.bias", TPL_DT_F32, 1, U(32));
  add(m, "transformer.h.0.mlp.c_fc.weight", TPL_DT_F32, 2, U(32), U(128));
  add(m, "transformer.h.0.mlp.c_fc.bias", TPL_DT_F32, 1, U(128));
  add(m, "transformer.h.0.mlp.c_proj.weight", TPL_DT_F32, 2, U(128), U(32));
  add(m, "transformer.h.0.mlp.c_proj.bias", TPL_DT_F32, 1, U(32));
  add(m, "transformer.ln_f.weight", TPL_DT_F32, 1, U(32));
  /* n_inner null: the MLP is 4 x 32 = 128 wide. */
  CHECK_EQ_INT(run_preset("gpt2", 0,
                          "{\"architectures\": [\"GPT2LMHeadModel\"], "
                          "\"n_embd\": 32, \"n_head\": 4, \"n_inner\": "
                          "null}",
                          m, 2, &st, &err),
               0);
  expect_shard(m, st, "transformer.h.0.attn.c_attn.weight",
               "_shard_c_attn_weight", 1, 3, U(32), U(32), U(32));
  expect_shard(m, st, "transformer.h.0.attn.c_attn.bias", "_shard_c_attn_bias",
               0, 3, U(32), U(32), U(32));
  expect_shard(m, st, "transformer.h.0.attn.c_proj.weight", "_shard_c_proj", 0,
               0);
  expect_kind(m, st, "transformer.h.0.attn.c_proj.bias", TPL_RULE_SCALE_BIAS,
              1);
  expect_shard(m, st, "transformer.h.0.mlp.c_fc.weight",
               "_shard_mlp_c_fc_weight", 1, 0);
  expect_shard(m, st, "transformer.h.0.mlp.c_fc.bias", "_shard_mlp_c_fc_bias",
               0, 0);
  expect_shard(m, st, "transformer.h.0.mlp.c_proj.weight", "_shard_mlp_c_proj",
               0, 0);
  expect_kind(m, st, "transformer.h.0.mlp.c_proj.bias", TPL_RULE_SCALE_BIAS, 1);
  expect_kind(m, st, "transformer.wte.weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "transformer.wpe.weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "transformer.h.0.ln_1.bias", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "transformer.ln_f.weight", TPL_RULE_REPLICATE, 1);
  /* The causal-mask buffer is named by a replicate rule: the preset check
   * refuses layer tensors of 2+ dims that no rule names. */
  expect_kind(m, st, "transformer.h.0.attn.bias", TPL_RULE_REPLICATE, 1);
  free(st);
  /* 3 shards: n_head 4 does not divide. */
  CHECK_EQ_INT(
      run_preset("gpt2", 0, "{\"n_embd\": 32, \"n_head\": 4}", m, 3, &st, &err),
      TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "n_head = 4");
  CHECK_STR_CONTAINS(err.msg, "config.json");
  free(st);
  tpl__model_free(m);
}

static void test_preset_gpt_neox(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  const char *p = "gpt_neox.layers.0.";
  char n[128];
  struct tpl__strategy *st;
  struct tpl__error err;
#define P(s) (snprintf(n, sizeof(n), "%s%s", p, s), n)
  add(m, "gpt_neox.embed_in.weight", TPL_DT_F16, 2, U(64), U(32));
  add(m, P("input_layernorm.weight"), TPL_DT_F16, 1, U(32));
  add(m, P("attention.query_key_value.weight"), TPL_DT_F16, 2, U(96), U(32));
  add(m, P("attention.query_key_value.bias"), TPL_DT_F16, 1, U(96));
  add(m, P("attention.dense.weight"), TPL_DT_F16, 2, U(32), U(32));
  add(m, P("attention.dense.bias"), TPL_DT_F16, 1, U(32));
  add(m, P("mlp.dense_h_to_4h.weight"), TPL_DT_F16, 2, U(128), U(32));
  add(m, P("mlp.dense_h_to_4h.bias"), TPL_DT_F16, 1, U(128));
  add(m, P("mlp.dense_4h_to_h.weight"), TPL_DT_F16, 2, U(32), U(128));
  add(m, P("mlp.dense_4h_to_h.bias"), TPL_DT_F16, 1, U(32));
  add(m, "embed_out.weight", TPL_DT_F16, 2, U(64), U(32));
  CHECK_EQ_INT(run_preset("gpt_neox", 0,
                          "{\"architectures\": [\"GPTNeoXForCausalLM\"], "
                          "\"hidden_size\": 32, \"num_attention_heads\": 4, "
                          "\"intermediate_size\": 128}",
                          m, 4, &st, &err),
               0);
  /* HF interleaves q, k, v per head: not MLC's [q; k; v] layout, so not
   * MLC's _shard_qkv_weight function. */
  expect_shard(m, st, P("attention.query_key_value.weight"),
               "_shard_qkv_interleaved_weight", 0, 0);
  expect_shard(m, st, P("attention.query_key_value.bias"),
               "_shard_qkv_interleaved_bias", 0, 0);
  expect_shard(m, st, P("attention.dense.weight"), "_shard_dense", 1, 0);
  expect_kind(m, st, P("attention.dense.bias"), TPL_RULE_SCALE_BIAS, 1);
  expect_shard(m, st, P("mlp.dense_h_to_4h.weight"),
               "_shard_dense_h_to_4h_weight", 0, 0);
  expect_shard(m, st, P("mlp.dense_h_to_4h.bias"), "_shard_dense_h_to_4h_bias",
               0, 0);
  expect_shard(m, st, P("mlp.dense_4h_to_h.weight"), "_shard_dense_4h_to_h", 1,
               0);
  expect_kind(m, st, P("mlp.dense_4h_to_h.bias"), TPL_RULE_SCALE_BIAS, 1);
  expect_kind(m, st, P("input_layernorm.weight"), TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "gpt_neox.embed_in.weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "embed_out.weight", TPL_RULE_REPLICATE, 1);
#undef P
  free(st);
  tpl__model_free(m);
}

#define MLC_LLAMA_CFG                                                          \
  "{\"model_type\": \"llama\", \"model_config\": {\"hidden_size\": 32, "       \
  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "                   \
  "\"intermediate_size\": 48, \"head_dim\": 8}}"

static void test_preset_mlc_llama(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, ".");
  const char *p = "model.layers.0.";
  char n[128];
  struct tpl__strategy *st;
  struct tpl__error err;
#define P(s) (snprintf(n, sizeof(n), "%s%s", p, s), n)
  add(m, "model.embed_tokens.q_weight", TPL_DT_U32, 2, U(64), U(4));
  add(m, P("self_attn.qkv_proj.q_weight"), TPL_DT_U32, 2, U(64), U(4));
  add(m, P("self_attn.qkv_proj.q_scale"), TPL_DT_F16, 2, U(64), U(1));
  add(m, P("self_attn.o_proj.weight"), TPL_DT_F16, 2, U(32), U(32));
  add(m, P("mlp.gate_up_proj.weight"), TPL_DT_F16, 2, U(96), U(32));
  add(m, P("mlp.down_proj.weight"), TPL_DT_F16, 2, U(32), U(48));
  add(m, P("input_layernorm.weight"), TPL_DT_F16, 1, U(32));
  add(m, "lm_head.q_weight", TPL_DT_U32, 2, U(64), U(4));
  CHECK_EQ_INT(run_preset("llama", 1, MLC_LLAMA_CFG, m, 2, &st, &err), 0);
  /* group_quantization.py, GroupQuantizeLinear.from_linear: the weight's
   * dim and segs, func_name "<name>_q_weight" / "<name>_q_scale". */
  expect_shard(m, st, P("self_attn.qkv_proj.q_weight"), "_shard_qkv_q_weight",
               0, 3, U(32), U(16), U(16));
  expect_shard(m, st, P("self_attn.qkv_proj.q_scale"), "_shard_qkv_q_scale", 0,
               3, U(32), U(16), U(16));
  expect_shard(m, st, P("self_attn.o_proj.weight"), "_shard_o", 1, 0);
  expect_shard(m, st, P("mlp.gate_up_proj.weight"), "_shard_mlp_up", 0, 2,
               U(48), U(48));
  expect_shard(m, st, P("mlp.down_proj.weight"), "_shard_mlp_down", 1, 0);
  expect_kind(m, st, "model.embed_tokens.q_weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, "lm_head.q_weight", TPL_RULE_REPLICATE, 1);
  expect_kind(m, st, P("input_layernorm.weight"), TPL_RULE_REPLICATE, 1);
  free(st);
  tpl__model_free(m);
#undef P
}

static void test_preset_mlc_qwen2_c_attn(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  add(m, "model.layers.0.self_attn.c_attn.weight", TPL_DT_F16, 2, U(64), U(32));
  add(m, "model.layers.0.self_attn.c_attn.bias", TPL_DT_F16, 1, U(64));
  CHECK_EQ_INT(run_preset("qwen2", 1, MLC_LLAMA_CFG, m, 2, &st, &err), 0);
  /* qwen2_model.py QWen2DecoderLayer._set_tp: weight and bias are two
   * shard functions. */
  expect_shard(m, st, "model.layers.0.self_attn.c_attn.weight",
               "_shard_qkv_weight", 0, 3, U(32), U(16), U(16));
  expect_shard(m, st, "model.layers.0.self_attn.c_attn.bias", "_shard_qkv_bias",
               0, 3, U(32), U(16), U(16));
  free(st);
  tpl__model_free(m);
}

static void test_preset_mlc_mixtral(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  add(m, "model.layers.0.moe.gate.weight", TPL_DT_F16, 2, U(2), U(32));
  add(m, "model.layers.0.moe.e1_e3.weight", TPL_DT_F16, 3, U(2), U(96), U(32));
  add(m, "model.layers.0.moe.e2.weight", TPL_DT_F16, 3, U(2), U(32), U(48));
  CHECK_EQ_INT(run_preset("mixtral", 1, MLC_LLAMA_CFG, m, 2, &st, &err), 0);
  expect_shard(m, st, "model.layers.0.moe.e1_e3.weight", "_shard_mlp_up", 1, 2,
               U(48), U(48));
  expect_shard(m, st, "model.layers.0.moe.e2.weight", "_shard_mlp_down", 2, 0);
  expect_kind(m, st, "model.layers.0.moe.gate.weight", TPL_RULE_REPLICATE, 1);
  free(st);
  tpl__model_free(m);
}

static void test_preset_mlc_needs_model_config(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(
      run_preset("llama", 1, "{\"model_type\": \"llama\"}", m, 2, &st, &err),
      TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "'model_config'");
  free(st);
  tpl__model_free(m);
}

/* --- presets: divisibility and config errors --- */

static void expect_preset_refused(const char *preset, const char *cfg,
                                  uint32_t n, int code, const char *frag1,
                                  const char *frag2) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset(preset, 0, cfg, m, n, &st, &err), code);
  CHECK_STR_CONTAINS(err.msg, "config.json");
  CHECK_STR_CONTAINS(err.msg, frag1);
  CHECK_STR_CONTAINS(err.msg, frag2);
  free(st);
  tpl__model_free(m);
}

/* The counts a refusal offers keep every rank's slice whole fp8 blocks
 * (quant.c refuses the others): heads 8 x head_dim 128, kv 2, I 512 in
 * 128 x 128 blocks; 8 shards divide every size but give I / 8 = 64 rows,
 * half a block, so only 1, 2 and 4 work (the same config unquantized
 * offers 8 too). */
static void test_good_counts_honour_blocks(void) {
  static const char *const cfg =
      "{\"hidden_size\": 1024, \"num_attention_heads\": 8, "
      "\"num_key_value_heads\": 2, \"intermediate_size\": 512%s}";
  char fp8[512], plain[512];
  snprintf(fp8, sizeof(fp8), cfg,
           ", \"quantization_config\": {\"quant_method\": \"fp8\", "
           "\"weight_block_size\": [128, 128]}");
  snprintf(plain, sizeof(plain), cfg, "");
  expect_preset_refused("llama", fp8, 3, TPL_EINDIVISIBLE,
                        "num_attention_heads = 8",
                        "that work for this model: 1, 2, 4)");
  expect_preset_refused("llama", plain, 3, TPL_EINDIVISIBLE,
                        "num_attention_heads = 8",
                        "that work for this model: 1, 2, 4, 8)");
  /* gpt-oss's MXFP4 experts: I / N whole 32-blocks (I = 96: only N = 1
   * and 3 of the divisors 1, 2, 3, 4, 6, 8 ... that the heads allow). */
  expect_preset_refused("gpt_oss",
                        "{\"hidden_size\": 64, \"num_attention_heads\": 12, "
                        "\"num_key_value_heads\": 12, \"head_dim\": 16, "
                        "\"intermediate_size\": 96, \"quantization_config\": "
                        "{\"quant_method\": \"mxfp4\"}}",
                        5, TPL_EINDIVISIBLE, "num_attention_heads = 12",
                        "that work for this model: 1, 3)");
}

static void test_divisible_kv_heads(void) {
  /* heads 6, kv 2, I 48: 3 shards neither divide nor are a multiple of
   * the kv heads; 1, 2 divide all three, 6 replicates each kv head 3
   * times (vLLM's rule). */
  expect_preset_refused("llama",
                        "{\"hidden_size\": 48, \"num_attention_heads\": 6, "
                        "\"num_key_value_heads\": 2, \"intermediate_size\": "
                        "48}",
                        3, TPL_EINDIVISIBLE,
                        "num_key_value_heads = 2: expected a multiple of the "
                        "3 shards or a divisor of them",
                        "that work for this model: 1, 2, 6)");
  /* kv 6 > N = 4, neither dividing the other */
  expect_preset_refused("llama",
                        "{\"hidden_size\": 48, \"num_attention_heads\": 12, "
                        "\"num_key_value_heads\": 6, \"intermediate_size\": "
                        "48}",
                        4, TPL_EINDIVISIBLE, "num_key_value_heads = 6",
                        ": 1, 2, 3, 6, 12)");
}

/* The parts of strategy `name`'s first three segments (0: N ways). */
static void expect_parts(const struct tpl__model *m,
                         const struct tpl__strategy *st, const char *name,
                         uint32_t p0, uint32_t p1, uint32_t p2) {
  for (size_t i = 0; i < m->ntensors; i++) {
    if (strcmp(m->tensors[i].name, name) != 0) continue;
    CHECK_EQ_INT(st[i].kind, TPL_RULE_SHARD);
    CHECK_EQ_U64(st[i].spec.parts[0], p0);
    CHECK_EQ_U64(st[i].spec.parts[1], p1);
    CHECK_EQ_U64(st[i].spec.parts[2], p2);
    return;
  }
  CHECK(!"tensor not in the model");
}

/* N = 4 > 2 kv heads: k/v projections and their biases cut into 2
 * replicated parts (vLLM's QKVParallelLinear); q, o and the MLP as
 * before.  N = 2 cuts them N ways. */
static void test_kv_replicated_hf(void) {
  struct tpl__model *m = llama_model(1);
  struct tpl__strategy *st;
  struct tpl__error err;
  const char *l1 = "model.layers.1.self_attn.";
  char n[128];
#define L1(x) (snprintf(n, sizeof(n), "%s%s", l1, x), n)
  CHECK_EQ_INT(run_preset("qwen2", 0, LLAMA_CFG, m, 4, &st, &err), 0);
  expect_parts(m, st, L1("k_proj.weight"), 2, 0, 0);
  expect_parts(m, st, L1("v_proj.weight"), 2, 0, 0);
  expect_parts(m, st, L1("k_proj.bias"), 2, 0, 0);
  expect_parts(m, st, L1("v_proj.bias"), 2, 0, 0);
  expect_parts(m, st, L1("q_proj.weight"), 0, 0, 0);
  expect_parts(m, st, L1("o_proj.weight"), 0, 0, 0);
  free(st);
  CHECK_EQ_INT(run_preset("qwen2", 0, LLAMA_CFG, m, 2, &st, &err), 0);
  expect_parts(m, st, L1("k_proj.weight"), 0, 0, 0);
  free(st);
#undef L1
  tpl__model_free(m);
}

/* MLC keeps MLC's rule (its attention asserts kv % N == 0), and HF
 * internlm2's grouped wqkv cannot replicate: both refused at N = 4. */
static void test_kv_replication_refused(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("llama", 1, MLC_LLAMA_CFG, m, 4, &st, &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "num_key_value_heads = 2: expected a multiple "
                              "of the 4 shards (MLC LLM refuses");
  free(st);
  CHECK_EQ_INT(run_preset("internlm2", 0, LLAMA_CFG, m, 4, &st, &err),
               TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "interleaves each kv head");
  free(st);
  tpl__model_free(m);
}

static void test_divisible_heads(void) {
  /* heads 6 (kv defaults to 6), I 48: common divisors 1, 2, 3, 6. */
  expect_preset_refused("mistral",
                        "{\"hidden_size\": 48, \"num_attention_heads\": 6, "
                        "\"intermediate_size\": 48}",
                        4, TPL_EINDIVISIBLE, "num_attention_heads = 6",
                        ": 1, 2, 3, 6)");
}

static void test_divisible_intermediate(void) {
  /* heads 8, kv 8, I 36: 8 shards fail on I; 1, 2, 4 divide all. */
  expect_preset_refused("qwen2",
                        "{\"hidden_size\": 64, \"num_attention_heads\": 8, "
                        "\"num_key_value_heads\": 8, \"intermediate_size\": "
                        "36}",
                        8, TPL_EINDIVISIBLE, "intermediate_size = 36",
                        ": 1, 2, 4)");
}

static void test_config_missing_heads(void) {
  expect_preset_refused("llama",
                        "{\"hidden_size\": 32, \"intermediate_size\": 48}", 2,
                        TPL_EFORMAT, "'num_attention_heads'", "found none");
}

static void test_config_bad_heads(void) {
  expect_preset_refused("llama",
                        "{\"hidden_size\": 32, \"num_attention_heads\": "
                        "\"4\", \"intermediate_size\": 48}",
                        2, TPL_EFORMAT, "'num_attention_heads'",
                        "positive integer");
  expect_preset_refused("llama",
                        "{\"hidden_size\": 32, \"num_attention_heads\": 0, "
                        "\"intermediate_size\": 48}",
                        2, TPL_EFORMAT, "'num_attention_heads'",
                        "positive integer");
}

static void test_config_missing_intermediate(void) {
  expect_preset_refused("phi3",
                        "{\"hidden_size\": 32, \"num_attention_heads\": 4}", 2,
                        TPL_EFORMAT, "'intermediate_size'", "found none");
}

static void test_config_hidden_not_multiple(void) {
  expect_preset_refused("phi3",
                        "{\"hidden_size\": 30, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 8}",
                        2, TPL_EFORMAT, "hidden size 30", "'head_dim'");
}

static void test_unknown_preset(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy *st;
  struct tpl__error err;
  CHECK_EQ_INT(run_preset("falcon", 0, LLAMA_CFG, m, 2, &st, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "falcon");
  free(st);
  tpl__model_free(m);
  CHECK(tpl__preset_known("gpt_neox"));
  CHECK(!tpl__preset_known("gpt-neox"));
}

static void expect_detect(const char *cfg, int mlc, int rc_want,
                          const char *want) {
  json_t *j = json_loads(cfg, 0, NULL);
  const char *name = NULL;
  struct tpl__error err = {0};
  CHECK(j != NULL);
  CHECK_EQ_INT(tpl__preset_detect(j, mlc, "config.json", &name, &err), rc_want);
  if (rc_want == 0)
    CHECK(name != NULL && strcmp(name, want) == 0);
  else
    CHECK_STR_CONTAINS(err.msg, want);
  json_decref(j);
}

static void test_detect(void) {
  expect_detect("{\"architectures\": [\"LlamaForCausalLM\"]}", 0, 0, "llama");
  expect_detect("{\"architectures\": [\"MistralForCausalLM\"]}", 0, 0,
                "mistral");
  expect_detect("{\"architectures\": [\"Qwen2ForCausalLM\"]}", 0, 0, "qwen2");
  expect_detect("{\"architectures\": [\"GemmaForCausalLM\"]}", 0, 0, "gemma");
  expect_detect("{\"architectures\": [\"MixtralForCausalLM\"]}", 0, 0,
                "mixtral");
  expect_detect("{\"architectures\": [\"Phi3ForCausalLM\"]}", 0, 0, "phi3");
  expect_detect("{\"architectures\": [\"GPT2LMHeadModel\"]}", 0, 0, "gpt2");
  expect_detect("{\"architectures\": [\"GPTNeoXForCausalLM\"]}", 0, 0,
                "gpt_neox");
  /* Unknown architecture: model_type decides. */
  expect_detect("{\"architectures\": [\"MyLlama\"], \"model_type\": "
                "\"llama\"}",
                0, 0, "llama");
  /* MLC configs: model_type only. */
  expect_detect("{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": "
                "\"phi3\"}",
                1, 0, "phi3");
  expect_detect("{\"architectures\": [\"FalconForCausalLM\"], "
                "\"model_type\": \"falcon\"}",
                0, TPL_EPLAN, "'FalconForCausalLM'");
  expect_detect("{}", 0, TPL_EPLAN, "pass --plan");
}

/* --- resolving --plan from a model directory --- */

static char tmpdir[64];

static void write_text(const char *dir, const char *name, const char *text) {
  char *path = tpl__path_join(dir, name);
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
  free(path);
}

static void remove_file(const char *dir, const char *name) {
  char *path = tpl__path_join(dir, name);
  unlink(path);
  free(path);
}

static void test_resolve_auto(void) {
  struct tpl__model *m = llama_model(0);
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  struct tpl__error err = {0};
  free(m->dir);
  m->dir = strdup(tmpdir);
  write_text(tmpdir, "config.json", LLAMA_CFG);
  CHECK_EQ_INT(plan_for("auto", m, 2, &p, &st, &err), 0);
  if (p != NULL) {
    CHECK_STR_CONTAINS(p->source, "preset llama");
    CHECK_STR_CONTAINS(p->source, "config.json");
    check_llama_strategies(m, st);
  }
  free(st);
  tpl__plan_free(p);
  /* An explicit preset uses the same config (and its checks). */
  CHECK_EQ_INT(plan_for("gemma", m, 3, &p, &st, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "config.json");
  remove_file(tmpdir, "config.json");
  CHECK_EQ_INT(plan_for("auto", m, 2, &p, &st, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "config.json");
  CHECK_STR_CONTAINS(err.msg, "--plan");
  CHECK_EQ_INT(plan_for("llama", m, 2, &p, &st, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "preset 'llama'");
  write_text(tmpdir, "config.json", "{\"architectures\": ");
  CHECK_EQ_INT(plan_for("auto", m, 2, &p, &st, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "config.json");
  remove_file(tmpdir, "config.json");
  tpl__model_free(m);
}

static void test_resolve_auto_mlc(void) {
  struct tpl__model *m = new_model(TPL_FMT_MLC, tmpdir);
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  struct tpl__error err = {0};
  /* One layer of MLC's llama, so that the preset's check passes. */
  add(m, "model.layers.0.self_attn.qkv_proj.weight", TPL_DT_F16, 2, U(64),
      U(32));
  add(m, "model.layers.0.self_attn.o_proj.weight", TPL_DT_F16, 2, U(32), U(32));
  add(m, "model.layers.0.mlp.gate_up_proj.weight", TPL_DT_F16, 2, U(96), U(32));
  add(m, "model.layers.0.mlp.down_proj.weight", TPL_DT_F16, 2, U(32), U(48));
  /* A config.json alone is not what an MLC directory is read by. */
  write_text(tmpdir, "config.json", LLAMA_CFG);
  CHECK_EQ_INT(plan_for("auto", m, 2, &p, &st, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "mlc-chat-config.json");
  write_text(tmpdir, "mlc-chat-config.json", MLC_LLAMA_CFG);
  CHECK_EQ_INT(plan_for("auto", m, 2, &p, &st, &err), 0);
  if (p != NULL) {
    const char *qkv = "model.layers.0.self_attn.qkv_proj.weight";
    size_t i = 0;
    CHECK_STR_CONTAINS(p->source, "mlc");
    while (i < p->nrules && !tpl__glob_match(p->rules[i].match, qkv))
      i++;
    CHECK(i < p->nrules);
    if (i < p->nrules) CHECK_EQ_U64(p->rules[i].spec.nsegs, 3);
  }
  free(st);
  tpl__plan_free(p);
  remove_file(tmpdir, "config.json");
  remove_file(tmpdir, "mlc-chat-config.json");
  tpl__model_free(m);
}

static void test_resolve_file(void) {
  struct tpl__model *m = llama_model(0);
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  struct tpl__error err = {0};
  char *path = tpl__path_join(tmpdir, "p.json");
  write_text(tmpdir, "p.json",
             "{\"rules\": [{\"match\": \"*.weight\", \"dim\": 0}]}");
  CHECK_EQ_INT(plan_for(path, m, 1, &p, &st, &err), 0);
  if (p != NULL) {
    CHECK_STR_CONTAINS(p->source, "p.json");
    CHECK_EQ_INT(st[0].kind, TPL_RULE_SHARD);
    CHECK(strcmp(st[0].func_name, "_shard_0") == 0);
  }
  free(st);
  tpl__plan_free(p);
  remove_file(tmpdir, "p.json");
  CHECK_EQ_INT(plan_for(path, m, 1, &p, &st, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "plan file not found");
  CHECK_STR_CONTAINS(err.msg, "p.json");
  free(path);
  tpl__model_free(m);
}

/* --- shard info --- */

static json_t *param(json_t *root, size_t i) {
  return json_array_get(json_object_get(root, "params"), i);
}

static void check_ints(const json_t *a, size_t n, ...) {
  va_list ap;
  CHECK(json_is_array(a));
  CHECK_EQ_U64(json_array_size(a), n);
  va_start(ap, n);
  for (size_t i = 0; i < n; i++)
    CHECK_EQ_U64(json_integer_value(json_array_get(a, i)),
                 va_arg(ap, uint64_t));
  va_end(ap);
}

static int str_is(const json_t *v, const char *s) {
  return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* The shard info of model `m` under strategies `st`, rendered from the
 * job built from them (as every command does).  Returns 0 or the code. */
static int build_info(const struct tpl__model *m,
                      const struct tpl__strategy *st, uint32_t n,
                      const struct tpl__rank_info *ranks, int bias_family,
                      json_t **out) {
  struct tpl__job *job = NULL;
  struct tpl__error err = {0};
  int rc = tpl__job_from_model(m, st, NULL, "test", "m",
                               &(struct tpl__grid){n, n, 1, 1, 0}, bias_family,
                               &job, &err);
  if (rc == 0) rc = tpl__shardinfo_build(job, ranks, out);
  tpl__job_free(job);
  return rc;
}

/* DESIGN.md's shard-info example: q_proj [2048, 2048] bf16, dim 0, N 2. */
static void test_shardinfo_design_example(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[2];
  json_t *root = NULL, *q, *pre, *norm;
  add(m, "model.layers.0.self_attn.q_proj.weight", TPL_DT_BF16, 2, U(2048),
      U(2048));
  add(m, "model.norm.weight", TPL_DT_BF16, 1, U(2048));
  memset(st, 0, sizeof(st));
  st[0].kind = TPL_RULE_SHARD;
  st[0].rule = 0;
  st[0].func_name = "_shard_q";
  st[0].spec.dim = 0;
  st[1].kind = TPL_RULE_REPLICATE;
  st[1].rule = -1;
  CHECK_EQ_INT(build_info(m, st, 2, NULL, TPL_BIASF_MLC, &root), 0);
  REQUIRE(root != NULL);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(root, "tensor_parallel_shards")), 2);
  CHECK(json_is_true(json_object_get(root, "bias_scaling")));
  q = param(root, 0);
  CHECK(str_is(json_object_get(q, "name"),
               "model.layers.0.self_attn.q_proj.weight"));
  CHECK(str_is(json_object_get(q, "dtype"), "bfloat16"));
  check_ints(json_object_get(q, "shape"), 2, U(1024), U(2048));
  pre = json_array_get(json_object_get(q, "preprocs"), 0);
  CHECK(str_is(json_object_get(pre, "func_name"), "_shard_q"));
  check_ints(json_object_get(pre, "in_shape"), 2, U(2048), U(2048));
  check_ints(json_object_get(pre, "out_shape"), 3, U(2), U(1024), U(2048));
  CHECK(str_is(json_object_get(pre, "out_dtype"), "bfloat16"));
  CHECK_EQ_U64(json_integer_value(json_object_get(q, "dim")), 0);
  check_ints(json_object_get(q, "segs"), 1, U(1024));
  CHECK(json_real_value(json_object_get(q, "bias_scale")) == 1.0);
  CHECK(json_object_get(q, "ranks") == NULL);
  norm = param(root, 1);
  check_ints(json_object_get(norm, "shape"), 1, U(2048));
  CHECK_EQ_U64(json_array_size(json_object_get(norm, "preprocs")), 0);
  CHECK(json_object_get(norm, "dim") == NULL);
  CHECK(json_object_get(norm, "segs") == NULL);
  CHECK(json_real_value(json_object_get(norm, "bias_scale")) == 1.0);
  json_decref(root);
  tpl__model_free(m);
}

/* MLC's compile.py (_apply_preproc_to_params_and_check_pipeline) adds a
 * shard preproc only when tensor_parallel_shards > 1, and _compile's
 * _get_param_metadata writes pipeline_stages ([0] for one stage) on every
 * param. */
static void test_shardinfo_n1_no_preproc(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[2];
  json_t *root = NULL, *q, *ps;
  add(m, "q.weight", TPL_DT_F16, 2, U(8), U(4));
  add(m, "norm.weight", TPL_DT_F16, 1, U(4));
  memset(st, 0, sizeof(st));
  st[0].kind = TPL_RULE_SHARD;
  st[0].func_name = "_shard_q";
  st[1].kind = TPL_RULE_REPLICATE;
  st[1].rule = -1;
  CHECK_EQ_INT(build_info(m, st, 1, NULL, TPL_BIASF_MLC, &root), 0);
  REQUIRE(root != NULL);
  q = param(root, 0);
  CHECK_EQ_U64(json_array_size(json_object_get(q, "preprocs")), 0);
  check_ints(json_object_get(q, "shape"), 2, U(8), U(4));
  CHECK_EQ_U64(json_integer_value(json_object_get(q, "dim")), 0);
  for (size_t i = 0; i < 2; i++) {
    ps = json_object_get(param(root, i), "pipeline_stages");
    CHECK_EQ_U64(json_array_size(ps), 1);
    CHECK(json_is_integer(json_array_get(ps, 0)) &&
          json_integer_value(json_array_get(ps, 0)) == 0);
  }
  json_decref(root);
  tpl__model_free(m);
}

/* The GQA row of DESIGN.md's table: [8, 2], segs [4, 2, 2], N 2. */
static void test_shardinfo_fused_segs(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  json_t *root = NULL, *p;
  add(m, "qkv", TPL_DT_F32, 2, U(8), U(2));
  memset(st, 0, sizeof(st));
  st[0].kind = TPL_RULE_SHARD;
  st[0].func_name = "_shard_qkv";
  st[0].spec.nsegs = 3;
  st[0].spec.segs[0] = 4;
  st[0].spec.segs[1] = 2;
  st[0].spec.segs[2] = 2;
  CHECK_EQ_INT(build_info(m, st, 2, NULL, TPL_BIASF_MLC, &root), 0);
  p = param(root, 0);
  check_ints(json_object_get(p, "shape"), 2, U(4), U(2));
  check_ints(json_object_get(p, "segs"), 3, U(2), U(1), U(1));
  check_ints(json_object_get(json_array_get(json_object_get(p, "preprocs"), 0),
                             "out_shape"),
             3, U(2), U(4), U(2));
  CHECK(str_is(json_object_get(p, "dtype"), "float32"));
  json_decref(root);
  tpl__model_free(m);
}

static void test_shardinfo_bias_scale_and_ranks(void) {
  struct tpl__model *m = new_model(TPL_FMT_SAFETENSORS, ".");
  struct tpl__strategy st[1];
  struct tpl__rank_info ranks[4] = {
      {8, 0x1}, {8, 0xff}, {8, 0x9f3c04a1d2e5b6c7ull}, {8, 0}};
  json_t *root = NULL, *r;
  add(m, "o.bias", TPL_DT_F16, 1, U(4));
  memset(st, 0, sizeof(st));
  st[0].kind = TPL_RULE_SCALE_BIAS;
  CHECK_EQ_INT(build_info(m, st, 4, ranks, TPL_BIASF_MLC, &root), 0);
  CHECK(json_real_value(json_object_get(param(root, 0), "bias_scale")) == 0.25);
  CHECK(str_is(json_object_get(param(root, 0), "bias"), "scale"));
  CHECK(str_is(json_object_get(root, "bias_policy"), "mlc"));
  /* Replicated: full shape on every rank, no preprocs. */
  check_ints(json_object_get(param(root, 0), "shape"), 1, U(4));
  r = json_object_get(param(root, 0), "ranks");
  CHECK_EQ_U64(json_array_size(r), 4);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(json_array_get(r, 1), "rank")), 1);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(json_array_get(r, 1), "nbytes")), 8);
  CHECK(str_is(json_object_get(json_array_get(r, 1), "xxh3"),
               "00000000000000ff"));
  CHECK(str_is(json_object_get(json_array_get(r, 2), "xxh3"),
               "9f3c04a1d2e5b6c7"));
  json_decref(root);
  CHECK_EQ_INT(build_info(m, st, 4, NULL, TPL_BIASF_WHOLE, &root), 0);
  CHECK(json_is_false(json_object_get(root, "bias_scaling")));
  CHECK(json_real_value(json_object_get(param(root, 0), "bias_scale")) == 1.0);
  CHECK(str_is(json_object_get(param(root, 0), "bias"), "whole"));
  CHECK(str_is(json_object_get(root, "bias_policy"), "whole"));
  json_decref(root);
  /* vllm: whole, or rank0 where the rule says vLLM's loader zeroes the
   * other ranks' copies (bias_scale is shard 0's factor). */
  CHECK_EQ_INT(build_info(m, st, 4, NULL, TPL_BIASF_VLLM, &root), 0);
  CHECK(str_is(json_object_get(param(root, 0), "bias"), "whole"));
  CHECK(str_is(json_object_get(root, "bias_policy"), "vllm"));
  json_decref(root);
  st[0].bias_vllm = TPL_BIAS_RANK0;
  CHECK_EQ_INT(build_info(m, st, 4, NULL, TPL_BIASF_VLLM, &root), 0);
  CHECK(str_is(json_object_get(param(root, 0), "bias"), "rank0"));
  CHECK(json_real_value(json_object_get(param(root, 0), "bias_scale")) == 1.0);
  json_decref(root);
  tpl__model_free(m);
}

int main(void) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/tpload-test-plan.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) {
    printf("Bail out! mkdtemp failed\n");
    return 1;
  }
  RUN(test_glob_literal);
  RUN(test_glob_star);
  RUN(test_glob_question);
  RUN(test_glob_utf8);
  RUN(test_glob_no_backtracking_blowup);
  RUN(test_parse_design_example);
  RUN(test_parse_default_name);
  RUN(test_parse_empty_rules);
  RUN(test_refuse_not_json);
  RUN(test_refuse_not_object);
  RUN(test_refuse_duplicate_key);
  RUN(test_refuse_no_rules);
  RUN(test_refuse_rules_not_array);
  RUN(test_refuse_unknown_top_key);
  RUN(test_refuse_rule_not_object);
  RUN(test_refuse_unknown_rule_key);
  RUN(test_refuse_match_missing);
  RUN(test_parse_interleave);
  RUN(test_drop_layers);
  RUN(test_apply_interleave);
  RUN(test_refuse_match_not_string);
  RUN(test_refuse_match_empty);
  RUN(test_refuse_match_with_nul);
  RUN(test_refuse_no_action);
  RUN(test_refuse_two_actions);
  RUN(test_refuse_dim_negative);
  RUN(test_refuse_dim_not_integer);
  RUN(test_refuse_dim_too_large);
  RUN(test_refuse_name_without_dim);
  RUN(test_refuse_segs_without_dim);
  RUN(test_refuse_name_not_string);
  RUN(test_refuse_segs_not_array);
  RUN(test_refuse_segs_empty);
  RUN(test_refuse_segs_zero);
  RUN(test_refuse_segs_not_integer);
  RUN(test_refuse_segs_too_many);
  RUN(test_refuse_scale_bias_false);
  RUN(test_parse_bias_key);
  RUN(test_refuse_bias_key);
  RUN(test_good_counts_honour_blocks);
  RUN(test_refuse_replicate_false);
  RUN(test_refuse_flag_not_bool);
  RUN(test_refuse_too_many_rules);
  RUN(test_first_match_wins);
  RUN(test_unmatched_replicated);
  RUN(test_apply_scalar_refused);
  RUN(test_apply_dim_out_of_range);
  RUN(test_apply_segs_do_not_sum);
  RUN(test_apply_indivisible);
  RUN(test_apply_scale_bias_dtype);
  RUN(test_apply_zero_shards);
  RUN(test_preset_llama);
  RUN(test_preset_mistral_gemma);
  RUN(test_preset_qwen2_biases);
  RUN(test_preset_mixtral);
  RUN(test_preset_phi3);
  RUN(test_preset_phi3_wrong_fused_rows);
  RUN(test_preset_gpt2);
  RUN(test_preset_gpt_neox);
  RUN(test_preset_mlc_llama);
  RUN(test_preset_mlc_qwen2_c_attn);
  RUN(test_preset_mlc_mixtral);
  RUN(test_preset_mlc_needs_model_config);
  RUN(test_divisible_kv_heads);
  RUN(test_kv_replicated_hf);
  RUN(test_kv_replication_refused);
  RUN(test_divisible_heads);
  RUN(test_divisible_intermediate);
  RUN(test_config_missing_heads);
  RUN(test_config_bad_heads);
  RUN(test_config_missing_intermediate);
  RUN(test_config_hidden_not_multiple);
  RUN(test_unknown_preset);
  RUN(test_detect);
  RUN(test_resolve_auto);
  RUN(test_resolve_auto_mlc);
  RUN(test_resolve_file);
  RUN(test_shardinfo_design_example);
  RUN(test_shardinfo_n1_no_preproc);
  RUN(test_shardinfo_fused_segs);
  RUN(test_shardinfo_bias_scale_and_ranks);
  RUN(test_preset_ep_moe_size);
  RUN(test_preset_ep_expert_mlp);
  RUN(test_parse_expert);
  RUN(test_apply_expert_rule);
  RUN(test_ep_expert_rule);
  RUN(test_ep_expert_rule_scales);
  free_kept_plans();
  rmdir(tmpdir);
  return tap_done();
}
