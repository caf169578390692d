/* test_outdir.c - the output-directory toolkit (outdir.c) both layouts'
 * sinks write through: the check, --force's cleaning, and files that no
 * reader sees until they are published whole. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outdir.h"
#include "tap.h"
#include "tmpdir.h"

static int exists(const char *dir, const char *name) {
  char p[1024];
  struct stat st;
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  return stat(p, &st) == 0;
}

/* Empties dir: the number of entries it held besides . and .. */
static int empty_out(const char *dir) {
  char found[256];
  struct tpl__error err = {0};
  int n = 0;
  while (tpl__outdir_require_empty(dir, &err) != 0 && n < 64) {
    char p[1024];
    /* "<dir>: already holds NAME (pass --force to replace)" */
    if (sscanf(strstr(err.msg, "holds ") + 6, "%255s", found) != 1) break;
    snprintf(p, sizeof(p), "%s/%s", dir, found);
    if (unlink(p) != 0) break;
    n++;
  }
  return n;
}

static void test_check_makes_and_refuses(void) {
  struct tpl__error err = {0};
  char *d = make_dir("tpl-outdir"), sub[1024];
  REQUIRE(d != NULL);
  snprintf(sub, sizeof(sub), "%s/new", d);
  CHECK(tpl__outdir_check(sub, 3, &err) == 0); /* created */
  CHECK(exists(d, "new"));
  CHECK(empty_out(sub) == 0); /* the probe is gone */
  write_bytes(d, "file", "x", 1);
  snprintf(sub, sizeof(sub), "%s/file", d);
  CHECK_EQ_INT(tpl__outdir_check(sub, 0, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "expected a directory, found another file");
  snprintf(sub, sizeof(sub), "%s/open", d);
  REQUIRE(mkdir(sub, 0755) == 0 && chmod(sub, 0777) == 0);
  CHECK_EQ_INT(tpl__outdir_check(sub, 0, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "found mode 0777");
  REQUIRE(chmod(sub, 01777) == 0); /* sticky: others cannot replace ours */
  CHECK(tpl__outdir_check(sub, 0, &err) == 0);
  drop_dir(d);
}

static void test_require_empty_names_an_entry(void) {
  struct tpl__error err = {0};
  char *d = make_dir("tpl-outdir");
  REQUIRE(d != NULL);
  CHECK(tpl__outdir_require_empty(d, &err) == 0);
  write_bytes(d, "old.bin", "x", 1);
  CHECK_EQ_INT(tpl__outdir_require_empty(d, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "already holds old.bin (pass --force to "
                              "replace)");
  drop_dir(d);
}

static int is_bin(const char *name) {
  size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".bin") == 0;
}

/* The marks go, then every entry is_old names; the rest stays. */
static void test_remove_old(void) {
  static const char *const marks[] = {"mark.json", "absent.json"};
  struct tpl__error err = {0};
  char *d = make_dir("tpl-outdir");
  REQUIRE(d != NULL);
  write_bytes(d, "mark.json", "{}", 2);
  write_bytes(d, "a.bin", "x", 1);
  write_bytes(d, "b.bin", "x", 1);
  write_bytes(d, "keep.txt", "x", 1);
  CHECK(tpl__outdir_remove_old(d, marks, 2, is_bin, &err) == 0);
  CHECK(!exists(d, "mark.json") && !exists(d, "a.bin") && !exists(d, "b.bin"));
  CHECK(exists(d, "keep.txt"));
  drop_dir(d);
}

/* `old`: out.bin is there from before, and stays until the publish. */
static void write_and_publish(const char *d, int unnamed, int old) {
  struct tpl__coord c = {0};
  struct tpl__outdir_file f;
  char buf[64] = {0};
  FILE *in;
  char p[1024];
  REQUIRE(tpl__outdir_create(d, ".out.tmp", unnamed, &f) == 0);
  if (!unnamed) CHECK(f.named);
  CHECK(exists(d, ".out.tmp") == f.named);
  CHECK(exists(d, "out.bin") == old);
  CHECK(tpl__outdir_write_beating(f.fd, (const uint8_t *)"hello", 5, &c) == 0);
  CHECK(tpl__outdir_fsync_beating(f.fd, &c) == 0);
  if (!unnamed) CHECK(tpl__outdir_close(&f) == 0 && f.fd == -1);
  CHECK(tpl__outdir_publish(d, &f, "out.bin") == 0);
  CHECK(!exists(d, ".out.tmp"));
  snprintf(p, sizeof(p), "%s/out.bin", d);
  in = fopen(p, "rb");
  REQUIRE(in != NULL);
  CHECK(fread(buf, 1, sizeof(buf), in) == 5 && strcmp(buf, "hello") == 0);
  fclose(in);
}

static void test_publish_unnamed_and_named(void) {
  char *d = make_dir("tpl-outdir");
  REQUIRE(d != NULL);
  write_and_publish(d, 1, 0);
  write_and_publish(d, 0, 1); /* replaces out.bin */
  CHECK(empty_out(d) == 1);
  drop_dir(d);
}

static void test_discard_leaves_nothing(void) {
  struct tpl__outdir_file f;
  char *d = make_dir("tpl-outdir");
  REQUIRE(d != NULL);
  write_bytes(d, ".stale.tmp", "old", 3); /* a killed run's: replaced */
  REQUIRE(tpl__outdir_create(d, ".stale.tmp", 0, &f) == 0);
  CHECK(f.named && f.fd >= 0);
  tpl__outdir_discard(d, &f);
  CHECK(f.fd == -1 && !f.named);
  CHECK(empty_out(d) == 0);
  tpl__outdir_discard(d, &f); /* twice: nothing */
  CHECK_EQ_INT(tpl__outdir_create("/no/such/dir", ".x.tmp", 0, &f), -ENOENT);
  CHECK(f.fd == -1 && !f.named);
  drop_dir(d);
}

int main(void) {
  RUN(test_check_makes_and_refuses);
  RUN(test_require_empty_names_an_entry);
  RUN(test_remove_old);
  RUN(test_publish_unnamed_and_named);
  RUN(test_discard_leaves_nothing);
  return tap_done();
}
