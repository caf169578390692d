/* cmd_verify.c - `tpload verify MODEL DIR [--layout rank|mlc]`: checks a
 * preshard output, every rank of its grid (verify.c) or a presharded MLC
 * cache (verify_mlc.c), against the model (DESIGN.md sections 1, 2a). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_grid.h"
#include "common.h"
#include "layout.h"
#include "scope.h"
#include "verify.h"

static const char verify_help[] =
    "usage: tpload verify MODEL DIR [--plan P] [--tp T] [--pp P] [--ep]\n"
    "                     [--ep-size E] [--layout " TPL_LAYOUT_NAMES "]\n"
    "                     [--skip-mtp] [--quiet] [--bias-policy F]\n"
    "\n"
    "Recomputes every rank's shard of every tensor from MODEL and checks\n"
    "DIR (the output of `tpload preshard`: rank{R}.safetensors and\n"
    "shard-info.json) byte for byte, shape by shape and checksum by\n"
    "checksum.  The grid (T shards x P stages x D replicas) and bias\n"
    "policy come from shard-info.json (--bias-policy F, when given, must\n"
    "match its bias_policy: mlc, vllm or whole); each rank file must hold the\n"
    "tensors of its stage, cut as its shard, so every replica is checked\n"
    "against the same bytes as replica 0.  --tp / --pp, when given, must\n"
    "match the output; --ep asks for an expert-parallel output (its\n"
    "expert_parallel in shard-info.json: each expert's tensors whole on\n"
    "its owner's ranks only, as `preshard --ep` writes them), --ep-size E\n"
    "one over E ranks (T, or T x D: then replicas hold different experts\n"
    "and agree on every other tensor).  The plan\n"
    "must be the one preshard used (default auto), and so must\n"
    "--skip-mtp (the output holds the main model only).\n"
    "\n"
    "--layout mlc checks the output of `preshard --layout mlc` instead\n"
    "(MODEL the MLC weight directory it came from): the grid comes from\n"
    "DIR/mlc-chat-config.json; every cut tensor must be the records\n"
    "NAME_shard-K, K < T, each shard K as MLC's shard functions give it,\n"
    "every other tensor one record NAME, whole and unscaled; no other\n"
    "record; each file's md5sum as the cache records it; no file holding\n"
    "two workers' shard records or shard records beside replicated ones.\n"
    "Its biases are whole (MLC's model divides them): --bias-policy mlc\n"
    "or whole is taken, vllm refused (64), as preshard refuses it.\n"
    "\n" TPL_CLI_HTTP_HELP "\n"
    "Exit codes: 0 all match, 65 a mismatch (the first is named) or a\n"
    "malformed input, 66 a file missing (HTTP 404 included), 69 a server\n"
    "unreachable or failing after the retries, 74 I/O error (a remote\n"
    "object that changed included), 77 access denied (HTTP 401/403).\n";

enum {
  OPT_PLAN,
  OPT_QUIET,
  OPT_TP,
  OPT_PP,
  OPT_EP,
  OPT_EP_SIZE,
  OPT_LAYOUT,
  OPT_SKIP_MTP,
  OPT_BIAS_POLICY,
  TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ID)
};

static const struct tpl__cli_option verify_options[] = {
    [OPT_PLAN] = {"plan", TPL_CLI_VALUE, 0},
    [OPT_QUIET] = {"quiet", TPL_CLI_FLAG, 0},
    [OPT_TP] = {"tp", TPL_CLI_VALUE, 0},
    [OPT_PP] = {"pp", TPL_CLI_VALUE, 0},
    [OPT_EP] = {"ep", TPL_CLI_FLAG, 0},
    [OPT_EP_SIZE] = {"ep-size", TPL_CLI_VALUE, 0},
    [OPT_LAYOUT] = {"layout", TPL_CLI_VALUE, 0},
    [OPT_SKIP_MTP] = {"skip-mtp", TPL_CLI_FLAG, 0},
    [OPT_BIAS_POLICY] = {"bias-policy", TPL_CLI_VALUE, 0},
    TPL_CLI_HTTP_OPTIONS(TPL_CLI_OPTION_ENTRY)};

static int run_verify(const struct tpl__cli_command *cmd,
                      const struct tpl__cli_args *a) {
  struct tpl__error err = {0};
  struct tpl__verify_result res;
  struct tpl__verify_grid want;
  struct tpl__http_opts ho;
  const char *plan = a->value[OPT_PLAN] ? a->value[OPT_PLAN] : "auto";
  const struct tpl__output_layout *lay = NULL;
  struct tpl__layout_use use = {TPL_LAYOUT_VERIFY, a->operands[0], 0, -1};
  int rc;
  want.skip_mtp = tpl__cli_has(a, OPT_SKIP_MTP);
  want.bias_family = -1;
  if (a->value[OPT_BIAS_POLICY] != NULL &&
      tpl__cli_bias_family(cmd, a->value[OPT_BIAS_POLICY], 0,
                           &want.bias_family) != 0)
    return 64;
  if (tpl__cli_grid_count(cmd, "ep-size", a->value[OPT_EP_SIZE],
                          &want.ep_size) != 0 ||
      tpl__cli_grid_count(cmd, "tp", a->value[OPT_TP], &want.tp) != 0 ||
      tpl__cli_grid_count(cmd, "pp", a->value[OPT_PP], &want.pp) != 0 ||
      tpl__cli_http(cmd, a, OPT_RETRIES, &ho) != 0)
    return 64;
  want.ep = tpl__cli_has(a, OPT_EP) || want.ep_size != 0;
  use.ep = want.ep;
  use.bias_family = want.bias_family;
  if (tpl__layout_parse(a->value[OPT_LAYOUT], &use, &lay, &err) != 0)
    return tpl__cli_usage_error(cmd, "%s", err.msg);
  rc =
      lay->verify(a->operands[0], a->operands[1], plan, &want, &ho, &res, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (!tpl__cli_has(a, OPT_QUIET))
    printf("verify: %u %s (tp %u x pp %u x dp %u), %llu %s, "
           "%llu bytes: all match%s\n",
           res.grid.world, lay->members, res.grid.tp, res.grid.pp, res.grid.dp,
           (unsigned long long)res.tensors, lay->checked,
           (unsigned long long)res.bytes,
           res.grid.dp == 1            ? ""
           : res.grid.ep > res.grid.tp ? "; replicas agree (experts aside)"
                                       : "; replicas agree");
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
