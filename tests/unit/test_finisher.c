/* test_finisher.c - rank 0's finisher (finisher.c) and where helper
 * threads run (affinity.c).  The finisher must run every item once, in
 * order, never before the caller released it, stop at the first failed
 * step with that step's message, and run on every CPU of the rank's NUMA
 * node even when the caller is bound to one CPU, leaving the caller's own
 * binding alone. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "affinity.h"
#include "finisher.h"
#include "tap.h"

#define ITEMS 2000

struct record {
  atomic_size_t published; /* what the test released so far */
  size_t order[ITEMS];
  atomic_size_t ran;
  int early;     /* an item ran before it was released */
  int fail_at;   /* the step of this item fails, -1 never */
  int wide_cpus; /* CPUs the step's thread may run on */
};

static int record_step(void *ctx, size_t i, struct tpl__error *err) {
  struct record *r = ctx;
  cpu_set_t set;
  if (i >= atomic_load(&r->published)) r->early = 1;
  if (atomic_load(&r->ran) < ITEMS) r->order[atomic_load(&r->ran)] = i;
  atomic_fetch_add(&r->ran, 1);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    r->wide_cpus = CPU_COUNT(&set);
  if ((int)i == r->fail_at)
    return tpl__fail(err, -EIO, "item %zu: no bytes", i);
  return 0;
}

static void release(struct tpl__finisher *f, struct record *r, size_t below) {
  if (below > atomic_load(&r->published)) atomic_store(&r->published, below);
  tpl__finisher_release(f, below);
}

static void test_every_item_in_order_after_release(void) {
  static struct record r;
  struct tpl__finisher f;
  struct tpl__error err = {0};
  memset(&r, 0, sizeof(r));
  r.fail_at = -1;
  tpl__finisher_start(&f, ITEMS, record_step, &r);
  /* Lock-step: each release is run before the next, so a thread that
   * ran ahead of its releases would run an item early at once. */
  for (size_t below = 1; below < ITEMS; below += 1 + below % 13) {
    release(&f, &r, below);
    release(&f, &r, below / 2); /* going back changes nothing */
    while (atomic_load(&r.ran) < below)
      sched_yield();
  }
  atomic_store(&r.published, ITEMS); /* join releases the rest */
  CHECK_EQ_INT(tpl__finisher_join(&f, &err), 0);
  CHECK_EQ_U64(atomic_load(&r.ran), ITEMS);
  CHECK_EQ_INT(r.early, 0);
  for (size_t k = 0; k < ITEMS; k++)
    if (r.order[k] != k) {
      CHECK_EQ_U64(r.order[k], k);
      break;
    }
}

static void test_failed_step_stops_and_reports(void) {
  static struct record r;
  struct tpl__finisher f;
  struct tpl__error err = {0};
  memset(&r, 0, sizeof(r));
  r.fail_at = 41;
  atomic_store(&r.published, ITEMS);
  tpl__finisher_start(&f, ITEMS, record_step, &r);
  release(&f, &r, 100);
  CHECK_EQ_INT(tpl__finisher_join(&f, &err), -EIO);
  CHECK_STR_CONTAINS(err.msg, "item 41: no bytes");
  CHECK_EQ_U64(atomic_load(&r.ran), 42);
}

static void test_no_items(void) {
  static struct record r;
  struct tpl__finisher f;
  memset(&r, 0, sizeof(r));
  r.fail_at = -1;
  tpl__finisher_start(&f, 0, record_step, &r);
  CHECK_EQ_INT(tpl__finisher_join(&f, NULL), 0);
  CHECK_EQ_U64(atomic_load(&r.ran), 0);
}

/* NUMA nodes the kernel reports (0 when it reports none). */
static int node_count(void) {
  DIR *d = opendir("/sys/devices/system/node");
  struct dirent *de;
  int n = 0;
  if (d == NULL) return 0;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, "node", 4) == 0 && de->d_name[4] >= '0' &&
        de->d_name[4] <= '9')
      n++;
  closedir(d);
  return n;
}

/* A caller bound to CPU 0, as mpirun binds a rank: on a one-node machine
 * the finisher's thread may run on every CPU this test may (the machine's,
 * or its container's), and the caller is
 * still bound to CPU 0 afterwards. */
static void test_thread_widened_to_node_caller_not(void) {
  static struct record r;
  struct tpl__finisher f;
  cpu_set_t one, before, after;
  if (node_count() > 1) {
    printf("# skipped: %d NUMA nodes\n", node_count());
    return;
  }
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  memset(&r, 0, sizeof(r));
  r.fail_at = -1;
  atomic_store(&r.published, 1);
  tpl__finisher_start(&f, 1, record_step, &r);
  CHECK_EQ_INT(tpl__finisher_join(&f, NULL), 0);
  CHECK_EQ_INT(r.wide_cpus, CPU_COUNT(&before));
  REQUIRE(sched_getaffinity(0, sizeof(after), &after) == 0);
  CHECK_EQ_INT(CPU_COUNT(&after), 1);
  CHECK(CPU_ISSET(0, &after));
  sched_setaffinity(0, sizeof(before), &before);
}

/* Widening the calling thread itself: CPU 0 alone becomes its node. */
static void test_widen_from_one_cpu(void) {
  cpu_set_t before, one, after;
  if (node_count() > 1) return;
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  tpl__thread_widen_to_node();
  REQUIRE(sched_getaffinity(0, sizeof(after), &after) == 0);
  CHECK_EQ_INT(CPU_COUNT(&after), CPU_COUNT(&before));
  sched_setaffinity(0, sizeof(before), &before);
}

int main(void) {
  RUN(test_every_item_in_order_after_release);
  RUN(test_failed_step_stops_and_reports);
  RUN(test_no_items);
  RUN(test_thread_widened_to_node_caller_not);
  RUN(test_widen_from_one_cpu);
  return tap_done();
}
