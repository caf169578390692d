/* engine_core.c - what every part of the engine shares: MPI's results,
 * rank 0's verdict and the job table, waits under --stall-timeout,
 * agreements, the chains of holders, heartbeats and finishing a
 * tensor (DESIGN.md sections 4.1 and 6). */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "checkpoint.h"
#include "engine_internal.h"
#include "job.h"
#include "mlc_cut.h"
#include "mlc_md5.h"
#include "origin.h"
#include "planner.h"
#include "stall.h"
#include "topology.h"

/* The one way MPI results are handled: 0 for MPI_SUCCESS, else TPL_EPEER
 * (exit 69) with MPI's own words for `what` in err (may be NULL). */
int tpl__eng_mpi_check(int mrc, const char *what, struct tpl__error *err) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (mrc == MPI_SUCCESS) return 0;
  if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
    len = snprintf(s, sizeof(s), "error %d", mrc);
  return tpl__fail(err, TPL_EPEER, "MPI %s failed: %.*s", what, len, s);
}

/* What the sink asked to run before this rank ends the job (coord.h's
 * on_abort): one per process, since an abort ends the process. */
static void (*abort_fn)(void *);
static void *abort_arg;

void tpl__eng_on_abort(void (*fn)(void *), void *arg) {
  abort_fn = fn;
  abort_arg = arg;
}

/* Aborts the whole job with exit code `code` (after printing); never
 * returns. */
void tpl__eng_abort(int code) {
  if (abort_fn != NULL) abort_fn(abort_arg);
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code); /* MPI could not end the job: this rank ends at least */
}

/* --- verdict and job table --- */

static int validate(struct engine *e, struct tpl__error *err) {
  const struct tpl__load_opts *o = e->o;
  struct tpl__grid grid = {0};
  uint32_t pp = o->pp ? o->pp : 1;
  uint32_t tp = o->tp ? o->tp : tpl__grid_default_tp(e->world, pp);
  int rc = tpl__grid_make(e->world, tp, pp, err, &grid);
  if (rc == 0) rc = tpl__grid_set_ep(&grid, o->ep, o->ep_size, err);
  if (rc == 0) rc = tpl__model_open_with(o->model, &o->http, 0, &e->model, err);
  if (rc == 0) rc = tpl__mlc_cut_model(e->model, o->plan, err);
  if (rc == 0 && o->read_mode == TPL_READ_LOCAL &&
      tpl__model_origin(e->model)->no_read_local != NULL)
    rc = tpl__fail(err, TPL_EUSAGE, "%s: %s", o->model,
                   tpl__model_origin(e->model)->no_read_local);
  if (rc == 0 && o->skip_mtp) rc = tpl__plan_skip_mtp(e->model, err);
  if (rc == 0 && o->verify_md5)
    rc = tpl__mlc_md5_ready(e->model,
                            e->model->shown ? e->model->shown : o->model, err);
  if (rc == 0)
    rc = tpl__job_plan(o->plan, e->model, o->model, &grid, o->bias_family,
                       &e->plan, &e->job, err);
  if (rc == 0 && o->steps.prepare != NULL)
    rc = o->steps.prepare(o->steps.ctx, e->model, err);
  return rc;
}

/* --- waiting with a progress deadline (stall.c) --- */

/* Nothing moved for --stall-timeout: say who this rank was waiting for
 * (`peer`, or -1 for any of the others at collective step `what`) and end
 * the whole job (the peer may never answer a collective). */
void tpl__eng_stall_abort(const struct engine *e, int peer, const char *what,
                          const struct tpl__stall *st) {
  if (peer >= 0)
    fprintf(stderr,
            "tpload: rank %u: no progress for %.0f s waiting for rank %d: "
            "rank %d stopped or hangs; ending the job (--stall-timeout)\n",
            e->rank, tpl__stall_quiet_for(st), peer, peer);
  else
    fprintf(stderr,
            "tpload: rank %u: no progress for %.0f s waiting for the other "
            "ranks (%s): one of them stopped or hangs; ending the job "
            "(--stall-timeout)\n",
            e->rank, tpl__stall_quiet_for(st), what);
  tpl__eng_abort(tpl_exit_code(TPL_EPEER));
}

/* Waits for a nonblocking collective, polling like tpl__eng_wait_reqs, for at
 * most --stall-timeout without completion.  `peer`: the rank it waits
 * for (the root of a broadcast), or -1; `what` names the step.  With
 * `beats` (after a step that beat, beat.h) every beat that arrives moves
 * the deadline, and a stall names the rank heard from longest ago. */
static int wait_hearing(const struct engine *e, MPI_Request *req, int peer,
                        struct tpl__beats *beats, const char *what,
                        struct tpl__error *err) {
  struct tpl__stall st;
  int done = 0;
  if (peer < 0 && e->world == 2) peer = (int)(1 - e->rank); /* the other */
  tpl__stall_start(&st, e->o->stall_timeout);
  for (;;) {
    int heard = 0;
    if (tpl__eng_mpi_check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what,
                           err) != 0)
      return TPL_EPEER;
    if (done) return 0;
    if (beats != NULL && tpl__eng_mpi_check(tpl__beats_hear(beats, &heard),
                                            "heartbeat", err) != 0)
      return TPL_EPEER;
    if (heard)
      tpl__stall_progress(&st);
    else if (tpl__stall_idle(&st))
      tpl__eng_stall_abort(e, beats ? tpl__beats_quietest(beats) : peer, what,
                           &st);
  }
}

int tpl__eng_wait_collective(const struct engine *e, MPI_Request *req, int peer,
                             const char *what, struct tpl__error *err) {
  return wait_hearing(e, req, peer, NULL, what, err);
}

/* A heartbeat when one is due (once the step's beats are open); an MPI
 * failure ends the job.  A rank waiting on its own sends or receive
 * beats too: it is alive, so a rank waiting for it (rank 0's receivers
 * hear its beats as progress) waits on while it names the rank it
 * waits for, instead of blaming it for another's fault (a node cut
 * off behind rank 0). */
static void beat_alive(struct engine *e) {
  int mrc = e->beats.heard != NULL ? tpl__beats_tick(&e->beats) : MPI_SUCCESS;
  if (mrc != MPI_SUCCESS) {
    struct tpl__error err;
    tpl__eng_mpi_check(mrc, "heartbeat", &err);
    fprintf(stderr, "tpload: rank %u: %s\n", e->rank, err.msg);
    tpl__eng_abort(tpl_exit_code(TPL_EPEER));
  }
}

/* Polls `n` requests in order until all completed, backing off while
 * the oldest pending one does not complete.  Testing only the oldest
 * keeps a wait on a million requests linear (any MPI_Test drives all of
 * them), and when it stalls, its peer is the one to name: after
 * --stall-timeout without progress the job ends.  Meanwhile the source's
 * reads in flight move on (a remote source's only when driven). */
int tpl__eng_wait_reqs(struct engine *e, struct pending *reqs, size_t n,
                       struct tpl__error *err) {
  struct tpl__stall st;
  size_t first = 0;
  tpl__stall_start(&st, e->o->stall_timeout);
  while (first < n) {
    int done = 0;
    if (tpl__eng_mpi_check(MPI_Test(&reqs[first].req, &done, MPI_STATUS_IGNORE),
                           "wait", err) != 0)
      return TPL_EPEER;
    if (done) {
      first++;
      tpl__stall_progress(&st);
    } else if (tpl__stall_idle(&st)) {
      tpl__eng_stall_abort(e, reqs[first].peer, "wait", &st);
    } else {
      beat_alive(e); /* those waiting for this rank wait on */
      if (e->src != NULL)
        tpl__source_pump(e->src); /* rank 0's next chunks meanwhile */
    }
  }
  return 0;
}

struct pending *tpl__eng_pending_next(struct pending **reqs, size_t n,
                                      size_t *cap) {
  if (n == *cap) {
    size_t more = *cap ? *cap * 2 : 256;
    struct pending *r = realloc(*reqs, more * sizeof(*r));
    if (r == NULL) return NULL;
    *reqs = r;
    *cap = more;
  }
  return &(*reqs)[n];
}

/* Rank 0's `count` items at buf to every rank, waiting for rank 0 under
 * --stall-timeout (tpl__eng_wait_collective). */
int tpl__eng_bcast_from_0(const struct engine *e, void *buf, int count,
                          MPI_Datatype type, struct tpl__error *err) {
  MPI_Request req;
  if (tpl__eng_mpi_check(MPI_Ibcast(buf, count, type, 0, MPI_COMM_WORLD, &req),
                         "broadcast", err) != 0)
    return TPL_EPEER;
  return tpl__eng_wait_collective(e, &req, 0, "broadcast", err);
}

/* Broadcasts `n` bytes at buf (allocated by every rank) in int-sized
 * parts. */
int tpl__eng_bcast_bytes(const struct engine *e, uint8_t *buf, uint64_t n,
                         struct tpl__error *err) {
  for (uint64_t off = 0; off < n;) {
    int part = (int)(n - off > INT_MAX ? INT_MAX : n - off);
    int rc = tpl__eng_bcast_from_0(e, buf + off, part, MPI_BYTE, err);
    if (rc != 0) return rc;
    off += (uint64_t)part;
  }
  return 0;
}

/* Every rank's local result in, the worst one out (codes are negative).
 * Only the lowest rank that failed with that code keeps its message, so a
 * failure is told once, by the rank that saw it. */
struct verdict {
  int code, rank;
};

static int agreed(const struct engine *e, struct verdict worst,
                  struct tpl__error *err) {
  if (worst.code != 0 && worst.rank != (int)e->rank) {
    err->code = worst.code;
    err->msg[0] = '\0';
  }
  return worst.code;
}

/* Every rank's verdict in, the worst in *worst, waiting for the others
 * under --stall-timeout (wait_hearing, moved by `beats` when not NULL). */
static int reduce_verdicts(const struct engine *e, int rc,
                           struct tpl__beats *beats, struct verdict *worst,
                           struct tpl__error *err) {
  struct verdict mine = {rc, (int)e->rank};
  MPI_Request req;
  /* An MPI failure here is this rank's to tell. */
  if (tpl__eng_mpi_check(MPI_Iallreduce(&mine, worst, 1, MPI_2INT, MPI_MINLOC,
                                        MPI_COMM_WORLD, &req),
                         "agreement", err) != 0)
    return TPL_EPEER;
  return wait_hearing(e, &req, -1, beats, "agreement", err);
}

/* Every rank's verdict in (reduce_verdicts), the worst returned. */
static int agree_over(const struct engine *e, int rc, struct tpl__beats *beats,
                      struct tpl__error *err) {
  struct verdict worst;
  rc = reduce_verdicts(e, rc, beats, &worst, err);
  return rc != 0 ? rc : agreed(e, worst, err);
}

/* The agreement, waiting for the others under --stall-timeout: every
 * step before one is short, but for the long local ones that beat
 * (tpl__eng_agree_after_beats). */
int tpl__eng_agree(const struct engine *e, int rc, struct tpl__error *err) {
  return agree_over(e, rc, NULL, err);
}

/* tpl__eng_agree() inside a step that beats, which goes on after it: no
 * second step of beats may follow the first at once, since a rank still
 * hearing the first's could take the second's last beat for its own. */
int tpl__eng_agree_hearing(struct engine *e, int rc, struct tpl__error *err) {
  return agree_over(e, rc, &e->beats, err);
}

/* tpl__eng_agree() after a step that beat (--read local's reading, preshard's
 * write): a rank that finished waits for the others under the stall
 * deadline, which their heartbeats move (beat.h); when a rank still in
 * the step went quiet for --stall-timeout, the job ends naming it. */
int tpl__eng_agree_after_beats(struct engine *e, int rc,
                               struct tpl__error *err) {
  struct verdict worst;
  if (tpl__eng_mpi_check(tpl__beats_done(&e->beats), "heartbeat", err) != 0)
    return TPL_EPEER;
  rc = reduce_verdicts(e, rc, &e->beats, &worst, err);
  if (rc != 0) return rc;
  if (tpl__eng_mpi_check(tpl__beats_close(&e->beats), "heartbeat", err) != 0)
    return TPL_EPEER;
  return agreed(e, worst, err);
}

/* This process's node, named by its first rank (tpl__eng_find_node). */
static uint32_t node_first;

/* MPI's own grouping: the ranks that share memory with this one, which
 * host names cannot tell (containers on two machines may share a host
 * name).  The node's first rank is its rank 0, since the key keeps the
 * world's order. */
int tpl__eng_find_node(uint32_t rank, struct tpl__error *err) {
  MPI_Comm node;
  MPI_Group in_node, in_world;
  int zero = 0, first = (int)rank, rc;
  rc = tpl__eng_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD,
                                              MPI_COMM_TYPE_SHARED, (int)rank,
                                              MPI_INFO_NULL, &node),
                          "finding this rank's node", err);
  if (rc != 0) return rc;
  MPI_Comm_group(node, &in_node);
  MPI_Comm_group(MPI_COMM_WORLD, &in_world);
  rc = tpl__eng_mpi_check(
      MPI_Group_translate_ranks(in_node, 1, &zero, in_world, &first),
      "finding this node's first rank", err);
  MPI_Group_free(&in_node);
  MPI_Group_free(&in_world);
  MPI_Comm_free(&node);
  if (rc == 0) node_first = (uint32_t)first;
  return rc;
}

/* Every rank's host name into e->hosts (the report's bytes per node
 * count what crosses a host's link: e->remote). */
static int gather_hosts(struct engine *e, struct tpl__error *err) {
  const size_t len = sizeof(e->st.host);
  MPI_Request req;
  int rc;
  memset(e->st.host, 0, len);
  gethostname(e->st.host, len - 1);
  rc = tpl__eng_mpi_check(MPI_Iallgather(e->st.host, (int)len, MPI_CHAR,
                                         e->hosts, (int)len, MPI_CHAR,
                                         MPI_COMM_WORLD, &req),
                          "sharing the host names", err);
  if (rc == 0)
    rc = tpl__eng_wait_collective(e, &req, -1, "sharing the host names", err);
  for (uint32_t r = 0; rc == 0 && r < e->world; r++)
    e->remote[r] = strncmp(e->hosts + r * len, e->st.host, len) != 0;
  return rc;
}

/* Every rank's node into e->chains, then the chains' orders from them. */
static int gather_nodes(struct engine *e, struct tpl__error *err) {
  uint32_t w = e->world, *c = e->chains;
  MPI_Request req;
  int rc =
      tpl__eng_mpi_check(MPI_Iallgather(&node_first, 1, MPI_UINT32_T, c, 1,
                                        MPI_UINT32_T, MPI_COMM_WORLD, &req),
                         "sharing the nodes", err);
  if (rc == 0)
    rc = tpl__eng_wait_collective(e, &req, -1, "sharing the nodes", err);
  if (rc == 0) rc = tpl__node_order(c, w, 1, c + w, c + 3 * w);
  if (rc == 0)
    rc = tpl__node_order(c, w, e->job->grid.tp, c + 2 * w, c + 4 * w);
  if (rc == -EINVAL)
    rc = tpl__fail(err, TPL_EINTERNAL, "MPI gave nodes without first ranks");
  return rc;
}

int tpl__eng_map_hosts(struct engine *e, struct tpl__error *err) {
  int rc;
  free(e->hosts);
  e->hosts = calloc(e->world, sizeof(e->st.host));
  free(e->remote);
  e->remote = calloc(e->world + 1, 1);
  free(e->chains);
  e->chains = calloc(5 * (size_t)e->world, sizeof(*e->chains));
  free(e->mates);
  e->mates = calloc(e->world, sizeof(*e->mates));
  rc = e->hosts != NULL && e->remote != NULL && e->chains != NULL &&
               e->mates != NULL
           ? 0
           : tpl__oom(err);
  rc = tpl__eng_agree(e, rc, err);
  if (rc == 0) rc = gather_hosts(e, err);
  if (rc == 0) rc = gather_nodes(e, err);
  return rc;
}

/* Rank 0's verdict with the job table's size, then the table: every rank
 * returns the same code, and only rank 0 has a message for a refused job.
 * Each rank then lays out its store: the tensors of its stage. */
int tpl__eng_share_job(struct engine *e, struct tpl__error *err) {
  /* the verdict, the table's size, rank 0's --read (the job's) and
   * whether auto asks the page caches (tpl__eng_auto_asks) */
  int64_t head[4] = {0, 0, e->o->read_mode, 0};
  uint8_t *buf = NULL;
  size_t len = 0;
  int code = 0, mrc;
  tpl__stall_test_stop("validate", e->rank);
  if (e->rank == 0) code = validate(e, err);
  if (code == 0 && e->rank == 0 && tpl__job_pack(e->job, &buf, &len) != 0)
    code = tpl__fail(err, -ENOMEM, "cannot encode the job table");
  head[0] = code;
  head[1] = (int64_t)len;
  head[3] = code == 0 && e->rank == 0 && tpl__eng_auto_asks(e);
  mrc = tpl__eng_bcast_from_0(e, head, 4, MPI_INT64_T, err);
  e->read_mode = (int)head[2];
  e->read_asks = (int)head[3];
  if (mrc != 0 || head[0] != 0) {
    if (mrc == 0 && e->rank != 0) err->msg[0] = '\0';
    free(buf);
    return mrc != 0 ? mrc : (int)head[0];
  }
  /* From here every rank takes every collective step, failed or not. */
  len = (size_t)head[1];
  if (e->rank != 0 && (buf = malloc(len + 1)) == NULL)
    code = tpl__fail(err, -ENOMEM, "no memory for the job table");
  code = tpl__eng_agree(e, code, err);
  if (code == 0)
    code = tpl__eng_agree(e, tpl__eng_bcast_bytes(e, buf, len, err), err);
  if (code == 0 && e->rank != 0) code = tpl__job_unpack(buf, len, &e->job, err);
  if (code == 0 && e->rank == 0) { /* kept: status serves it */
    e->job_table = buf;
    e->job_table_len = len;
  } else {
    free(buf);
  }
  if (code == 0) code = tpl__job_place(e->job, e->rank, err);
  return tpl__eng_agree(e, code, err);
}

/* --- chains: who gets which bytes from whom --- */

/* The holders of one shard t of tensor i are the ranks (d, p, t) with p
 * among its stages; a tensor that is not cut has one "shard" every holder
 * gets.  They form a chain in node order (tpl__node_order: node by node,
 * rank 0's first, the ranks of a node consecutive): rank 0 sends each
 * byte once, to the first holder other than itself, and each holder
 * forwards what it receives to the next one as soon as it has it, from
 * its own store (what a broadcast is for on a network).  A byte so enters
 * a node once, whatever the placement, and is forwarded inside it; with
 * ranks placed in blocks node order is rank order, and with T = world and
 * P = 1 a replicated tensor goes 0 -> 1 -> 2 -> ...
 *
 * No deadlock: every chain runs from lower to higher places in the one
 * node order, every rank walks the tensors it holds in job order (rank 0
 * sends them in that order), and every send is non-blocking.  A rank
 * waits only for bytes from a rank placed before it, which that rank has
 * sent or forwards as soon as it has them itself, and the ranks that wait
 * on a rank's sends (forwarders' requests, rank 0's slots) are placed
 * after it and receive in the same order; by induction on (tensor, place)
 * every wait ends. */

/* Ranks of one chain are this many apart in the numbering: the shards of
 * a cut tensor repeat every T ranks; any holder may follow any other in
 * the chain of a tensor that is not cut. */
uint32_t tpl__eng_chain_step(const struct engine *e, size_t i) {
  return e->job->tensors[i].kind == TPL_RULE_SHARD ? e->job->grid.tp : 1;
}

/* The ranks of tensor i's chains in node order (e->chains), chain t at
 * t * *len, each chain *len long. */
static const uint32_t *chain_ranks(const struct engine *e, size_t i,
                                   uint32_t *len) {
  uint32_t step = tpl__eng_chain_step(e, i);
  *len = e->world / step;
  return e->chains + (step != 1 ? 2 : 1) * (size_t)e->world;
}

/* Rank r's place in its chain of tensor i. */
static uint32_t place_of(const struct engine *e, size_t i, uint32_t r) {
  uint32_t step = tpl__eng_chain_step(e, i);
  return e->chains[(step != 1 ? 4 : 3) * (size_t)e->world + r];
}

/* The first holder of tensor i at or after place k of chain t, other
 * than rank 0; -1 when there is none. */
static int holder_at(const struct engine *e, size_t i, uint32_t t, uint32_t k) {
  uint32_t len;
  const uint32_t *ranks = chain_ranks(e, i, &len);
  if (t >= tpl__eng_chain_step(e, i)) return -1;
  for (; k < len; k++) {
    uint32_t r = ranks[t * len + k];
    if (r > 0 && tpl__job_holds(e->job, i, r)) return (int)r;
  }
  return -1;
}

int tpl__eng_chain_head(const struct engine *e, size_t i, uint32_t t) {
  return holder_at(e, i, t, 0);
}

uint32_t tpl__eng_node_holders(const struct engine *e, size_t i,
                               uint32_t *out) {
  uint32_t len, k = place_of(e, i, e->rank), n = 0;
  const uint32_t *node = e->chains, *ranks = chain_ranks(e, i, &len);
  ranks += (e->rank % tpl__eng_chain_step(e, i)) * len;
  while (k > 0 && node[ranks[k - 1]] == node[e->rank])
    k--;
  for (; k < len && node[ranks[k]] == node[e->rank]; k++)
    if (tpl__job_holds(e->job, i, ranks[k])) out[n++] = ranks[k];
  return n;
}

/* Where holder `r` (> 0) of tensor i gets it from: the previous holder in
 * its chain, or rank 0. */
int tpl__eng_predecessor(const struct engine *e, size_t i, uint32_t r) {
  uint32_t len, k = place_of(e, i, r), t = r % tpl__eng_chain_step(e, i);
  const uint32_t *ranks = chain_ranks(e, i, &len);
  while (k-- > 0) {
    uint32_t p = ranks[t * len + k];
    if (p > 0 && tpl__job_holds(e->job, i, p)) return (int)p;
  }
  return 0;
}

/* Where this rank forwards tensor i (which it holds), or -1. */
int tpl__eng_successor(const struct engine *e, size_t i) {
  uint32_t t = e->rank % tpl__eng_chain_step(e, i);
  return holder_at(e, i, t, place_of(e, i, e->rank) + 1);
}

/* --- every rank: decode, scale, checksum --- */

/* Decodes and scales tensor i in place, then hashes it (each its own
 * phase). */
int tpl__eng_finish_tensor(struct engine *e, size_t i, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  uint8_t *p = e->store.base + t->store_offset;
  double t0 = tpl__now(), t2;
  int rc = tpl__job_finish_bytes(
      e->job, i, tpl__grid_coord(&e->job->grid, e->rank).t, p, err);
  t2 = tpl__now();
  e->st.t_scale += t2 - t0;
  if (rc != 0) return rc;
  e->store.xxh3[i] = XXH3_64bits(p, (size_t)t->rank_bytes);
  e->st.t_hash += tpl__now() - t2;
  return 0;
}

/* Rank 0's finisher step (finisher.h): rank 0 hands it each of its
 * tensors as the tensor's last bytes land in its store
 * (tpl__eng_deliver_chunk), so decoding, scaling and hashing them runs beside
 * reading and sending, on a neighbouring core where the launcher bound rank 0
 * to one, instead of in a pass after the sends. */
int tpl__eng_finish_own(void *ctx, size_t i, struct tpl__error *err) {
  struct engine *e = ctx;
  return tpl__job_holds(e->job, i, e->rank) ? tpl__eng_finish_tensor(e, i, err)
                                            : 0;
}

/* A receiver finishes a tensor as soon as it has it, while its bytes are
 * fresh in cache and rank 0 is still sending, unless it forwards the
 * tensor down the chain: those bytes must stay as received until the
 * forwarding sends complete, so it finishes them here, after. */
int tpl__eng_finish_store(struct engine *e, struct tpl__error *err) {
  if (e->rank == 0) return tpl__finisher_join(&e->finisher, err);
  for (size_t i = 0; i < e->job->ntensors; i++) {
    int rc = tpl__job_holds(e->job, i, e->rank) && tpl__eng_successor(e, i) >= 0
                 ? tpl__eng_finish_tensor(e, i, err)
                 : 0;
    if (rc != 0) return rc;
  }
  return 0;
}

/* Starts this rank's heartbeats (beat.h); every rank does, before a
 * step whose end is tpl__eng_agree_after_beats. */
void tpl__eng_beats_begin(struct engine *e) {
  if (tpl__beats_open(&e->beats, e->rank, e->world, e->o->stall_timeout)) {
    fprintf(stderr, "tpload: rank %u: out of memory\n", e->rank);
    tpl__eng_abort(tpl_exit_code(-ENOMEM)); /* the others wait for beats */
  }
}

/* A heartbeat when one is due; an MPI failure ends the job. */
void tpl__eng_beat(struct engine *e) {
  beat_alive(e);
  tpl__stall_test_slow(e->rank);
}

/* Waits under --stall-timeout for a collective whose root is rank 0
 * (a gather, a reduction): the others wait for rank 0, rank 0 for all. */
int tpl__eng_wait_to_0(const struct engine *e, MPI_Request *req,
                       const char *what, struct tpl__error *err) {
  return tpl__eng_wait_collective(e, req, e->rank == 0 ? -1 : 0, what, err);
}
