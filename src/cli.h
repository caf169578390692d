/* cli.h - the command-line front end: one function per command, each
 * taking the command's own argv (argv[0] is the command name) and
 * returning the process exit code.  These are the only library functions
 * that print. */
#ifndef TPL_CLI_H
#define TPL_CLI_H

#include <stddef.h>

/* Dispatches `tpload COMMAND ...`; returns the exit code. */
int tpl__cli_main(int argc, char **argv);

int tpl__cmd_inspect(int argc, char **argv);
int tpl__cmd_plan(int argc, char **argv);
int tpl__cmd_synth(int argc, char **argv);
int tpl__cmd_load(int argc, char **argv); /* load, preshard, serve */
int tpl__cmd_verify(int argc, char **argv);
int tpl__cmd_status(int argc, char **argv);
int tpl__cmd_dump(int argc, char **argv);

/* Prints "tpload: MESSAGE" for a failed call on stderr and returns the
 * exit code for `code` (err->msg when set, else tpl_strerror). */
struct tpl_error;
int tpl__cli_report(int code, const struct tpl_error *err);

/* Prints "tpload COMMAND: MESSAGE" plus a hint to --help; returns 64. */
int tpl__cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses a positive decimal integer no larger than `max`; 0 on success. */
int tpl__cli_parse_uint(const char *s, unsigned long long max,
                        unsigned long long *out);

/* Room for any text of up to n bytes once escaped by tpl__cli_safe. */
#define TPL_SAFE_LEN(n) (4 * (n) + 1)

/* Copies `s` into buf (`len` bytes, always NUL-terminated, cut at a whole
 * escape when too long) with every byte that is not printable ASCII
 * (controls, DEL, bytes >= 0x80) written as \xNN, so that names read
 * from a file cannot drive the terminal (escape sequences, newlines).
 * Returns buf. */
const char *tpl__cli_safe(const char *s, char *buf, size_t len);

/* --daemon-uid UID of status and dump: the uid a client trusts its daemon
 * to run as (TPLOAD_DAEMON_UID for the rest of the process).  Returns 0,
 * or 64 after printing a usage error for `command`. */
int tpl__cli_daemon_uid(const char *command, const char *arg);

#endif
