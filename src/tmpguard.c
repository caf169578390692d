/* tmpguard.c - the signal handler that removes the registered temp files
 * (tmpguard.h).  They sit in a list that only grows: a node is published
 * by one atomic store of the head once filled, and freed nodes are
 * reused, never released, so the handler can walk the list at any time.
 * A node's state says who may touch its path: FREE and FILLING belong to
 * the registering thread (add and remove, under a mutex), ACTIVE may be
 * taken by the handler, and a TAKEN node is the handler's for good.  The
 * handler calls only unlink, sigaction and raise (async-signal-safe,
 * POSIX.1-2008).  Dying of the signal again (default action, re-raised)
 * keeps what the launcher sees: mpirun reports the rank as killed by
 * SIGTERM, as before. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "tmpguard.h"

static const int guarded[] = {SIGTERM, SIGINT, SIGHUP};

enum { FREE, FILLING, ACTIVE, TAKEN };

struct guard {
  struct guard *next; /* set before the node is published, then fixed */
  int state;
  char *path;
};

static struct guard *head;
static pthread_mutex_t registering = PTHREAD_MUTEX_INITIALIZER;
static int held;        /* 1: between hold and release */
static int held_signal; /* the signal that arrived while held */

static void die_of(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  /* Blocked while this handler runs: delivered, fatally, on return. */
  raise(sig);
}

/* CAS on a node's state: 1 when it was `from` and is now `to`. */
static int take(struct guard *g, int from, int to) {
  return __atomic_compare_exchange_n(&g->state, &from, to, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

static void on_signal(int sig) {
  int saved = errno;
  if (__atomic_load_n(&held, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&held_signal, sig, __ATOMIC_SEQ_CST);
    errno = saved;
    return;
  }
  for (struct guard *g = __atomic_load_n(&head, __ATOMIC_SEQ_CST); g != NULL;
       g = g->next)
    if (take(g, ACTIVE, TAKEN)) unlink(g->path);
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

/* A FREE node, now FILLING: a reused one or a new one, published. */
static struct guard *claim_node(void) {
  struct guard *g;
  for (g = __atomic_load_n(&head, __ATOMIC_SEQ_CST); g != NULL; g = g->next)
    if (take(g, FREE, FILLING)) return g;
  g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->state = FILLING;
  g->next = head; /* only registering threads change head, under the lock */
  __atomic_store_n(&head, g, __ATOMIC_SEQ_CST);
  return g;
}

int tpl__tmpguard_add(const char *path) {
  char *copy = strdup(path);
  struct guard *g;
  if (copy == NULL) return -ENOMEM;
  pthread_mutex_lock(&registering);
  g = claim_node();
  if (g != NULL) {
    free(g->path);
    g->path = copy;
    __atomic_store_n(&g->state, ACTIVE, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&registering);
  if (g == NULL) free(copy);
  return g != NULL ? 0 : -ENOMEM;
}

void tpl__tmpguard_remove(const char *path) {
  pthread_mutex_lock(&registering);
  for (struct guard *g = head; g != NULL; g = g->next)
    if (__atomic_load_n(&g->state, __ATOMIC_SEQ_CST) == ACTIVE &&
        strcmp(g->path, path) == 0 && take(g, ACTIVE, FREE))
      break;
  pthread_mutex_unlock(&registering);
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
