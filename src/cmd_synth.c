/* cmd_synth.c - `tpload synth --arch A --out DIR [options]`: parses the
 * options into a struct tpl__synth_opts, lets synth.c resolve and write
 * the checkpoint, and prints a one-line summary. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtype.h"
#include "synth.h"

static const char synth_help[] =
    "usage: tpload synth --arch A --out DIR [OPTIONS]\n"
    "\n"
    "Writes a random but deterministic checkpoint with the real tensor "
    "names and\nshapes of architecture A: for demos, tests and "
    "benchmarks.  The default is an\nHF-style directory (config.json and "
    "model.safetensors, or with --files K the\nsharded "
    "model-0000i-of-0000K.safetensors files plus "
    "model.safetensors.index.json).\nValues are finite non-zero floats of "
    "magnitude 1/64..1/4, drawn per tensor\nfrom the seed and the tensor's "
    "name, so the same options give the same bytes.\n"
    "\n"
    "  --arch A           llama, mistral, qwen2 (q/k/v biases), gemma\n"
    "                     (tied embeddings), mixtral (experts), phi3 (fused\n"
    "                     qkv_proj and gate_up_proj), gpt2 (Conv1D [in,out]\n"
    "                     weights), gpt_neox\n"
    "  --out DIR          output directory (created; an existing non-empty\n"
    "                     DIR is refused unless --force)\n"
    "  --layers N         decoder layers (default 2)\n"
    "  --hidden E         hidden size (default 256); divisible by --heads\n"
    "  --heads H          attention heads (default 8)\n"
    "  --kv-heads K       key/value heads, dividing --heads (default H/2 for\n"
    "                     the llama-like archs; gpt2 and gpt_neox: H)\n"
    "  --intermediate I   MLP size (default 2E; gpt2 and gpt_neox 4E)\n"
    "  --vocab V          vocabulary size (default 1024)\n"
    "  --experts X        mixtral experts per layer (default 4)\n"
    "  --dtype T          bf16 (default), f16 or f32\n"
    "  --seed S           random seed (default 0)\n"
    "  --files K          split the tensors over K safetensors files, in\n"
    "                     state-dict order, about equal in size (default 1)\n"
    "  --gib X            choose --layers so the checkpoint is about X GiB\n"
    "                     (for benchmarks; raise --hidden for big tensors)\n"
    "  --format F         hf (default) or mlc: an MLC weight directory\n"
    "                     (tensor-cache.json, params_shard_*.bin of ~32 MiB,\n"
    "                     mlc-chat-config.json) with MLC's fused qkv_proj\n"
    "                     [q;k;v] and gate_up_proj [gate;up] (qwen2:\n"
    "                     c_attn; phi3: transformer.h.N.mixer.*), records\n"
    "                     in format f32-to-bf16 (float32 stored as bf16), as\n"
    "                     MLC's convert_weight writes; llama, mistral,\n"
    "                     qwen2, gemma and phi3 only\n"
    "  --quant Q          with --format mlc: store the linears (and, for\n"
    "                     group schemes, embedding and lm_head) as MLC's\n"
    "                     scheme Q does: q4f16_1, q4bf16_1, q3f16_1, q4f32_1,\n"
    "                     q4f16_0 (KN), e4m3_e4m3_f16, e5m2_e5m2_f16,\n"
    "                     fp8_e4m3fn_bf16_block_scale[_static_activation];\n"
    "                     Q's model dtype replaces --dtype\n"
    "  --force            overwrite DIR: removes the files synth writes\n"
    "                     (config.json, *.safetensors, index, MLC files)\n"
    "  --quiet            print nothing on success\n"
    "  --help             show this help\n"
    "\n"
    "Prints one line: the directory, files, tensors and bytes written.\n"
    "Exit codes: 0 ok, 64 usage (bad or inconsistent sizes), 73 DIR exists\n"
    "and is not empty or cannot be created, 74 I/O error.\n";

enum {
  OPT_ARCH = 256,
  OPT_OUT,
  OPT_LAYERS,
  OPT_HIDDEN,
  OPT_HEADS,
  OPT_KV,
  OPT_INTER,
  OPT_VOCAB,
  OPT_EXPERTS,
  OPT_DTYPE,
  OPT_SEED,
  OPT_FILES,
  OPT_GIB,
  OPT_FORMAT,
  OPT_FORCE,
  OPT_QUIET,
  OPT_HELP,
  OPT_QUANT
};

static const struct option synth_opts[] = {
    {"arch", required_argument, NULL, OPT_ARCH},
    {"quant", required_argument, NULL, OPT_QUANT},
    {"out", required_argument, NULL, OPT_OUT},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"kv-heads", required_argument, NULL, OPT_KV},
    {"intermediate", required_argument, NULL, OPT_INTER},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"experts", required_argument, NULL, OPT_EXPERTS},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"files", required_argument, NULL, OPT_FILES},
    {"gib", required_argument, NULL, OPT_GIB},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"force", no_argument, NULL, OPT_FORCE},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0}};

struct synth_args {
  struct tpl__synth_opts o;
  const char *out;
  int quiet;
  int help;
};

static int parse_dtype(const char *s) {
  if (strcmp(s, "bf16") == 0 || strcmp(s, "bfloat16") == 0) return TPL_DT_BF16;
  if (strcmp(s, "f16") == 0 || strcmp(s, "float16") == 0) return TPL_DT_F16;
  if (strcmp(s, "f32") == 0 || strcmp(s, "float32") == 0) return TPL_DT_F32;
  return -1;
}

static int parse_gib(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0) || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

/* Options with a positive integer (the seed may be 0). */
static uint64_t *uint_slot(struct tpl__synth_opts *o, int c) {
  switch (c) {
  case OPT_LAYERS:
    return &o->layers;
  case OPT_HIDDEN:
    return &o->hidden;
  case OPT_HEADS:
    return &o->heads;
  case OPT_KV:
    return &o->kv_heads;
  case OPT_INTER:
    return &o->intermediate;
  case OPT_VOCAB:
    return &o->vocab;
  case OPT_EXPERTS:
    return &o->experts;
  case OPT_FILES:
    return &o->files;
  case OPT_SEED:
    return &o->seed;
  default:
    return NULL;
  }
}

static const char *opt_name(int c) {
  for (size_t i = 0; synth_opts[i].name != NULL; i++)
    if (synth_opts[i].val == c) return synth_opts[i].name;
  return "?";
}

static int parse_uint_opt(struct synth_args *a, int c, const char *arg) {
  unsigned long long v;
  if (tpl__cli_parse_uint(arg, UINT64_MAX, &v) != 0 ||
      (v == 0 && c != OPT_SEED))
    return tpl__cli_usage_error(
        "synth", "--%s: expected a %s integer, found '%s'", opt_name(c),
        c == OPT_SEED ? "non-negative" : "positive", arg);
  *uint_slot(&a->o, c) = v;
  return 0;
}

static int parse_one(struct synth_args *a, int c, const char *arg,
                     const char *opt) {
  switch (c) {
  case OPT_ARCH:
    a->o.arch = tpl__synth_arch_from_name(arg);
    if (a->o.arch >= 0) return 0;
    return tpl__cli_usage_error("synth",
                                "--arch: expected llama, mistral, qwen2, "
                                "gemma, mixtral, phi3, gpt2 or gpt_neox, "
                                "found '%s'",
                                arg);
  case OPT_OUT:
    a->out = arg;
    return 0;
  case OPT_DTYPE:
    a->o.dtype = parse_dtype(arg);
    if (a->o.dtype >= 0) return 0;
    return tpl__cli_usage_error(
        "synth", "--dtype: expected bf16, f16 or f32, found '%s'", arg);
  case OPT_GIB:
    if (parse_gib(arg, &a->o.gib) == 0) return 0;
    return tpl__cli_usage_error(
        "synth", "--gib: expected a positive number, found '%s'", arg);
  case OPT_FORMAT:
    if (strcmp(arg, "hf") == 0 || strcmp(arg, "safetensors") == 0)
      a->o.format = TPL_SYNTH_HF;
    else if (strcmp(arg, "mlc") == 0)
      a->o.format = TPL_SYNTH_MLC;
    else
      return tpl__cli_usage_error(
          "synth", "--format: expected hf or mlc, found '%s'", arg);
    return 0;
  case OPT_QUANT:
    a->o.quant = tpl__quant_find(arg);
    if (a->o.quant != NULL) return 0;
    return tpl__cli_usage_error(
        "synth",
        "--quant: expected an MLC scheme such as q4f16_1, found "
        "'%s'",
        arg);
  case OPT_FORCE:
    a->o.force = 1;
    return 0;
  case OPT_QUIET:
    a->quiet = 1;
    return 0;
  case OPT_HELP:
    a->help = 1;
    return 0;
  default:
    if (uint_slot(&a->o, c) != NULL) return parse_uint_opt(a, c, arg);
    return tpl__cli_usage_error("synth", "unknown option '%s'", opt);
  }
}

static int parse_args(int argc, char **argv, struct synth_args *a) {
  int c;
  memset(a, 0, sizeof(*a));
  a->o.arch = -1;
  a->o.dtype = TPL_DT_BF16;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", synth_opts, NULL)) != -1) {
    int rc;
    if (c == 'h') c = OPT_HELP;
    if (c == '?' || c == ':')
      return tpl__cli_usage_error("synth",
                                  "unknown option or missing "
                                  "value: '%s'",
                                  argv[optind - 1]);
    rc = parse_one(a, c, optarg, argv[optind - 1]);
    if (rc != 0) return rc;
  }
  if (a->help) return 0;
  if (optind != argc)
    return tpl__cli_usage_error("synth", "unexpected argument '%s'",
                                argv[optind]);
  if (a->o.arch < 0) return tpl__cli_usage_error("synth", "--arch is required");
  if (a->out == NULL)
    return tpl__cli_usage_error("synth", "--out DIR is required");
  return 0;
}

static void print_summary(const struct synth_args *a,
                          const struct tpl__synth_summary *s) {
  const char *kind =
      a->o.format == TPL_SYNTH_MLC ? "params_shard" : "safetensors";
  printf("synth: %s: %s, %llu layers, %zu %s file%s, %zu tensors, %llu bytes "
         "(%.2f MiB)\n",
         a->out, tpl__synth_arch_name(a->o.arch), (unsigned long long)s->layers,
         s->files, kind, s->files == 1 ? "" : "s", s->tensors,
         (unsigned long long)s->bytes, (double)s->bytes / 1048576.0);
}

int tpl__cmd_synth(int argc, char **argv) {
  struct synth_args a;
  struct tpl__synth_summary sum;
  struct tpl_error err = {0};
  int rc = parse_args(argc, argv, &a);
  if (rc != 0) return rc;
  if (a.help) {
    fputs(synth_help, stdout);
    return 0;
  }
  rc = tpl__synth_resolve(&a.o, &err);
  if (rc == 0) rc = tpl__synth_write(&a.o, a.out, &sum, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (!a.quiet) print_summary(&a, &sum);
  return 0;
}
