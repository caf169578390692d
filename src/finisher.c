/* finisher.c - items finished in order by a helper thread as the caller
 * releases them (finisher.h).  One lock guards the released count; the
 * thread waits on a condition variable while it has caught up. */
#include <string.h>

#include "affinity.h"
#include "finisher.h"

/* Waits until item i is released (join releases every item). */
static void wait_released(struct tpl__finisher *f, size_t i) {
  pthread_mutex_lock(&f->lock);
  while (f->released <= i)
    pthread_cond_wait(&f->more, &f->lock);
  pthread_mutex_unlock(&f->lock);
}

static void run_steps(struct tpl__finisher *f) {
  for (size_t i = 0; i < f->n && f->rc == 0; i++) {
    wait_released(f, i);
    f->rc = f->step(f->ctx, i, &f->err);
  }
}

static void *finisher_main(void *arg) {
  tpl__thread_widen_to_node();
  run_steps(arg);
  return NULL;
}

void tpl__finisher_start(struct tpl__finisher *f, size_t n,
                         tpl__finish_step step, void *ctx) {
  memset(f, 0, sizeof(*f));
  f->step = step;
  f->ctx = ctx;
  f->n = n;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->more, NULL);
  f->started = pthread_create(&f->thread, NULL, finisher_main, f) == 0;
}

void tpl__finisher_release(struct tpl__finisher *f, size_t below) {
  pthread_mutex_lock(&f->lock);
  if (below > f->released) {
    f->released = below;
    pthread_cond_signal(&f->more);
  }
  pthread_mutex_unlock(&f->lock);
}

int tpl__finisher_join(struct tpl__finisher *f, struct tpl__error *err) {
  tpl__finisher_release(f, f->n);
  if (f->started)
    pthread_join(f->thread, NULL);
  else
    run_steps(f);
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->more);
  if (f->rc != 0 && err != NULL) *err = f->err;
  return f->rc;
}
