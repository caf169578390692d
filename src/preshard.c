/* preshard.c - one rank's shard as a safetensors file, written so that no
 * partial file is ever visible: an unnamed O_TMPFILE in the target
 * directory, fsynced, then linked under a temporary name and renamed into
 * place, and the directory fsynced.  A rank killed mid-write leaves
 * nothing behind: the kernel drops the unnamed file.  The sink's job-wide
 * order (write, agree, publish, agree, shard-info.json) is at the end.
 * While it writes and fsyncs, a rank beats (coord.h), so the others wait
 * for the agreement after the write under --stall-timeout. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "preshard.h"
#include "report.h"
#include "shardinfo.h"
#include "st_writer.h"
#include "stall.h"
#include "tmpguard.h"

/* A rank file being written: unnamed (O_TMPFILE) where the filesystem
 * allows it, else a hidden temp name that is removed on failure. */
struct shard_file {
  int fd;    /* -1 when none */
  int named; /* 1: lives at DIR/.rank{R}.safetensors.tmp */
};

/* DIR exists, or is created now. */
static int make_dir(const char *dir, struct tpl__error *err) {
  int e;
  if (mkdir(dir, 0755) == 0 || errno == EEXIST) return 0;
  e = errno;
  return tpl__fail(err, TPL_EOUTPUT, "%s: cannot create directory: %s", dir,
                   strerror(e));
}

/* Without --force the output directory must be empty: output of an
 * earlier run, the model's own files or anything else is refused. */
static int dir_has_entries(const char *dir, char *found, size_t len) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int hit = 0;
  if (d == NULL) return 0;
  while (!hit && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      snprintf(found, len, "%s", e->d_name);
      hit = 1;
    }
  closedir(d);
  return hit;
}

/* "rank<digits>.safetensors": the shard file of some earlier run. */
static int is_rank_file(const char *name) {
  const char *p = name + 4;
  if (strncmp(name, "rank", 4) != 0 || *p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9')
    p++;
  return strcmp(p, ".safetensors") == 0;
}

int tpl__preshard_remove_old(const char *dir, const char *const *marks,
                             size_t nmarks, int (*is_old)(const char *name),
                             struct tpl__error *err) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int rc = d == NULL ? -errno : 0;
  for (size_t i = 0; rc == 0 && i < nmarks; i++)
    if (unlinkat(dirfd(d), marks[i], 0) != 0 && errno != ENOENT) rc = -errno;
  while (rc == 0 && (e = readdir(d)) != NULL)
    if (is_old(e->d_name) && unlinkat(dirfd(d), e->d_name, 0) != 0 &&
        errno != ENOENT)
      rc = -errno;
  if (d != NULL) closedir(d);
  if (rc != 0)
    return tpl__fail(err, TPL_EOUTPUT, "%s: cannot remove the old output: %s",
                     dir, strerror(-rc));
  return 0;
}

/* --force: shard-info.json goes first (a half-replaced directory never
 * looks complete), then every old rank file, so that a run with fewer
 * ranks than the last one leaves no stale rank{R}.safetensors behind. */
static int remove_old_output(const char *dir, struct tpl__error *err) {
  static const char *const marks[] = {"shard-info.json"};
  return tpl__preshard_remove_old(dir, marks, 1, is_rank_file, err);
}

/* Filesystems without O_TMPFILE (NFS, some FUSE) say so with one of
 * these; they get a named temp file instead. */
static int no_tmpfile(int e) {
  return e == EOPNOTSUPP || e == EISDIR || e == EINVAL;
}

/* For tests only: TPLOAD_TEST_NO_TMPFILE set makes every directory one
 * without O_TMPFILE (read once). */
static int test_no_tmpfile(void) {
  static int v = -1;
  if (v < 0) v = getenv("TPLOAD_TEST_NO_TMPFILE") != NULL;
  return v;
}

static void temp_name(char *buf, size_t len, uint32_t rank) {
  snprintf(buf, len, ".rank%u.safetensors.tmp", rank);
}

/* Creates rank's file in `dir`: unnamed (O_TMPFILE), or where the
 * filesystem lacks that, at its temp name (replacing a stale one), which
 * a SIGTERM, SIGINT or SIGHUP then removes (tmpguard.h) until the file
 * is discarded or published.  Returns 0 or -errno. */
static int create_file(const char *dir, uint32_t rank, struct shard_file *f) {
  char tmp[64];
  int d, e;
  f->named = 0;
  f->fd = test_no_tmpfile() ? (errno = EOPNOTSUPP, -1)
                            : open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (f->fd >= 0) return 0;
  if (!no_tmpfile(errno)) return -errno;
  temp_name(tmp, sizeof(tmp), rank);
  d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return -errno;
  e = tpl__tmpguard_set(d, tmp);
  if (e == 0) {
    unlinkat(d, tmp, 0);
    f->fd = openat(d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    e = f->fd >= 0 ? 0 : -errno;
  }
  close(d);
  f->named = f->fd >= 0;
  if (!f->named) tpl__tmpguard_clear();
  return e;
}

/* Drops a written but unpublished file (after a failure elsewhere). */
static void discard(const char *dir, uint32_t rank, struct shard_file *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->named) {
    char tmp[64], *p;
    temp_name(tmp, sizeof(tmp), rank);
    p = tpl__path_join(dir, tmp);
    if (p != NULL) unlink(p);
    free(p);
    tpl__tmpguard_clear();
  }
  f->fd = -1;
  f->named = 0;
}

/* Every rank's check of DIR before any byte moves (the sink's check
 * step, what its own node sees): creates it if missing; it must be a
 * directory owned by this user, writable by no one else (or sticky), and
 * this process must be able to create files in it (tested by creating
 * the rank's file, which is dropped at once: the only sure test against
 * a read-only mount, ACLs or root squash).  Returns 0 or TPL_EOUTPUT. */
int tpl__preshard_check_dir(const char *dir, uint32_t rank,
                            struct tpl__error *err) {
  struct shard_file f;
  struct stat st;
  int rc;
  tpl__tmpguard_install(); /* before the first temp file below */
  rc = make_dir(dir, err);
  if (rc != 0) return rc;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: expected a directory, found another file", dir);
  if (st.st_uid != geteuid())
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: output directory: expected owner uid %u, found uid "
                     "%u (another user could replace the rank files)",
                     dir, (unsigned)geteuid(), (unsigned)st.st_uid);
  /* Sticky (as a fresh tmpfs is): others may add files, never replace
   * or remove ours. */
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: output directory: expected no group or other write "
                     "permission (unless sticky), found mode %04o",
                     dir, (unsigned)(st.st_mode & 07777));
  rc = create_file(dir, rank, &f);
  discard(dir, rank, &f);
  if (rc != 0)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: cannot write in the output "
                     "directory: %s",
                     dir, strerror(-rc));
  return 0;
}

static int preshard_check(void *ctx, uint32_t rank, struct tpl__error *err) {
  return tpl__preshard_check_dir(((const struct tpl__preshard_opts *)ctx)->dir,
                                 rank, err);
}

int tpl__preshard_require_empty(const char *dir, struct tpl__error *err) {
  char found[256];
  if (dir_has_entries(dir, found, sizeof(found)))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: already holds %s (pass --force to replace)", dir,
                     found);
  return 0;
}

/* Rank 0's check before loading (the sink's prepare step): its check of
 * DIR (preshard_check), then without --force, DIR must be empty (old
 * output, the model's own files or anything else is refused).  With
 * --force, removes the old shard-info.json (so a half-replaced directory
 * never looks complete) and every old rank<digits>.safetensors (so fewer
 * ranks than last time leave no stale file).  Returns 0 or TPL_EOUTPUT /
 * -errno. */
static int preshard_prepare(void *ctx, struct tpl__error *err) {
  const struct tpl__preshard_opts *o = ctx;
  int rc = preshard_check(ctx, 0, err);
  if (rc == 0 && !o->force) rc = tpl__preshard_require_empty(o->dir, err);
  if (rc != 0) return rc;
  return o->force ? remove_old_output(o->dir, err) : 0;
}

int tpl__rank_file_header(const struct tpl__st_out *t, size_t n,
                          const struct tpl__grid *g, uint32_t rank,
                          uint8_t **hdr, size_t *len) {
  struct tpl__pos c = tpl__grid_coord(g, rank);
  uint32_t v[8] = {c.t, g->tp, rank, g->world, c.p, g->pp, c.d, g->dp};
  char s[8][16];
  const char *meta[16] = {"tp_rank",    s[0], "tp_size", s[1], "rank",    s[2],
                          "world_size", s[3], "pp_rank", s[4], "pp_size", s[5],
                          "dp_rank",    s[6], "dp_size", s[7]};
  for (int i = 0; i < 8; i++)
    snprintf(s[i], sizeof(s[i]), "%u", v[i]);
  return tpl__st_build_header(t, n, meta, g->pp * g->dp > 1 ? 8 : 2, hdr, len);
}

static int write_header(int fd, const char *dir, const struct tpl__job *job,
                        uint32_t rank, struct tpl__error *err) {
  struct tpl__st_out *outs = calloc(job->ntensors + 1, sizeof(*outs));
  uint8_t *hdr = NULL;
  size_t hlen = 0, n = 0;
  int rc;
  if (outs == NULL) return tpl__oom(err);
  for (size_t i = 0; i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    if (t->store_offset == UINT64_MAX) continue; /* not this stage's */
    outs[n].name = t->name;
    outs[n].dtype = t->dtype;
    outs[n].ndim = t->ndim;
    outs[n].shape = t->rank_shape;
    outs[n++].nbytes = t->rank_bytes;
  }
  rc = tpl__rank_file_header(outs, n, &job->grid, rank, &hdr, &hlen);
  free(outs);
  if (rc == 0) rc = tpl__write_full(fd, hdr, hlen);
  free(hdr);
  if (rc != 0)
    return tpl__fail(err, rc, "%s/rank%u.safetensors: cannot write: %s", dir,
                     rank, tpl_strerror(rc));
  return 0;
}

/* Writes go in steps of this size, with a heartbeat between (coord.h). */
#define WRITE_STEP ((size_t)1 << 20)

static void beat(const struct tpl__coord *c) {
  if (c->beat != NULL) c->beat(c->ctx);
}

int tpl__preshard_write_beating(int fd, const uint8_t *p, size_t n,
                                const struct tpl__coord *c) {
  for (size_t at = 0; at < n; at += WRITE_STEP) {
    int rc =
        tpl__write_full(fd, p + at, n - at < WRITE_STEP ? n - at : WRITE_STEP);
    if (rc != 0) return rc;
    beat(c);
  }
  return 0;
}

/* An fsync that may take as long as the writing did (every dirty page of
 * the file goes to disk), run by a thread while this one beats. */
struct sync_job {
  int fd, rc, done;
  pthread_mutex_t lock;
  pthread_cond_t cond;
};

static void *sync_main(void *arg) {
  struct sync_job *j = arg;
  int rc = fsync(j->fd) == 0 ? 0 : -errno;
  pthread_mutex_lock(&j->lock);
  j->rc = rc;
  j->done = 1;
  pthread_cond_signal(&j->cond);
  pthread_mutex_unlock(&j->lock);
  return NULL;
}

int tpl__preshard_fsync_beating(int fd, const struct tpl__coord *c) {
  struct sync_job j = {fd, 0, 0, PTHREAD_MUTEX_INITIALIZER,
                       PTHREAD_COND_INITIALIZER};
  pthread_t t;
  if (c->beat == NULL || pthread_create(&t, NULL, sync_main, &j) != 0)
    return fsync(fd) == 0 ? 0 : -errno;
  pthread_mutex_lock(&j.lock);
  while (!j.done) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&j.cond, &j.lock, &until);
    pthread_mutex_unlock(&j.lock);
    beat(c);
    pthread_mutex_lock(&j.lock);
  }
  pthread_mutex_unlock(&j.lock);
  pthread_join(t, NULL);
  return j.rc;
}

/* Writes this rank's safetensors file (header with its place in the
 * grid, tpl__rank_file_header; the tensors its stage holds, in checkpoint
 * order) to a file no reader will take for output and fsyncs it, beating
 * all along (c->beat).  Disk full is -ENOSPC (exit 74).  On failure
 * nothing is left in DIR and f->fd is -1. */
static int write_rank_file(const char *dir, const struct tpl__loaded *l,
                           const struct tpl__coord *c, struct shard_file *f,
                           struct tpl__error *err) {
  const struct tpl__job *job = l->job;
  uint32_t rank = c->rank;
  int rc = create_file(dir, rank, f);
  if (rc != 0)
    return tpl__fail(err, rc == -ENOSPC ? -ENOSPC : TPL_EOUTPUT,
                     "%s: cannot create rank %u's file: %s", dir, rank,
                     strerror(-rc));
  rc = write_header(f->fd, dir, job, rank, err);
  if (rc == 0) tpl__stall_test_pause("written", rank);
  for (size_t i = 0; rc == 0 && i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    if (t->store_offset == UINT64_MAX) continue;
    rc = tpl__preshard_write_beating(f->fd, l->store->base + t->store_offset,
                                     (size_t)t->rank_bytes, c);
    if (rc != 0)
      rc = tpl__fail(err, rc, "%s/rank%u.safetensors: writing '%s': %s", dir,
                     rank, t->name, tpl_strerror(rc));
  }
  if (rc == 0 && (rc = tpl__preshard_fsync_beating(f->fd, c)) != 0)
    tpl__fail(err, rc, "%s/rank%u.safetensors: fsync: %s", dir, rank,
              tpl_strerror(rc));
  if (rc != 0) discard(dir, rank, f);
  return rc;
}

/* Gives the written file its name DIR/rank{R}.safetensors (replacing an
 * old one), fsyncs DIR and closes it; on failure the file is gone.  An
 * unnamed file first gets the temp name, then every file is renamed
 * over the final one: readers see the old file or the new, never a part. */
static int publish(const char *dir, uint32_t rank, struct shard_file *f,
                   struct tpl__error *err) {
  char proc[64], tmp[64], final[64];
  int d, rc = 0;
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
  temp_name(tmp, sizeof(tmp), rank);
  snprintf(final, sizeof(final), "rank%u.safetensors", rank);
  d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) rc = -errno;
  if (rc == 0 && !f->named) {
    unlinkat(d, tmp, 0);
    if (linkat(AT_FDCWD, proc, d, tmp, AT_SYMLINK_FOLLOW) != 0)
      rc = -errno;
    else
      f->named = 1;
  }
  if (rc == 0 && renameat(d, tmp, d, final) != 0) rc = -errno;
  if (rc == 0) {
    f->named = 0;
    tpl__tmpguard_clear();
  }
  if (d >= 0) close(d);
  discard(dir, rank, f);
  if (rc == 0) rc = tpl__fsync_dir(dir);
  if (rc != 0)
    return tpl__fail(err, rc, "%s/%s: cannot publish: %s", dir, final,
                     tpl_strerror(rc));
  return 0;
}

/* Removes DIR/rank{R}.safetensors (after a failure elsewhere). */
static void unpublish(const char *dir, uint32_t rank) {
  char name[64], *p;
  snprintf(name, sizeof(name), "rank%u.safetensors", rank);
  p = tpl__path_join(dir, name);
  if (p != NULL) unlink(p);
  free(p);
}

/* --- the sink: the job-wide order --- */

/* Rank 0, last: DIR/shard-info.json from the job and its LoadReport's
 * per-rank bytes and checksums. */
static int write_shard_info(const char *dir, const struct tpl__loaded *l,
                            struct tpl__error *err) {
  struct tpl__report *rep = NULL;
  json_t *info = NULL;
  char *text = NULL;
  int rc = tpl__report_decode(l->report, l->report_len, &rep, NULL);
  if (rc == 0 && rep->ntensors != l->job->ntensors) rc = TPL_EPEER;
  if (rc == 0) rc = tpl__shardinfo_build(l->job, rep->infos, &info);
  if (rc == 0) {
    text = json_dumps(info, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    rc = text ? 0 : -ENOMEM;
  }
  if (rc == 0)
    rc =
        tpl__write_file_atomic(dir, "shard-info.json", text, strlen(text), err);
  else
    tpl__fail(err, rc, "%s/shard-info.json: cannot build: %s", dir,
              tpl_strerror(rc));
  free(text);
  json_decref(info);
  tpl__report_free(rep);
  return rc;
}

static int preshard_run(void *ctx, const struct tpl__loaded *l,
                        const struct tpl__coord *c, struct tpl__error *err) {
  const char *dir = ((const struct tpl__preshard_opts *)ctx)->dir;
  struct shard_file f = {-1, 0};
  int rc, all;
  if (c->beats_begin != NULL) c->beats_begin(c->ctx);
  tpl__stall_test_stop("write", c->rank);
  rc = write_rank_file(dir, l, c, &f, err);
  all = c->agree_after_beats != NULL ? c->agree_after_beats(c->ctx, rc, err)
                                     : c->agree(c->ctx, rc, err);
  /* Once files get names, a SIGTERM, SIGINT or SIGHUP waits until the
   * directory is complete or cleaned (a few milliseconds): a signal
   * between the renames and shard-info.json would otherwise leave rank
   * files that no shard-info.json vouches for.  Held, not blocked: the
   * kernel may give it to any thread (MPI's, the fsync's). */
  tpl__tmpguard_hold();
  if (all == 0) {
    rc = publish(dir, c->rank, &f, err);
    all = c->agree(c->ctx, rc, err);
  }
  discard(dir, c->rank, &f);
  if (all == 0 && c->rank == 0) rc = write_shard_info(dir, l, err);
  all = c->agree(c->ctx, rc, err);
  if (all != 0) unpublish(dir, c->rank);
  tpl__tmpguard_release();
  return all;
}

struct tpl__sink tpl__preshard_sink(const struct tpl__preshard_opts *o) {
  struct tpl__sink s = {.prepare = preshard_prepare,
                        .check = preshard_check,
                        .run = preshard_run,
                        .ctx = (void *)o};
  return s;
}
