/* daemon.h - `tpload serve`'s per-rank server: a libuv loop on
 * DIR/rank{R}.sock answering health, status, manifest, attach and shutdown
 * (DESIGN.md section 5).  It never calls MPI: the engine passes callbacks
 * for the job-wide steps. */
#ifndef TPL_DAEMON_H
#define TPL_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "store.h"

struct tpl__daemon_config {
  const char *socket_dir;     /* created 0700 if missing */
  const char *ready_file;     /* may be NULL; rank 0 writes it atomically */
  uint32_t rank, world;
  const struct tpl__store *store;     /* sealed */
  const uint8_t *status;      /* packed tpload.LoadReport (rank 0), or NULL */
  size_t status_len;
  /* Job coordination, implemented by the engine over MPI: */
  /* Returns once every rank has its socket listening (collective). */
  int (*barrier)(void *ctx);
  /* Non-blocking: 1 when the job was asked to shut down, else 0. */
  int (*poll_shutdown)(void *ctx);
  /* Rank 0 only: tells every other rank to shut down. */
  void (*request_shutdown)(void *ctx);
  void *ctx;
};

/* Serves until a shutdown request (rank 0), a job-wide shutdown
 * (poll_shutdown) or SIGTERM/SIGINT; then closes every connection,
 * unlinks its socket (and rank 0 the ready file) and returns 0, or a
 * negative code when it could not start (err says why). */
int tpl__daemon_run(const struct tpl__daemon_config *cfg,
                    struct tpl_error *err);

#endif
