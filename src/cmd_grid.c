/* cmd_grid.c - reads --shards / --tp / --pp of the one-process commands
 * into a struct tpl__grid, with the defaults and refusals of DESIGN.md's
 * grid (T defaults to the world, P to 1; a world that is not a multiple
 * of T x P is a usage error naming the numbers, from tpl__grid_make). */
#include "cmd_grid.h"

#define MAX_RANKS 65536

/* An optional count in 1..65536: 0 when absent, -1 after a usage error. */
static long long count_option(const struct tpl__cli_command *cmd,
                              const char *name, const char *value) {
  unsigned long long n;
  if (value == NULL) return 0;
  if (tpl__cli_uint_option(cmd, name, value, 1, MAX_RANKS, &n) != 0) return -1;
  return (long long)n;
}

int tpl__cli_grid(const struct tpl__cli_command *cmd,
                  const struct tpl__grid_args *a, struct tpl__grid *out) {
  struct tpl_error err = {0};
  long long n = count_option(cmd, "shards", a->shards);
  long long tp = n < 0 ? -1 : count_option(cmd, "tp", a->tp);
  long long pp = tp < 0 ? -1 : count_option(cmd, "pp", a->pp);
  int rc;
  if (pp < 0) return 64;
  if (n == 0 && tp == 0)
    return tpl__cli_usage_error(cmd, "--shards N or --tp T is required");
  pp = pp ? pp : 1;
  tp = tp ? tp : n;
  n = n ? n : tp * pp;
  if (n > MAX_RANKS)
    return tpl__cli_usage_error(cmd, "--tp x --pp is more than 65536 ranks");
  rc = tpl__grid_make((uint32_t)n, (uint32_t)tp, (uint32_t)pp, &err, out);
  return rc == 0 ? 0 : tpl__cli_usage_error(cmd, "%s", err.msg);
}
