/* test_quant.c - MLC quantized params: the rule each one gets, checked
 * against tables written from MLC LLM's source (mlc-ai/mlc-llm,
 * python/mlc_llm/), on weight directories `tpload synth --format mlc
 * [--quant Q]` writes; plus one case per refusal and per rule of the
 * config reader (src/quant.c).
 *
 * The shard tables: each model file's _set_tp (llama_model.py,
 * mistral_model.py, gemma_model.py: LlamaDecoderLayer and kin; qwen2:
 * qwen2_model.py QWen2DecoderLayer; phi3: phi3_model.py Phi3ParallelBlock)
 * names a ShardSingleDim(name, dim, segs) per weight.  The quantized
 * params follow quantization/utils.py apply_sharding and:
 *   group_quantization.py GroupQuantizeLinear.from_linear: q_weight and
 *     q_scale keep dim and segs, func "<name>_q_weight" / "<name>_q_scale";
 *   per_tensor_quantization.py PerTensorQuantizeLinear.from_linear:
 *     q_weight "<name>_q_weight"; q_scale ("the same for all shards") and
 *     q_calibration_scale are not sharded;
 *   block_scale_quantization.py BlockScaleQuantizeLinear.from_linear: the
 *     fp8 weight keeps "<name>"; weight_scale_inv "<name>_scale_inv" with
 *     segs // weight_block_size[dim]; the static activation_scale
 *     ([in / block]) is cut with a row-parallel weight only (see quant.h
 *     for why not MLC's literal dim).
 * At N = 1 the same rules apply (MLC then emits no preproc; shardinfo). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dtype.h"
#include "job.h"
#include "jsonu.h"
#include "model.h"
#include "plan.h"
#include "plan_for.h"
#include "planner.h"
#include "quant.h"
#include "quant_ct.h"
#include "synth.h"
#include "tap.h"
#include "tmpdir.h"

/* Model sizes of the synth directories: E 256, 8 heads of 32, 4 kv heads,
 * I 512 -> q 256, kv 128; the fp8 block-scale ones E 1024, heads of 128,
 * I 1024 -> q 1024, kv 512 (whole 128-blocks for N = 4). */
enum seg_kind { NONE, QKV, II };

struct mod {
  const char *module; /* "self_attn.qkv_proj" (under layers.N.) */
  const char *param;  /* "weight" or "bias" */
  const char *func;   /* MLC's ShardSingleDim name */
  int dim;
  int segs;
};

struct arch_table {
  const char *arch;
  struct mod mods[6];
};

/* _set_tp of each model file (see the file comment). */
static const struct arch_table tables[] = {
    {"llama",
     {{"self_attn.qkv_proj", "weight", "_shard_qkv", 0, QKV},
      {"self_attn.o_proj", "weight", "_shard_o", 1, NONE},
      {"mlp.gate_up_proj", "weight", "_shard_mlp_up", 0, II},
      {"mlp.down_proj", "weight", "_shard_mlp_down", 1, NONE}}},
    {"mistral",
     {{"self_attn.qkv_proj", "weight", "_shard_qkv", 0, QKV},
      {"self_attn.o_proj", "weight", "_shard_o", 1, NONE},
      {"mlp.gate_up_proj", "weight", "_shard_mlp_up", 0, II},
      {"mlp.down_proj", "weight", "_shard_mlp_down", 1, NONE}}},
    {"gemma",
     {{"self_attn.qkv_proj", "weight", "_shard_qkv", 0, QKV},
      {"self_attn.o_proj", "weight", "_shard_o", 1, NONE},
      {"mlp.gate_up_proj", "weight", "_shard_mlp_up", 0, II},
      {"mlp.down_proj", "weight", "_shard_mlp_down", 1, NONE}}},
    {"qwen2",
     {{"self_attn.c_attn", "weight", "_shard_qkv_weight", 0, QKV},
      {"self_attn.c_attn", "bias", "_shard_qkv_bias", 0, QKV},
      {"self_attn.o_proj", "weight", "_shard_o", 1, NONE},
      {"mlp.gate_up_proj", "weight", "_shard_mlp_up", 0, II},
      {"mlp.down_proj", "weight", "_shard_mlp_down", 1, NONE}}},
    {"phi3",
     {{"mixer.qkv_proj", "weight", "_shard_qkv", 0, QKV},
      {"mixer.out_proj", "weight", "_shard_o", 1, NONE},
      {"mlp.gate_up_proj", "weight", "_shard_mlp_up", 0, II},
      {"mlp.down_proj", "weight", "_shard_mlp_down", 1, NONE}}},
};

struct sizes {
  uint64_t q, kv, inter;
};

static size_t fill_segs(int kind, const struct sizes *s, uint64_t *v) {
  if (kind == QKV) {
    v[0] = s->q;
    v[1] = v[2] = s->kv;
    return 3;
  }
  if (kind == II) {
    v[0] = v[1] = s->inter;
    return 2;
  }
  return 0;
}

/* --- writing the directory and the plan file --- */

static char *synth_dir(const char *arch, const char *quant, uint64_t hidden,
                       uint64_t inter) {
  struct tpl__synth_opts o;
  struct tpl__synth_summary sum;
  struct tpl__error err;
  char *dir = make_dir("tpl-quant");
  memset(&o, 0, sizeof(o));
  o.arch = tpl__synth_arch_from_name(arch);
  o.format = TPL_SYNTH_MLC;
  o.dtype = TPL_DT_F16;
  o.layers = 1;
  o.hidden = hidden;
  o.heads = 8;
  o.kv_heads = 4;
  o.intermediate = inter;
  o.vocab = 128;
  o.force = 1;
  o.quant = quant != NULL ? tpl__quant_find(quant) : NULL;
  if (dir == NULL || tpl__synth_resolve(&o, &err) != 0 ||
      tpl__synth_write(&o, dir, &sum, &err) != 0) {
    printf("# synth %s %s: %s\n", arch, quant ? quant : "", err.msg);
    drop_dir(dir);
    return NULL;
  }
  return dir;
}

/* The table as a plan file: rules on "<module>.<param>" only; quantized
 * params must get theirs by derivation. */
static char *write_plan(const char *dir, const struct arch_table *a,
                        const struct sizes *s) {
  json_t *rules = json_array(), *root;
  char path[1024], match[256];
  for (size_t i = 0; i < ARRAY_SIZE(a->mods) && a->mods[i].module; i++) {
    const struct mod *m = &a->mods[i];
    uint64_t v[3];
    size_t n = fill_segs(m->segs, s, v);
    json_t *r;
    snprintf(match, sizeof(match), "*.%s.%s", m->module, m->param);
    r = json_pack("{s:s, s:s, s:i}", "match", match, "name", m->func, "dim",
                  m->dim);
    if (n) json_object_set_new(r, "segs", tpl__json_u64_array(v, n));
    json_array_append_new(rules, r);
  }
  snprintf(path, sizeof(path), "%s/mlc-plan.json", dir);
  root = json_pack("{s:o}", "rules", rules);
  json_dump_file(root, path, 0);
  json_decref(root);
  return strdup(path);
}

/* --- what MLC gives each param --- */

struct want {
  int shard;
  char func[128];
  int dim;
  size_t nsegs;
  uint64_t segs[3];
};

/* Finds the module of `name` ("...<module>.<param>") in the table. */
static const struct mod *find_mod(const struct arch_table *a, const char *name,
                                  const char **param) {
  for (size_t i = 0; i < ARRAY_SIZE(a->mods) && a->mods[i].module; i++) {
    const char *at = strstr(name, a->mods[i].module);
    if (at == NULL || at[strlen(a->mods[i].module)] != '.') continue;
    *param = at + strlen(a->mods[i].module) + 1;
    if (strcmp(*param, "bias") == 0 && strcmp(a->mods[i].param, "bias"))
      continue;
    if (strcmp(*param, "bias") != 0 && strcmp(a->mods[i].param, "weight"))
      continue;
    return &a->mods[i];
  }
  return NULL;
}

static void set(struct want *w, const struct mod *m, const char *suffix,
                int dim, const struct sizes *s, uint64_t unit) {
  w->shard = 1;
  snprintf(w->func, sizeof(w->func), "%s%s", m->func, suffix);
  w->dim = dim;
  w->nsegs = fill_segs(m->segs, s, w->segs);
  for (size_t j = 0; j < w->nsegs; j++)
    w->segs[j] /= unit;
}

static struct want expect(const struct arch_table *a, const char *name,
                          const struct sizes *s) {
  struct want w;
  const char *param = NULL;
  const struct mod *m = find_mod(a, name, &param);
  memset(&w, 0, sizeof(w));
  if (m == NULL) return w; /* embeddings, norms, lm_head: replicated */
  if (!strcmp(param, "weight") || !strcmp(param, "bias"))
    set(&w, m, "", m->dim, s, 1);
  else if (!strcmp(param, "q_weight"))
    set(&w, m, "_q_weight", m->dim, s, 1);
  else if (!strcmp(param, "q_scale"))
    set(&w, m, "_q_scale", m->dim, s, 1);
  else if (!strcmp(param, "weight_scale_inv"))
    set(&w, m, "_scale_inv", m->dim, s, 128);
  else if (!strcmp(param, "activation_scale") && m->dim == 1)
    set(&w, m, "_activation_scale", 0, s, 128);
  return w; /* per-tensor q_scale, q_calibration_scale, column act_scale */
}

static int check_one(const struct tpl__tensor *t,
                     const struct tpl__strategy *st, const struct want *w,
                     int per_tensor) {
  int ok = 1;
  if (per_tensor && strstr(t->name, ".q_scale") != NULL) {
    ok = st->kind == TPL_RULE_REPLICATE; /* shape [1]: replicated */
  } else if (!w->shard) {
    ok = st->kind != TPL_RULE_SHARD;
  } else {
    ok = st->kind == TPL_RULE_SHARD && strcmp(st->func_name, w->func) == 0 &&
         st->spec.dim == w->dim && st->spec.nsegs == w->nsegs;
    for (size_t j = 0; ok && j < w->nsegs; j++)
      ok = st->spec.segs[j] == w->segs[j];
  }
  if (!ok)
    printf("# %s: got kind %d func %s dim %d nsegs %zu; expected %s %s dim "
           "%d nsegs %zu\n",
           t->name, st->kind, st->func_name ? st->func_name : "-", st->spec.dim,
           st->spec.nsegs, w->shard ? "shard" : "no shard", w->func, w->dim,
           w->nsegs);
  return ok;
}

/* Applies `plan` (a path or "auto") for N = 1, 2, 4 and checks every
 * param against the table.  Returns the number of params checked. */

static size_t check_matrix(const char *dir, const char *plan,
                           const struct arch_table *a, const struct sizes *s,
                           int per_tensor) {
  static const uint32_t ns[] = {1, 2, 4};
  struct tpl__model *m = NULL;
  struct tpl__error err;
  size_t checked = 0;
  CHECK_EQ_INT(tpl__model_open(dir, &m, &err), 0);
  for (size_t k = 0; m != NULL && k < ARRAY_SIZE(ns); k++) {
    struct tpl__plan *p = NULL;
    struct tpl__strategy *st = NULL;
    int rc = plan_for(plan, m, ns[k], &p, &st, &err);
    if (rc != 0) printf("# %s N=%u: %s\n", a->arch, ns[k], err.msg);
    CHECK_EQ_INT(rc, 0);
    for (size_t i = 0; rc == 0 && i < m->ntensors; i++) {
      struct want w = expect(a, m->tensors[i].name, s);
      CHECK(check_one(&m->tensors[i], &st[i], &w, per_tensor));
      checked++;
    }
    free(st);
    tpl__plan_free(p);
  }
  tpl__model_free(m);
  return checked;
}

static void run_arch(const struct arch_table *a, const char *quant,
                     int use_preset_too) {
  int block = quant != NULL && strstr(quant, "block") != NULL;
  struct sizes s =
      block ? (struct sizes){1024, 512, 1024} : (struct sizes){256, 128, 512};
  char *dir = synth_dir(a->arch, quant, block ? 1024 : 256, s.inter);
  char *plan;
  int per_tensor = quant != NULL && strstr(quant, "e4m3_e4m3") != NULL;
  REQUIRE(dir != NULL);
  plan = write_plan(dir, a, &s);
  CHECK(check_matrix(dir, plan, a, &s, per_tensor) > 0);
  if (use_preset_too) check_matrix(dir, "auto", a, &s, per_tensor);
  free(plan);
  drop_dir(dir);
}

/* The presets engineer owns the qwen2 (c_attn) and phi3 (mixer.*) presets;
 * the llama-likes whose preset already carries MLC's names are checked
 * through "auto" too. */
static void test_mlc_unquantized(void) {
  for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
    run_arch(&tables[i], NULL, i < 3);
}

static void test_mlc_q4f16_1(void) {
  for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
    run_arch(&tables[i], "q4f16_1", i < 3);
}

/* MLC offers per-tensor fp8 for llama (model.py: supports_per_tensor). */
static void test_mlc_e4m3_per_tensor(void) {
  run_arch(&tables[0], "e4m3_e4m3_f16", 1);
}

/* Block-scale fp8 as block_scale_quantization.py writes it (MLC offers it
 * for qwen3, ministral3, deepseek_v3: llama-shaped layers). */
static void test_mlc_block_scale(void) {
  run_arch(&tables[0], "fp8_e4m3fn_bf16_block_scale_static_activation", 1);
  run_arch(&tables[3], "fp8_e4m3fn_bf16_block_scale", 0);
}

/* --- refusals --- */

static int plan_n(const char *dir, const char *plan, uint32_t n,
                  struct tpl__error *err) {
  struct tpl__model *m = NULL;
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  int rc = tpl__model_open(dir, &m, err);
  if (rc == 0) rc = plan_for(plan, m, n, &p, &st, err);
  free(st);
  tpl__plan_free(p);
  tpl__model_free(m);
  return rc;
}

/* compile.py: "KN layout (q3f16_0 and q4f16_0) is not supported for
 * tensor parallelism". */
static void test_refuse_kn_layout(void) {
  char *dir = synth_dir("llama", "q4f16_0", 256, 512);
  struct tpl__error err;
  REQUIRE(dir != NULL);
  CHECK_EQ_INT(plan_n(dir, "auto", 2, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "q4f16_0");
  CHECK_STR_CONTAINS(err.msg, "KN");
  CHECK_EQ_INT(plan_n(dir, "auto", 1, &err), 0);
  drop_dir(dir);
}

/* compile.py / convert_weight.py refuse ft-quant under TP; AWQ layers
 * carry no shard strategy (awq_quantization.py). */
static void test_refuse_ft_and_awq(void) {
  struct tpl__quant_info q;
  struct tpl__error err;
  tpl__quant_info_init(&q);
  q.scheme = tpl__quant_find("q4f16_ft");
  CHECK_EQ_INT(tpl__quant_check_tp(&q, 2, "d", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "q4f16_ft");
  CHECK_EQ_INT(tpl__quant_check_tp(&q, 1, "d", &err), 0);
  q.scheme = tpl__quant_find("q4f16_autoawq");
  CHECK_EQ_INT(tpl__quant_check_tp(&q, 4, "d", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "q4f16_autoawq");
  q.scheme = tpl__quant_find("q4f16_1");
  CHECK_EQ_INT(tpl__quant_check_tp(&q, 4, "d", &err), 0);
}

/* GroupQuantizeLinear: the input dim's groups must split over N.  q3f16_1
 * has groups of 40: o_proj's 256 inputs are 7 groups. */
static void test_refuse_uneven_groups(void) {
  char *dir = synth_dir("llama", "q3f16_1", 256, 512);
  struct tpl__error err;
  REQUIRE(dir != NULL);
  CHECK_EQ_INT(plan_n(dir, "auto", 2, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "o_proj.q_scale");
  CHECK_STR_CONTAINS(err.msg, "7 quantization groups of q3f16_1");
  CHECK_EQ_INT(plan_n(dir, "auto", 1, &err), 0);
  drop_dir(dir);
}

/* block_scale_quantization.py divides segs by the block: a kv segment of
 * 4 x 24 = 96 is no whole number of 128-blocks. */
static void test_refuse_segs_not_blocks(void) {
  struct tpl__synth_opts o;
  struct tpl__synth_summary sum;
  struct tpl__error err;
  char *dir = make_dir("tpl-quant");
  memset(&o, 0, sizeof(o));
  o.arch = TPL_ARCH_LLAMA;
  o.format = TPL_SYNTH_MLC;
  o.dtype = TPL_DT_BF16;
  o.layers = 1;
  o.hidden = 192;
  o.heads = 8;
  o.kv_heads = 4;
  o.force = 1;
  o.quant = tpl__quant_find("fp8_e4m3fn_bf16_block_scale");
  CHECK(dir != NULL && tpl__synth_resolve(&o, &err) == 0 &&
        tpl__synth_write(&o, dir, &sum, &err) == 0);
  CHECK_EQ_INT(plan_n(dir, "auto", 2, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "qkv_proj.weight_scale_inv");
  CHECK_STR_CONTAINS(err.msg, "whole number of 128-wide blocks");
  drop_dir(dir);
}

/* In-memory models for the plan-level rules. */
static struct tpl__model *model_of(const char *const *names, const int *dt,
                                   const uint64_t (*shape)[2], size_t n) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, ".");
  for (size_t i = 0; m != NULL && i < n; i++) {
    struct tpl__tensor t;
    memset(&t, 0, sizeof(t));
    t.name = strdup(names[i]);
    t.dtype = dt[i];
    t.ndim = shape[i][1] ? 2 : 1;
    t.shape[0] = shape[i][0];
    t.shape[1] = shape[i][1];
    t.nbytes = tpl__tensor_numel(&t) * tpl__dtype_size(dt[i]);
    t.stored_bytes = t.nbytes;
    if (tpl__model_add_tensor(m, &t) != 0) free(t.name);
  }
  return m;
}

static int apply_json(const char *json, const struct tpl__model *m, uint32_t n,
                      struct tpl__strategy *st, struct tpl__plan **out,
                      struct tpl__error *err) {
  struct tpl__plan *p = NULL;
  int rc = tpl__plan_parse(json, strlen(json), "plan.json", &p, err);
  if (rc == 0) rc = tpl__plan_apply(p, m, n, st, err);
  if (out != NULL && rc == 0)
    *out = p;
  else
    tpl__plan_free(p);
  return rc;
}

/* A rule on q_weight alone leaves q_scale replicated: refused. */
static void test_refuse_scale_left_whole(void) {
  static const char *const names[] = {"l.q_proj.q_weight", "l.q_proj.q_scale"};
  static const int dt[] = {TPL_DT_U32, TPL_DT_F16};
  static const uint64_t shape[][2] = {{8, 4}, {8, 1}};
  struct tpl__model *m = model_of(names, dt, shape, 2);
  struct tpl__strategy st[2];
  struct tpl__plan *p = NULL;
  struct tpl__error err;
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"*.q_weight\",\"dim\":0}]}",
                          m, 2, st, NULL, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "file plan.json");
  CHECK_STR_CONTAINS(err.msg, "tensor 'l.q_proj.q_scale'");
  CHECK_STR_CONTAINS(err.msg, "weight 'l.q_proj.q_weight'");
  /* The same model under a rule on the base weight: both derived. */
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"*.q_proj.weight\","
                          "\"dim\":0,\"name\":\"_shard_q\"}]}",
                          m, 2, st, &p, &err),
               0);
  CHECK(st[1].kind == TPL_RULE_SHARD &&
        strcmp(st[1].func_name, "_shard_q_q_scale") == 0);
  tpl__plan_free(p);
  tpl__model_free(m);
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

/* An fp8 weight cut so that a rank's rows split a 128-block: refused at
 * N = 2 for 192 rows (96 each; vLLM's validate_fp8_block_shape refuses
 * the same), along dim 0 (gate) and dim 1 (down), with no segs; whole
 * blocks per rank (256 rows at N = 2) and N = 1 pass. */
static void test_refuse_block_cut_inside(void) {
  static const char *const names[] = {
      "l.gate_proj.weight", "l.gate_proj.weight_scale_inv",
      "l.down_proj.weight", "l.down_proj.weight_scale_inv"};
  static const int dt[] = {TPL_DT_F8_E4M3, TPL_DT_F32, TPL_DT_F8_E4M3,
                           TPL_DT_F32};
  static const uint64_t gate[][2] = {{192, 256}, {2, 2}, {256, 256}, {2, 2}};
  static const uint64_t down[][2] = {{256, 256}, {2, 2}, {256, 192}, {2, 2}};
  static const char *const plan =
      "{\"rules\":[{\"match\":\"*.gate_proj.weight\",\"dim\":0},"
      "{\"match\":\"*.down_proj.weight\",\"dim\":1}]}";
  struct tpl__model *mg = model_of(names, dt, gate, 4);
  struct tpl__model *md = model_of(names, dt, down, 4);
  struct tpl__strategy st[4];
  struct tpl__error err;
  CHECK_EQ_INT(apply_json(plan, mg, 2, st, NULL, &err), TPL_EINDIVISIBLE);
  /* the method and its blocks first */
  CHECK_STR_CONTAINS(err.msg, "fp8 weight_block_size [128, 128]: tensor "
                              "'l.gate_proj.weight_scale_inv'");
  CHECK_STR_CONTAINS(err.msg, "(192 / 2 = 96)");
  CHECK_STR_CONTAINS(err.msg, "128-wide quantization blocks");
  CHECK(ends_with(err.msg, "shard counts that work: 1"));
  CHECK_EQ_INT(apply_json(plan, mg, 1, st, NULL, &err), 0);
  CHECK_EQ_INT(apply_json(plan, md, 2, st, NULL, &err), TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "tensor 'l.down_proj.weight_scale_inv'");
  CHECK_STR_CONTAINS(err.msg, "along dim 1");
  CHECK_EQ_INT(apply_json(plan, md, 1, st, NULL, &err), 0);
  tpl__model_free(md);
  /* 256 rows: 128 each at N = 2; 64 at N = 4 splits blocks again. */
  md = model_of(names, dt, down, 2);
  CHECK_EQ_INT(apply_json(plan, md, 2, st, NULL, &err), 0);
  CHECK(st[1].kind == TPL_RULE_SHARD && st[1].spec.dim == 0);
  CHECK_EQ_INT(apply_json(plan, md, 4, st, NULL, &err), TPL_EINDIVISIBLE);
  CHECK(ends_with(err.msg, "shard counts that work: 1, 2"));
  tpl__model_free(md);
  tpl__model_free(mg);
}

/* HF GPTQ names: scales / qzeros beside a sharded qweight. */
static void test_refuse_hf_scales_left_whole(void) {
  static const char *const names[] = {"x.qweight", "x.qzeros", "x.scales"};
  static const int dt[] = {TPL_DT_I32, TPL_DT_I32, TPL_DT_F16};
  static const uint64_t shape[][2] = {{4, 8}, {2, 1}, {2, 8}};
  struct tpl__model *m = model_of(names, dt, shape, 3);
  struct tpl__strategy st[3];
  struct tpl__error err;
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.qweight\",\"dim\":1},"
                          "{\"match\":\"x.qzeros\",\"dim\":1}]}",
                          m, 2, st, NULL, &err),
               TPL_EINDIVISIBLE); /* qzeros [2, 1]: 1 not divisible by 2 */
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.qweight\",\"dim\":1}]}",
                          m, 2, st, NULL, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "tensor 'x.qzeros'");
  tpl__model_free(m);
}

/* Per-tensor scales ([1]) are the same for every slice: not refused. */
static void test_per_tensor_scale_replicated(void) {
  static const char *const names[] = {"x.q_weight", "x.q_scale",
                                      "x.q_calibration_scale"};
  static const int dt[] = {TPL_DT_F8_E4M3, TPL_DT_F32, TPL_DT_F32};
  static const uint64_t shape[][2] = {{8, 4}, {1, 0}, {1, 0}};
  struct tpl__model *m = model_of(names, dt, shape, 3);
  struct tpl__strategy st[3];
  struct tpl__plan *p = NULL;
  struct tpl__error err;
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.weight\",\"dim\":0,"
                          "\"name\":\"_shard_x\"}]}",
                          m, 4, st, &p, &err),
               0);
  CHECK(st[0].kind == TPL_RULE_SHARD &&
        strcmp(st[0].func_name, "_shard_x_q_weight") == 0);
  CHECK_EQ_INT(st[1].kind, TPL_RULE_REPLICATE);
  CHECK_EQ_INT(st[2].kind, TPL_RULE_REPLICATE);
  tpl__plan_free(p);
  tpl__model_free(m);
}

/* A q_weight whose base rule cuts dim 1 with segs that describe the
 * unpacked width: MLC passes the segs unchanged (utils.py), which cannot
 * sum to the packed width, so it is refused naming the tensor. */
static void test_refuse_segs_on_packed_dim(void) {
  static const char *const names[] = {"x.q_weight", "x.q_scale"};
  static const int dt[] = {TPL_DT_U32, TPL_DT_F16};
  static const uint64_t shape[][2] = {{4, 8}, {4, 2}};
  struct tpl__model *m = model_of(names, dt, shape, 2);
  struct tpl__strategy st[2];
  struct tpl__error err;
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.weight\",\"dim\":1,"
                          "\"segs\":[32,32]}]}",
                          m, 2, st, NULL, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "x.q_weight");
  tpl__model_free(m);
}

/* tpl__job_check_unused on the job built from `st` (m's tensors). */
static int unused_rules(const struct tpl__plan *p, const struct tpl__model *m,
                        const struct tpl__strategy *st, int strict,
                        struct tpl__error *err) {
  struct tpl__job *job = NULL;
  int rc = tpl__job_from_model(m, st, NULL, p->source, "m",
                               &(struct tpl__grid){2, 2, 1, 1, 0},
                               TPL_BIASF_MLC, &job, err);
  if (rc == 0) rc = tpl__job_check_unused(job, p, strict, err);
  tpl__job_free(job);
  return rc;
}

/* A plan-file rule that matches nothing: a warning, an error when strict;
 * a rule used only through a quantized param counts as used. */
static void test_unused_rule(void) {
  static const char *const names[] = {"x.q_weight", "x.q_scale", "n.weight"};
  static const int dt[] = {TPL_DT_U32, TPL_DT_F16, TPL_DT_F16};
  static const uint64_t shape[][2] = {{4, 8}, {4, 2}, {4, 0}};
  struct tpl__model *m = model_of(names, dt, shape, 3);
  struct tpl__strategy st[3];
  struct tpl__plan *p = NULL;
  struct tpl__error err;
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.weight\",\"dim\":0},"
                          "{\"match\":\"n.weight\",\"replicate\":true},"
                          "{\"match\":\"typo.*\",\"dim\":0},"
                          "{\"match\":\"also.*\",\"replicate\":true}]}",
                          m, 2, st, &p, &err),
               0);
  CHECK_EQ_INT(unused_rules(p, m, st, 0, &err), 1);
  CHECK_STR_CONTAINS(err.msg, "rule 2 ('typo.*') matches no tensor");
  CHECK_STR_CONTAINS(err.msg, "2 unused rules");
  CHECK_EQ_INT(unused_rules(p, m, st, 1, &err), TPL_EPLAN);
  p->from_file = 0; /* a preset names tensors an arch may lack */
  CHECK_EQ_INT(unused_rules(p, m, st, 1, &err), 0);
  tpl__plan_free(p);
  CHECK_EQ_INT(apply_json("{\"rules\":[{\"match\":\"x.weight\",\"dim\":0}]}", m,
                          2, st, &p, &err),
               0);
  CHECK_EQ_INT(unused_rules(p, m, st, 1, &err), 0);
  tpl__plan_free(p);
  tpl__model_free(m);
}

/* --- the config reader --- */

static int parse_cfg(const char *text, int mlc, struct tpl__quant_info *q,
                     struct tpl__error *err) {
  json_t *cfg = json_loads(text, 0, NULL);
  int rc = tpl__quant_info_parse(cfg, mlc, "mlc-chat-config.json", q, err);
  json_decref(cfg);
  return rc;
}

/* quantization_config.quant_method: read from HF configs only, kept when
 * malformed; only fp8, mxfp4 and compressed-tensors pass the method
 * check (quant_ct.c then checks the scheme). */
static void test_quant_method(void) {
  static const char *const refused[] = {"quark", "awq", "gptq", "bitsandbytes",
                                        "gguf"};
  static const char *const ok[] = {"fp8", "mxfp4", "compressed-tensors",
                                   "modelopt"};
  struct tpl__quant_info q;
  struct tpl__error err;
  char cfg[128];
  CHECK_EQ_INT(parse_cfg("{}", 0, &q, &err), 0);
  CHECK(q.method[0] == '\0' && tpl__quant_check_method(&q, "c", &err) == 0);
  CHECK_EQ_INT(parse_cfg("{\"quantization_config\":{\"weight_block_size\":"
                         "[128,128]}}",
                         0, &q, &err),
               0);
  CHECK_EQ_INT(tpl__quant_check_method(&q, "c", &err), 0);
  for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
    snprintf(cfg, sizeof(cfg),
             "{\"quantization_config\":{\"quant_method\":"
             "\"%s\"}}",
             ok[i]);
    CHECK_EQ_INT(parse_cfg(cfg, 0, &q, &err), 0);
    CHECK_EQ_INT(tpl__quant_check_method(&q, "c", &err), 0);
  }
  for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
    snprintf(cfg, sizeof(cfg),
             "{\"quantization_config\":{\"quant_method\":"
             "\"%s\"}}",
             refused[i]);
    CHECK_EQ_INT(parse_cfg(cfg, 0, &q, &err), 0);
    CHECK(strcmp(q.method, refused[i]) == 0);
    CHECK_EQ_INT(tpl__quant_check_method(&q, "config.json", &err), TPL_EPLAN);
    CHECK_STR_CONTAINS(err.msg, "config.json: quantization_config."
                                "quant_method '");
    CHECK_STR_CONTAINS(err.msg, refused[i]);
  }
  CHECK_EQ_INT(
      parse_cfg("{\"quantization_config\":{\"quant_method\":7}}", 0, &q, &err),
      0);
  CHECK_EQ_INT(tpl__quant_check_method(&q, "c", &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "'(not a string)'");
  /* MLC configs have no quant_method: the scheme decides. */
  CHECK_EQ_INT(parse_cfg("{\"quantization_config\":{\"quant_method\":"
                         "\"awq\"}}",
                         1, &q, &err),
               0);
  CHECK(q.method[0] == '\0');
}

/* compressed-tensors' quantization_config: one case per rule of
 * tpl__ct_parse / tpl__ct_check. */
static int ct_of(const char *qc, struct tpl__ct_scheme *s,
                 struct tpl__error *err) {
  json_t *j = json_loads(qc, 0, NULL);
  tpl__ct_parse(j, s);
  json_decref(j);
  return tpl__ct_check(s, "config.json", err);
}

static void test_ct_scheme(void) {
  struct tpl__ct_scheme s;
  struct tpl__error err;
#define GROUP0(w)                                                              \
  "{\"format\":\"pack-quantized\",\"config_groups\":{\"group_0\":"             \
  "{\"weights\":" w "}}}"
  CHECK_EQ_INT(ct_of(GROUP0("{\"num_bits\":4,\"strategy\":\"group\","
                            "\"group_size\":128,\"actorder\":\"group\"}"),
                     &s, &err),
               0);
  CHECK(s.present && s.num_bits == 4 && s.group_size == 128 && s.actorder);
  CHECK(strcmp(s.strategy, "group") == 0);
  CHECK_EQ_INT(
      ct_of(GROUP0("{\"num_bits\":4,\"strategy\":\"group\"}"), &s, &err),
      TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "a group strategy without group_size");
  CHECK_EQ_INT(
      ct_of(GROUP0("{\"num_bits\":3,\"strategy\":\"channel\"}"), &s, &err),
      TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "other than 4 or 8 bits");
  CHECK_EQ_INT(ct_of("{\"format\":\"float-quantized\",\"config_groups\":"
                     "{\"g\":{\"weights\":{\"num_bits\":8,\"strategy\":"
                     "\"block\",\"block_structure\":[128]}}}}",
                     &s, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "without a two-number block_structure");
  CHECK_EQ_INT(ct_of("{\"format\":\"float-quantized\",\"config_groups\":"
                     "{\"g\":{\"weights\":{\"num_bits\":8,\"strategy\":"
                     "\"block\",\"block_structure\":[128,64]}}}}",
                     &s, &err),
               0);
  CHECK(s.block[0] == 128 && s.block[1] == 64);
  CHECK_EQ_INT(ct_of("{\"format\":\"marlin-24\"}", &s, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "config.json: compressed-tensors format "
                              "'marlin-24'");
  CHECK_EQ_INT(ct_of("{\"format\":\"int-quantized\",\"config_groups\":{"
                     "\"a\":{\"weights\":{\"num_bits\":8,\"strategy\":"
                     "\"channel\"}},\"b\":{\"weights\":{\"num_bits\":4,"
                     "\"strategy\":\"channel\"}}}}",
                     &s, &err),
               TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "different weight schemes");
#undef GROUP0
  /* ModelOpt: NVFP4 groups of 16 (or group_size), FP8 per tensor. */
  {
    json_t *j = json_loads("{\"quant_algo\":\"NVFP4\"}", 0, NULL);
    tpl__ct_parse_modelopt(j, &s);
    json_decref(j);
    CHECK(s.present && s.num_bits == 4 && s.group_size == 16);
    CHECK_EQ_INT(tpl__ct_check(&s, "c", &err), 0);
    j = json_loads("{\"quant_algo\":\"MXFP8\"}", 0, NULL);
    tpl__ct_parse_modelopt(j, &s);
    json_decref(j);
    CHECK_EQ_INT(tpl__ct_check(&s, "c", &err), TPL_EPLAN);
    CHECK_STR_CONTAINS(err.msg, "quant_algo 'MXFP8': expected NVFP4 or FP8");
  }
}

/* tpl__ct_derive, one case per rule (quant_ct.h). */
static void test_ct_derive(void) {
  struct tpl__ct_scheme s;
  struct tpl__tensor w, t;
  struct tpl__shard_spec row = {.dim = 0}, col = {.dim = 1}, out;
  struct tpl__error err;
  int whole;
  memset(&s, 0, sizeof(s));
  s.present = 1;
  memset(&w, 0, sizeof(w));
  memset(&t, 0, sizeof(t));
  w.name = "x.weight_packed";
  w.ndim = 2;
  w.shape[0] = 32; /* 32 rows, 64 inputs packed 8 per int32 */
  w.shape[1] = 8;
  t.name = "x.weight_zero_point";
  t.ndim = 2;
  t.shape[0] = 4; /* 8 rows per zero-point word */
  t.shape[1] = 2;
  /* Zero points along the rows: 16 rows a rank = 2 words at N = 2; 8 at
   * N = 4 = 1 word; 4 at N = 8 splits a word. */
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_ZERO, &s, &t, &w, &row, 2, &out, &whole, &err), 0);
  CHECK(!whole && out.dim == 0);
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_ZERO, &s, &t, &w, &row, 8, &out, &whole, &err),
      TPL_EINDIVISIBLE);
  CHECK_STR_CONTAINS(err.msg, "whole number of the 8 rows one packed zero");
  /* Under an input cut: along the groups, whole per channel. */
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_ZERO, &s, &t, &w, &col, 2, &out, &whole, &err), 0);
  CHECK(!whole && out.dim == 1);
  t.name = "x.weight_scale";
  t.shape[0] = 32;
  t.shape[1] = 1;
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_SCALE, &s, &t, &w, &col, 2, &out, &whole, &err), 0);
  CHECK(whole);
  t.shape[1] = 2;
  s.actorder = 1; /* activation order repeats the scales on every rank */
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_SCALE, &s, &t, &w, &col, 2, &out, &whole, &err), 0);
  CHECK(whole);
  /* g_idx: cut along its only dim under an input cut, else whole. */
  t.name = "x.weight_g_idx";
  t.ndim = 1;
  t.shape[0] = 64;
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_GIDX, &s, &t, &w, &col, 2, &out, &whole, &err), 0);
  CHECK(!whole && out.dim == 0);
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_GIDX, &s, &t, &w, &row, 2, &out, &whole, &err), 0);
  CHECK(whole);
  /* Segs along the packed input dim are refused. */
  col.nsegs = 2;
  col.segs[0] = col.segs[1] = 32;
  CHECK_EQ_INT(
      tpl__ct_derive(TPL_CT_PACKED, &s, &w, &w, &col, 2, &out, &whole, &err),
      TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "no segs along the packed input dim");
}

static void test_config_reader(void) {
  struct tpl__quant_info q;
  struct tpl__error err;
  CHECK_EQ_INT(parse_cfg("{\"quantization\":\"q4f16_1\","
                         "\"tensor_parallel_shards\":2,\"model_config\":"
                         "{\"weight_block_size\":[64,32]}}",
                         1, &q, &err),
               0);
  CHECK(q.scheme == tpl__quant_find("q4f16_1"));
  CHECK(strcmp(q.scheme_name, "q4f16_1") == 0);
  CHECK_EQ_U64(q.config_shards, 2);
  CHECK_EQ_U64(q.block[0], 64);
  CHECK_EQ_U64(q.block[1], 32);
  /* Unknown schemes keep their name; nothing else is assumed. */
  CHECK_EQ_INT(parse_cfg("{\"quantization\":\"q9f16_9\"}", 1, &q, &err), 0);
  CHECK(q.scheme == NULL && strcmp(q.scheme_name, "q9f16_9") == 0);
  CHECK_EQ_U64(q.block[0], 128);
  /* HF: quantization_config.weight_block_size. */
  CHECK_EQ_INT(parse_cfg("{\"quantization_config\":{\"weight_block_size\":"
                         "[128,64]},\"quantization\":\"q4f16_1\"}",
                         0, &q, &err),
               0);
  CHECK_EQ_U64(q.block[1], 64);
  CHECK(q.scheme == NULL); /* "quantization" is MLC's key only */
  CHECK_EQ_INT(parse_cfg("{\"quantization\":4}", 1, &q, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "'quantization'");
  CHECK_EQ_INT(parse_cfg("{\"tensor_parallel_shards\":0}", 1, &q, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "'tensor_parallel_shards'");
  CHECK_EQ_INT(parse_cfg("{\"model_config\":{\"weight_block_size\":[128]}}", 1,
                         &q, &err),
               TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "'weight_block_size'");
  CHECK_EQ_INT(parse_cfg("{\"model_config\":{\"weight_block_size\":[0,1]}}", 1,
                         &q, &err),
               TPL_EFORMAT);
}

/* A plan file on an HF checkpoint never needed config.json: a broken one
 * is ignored.  An MLC directory's mlc-chat-config.json says how quantized
 * params are cut: a broken one is refused, naming it. */
static void test_config_load_errors(void) {
  static const char rules[] =
      "{\"rules\":[{\"match\":\"*\",\"replicate\":true}]}";
  char *mlc = synth_dir("llama", "q4f16_1", 256, 512);
  struct tpl__synth_opts o;
  struct tpl__synth_summary sum;
  struct tpl__error err;
  char *hf = make_dir("tpl-quant"), plan[1024];
  memset(&o, 0, sizeof(o));
  o.arch = TPL_ARCH_LLAMA;
  o.dtype = TPL_DT_BF16;
  o.layers = 1;
  o.force = 1;
  CHECK(hf != NULL && mlc != NULL && tpl__synth_resolve(&o, &err) == 0 &&
        tpl__synth_write(&o, hf, &sum, &err) == 0);
  if (hf == NULL || mlc == NULL) goto out;
  write_bytes(hf, "config.json", "{", 1);
  write_bytes(hf, "plan.json", rules, strlen(rules));
  snprintf(plan, sizeof(plan), "%s/plan.json", hf);
  CHECK_EQ_INT(plan_n(hf, plan, 2, &err), 0);
  write_bytes(mlc, "mlc-chat-config.json", "{\"quantization\":7}", 18);
  CHECK_EQ_INT(plan_n(mlc, plan, 2, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "mlc-chat-config.json");
out:
  drop_dir(hf);
  drop_dir(mlc);
}

static void test_param_names(void) {
  char base[64];
  CHECK_EQ_INT(tpl__quant_param("a.b.q_weight", base, sizeof(base)),
               TPL_QP_Q_WEIGHT);
  CHECK(strcmp(base, "a.b.weight") == 0);
  CHECK_EQ_INT(tpl__quant_param("a.q_scale", base, sizeof(base)),
               TPL_QP_Q_SCALE);
  CHECK_EQ_INT(tpl__quant_param("a.weight_scale_inv", base, sizeof(base)),
               TPL_QP_SCALE_INV);
  CHECK_EQ_INT(tpl__quant_param("a.activation_scale", base, sizeof(base)),
               TPL_QP_ACT_SCALE);
  CHECK_EQ_INT(tpl__quant_param("a.q_calibration_scale", base, sizeof(base)),
               TPL_QP_Q_CALIB);
  CHECK_EQ_INT(tpl__quant_param("a.weight", base, sizeof(base)), TPL_QP_NONE);
  CHECK_EQ_INT(tpl__quant_param("q_weight", base, sizeof(base)), TPL_QP_NONE);
  CHECK_EQ_INT(tpl__quant_param("a.xq_weight", base, sizeof(base)),
               TPL_QP_NONE);
  CHECK_EQ_INT(tpl__quant_param("abcdefgh.q_weight", base, 10), TPL_QP_NONE);
}

int main(void) {
  RUN(test_mlc_unquantized);
  RUN(test_mlc_q4f16_1);
  RUN(test_mlc_e4m3_per_tensor);
  RUN(test_mlc_block_scale);
  RUN(test_refuse_kn_layout);
  RUN(test_refuse_ft_and_awq);
  RUN(test_refuse_uneven_groups);
  RUN(test_refuse_segs_not_blocks);
  RUN(test_refuse_block_cut_inside);
  RUN(test_quant_method);
  RUN(test_ct_scheme);
  RUN(test_ct_derive);
  RUN(test_refuse_scale_left_whole);
  RUN(test_refuse_hf_scales_left_whole);
  RUN(test_per_tensor_scale_replicated);
  RUN(test_refuse_segs_on_packed_dim);
  RUN(test_unused_rule);
  RUN(test_config_reader);
  RUN(test_config_load_errors);
  RUN(test_param_names);
  return tap_done();
}
