/* cli.c - `tpload COMMAND`: the command table, top-level help, version and
 * dispatch; the one option parser every command's argv goes through
 * (getopt_long over the command's option table); help printing with its
 * generated lists; and the small helpers every command uses to report
 * errors the same way. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

static const struct tpl__cli_command *const commands[] = {
    &tpl__cmd_inspect,  &tpl__cmd_plan,  &tpl__cmd_synth,  &tpl__cmd_load,
    &tpl__cmd_preshard, &tpl__cmd_serve, &tpl__cmd_verify, &tpl__cmd_status,
    &tpl__cmd_reload,   &tpl__cmd_dump,
};

static void print_help(FILE *out) {
  fprintf(out, "usage: tpload COMMAND [OPTIONS]\n"
               "\n"
               "Tensor-parallel weight loader: rank 0 reads a checkpoint once, "
               "cuts every\ntensor into per-rank shards exactly as MLC LLM's "
               "ShardSingleDim does, and\ndelivers each rank its slice over "
               "MPI.\n\ncommands:\n");
  for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
    fprintf(out, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
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
    if (strcmp(argv[1], commands[i]->name) == 0)
      return tpl__cli_exec(commands[i], argc - 1, argv + 1);
  fprintf(stderr, "tpload: unknown command '%s' (see tpload --help)\n",
          argv[1]);
  return 64;
}

/* ---- the option parser ---- */

/* Before MPI is up, only the launcher's rank variable tells rank 0. */
static int env_rank_is_zero(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL) return strcmp(v, "0") == 0;
  }
  return 1;
}

static int speaks(const struct tpl__cli_command *cmd) {
  return !cmd->rank0_speaks || env_rank_is_zero();
}

#define OPT_HELP TPL_CLI_MAX_OPTIONS

/* getopt_long's view of cmd's table, plus --help/-h: a long option's val
 * is its index in the table; a short one comes back as its letter. */
static void getopt_tables(const struct tpl__cli_command *cmd,
                          struct option *longs, char *shorts) {
  static const int has_arg[] = {[TPL_CLI_FLAG] = no_argument,
                                [TPL_CLI_VALUE] = required_argument,
                                [TPL_CLI_OPTIONAL] = optional_argument};
  size_t s = 0;
  shorts[s++] = ':';
  shorts[s++] = 'h';
  for (size_t i = 0; i < cmd->noptions; i++) {
    const struct tpl__cli_option *o = &cmd->options[i];
    longs[i] = (struct option){o->name, has_arg[o->arg], NULL, (int)i};
    if (o->short_name != 0) {
      shorts[s++] = o->short_name;
      if (o->arg == TPL_CLI_VALUE) shorts[s++] = ':';
    }
  }
  longs[cmd->noptions] = (struct option){"help", no_argument, NULL, OPT_HELP};
  longs[cmd->noptions + 1] = (struct option){NULL, 0, NULL, 0};
  shorts[s] = '\0';
}

/* Maps what getopt_long returned to an option index, -1 when unknown. */
static int option_index(const struct tpl__cli_command *cmd, int c) {
  if (c == 'h' || c == OPT_HELP) return OPT_HELP;
  if (c >= 0 && (size_t)c < cmd->noptions) return c;
  for (size_t i = 0; i < cmd->noptions; i++)
    if (cmd->options[i].short_name == c) return (int)i;
  return -1;
}

static int parse(const struct tpl__cli_command *cmd, int argc, char **argv,
                 struct tpl__cli_args *a) {
  struct option longs[TPL_CLI_MAX_OPTIONS + 2];
  char shorts[3 * TPL_CLI_MAX_OPTIONS + 3];
  int c;
  getopt_tables(cmd, longs, shorts);
  optind = 0; /* full reset: commands may run more than once */
  opterr = 0;
  while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
    int id = option_index(cmd, c);
    if (c == ':')
      return tpl__cli_usage_error(cmd, "option '%s' needs a value",
                                  argv[optind - 1]);
    if (id < 0)
      return tpl__cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
    if (id == OPT_HELP) return -1;
    a->count[id]++;
    a->value[id] = optarg;
  }
  a->operands = argv + optind;
  a->noperands = argc - optind;
  return 0;
}

static int check_operands(const struct tpl__cli_command *cmd,
                          const struct tpl__cli_args *a) {
  if (a->noperands > cmd->max_operands && cmd->max_operands == 0)
    return tpl__cli_usage_error(cmd, "unexpected argument '%s'",
                                a->operands[0]);
  if (a->noperands < cmd->min_operands || a->noperands > cmd->max_operands)
    return tpl__cli_usage_error(cmd, "%s", cmd->operands_error);
  return 0;
}

/* ---- help ---- */

/* Prints the words of `list` from column `col`, wrapped at 80 columns
 * with continuation lines indented to `col`. */
static void print_list(FILE *out, const char *list, int col) {
  int at = col;
  while (*list != '\0') {
    int word = (int)strcspn(list, " ");
    if (at > col && at + 1 + word > 79) {
      fprintf(out, "\n%*s", col, "");
      at = col;
    } else if (at > col) {
      fputc(' ', out);
      at++;
    }
    fprintf(out, "%.*s", word, list);
    at += word;
    list += word;
    list += strspn(list, " ");
  }
}

/* Prints cmd's help, each @KEY@ in it replaced by help_list(KEY) from
 * the column where it stood. */
static void print_command_help(const struct tpl__cli_command *cmd, FILE *out) {
  const char *s = cmd->help, *at, *end;
  while ((at = strchr(s, '@')) != NULL && (end = strchr(at + 1, '@')) != NULL) {
    const char *line = at, *list = NULL;
    char key[32];
    while (line > cmd->help && line[-1] != '\n')
      line--;
    snprintf(key, sizeof(key), "%.*s", (int)(end - at - 1), at + 1);
    if (cmd->help_list != NULL) list = cmd->help_list(key);
    fwrite(s, 1, (size_t)(at - s), out);
    if (list != NULL)
      print_list(out, list, (int)(at - line));
    else
      fwrite(at, 1, (size_t)(end + 1 - at), out);
    s = end + 1;
  }
  fputs(s, out);
}

int tpl__cli_exec(const struct tpl__cli_command *cmd, int argc, char **argv) {
  struct tpl__cli_args a = {.argc = argc, .argv = argv};
  int rc;
  if (cmd->noptions > TPL_CLI_MAX_OPTIONS) { /* a table too big: a bug */
    fprintf(stderr, "tpload %s: internal error: %zu options, at most %d\n",
            cmd->name, (size_t)cmd->noptions, TPL_CLI_MAX_OPTIONS);
    return 70;
  }
  rc = parse(cmd, argc, argv, &a);
  if (rc < 0) {
    if (speaks(cmd)) print_command_help(cmd, stdout);
    return 0;
  }
  if (rc == 0) rc = check_operands(cmd, &a);
  return rc != 0 ? rc : cmd->exec(cmd, &a);
}

/* ---- helpers ---- */

const char *tpl__cli_list(size_t n, const char *(*name)(size_t i), char *buf,
                          size_t len) {
  size_t used = 0;
  if (len == 0) return buf;
  buf[0] = '\0';
  for (size_t i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s",
                             i == 0       ? ""
                             : i == n - 1 ? " or "
                                          : ", ",
                             name(i));
  return buf;
}

/* The length of the valid UTF-8 character at s that is safe to show (1
 * to 4 bytes), or 0: a byte that starts no character, an overlong form,
 * a surrogate, above U+10FFFF, or a character that steers a terminal or
 * the text's direction (C0 and C1 controls, DEL, U+2028/2029, the bidi
 * embeddings, overrides and isolates). */
static size_t shown_char_len(const unsigned char *s) {
  size_t n = s[0] < 0x80   ? 1
             : s[0] < 0xC2 ? 0
             : s[0] < 0xE0 ? 2
             : s[0] < 0xF0 ? 3
             : s[0] < 0xF5 ? 4
                           : 0;
  uint32_t cp = n == 1   ? s[0]
                : n == 2 ? s[0] & 0x1Fu
                : n == 3 ? s[0] & 0x0Fu
                         : s[0] & 0x07u;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3Fu);
  }
  if (n == 0 || cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return 0;
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  if ((cp >= 0xD800 && cp < 0xE000) || (cp >= 0x2028 && cp <= 0x202E) ||
      (cp >= 0x2066 && cp <= 0x2069))
    return 0;
  return n;
}

const char *tpl__cli_safe(const char *s, char *buf, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  if (len == 0) return buf;
  while (*p != '\0') {
    size_t n = shown_char_len(p);
    if (o + (n ? n : 4) >= len) break;
    if (n != 0) {
      memcpy(buf + o, p, n);
      o += n;
      p += n;
    } else {
      o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *p++);
    }
  }
  buf[o] = '\0';
  return buf;
}

const char *tpl__cli_unit(double total, double *scale) {
  static const struct {
    const char *name;
    double size;
  } units[] = {{"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}};
  size_t i = 0;
  while (i + 1 < ARRAY_SIZE(units) && total < units[i].size)
    i++;
  *scale = units[i].size;
  return units[i].name;
}

const char *tpl__cli_rate(double bytes_per_s, char *buf, size_t len) {
  double scale;
  const char *unit = tpl__cli_unit(bytes_per_s, &scale);
  /* Three significant digits or so, whatever the unit. */
  snprintf(buf, len, scale > 1048576.0 ? "%.2f %s/s" : "%.1f %s/s",
           bytes_per_s / scale, unit);
  return buf;
}

int tpl__cli_report(int code, const struct tpl__error *err) {
  char safe[TPL_SAFE_LEN(sizeof(err->msg))];
  if (err != NULL && err->msg[0] != '\0')
    fprintf(stderr, "tpload: %s\n",
            tpl__cli_safe(err->msg, safe, sizeof(safe)));
  else
    fprintf(stderr, "tpload: %s\n", tpl_strerror(code));
  return tpl_exit_code(code);
}

int tpl__cli_usage_error(const struct tpl__cli_command *cmd, const char *fmt,
                         ...) {
  va_list ap;
  if (!speaks(cmd)) return 64;
  fprintf(stderr, "tpload %s: ", cmd->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see tpload %s --help)\n", cmd->name);
  return 64;
}

int tpl__cli_daemon_uid(const struct tpl__cli_command *cmd, const char *arg) {
  unsigned long long uid;
  if (arg == NULL) return 0;
  if (tpl__cli_parse_uint(arg, 0xfffffffeull, &uid) != 0)
    return tpl__cli_usage_error(cmd,
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

/* One numeric HTTP option: `value` (NULL: keep *out) within [min, max]. */
static int http_number(const struct tpl__cli_command *cmd, const char *name,
                       const char *value, unsigned min, unsigned max,
                       unsigned *out) {
  unsigned long long v;
  if (value == NULL) return 0;
  if (tpl__cli_parse_uint(value, max, &v) != 0 || v < min)
    return tpl__cli_usage_error(cmd,
                                "--%s expects a number from %u to %u, "
                                "got '%s'",
                                name, min, max, value);
  *out = (unsigned)v;
  return 0;
}

int tpl__cli_http(const struct tpl__cli_command *cmd,
                  const struct tpl__cli_args *a, int first,
                  struct tpl__http_opts *out) {
  enum { RETRIES, TOKEN_FILE, CA_CERT, CONNECTIONS, TIMEOUT };
  struct tpl__http_opts o = TPL_HTTP_OPTS_DEFAULT;
  if (http_number(cmd, "retries", a->value[first + RETRIES], 0, 100,
                  &o.retries) != 0 ||
      http_number(cmd, "http-connections", a->value[first + CONNECTIONS], 1,
                  256, &o.connections) != 0 ||
      http_number(cmd, "http-timeout", a->value[first + TIMEOUT], 1, 86400,
                  &o.timeout) != 0)
    return 64;
  o.token_file = a->value[first + TOKEN_FILE];
  o.ca_cert = a->value[first + CA_CERT];
  *out = o;
  return 0;
}
