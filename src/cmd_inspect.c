/* cmd_inspect.c - `tpload inspect MODEL [--json]`: every tensor's name,
 * dtype, shape, bytes and file, and the totals. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dtype.h"
#include "model.h"

static const char inspect_help[] =
    "usage: tpload inspect MODEL [--json]\n"
    "\n"
    "Reads MODEL strictly (a .safetensors file, a directory with\n"
    "model.safetensors or model.safetensors.index.json, or an MLC weight\n"
    "directory) and lists every tensor: name, dtype, shape, bytes, file.\n"
    "\n"
    "  --json   print one JSON object (tensors in checkpoint order, totals)\n"
    "  --help   show this help\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 malformed model, 66 model missing,\n"
    "74 I/O error.\n";

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

static json_t *shape_json(const uint64_t *shape, int ndim) {
  json_t *a = json_array();
  for (int i = 0; i < ndim; i++)
    json_array_append_new(a, json_integer((json_int_t)shape[i]));
  return a;
}

static int print_json(const struct tpl_model *m) {
  json_t *root = json_object(), *tensors = json_array();
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "dtype", json_string(tpl__dtype_st_name(t->dtype)));
    json_object_set_new(o, "shape", shape_json(t->shape, t->ndim));
    json_object_set_new(o, "bytes", json_integer((json_int_t)t->nbytes));
    json_object_set_new(o, "file", json_string(m->files[t->file].name));
    json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
    json_array_append_new(tensors, o);
  }
  json_object_set_new(root, "format", json_string(format_name(m->format)));
  json_object_set_new(root, "tensors", tensors);
  json_object_set_new(root, "tensor_count", json_integer((json_int_t)m->ntensors));
  json_object_set_new(root, "file_count", json_integer((json_int_t)m->nfiles));
  json_object_set_new(root, "total_bytes",
                      json_integer((json_int_t)tpl__model_bytes(m)));
  json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(root);
  return 0;
}

static void print_table(const struct tpl_model *m) {
  char shape[256];
  printf("%-56s %-8s %-22s %14s  %s\n", "NAME", "DTYPE", "SHAPE", "BYTES",
         "FILE");
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    printf("%-56s %-8s %-22s %14llu  %s\n", t->name,
           tpl__dtype_st_name(t->dtype),
           tpl__shape_str(t->shape, t->ndim, shape, sizeof(shape)),
           (unsigned long long)t->nbytes, m->files[t->file].name);
  }
  printf("%zu tensors, %zu files, %llu bytes (%s)\n", m->ntensors, m->nfiles,
         (unsigned long long)tpl__model_bytes(m), format_name(m->format));
}

int tpl__cmd_inspect(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct tpl_error err = {0};
  struct tpl_model *m = NULL;
  int json = 0, c, rc;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
    case 'j':
      json = 1;
      break;
    case 'h':
      fputs(inspect_help, stdout);
      return 0;
    default:
      return tpl__cli_usage_error("inspect", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (optind != argc - 1)
    return tpl__cli_usage_error("inspect", "expected one MODEL argument");
  rc = tpl__model_open(argv[optind], &m, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (json)
    print_json(m);
  else
    print_table(m);
  tpl__model_free(m);
  return 0;
}
