/* cli.c - `tpload COMMAND`: top-level help, version, dispatch, and the
 * small helpers every command uses to report errors the same way. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
};

static const struct command commands[] = {
    {"inspect", tpl__cmd_inspect, "list a checkpoint's tensors (and shards)"},
    {"plan", tpl__cmd_plan, "print the resolved shard plan as JSON"},
    {"synth", tpl__cmd_synth, "write a random HF-style checkpoint"},
    {"load", tpl__cmd_load, "(mpirun) deliver every rank its shard, report"},
    {"preshard", tpl__cmd_load, "(mpirun) load, then write per-rank files"},
    {"serve", tpl__cmd_load, "(mpirun) load, then serve shards on sockets"},
    {"verify", tpl__cmd_verify, "check a preshard output against the model"},
    {"status", tpl__cmd_status, "query a running daemon"},
    {"dump", tpl__cmd_dump, "write what one daemon rank holds to a file"},
};

static void print_help(FILE *out) {
  fprintf(out, "usage: tpload COMMAND [OPTIONS]\n"
               "\n"
               "Tensor-parallel weight loader: rank 0 reads a checkpoint once, "
               "cuts every\ntensor into per-rank shards exactly as MLC LLM's "
               "ShardSingleDim does, and\ndelivers each rank its slice over "
               "MPI.\n\ncommands:\n");
  for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n`tpload COMMAND --help` describes a command.\n"
          "exit codes: 0 ok, 64 usage, 65 invalid data, 66 input missing,\n"
          "69 peer/MPI failure or daemon unreachable, 70 internal, "
          "73 cannot create\noutput, 74 I/O error.\n");
}

int tpl__cli_main(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return 64;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    print_help(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
    printf("tpload %s\n", tpl_version());
    return 0;
  }
  for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "tpload: unknown command '%s' (see tpload --help)\n",
          argv[1]);
  return 64;
}

const char *tpl__cli_safe(const char *s, char *buf, size_t len) {
  size_t o = 0;
  if (len == 0) return buf;
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    int plain = ch >= 0x20 && ch < 0x7f;
    if (o + (plain ? 1 : 4) >= len) break;
    if (plain)
      buf[o++] = (char)ch;
    else
      o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
  }
  buf[o] = '\0';
  return buf;
}

int tpl__cli_report(int code, const struct tpl_error *err) {
  char safe[TPL_SAFE_LEN(sizeof(err->msg))];
  if (err != NULL && err->msg[0] != '\0')
    fprintf(stderr, "tpload: %s\n",
            tpl__cli_safe(err->msg, safe, sizeof(safe)));
  else
    fprintf(stderr, "tpload: %s\n", tpl_strerror(code));
  return tpl_exit_code(code);
}

int tpl__cli_usage_error(const char *command, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "tpload %s: ", command);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see tpload %s --help)\n", command);
  return 64;
}

int tpl__cli_daemon_uid(const char *command, const char *arg) {
  unsigned long long uid;
  if (tpl__cli_parse_uint(arg, 0xfffffffeull, &uid) != 0)
    return tpl__cli_usage_error(command,
                                "--daemon-uid expects a numeric "
                                "uid, got '%s'",
                                arg);
  setenv("TPLOAD_DAEMON_UID", arg, 1);
  return 0;
}

int tpl__cli_parse_uint(const char *s, unsigned long long max,
                        unsigned long long *out) {
  char *end;
  unsigned long long v;
  if (s == NULL || *s < '0' || *s > '9') return -EINVAL;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return -EINVAL;
  *out = v;
  return 0;
}
