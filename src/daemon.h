/* daemon.h - `tpload serve`'s per-rank server: a libuv loop on
 * DIR/rank{R}.sock answering health, status, attach (the store exported,
 * store.h), reload, watch and shutdown, reloading on SIGHUP to rank 0,
 * and rank 0's ready file naming the job id and the generation served
 * (DESIGN.md section 5).  It never calls MPI: the job-wide steps go
 * through the coordination interface (coord.h). */
#ifndef TPL_DAEMON_H
#define TPL_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"
#include "job.h"

struct tpl__daemon_config {
  const char *socket_dir; /* created 0700 if missing */
  const char *ready_file; /* may be NULL; rank 0 writes it atomically */
  uint32_t rank, world;
  /* The first generation served (coord.h): its store sealed, its job the
   * store's tensor table and the model as shown, its report (rank 0, or
   * NULL) what status answers with the job table it indexes. */
  const struct tpl__loaded *loaded;
  const char *job_id; /* the job's random id (every rank the same) */
  const char *source; /* the MODEL argument it came from (a URL with its
                         query, never shown), what a reload without MODEL
                         loads again; NULL: the job's model */
  int log_level;      /* enum tpl__log_level (log.h): 0 is quiet */
  /* The job's coordination (coord.h; implemented by the engine over
   * MPI), or NULL for a one-rank daemon.  agree is called twice by every
   * rank, whatever happened: after listening, and after rank 0 wrote the
   * ready file; poll_shutdown by the loop; request_shutdown once. */
  const struct tpl__coord *coord;
  /* With coord->reload (serve), rank 0 answers RELOAD requests and
   * SIGHUP (the current MODEL path again) by loading the next generation
   * with every rank while the loop goes on answering in a thread; each
   * rank switches once all agreed, and answers WATCH requests when its
   * generation changes. */
  /* Optional limits; 0 picks the default. */
  unsigned timeout_ms; /* each phase of a connection (waiting for a
                          request, receiving it, sending the reply);
                          default 10000 */
  int reserve_health;  /* when set, beyond the 256 open connections
                          (extra ones get a "busy" error and are
                          closed) 32 more that each
                          answer one health request within 1 s and
                          close: health stays answerable while
                          clients hold every slot (tpload serve) */
};

/* Creates the socket directory `dir` (mode 0700) if it is missing and
 * checks it as clients will (trust.c: no symbolic link, owned by this
 * user, private, under directories no other user can change), so that no
 * one else can have prepared it or swap it later.  Stores its resolved
 * path in *resolved (malloc'd, caller frees).  Used before the load, then
 * again by tpl__daemon_run.  Returns 0 or TPL_EOUTPUT. */
int tpl__daemon_prepare_dir(const char *dir, char **resolved,
                            struct tpl__error *err);

/* Serves until a shutdown request (rank 0), a job-wide shutdown
 * (poll_shutdown) or SIGTERM/SIGINT; then closes every connection,
 * unlinks its socket (and rank 0 the ready file) and returns 0, or a
 * negative code when it could not start (err says why).
 *
 * Start-up: creates socket_dir (mode 0700; an existing one must belong to
 * this user and not be group/world accessible), replaces a stale socket
 * left by a dead daemon (a live one is refused), listens, agrees with the
 * other ranks, then rank 0 writes the ready file ({"socket_dir",
 * "world_size", "pid", "job_id", "generation"}, via a temp file and
 * rename; ready.h) and they agree again:
 * a rank that cannot start makes every rank return its code.  coord may
 * be NULL for a one-rank daemon.  Every rank calls request_shutdown once, on a
 * SHUTDOWN request (rank 0) or on SIGTERM/SIGINT, so stopping any rank stops
 * the job; the others stop when poll_shutdown says so.  SIGHUP to rank 0
 * reloads the current MODEL (DESIGN.md section 5.1).  Installs
 * SIGTERM/SIGINT/SIGHUP handlers for the duration of the call and leaves
 * SIGPIPE ignored.  cfg and
 * everything it points to must stay valid until the call returns. */
int tpl__daemon_run(const struct tpl__daemon_config *cfg,
                    struct tpl__error *err);

#endif
