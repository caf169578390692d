/* cmd_verify.c - `tpload verify MODEL DIR [--plan P]`. */
#include <stdio.h>

#include "cli.h"
#include "common.h"
#include "verify.h"

static const char verify_help[] =
    "usage: tpload verify MODEL DIR [--plan P] [--quiet]\n"
    "\n"
    "Recomputes every rank's shard of every tensor from MODEL and checks\n"
    "DIR (the output of `tpload preshard`: rank{R}.safetensors and\n"
    "shard-info.json) byte for byte, shape by shape and checksum by\n"
    "checksum.  The shard count and bias scaling come from\n"
    "shard-info.json; the plan must be the one preshard used (default\n"
    "auto).\n"
    "\n"
    "Exit codes: 0 all match, 65 a mismatch (the first is named) or a\n"
    "malformed input, 66 a file missing, 74 I/O error.\n";

enum { OPT_PLAN, OPT_QUIET };

static const struct tpl__cli_option verify_options[] = {
    [OPT_PLAN] = {"plan", TPL_CLI_VALUE, 0},
    [OPT_QUIET] = {"quiet", TPL_CLI_FLAG, 0},
};

static int run_verify(const struct tpl__cli_command *cmd,
                      const struct tpl__cli_args *a) {
  struct tpl_error err = {0};
  struct tpl__verify_result res;
  const char *plan = a->value[OPT_PLAN] ? a->value[OPT_PLAN] : "auto";
  int rc = tpl__verify(a->operands[0], a->operands[1], plan, &res, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (!tpl__cli_has(a, OPT_QUIET))
    printf("verify: %u ranks, %llu tensor shards, %llu bytes: all match\n",
           res.ranks, (unsigned long long)res.tensors,
           (unsigned long long)res.bytes);
  return 0;
}

const struct tpl__cli_command tpl__cmd_verify = {
    .name = "verify",
    .summary = "check a preshard output against the model",
    .options = verify_options,
    .noptions = ARRAY_SIZE(verify_options),
    .min_operands = 2,
    .max_operands = 2,
    .operands_error = "expected MODEL and DIR",
    .help = verify_help,
    .exec = run_verify,
};
