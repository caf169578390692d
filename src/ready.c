/* ready.c - the ready file tells a supervisor that every rank of a serve
 * job answers.  Waiting for it must never return early, so a file left by
 * a job that died is removed before the next job loads, a file naming a
 * live job is not taken over (two jobs sharing a path would delete it
 * under each other), and a job removes the file at exit only when the
 * file is still its own (it carries the job's random id). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "ready.h"

#define READY_MAX_BYTES 65536

/* The file's content, or NULL when it is missing or not JSON. */
static json_t *read_ready(const char *path) {
  char *text = NULL;
  size_t len;
  json_t *o;
  if (tpl__read_file(path, READY_MAX_BYTES, &text, &len, NULL) != 0)
    return NULL;
  o = json_loadb(text, len, 0, NULL);
  free(text);
  return o;
}

/* 1 when `pid` names a running process (of any user). */
static int pid_alive(json_int_t pid) {
  if (pid <= 0 || pid > INT_MAX) return 0;
  return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static int check_parent(const char *path, struct tpl__error *err) {
  char *dir = tpl__dir_of(path);
  int ok;
  if (dir == NULL) return tpl__oom(err);
  ok = tpl__is_dir(dir) && access(dir, W_OK | X_OK) == 0;
  free(dir);
  if (!ok)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: ready file: expected a writable directory to hold "
                     "it, found none",
                     path);
  return 0;
}

int tpl__ready_claim(const char *path, struct tpl__error *err) {
  struct stat st;
  json_t *old;
  json_int_t pid;
  int rc = check_parent(path, err);
  if (rc != 0 || lstat(path, &st) != 0) return rc;
  if (!S_ISREG(st.st_mode))
    return tpl__fail(
        err, TPL_EOUTPUT,
        "%s: ready file: expected a regular file or nothing, "
        "found %s",
        path, S_ISLNK(st.st_mode) ? "a symbolic link" : "another file type");
  old = read_ready(path);
  pid = json_integer_value(json_object_get(old, "pid"));
  json_decref(old);
  if (pid_alive(pid))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: ready file of a live job (pid %lld): give this job "
                     "its own --ready-file",
                     path, (long long)pid);
  if (unlink(path) != 0 && errno != ENOENT) {
    int e = errno;
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: cannot remove a stale ready file: %s", path,
                     strerror(e));
  }
  return 0;
}

int tpl__ready_write(const char *path, const char *socket_dir, uint32_t world,
                     const char *job_id, uint64_t generation,
                     struct tpl__error *err) {
  struct tpl__atomic a;
  json_t *o =
      json_pack("{ss sI sI ss sI}", "socket_dir", socket_dir, "world_size",
                (json_int_t)world, "pid", (json_int_t)getpid(), "job_id",
                job_id ? job_id : "", "generation", (json_int_t)generation);
  char *text = json_dumps(o, JSON_PRESERVE_ORDER);
  int rc;
  json_decref(o);
  if (text == NULL) return tpl__oom(err);
  rc = tpl__atomic_open(path, NULL, &a, err); /* temp: DIR/.NAME.tmp.PID */
  if (rc == 0) rc = tpl__write_full(a.fd, text, strlen(text));
  if (rc == 0) rc = tpl__write_full(a.fd, "\n", 1);
  if (rc == 0)
    rc = tpl__atomic_commit(&a, err);
  else
    tpl__atomic_abort(&a); /* harmless after a failed open */
  free(text);
  if (rc != 0)
    return tpl__fail(err, TPL_EOUTPUT, "%s: cannot write the ready file: %s",
                     path, strerror(-rc));
  return 0;
}

void tpl__ready_release(const char *path, const char *job_id) {
  json_t *o = read_ready(path);
  const char *id = json_string_value(json_object_get(o, "job_id"));
  if (id != NULL && strcmp(id, job_id ? job_id : "") == 0) unlink(path);
  json_decref(o);
}
