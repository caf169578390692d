/* cmd_grid.h - the grid options of the one-process commands (`plan`,
 * `inspect`, `verify`, `dump`): --shards N (the world a load would have),
 * --tp T and --pp P, read as `mpirun -np N tpload load --tp T --pp P`
 * reads them; and --bias-policy. */
#ifndef TPL_CMD_GRID_H
#define TPL_CMD_GRID_H

#include "cli.h"
#include "topology.h"

/* The option values as given (NULL when absent). */
struct tpl__grid_args {
  const char *shards, *tp, *pp;
  int ep;              /* --ep given: experts whole over the EP group */
  const char *ep_size; /* --ep-size E (implies --ep), NULL when absent */
};

/* An optional count option (--tp, --pp, --shards) of `value` (NULL when
 * absent): *out is 0 when absent, else the number in 1..65536.  Returns 0,
 * or 64 after printing the usage error. */
int tpl__cli_grid_count(const struct tpl__cli_command *cmd, const char *name,
                        const char *value, uint32_t *out);

/* Reads the grid: N = --shards (default T x P), T = --tp (default N),
 * P = --pp (default 1), D = N / (T x P); with --ep or --ep-size E the
 * expert-parallel group has E ranks (T, the default, or T x D:
 * tpl__grid_set_ep).  At least one of --shards and
 * --tp must be given.  Returns 0 with *out filled, or 64 after printing
 * the usage error with the numbers (an option that is not a number in
 * 1..65536, a world that is not a multiple of T x P, an E that is
 * neither T nor T x D). */
int tpl__cli_grid(const struct tpl__cli_command *cmd,
                  const struct tpl__grid_args *a, struct tpl__grid *out);

/* --bias-policy `value` (mlc, vllm or whole; NULL when absent) and
 * --no-bias-scaling (`no_scaling`, an alias of whole) of every command
 * that plans a load: *out is the enum tpl__bias_family (default mlc).
 * Returns 0, or 64 after printing the usage error (an unknown family,
 * --no-bias-scaling with mlc or vllm). */
int tpl__cli_bias_family(const struct tpl__cli_command *cmd, const char *value,
                         int no_scaling, int *out);

#endif
