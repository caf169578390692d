/* engine_gen.c - one generation: its store, its delivery, its report
 * (the job's totals, every rank's RankReport into rank 0's LoadReport)
 * and its free (DESIGN.md section 4.1, steps 1-4). */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine_internal.h"
#include "fdcache.h"
#include "job.h"
#include "model.h"
#include "plan.h"
#include "report.h"
#include "stall.h"
#include "store.h"

/* --- the store --- */

static int make_store(struct engine *e, struct tpl__error *err) {
  const struct tpl__job *job = e->job;
  int rc = tpl__store_create(&e->store, e->o->steps.store_kind, job->store_size,
                             job->ntensors, e->o->huge, err);
  /* With --read local every rank reads and copies at once: a thread
   * populating the store beside it only competes for the cores. */
  if (rc == 0 && !e->local) tpl__store_prefault(&e->store);
  return rc;
}

/* --- reports --- */

static void fill_stats(struct engine *e, double t0) {
  struct rusage ru;
  e->st.rank = e->rank;
  e->st.pid = (int)getpid();
  gethostname(e->st.host, sizeof(e->st.host) - 1);
  getrusage(RUSAGE_SELF, &ru);
  e->st.peak_rss = (uint64_t)ru.ru_maxrss * 1024u;
  e->st.cpu_user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
  e->st.cpu_sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  e->st.seconds = tpl__now() - t0;
  e->st.bytes_read = e->bytes_read; /* before job_totals sums it on 0 */
  e->st.gets = e->gets;
}

struct gathered {
  int *counts, *displs;
  uint8_t *all, **parts;
  size_t *lens;
};

static int gathered_alloc(struct gathered *g, uint32_t world) {
  g->counts = calloc(world, sizeof(int));
  g->displs = calloc(world, sizeof(int));
  g->lens = calloc(world, sizeof(size_t));
  g->parts = calloc(world, sizeof(uint8_t *));
  return g->counts && g->displs && g->lens && g->parts ? 0 : -ENOMEM;
}

static void gathered_free(struct gathered *g) {
  free(g->counts);
  free(g->displs);
  free(g->lens);
  free(g->parts);
  free(g->all);
}

/* Rank 0: lays out the reports' places; 0 or -ENOMEM / TPL_ELIMIT. */
static int gathered_layout(struct gathered *g, uint32_t world) {
  long long total = 0;
  for (uint32_t r = 0; r < world; r++) {
    g->displs[r] = (int)total;
    total += g->counts[r];
    if (total > INT_MAX) return TPL_ELIMIT;
  }
  g->all = malloc((size_t)total + 1);
  return g->all ? 0 : -ENOMEM;
}

/* Every rank's packed RankReport goes to rank 0, which assembles the
 * job's LoadReport in e->report. Collective: every rank takes part. */
static int gather_reports(struct engine *e, double seconds,
                          struct tpl__error *err) {
  struct gathered g = {0};
  MPI_Request req;
  uint8_t *mine = NULL;
  size_t len = 0;
  int n = 0, rc;
  rc = tpl__rank_report_pack(e->job, &e->store, &e->st, &mine, &len);
  if (rc == 0 && e->rank == 0) rc = gathered_alloc(&g, e->world);
  if (rc != 0) tpl__fail(err, rc, "cannot build the rank report");
  rc = tpl__eng_agree(e, rc, err);
  n = (int)len;
  if (rc == 0)
    rc = tpl__eng_mpi_check(MPI_Igather(&n, 1, MPI_INT, g.counts, 1, MPI_INT, 0,
                                        MPI_COMM_WORLD, &req),
                            "gathering the report sizes", err);
  if (rc == 0)
    rc = tpl__eng_wait_to_0(e, &req, "gathering the report sizes", err);
  if (rc == 0 && e->rank == 0) rc = gathered_layout(&g, e->world);
  rc = tpl__eng_agree(e, rc, err);
  if (rc == 0)
    rc = tpl__eng_mpi_check(MPI_Igatherv(mine, n, MPI_BYTE, g.all, g.counts,
                                         g.displs, MPI_BYTE, 0, MPI_COMM_WORLD,
                                         &req),
                            "gathering the rank reports", err);
  if (rc == 0)
    rc = tpl__eng_wait_to_0(e, &req, "gathering the rank reports", err);
  for (uint32_t r = 0; rc == 0 && e->rank == 0 && r < e->world; r++) {
    g.parts[r] = g.all + g.displs[r];
    g.lens[r] = (size_t)g.counts[r];
  }
  if (rc == 0 && e->rank == 0)
    rc = tpl__load_report_pack(e->job, g.parts, g.lens, seconds, e->bytes_read,
                               e->md5_names ? &e->md5 : NULL, &e->report,
                               &e->report_len, err);
  free(mine);
  gathered_free(&g);
  return rc;
}

/* --- the whole job --- */

/* Every rank builds its store; a failure there is agreed on and returned,
 * and so is one of rank 0's reads (defer_failure: the stream goes on).
 * Any other failure once bytes move (MPI's, memory) strands the others
 * mid-transfer: the rank says why and ends the whole job. */
static int deliver(struct engine *e, struct tpl__error *err) {
  double t = tpl__now();
  int rc = tpl__eng_agree(e, make_store(e, err), err);
  e->st.t_alloc = tpl__now() - t;
  if (rc != 0) return rc;
  tpl__eng_beats_begin(e);
  if (e->local) {
    rc = tpl__eng_read_local(e, err);
    if (tpl__eng_node_shares(e)) { /* the hand-over is part of the step */
      rc = tpl__eng_agree_hearing(e, rc, err);
      if (rc == 0) rc = tpl__eng_node_share(e, err);
    }
    return tpl__eng_agree_after_beats(e, rc, err);
  }
  if (e->hooks != NULL) /* a reload's: the others are in the stream */
    tpl__stall_test_stop("reload-stream", e->rank);
  if (e->rank == 0)
    tpl__finisher_start(&e->finisher, e->job->ntensors, tpl__eng_finish_own, e);
  rc = e->rank == 0 ? tpl__eng_send_all(e, err) : tpl__eng_receive_all(e, err);
  if (rc != 0) {
    fprintf(stderr, "tpload: rank %u: %s\n", e->rank, err->msg);
    tpl__eng_abort(tpl_exit_code(rc));
  }
  /* This rank's stream is complete: what fails from here is agreed on */
  rc = tpl__eng_finish_store(e, err);
  if (rc == 0 && e->deferred != 0) {
    rc = e->deferred;
    *err = e->deferred_err;
  }
  /* rank 0's beats (as its reads complete) end here */
  return tpl__eng_agree_after_beats(e, rc, err);
}

/* The job's totals on rank 0: its time, the slowest rank's, in *max; and
 * the bytes every rank read from the files (rank 0's alone unless --read
 * local) in e->bytes_read.  Collective. */
static int job_totals(struct engine *e, double mine, double *max,
                      struct tpl__error *err) {
  uint64_t mine_read = e->bytes_read;
  MPI_Request req;
  int rc;
  *max = mine;
  if (tpl__eng_mpi_check(MPI_Ireduce(&mine, max, 1, MPI_DOUBLE, MPI_MAX, 0,
                                     MPI_COMM_WORLD, &req),
                         "reduce", err) != 0)
    return TPL_EPEER;
  rc = tpl__eng_wait_to_0(e, &req, "the job's time", err);
  if (rc != 0) return rc;
  if (tpl__eng_mpi_check(MPI_Ireduce(&mine_read, &e->bytes_read, 1,
                                     MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD,
                                     &req),
                         "reduce", err) != 0)
    return TPL_EPEER;
  return tpl__eng_wait_to_0(e, &req, "the bytes read", err);
}

/* Once every rank holds its shard, rank 0 lets go of the checkpoint: no
 * file of a version served stays open (a model deleted or replaced on
 * disk gives its space back while serving goes on). */
static void release_sources(struct engine *e) {
  free(e->md5_names);
  e->md5_names = NULL;
  tpl__model_free(e->model);
  tpl__plan_free(e->plan);
  e->model = NULL;
  e->plan = NULL;
}

/* Rank 0: the job's fingerprint from its report's checksums. */
static int fingerprint_of(struct engine *e, struct tpl__error *err) {
  struct tpl__report *rep = NULL;
  int rc = tpl__report_decode(e->report, e->report_len, &rep, NULL);
  if (rc == 0 && rep->ntensors != e->job->ntensors) rc = TPL_EPEER;
  if (rc == 0) tpl__shardinfo_fingerprint(e->job, rep->infos, e->fingerprint);
  tpl__report_free(rep);
  if (rc != 0)
    return tpl__fail(err, rc, "the job's fingerprint: %s", tpl_strerror(rc));
  return 0;
}

/* Every rank: rank 0's fingerprint of the job in e->fingerprint (its rank
 * files and shard-info.json record it, a daemon's identity carries it).
 * Collective. */
static int share_fingerprint(struct engine *e, struct tpl__error *err) {
  int rc = tpl__eng_agree(e, e->rank == 0 ? fingerprint_of(e, err) : 0, err);
  if (rc == 0)
    rc = tpl__eng_bcast_bytes(e, (uint8_t *)e->fingerprint,
                              sizeof(e->fingerprint), err);
  return rc;
}

/* One generation's load into e, up to its report: the first (`reload`
 * 0: the sink checks where its output goes) or a reload's (every rank
 * checks it has room for a second store).  Every step ends in an
 * agreement, so the ranks start the clock together. */
int tpl__eng_load(struct engine *e, int reload, struct tpl__error *err) {
  const struct tpl__sink *s = &e->o->steps;
  double t0, seconds;
  int rc = tpl__eng_share_job(e, err);
  if (rc == 0 && e->o->verify_md5) rc = tpl__eng_verify_md5(e, err);
  if (rc == 0 && reload) {
    if (e->hooks->sized != NULL)
      e->hooks->sized(e->hooks->ctx, e->job->store_size);
    tpl__stall_test_stop("reload", e->rank); /* validated, nothing moved */
    rc = tpl__eng_agree(
        e, tpl__store_room(e->job->store_size, e->o->huge, e->rank, err), err);
  } else if (rc == 0 && s->check != NULL)
    rc = tpl__eng_agree(e, s->check(s->ctx, e->rank, err), err);
  if (rc == 0) rc = tpl__eng_agree(e, tpl__eng_map_hosts(e, err), err);
  if (rc == 0) rc = tpl__eng_choose_read(e, err);
  if (rc != 0) return rc;
  t0 = tpl__now();
  rc = deliver(e, err);
  if (rc != 0) return rc;
  fill_stats(e, t0);
  tpl__stall_test_stop("report", e->rank);
  rc = tpl__eng_agree(e, job_totals(e, e->st.seconds, &seconds, err), err);
  if (rc == 0) rc = tpl__eng_agree(e, gather_reports(e, seconds, err), err);
  if (rc == 0) rc = share_fingerprint(e, err);
  if (rc == 0 && e->rank == 0 && e->o->report)
    e->o->report(e->o->ctx, e->report, e->report_len);
  release_sources(e);
  return rc;
}

void tpl__eng_free(struct engine *e) {
  tpl__fdcache_free(e->probed);
  free(e->st.file_io);
  free(e->st.file_align);
  tpl__store_free(&e->store);
  tpl__job_free(e->job);
  release_sources(e);
  free(e->report);
  free(e->remote);
  free(e->hosts);
  free(e->chains);
  free(e->mates);
  free(e->turns);
  free(e->job_table);
  free(e->plan_owned);
  tpl__eng_generation_free(e->gen);
  tpl__eng_generation_free(e->old);
}

void tpl__eng_generation_free(struct engine *n) {
  if (n == NULL) return;
  tpl__eng_free(n);
  free(n);
}
