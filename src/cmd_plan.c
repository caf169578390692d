/* cmd_plan.c - `tpload plan MODEL --shards N [--tp T] [--pp P] [--plan P]`:
 * resolves the plan for MODEL on the grid and prints the shard info every
 * rank would get, in the format of preshard's shard-info.json without the
 * per-rank checksums, plus what each rank holds under "ranks" and the
 * resolved rules under "plan". */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "cmd_grid.h"
#include "common.h"
#include "job.h"
#include "jsonu.h"
#include "mlc_cut.h"
#include "model.h"
#include "plan.h"
#include "planner.h"
#include "presets.h"
#include "shardinfo.h"

static const char plan_help[] =
    "usage: tpload plan MODEL (--shards N | --tp T) [--tp T] [--pp P]\n"
    "                   [--ep] [--ep-size E] [--plan P] [--bias-policy F]\n"
    "                   [--no-bias-scaling] [--skip-mtp] [--strict]\n"
    "\n"
    "Resolves the shard plan for MODEL on a grid of N ranks (D replicas of\n"
    "T shards x P pipeline stages) and prints it as JSON: the format of\n"
    "shard-info.json (tensor_parallel_shards, pipeline_parallel_stages,\n"
    "data_parallel_replicas, bias_scaling, bias_policy, params in checkpoint\n"
    "order with per-rank shape, dtype, preprocs, pipeline_stages, dim,\n"
    "per-shard segs, bias (a row-parallel bias's policy), bias_scale)\n"
    "without the per-rank checksums; what every rank\n"
    "(rank = (d x P + p) x T + t) holds under \"ranks\"; and the rules that\n"
    "were used under \"plan\".\n"
    "\n"
    "  --shards N         the world (a load's MPI world size), 1..65536\n"
    "                     (default T x P)\n"
    "  --tp T             tensor-parallel shards (default N / P)\n"
    "  --pp P             pipeline stages (default 1): layers split as MLC\n"
    "                     LLM does, from config.json's num_hidden_layers\n"
    "  --ep               expert parallelism: every MoE layer's experts\n"
    "                     whole over the T ranks of a TP group, rank t a\n"
    "                     contiguous run of them as vLLM's map gives it;\n"
    "                     \"ranks\" shows each rank's \"experts\": [start,\n"
    "                     count]\n"
    "  --ep-size E        --ep over E ranks: T (the default) or T x D\n"
    "                     (vLLM's ep_size = tp x dp: every replica's ranks\n"
    "                     of a stage, group rank d x T + t)\n"
    "  --plan P           a plan file, a preset or auto (default: from\n"
    "                     config.json or mlc-chat-config.json); presets:\n"
    "                     @presets@\n"
    "  --bias-policy F    row-parallel biases as a load with --bias-policy F\n"
    "                     delivers them: mlc (default; scale: bias/N),\n"
    "                     vllm (whole, or rank0 where vLLM's loader zeroes\n"
    "                     the other ranks' copies) or whole\n"
    "  --no-bias-scaling  --bias-policy whole (bias_scale 1.0)\n"
    "  --skip-mtp         leave out the multi-token-prediction layers, as a\n"
    "                     load with --skip-mtp does\n"
    "  --strict           a plan-file rule that matches no tensor is an\n"
    "                     error (exit 65), not a warning\n"
    "  --help             show this help\n"
    "\n" TPL_CLI_HTTP_HELP "\n"
    "Plan files: {\"rules\": [{\"match\": GLOB, ...}, ...]}; the first\n"
    "match wins, unmatched tensors are replicated; messages number rules\n"
    "from 0.  A preset name always means the preset: write ./NAME for a\n"
    "plan file of that name.\n"
    "\n"
    "MLC quantized params (q_weight, q_scale, weight_scale_inv, ...) take\n"
    "the rule of their base weight (<base>.weight), with MLC's func_name\n"
    "suffixes; the scheme is read from mlc-chat-config.json.\n"
    "\n"
    "A preset checks the checkpoint against its config (heads x head_dim,\n"
    "kv heads x head_dim, intermediate and expert sizes, layers\n"
    "0..num_hidden_layers-1, experts 0..X-1) and refuses a layer tensor\n"
    "whose rows belong to heads that it would deliver whole while the\n"
    "layer's heads are cut.\n"
    "\n"
    "Exit codes: 0 ok, 64 usage (a grid that does not divide the world or\n"
    "the layers included), 65 invalid model or plan (indivisible\n"
    "dims and a checkpoint contradicting its config included), 66 model\n"
    "or config missing (HTTP 404 included), 69 server unreachable or\n"
    "failing after the retries, 74 I/O error, 77 access denied (HTTP\n"
    "401/403).\n";

/* What the model's config says about quantization (quant.h). */
static json_t *quant_json(const struct tpl__quant_info *q) {
  json_t *o = tpl__quant_json(q);
  if (o != NULL && q->config_shards != 0)
    json_object_set_new(o, "config_tensor_parallel_shards",
                        json_integer(q->config_shards));
  return o;
}

/* The resolved rules at `n` shards, for the reader who wants to know
 * why. */
static json_t *plan_json(const struct tpl__plan *p, uint32_t n) {
  json_t *rules = json_array();
  for (size_t i = 0; i < p->nrules; i++) {
    const struct tpl__rule *r = &p->rules[i];
    json_t *o = r->kind == TPL_RULE_SHARD
                    ? json_pack("{s:s, s:s, s:I}", "match", r->match, "name",
                                r->name, "dim", (json_int_t)r->spec.dim)
                    : json_pack("{s:s, s:b}", "match", r->match,
                                r->kind == TPL_RULE_SCALE_BIAS ? "scale_bias"
                                                               : "replicate",
                                1);
    if (r->kind == TPL_RULE_SHARD && r->spec.nsegs)
      json_object_set_new(o, "segs",
                          tpl__json_u64_array(r->spec.segs, r->spec.nsegs));
    if (r->kind == TPL_RULE_SHARD && r->interleave > 1)
      json_object_set_new(o, "interleave", json_integer(r->interleave));
    if (r->kind == TPL_RULE_SCALE_BIAS && r->bias != TPL_BIAS_DEFAULT)
      json_object_set_new(o, "bias", json_string(tpl__bias_name(r->bias)));
    if (r->kind == TPL_RULE_SHARD && tpl__shard_replicas(&r->spec, n) > 1)
      json_object_set_new(o, "kv_replicas",
                          json_integer(tpl__shard_replicas(&r->spec, n)));
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

static int print_plan(const struct tpl__plan *p, const struct tpl__job *job) {
  json_t *root = NULL;
  if (tpl__shardinfo_build(job, NULL, &root) != 0 ||
      json_object_set_new(root, "ranks", tpl__shardinfo_ranks(job)) != 0 ||
      json_object_set_new(root, "quantization",
                          json_string(p->quant.scheme_name)) != 0 ||
      json_object_set_new(root, "plan", plan_json(p, job->grid.tp)) != 0) {
    json_decref(root);
    fprintf(stderr, "tpload plan: out of memory\n");
    return 70;
  }
  json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(root);
  return 0;
}

enum {
  OPT_SHARDS,
  OPT_TP,
  OPT_PP,
  OPT_EP,
  OPT_EP_SIZE,
  OPT_PLAN,
  OPT_NO_BIAS,
  OPT_BIAS_POLICY,
  OPT_SKIP_MTP,
  OPT_STRICT,
  TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ID)
};

static const struct tpl__cli_option plan_options[] = {
    [OPT_SHARDS] = {"shards", TPL_CLI_VALUE, 0},
    [OPT_TP] = {"tp", TPL_CLI_VALUE, 0},
    [OPT_PP] = {"pp", TPL_CLI_VALUE, 0},
    [OPT_EP] = {"ep", TPL_CLI_FLAG, 0},
    [OPT_EP_SIZE] = {"ep-size", TPL_CLI_VALUE, 0},
    [OPT_PLAN] = {"plan", TPL_CLI_VALUE, 0},
    [OPT_NO_BIAS] = {"no-bias-scaling", TPL_CLI_FLAG, 0},
    [OPT_BIAS_POLICY] = {"bias-policy", TPL_CLI_VALUE, 0},
    [OPT_SKIP_MTP] = {"skip-mtp", TPL_CLI_FLAG, 0},
    [OPT_STRICT] = {"strict", TPL_CLI_FLAG, 0},
    TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ENTRY)};

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  const char *plan = a->value[OPT_PLAN] ? a->value[OPT_PLAN] : "auto";
  struct tpl__error err = {0};
  struct tpl__model *m = NULL;
  struct tpl__plan *p = NULL;
  struct tpl__job *job = NULL;
  struct tpl__grid_args ga = {a->value[OPT_SHARDS], a->value[OPT_TP],
                              a->value[OPT_PP], tpl__cli_has(a, OPT_EP),
                              a->value[OPT_EP_SIZE]};
  struct tpl__grid grid;
  struct tpl__http_opts ho;
  int rc, bias;
  if (tpl__cli_grid(cmd, &ga, &grid) != 0) return 64;
  if (tpl__cli_bias_family(cmd, a->value[OPT_BIAS_POLICY],
                           tpl__cli_has(a, OPT_NO_BIAS), &bias) != 0)
    return 64;
  if (tpl__cli_http(cmd, a, OPT_RETRIES, &ho) != 0) return 64;
  rc = tpl__model_open_with(a->operands[0], &ho, 0, &m, &err);
  if (rc == 0) rc = tpl__mlc_cut_model(m, plan, &err);
  if (rc == 0 && tpl__cli_has(a, OPT_SKIP_MTP))
    rc = tpl__plan_skip_mtp(m, &err);
  if (rc == 0)
    rc = tpl__job_plan(plan, m, a->operands[0], &grid, bias, &p, &job, &err);
  if (rc == 0) {
    rc = tpl__job_check_unused(job, p, tpl__cli_has(a, OPT_STRICT), &err);
    if (rc == 1) fprintf(stderr, "tpload plan: warning: %s\n", err.msg);
    if (rc == 1) rc = 0;
  }
  if (rc == 0) note_config_shards(&p->quant, grid.tp);
  rc = rc == 0 ? print_plan(p, job) : tpl__cli_report(rc, &err);
  tpl__job_free(job);
  tpl__plan_free(p);
  tpl__model_free(m);
  return rc;
}

static const char *help_list(const char *key) {
  return tpl__preset_names();
}

const struct tpl__cli_command tpl__cmd_plan = {
    .name = "plan",
    .summary = "print the resolved shard plan as JSON",
    .options = plan_options,
    .noptions = ARRAY_SIZE(plan_options),
    .min_operands = 1,
    .max_operands = 1,
    .operands_error = "expected one MODEL argument",
    .help = plan_help,
    .help_list = help_list,
    .exec = run,
};
