/* cli_table.c - prints the command table (src/cli.c) as tests/mpi/install.sh
 * checks tpload.1 and every `tpload CMD --help` against it: one line a
 * command, its name and then each of its long options as --NAME. */
#include <stdio.h>

#include "cli.h"

int main(void) {
  size_t n;
  const struct tpl__cli_command *const *cmds = tpl__cli_commands(&n);
  for (size_t i = 0; i < n; i++) {
    printf("%s", cmds[i]->name);
    for (size_t o = 0; o < cmds[i]->noptions; o++)
      printf(" --%s", cmds[i]->options[o].name);
    printf("\n");
  }
  return 0;
}
