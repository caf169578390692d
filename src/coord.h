/* coord.h - the seam between the load and what follows it.  A sink (load's
 * own finish, preshard and its --layout mlc, serve) runs its steps itself
 * and asks the other ranks for what it needs through struct tpl__coord,
 * which the engine implements over MPI: sinks never see MPI, the engine
 * never sees what a sink does with the bytes.  struct tpl__loaded is what
 * the load hands the sink (one record per generation, the engine's,
 * passed by pointer); struct tpl__sink is a sink's steps and the kind of
 * store it wants, declared by the command that picks it (cmd_load.c). */
#ifndef TPL_COORD_H
#define TPL_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "store.h"

struct tpl__job;
struct tpl__loaded;
struct tpl__model;
struct tpl__wire_silent;

/* What a sink hears during a reload (tpl__coord.reload), on the engine's
 * thread. */
struct tpl__reload_hooks {
  /* Optional: once the new model is validated, this rank's new store's
   * size (before the memory check). */
  void (*sized)(void *ctx, uint64_t store_bytes);
  /* Once this rank's new store is complete, checksummed and sealed: the
   * sink builds what it will serve from it; 0 or a negative code. */
  int (*ready)(void *ctx, const struct tpl__loaded *next,
               struct tpl__error *err);
  void *ctx;
};

/* The job-wide steps, for one rank of `world`. */
struct tpl__coord {
  uint32_t rank, world;
  /* Collective: every rank passes its own result (0 or a negative code)
   * and gets the job's worst; `err` keeps its message only on the lowest
   * rank that failed with that code, so a failure is told once. */
  int (*agree)(void *ctx, int rc, struct tpl__error *err);
  /* Collective: rank 0's `len` bytes at `buf` land in every rank's buf. */
  int (*share)(void *ctx, void *buf, size_t len, struct tpl__error *err);
  /* Non-blocking: 1 when the job was asked to shut down, 0 when not, a
   * negative code when the other ranks cannot be reached (stop too). */
  int (*poll_shutdown)(void *ctx);
  /* Ends the job, once per rank: rank 0 tells every other rank; another
   * rank asks rank 0 to (it then stops when poll_shutdown says so).
   * Returns 0 or a negative code. */
  int (*request_shutdown)(void *ctx);
  /* Optional (NULL: none), around a sink's long local step (preshard's
   * write): `beats_begin` on every rank before it, `beat` now and then
   * during it (cheap: it sends only when a beat is due), and
   * `agree_after_beats` instead of `agree` after it: a rank that finished
   * waits for the others under --stall-timeout, which their beats move,
   * so a rank that stops or hangs in the step is named and ends the job
   * (beat.h). */
  void (*beats_begin)(void *ctx);
  void (*beat)(void *ctx);
  int (*agree_after_beats)(void *ctx, int rc, struct tpl__error *err);
  /* Optional (NULL: none), serve's watch over ranks that only serve (no
   * MPI traffic otherwise, so nothing else would notice a lost node):
   * `watch_begin` on every rank once all serve; `watch` now and then from
   * the loop (non-blocking: beats the others when one is due, takes
   * theirs) returns a rank not heard from for --stall-timeout, or -1;
   * `lost` then ends the whole job naming that rank and never returns.
   * With --stall-timeout 0 there is no watch (watch returns -1). */
  void (*watch_begin)(void *ctx);
  int (*watch)(void *ctx);
  void (*lost)(void *ctx, int rank);
  /* Optional (NULL: none), with watch, from the same thread: the ranks
   * not heard from for more than two beat intervals (half the deadline:
   * lost at the deadline unless they beat again), by rank, the first
   * `cap` of them in `out` (wire.h; each host the engine's, valid while
   * the sink runs); returns how many there are.  *deadline is
   * --stall-timeout, or 0 with no watch (and none is silent). */
  size_t (*silent)(void *ctx, struct tpl__wire_silent *out, size_t cap,
                   double *deadline);
  /* Optional (NULL: none): `fn(arg)` runs, on whichever thread, just
   * before this rank ends the whole job (a lost rank, in any step, a
   * reload's included), so the sink removes what it published; NULL
   * `fn` forgets it. */
  void (*on_abort)(void *ctx, void (*fn)(void *arg), void *arg);
  /* Collective: every rank's `len` bytes at `mine` land on rank 0, rank
   * r's at all + r * len (`all`, world x len bytes, is read on rank 0
   * only).  Optional (NULL: none). */
  int (*gather)(void *ctx, const void *mine, size_t len, void *all,
                struct tpl__error *err);
  void *ctx;
  /* Optional (NULL: none), serve's reload of a new version.
   * poll_reload, on ranks other than 0 (non-blocking): 1 when rank 0 has
   * started a reload, which this rank must then join by calling reload;
   * 0 when not; a negative code when the ranks cannot be reached. */
  int (*poll_reload)(void *ctx);
  /* Collective, on the thread that runs the engine: loads `model` with
   * `plan` (rank 0's arguments; NULL plan: the current generation's; the
   * other ranks pass NULL) as the next generation with the job's grid and
   * options, exactly as the first load (same checks, read path, stall
   * deadline and report), after every rank checked it has the memory for
   * a second store.  The hooks' `ready` runs on every rank once its new
   * store is complete, checksummed and sealed; its code is agreed on, and
   * only then do all ranks switch.
   * On success *next points to the new generation (the engine's record,
   * valid until the retire after the next reload) and the previous one
   * stays valid until retire.  On failure the previous one is still the
   * current, nothing of the new one is left, and every rank's err holds
   * the one message of the rank that saw the failure.  `verify_md5`
   * (rank 0's): check the MLC files' md5sums first, as --verify-md5
   * does (a job started with --verify-md5 checks every reload's). */
  int (*reload)(void *ctx, const char *model, const char *plan, int verify_md5,
                const struct tpl__reload_hooks *hooks,
                const struct tpl__loaded **next, struct tpl__error *err);
  /* Frees the generation the last successful reload replaced.  The sink
   * calls it once that generation's store has no export left (store.h)
   * and before it calls reload again. */
  void (*retire)(void *ctx);
};

/* What every rank holds once a generation is loaded: the engine's, valid
 * while the sink runs (a reload's: until it is retired). */
struct tpl__loaded {
  const struct tpl__job *job;
  struct tpl__store *store;
  const uint8_t *report; /* rank 0: the packed tpload.LoadReport */
  size_t report_len;
  const char *plan;         /* the --plan argument it was loaded with */
  const uint8_t *job_table; /* rank 0: the packed tpload.JobTable it
                               broadcast, which `report` indexes */
  size_t job_table_len;
  /* Every rank: the job's fingerprint (tpl__shardinfo_fingerprint of the
   * report), or NULL / "" when none was made (a sink driven by hand). */
  const char *fingerprint;
};

/* A sink's steps; any may be NULL.  Each returns 0 or a negative code. */
struct tpl__sink {
  /* Rank 0, once the model and plan are valid, before the job is shared:
   * refuses an unusable output before any other rank starts, and reads
   * what it needs of model m while m is open (through its origin). */
  int (*prepare)(void *ctx, const struct tpl__model *m, struct tpl__error *err);
  /* Every rank (its own node's view), before any byte moves; agreed. */
  int (*check)(void *ctx, uint32_t rank, struct tpl__error *err);
  /* Every rank, after the load and its report: the sink's whole sequence,
   * its agreements included.  Returns the job's code (agreed). */
  int (*run)(void *ctx, const struct tpl__loaded *l,
             const struct tpl__coord *coord, struct tpl__error *err);
  /* Where the load puts the bytes (store.h): TPL_STORE_PRIVATE (0, the
   * default) or TPL_STORE_MEMFD (huge pages per the load's `huge`
   * option), for the sink to seal and export. */
  enum tpl__store_kind store_kind;
  void *ctx;
};

#endif
