/* stall.h - the progress deadline of the MPI commands (--stall-timeout):
 * a waiter that polls for completion asks this module what to do while
 * nothing completes.  It backs off (sleeps 0.1 ms, growing to 1 ms)
 * instead of spinning, and says when nothing has progressed for the
 * timeout.  No MPI here: the engine polls its requests and calls in. */
#ifndef TPL_STALL_H
#define TPL_STALL_H

#include <stdint.h>

#define TPL_STALL_DEFAULT_S 300 /* --stall-timeout default, seconds */

struct tpl__stall {
  double timeout; /* seconds without progress that end the job; 0 never */
  double last;    /* monotonic time of the last progress */
  unsigned polls; /* growing sleeps since then */
};

/* Starts a wait: progress "now", no idle polls yet. */
void tpl__stall_start(struct tpl__stall *s, double timeout);

/* Something completed: the deadline moves and the backoff restarts. */
void tpl__stall_progress(struct tpl__stall *s);

/* Nothing completed on this poll.  Returns 1 when the deadline has
 * passed (the caller ends the job), else sleeps a little (0.1 ms during
 * the first 10 ms without progress, then doubling up to 1 ms) and
 * returns 0. */
int tpl__stall_idle(struct tpl__stall *s);

/* Seconds since the last progress. */
double tpl__stall_quiet_for(const struct tpl__stall *s);

/* For tests only: stops this process with SIGSTOP when the environment
 * variable TPLOAD_TEST_SIGSTOP_RANK is `rank` in decimal and
 * TPLOAD_TEST_SIGSTOP_AT is `point` ("deliver" when unset): a stuck rank,
 * made on purpose at a known point.  Does nothing otherwise.  Points:
 * "validate" (every rank, before rank 0 validates), "deliver" (a
 * receiver before it receives; with --read local, every rank with its
 * files validated and its source open, before it reads), "report" (every rank,
 * after the delivery, before the reports are gathered), "write" (preshard,
 * every rank before it writes its file), "reload" (serve, every rank once a
 * reload's model is validated, before its memory check and any byte),
 * "reload-stream" (serve, every rank of a reload's --read mpi stream,
 * before it sends or receives: the others are in the stream). */
void tpl__stall_test_stop(const char *point, uint32_t rank);

/* For tests only: waits for a signal, forever (a rank paused mid-step,
 * for a test to signal), when TPLOAD_TEST_PAUSE_AT is `point` and
 * TPLOAD_TEST_PAUSE_RANK is `rank` in decimal or "all".  Does nothing
 * otherwise.  Points: "written" (preshard, once the rank file has its
 * header, before its tensors). */
void tpl__stall_test_pause(const char *point, uint32_t rank);

/* For tests only: sleeps 50 ms when TPLOAD_TEST_SLOW_RANK is `rank` (a
 * rank that reads or writes slowly but keeps going; called on every beat,
 * the environment is read once) and TPLOAD_TEST_SLOW_AT is unset or
 * "beat". */
void tpl__stall_test_slow(uint32_t rank);

/* The same at `point` instead of every beat, when TPLOAD_TEST_SLOW_AT is
 * `point`.  Points: "finish-shared" (--read local from a URL, each
 * tensor finished after the node's hand-over). */
void tpl__stall_test_slow_at(const char *point, uint32_t rank);

#endif
