/* cmd_stubs.c - commands not built yet: they say so and exit 70. */
#include <stdio.h>

#include "cli.h"

static int not_yet(const char *name) {
  fprintf(stderr, "tpload %s: not implemented yet\n", name);
  return 70;
}

int tpl__cmd_load(int argc, char **argv) { return not_yet(argv[0]); }
int tpl__cmd_verify(int argc, char **argv) { return not_yet(argv[0]); }
