/* cmd_inspect.c - `tpload inspect MODEL [--json] [--shards N] [--tp T]
 * [--pp P] [--plan P]`: every tensor's name, dtype, shape, bytes and file,
 * and the totals; with a grid (--shards or --tp) also each tensor's shard
 * shape, pipeline stages and the rule that cuts it, and what every rank
 * (d, p, t) of the grid holds. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "cmd_grid.h"
#include "common.h"
#include "dtype.h"
#include "experts.h"
#include "format.h"
#include "job.h"
#include "jsonu.h"
#include "mlc_cut.h"
#include "mlc_md5.h"
#include "model.h"
#include "plan.h"
#include "planner.h"
#include "shardinfo.h"

static const char inspect_help[] =
    "usage: tpload inspect MODEL [--json] [--shards N] [--tp T] [--pp P]\n"
    "                      [--ep] [--ep-size E] [--plan P] [--bias-policy F]\n"
    "                      [--verify-md5] [--skip-mtp]\n"
    "\n"
    "Reads MODEL strictly (a .safetensors file, a directory with\n"
    "model.safetensors or model.safetensors.index.json, or an MLC weight\n"
    "directory, presharded ones too: what `tpload preshard --layout mlc`\n"
    "writes or MLC's own) and lists every tensor: name, dtype, shape,\n"
    "bytes, file; and the quantization its config names, as plan says\n"
    "it (JSON: quant).\n"
    "\n"
    "  --json      print one JSON object (tensors in checkpoint order,\n"
    "              totals)\n"
    "  --shards N  also show each tensor's shard shape on a world of N ranks\n"
    "              and the rule that cuts it (func_name, scale_bias or\n"
    "              replicate) and what each rank holds\n"
    "  --tp T      tensor-parallel shards (default N / P; N defaults to T x "
    "P)\n"
    "  --pp P      pipeline stages (default 1), layers split as MLC LLM\n"
    "              does; rank = (d x P + p) x T + t\n"
    "  --ep        expert parallelism: every MoE layer's experts whole over\n"
    "              the T ranks of a TP group (vLLM's map); each rank's line\n"
    "              names its experts, an expert's tensor its shard\n"
    "  --ep-size E --ep over E ranks: T (the default) or T x D (vLLM's\n"
    "              ep_size = tp x dp, group rank d x T + t)\n"
    "  --plan P    plan file, preset name or auto (default auto; needs\n"
    "              --shards or --tp)\n"
    "  --bias-policy F  row-parallel biases as a load with this family\n"
    "              delivers them: mlc (default: bias/N on every rank), vllm\n"
    "              (whole on every rank, or rank 0 only where vLLM's loader\n"
    "              zeroes the others) or whole (needs --shards or --tp)\n"
    "  --verify-md5  MODEL is an MLC weight directory (presharded by MLC\n"
    "              too): first read every\n"
    "              params_shard file whole and check it against the md5sum\n"
    "              its record carries (65 naming the file when one differs\n"
    "              or none is recorded, 64 for another format); the totals\n"
    "              (JSON: md5) say what was checked\n"
    "  --skip-mtp  leave out the multi-token-prediction layers config.json\n"
    "              declares (DeepSeek-V3), as a load with --skip-mtp does\n"
    "  --help      show this help\n"
    "\n" TPL_CLI_HTTP_HELP "\n"
    "Exit codes: 0 ok, 64 usage (a grid that does not divide included), 65\n"
    "malformed model or plan (a file whose md5sum differs included), 66\n"
    "model missing (HTTP 404 included), 69\n"
    "server unreachable or failing after the retries (or not serving byte\n"
    "ranges), 74 I/O error (an object that changed included), 77 access\n"
    "denied (HTTP 401/403: a token or presigned URL is needed).\n";

/* Its format's word (format.h); an opened model always has one. */
static const char *format_name(int format) {
  const struct tpl__format *f = tpl__format_of(format);
  return f != NULL ? f->name : "unknown";
}

/* The format's word and, where its row has one, its detail: "presharded
 * (tpload rank layout, 4 ranks)". */
static const char *format_word(const struct tpl__model *m, char *buf,
                               size_t len) {
  const struct tpl__format *f = tpl__format_of(m->format);
  char detail[96];
  if (f == NULL || f->detail == NULL) return format_name(m->format);
  f->detail(m, detail, sizeof(detail));
  snprintf(buf, len, "%s (%s)", f->name, detail);
  return buf;
}

/* Adds shard_shape, rule and, taken from the shard-info entry so both
 * views agree, (for shard rules) dim, per-shard segs and kv_replicas,
 * (for row-parallel biases) bias and bias_scale, and pipeline_stages. */
static void add_shard_json(json_t *o, const struct tpl__job *job, size_t i) {
  static const char *const from_info[] = {
      "dim",        "segs", "kv_replicas", "expert_shard",   "expert_ep_rank",
      "expert_dim", "bias", "bias_scale",  "pipeline_stages"};
  const struct tpl__job_tensor *t = &job->tensors[i];
  json_t *info = tpl__shardinfo_param(job, i, NULL);
  json_object_set_new(o, "shard_shape",
                      tpl__json_u64_array(t->rank_shape, (size_t)t->ndim));
  json_object_set_new(o, "rule",
                      json_string(tpl__rule_name(t->kind, t->func_name)));
  for (size_t k = 0; k < ARRAY_SIZE(from_info); k++) {
    json_t *v = json_object_get(info, from_info[k]);
    if (v != NULL) json_object_set(o, from_info[k], v);
  }
  json_decref(info);
}

/* --verify-md5's pass, as the load report has it: {verified, bytes,
 * seconds}. */
static json_t *md5_json(const struct tpl__model *m,
                        const struct tpl__mlc_md5 *v) {
  json_t *files = json_array();
  for (size_t f = 0; f < tpl__mlc_md5_nfiles(m); f++)
    json_array_append_new(files, json_string(m->files[f].name));
  return json_pack("{s:o, s:I, s:f}", "verified", files, "bytes",
                   (json_int_t)v->bytes, "seconds", v->seconds);
}

/* The JSON form; `p` and `job` are NULL without a grid, `md5` without
 * --verify-md5; `q` the model's quantization. */
static void print_json(const struct tpl__model *m, const struct tpl__plan *p,
                       const struct tpl__job *job,
                       const struct tpl__quant_info *q,
                       const struct tpl__mlc_md5 *md5) {
  const char *format = format_name(m->format);
  json_t *root =
      job == NULL
          ? json_pack("{s:s}", "format", format)
          : json_pack("{s:s, s:I, s:I, s:I, s:s, s:o}", "format", format,
                      "tensor_parallel_shards", (json_int_t)job->grid.tp,
                      "pipeline_parallel_stages", (json_int_t)job->grid.pp,
                      "data_parallel_replicas", (json_int_t)job->grid.dp,
                      "plan", p->source, "ranks", tpl__shardinfo_ranks(job));
  json_object_set_new(root, "quant", tpl__quant_json(q));
  json_t *tensors = json_array();
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    json_t *o =
        json_pack("{s:s, s:s, s:o, s:I, s:s, s:I}", "name", t->name, "dtype",
                  tpl__dtype_mlc_name(t->dtype), "shape",
                  tpl__json_u64_array(t->shape, (size_t)t->ndim), "bytes",
                  (json_int_t)t->nbytes, "file", m->files[t->file].name,
                  "offset", (json_int_t)t->offset);
    if (job != NULL) add_shard_json(o, job, i);
    json_array_append_new(tensors, o);
  }
  json_object_update_new(root, json_pack("{s:o, s:I, s:I, s:I}", "tensors",
                                         tensors, "tensor_count",
                                         (json_int_t)m->ntensors, "file_count",
                                         (json_int_t)m->nfiles, "total_bytes",
                                         (json_int_t)tpl__model_bytes(m)));
  if (md5 != NULL) json_object_set_new(root, "md5", md5_json(m, md5));
  json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(root);
}

/* The rule column: the rule's name, and "kv xR" where each kv head is
 * held by R ranks; a row-parallel bias's policy when it is not scale;
 * under --ep "expert, shard T" for one expert's tensor, whole on shard
 * T ("expert, ep rank G" on group rank G = d x T + t when the group
 * spans the replicas). */
static const char *rule_label(const struct tpl__job *job, size_t i, char *buf,
                              size_t len) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  const char *name = tpl__rule_name(t->kind, t->func_name);
  uint32_t replicas = t->kind == TPL_RULE_SHARD
                          ? tpl__shard_replicas(&t->spec, job->grid.tp)
                          : 1;
  if (t->ep == TPL_EP_WHOLE) {
    snprintf(buf, len, "expert, %s %u",
             job->grid.ep > job->grid.tp ? "ep rank" : "shard", t->owner);
    return buf;
  }
  if (t->kind == TPL_RULE_SCALE_BIAS && t->bias != TPL_BIAS_SCALE) {
    snprintf(buf, len, "%s %s", name, tpl__bias_name(t->bias));
    return buf;
  }
  if (replicas == 1) return name;
  snprintf(buf, len, "%s kv x%u", name, replicas);
  return buf;
}

/* The table; with a grid (`job` not NULL) two more columns, each rank's
 * shape and the rule, and the shards and plan in the totals line.  A kv head
 * several ranks hold reads "kv xR" beside its rule.  The totals name the
 * quantization `q` when the config has one. */
static void print_table(const struct tpl__model *m, const struct tpl__plan *p,
                        const struct tpl__job *job,
                        const struct tpl__quant_info *q,
                        const struct tpl__mlc_md5 *md5) {
  char shape[256], sshape[256], word[160], name[TPL_SAFE_LEN(TPL_MAX_NAME)];
  char file[TPL_SAFE_LEN(256)], rule[TPL_MAX_NAME + 16];
  char quant[128], qsafe[TPL_SAFE_LEN(128)];
  printf("%-56s %-8s %-22s ", "NAME", "DTYPE", "SHAPE");
  if (job != NULL) printf("%-22s %-22s ", "SHARD SHAPE", "RULE");
  printf("%14s  %s\n", "BYTES", "FILE");
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    printf("%-56s %-8s %-22s ", tpl__cli_safe(t->name, name, sizeof(name)),
           tpl__dtype_st_name(t->dtype),
           tpl__shape_str(t->shape, t->ndim, shape, sizeof(shape)));
    if (job != NULL)
      printf("%-22s %-22s ",
             tpl__shape_str(job->tensors[i].rank_shape, t->ndim, sshape,
                            sizeof(sshape)),
             rule_label(job, i, rule, sizeof(rule)));
    printf("%14llu  %s\n", (unsigned long long)t->nbytes,
           tpl__cli_safe(m->files[t->file].name, file, sizeof(file)));
  }
  printf("%zu tensors, %zu files, %llu bytes (%s)", m->ntensors, m->nfiles,
         (unsigned long long)tpl__model_bytes(m),
         format_word(m, word, sizeof(word)));
  if (job != NULL) printf("; %u shards, plan: %s", job->grid.tp, p->source);
  if (tpl__quant_label(q, quant, sizeof(quant))[0] != '\0')
    printf("; quantization: %s", tpl__cli_safe(quant, qsafe, sizeof(qsafe)));
  printf("\n");
  if (md5 != NULL)
    printf("md5sum as the cache records: %zu files, %llu bytes checked\n",
           tpl__mlc_md5_nfiles(m), (unsigned long long)md5->bytes);
}

/* One line per rank of the grid: where it sits and what it holds. */
static void print_rank_table(const struct tpl__job *job) {
  const struct tpl__grid *g = &job->grid;
  json_t *ranks = tpl__shardinfo_ranks(job), *r;
  size_t k;
  printf("grid: tp %u x pp %u x dp %u = %u ranks, rank = (d*%u + p)*%u + t",
         g->tp, g->pp, g->dp, g->world, g->pp, g->tp);
  if (g->ep > 0)
    printf("; ep %u (%s), %u experts", g->ep, tpl__grid_ep_what(g),
           job->experts);
  printf("\n");
  json_array_foreach(ranks, k, r) {
    struct tpl__pos c = tpl__grid_coord(g, (uint32_t)k);
    const json_t *ex = json_object_get(r, "experts");
    printf("rank %zu (d %u, p %u, t %u): stage %u of %u, shard %u of %u: %zu "
           "tensors, %lld bytes",
           k, c.d, c.p, c.t, c.p, g->pp, c.t, g->tp,
           json_array_size(json_object_get(r, "tensors")),
           json_integer_value(json_object_get(r, "bytes")));
    if (ex != NULL) /* [start, count] */
      printf(", experts %lld..%lld of %u",
             json_integer_value(json_array_get(ex, 0)),
             json_integer_value(json_array_get(ex, 0)) +
                 json_integer_value(json_array_get(ex, 1)) - 1,
             job->experts);
    printf("\n");
  }
  json_decref(ranks);
}

/* Lists the model; with a grid (`grid` not NULL) also its shard view, for
 * biases as a load of bias family `bias` (enum tpl__bias_family) delivers
 * them. */
static int show(const struct tpl__model *m, const char *model, const char *plan,
                const struct tpl__grid *grid, int bias, int json,
                const struct tpl__mlc_md5 *md5, struct tpl__error *err) {
  struct tpl__plan *p = NULL;
  struct tpl__job *job = NULL;
  struct tpl__quant_info q;
  int rc = grid ? tpl__job_plan(plan ? plan : "auto", m, model, grid, bias, &p,
                                &job, err)
                : 0;
  if (rc != 0) return rc;
  /* A listing reads any checkpoint: an unreadable config leaves the
   * quantization unknown, not the listing failed. */
  if (p != NULL)
    q = p->quant;
  else if (tpl__plan_quant(m, &q, err) != 0)
    tpl__quant_info_init(&q);
  if (json) {
    print_json(m, p, job, &q, md5);
  } else {
    print_table(m, p, job, &q, md5);
    if (job != NULL) print_rank_table(job);
  }
  tpl__job_free(job);
  tpl__plan_free(p);
  return 0;
}

enum {
  OPT_JSON,
  OPT_SHARDS,
  OPT_TP,
  OPT_PP,
  OPT_EP,
  OPT_EP_SIZE,
  OPT_PLAN,
  OPT_VERIFY_MD5,
  OPT_SKIP_MTP,
  OPT_BIAS_POLICY,
  TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ID)
};

static const struct tpl__cli_option inspect_options[] = {
    [OPT_JSON] = {"json", TPL_CLI_FLAG, 0},
    [OPT_SHARDS] = {"shards", TPL_CLI_VALUE, 0},
    [OPT_TP] = {"tp", TPL_CLI_VALUE, 0},
    [OPT_PP] = {"pp", TPL_CLI_VALUE, 0},
    [OPT_EP] = {"ep", TPL_CLI_FLAG, 0},
    [OPT_EP_SIZE] = {"ep-size", TPL_CLI_VALUE, 0},
    [OPT_PLAN] = {"plan", TPL_CLI_VALUE, 0},
    [OPT_VERIFY_MD5] = {"verify-md5", TPL_CLI_FLAG, 0},
    [OPT_SKIP_MTP] = {"skip-mtp", TPL_CLI_FLAG, 0},
    [OPT_BIAS_POLICY] = {"bias-policy", TPL_CLI_VALUE, 0},
    TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ENTRY)};

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  const char *plan = a->value[OPT_PLAN];
  struct tpl__grid_args ga = {a->value[OPT_SHARDS], a->value[OPT_TP],
                              a->value[OPT_PP], tpl__cli_has(a, OPT_EP),
                              a->value[OPT_EP_SIZE]};
  int sharded = ga.shards != NULL || ga.tp != NULL;
  struct tpl__error err = {0};
  struct tpl__model *m = NULL;
  struct tpl__grid grid;
  struct tpl__http_opts ho;
  struct tpl__mlc_md5 md5 = {.chunk = 8 << 20};
  int verify = tpl__cli_has(a, OPT_VERIFY_MD5), rc, bias;
  if ((plan != NULL || ga.pp != NULL || ga.ep || ga.ep_size ||
       a->value[OPT_BIAS_POLICY] != NULL) &&
      !sharded)
    return tpl__cli_usage_error(cmd, "--plan, --pp, --ep, --ep-size and "
                                     "--bias-policy need --shards N or --tp T");
  if (tpl__cli_bias_family(cmd, a->value[OPT_BIAS_POLICY], 0, &bias) != 0)
    return 64;
  if (sharded && tpl__cli_grid(cmd, &ga, &grid) != 0) return 64;
  if (tpl__cli_http(cmd, a, OPT_RETRIES, &ho) != 0) return 64;
  /* An MLC presharded cache lists its full tensors, rebuilt by the
   * plan's cut (mlc_cut.h), --verify-md5 or not: the md5 pass hashes
   * the cache's own files (tpl__mlc_md5_nfiles). */
  rc = tpl__model_open_with(a->operands[0], &ho, 0, &m, &err);
  if (rc == 0) rc = tpl__mlc_cut_model(m, plan, &err);
  if (rc == 0 && verify)
    rc = tpl__mlc_md5_ready(m, m->shown ? m->shown : a->operands[0], &err);
  if (rc == 0 && verify) rc = tpl__mlc_md5_model(m, &md5, &err);
  if (rc == 0 && tpl__cli_has(a, OPT_SKIP_MTP))
    rc = tpl__plan_skip_mtp(m, &err);
  if (rc == 0)
    rc = show(m, a->operands[0], plan, sharded ? &grid : NULL, bias,
              tpl__cli_has(a, OPT_JSON), verify ? &md5 : NULL, &err);
  tpl__model_free(m);
  return rc != 0 ? tpl__cli_report(rc, &err) : 0;
}

const struct tpl__cli_command tpl__cmd_inspect = {
    .name = "inspect",
    .summary = "list a checkpoint's tensors (and shards)",
    .options = inspect_options,
    .noptions = ARRAY_SIZE(inspect_options),
    .min_operands = 1,
    .max_operands = 1,
    .operands_error = "expected one MODEL argument",
    .help = inspect_help,
    .exec = run,
};
