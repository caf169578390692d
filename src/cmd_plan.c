/* cmd_plan.c - `tpload plan MODEL --shards N [--plan P]`: resolves the plan
 * for MODEL and N and prints the shard info every rank would get, in the
 * format of preshard's shard-info.json without the per-rank checksums,
 * plus the resolved rules under "plan". */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "jsonu.h"
#include "model.h"
#include "plan.h"
#include "planner.h"
#include "shardinfo.h"

static const char plan_help[] =
    "usage: tpload plan MODEL --shards N [--plan P] [--no-bias-scaling]\n"
    "                   [--strict]\n"
    "\n"
    "Resolves the shard plan for MODEL cut N ways and prints it as JSON:\n"
    "the format of shard-info.json (tensor_parallel_shards, bias_scaling,\n"
    "params in checkpoint order with per-rank shape, dtype, preprocs,\n"
    "dim, per-shard segs, bias_scale) without the per-rank checksums, and\n"
    "the rules that were used under \"plan\".\n"
    "\n"
    "  --shards N         shard count (a load's MPI world size), 1..65536\n"
    "  --plan P           a plan file, a preset (llama, qwen2, qwen3,\n"
    "                     deepseek_v2, ...: README lists all) or auto\n"
    "                     (default: from config.json or\n"
    "                     mlc-chat-config.json)\n"
    "  --no-bias-scaling  report biases unscaled (bias_scale 1.0), as a load\n"
    "                     with --no-bias-scaling delivers them\n"
    "  --strict           a plan-file rule that matches no tensor is an\n"
    "                     error (exit 65), not a warning\n"
    "  --help             show this help\n"
    "\n"
    "Plan files: {\"rules\": [{\"match\": GLOB, ...}, ...]}; the first\n"
    "match wins, unmatched tensors are replicated; messages number rules\n"
    "from 0.  A preset name always means the preset: write ./NAME for a\n"
    "plan file of that name.\n"
    "\n"
    "MLC quantized params (q_weight, q_scale, weight_scale_inv, ...) take\n"
    "the rule of their base weight (<base>.weight), with MLC's func_name\n"
    "suffixes; the scheme is read from mlc-chat-config.json.\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 invalid model or plan (indivisible\n"
    "dims included), 66 model or config missing, 74 I/O error.\n";

#define MAX_SHARDS 65536

/* What the model's config says about quantization (quant.h). */
static json_t *quant_json(const struct tpl__quant_info *q) {
  json_t *o = json_pack("{s:s, s:o}", "quantization", q->scheme_name,
                        "weight_block_size", tpl__json_u64_array(q->block, 2));
  if (o != NULL && q->config_shards != 0)
    json_object_set_new(o, "config_tensor_parallel_shards",
                        json_integer(q->config_shards));
  return o;
}

/* The resolved rules, for the reader who wants to know why. */
static json_t *plan_json(const struct tpl__plan *p) {
  json_t *rules = json_array();
  for (size_t i = 0; i < p->nrules; i++) {
    const struct tpl__rule *r = &p->rules[i];
    json_t *o = json_pack("{s:s}", "match", r->match);
    if (r->kind == TPL_RULE_SHARD) {
      json_object_set_new(o, "name", json_string(r->name));
      json_object_set_new(o, "dim", json_integer(r->spec.dim));
      if (r->spec.nsegs)
        json_object_set_new(o, "segs",
                            tpl__json_u64_array(r->spec.segs, r->spec.nsegs));
    } else {
      json_object_set_new(
          o, r->kind == TPL_RULE_SCALE_BIAS ? "scale_bias" : "replicate",
          json_true());
    }
    json_array_append_new(rules, o);
  }
  return json_pack("{s:s, s:o, s:o}", "source", p->source, "rules", rules,
                   "config", quant_json(&p->quant));
}

/* mlc-chat-config.json's tensor_parallel_shards is the N that `mlc_llm
 * compile` builds for by default; MLC's convert_weight writes full,
 * unsharded tensors whatever it says, so the cache loads at any N.  Only
 * the engine must have been compiled for N (compile --overrides
 * tensor_parallel_shards=N), which is worth a note. */
static void note_config_shards(const struct tpl__quant_info *q,
                               uint32_t nshards) {
  if (q->config_shards == 0 || q->config_shards == nshards) return;
  fprintf(stderr,
          "tpload plan: note: mlc-chat-config.json says "
          "tensor_parallel_shards %u, sharding %u ways: the cache holds full "
          "tensors, so this is fine for the weights; compile the model "
          "library for %u shards (mlc_llm compile --overrides "
          "tensor_parallel_shards=%u)\n",
          q->config_shards, nshards, nshards, nshards);
}

static int print_plan(const struct tpl_model *m, const struct tpl__plan *p,
                      const struct tpl__strategy *st, uint32_t nshards,
                      int bias_scaling) {
  json_t *root = NULL;
  if (tpl__shardinfo_build(m, st, nshards, NULL, bias_scaling, &root) != 0 ||
      json_object_set_new(root, "quantization",
                          json_string(p->quant.scheme_name)) != 0 ||
      json_object_set_new(root, "plan", plan_json(p)) != 0) {
    json_decref(root);
    fprintf(stderr, "tpload plan: out of memory\n");
    return 70;
  }
  json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(root);
  return 0;
}

struct plan_args {
  const char *model, *plan;
  uint32_t nshards;
  int bias_scaling;
  int strict;
};

/* Returns -1 to go on, else the exit code (help or usage error). */
static int parse_args(int argc, char **argv, struct plan_args *a) {
  static const struct option opts[] = {
      {"shards", required_argument, NULL, 'n'},
      {"plan", required_argument, NULL, 'p'},
      {"no-bias-scaling", no_argument, NULL, 'B'},
      {"strict", no_argument, NULL, 'S'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  unsigned long long n = 0;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
    case 'n':
      if (tpl__cli_parse_uint(optarg, MAX_SHARDS, &n) != 0 || n == 0)
        return tpl__cli_usage_error("plan",
                                    "--shards: expected 1..%d, "
                                    "found '%s'",
                                    MAX_SHARDS, optarg);
      break;
    case 'p':
      a->plan = optarg;
      break;
    case 'B':
      a->bias_scaling = 0;
      break;
    case 'S':
      a->strict = 1;
      break;
    case 'h':
      fputs(plan_help, stdout);
      return 0;
    case ':':
      return tpl__cli_usage_error("plan", "option '%s' needs a value",
                                  argv[optind - 1]);
    default:
      return tpl__cli_usage_error("plan", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (optind != argc - 1)
    return tpl__cli_usage_error("plan", "expected one MODEL argument");
  if (n == 0) return tpl__cli_usage_error("plan", "--shards N is required");
  a->model = argv[optind];
  a->nshards = (uint32_t)n;
  return -1;
}

int tpl__cmd_plan(int argc, char **argv) {
  struct plan_args a = {NULL, "auto", 0, 1, 0};
  struct tpl_error err = {0};
  struct tpl_model *m = NULL;
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  rc = tpl__model_open(a.model, &m, &err);
  if (rc == 0) rc = tpl__plan_for_model(a.plan, m, a.nshards, &p, &st, &err);
  if (rc == 0) {
    rc = tpl__plan_check_unused(p, st, m->ntensors, a.strict, &err);
    if (rc == 1) fprintf(stderr, "tpload plan: warning: %s\n", err.msg);
    if (rc == 1) rc = 0;
  }
  if (rc == 0) note_config_shards(&p->quant, a.nshards);
  if (rc != 0) {
    free(st);
    tpl__plan_free(p);
    tpl__model_free(m);
    return tpl__cli_report(rc, &err);
  }
  rc = print_plan(m, p, st, a.nshards, a.bias_scaling);
  free(st);
  tpl__plan_free(p);
  tpl__model_free(m);
  return rc;
}
