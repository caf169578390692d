/* cli_table.c - prints the command table (src/cli.c) as tests/mpi/install.sh
 * checks tpload.1 and every `tpload CMD --help` against it: one line a
 * command, its name and then each of its long options as --NAME.  The
 * test also checks that these are the commands `tpload --help` lists. */
#include <stdio.h>

#include "cli.h"
#include "common.h"

static const struct tpl__cli_command *const commands[] = {
    &tpl__cmd_inspect,  &tpl__cmd_plan,  &tpl__cmd_synth,  &tpl__cmd_load,
    &tpl__cmd_preshard, &tpl__cmd_serve, &tpl__cmd_verify, &tpl__cmd_status,
    &tpl__cmd_reload,   &tpl__cmd_dump,
};

int main(void) {
  for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
    printf("%s", commands[i]->name);
    for (size_t o = 0; o < commands[i]->noptions; o++)
      printf(" --%s", commands[i]->options[o].name);
    printf("\n");
  }
  return 0;
}
