/* serve.c - `tpload serve`'s sequence after the load into a memfd store
 * (store.h): seal the store, agree, share rank 0's job id, then run this
 * rank's daemon (daemon.c) on the loaded generation with the job's
 * coordination (coord.h) until a shutdown.  Before the load it checks
 * where the sockets go, so a bad directory fails before any byte
 * moves. */
#include <stdlib.h>

#include "daemon.h"
#include "job.h"
#include "ready.h"
#include "serve.h"
#include "store.h"
#include "trust.h"

/* Every rank checks the socket directory as its own node sees it; rank 0
 * also claims the ready file. */
static int serve_check(void *ctx, uint32_t rank, struct tpl__error *err) {
  const struct tpl__serve_opts *o = ctx;
  char *dir = NULL;
  int rc = tpl__daemon_prepare_dir(o->socket_dir, &dir, err);
  free(dir);
  if (rc == 0 && rank == 0 && o->ready_file)
    rc = tpl__ready_claim(o->ready_file, err);
  return rc;
}

/* Seals the store and gives every rank rank 0's job id (agreed). */
static int seal_and_name(const struct tpl__loaded *l,
                         const struct tpl__coord *c, char *job_id, size_t len,
                         struct tpl__error *err) {
  int rc = tpl__store_seal(l->store, err);
  if (rc == 0 && c->rank == 0 && (rc = tpl__new_job_id(job_id)) != 0)
    tpl__fail(err, rc, "cannot draw a job id: %s", tpl_strerror(rc));
  rc = c->agree(c->ctx, rc, err);
  if (rc == 0) rc = c->share(c->ctx, job_id, len, err);
  return rc;
}

static int serve_run(void *ctx, const struct tpl__loaded *l,
                     const struct tpl__coord *c, struct tpl__error *err) {
  const struct tpl__serve_opts *o = ctx;
  char job_id[TPL_JOB_ID_LEN + 1] = "";
  struct tpl__daemon_config cfg = {.socket_dir = o->socket_dir,
                                   .ready_file = o->ready_file,
                                   .rank = c->rank,
                                   .world = c->world,
                                   .loaded = l,
                                   .job_id = job_id,
                                   .source = o->model,
                                   .log_level = o->log_level,
                                   .coord = c,
                                   .reserve_health = 1};
  int rc = seal_and_name(l, c, job_id, sizeof(job_id), err);
  return rc != 0 ? rc : tpl__daemon_run(&cfg, err);
}

struct tpl__sink tpl__serve_sink(const struct tpl__serve_opts *o) {
  struct tpl__sink s = {.check = serve_check,
                        .run = serve_run,
                        .store_kind = TPL_STORE_MEMFD,
                        .ctx = (void *)o};
  return s;
}
