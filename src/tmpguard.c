/* tmpguard.c - the signal handler that removes a registered temp file
 * (tmpguard.h).  Everything the handler touches is a lock-free atomic or
 * a buffer written before the atomic that publishes it, and it calls
 * only unlinkat, sigaction and raise (async-signal-safe, POSIX.1-2008).
 * Dying of the signal again (default action, re-raised) keeps what the
 * launcher sees: mpirun reports the rank as killed by SIGTERM, as
 * before. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "tmpguard.h"

static const int guarded[] = {SIGTERM, SIGINT, SIGHUP};

static char guard_name[64];
static int guard_dirfd = -1; /* >= 0: guard_name in it is registered */
static int held;             /* 1: between hold and release */
static int held_signal;      /* the signal that arrived while held */

static void die_of(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  /* Blocked while this handler runs: delivered, fatally, on return. */
  raise(sig);
}

static void on_signal(int sig) {
  int saved = errno, fd;
  if (__atomic_load_n(&held, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&held_signal, sig, __ATOMIC_SEQ_CST);
    errno = saved;
    return;
  }
  fd = __atomic_exchange_n(&guard_dirfd, -1, __ATOMIC_SEQ_CST);
  if (fd >= 0) unlinkat(fd, guard_name, 0);
  die_of(sig);
  errno = saved;
}

void tpl__tmpguard_install(void) {
  static int installed;
  struct sigaction sa;
  if (installed) return;
  installed = 1;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < ARRAY_SIZE(guarded); i++)
    sigaddset(&sa.sa_mask, guarded[i]);
  for (size_t i = 0; i < ARRAY_SIZE(guarded); i++)
    sigaction(guarded[i], &sa, NULL);
}

int tpl__tmpguard_set(int dirfd, const char *name) {
  int fd;
  if (strlen(name) >= sizeof(guard_name)) return -ENAMETOOLONG;
  fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return -errno;
  tpl__tmpguard_clear();
  memcpy(guard_name, name, strlen(name) + 1);
  __atomic_store_n(&guard_dirfd, fd, __ATOMIC_SEQ_CST);
  return 0;
}

void tpl__tmpguard_clear(void) {
  int fd = __atomic_exchange_n(&guard_dirfd, -1, __ATOMIC_SEQ_CST);
  if (fd >= 0) close(fd);
}

void tpl__tmpguard_hold(void) {
  __atomic_store_n(&held, 1, __ATOMIC_SEQ_CST);
}

void tpl__tmpguard_release(void) {
  int sig;
  __atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
  sig = __atomic_exchange_n(&held_signal, 0, __ATOMIC_SEQ_CST);
  if (sig != 0) raise(sig);
}
