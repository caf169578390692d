/* stall.c - what a waiting rank does while nothing arrives.  Blocking MPI
 * waits spin (or yield in a loop) at full CPU and never give up, so one
 * stopped rank hung a job forever with its peers burning the allocation.
 * The engine instead polls its requests and, when nothing completed,
 * calls tpl__stall_idle: a few yields keep the latency of a busy transfer
 * low, then the waiter sleeps with a growing interval (capped at 1 ms, so
 * a transfer that resumes is noticed quickly), and once no request has
 * completed for the stall timeout the engine ends the job naming the
 * rank it was waiting for. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "stall.h"

#define YIELD_POLLS 64
#define FIRST_SLEEP_NS 10000L
#define MAX_SLEEP_NS 1000000L

void tpl__stall_start(struct tpl__stall *s, double timeout) {
  s->timeout = timeout;
  s->last = tpl__now();
  s->polls = 0;
}

void tpl__stall_progress(struct tpl__stall *s) {
  s->last = tpl__now();
  s->polls = 0;
}

double tpl__stall_quiet_for(const struct tpl__stall *s) {
  return tpl__now() - s->last;
}

static long sleep_ns(unsigned polls) {
  long ns = FIRST_SLEEP_NS;
  for (unsigned i = YIELD_POLLS; i < polls && ns < MAX_SLEEP_NS; i++) ns *= 2;
  return ns < MAX_SLEEP_NS ? ns : MAX_SLEEP_NS;
}

int tpl__stall_idle(struct tpl__stall *s) {
  struct timespec ts = {0, 0};
  if (s->timeout > 0 && tpl__stall_quiet_for(s) >= s->timeout) return 1;
  if (s->polls < YIELD_POLLS) {
    s->polls++;
    sched_yield();
    return 0;
  }
  ts.tv_nsec = sleep_ns(s->polls);
  if (s->polls < UINT32_MAX) s->polls++;
  nanosleep(&ts, NULL);
  return 0;
}

void tpl__stall_test_stop(uint32_t rank) {
  const char *v = getenv("TPLOAD_TEST_SIGSTOP_RANK");
  char *end;
  unsigned long r;
  if (v == NULL || *v < '0' || *v > '9') return;
  errno = 0;
  r = strtoul(v, &end, 10);
  if (errno == 0 && *end == '\0' && r == rank) raise(SIGSTOP);
}
