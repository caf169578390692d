/* main.c - the tpload binary: everything else lives in libtpload. */
#include "cli.h"

int main(int argc, char **argv) {
  return tpl__cli_main(argc, argv);
}
