/* beat.h - heartbeats during a long local step: `--read local`'s
 * reading (and from a URL the node's hand-over and the finishing after
 * it), preshard's writing, rank 0's reads on the default path and
 * any rank's wait on its own sends or receive (a receiver counts rank
 * 0's beats as progress while it waits for its next message, so a slow
 * but steady reader, or one waiting on a lost node, is not taken for a
 * stopped one).
 * In a local step no byte crosses MPI, so a rank that
 * finished sees nothing of the others until the agreement after the step.
 * Each rank therefore tells every other rank, now and then, that it is
 * still going (a beat), and once that it is done.  A rank that finished
 * waits for the agreement under the stall deadline (stall.h), which the
 * others' beats move: when for --stall-timeout no beat came from a rank
 * still in the step, that rank stopped or hangs, and the waiter ends the
 * job.  Cost: world - 1 tiny messages per rank and beat (at most one a
 * second): 4,032 a second across a 64-rank job, taken only at the end of
 * the step. */
#ifndef TPL_BEAT_H
#define TPL_BEAT_H

#include <stdint.h>

struct tpl__beats {
  uint32_t rank, world;
  double every;  /* seconds between this rank's beats */
  double last;   /* when this rank last beat */
  double *heard; /* per rank: when its last beat (or done) arrived */
  uint8_t *done; /* per rank: it said it finished the step */
};

/* Starts heartbeats for a stall deadline of `timeout` seconds (0: none):
 * a beat every timeout / 4 seconds, at most every second.  Returns 0 or
 * -ENOMEM. */
int tpl__beats_open(struct tpl__beats *b, uint32_t rank, uint32_t world,
                    double timeout);

/* Beats when one is due.  Returns 0 or an MPI error code. */
int tpl__beats_tick(struct tpl__beats *b);

/* Tells every other rank this one finished the step (its last beat). */
int tpl__beats_done(struct tpl__beats *b);

/* Takes the beats that arrived; *heard is set when any did. */
int tpl__beats_hear(struct tpl__beats *b, int *heard);

/* The rank to name when the wait stalls: of the others still in the step,
 * the one heard from longest ago (any other rank when all said done). */
int tpl__beats_quietest(const struct tpl__beats *b);

/* After the agreement (every rank has sent its done): takes every beat
 * still on its way, so none is left for later receives, and frees. */
int tpl__beats_close(struct tpl__beats *b);

/* Without an agreement (a step that failed while the others may still
 * beat): takes the beats that arrived, waits for none, and frees.
 * Returns 0 or an MPI error code (freed either way). */
int tpl__beats_drop(struct tpl__beats *b);

#endif
