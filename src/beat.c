/* beat.c - heartbeats between the ranks during a long local step (see
 * beat.h).  A beat is a one-int message on MPI_COMM_WORLD with its own
 * tag: BEAT_GOING during the step, BEAT_DONE once.  Messages from one rank
 * with one tag arrive in the order sent, so after a rank's done nothing
 * of it is left to take. */
#include <errno.h>
#include <mpi.h>
#include <stdlib.h>

#include "beat.h"
#include "common.h"

enum { TAG_BEAT = 3 }; /* engine.c's tags are 1 and 2 */
static const int BEAT_GOING = 0, BEAT_DONE = 1;

#define MAX_EVERY_S 1.0

int tpl__beats_open(struct tpl__beats *b, uint32_t rank, uint32_t world,
                    double timeout) {
  double now = tpl__now();
  b->rank = rank;
  b->world = world;
  b->every =
      timeout > 0 && timeout / 4 < MAX_EVERY_S ? timeout / 4 : MAX_EVERY_S;
  b->last = now;
  b->heard = malloc(world * sizeof(*b->heard));
  b->done = calloc(world, sizeof(*b->done));
  if (b->heard == NULL || b->done == NULL) {
    free(b->heard);
    free(b->done);
    return -ENOMEM;
  }
  for (uint32_t r = 0; r < world; r++)
    b->heard[r] = now;
  b->done[rank] = 1;
  return 0;
}

/* One beat to every other rank; the sends complete on their own. */
static int beat_all(const struct tpl__beats *b, const int *what) {
  for (uint32_t r = 0; r < b->world; r++) {
    MPI_Request req;
    int mrc;
    if (r == b->rank) continue;
    mrc = MPI_Isend(what, 1, MPI_INT, (int)r, TAG_BEAT, MPI_COMM_WORLD, &req);
    if (mrc == MPI_SUCCESS) mrc = MPI_Request_free(&req);
    if (mrc != MPI_SUCCESS) return mrc;
  }
  return 0;
}

int tpl__beats_tick(struct tpl__beats *b) {
  double now = tpl__now();
  if (now - b->last < b->every) return 0;
  b->last = now;
  return beat_all(b, &BEAT_GOING);
}

int tpl__beats_done(struct tpl__beats *b) {
  return beat_all(b, &BEAT_DONE);
}

/* Takes one beat known to be there (status from a probe). */
static int take(struct tpl__beats *b, const MPI_Status *status) {
  int what = BEAT_GOING;
  int src = status->MPI_SOURCE;
  int mrc = MPI_Recv(&what, 1, MPI_INT, src, TAG_BEAT, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
  b->heard[src] = tpl__now();
  if (what == BEAT_DONE) b->done[src] = 1;
  return mrc;
}

int tpl__beats_hear(struct tpl__beats *b, int *heard) {
  *heard = 0;
  for (;;) {
    MPI_Status status;
    int flag = 0;
    int mrc =
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_BEAT, MPI_COMM_WORLD, &flag, &status);
    if (mrc != MPI_SUCCESS || !flag) return mrc;
    mrc = take(b, &status);
    if (mrc != MPI_SUCCESS) return mrc;
    *heard = 1;
  }
}

int tpl__beats_quietest(const struct tpl__beats *b) {
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; pass++)
    for (uint32_t r = 0; r < b->world; r++)
      if (r != b->rank && (pass == 1 || !b->done[r]) &&
          (best < 0 || b->heard[r] < b->heard[best]))
        best = (int)r;
  return best;
}

int tpl__beats_drop(struct tpl__beats *b) {
  int heard, mrc = b->heard != NULL ? tpl__beats_hear(b, &heard) : MPI_SUCCESS;
  free(b->heard);
  free(b->done);
  b->heard = NULL;
  b->done = NULL;
  return mrc;
}

int tpl__beats_close(struct tpl__beats *b) {
  int mrc = MPI_SUCCESS;
  for (uint32_t r = 0; mrc == MPI_SUCCESS && r < b->world; r++) {
    while (mrc == MPI_SUCCESS && !b->done[r]) {
      MPI_Status status;
      mrc = MPI_Probe((int)r, TAG_BEAT, MPI_COMM_WORLD, &status);
      if (mrc == MPI_SUCCESS) mrc = take(b, &status);
    }
  }
  free(b->heard);
  free(b->done);
  b->heard = NULL;
  b->done = NULL;
  return mrc;
}
