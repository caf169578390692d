/* cmd_inspect.c - `tpload inspect MODEL [--json] [--shards N [--plan P]]`:
 * every tensor's name, dtype, shape, bytes and file, and the totals; with
 * --shards also each tensor's shard shape and the rule that cuts it. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "dtype.h"
#include "jsonu.h"
#include "model.h"
#include "plan.h"
#include "planner.h"
#include "shardinfo.h"

static const char inspect_help[] =
    "usage: tpload inspect MODEL [--json] [--shards N [--plan P]]\n"
    "\n"
    "Reads MODEL strictly (a .safetensors file, a directory with\n"
    "model.safetensors or model.safetensors.index.json, or an MLC weight\n"
    "directory) and lists every tensor: name, dtype, shape, bytes, file.\n"
    "\n"
    "  --json      print one JSON object (tensors in checkpoint order,\n"
    "              totals)\n"
    "  --shards N  also show each tensor's shard shape for N shards and the\n"
    "              rule that cuts it (func_name, scale_bias or replicate)\n"
    "  --plan P    plan file, preset name or auto (default auto; needs\n"
    "              --shards)\n"
    "  --help      show this help\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 malformed model or plan, 66 model\n"
    "missing, 74 I/O error.\n";

#define MAX_SHARDS 65536

/* The shard view, present when --shards was given. */
struct shard_view {
  uint32_t nshards;
  const struct tpl__plan *plan;
  const struct tpl__strategy *st;
};

static const char *format_name(int format) {
  switch (format) {
  case TPL_FMT_SAFETENSORS:
    return "safetensors";
  case TPL_FMT_ST_INDEX:
    return "safetensors-index";
  default:
    return "mlc";
  }
}

static void shard_shape(const struct tpl__tensor *t,
                        const struct tpl__strategy *s, uint32_t nshards,
                        uint64_t *out) {
  for (int i = 0; i < t->ndim; i++)
    out[i] = t->shape[i];
  if (s->kind == TPL_RULE_SHARD)
    tpl__shard_shape(t->shape, t->ndim, &s->spec, nshards, out);
}

/* Adds shard_shape, rule and (for shard rules) dim and per-shard segs,
 * taken from the shard-info entry so both views agree. */
static void add_shard_json(json_t *o, const struct tpl__tensor *t,
                           const struct tpl__strategy *s, uint32_t nshards) {
  json_t *info = tpl__shardinfo_param(t, s, nshards, NULL, 1);
  uint64_t shape[TPL_MAX_DIMS];
  shard_shape(t, s, nshards, shape);
  json_object_set_new(o, "shard_shape",
                      tpl__json_u64_array(shape, (size_t)t->ndim));
  json_object_set_new(o, "rule", json_string(tpl__strategy_rule_name(s)));
  if (info != NULL && s->kind == TPL_RULE_SHARD) {
    json_object_set(o, "dim", json_object_get(info, "dim"));
    json_object_set(o, "segs", json_object_get(info, "segs"));
  }
  if (info != NULL)
    json_object_set(o, "bias_scale", json_object_get(info, "bias_scale"));
  json_decref(info);
}

static int print_json(const struct tpl_model *m, const struct shard_view *v) {
  json_t *root = json_object(), *tensors = json_array();
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "dtype", json_string(tpl__dtype_st_name(t->dtype)));
    json_object_set_new(o, "shape",
                        tpl__json_u64_array(t->shape, (size_t)t->ndim));
    json_object_set_new(o, "bytes", json_integer((json_int_t)t->nbytes));
    json_object_set_new(o, "file", json_string(m->files[t->file].name));
    json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
    if (v != NULL) add_shard_json(o, t, &v->st[i], v->nshards);
    json_array_append_new(tensors, o);
  }
  json_object_set_new(root, "format", json_string(format_name(m->format)));
  if (v != NULL) {
    json_object_set_new(root, "tensor_parallel_shards",
                        json_integer((json_int_t)v->nshards));
    json_object_set_new(root, "plan", json_string(v->plan->source));
  }
  json_object_set_new(root, "tensors", tensors);
  json_object_set_new(root, "tensor_count",
                      json_integer((json_int_t)m->ntensors));
  json_object_set_new(root, "file_count", json_integer((json_int_t)m->nfiles));
  json_object_set_new(root, "total_bytes",
                      json_integer((json_int_t)tpl__model_bytes(m)));
  json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(root);
  return 0;
}

static void print_table(const struct tpl_model *m) {
  char shape[256], name[TPL_SAFE_LEN(TPL_MAX_NAME)], file[TPL_SAFE_LEN(256)];
  printf("%-56s %-8s %-22s %14s  %s\n", "NAME", "DTYPE", "SHAPE", "BYTES",
         "FILE");
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    printf("%-56s %-8s %-22s %14llu  %s\n",
           tpl__cli_safe(t->name, name, sizeof(name)),
           tpl__dtype_st_name(t->dtype),
           tpl__shape_str(t->shape, t->ndim, shape, sizeof(shape)),
           (unsigned long long)t->nbytes,
           tpl__cli_safe(m->files[t->file].name, file, sizeof(file)));
  }
  printf("%zu tensors, %zu files, %llu bytes (%s)\n", m->ntensors, m->nfiles,
         (unsigned long long)tpl__model_bytes(m), format_name(m->format));
}

/* The table with two more columns: each rank's shape and the rule. */
static void print_shard_table(const struct tpl_model *m,
                              const struct shard_view *v) {
  char shape[256], sshape[256], name[TPL_SAFE_LEN(TPL_MAX_NAME)];
  char file[TPL_SAFE_LEN(256)];
  uint64_t ss[TPL_MAX_DIMS];
  printf("%-56s %-8s %-22s %-22s %-22s %14s  %s\n", "NAME", "DTYPE", "SHAPE",
         "SHARD SHAPE", "RULE", "BYTES", "FILE");
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    shard_shape(t, &v->st[i], v->nshards, ss);
    printf("%-56s %-8s %-22s %-22s %-22s %14llu  %s\n",
           tpl__cli_safe(t->name, name, sizeof(name)),
           tpl__dtype_st_name(t->dtype),
           tpl__shape_str(t->shape, t->ndim, shape, sizeof(shape)),
           tpl__shape_str(ss, t->ndim, sshape, sizeof(sshape)),
           tpl__strategy_rule_name(&v->st[i]), (unsigned long long)t->nbytes,
           tpl__cli_safe(m->files[t->file].name, file, sizeof(file)));
  }
  printf("%zu tensors, %zu files, %llu bytes (%s); %u shards, plan: %s\n",
         m->ntensors, m->nfiles, (unsigned long long)tpl__model_bytes(m),
         format_name(m->format), v->nshards, v->plan->source);
}

struct inspect_args {
  const char *model, *plan;
  unsigned long long nshards; /* 0: no shard view */
  int json;
};

/* Returns -1 to go on, else the exit code (help or usage error). */
static int parse_args(int argc, char **argv, struct inspect_args *a) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"shards", required_argument, NULL, 'n'},
                                       {"plan", required_argument, NULL, 'p'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
    case 'j':
      a->json = 1;
      break;
    case 'n':
      if (tpl__cli_parse_uint(optarg, MAX_SHARDS, &a->nshards) != 0 ||
          a->nshards == 0)
        return tpl__cli_usage_error("inspect",
                                    "--shards: expected 1..%d, "
                                    "found '%s'",
                                    MAX_SHARDS, optarg);
      break;
    case 'p':
      a->plan = optarg;
      break;
    case 'h':
      fputs(inspect_help, stdout);
      return 0;
    case ':':
      return tpl__cli_usage_error("inspect", "option '%s' needs a value",
                                  argv[optind - 1]);
    default:
      return tpl__cli_usage_error("inspect", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (optind != argc - 1)
    return tpl__cli_usage_error("inspect", "expected one MODEL argument");
  if (a->plan != NULL && a->nshards == 0)
    return tpl__cli_usage_error("inspect", "--plan needs --shards N");
  a->model = argv[optind];
  return -1;
}

static int show(const struct tpl_model *m, const struct inspect_args *a,
                struct tpl_error *err) {
  struct shard_view v = {(uint32_t)a->nshards, NULL, NULL};
  struct tpl__plan *p = NULL;
  struct tpl__strategy *st = NULL;
  int rc;
  if (a->nshards == 0) {
    if (a->json)
      print_json(m, NULL);
    else
      print_table(m);
    return 0;
  }
  rc = tpl__plan_for_model(a->plan ? a->plan : "auto", m, v.nshards, &p, &st,
                           err);
  if (rc != 0) return rc;
  v.plan = p;
  v.st = st;
  if (a->json)
    print_json(m, &v);
  else
    print_shard_table(m, &v);
  free(st);
  tpl__plan_free(p);
  return 0;
}

int tpl__cmd_inspect(int argc, char **argv) {
  struct inspect_args a = {NULL, NULL, 0, 0};
  struct tpl_error err = {0};
  struct tpl_model *m = NULL;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  rc = tpl__model_open(a.model, &m, &err);
  if (rc == 0) rc = show(m, &a, &err);
  tpl__model_free(m);
  if (rc != 0) return tpl__cli_report(rc, &err);
  return 0;
}
