/* engine_reload.c - the coordination a sink asks of the job (coord.h)
 * and the sink's run: agreements, sharing, shutdown, serve's watch over
 * its ranks (DESIGN.md section 6, "A lost node"), and serve's reloads,
 * each of which loads the next generation into an engine of its own
 * (DESIGN.md section 5.1). */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "engine_internal.h"
#include "store.h"
#include "wire.h"

/* --- the coordination sinks use (coord.h) --- */

/* A sink's waits are under --stall-timeout too: its steps between them
 * are short, but for its long local one (preshard's write), which beats
 * and ends in coord_agree_after_beats. */
static int coord_agree(void *ctx, int rc, struct tpl__error *err) {
  return tpl__eng_agree(ctx, rc, err);
}

static int coord_share(void *ctx, void *buf, size_t len,
                       struct tpl__error *err) {
  return tpl__eng_bcast_bytes(ctx, buf, len, err);
}

static void coord_beats_begin(void *ctx) {
  tpl__eng_beats_begin(ctx);
}

static void coord_beat(void *ctx) {
  tpl__eng_beat(ctx);
}

static int coord_agree_after_beats(void *ctx, int rc, struct tpl__error *err) {
  return tpl__eng_agree_after_beats(ctx, rc, err);
}

static int coord_gather(void *ctx, const void *mine, size_t len, void *all,
                        struct tpl__error *err) {
  struct engine *e = ctx;
  MPI_Request req;
  int rc;
  if (len > INT_MAX)
    return tpl__fail(err, TPL_ELIMIT, "gathering %zu bytes per rank", len);
  rc = tpl__eng_mpi_check(MPI_Igather(mine, (int)len, MPI_BYTE, all, (int)len,
                                      MPI_BYTE, 0, MPI_COMM_WORLD, &req),
                          "gathering the sink's results", err);
  return rc != 0
             ? rc
             : tpl__eng_wait_to_0(e, &req, "gathering the sink's results", err);
}

/* Rank 0 tells everyone; another rank asks rank 0 to tell everyone. */
static int coord_request_shutdown(void *ctx) {
  struct engine *e = ctx;
  struct tpl__error *err = NULL;
  int one = 1;
  if (e->shutdown_sent) return 0;
  e->shutdown_sent = 1;
  if (e->rank != 0)
    return tpl__eng_mpi_check(
        MPI_Send(&one, 1, MPI_INT, 0, TAG_SHUTDOWN, MPI_COMM_WORLD), "send",
        err);
  for (uint32_t r = 1; r < e->world; r++)
    if (tpl__eng_mpi_check(
            MPI_Send(&one, 1, MPI_INT, (int)r, TAG_SHUTDOWN, MPI_COMM_WORLD),
            "send", err) != 0)
      return TPL_EPEER;
  return 0;
}

/* Whether the message this rank listens for (shutdown_arm) has come;
 * rank 0, having taken a request, tells everyone. */
static int coord_poll_shutdown(void *ctx) {
  struct engine *e = ctx;
  struct tpl__error *err = NULL;
  int flag = 0;
  if (e->shutdown_flag) return 1;
  if (tpl__eng_mpi_check(MPI_Test(&e->shutdown_req, &flag, MPI_STATUS_IGNORE),
                         "test", err) != 0)
    return TPL_EPEER;
  if (flag && e->rank == 0 && coord_request_shutdown(e) != 0) return TPL_EPEER;
  e->shutdown_flag = flag;
  return flag;
}

/* --- serve's reload (coord.h) --- */

/* Ranks > 0 listen for rank 0's word that a reload starts. */
static int reload_arm(struct engine *e, struct tpl__error *err) {
  if (e->rank == 0) return 0;
  if (tpl__eng_mpi_check(MPI_Irecv(&e->reload_value, 1, MPI_INT, 0, TAG_RELOAD,
                                   MPI_COMM_WORLD, &e->reload_req_mpi),
                         "receive", err) != 0)
    return TPL_EPEER;
  return 0;
}

static int coord_poll_reload(void *ctx) {
  struct engine *e = ctx;
  struct tpl__error *err = NULL;
  int flag = 0;
  if (e->rank == 0 || e->reload_req_mpi == MPI_REQUEST_NULL) return 0;
  if (tpl__eng_mpi_check(MPI_Test(&e->reload_req_mpi, &flag, MPI_STATUS_IGNORE),
                         "test", err) != 0)
    return TPL_EPEER;
  return flag;
}

/* Rank 0 tells every rank a reload starts and gives them its model,
 * plan and whether to check md5sums; the others listen for the next one.  Then
 * every rank has the reload's options in e->reload_o.  Agreed. */
static int reload_request(struct engine *e, const char *model, const char *plan,
                          int verify_md5, struct tpl__error *err) {
  const size_t len = sizeof(e->reload_req[0]);
  int one = 1, rc = 0, mrc, md5 = verify_md5 != 0;
  if (plan == NULL) plan = e->plan_arg;
  if (e->rank == 0 && (strlen(model) >= len || strlen(plan) >= len))
    rc = tpl__fail(err, TPL_EUSAGE, "reload: a path of more than %zu bytes",
                   len - 1);
  if (e->rank == 0) {
    snprintf(e->reload_req[0], len, "%s", rc == 0 ? model : "");
    snprintf(e->reload_req[1], len, "%s", rc == 0 ? plan : "");
  }
  for (uint32_t r = 1; e->rank == 0 && r < e->world; r++)
    if (tpl__eng_mpi_check(
            MPI_Send(&one, 1, MPI_INT, (int)r, TAG_RELOAD, MPI_COMM_WORLD),
            "send", err) != 0)
      return TPL_EPEER;
  mrc = reload_arm(e, err);
  if (mrc == 0)
    mrc = tpl__eng_bcast_bytes(e, (uint8_t *)e->reload_req,
                               sizeof(e->reload_req), err);
  if (mrc == 0) mrc = tpl__eng_bcast_from_0(e, &md5, 1, MPI_INT, err);
  if (mrc != 0) return mrc;
  e->reload_o = *e->o;
  e->reload_o.verify_md5 = e->o->verify_md5 || md5;
  e->reload_o.model = e->reload_req[0];
  e->reload_o.plan = e->reload_req[1];
  memset(&e->reload_o.steps, 0, sizeof(e->reload_o.steps));
  e->reload_o.steps.store_kind = TPL_STORE_MEMFD;
  return tpl__eng_agree(e, rc, err);
}

/* A new engine for the next generation, on the reload's options. */
static struct engine *generation_new(const struct engine *e,
                                     const struct tpl__reload_hooks *hooks) {
  struct engine *n = calloc(1, sizeof(*n));
  if (n == NULL) return NULL;
  n->hooks = hooks;
  n->o = &e->reload_o;
  n->rank = e->rank;
  n->world = e->world;
  n->store.fd = -1;
  n->chunk = e->chunk;
  n->shutdown_req = n->reload_req_mpi = MPI_REQUEST_NULL;
  n->plan_owned = strdup(e->reload_o.plan);
  n->plan_arg = n->plan_owned;
  if (n->plan_owned == NULL) {
    free(n);
    return NULL;
  }
  return n;
}

/* A failed reload's one message on every rank: the lowest rank that has
 * one tells the others. */
static int share_message(struct engine *e, int rc, struct tpl__error *err) {
  int mine = err->msg[0] != '\0' ? (int)e->rank : INT_MAX, teller = INT_MAX;
  MPI_Request req;
  int mrc;
  if (tpl__eng_mpi_check(MPI_Iallreduce(&mine, &teller, 1, MPI_INT, MPI_MIN,
                                        MPI_COMM_WORLD, &req),
                         "agreement", err) != 0)
    return TPL_EPEER;
  mrc = tpl__eng_wait_collective(e, &req, -1, "agreement", err);
  if (mrc == 0 && teller != INT_MAX) {
    if (tpl__eng_mpi_check(MPI_Ibcast(err->msg, (int)sizeof(err->msg), MPI_CHAR,
                                      teller, MPI_COMM_WORLD, &req),
                           "broadcast", err) != 0)
      return TPL_EPEER;
    mrc = tpl__eng_wait_collective(e, &req, teller, "broadcast", err);
  }
  err->code = mrc != 0 ? mrc : rc;
  return err->code;
}

/* The agreed switch: n is served from now on, the generation it
 * replaces waits for coord_retire. */
static void switch_to(struct engine *e, struct engine *n) {
  if (e->gen == NULL)
    e->old_is_self = 1;
  else
    e->old = e->gen;
  e->gen = n;
  e->plan_arg = n->plan_arg; /* the next reload's default */
}

/* The generation in e as the sink sees it: one record, e's, valid while
 * e is. */
static const struct tpl__loaded *loaded_of(struct engine *e) {
  e->loaded = (struct tpl__loaded){
      e->job,      &e->store,    e->report,        e->report_len,
      e->plan_arg, e->job_table, e->job_table_len, e->fingerprint};
  return &e->loaded;
}

/* A reload held every rank's loop, and the ranks leave it at different
 * times (rank 0 rewrites the ready file, a rank frees the old store):
 * every rank's silence starts over when it ends, not when a gap is
 * long enough to notice. */
static void watch_restart(struct engine *e) {
  double now = tpl__now();
  if (!e->watching) return;
  for (uint32_t r = 0; r < e->world; r++)
    e->beats.heard[r] = now;
  e->watch_last = now;
}

static int coord_reload(void *ctx, const char *model, const char *plan,
                        int verify_md5, const struct tpl__reload_hooks *hooks,
                        const struct tpl__loaded **next,
                        struct tpl__error *err) {
  struct engine *e = ctx, *n = NULL;
  int rc = reload_request(e, model, plan, verify_md5, err);
  if (rc == 0) {
    n = generation_new(e, hooks);
    rc = tpl__eng_agree(
        e,
        n != NULL ? 0
                  : tpl__fail(err, -ENOMEM, "rank %u: out of memory", e->rank),
        err);
  }
  if (rc == 0) rc = tpl__eng_load(n, 1, err);
  if (rc == 0) rc = tpl__eng_agree(e, tpl__store_seal(&n->store, err), err);
  if (rc == 0) {
    *next = loaded_of(n);
    rc = tpl__eng_agree(e, hooks->ready(hooks->ctx, *next, err), err);
  }
  watch_restart(e);
  if (rc != 0) {
    tpl__eng_generation_free(n);
    return share_message(e, rc, err);
  }
  switch_to(e, n);
  return 0;
}

static void coord_retire(void *ctx) {
  struct engine *e = ctx;
  if (e->old_is_self) {
    tpl__store_free(&e->store);
    tpl__job_free(e->job);
    free(e->report);
    free(e->job_table);
    e->job = NULL;
    e->report = NULL;
    e->job_table = NULL;
    e->old_is_self = 0;
  }
  tpl__eng_generation_free(e->old);
  e->old = NULL;
}

/* While the sink runs, rank 0 listens for any rank's request to shut
 * down, another rank for rank 0's shutdown message. */
static int shutdown_arm(struct engine *e, struct tpl__error *err) {
  int from = e->rank == 0 ? MPI_ANY_SOURCE : 0;
  if (tpl__eng_mpi_check(MPI_Irecv(&e->shutdown_value, 1, MPI_INT, from,
                                   TAG_SHUTDOWN, MPI_COMM_WORLD,
                                   &e->shutdown_req),
                         "receive", err) != 0)
    return TPL_EPEER;
  return reload_arm(e, err);
}

/* Leaves no shutdown message unmatched at MPI_Finalize: every rank
 * withdraws its pending receive; rank 0 takes every request still queued
 * (several ranks may have asked). */
static int shutdown_disarm(struct engine *e, struct tpl__error *err) {
  MPI_Status st;
  int flag = 1;
  MPI_Request *reqs[] = {&e->shutdown_req, &e->reload_req_mpi};
  for (size_t i = 0; i < ARRAY_SIZE(reqs); i++)
    if (*reqs[i] != MPI_REQUEST_NULL) {
      if (tpl__eng_mpi_check(MPI_Cancel(reqs[i]), "cancel", err) != 0)
        return TPL_EPEER;
      if (tpl__eng_mpi_check(MPI_Wait(reqs[i], MPI_STATUS_IGNORE), "wait",
                             err) != 0)
        return TPL_EPEER;
    }
  while (e->rank == 0 && flag) {
    if (tpl__eng_mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, TAG_SHUTDOWN,
                                      MPI_COMM_WORLD, &flag, &st),
                           "probe", err) != 0)
      return TPL_EPEER;
    if (flag)
      if (tpl__eng_mpi_check(MPI_Recv(&e->shutdown_value, 1, MPI_INT,
                                      st.MPI_SOURCE, TAG_SHUTDOWN,
                                      MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                             "receive", err) != 0)
        return TPL_EPEER;
  }
  return 0;
}

/* --- serve's watch (coord.h) --- */

/* Heartbeats (beat.h) while the ranks serve, one every --stall-timeout
 * / 4: a rank not heard from for --stall-timeout is lost. */
static void coord_watch_begin(void *ctx) {
  struct engine *e = ctx;
  if (e->o->stall_timeout <= 0) return;
  tpl__eng_beats_begin(e);
  e->beats.every = e->o->stall_timeout / 4;
  e->watching = 1;
  e->watch_last = tpl__now();
}

/* The loop looks every 100 ms; when it was away for half the deadline
 * (a reload held it, on every rank), every rank's silence starts over. */
static int coord_watch(void *ctx) {
  struct engine *e = ctx;
  double now = tpl__now(), limit = e->o->stall_timeout;
  int heard = 0;
  if (!e->watching) return -1;
  if (now - e->watch_last > e->beats.every) e->watch_back = now;
  if (now - e->watch_last > limit / 2) watch_restart(e);
  e->watch_last = now;
  tpl__eng_beat(e);
  if (tpl__beats_hear(&e->beats, &heard) != MPI_SUCCESS) return -1;
  for (uint32_t r = 0; r < e->world; r++)
    if (r != e->rank && !e->beats.done[r] && now - e->beats.heard[r] > limit)
      return (int)r;
  return -1;
}

static const char *host_of(const struct engine *e, uint32_t rank) {
  return e->hosts != NULL ? e->hosts + (size_t)rank * sizeof(e->st.host) : "?";
}

/* A rank whose last beat is more than two beat intervals old is silent
 * (serve's beats come every --stall-timeout / 4: half the deadline).
 * After this rank's own pause (stopped, descheduled) its silences count
 * from its return: the beats that came meanwhile may not all be taken
 * at the first look. */
static size_t coord_silent(void *ctx, struct tpl__wire_silent *out, size_t cap,
                           double *deadline) {
  struct engine *e = ctx;
  double now = tpl__now();
  /* a pause since the loop's look (this rank stopped inside its poll)
   * is a return too */
  double back = now - e->watch_last > e->beats.every ? now : e->watch_back;
  size_t n = 0;
  *deadline = e->watching ? e->o->stall_timeout : 0;
  for (uint32_t r = 0; e->watching && r < e->world; r++) {
    double last = e->beats.heard[r] > back ? e->beats.heard[r] : back;
    double quiet = now - last;
    if (r == e->rank || e->beats.done[r] || quiet <= 2 * e->beats.every)
      continue;
    if (n < cap) out[n] = (struct tpl__wire_silent){r, host_of(e, r), quiet};
    n++;
  }
  return n;
}

/* Ends the job for a lost rank, naming it and its host. */
static void coord_lost(void *ctx, int rank) {
  struct engine *e = ctx;
  fprintf(stderr,
          "tpload: rank %u: no word from rank %d (%s) for %.0f s while "
          "serving: rank %d is lost (its node, its link, or it stopped); "
          "ending the job (--stall-timeout)\n",
          e->rank, rank, host_of(e, (uint32_t)rank),
          tpl__now() - e->beats.heard[rank], rank);
  tpl__eng_abort(tpl_exit_code(TPL_EPEER));
}

static void coord_on_abort(void *ctx, void (*fn)(void *), void *arg) {
  (void)ctx;
  tpl__eng_on_abort(fn, arg);
}

/* The last meeting before MPI_Finalize: under the watch's beats when it
 * ran (a rank that went quiet is named), else a plain agreement.  A
 * watch the sink's failure left open (today only an MPI error in
 * shutdown_disarm, after the watch began) is dropped: the beats already
 * here are taken, none is waited for, as the others may still beat. */
static int last_meeting(struct engine *e, int rc, struct tpl__error *err) {
  int watched = e->watching;
  e->watching = 0;
  if (rc == 0)
    return watched ? tpl__eng_agree_after_beats(e, 0, err)
                   : tpl__eng_agree(e, 0, err);
  if (watched) tpl__beats_drop(&e->beats);
  return rc;
}

/* The sink's own sequence, with the job's coordination; a failure to
 * stop listening after a good run is the job's failure too. */
int tpl__eng_run_sink(struct engine *e, struct tpl__error *err) {
  const struct tpl__sink *s = &e->o->steps;
  struct tpl__coord c = {.rank = e->rank,
                         .world = e->world,
                         .agree = coord_agree,
                         .share = coord_share,
                         .poll_shutdown = coord_poll_shutdown,
                         .request_shutdown = coord_request_shutdown,
                         .beats_begin = coord_beats_begin,
                         .beat = coord_beat,
                         .agree_after_beats = coord_agree_after_beats,
                         .gather = coord_gather,
                         .ctx = e,
                         .poll_reload = coord_poll_reload,
                         .reload = coord_reload,
                         .retire = coord_retire,
                         .watch_begin = coord_watch_begin,
                         .watch = coord_watch,
                         .lost = coord_lost,
                         .silent = coord_silent,
                         .on_abort = coord_on_abort};
  int rc, end;
  if (s->run == NULL) return 0;
  rc = tpl__eng_agree(e, shutdown_arm(e, err), err);
  if (rc == 0) rc = s->run(s->ctx, loaded_of(e), &c, err);
  end = shutdown_disarm(e, rc == 0 ? err : NULL);
  /* Every rank meets once more, under the deadline, before MPI_Finalize
   * (which waits for every rank, with none): a rank stopped while
   * serving ends the job naming it instead of holding the others there
   * after --shutdown.  A failed sink has agreed on its code already. */
  end = last_meeting(e, rc != 0 ? rc : end, err);
  return rc != 0 ? rc : end;
}
