/* test_fdcache.c - the bounded set of a model's open files (fdcache.h):
 * never more than its bound open, the least recently used one closed
 * first, a pinned one never, every re-open checked against the identity
 * held, and a limit too low even for one more file named. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdcache.h"
#include "fileio.h"
#include "tap.h"
#include "tmpdir.h"

#define NFILES 10

static char *dir;

static void path_of(uint32_t i, char *buf, size_t len) {
  snprintf(buf, len, "%s/f%u", dir, (unsigned)i);
}

/* Fresh files f0..f9 (the last ones removed), file i holding the one
 * byte 'a' + i. */
static void make_files(void) {
  drop_dir(dir);
  dir = make_dir("tpl-fdcache");
  for (uint32_t i = 0; dir != NULL && i < NFILES; i++) {
    char name[16], b = (char)('a' + i);
    snprintf(name, sizeof(name), "f%u", (unsigned)i);
    write_bytes(dir, name, &b, 1);
  }
}

/* A cache of `cap` holding files [0, n), as validation leaves them. */
static struct tpl__fdcache *held(size_t cap, uint32_t n) {
  struct tpl__fdcache *c = tpl__fdcache_new(cap);
  struct tpl__error err = {0};
  for (uint32_t i = 0; c != NULL && i < n; i++) {
    char path[1024];
    uint64_t size;
    int fd;
    path_of(i, path, sizeof(path));
    if (tpl__open_regular(path, &fd, &size, &err) != 0 ||
        tpl__fdcache_hold(c, i, path, fd, NULL) != 0)
      abort();
  }
  return c;
}

/* File i's byte, read through the cache; -1 when it cannot be had. */
static int byte_of(struct tpl__fdcache *c, uint32_t i, struct tpl__error *err) {
  unsigned char b;
  int fd;
  if (tpl__fdcache_get(c, i, &fd, err) != 0) return -1;
  return tpl__pread_full(fd, &b, 1, 0) == 0 ? b : -1;
}

/* Another file renamed over file i's path (the byte 'Z'). */
static void replace(uint32_t i) {
  char path[1024], tmp[1040];
  path_of(i, path, sizeof(path));
  write_bytes(dir, "new", "Z", 1);
  snprintf(tmp, sizeof(tmp), "%s/new", dir);
  if (rename(tmp, path) != 0) abort();
}

static void test_never_more_than_the_bound(void) {
  struct tpl__fdcache *c = held(3, NFILES);
  struct tpl__error err = {0};
  REQUIRE(c != NULL);
  CHECK_EQ_U64(tpl__fdcache_open_now(c), 3);
  for (int round = 0; round < 2; round++)
    for (uint32_t i = 0; i < NFILES; i++) {
      CHECK_EQ_INT(byte_of(c, i, &err), 'a' + (int)i);
      CHECK(tpl__fdcache_open_now(c) <= 3);
    }
  tpl__fdcache_free(c);
}

/* f1 was used after f0, then f2 came: f0 was closed, f1 kept.  A file
 * renamed over either path shows it: the one kept still reads the
 * validated bytes, the one re-opened finds another file (-EIO). */
static void test_least_recent_closed_and_reopen_checked(void) {
  struct tpl__fdcache *c = held(2, 2);
  struct tpl__error err = {0};
  char path[1024];
  uint64_t size;
  int fd;
  REQUIRE(c != NULL);
  CHECK_EQ_INT(byte_of(c, 1, &err), 'b');
  path_of(2, path, sizeof(path));
  REQUIRE(tpl__open_regular(path, &fd, &size, &err) == 0);
  REQUIRE(tpl__fdcache_hold(c, 2, path, fd, NULL) == 0);
  replace(0);
  replace(1);
  CHECK_EQ_INT(byte_of(c, 1, &err), 'b'); /* still open: the old file */
  CHECK_EQ_INT(byte_of(c, 0, &err), -1);
  CHECK_EQ_INT(err.code, -EIO);
  path_of(0, path, sizeof(path));
  CHECK_STR_CONTAINS(err.msg, path);
  CHECK_STR_CONTAINS(err.msg, "changed while loading");
  CHECK_STR_CONTAINS(err.msg, "another file took its place");
  tpl__fdcache_free(c);
}

/* The same file, written since (its size and time): refused too. */
static void test_reopen_of_a_modified_file(void) {
  struct tpl__fdcache *c = held(1, 2); /* f0 closed when f1 came */
  struct tpl__error err = {0};
  char path[1024];
  FILE *f;
  REQUIRE(c != NULL);
  path_of(0, path, sizeof(path));
  f = fopen(path, "ab");
  REQUIRE(f != NULL);
  fputs("more", f);
  fclose(f);
  CHECK_EQ_INT(byte_of(c, 0, &err), -1);
  CHECK_EQ_INT(err.code, -EIO);
  CHECK_STR_CONTAINS(err.msg, "its size changed");
  unlink(path);
  CHECK_EQ_INT(byte_of(c, 0, &err), -1);
  CHECK_STR_CONTAINS(err.msg, "it is gone");
  tpl__fdcache_free(c);
}

/* A pinned file (a read in flight) stays open past the bound. */
static void test_pinned_stays_open(void) {
  struct tpl__fdcache *c = held(1, 4);
  struct tpl__error err = {0};
  REQUIRE(c != NULL);
  CHECK_EQ_INT(byte_of(c, 0, &err), 'a');
  tpl__fdcache_pin(c, 0);
  for (uint32_t i = 1; i < 4; i++)
    CHECK_EQ_INT(byte_of(c, i, &err), 'a' + (int)i);
  replace(0);
  CHECK_EQ_INT(byte_of(c, 0, &err), 'a'); /* never closed */
  CHECK_EQ_U64(tpl__fdcache_open_now(c), 2);
  tpl__fdcache_unpin(c, 0);
  CHECK_EQ_INT(byte_of(c, 1, &err), 'b');
  CHECK_EQ_U64(tpl__fdcache_open_now(c), 1); /* the bound again */
  tpl__fdcache_free(c);
}

static void test_not_held_is_internal(void) {
  struct tpl__fdcache *c = held(2, 1);
  struct tpl__error err = {0};
  int fd;
  REQUIRE(c != NULL);
  CHECK(!tpl__fdcache_held(c, 5));
  CHECK_EQ_INT(tpl__fdcache_get(c, 5, &fd, &err), TPL_EINTERNAL);
  CHECK_EQ_INT(tpl__fdcache_get(NULL, 0, &fd, &err), TPL_EINTERNAL);
  tpl__fdcache_free(c);
}

/* A quarter of the soft limit, within [2, 256]. */
static void test_default_bound(void) {
  struct rlimit was, rl;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &was) == 0);
  rl = was;
  rl.rlim_cur = 24;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK_EQ_U64(tpl__fdcache_default_cap(), 6);
  rl.rlim_cur = 5;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK_EQ_U64(tpl__fdcache_default_cap(), 2);
  if (was.rlim_max == RLIM_INFINITY || was.rlim_max >= 4096) {
    rl.rlim_cur = 4096;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    CHECK_EQ_U64(tpl__fdcache_default_cap(), 256);
  }
  setrlimit(RLIMIT_NOFILE, &was);
}

/* No descriptor left at all and the one open file pinned: the re-open
 * fails naming the limit. */
static void test_limit_too_low_is_named(void) {
  struct tpl__fdcache *c = held(1, 2); /* f1 open, f0 closed */
  struct tpl__error err = {0};
  struct rlimit was, rl;
  int lowest;
  REQUIRE(c != NULL && getrlimit(RLIMIT_NOFILE, &was) == 0);
  tpl__fdcache_pin(c, 1);
  lowest = dup(0); /* the lowest free number: every open gets it */
  REQUIRE(lowest >= 0);
  close(lowest);
  rl = was;
  rl.rlim_cur = (rlim_t)lowest;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK_EQ_INT(byte_of(c, 0, &err), -1);
  setrlimit(RLIMIT_NOFILE, &was);
  CHECK_EQ_INT(err.code, -EMFILE);
  CHECK_STR_CONTAINS(err.msg, "the limit is");
  CHECK_STR_CONTAINS(err.msg, "ulimit -Hn");
  tpl__fdcache_unpin(c, 1);
  CHECK_EQ_INT(byte_of(c, 0, &err), 'a'); /* room again: f1 closed */
  tpl__fdcache_free(c);
}

int main(void) {
  make_files();
  RUN(test_never_more_than_the_bound);
  RUN(test_least_recent_closed_and_reopen_checked);
  make_files();
  RUN(test_reopen_of_a_modified_file);
  make_files();
  RUN(test_pinned_stays_open);
  RUN(test_not_held_is_internal);
  RUN(test_default_bound);
  make_files();
  RUN(test_limit_too_low_is_named);
  drop_dir(dir);
  return tap_done();
}
