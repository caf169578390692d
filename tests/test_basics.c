/* test_basics.c - error table, exit codes, dtype table, file helpers
 * (fileio's atomic writes: commit, abort, and targets that cannot be
 * written). */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>

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

static void test_write_file_atomic(void) {
  char *dir = make_dir("tpl-basics");
  struct tpl_error err = {0};
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
  struct tpl_error err = {0};
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
  struct tpl_error err = {0};
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

int main(void) {
  RUN(test_exit_codes);
  RUN(test_strerror);
  RUN(test_dtype_table);
  RUN(test_overflow_helpers);
  RUN(test_write_file_atomic);
  RUN(test_atomic_commit);
  RUN(test_atomic_abort);
  RUN(test_atomic_failures);
  return tap_done();
}
