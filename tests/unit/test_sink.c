/* test_sink.c - the preshard sink's own sequence (preshard.c) driven
 * through a scripted coordination (coord.h) instead of MPI: this process
 * plays rank 1 of 2 and the script decides what "the other rank" says at
 * each agreement.  The contract under test (DESIGN.md: output files appear
 * whole or not at all): three agreements in order (written, published,
 * shard-info.json written), a rank file only when all three succeeded,
 * nothing of this rank left in DIR otherwise, and the signal mask as it
 * was.  Then tmpguard.c in a child process: a real SIGTERM removes every
 * registered temp file (and only those), and waits while held. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coord.h"
#include "dtype.h"
#include "job.h"
#include "preshard.h"
#include "store.h"
#include "tap.h"
#include "tmpdir.h"
#include "tmpguard.h"

static char *tmp;

/* The other rank's answer at each agreement: 0 until agreement
 * `fail_at` (1-based; 0: never), from there on the code it failed with
 * (a rank that failed passes its code to every later agreement). */
struct script {
  int calls, fail_at, code;
};

static int scripted_agree(void *ctx, int rc, struct tpl__error *err) {
  struct script *s = ctx;
  s->calls++;
  if (rc == 0 && s->fail_at > 0 && s->calls >= s->fail_at) {
    err->msg[0] = '\0'; /* the other rank tells it */
    return s->code;
  }
  return rc;
}

/* One F32[4] tensor, as rank 1 of 2 holds it. */
static void make_job(struct tpl__job *job, struct tpl__job_tensor *t,
                     struct tpl__store *store) {
  memset(job, 0, sizeof(*job));
  memset(t, 0, sizeof(*t));
  t->name = "w";
  t->dtype = TPL_DT_F32;
  t->ndim = 1;
  t->rank_shape[0] = 4;
  t->rank_bytes = t->rank_stored = 16;
  job->grid = (struct tpl__grid){2, 2, 1, 1, 0};
  job->tensors = t;
  job->ntensors = 1;
  job->store_size = 16;
  if (tpl__store_create_private(store, 16, 1, NULL) != 0) abort();
  memset(store->base, 0x5a, 16);
}

static size_t entries(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t n = 0;
  if (d == NULL) return SIZE_MAX;
  while ((e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

static int exists(const char *dir, const char *name) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  return stat(p, &st) == 0;
}

static int sigterm_blocked(void) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  return sigismember(&now, SIGTERM);
}

/* Runs the sink as rank 1 of 2 in a fresh DIR; returns its code. */
static int run_sink(struct script *s, char *dir, size_t len) {
  static int n;
  struct tpl__outdir_opts o = {0};
  struct tpl__sink sink;
  struct tpl__job job;
  struct tpl__job_tensor t;
  struct tpl__store store;
  struct tpl__loaded l = {0};
  struct tpl__coord c = {.rank = 1, .world = 2, .agree = scripted_agree};
  struct tpl__error err = {0};
  int rc;
  snprintf(dir, len, "%s/out%d", tmp, n++);
  o.dir = dir;
  o.force = 0;
  sink = tpl__preshard_sink(&o);
  c.ctx = s;
  make_job(&job, &t, &store);
  l.job = &job;
  l.store = &store;
  rc = sink.prepare(sink.ctx, NULL, &err);
  if (rc == 0) rc = sink.check(sink.ctx, 1, &err);
  if (rc == 0) rc = sink.run(sink.ctx, &l, &c, &err);
  tpl__store_free(&store);
  return rc;
}

static void test_all_agree_publishes(void) {
  struct script s = {0};
  char dir[300];
  CHECK_EQ_INT(run_sink(&s, dir, sizeof(dir)), 0);
  CHECK_EQ_INT(s.calls, 3);
  CHECK(exists(dir, "rank1.safetensors"));
  CHECK_EQ_U64(entries(dir), 1);
  CHECK(!sigterm_blocked());
}

/* The other rank could not write: nothing gets a name. */
static void test_other_write_failed(void) {
  struct script s = {.fail_at = 1, .code = -ENOSPC};
  char dir[300];
  CHECK_EQ_INT(run_sink(&s, dir, sizeof(dir)), -ENOSPC);
  CHECK_EQ_INT(s.calls, 2);
  CHECK_EQ_U64(entries(dir), 0);
  CHECK(!sigterm_blocked());
}

/* The other rank could not publish: this rank's published file goes. */
static void test_other_publish_failed(void) {
  struct script s = {.fail_at = 2, .code = TPL_EOUTPUT};
  char dir[300];
  CHECK_EQ_INT(run_sink(&s, dir, sizeof(dir)), TPL_EOUTPUT);
  CHECK_EQ_INT(s.calls, 3);
  CHECK_EQ_U64(entries(dir), 0);
  CHECK(!sigterm_blocked());
}

/* Rank 0 could not write shard-info.json: no rank file stays. */
static void test_shard_info_failed(void) {
  struct script s = {.fail_at = 3, .code = -EIO};
  char dir[300];
  CHECK_EQ_INT(run_sink(&s, dir, sizeof(dir)), -EIO);
  CHECK_EQ_INT(s.calls, 3);
  CHECK_EQ_U64(entries(dir), 0);
  CHECK(!sigterm_blocked());
}

/* DIR/NAME created (empty) and registered with tmpguard. */
static void guarded_file(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  if (tpl__tmpguard_add(p) != 0) _exit(90);
  write_bytes(dir, name, "x", 1);
}

static void forget(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  tpl__tmpguard_remove(p);
}

/* How the child ended: its signal, or 100 + its exit code. */
static int child_end(pid_t pid) {
  int st;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFSIGNALED(st) ? WTERMSIG(st) : 100 + WEXITSTATUS(st);
}

/* Five registered, one forgotten (and its node reused by the fifth):
 * SIGTERM removes the other four and the child dies of it. */
static void test_tmpguard_removes_every_file(void) {
  char dir[512];
  pid_t pid;
  snprintf(dir, sizeof(dir), "%s/guard", tmp);
  REQUIRE(mkdir(dir, 0755) == 0);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    tpl__tmpguard_install();
    guarded_file(dir, ".a.tmp");
    guarded_file(dir, ".b.tmp");
    guarded_file(dir, ".kept");
    guarded_file(dir, ".c.tmp");
    forget(dir, ".kept");
    guarded_file(dir, ".d.tmp");
    raise(SIGTERM);
    _exit(91);
  }
  CHECK_EQ_INT(child_end(pid), SIGTERM);
  CHECK(exists(dir, ".kept"));
  CHECK_EQ_U64(entries(dir), 1);
}

/* Held: the signal waits (the child reports on a pipe that it lives and
 * its file is there), and release then raises it. */
static void test_tmpguard_held_waits(void) {
  char dir[512], got = 0;
  int fds[2];
  pid_t pid;
  snprintf(dir, sizeof(dir), "%s/held", tmp);
  REQUIRE(mkdir(dir, 0755) == 0);
  REQUIRE(pipe(fds) == 0);
  pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char alive;
    close(fds[0]);
    tpl__tmpguard_install();
    guarded_file(dir, ".e.tmp");
    tpl__tmpguard_hold();
    raise(SIGTERM);
    alive = exists(dir, ".e.tmp") ? 'y' : 'n';
    if (write(fds[1], &alive, 1) != 1) _exit(92);
    tpl__tmpguard_release();
    _exit(93);
  }
  close(fds[1]);
  CHECK_EQ_INT((int)read(fds[0], &got, 1), 1);
  close(fds[0]);
  CHECK_EQ_INT(got, 'y');
  CHECK_EQ_INT(child_end(pid), SIGTERM);
  CHECK_EQ_U64(entries(dir), 0);
}

int main(void) {
  int rc;
  tmp = make_dir("tpl-sink");
  if (tmp == NULL) return 1;
  RUN(test_all_agree_publishes);
  RUN(test_other_write_failed);
  RUN(test_other_publish_failed);
  RUN(test_shard_info_failed);
  RUN(test_tmpguard_removes_every_file);
  RUN(test_tmpguard_held_waits);
  rc = tap_done();
  drop_dir(tmp);
  return rc;
}
