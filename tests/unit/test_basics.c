/* test_basics.c - error table, exit codes, dtype table, file helpers
 * (fileio's atomic writes: commit, abort, and targets that cannot be
 * written), and the command-line option parser (cli.c). */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "dtype.h"
#include "fileio.h"
#include "tap.h"
#include "tmpdir.h"

static void test_exit_codes(void) {
  CHECK_EQ_INT(tpl_exit_code(0), 0);
  CHECK_EQ_INT(tpl_exit_code(TPL_EFORMAT), 65);
  CHECK_EQ_INT(tpl_exit_code(TPL_EUSAGE), 64);
  CHECK_EQ_INT(tpl_exit_code(-ENOENT), 66);
  CHECK_EQ_INT(tpl_exit_code(-ENOSPC), 74);
  CHECK_EQ_INT(tpl_exit_code(TPL_EPEER), 69);
  CHECK_EQ_INT(tpl_exit_code(TPL_EOUTPUT), 73);
}

static void test_strerror(void) {
  CHECK_STR_CONTAINS(tpl_strerror(TPL_EDTYPE), "dtype");
  CHECK_STR_CONTAINS(tpl_strerror(-ENOENT), "No such file");
}

/* A message too long for the buffer keeps its start (the file) and its
 * end (the reason), cut between whole UTF-8 characters (issue 31: they
 * were cut at about 1.5 KB, losing the reason). */
static void test_fail_keeps_the_reason(void) {
  static char name[4001];
  struct tpl__error err;
  size_t len;
  memset(name, 'n', sizeof(name) - 1);
  name[1000] = '\xc3'; /* a 2-byte character around the cut points */
  name[1001] = '\xa9';
  CHECK_EQ_INT(tpl__fail(&err, TPL_EFORMAT,
                         "model.safetensors: tensor '%s': "
                         "expected 2 dims, found 3",
                         name),
               TPL_EFORMAT);
  len = strlen(err.msg);
  CHECK(len < sizeof(err.msg));
  CHECK(strncmp(err.msg, "model.safetensors: tensor 'nnn", 30) == 0);
  {
    const char *reason = "': expected 2 dims, found 3";
    CHECK(len > strlen(reason) &&
          strcmp(err.msg + len - strlen(reason), reason) == 0);
  }
  CHECK_STR_CONTAINS(err.msg, " [...] ");
  for (size_t i = 0; i < len; i++) /* no byte of a split character */
    if ((unsigned char)err.msg[i] == 0xa9)
      CHECK((unsigned char)err.msg[i - 1] == 0xc3);
  /* Short messages are untouched. */
  tpl__fail(&err, TPL_EFORMAT, "%s: short", "f");
  CHECK(strcmp(err.msg, "f: short") == 0);
}

/* Out of memory is said as such (issue 31: "cannot allocate a N-byte
 * shard store", exit 70, named no memory), and not twice. */
static void test_fail_names_memory(void) {
  struct tpl__error err;
  tpl__fail(&err, -ENOMEM, "cannot allocate a %d-byte shard store", 64);
  CHECK(strcmp(err.msg,
               "cannot allocate a 64-byte shard store: out of memory") == 0);
  tpl__fail(&err, -ENOMEM, "x: out of memory");
  CHECK(strcmp(err.msg, "x: out of memory") == 0);
  tpl__fail(&err, TPL_EFORMAT, "no word");
  CHECK(strcmp(err.msg, "no word") == 0);
  CHECK_EQ_INT(tpl_exit_code(-ENOMEM), 70);
}

static void test_dtype_table(void) {
  CHECK_EQ_INT(tpl__dtype_from_st("BF16", 4), TPL_DT_BF16);
  CHECK_EQ_INT(tpl__dtype_from_st("BF1", 3), -1);
  CHECK_EQ_INT(tpl__dtype_from_st("F8_E4M3", 7), TPL_DT_F8_E4M3);
  CHECK_EQ_U64(tpl__dtype_size(TPL_DT_F64), 8);
  CHECK_EQ_INT(tpl__dtype_from_mlc("float8_e4m3fn"), TPL_DT_F8_E4M3);
  CHECK(tpl__dtype_is_known_unsupported("F4"));
  CHECK(!tpl__dtype_is_known_unsupported("F16"));
}

static void test_overflow_helpers(void) {
  uint64_t r = 7;
  CHECK_EQ_INT(tpl__mul_u64(UINT64_MAX / 2, 3, &r), TPL_EOVERFLOW);
  CHECK_EQ_U64(r, 7);
  CHECK_EQ_INT(tpl__add_u64(UINT64_MAX, 1, &r), TPL_EOVERFLOW);
  CHECK_EQ_INT(tpl__mul_u64(1u << 20, 1u << 20, &r), 0);
  CHECK_EQ_U64(r, 1ull << 40);
}

/* Entries in `dir` other than . and .., or -1. */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* Checks that dir/name holds exactly `want`. */
static void check_file(const char *dir, const char *name, const char *want) {
  char *path = tpl__path_join(dir, name), *buf = NULL;
  size_t len = 0;
  CHECK_EQ_INT(tpl__read_file(path, 1024, &buf, &len, NULL), 0);
  CHECK_EQ_U64(len, strlen(want));
  CHECK(buf != NULL && strcmp(buf, want) == 0);
  free(buf);
  free(path);
}

/* The directory part of a path, as every caller needs it: "." for a bare
 * name, "/" in the root, everything before the last '/' otherwise. */
static void test_dir_of(void) {
  static const char *cases[][2] = {
      {"x", "."},       {"/x", "/"},     {"a/b", "a"},     {"/a/b", "/a"},
      {"a/b/c", "a/b"}, {"a/b/", "a/b"}, {"./x.sock", "."}};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    char *d = tpl__dir_of(cases[k][0]);
    CHECK(d != NULL && strcmp(d, cases[k][1]) == 0);
    free(d);
  }
}

static void test_write_file_atomic(void) {
  char *dir = make_dir("tpl-basics");
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  write_bytes(dir, "out.json", "old contents", 12);
  CHECK_EQ_INT(tpl__write_file_atomic(dir, "out.json", "{}\n", 3, &err), 0);
  check_file(dir, "out.json", "{}\n");
  CHECK_EQ_INT(count_entries(dir), 1); /* no temp file left */
  drop_dir(dir);
}

static void test_atomic_commit(void) {
  char *dir = make_dir("tpl-basics"), *path, want[600];
  struct tpl__atomic a;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  path = tpl__path_join(dir, "f.bin");
  write_bytes(dir, "f.bin", "old", 3);
  CHECK_EQ_INT(tpl__atomic_open(path, NULL, &a, &err), 0);
  /* The default temp name: DIR/.NAME.tmp.PID, beside the target. */
  snprintf(want, sizeof(want), "%s/.f.bin.tmp.%ld", dir, (long)getpid());
  CHECK(a.tmp != NULL && strcmp(a.tmp, want) == 0);
  CHECK(tpl__exists(want));
  CHECK_EQ_INT(tpl__write_full(a.fd, "new ", 4), 0);
  CHECK_EQ_INT(tpl__write_full(a.fd, "bytes", 5), 0);
  check_file(dir, "f.bin", "old"); /* unchanged until the commit */
  CHECK_EQ_INT(tpl__atomic_commit(&a, &err), 0);
  check_file(dir, "f.bin", "new bytes");
  CHECK(!tpl__exists(want));
  CHECK_EQ_INT(count_entries(dir), 1);
  CHECK(a.path == NULL && a.tmp == NULL && a.dir == NULL && a.fd == -1);
  free(path);
  drop_dir(dir);
}

static void test_atomic_abort(void) {
  char *dir = make_dir("tpl-basics"), *path, *tmp;
  struct tpl__atomic a;
  REQUIRE(dir != NULL);
  path = tpl__path_join(dir, "f.bin");
  tmp = tpl__path_join(dir, "f.bin.part");
  /* A stale file at the temp name is replaced, not appended to. */
  write_bytes(dir, "f.bin.part", "stale", 5);
  CHECK_EQ_INT(tpl__atomic_open(path, tmp, &a, NULL), 0);
  CHECK_EQ_INT(count_entries(dir), 1);
  CHECK_EQ_INT(tpl__write_full(a.fd, "partial", 7), 0);
  tpl__atomic_abort(&a);
  CHECK_EQ_INT(count_entries(dir), 0); /* neither target nor temp file */
  tpl__atomic_abort(&a);               /* a released `a` is harmless */
  /* Over an existing target, abort leaves the old contents. */
  write_bytes(dir, "f.bin", "kept", 4);
  CHECK_EQ_INT(tpl__atomic_open(path, tmp, &a, NULL), 0);
  CHECK_EQ_INT(tpl__write_full(a.fd, "lost", 4), 0);
  tpl__atomic_abort(&a);
  check_file(dir, "f.bin", "kept");
  CHECK_EQ_INT(count_entries(dir), 1);
  free(tmp);
  free(path);
  drop_dir(dir);
}

static void test_atomic_failures(void) {
  char *dir = make_dir("tpl-basics"), *path;
  struct tpl__atomic a;
  struct tpl__error err = {0};
  REQUIRE(dir != NULL);
  /* A missing directory: the temp file cannot be created. */
  path = tpl__path_join(dir, "no/such/f.bin");
  CHECK_EQ_INT(tpl__atomic_open(path, NULL, &a, &err), -ENOENT);
  CHECK_EQ_INT(err.code, -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "/no/such/.f.bin.tmp.");
  CHECK_STR_CONTAINS(err.msg, ": cannot create: ");
  free(path);
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__write_file_atomic(dir, "no/f.json", "x", 1, &err), -ENOENT);
  CHECK_STR_CONTAINS(err.msg, "/no/f.json: cannot write: ");
  /* A target that is a directory: the rename fails, the temp is removed
   * and the directory is untouched. */
  CHECK_EQ_INT(mkdir((path = tpl__path_join(dir, "sub")), 0755), 0);
  memset(&err, 0, sizeof(err));
  CHECK_EQ_INT(tpl__atomic_open(path, NULL, &a, &err), 0);
  CHECK_EQ_INT(tpl__write_full(a.fd, "x", 1), 0);
  CHECK_EQ_INT(tpl__atomic_commit(&a, &err), -EISDIR);
  CHECK_EQ_INT(a.step, TPL__ATOMIC_RENAME);
  CHECK_STR_CONTAINS(err.msg, "/sub: cannot rename into place: ");
  CHECK(tpl__is_dir(path));
  CHECK_EQ_INT(count_entries(dir), 1); /* only sub: no temp file left */
  free(path);
  drop_dir(dir);
}

/* ---- the option parser, on a command of its own ---- */

enum { T_FLAG, T_VALUE, T_OPT };
static const struct tpl__cli_option t_options[] = {
    [T_FLAG] = {"flag", TPL_CLI_FLAG, 0},
    [T_VALUE] = {"value", TPL_CLI_VALUE, 'v'},
    [T_OPT] = {"opt", TPL_CLI_OPTIONAL, 0},
};
static struct tpl__cli_args seen;
static int ran;

static int record(const struct tpl__cli_command *cmd,
                  const struct tpl__cli_args *a) {
  seen = *a;
  ran = 1;
  return 0;
}

static const struct tpl__cli_command t_cmd = {
    .name = "t",
    .summary = "a test command",
    .options = t_options,
    .noptions = ARRAY_SIZE(t_options),
    .min_operands = 1,
    .max_operands = 2,
    .operands_error = "expected X [Y]",
    .help = "# help of t\n",
    .exec = record,
};

static int exec_t(char **argv) {
  int argc = 0;
  while (argv[argc] != NULL)
    argc++;
  memset(&seen, 0, sizeof(seen));
  ran = 0;
  return tpl__cli_exec(&t_cmd, argc, argv);
}

static void test_cli_parses_options(void) {
  char *argv[] = {"t",       "a", "--flag", "--value", "x",
                  "--opt=y", "b", "-v",     "z",       NULL};
  CHECK_EQ_INT(exec_t(argv), 0);
  REQUIRE(ran);
  CHECK_EQ_INT(seen.count[T_FLAG], 1);
  CHECK_EQ_INT(seen.count[T_VALUE], 2); /* the last value wins */
  CHECK(seen.value[T_VALUE] != NULL && strcmp(seen.value[T_VALUE], "z") == 0);
  CHECK(seen.value[T_OPT] != NULL && strcmp(seen.value[T_OPT], "y") == 0);
  REQUIRE(seen.noperands == 2); /* operands may come between options */
  CHECK(strcmp(seen.operands[0], "a") == 0 &&
        strcmp(seen.operands[1], "b") == 0);
}

static void test_cli_optional_value(void) {
  char *bare[] = {"t", "--opt", "a", NULL};
  char *absent[] = {"t", "a", NULL};
  CHECK_EQ_INT(exec_t(bare), 0);
  CHECK_EQ_INT(seen.count[T_OPT], 1);
  CHECK(seen.value[T_OPT] == NULL); /* --opt V would need --opt=V */
  CHECK_EQ_INT(seen.noperands, 1);
  CHECK_EQ_INT(exec_t(absent), 0);
  CHECK_EQ_INT(seen.count[T_OPT], 0);
}

static void test_cli_usage_errors(void) {
  char *unknown[] = {"t", "a", "--bogus", NULL};
  char *no_value[] = {"t", "a", "--value", NULL};
  char *no_operand[] = {"t", "--flag", NULL};
  char *too_many[] = {"t", "a", "b", "c", NULL};
  char *value_for_flag[] = {"t", "a", "--flag=1", NULL};
  CHECK_EQ_INT(exec_t(unknown), 64);
  CHECK_EQ_INT(exec_t(no_value), 64);
  CHECK_EQ_INT(exec_t(no_operand), 64);
  CHECK_EQ_INT(exec_t(too_many), 64);
  CHECK_EQ_INT(exec_t(value_for_flag), 64);
  CHECK(!ran); /* no handler ran for any of them */
}

static void test_cli_help(void) {
  char *help[] = {"t", "--help", "--bogus", NULL};
  char *short_help[] = {"t", "-h", NULL};
  CHECK_EQ_INT(exec_t(help), 0); /* help wins over what follows */
  CHECK(!ran);
  CHECK_EQ_INT(exec_t(short_help), 0);
  CHECK(!ran);
}

static const char *letter(size_t i) {
  static const char *const names[] = {"x", "y", "z"};
  return names[i];
}

/* Progress below 5 MiB/s read "0.00 GiB/s" (issue 31): each rate and
 * amount in the largest unit it reaches. */
static void test_cli_rate_units(void) {
  char b[32];
  double scale;
  CHECK(strcmp(tpl__cli_rate(3.5 * 1073741824.0, b, sizeof(b)), "3.50 GiB/s") ==
        0);
  CHECK(strcmp(tpl__cli_rate(2.0 * 1048576.0, b, sizeof(b)), "2.0 MiB/s") == 0);
  CHECK(strcmp(tpl__cli_rate(4.9 * 1048576.0, b, sizeof(b)), "4.9 MiB/s") == 0);
  CHECK(strcmp(tpl__cli_rate(300.0 * 1024, b, sizeof(b)), "300.0 KiB/s") == 0);
  CHECK(strcmp(tpl__cli_rate(0, b, sizeof(b)), "0.0 KiB/s") == 0);
  CHECK(strcmp(tpl__cli_unit(51.0 * 1048576.0, &scale), "MiB") == 0);
  CHECK(scale == 1048576.0);
  CHECK(strcmp(tpl__cli_unit(2.0 * 1073741824.0, &scale), "GiB") == 0);
  CHECK(strcmp(tpl__cli_unit(100, &scale), "KiB") == 0);
}

static void test_cli_list(void) {
  char buf[32], small[6];
  CHECK(strcmp(tpl__cli_list(3, letter, buf, sizeof(buf)), "x, y or z") == 0);
  CHECK(strcmp(tpl__cli_list(2, letter, buf, sizeof(buf)), "x or y") == 0);
  CHECK(strcmp(tpl__cli_list(1, letter, buf, sizeof(buf)), "x") == 0);
  CHECK(strcmp(tpl__cli_list(3, letter, small, sizeof(small)), "x, y ") == 0);
}

int main(void) {
  RUN(test_exit_codes);
  RUN(test_strerror);
  RUN(test_fail_keeps_the_reason);
  RUN(test_fail_names_memory);
  RUN(test_dtype_table);
  RUN(test_overflow_helpers);
  RUN(test_dir_of);
  RUN(test_write_file_atomic);
  RUN(test_atomic_commit);
  RUN(test_atomic_abort);
  RUN(test_atomic_failures);
  RUN(test_cli_parses_options);
  RUN(test_cli_optional_value);
  RUN(test_cli_usage_errors);
  RUN(test_cli_help);
  RUN(test_cli_list);
  RUN(test_cli_rate_units);
  return tap_done();
}
