/* outdir.c - the output directory every layout's sink writes into: the
 * check each rank makes of it before any byte moves, `--force`'s
 * cleaning, writes and fsyncs that beat (coord.h) so the other ranks
 * wait for the agreement after them under --stall-timeout, and files
 * that no reader sees until they are whole: an unnamed O_TMPFILE (or,
 * where the filesystem lacks it, a dot temp name that tmpguard.h
 * removes on a signal), fsynced, then linked and renamed into place. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fileio.h"
#include "outdir.h"
#include "tmpguard.h"

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

int tpl__outdir_require_empty(const char *dir, struct tpl__error *err) {
  char found[256];
  if (dir_has_entries(dir, found, sizeof(found)))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: already holds %s (pass --force to replace)", dir,
                     found);
  return 0;
}

int tpl__outdir_remove_old(const char *dir, const char *const *marks,
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

/* --- files no reader sees until they are whole --- */

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

/* f's file at its temp name, registered with tmpguard first. */
static int create_named(const char *dir, struct tpl__outdir_file *f) {
  char *tmp = tpl__path_join(dir, f->tmp);
  int e = tmp != NULL ? tpl__tmpguard_add(tmp) : -ENOMEM;
  if (e == 0) {
    unlink(tmp);
    f->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    e = f->fd >= 0 ? 0 : -errno;
    if (e != 0) tpl__tmpguard_remove(tmp);
  }
  f->named = f->fd >= 0;
  free(tmp);
  return e;
}

int tpl__outdir_create(const char *dir, const char *tmp, int unnamed,
                       struct tpl__outdir_file *f) {
  f->named = 0;
  f->fd = -1;
  snprintf(f->tmp, sizeof(f->tmp), "%s", tmp);
  if (unnamed)
    f->fd = test_no_tmpfile()
                ? (errno = EOPNOTSUPP, -1)
                : open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (f->fd >= 0) return 0;
  if (unnamed && !no_tmpfile(errno)) return -errno;
  return create_named(dir, f);
}

int tpl__outdir_close(struct tpl__outdir_file *f) {
  int rc = f->fd >= 0 && close(f->fd) != 0 ? -errno : 0;
  f->fd = -1;
  return rc;
}

/* Forgets f's temp name (it was removed or renamed). */
static void forget_temp(const char *dir, struct tpl__outdir_file *f) {
  char *p = tpl__path_join(dir, f->tmp);
  if (p != NULL) tpl__tmpguard_remove(p);
  free(p);
  f->named = 0;
}

void tpl__outdir_discard(const char *dir, struct tpl__outdir_file *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->named) {
    char *p = tpl__path_join(dir, f->tmp);
    if (p != NULL) {
      unlink(p);
      tpl__tmpguard_remove(p);
    }
    free(p);
  }
  f->fd = -1;
  f->named = 0;
}

int tpl__outdir_publish(const char *dir, struct tpl__outdir_file *f,
                        const char *final) {
  char proc[64];
  int d, rc = 0;
  d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) rc = -errno;
  if (rc == 0 && !f->named) {
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
    unlinkat(d, f->tmp, 0);
    if (linkat(AT_FDCWD, proc, d, f->tmp, AT_SYMLINK_FOLLOW) != 0)
      rc = -errno;
    else
      f->named = 1;
  }
  if (rc == 0 && renameat(d, f->tmp, d, final) != 0) rc = -errno;
  if (rc == 0) forget_temp(dir, f);
  if (d >= 0) close(d);
  tpl__outdir_discard(dir, f);
  return rc;
}

/* --- the check --- */

/* The probe's temp name where O_TMPFILE is missing: the rank layout's
 * own temp name, which every later create replaces. */
static void probe_name(char *buf, size_t len, uint32_t rank) {
  snprintf(buf, len, ".rank%u.safetensors.tmp", rank);
}

/* Every rank's check of DIR before any byte moves (a sink's check step,
 * what its own node sees): creates it if missing; it must be a directory
 * owned by this user, writable by no one else (or sticky), and this
 * process must be able to create files in it (tested by creating a file,
 * which is dropped at once: the only sure test against a read-only
 * mount, ACLs or root squash). */
int tpl__outdir_check(const char *dir, uint32_t rank, struct tpl__error *err) {
  struct tpl__outdir_file f;
  struct stat st;
  char probe[64];
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
  probe_name(probe, sizeof(probe), rank);
  rc = tpl__outdir_create(dir, probe, 1, &f);
  tpl__outdir_discard(dir, &f);
  if (rc != 0)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: cannot write in the output "
                     "directory: %s",
                     dir, strerror(-rc));
  return 0;
}

/* --- writes and fsyncs that beat --- */

/* Writes go in steps of this size, with a heartbeat between (coord.h). */
#define WRITE_STEP ((size_t)1 << 20)

static void beat(const struct tpl__coord *c) {
  if (c->beat != NULL) c->beat(c->ctx);
}

int tpl__outdir_write_beating(int fd, const uint8_t *p, size_t n,
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

int tpl__outdir_fsync_beating(int fd, const struct tpl__coord *c) {
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

/* --- members of MODEL an output takes --- */

int tpl__outdir_take(struct tpl__outdir_opts *o, const struct tpl__model *m,
                     const char *name, size_t cap, struct tpl__error *err) {
  struct tpl__outdir_member *grown, *mb;
  grown = realloc(o->members, (o->nmembers + 1) * sizeof(*grown));
  if (grown == NULL) return tpl__oom(err);
  o->members = grown;
  mb = &grown[o->nmembers];
  int rc;
  *mb = (struct tpl__outdir_member){strdup(name), NULL, 0};
  if (mb->name == NULL) return tpl__oom(err);
  rc = tpl__model_read_member(m, name, cap, &mb->buf, &mb->len, err);
  if (rc != 0) {
    free(mb->name);
    return rc;
  }
  o->nmembers++;
  return 0;
}

void tpl__outdir_opts_clear(struct tpl__outdir_opts *o) {
  for (size_t i = 0; i < o->nmembers; i++) {
    free(o->members[i].name);
    free(o->members[i].buf);
  }
  free(o->members);
  o->members = NULL;
  o->nmembers = 0;
}
