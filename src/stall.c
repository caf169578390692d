/* stall.c - what a waiting rank does while nothing arrives.  Blocking MPI
 * waits spin (or yield in a loop) at full CPU and never give up, so one
 * stopped rank hung a job forever with its peers burning the allocation.
 * The engine instead polls its requests and, when nothing completed,
 * calls tpl__stall_idle, which sleeps: 0.1 ms at a time for the first
 * 10 ms without progress, then growing to 1 ms (so a transfer that
 * resumes is noticed quickly), and once no request has completed for the
 * stall timeout the engine ends the job naming the rank it was waiting
 * for.  It does not yield instead: a yielding rank stays runnable, so its
 * core looks busy and the helper threads (affinity.h) and oversubscribed
 * ranks queue behind it, where a sleeping one leaves the core idle
 * (measured in the commit that made it sleep). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "stall.h"

#define SHORT_SECONDS 0.01 /* quiet this long, the sleeps start to grow */
#define FIRST_SLEEP_NS 100000L
#define MAX_SLEEP_NS 1000000L

void tpl__stall_progress(struct tpl__stall *s) {
  s->last = tpl__now();
  s->polls = 0;
}

void tpl__stall_start(struct tpl__stall *s, double timeout) {
  s->timeout = timeout;
  tpl__stall_progress(s);
}

double tpl__stall_quiet_for(const struct tpl__stall *s) {
  return tpl__now() - s->last;
}

/* The n-th growing sleep of a quiet spell: 0.1 ms doubling up to 1 ms. */
static long sleep_ns(unsigned n) {
  long ns = FIRST_SLEEP_NS;
  for (unsigned i = 0; i < n && ns < MAX_SLEEP_NS; i++)
    ns *= 2;
  return ns < MAX_SLEEP_NS ? ns : MAX_SLEEP_NS;
}

int tpl__stall_idle(struct tpl__stall *s) {
  struct timespec ts = {0, 0};
  double quiet = tpl__stall_quiet_for(s);
  if (s->timeout > 0 && quiet >= s->timeout) return 1;
  ts.tv_nsec = sleep_ns(s->polls);
  if (quiet >= SHORT_SECONDS && s->polls < UINT32_MAX) s->polls++;
  nanosleep(&ts, NULL);
  return 0;
}

/* Whether the environment variable `name` is `rank` in decimal. */
static int test_rank_is(const char *name, uint32_t rank) {
  const char *v = getenv(name);
  char mine[16];
  snprintf(mine, sizeof(mine), "%u", rank);
  return v != NULL && strcmp(v, mine) == 0;
}

void tpl__stall_test_stop(const char *point, uint32_t rank) {
  const char *at = getenv("TPLOAD_TEST_SIGSTOP_AT");
  if (strcmp(at != NULL ? at : "deliver", point) == 0 &&
      test_rank_is("TPLOAD_TEST_SIGSTOP_RANK", rank))
    raise(SIGSTOP);
}

void tpl__stall_test_pause(const char *point, uint32_t rank) {
  const char *at = getenv("TPLOAD_TEST_PAUSE_AT");
  const char *who = getenv("TPLOAD_TEST_PAUSE_RANK");
  if (at == NULL || strcmp(at, point) != 0) return;
  if (who == NULL || (strcmp(who, "all") != 0 &&
                      !test_rank_is("TPLOAD_TEST_PAUSE_RANK", rank)))
    return;
  for (;;)
    pause();
}

/* Whether a test asked this rank to be slow at `point` ("beat" when
 * TPLOAD_TEST_SLOW_AT is unset). */
static int slow_here(const char *point, uint32_t rank) {
  const char *at = getenv("TPLOAD_TEST_SLOW_AT");
  return strcmp(at != NULL ? at : "beat", point) == 0 &&
         test_rank_is("TPLOAD_TEST_SLOW_RANK", rank);
}

static void slow_sleep(void) {
  struct timespec ts = {0, 50000000L};
  nanosleep(&ts, NULL);
}

void tpl__stall_test_slow(uint32_t rank) {
  static int slow = -1; /* asked once: it is called on every beat */
  if (slow < 0) slow = slow_here("beat", rank);
  if (slow) slow_sleep();
}

void tpl__stall_test_slow_at(const char *point, uint32_t rank) {
  if (slow_here(point, rank)) slow_sleep();
}
