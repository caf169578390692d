/* cmd_verify.c - `tpload verify MODEL DIR [--plan P]`. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
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

int tpl__cmd_verify(int argc, char **argv) {
  static const struct option opts[] = {{"plan", required_argument, NULL, 'p'},
                                       {"quiet", no_argument, NULL, 'q'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct tpl_error err = {0};
  struct tpl__verify_result res;
  const char *plan = "auto";
  int c, rc, quiet = 0;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'p':
      plan = optarg;
      break;
    case 'q':
      quiet = 1;
      break;
    case 'h':
      fputs(verify_help, stdout);
      return 0;
    default:
      return tpl__cli_usage_error("verify", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (optind != argc - 2)
    return tpl__cli_usage_error("verify", "expected MODEL and DIR");
  rc = tpl__verify(argv[optind], argv[optind + 1], plan, &res, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  if (!quiet)
    printf("verify: %u ranks, %llu tensor shards, %llu bytes: all match\n",
           res.ranks, (unsigned long long)res.tensors,
           (unsigned long long)res.bytes);
  return 0;
}
