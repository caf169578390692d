/* main.c - the tpload binary: everything else lives in the core library
 * (libtplcore, docs/FILES.md). */
#include "cli.h"

int main(int argc, char **argv) {
  return tpl__cli_main(argc, argv);
}
