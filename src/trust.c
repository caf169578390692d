/* trust.c - who may stand on the other side of a daemon socket.  A socket
 * path is only as safe as the directories leading to it: whoever can
 * rename an entry on the way can put their own socket there.  So a socket
 * directory is accepted when it is no symbolic link, belongs to the
 * expected user, is private (mode 0700 or stricter), and every directory
 * above it (after resolving links once) can be changed by root or that
 * user alone.  The peer itself is then checked with SO_PEERCRED.  The
 * same rules serve the daemon (its own uid) and clients (the uid they
 * expect the daemon to run as). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

int tpl__trusted_uid(uid_t *uid, struct tpl__error *err) {
  const char *v = getenv("TPLOAD_DAEMON_UID");
  char *end;
  unsigned long u;
  if (v == NULL || v[0] == '\0') {
    *uid = geteuid();
    return 0;
  }
  errno = 0;
  u = strtoul(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 ||
      u >= (unsigned long)UINT_MAX)
    return tpl__fail(err, TPL_EUSAGE,
                     "TPLOAD_DAEMON_UID: expected a numeric uid, found '%s'",
                     v);
  *uid = (uid_t)u;
  return 0;
}

/* Only root or `uid` can add, remove or rename entries of a directory
 * with these attributes. */
static int ancestor_trusted(const struct stat *st, uid_t uid) {
  if (st->st_uid != 0 && st->st_uid != uid) return 0;
  return (st->st_mode & 022) == 0 || (st->st_mode & S_ISVTX) != 0;
}

/* Every proper ancestor of the resolved (absolute, link-free) `path`. */
static int check_ancestors(const char *path, uid_t uid,
                           struct tpl__error *err) {
  char buf[PATH_MAX];
  char *slash;
  struct stat st;
  snprintf(buf, sizeof(buf), "%s", path);
  while ((slash = strrchr(buf, '/')) != NULL) {
    if (slash == buf)
      slash[1] = '\0'; /* "/" itself, then stop */
    else
      *slash = '\0';
    if (lstat(buf, &st) != 0) {
      int e = errno;
      return tpl__fail(err, -e, "%s: cannot stat: %s", buf, strerror(e));
    }
    if (!ancestor_trusted(&st, uid))
      return tpl__fail(err, TPL_EOUTPUT,
                       "%s: not trusted: uid %u (mode %04o) can replace what "
                       "is below it; expected a directory only root or uid "
                       "%u can change",
                       buf, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                       (unsigned)uid);
    if (slash == buf) break;
  }
  return 0;
}

/* `fd` (opened without following a link) is a private directory of uid. */
static int check_own_dir(const char *dir, int fd, uid_t uid, struct stat *st,
                         struct tpl__error *err) {
  if (fstat(fd, st) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "%s: cannot stat: %s", dir, strerror(e));
  }
  if (st->st_uid != uid)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: socket directory: expected owner uid %u, found uid "
                     "%u",
                     dir, (unsigned)uid, (unsigned)st->st_uid);
  if ((st->st_mode & 077) != 0)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: socket directory: expected mode 0700 (private), "
                     "found %04o",
                     dir, (unsigned)(st->st_mode & 07777));
  return 0;
}

static int open_no_link(const char *dir, int *fd, struct tpl__error *err) {
  int f = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  struct stat st;
  if (f >= 0) {
    *fd = f;
    return 0;
  }
  if (e == ELOOP ||
      (e == ENOTDIR && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: socket directory: expected a directory, found a "
                     "symbolic link",
                     dir);
  if (e == ENOTDIR)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: socket directory: expected a directory, found "
                     "another file type",
                     dir);
  return tpl__fail(err, -e, "%s: cannot open the socket directory: %s", dir,
                   strerror(e));
}

int tpl__check_private_dir(const char *dir, uid_t uid, char **resolved,
                           struct tpl__error *err) {
  struct stat st, again;
  char *real = NULL;
  int fd = -1, rc = open_no_link(dir, &fd, err);
  if (rc != 0) return rc;
  rc = check_own_dir(dir, fd, uid, &st, err);
  if (rc == 0 && (real = realpath(dir, NULL)) == NULL)
    rc = tpl__fail(err, -errno, "%s: cannot resolve: %s", dir, strerror(errno));
  /* The resolved name must still lead to the directory checked above. */
  if (rc == 0 && (lstat(real, &again) != 0 || again.st_dev != st.st_dev ||
                  again.st_ino != st.st_ino))
    rc = tpl__fail(err, TPL_EOUTPUT,
                   "%s: socket directory changed while it was checked", dir);
  if (rc == 0) rc = check_ancestors(real, uid, err);
  close(fd);
  if (rc != 0) {
    free(real);
    return rc;
  }
  *resolved = real;
  return 0;
}

int tpl__new_job_id(char *out) {
  uint8_t b[TPL_JOB_ID_LEN / 2];
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof(b); i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

int tpl__peer_cred(int fd, uid_t *uid, pid_t *pid) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -errno;
  *uid = cred.uid;
  *pid = cred.pid;
  return 0;
}
