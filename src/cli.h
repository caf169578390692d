/* cli.h - the command-line front end.  Every command is declared once, as
 * a struct tpl__cli_command (tmux's cmd_entry): its name, its options,
 * how many operands it takes, its help and the function that runs it.
 * One parser (tpl__cli_exec) reads any command's argv against that table,
 * so option syntax, --help and usage errors are the same everywhere.
 * They print, as the cmd_*.c handlers do (docs/FILES.md, who prints). */
#ifndef TPL_CLI_H
#define TPL_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "http.h"

/* Whether an option takes a value. */
enum tpl__cli_arg {
  TPL_CLI_FLAG,     /* --name */
  TPL_CLI_VALUE,    /* --name V or --name=V */
  TPL_CLI_OPTIONAL, /* --name or --name=V */
};

/* One option; a command's options are an array indexed by the command's
 * own enum (designated initializers keep the two in step). */
struct tpl__cli_option {
  const char *name; /* without the leading -- */
  enum tpl__cli_arg arg;
  char short_name; /* 0: long form only */
};

/* A command with many options lists them once, as an X-macro
 *   #define FOO_OPTIONS(X) X(OPT_A, "a", TPL_CLI_FLAG) X(OPT_B, ...)
 * and gets its enum and table from it:
 *   enum { FOO_OPTIONS(TPL_CLI_OPTION_ID) };
 *   static const struct tpl__cli_option foo_options[] = {
 *       FOO_OPTIONS(TPL_CLI_OPTION_ENTRY)}; */
#define TPL_CLI_OPTION_ID(id, name, arg) id,
#define TPL_CLI_OPTION_ENTRY(id, name, arg) [id] = {name, arg, 0},

#define TPL_CLI_MAX_OPTIONS 32

/* What the parser found.  Lives as long as the argv it was parsed from. */
struct tpl__cli_args {
  const char *value[TPL_CLI_MAX_OPTIONS]; /* last value; NULL: none */
  unsigned count[TPL_CLI_MAX_OPTIONS];    /* times the option was given */
  char **operands;                        /* the non-option arguments */
  int noperands;
  int argc; /* the command's whole argv (argv[0] is its name) */
  char **argv;
};

struct tpl__cli_command {
  const char *name;
  const char *summary; /* one line for `tpload --help` */
  const struct tpl__cli_option *options;
  size_t noptions;
  int min_operands, max_operands;
  const char *operands_error; /* usage error when the count is wrong */
  /* Help text; an @KEY@ in it prints help_list(KEY), names from a table
   * ("a, b or c"), wrapped at 80 columns and indented to where it began. */
  const char *help;
  const char *(*help_list)(const char *key);
  int rank0_speaks; /* MPI commands: only rank 0 prints help and errors */
  /* Runs the parsed command; returns the exit code. */
  int (*exec)(const struct tpl__cli_command *cmd,
              const struct tpl__cli_args *args);
};

extern const struct tpl__cli_command tpl__cmd_inspect, tpl__cmd_plan,
    tpl__cmd_synth, tpl__cmd_load, tpl__cmd_preshard, tpl__cmd_serve,
    tpl__cmd_verify, tpl__cmd_status, tpl__cmd_reload, tpl__cmd_dump;

/* Dispatches `tpload COMMAND ...`; returns the exit code. */
int tpl__cli_main(int argc, char **argv);

/* Parses argv (argv[0] is the command's name) against cmd's table and
 * runs it: --help prints the help (exit 0), a bad option or operand count
 * is a usage error (64).  Returns the exit code. */
int tpl__cli_exec(const struct tpl__cli_command *cmd, int argc, char **argv);

/* Whether option `id` was given at least once. */
static inline int tpl__cli_has(const struct tpl__cli_args *a, int id) {
  return a->count[id] > 0;
}

/* Prints "tpload: MESSAGE" for a failed call on stderr and returns the
 * exit code for `code` (err->msg when set, else tpl_strerror). */
struct tpl__error;
int tpl__cli_report(int code, const struct tpl__error *err);

/* Prints "tpload COMMAND: MESSAGE" plus a hint to --help (under mpirun on
 * rank 0 only, for a command with rank0_speaks); returns 64. */
int tpl__cli_usage_error(const struct tpl__cli_command *cmd, const char *fmt,
                         ...) __attribute__((format(printf, 2, 3)));

/* Parses a positive decimal integer no larger than `max`; 0 on success. */
int tpl__cli_parse_uint(const char *s, unsigned long long max,
                        unsigned long long *out);

/* Writes `n` names as "a, b, c or d" into buf (`len` bytes, cut when too
 * long); name(i) gives the i-th.  Returns buf. */
const char *tpl__cli_list(size_t n, const char *(*name)(size_t i), char *buf,
                          size_t len);

/* The unit progress shows an amount in: the largest of GiB, MiB and KiB
 * that `total` bytes reach (KiB below 1 MiB); *scale is its size in
 * bytes.  Returns the unit's name. */
const char *tpl__cli_unit(double total, double *scale);

/* `bytes_per_s` as "1.25 GiB/s", "3.4 MiB/s" or "512 KiB/s" (the largest
 * unit it reaches, KiB/s below 1 MiB/s) into buf (`len` bytes).  Returns
 * buf. */
const char *tpl__cli_rate(double bytes_per_s, char *buf, size_t len);

/* Room for any text of up to n bytes once escaped by tpl__cli_safe. */
#define TPL_SAFE_LEN(n) (4 * (n) + 1)

/* Copies `s` into buf (`len` bytes, always NUL-terminated, cut at a whole
 * character or escape when too long): printable ASCII and valid UTF-8
 * characters as they are (a name in UTF-8 reads as itself), every other
 * byte as \xNN -- controls (C0, DEL, C1), invalid or overlong UTF-8,
 * surrogates, U+2028/2029 and the bidi controls -- so that names read
 * from a file cannot drive the terminal (escape sequences, newlines,
 * reordered text).  Returns buf. */
const char *tpl__cli_safe(const char *s, char *buf, size_t len);

/* --daemon-uid UID of status and dump: the uid a client trusts its daemon
 * to run as (TPLOAD_DAEMON_UID for the rest of the process); `arg` NULL
 * (not given) does nothing.  Returns 0, or 64 after printing a usage
 * error for `cmd`. */
int tpl__cli_daemon_uid(const struct tpl__cli_command *cmd, const char *arg);

/* The options of a MODEL at a URL, the same on every command that opens
 * one; a command puts them in its table in this order. */
#define TPL_CLI_HTTP_OPTIONS(X)                                                \
  X(OPT_RETRIES, "retries", TPL_CLI_VALUE)                                     \
  X(OPT_TOKEN_FILE, "token-file", TPL_CLI_VALUE)                               \
  X(OPT_CA_CERT, "ca-cert", TPL_CLI_VALUE)                                     \
  X(OPT_HTTP_CONNECTIONS, "http-connections", TPL_CLI_VALUE)                   \
  X(OPT_HTTP_TIMEOUT, "http-timeout", TPL_CLI_VALUE)

/* Their help, for the commands' help texts. */
#define TPL_CLI_HTTP_HELP                                                      \
  "MODEL may be an http:// or https:// URL (a .safetensors file or a\n"        \
  "directory as above), read with ranged GETs:\n"                              \
  "  --retries N           retries of a failed connection, reset, stall or\n"  \
  "                        5xx answer, with backoff (default 3)\n"             \
  "  --token-file F        a bearer token in file F (else the environment's\n" \
  "                        TPLOAD_HTTP_TOKEN; never on the command line)\n"    \
  "  --ca-cert F           CA certificates (PEM) for an https server\n"        \
  "  --http-connections N  ranged GETs in flight (default 8)\n"                \
  "  --http-timeout S      a transfer under 1 KiB/s for S seconds stalls,\n"   \
  "                        and a connection may take S (default 30)\n"

/* The HTTP options of a command whose table holds TPL_CLI_HTTP_OPTIONS
 * from index `first` on, into *out (the defaults where not given).
 * Returns 0, or 64 after printing a usage error for `cmd`. */
int tpl__cli_http(const struct tpl__cli_command *cmd,
                  const struct tpl__cli_args *a, int first,
                  struct tpl__http_opts *out);

#endif
