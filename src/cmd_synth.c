/* cmd_synth.c - `tpload synth --arch A --out DIR [options]`: parses the
 * options into a struct tpl__synth_opts, lets synth.c resolve and write
 * the checkpoint, and prints a one-line summary. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
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
    "  --arch A           @archs@\n"
    "                     (qwen2: q/k/v biases; gemma: tied embeddings;\n"
    "                     mixtral: experts; phi3: fused qkv_proj and\n"
    "                     gate_up_proj; gpt2: Conv1D [in,out] weights)\n"
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
    "  --dtype T          @dtypes@ (default bf16)\n"
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
    "                     MLC's convert_weight writes, each file's md5sum\n"
    "                     recorded as TVM's writer does; llama, mistral,\n"
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

#define SYNTH_OPTIONS(X)                                                       \
  X(OPT_ARCH, "arch", TPL_CLI_VALUE)                                           \
  X(OPT_QUANT, "quant", TPL_CLI_VALUE)                                         \
  X(OPT_OUT, "out", TPL_CLI_VALUE)                                             \
  X(OPT_LAYERS, "layers", TPL_CLI_VALUE)                                       \
  X(OPT_HIDDEN, "hidden", TPL_CLI_VALUE)                                       \
  X(OPT_HEADS, "heads", TPL_CLI_VALUE)                                         \
  X(OPT_KV, "kv-heads", TPL_CLI_VALUE)                                         \
  X(OPT_INTER, "intermediate", TPL_CLI_VALUE)                                  \
  X(OPT_VOCAB, "vocab", TPL_CLI_VALUE)                                         \
  X(OPT_EXPERTS, "experts", TPL_CLI_VALUE)                                     \
  X(OPT_DTYPE, "dtype", TPL_CLI_VALUE)                                         \
  X(OPT_SEED, "seed", TPL_CLI_VALUE)                                           \
  X(OPT_FILES, "files", TPL_CLI_VALUE)                                         \
  X(OPT_GIB, "gib", TPL_CLI_VALUE)                                             \
  X(OPT_FORMAT, "format", TPL_CLI_VALUE)                                       \
  X(OPT_FORCE, "force", TPL_CLI_FLAG)                                          \
  X(OPT_QUIET, "quiet", TPL_CLI_FLAG)

enum { SYNTH_OPTIONS(TPL_CLI_OPTION_ID) };

static const struct tpl__cli_option synth_options[] = {
    SYNTH_OPTIONS(TPL_CLI_OPTION_ENTRY)};

/* The integer options: where each goes; all but the seed must be > 0. */
static const struct {
  int option;
  size_t offset;
} uint_options[] = {
    {OPT_LAYERS, offsetof(struct tpl__synth_opts, layers)},
    {OPT_HIDDEN, offsetof(struct tpl__synth_opts, hidden)},
    {OPT_HEADS, offsetof(struct tpl__synth_opts, heads)},
    {OPT_KV, offsetof(struct tpl__synth_opts, kv_heads)},
    {OPT_INTER, offsetof(struct tpl__synth_opts, intermediate)},
    {OPT_VOCAB, offsetof(struct tpl__synth_opts, vocab)},
    {OPT_EXPERTS, offsetof(struct tpl__synth_opts, experts)},
    {OPT_FILES, offsetof(struct tpl__synth_opts, files)},
    {OPT_SEED, offsetof(struct tpl__synth_opts, seed)},
};

/* The element types synth writes: short name, long name. */
static const struct {
  const char *name, *alias;
  int dtype;
} synth_dtypes[] = {
    {"bf16", "bfloat16", TPL_DT_BF16},
    {"f16", "float16", TPL_DT_F16},
    {"f32", "float32", TPL_DT_F32},
};

static const char *dtype_name(size_t i) {
  return synth_dtypes[i].name;
}

/* The lists in help and errors, from the arch and dtype tables. */
static const char *help_list(const char *key) {
  static char archs[256], dtypes[64];
  if (strcmp(key, "archs") == 0)
    return tpl__cli_list(TPL_ARCH_COUNT, tpl__synth_arch_name, archs,
                         sizeof(archs));
  if (strcmp(key, "dtypes") == 0)
    return tpl__cli_list(ARRAY_SIZE(synth_dtypes), dtype_name, dtypes,
                         sizeof(dtypes));
  return NULL;
}

static int parse_dtype(const char *s) {
  for (size_t i = 0; i < ARRAY_SIZE(synth_dtypes); i++)
    if (strcmp(s, synth_dtypes[i].name) == 0 ||
        strcmp(s, synth_dtypes[i].alias) == 0)
      return synth_dtypes[i].dtype;
  return -1;
}

static int parse_gib(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0) || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int parse_uints(const struct tpl__cli_command *cmd,
                       const struct tpl__cli_args *a,
                       struct tpl__synth_opts *o) {
  for (size_t i = 0; i < ARRAY_SIZE(uint_options); i++) {
    int id = uint_options[i].option;
    unsigned long long v;
    if (!tpl__cli_has(a, id)) continue;
    if (tpl__cli_parse_uint(a->value[id], UINT64_MAX, &v) != 0 ||
        (v == 0 && id != OPT_SEED))
      return tpl__cli_usage_error(
          cmd, "--%s: expected a %s integer, found '%s'",
          synth_options[id].name, id == OPT_SEED ? "non-negative" : "positive",
          a->value[id]);
    *(uint64_t *)((char *)o + uint_options[i].offset) = v;
  }
  return 0;
}

/* TPL_SYNTH_HF (also when no --format), TPL_SYNTH_MLC, or -1. */
static int parse_format(const char *arg) {
  if (arg == NULL || strcmp(arg, "hf") == 0 || strcmp(arg, "safetensors") == 0)
    return TPL_SYNTH_HF;
  return strcmp(arg, "mlc") == 0 ? TPL_SYNTH_MLC : -1;
}

/* The options whose values are names: arch, dtype, format, quant. */
static int parse_names(const struct tpl__cli_command *cmd,
                       const struct tpl__cli_args *a,
                       struct tpl__synth_opts *o) {
  const char *arch = a->value[OPT_ARCH], *dtype = a->value[OPT_DTYPE];
  const char *quant = a->value[OPT_QUANT];
  if (arch == NULL) return tpl__cli_usage_error(cmd, "--arch is required");
  o->arch = tpl__synth_arch_from_name(arch);
  if (o->arch < 0)
    return tpl__cli_usage_error(cmd, "--arch: expected %s, found '%s'",
                                help_list("archs"), arch);
  o->dtype = dtype ? parse_dtype(dtype) : TPL_DT_BF16;
  if (o->dtype < 0)
    return tpl__cli_usage_error(cmd, "--dtype: expected %s, found '%s'",
                                help_list("dtypes"), dtype);
  o->format = parse_format(a->value[OPT_FORMAT]);
  if (o->format < 0)
    return tpl__cli_usage_error(cmd, "--format: expected hf or mlc, found '%s'",
                                a->value[OPT_FORMAT]);
  o->quant = quant ? tpl__quant_find(quant) : NULL;
  if (quant != NULL && o->quant == NULL)
    return tpl__cli_usage_error(cmd,
                                "--quant: expected an MLC scheme such as "
                                "q4f16_1, found '%s'",
                                quant);
  return 0;
}

static int parse_args(const struct tpl__cli_command *cmd,
                      const struct tpl__cli_args *a,
                      struct tpl__synth_opts *o) {
  const char *gib = a->value[OPT_GIB];
  int rc;
  memset(o, 0, sizeof(*o));
  o->force = tpl__cli_has(a, OPT_FORCE);
  rc = parse_names(cmd, a, o);
  if (rc == 0) rc = parse_uints(cmd, a, o);
  if (rc != 0) return rc;
  if (gib != NULL && parse_gib(gib, &o->gib) != 0)
    return tpl__cli_usage_error(
        cmd, "--gib: expected a positive number, found '%s'", gib);
  if (a->value[OPT_OUT] == NULL)
    return tpl__cli_usage_error(cmd, "--out DIR is required");
  return 0;
}

static void print_summary(const struct tpl__synth_opts *o, const char *out,
                          const struct tpl__synth_summary *s) {
  const char *kind =
      o->format == TPL_SYNTH_MLC ? "params_shard" : "safetensors";
  printf("synth: %s: %s, %llu layers, %zu %s file%s, %zu tensors, %llu bytes "
         "(%.2f MiB)\n",
         out, tpl__synth_arch_name(o->arch), (unsigned long long)o->layers,
         s->files, kind, s->files == 1 ? "" : "s", s->tensors,
         (unsigned long long)s->bytes, (double)s->bytes / 1048576.0);
}

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  struct tpl__synth_opts o;
  struct tpl__synth_summary sum;
  struct tpl__error err = {0};
  int rc = parse_args(cmd, a, &o);
  if (rc != 0) return rc;
  rc = tpl__synth_resolve(&o, &err);
  if (rc == 0) rc = tpl__synth_write(&o, a->value[OPT_OUT], &sum, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (!tpl__cli_has(a, OPT_QUIET)) print_summary(&o, a->value[OPT_OUT], &sum);
  return 0;
}

const struct tpl__cli_command tpl__cmd_synth = {
    .name = "synth",
    .summary = "write a random HF-style checkpoint",
    .options = synth_options,
    .noptions = ARRAY_SIZE(synth_options),
    .operands_error = "unexpected argument",
    .help = synth_help,
    .help_list = help_list,
    .exec = run,
};
