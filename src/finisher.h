/* finisher.h - a helper thread that runs a step over items 0 .. n-1 in
 * order, each once the caller has released it.  Rank 0 uses it to decode,
 * scale and hash its own tensors while it is still reading and sending
 * (engine.c) instead of in a pass after; the thread may run on any core
 * of the rank's NUMA node (affinity.h).  The step must not call MPI. */
#ifndef TPL_FINISHER_H
#define TPL_FINISHER_H

#include <pthread.h>
#include <stddef.h>

#include "common.h"

typedef int (*tpl__finish_step)(void *ctx, size_t i, struct tpl__error *err);

struct tpl__finisher {
  tpl__finish_step step;
  void *ctx;
  size_t n;
  pthread_t thread;
  int started;           /* a thread runs (else join runs the steps) */
  pthread_mutex_t lock;  /* guards `released` */
  pthread_cond_t more;   /* signalled when `released` grows */
  size_t released;       /* items below this may be finished */
  int rc;                /* the first failed step's code, 0 */
  struct tpl__error err; /* and its message */
};

/* Starts the thread for items [0, n).  Best effort: without a thread,
 * tpl__finisher_join runs every step itself. */
void tpl__finisher_start(struct tpl__finisher *f, size_t n,
                         tpl__finish_step step, void *ctx);

/* Items below `below` are ready to be finished (a smaller value than
 * before changes nothing). */
void tpl__finisher_release(struct tpl__finisher *f, size_t below);

/* Releases every item, waits until all are finished and returns 0, or
 * the first failed step's code with its message in err.  Steps after a
 * failed one do not run. */
int tpl__finisher_join(struct tpl__finisher *f, struct tpl__error *err);

#endif
