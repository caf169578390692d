/* cmd_grid.c - reads --shards / --tp / --pp of the one-process commands
 * into a struct tpl__grid, with the defaults and refusals of DESIGN.md's
 * grid (P defaults to 1, T to the world / P; a world that is not a multiple
 * of T x P is a usage error naming the numbers, from tpl__grid_make), and
 * the bias family (--bias-policy) of every command that plans a load. */
#include "cmd_grid.h"
#include "scope.h"

#define MAX_RANKS 65536u

int tpl__cli_grid_count(const struct tpl__cli_command *cmd, const char *name,
                        const char *value, uint32_t *out) {
  unsigned long long n = 0;
  if (value != NULL &&
      (tpl__cli_parse_uint(value, MAX_RANKS, &n) != 0 || n == 0))
    return tpl__cli_usage_error(cmd, "--%s: expected 1..%u, found '%s'", name,
                                MAX_RANKS, value);
  *out = (uint32_t)n;
  return 0;
}

int tpl__cli_grid(const struct tpl__cli_command *cmd,
                  const struct tpl__grid_args *a, struct tpl__grid *out) {
  struct tpl__error err = {0};
  uint32_t n, tp, pp, ep;
  uint64_t world;
  if (tpl__cli_grid_count(cmd, "shards", a->shards, &n) != 0 ||
      tpl__cli_grid_count(cmd, "tp", a->tp, &tp) != 0 ||
      tpl__cli_grid_count(cmd, "pp", a->pp, &pp) != 0 ||
      tpl__cli_grid_count(cmd, "ep-size", a->ep_size, &ep) != 0)
    return 64;
  if (n == 0 && tp == 0)
    return tpl__cli_usage_error(cmd, "--shards N or --tp T is required");
  pp = pp ? pp : 1;
  tp = tp ? tp : tpl__grid_default_tp(n, pp);
  world = n ? n : (uint64_t)tp * pp;
  if (world > MAX_RANKS)
    return tpl__cli_usage_error(cmd, "--tp x --pp is more than 65536 ranks");
  if (tpl__grid_make((uint32_t)world, tp, pp, &err, out) != 0 ||
      tpl__grid_set_ep(out, a->ep || ep != 0, ep, &err) != 0)
    return tpl__cli_usage_error(cmd, "%s", err.msg);
  return 0;
}

int tpl__cli_bias_family(const struct tpl__cli_command *cmd, const char *value,
                         int no_scaling, int *out) {
  int f = value != NULL ? tpl__bias_family_parse(value) : TPL_BIASF_MLC;
  if (f < 0)
    return tpl__cli_usage_error(cmd,
                                "--bias-policy: expected mlc, vllm or whole, "
                                "found '%s'",
                                value);
  if (no_scaling && value != NULL && f != TPL_BIASF_WHOLE)
    return tpl__cli_usage_error(cmd,
                                "--no-bias-scaling (--bias-policy whole) "
                                "contradicts --bias-policy %s",
                                value);
  *out = no_scaling ? TPL_BIASF_WHOLE : f;
  return 0;
}
