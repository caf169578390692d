/* engine.c - the distributed load; with beat.c, the only files that
 * include mpi.h (src/guard/mpi).
 *
 * Rank 0 validates the model and plan before anything moves and
 * broadcasts the verdict; on success it broadcasts the job table, from
 * which every rank derives its store layout.  Rank 0 then reads each file
 * sequentially in chunks through a source (source.h: O_DIRECT through
 * io_uring for a cold file, buffered for a cached one), the next chunks'
 * reads in flight while one is delivered (NSLOTS), executes every rank's shard
 * layout over the chunk and sends the bytes with MPI_Isend: a large contiguous
 * part straight from the read buffer, a large strided part packed first, and
 * small parts for the same rank in a row packed together as one message
 * (a batch: many small tensors cost one message, not one each).  A
 * receiver gets its bytes in source order and so only needs byte counts:
 * a message no longer than what the current tensor still needs is that
 * tensor's alone and lands straight in its store; a longer one is a batch
 * and is taken apart from an inbox (see receive_some()).  Messages never
 * exceed the chunk, so MPI's int counts never matter.  On a TP x PP x DP
 * grid a byte several ranks need (a shard every replica holds, a tensor
 * that is not cut) leaves rank 0 once and goes down a chain of its
 * holders (see the chains section); a rank outside a tensor's pipeline
 * stages gets none of it.  What follows the load is the sink's (coord.h):
 * the engine runs its steps and gives it the job-wide coordination over
 * MPI.  Every MPI call's result goes through mpi_check(). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "beat.h"
#include "checkpoint.h"
#include "ckpt_remote.h"
#include "dtype.h"
#include "engine.h"
#include "fileio.h"
#include "finisher.h"
#include "job.h"
#include "local_read.h"
#include "mlc_md5.h"
#include "model.h"
#include "plan.h"
#include "planner.h"
#include "report.h"
#include "source.h"
#include "source_http.h"
#include "stall.h"
#include "store.h"

enum { TAG_DATA = 1, TAG_SHUTDOWN = 2, TAG_RELOAD = 4 }; /* beat.c: 3 */

/* A request in flight and the rank it talks to. */
struct pending {
  MPI_Request req;
  int peer;
};

struct slot {
  uint8_t *read; /* the chunk's read buffer (chunk + the source's slack) */
  uint8_t *data; /* where the chunk's first byte is in it */
  uint8_t *pack;
  struct tpl__read rd; /* the chunk's read while in flight (direct) */
  int reading;         /* the chunk is read (not after a failed read) */
  uint64_t pos, len;   /* the chunk: file bytes [pos, pos + len) */
  struct pending *reqs;
  size_t nreqs, cap;
  uint64_t sent;        /* bytes of every send so far */
  int batch_dest;       /* the rank of the open batch, -1 when none */
  uint64_t batch_start; /* the open batch: pack[start, start + len) */
  uint64_t batch_len;
};

/* Rank 0's window (--chunk-mib) is NSLOTS slots of a read and a pack
 * buffer of one chunk each: while one chunk is delivered the reads of
 * the next NSLOTS - 2 are in flight, and the slot delivered before has
 * time for its sends to complete. */
#define NSLOTS 4

/* Parts up to this size are batched (a copy costs less than a message). */
#define BATCH_PART_MAX (32u << 10)

/* The part of a batch that belongs to later tensors, on a receiver. */
struct inbox {
  uint8_t *buf;
  size_t cap;
  uint64_t pos, len;
};

struct engine {
  const struct tpl__load_opts *o;
  uint32_t rank, world;
  struct tpl__model *model; /* rank 0 */
  struct tpl__plan *plan;   /* rank 0 */
  struct tpl__job *job;
  struct tpl__store store;
  struct tpl__rank_stats st;
  uint64_t bytes_read;
  uint8_t *report; /* rank 0: packed LoadReport */
  size_t report_len;
  uint8_t *job_table; /* rank 0: the packed job table it broadcast */
  size_t job_table_len;
  struct tpl__loaded loaded; /* what the sink is handed (loaded_of) */
  struct slot slots[NSLOTS];
  uint64_t chunk;  /* a slot's buffers hold one */
  uint8_t *window; /* every slot's buffers, window_len bytes */
  uint64_t window_len;
  struct tpl__source *src; /* rank 0's, or every rank's with --read local */
  struct tpl__source_url *urls;  /* a MODEL URL's files, for src */
  int direct;                    /* the file streamed now is read direct */
  struct tpl__finisher finisher; /* rank 0's (finish_own) */
  struct tpl__beats beats;       /* during a long local step (beat.h) */
  MPI_Request shutdown_req;      /* while the sink runs (shutdown_arm) */
  int shutdown_value, shutdown_flag, shutdown_sent;
  int deferred;                   /* a read failed or a file changed during
                                     --read mpi's stream (rank 0), a
                                     tensor could not be finished (a
                                     receiver): told after the stream */
  struct tpl__error deferred_err; /* ... and why */
  int note_told;                  /* rank 0: the source's note is out */
  struct tpl__md5_summary md5;    /* rank 0: --verify-md5's pass */
  const char **md5_names;         /* ... its files' names */
  const char *plan_arg;           /* the --plan this generation came from */
  char *plan_owned;               /* a reload's copy of it */
  /* serve's reloads (coord.h): a reload loads into its own engine; the
   * one served after the first reload, and the one it replaced until
   * coord_retire frees it (`old_is_self`: the first load's, in here). */
  struct tpl__load_opts reload_o; /* the reload's options */
  char reload_req[2][PATH_MAX];   /* its model and plan, as rank 0 got them */
  struct engine *gen, *old;
  int old_is_self;
  const struct tpl__reload_hooks *hooks; /* a reload's engine: the sink's */
  MPI_Request reload_req_mpi; /* ranks > 0: rank 0's word that one starts */
  int reload_value;
};

/* The one way MPI results are handled: 0 for MPI_SUCCESS, else TPL_EPEER
 * (exit 69) with MPI's own words for `what` in err (may be NULL). */
static int mpi_check(int mrc, const char *what, struct tpl__error *err) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (mrc == MPI_SUCCESS) return 0;
  if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
    len = snprintf(s, sizeof(s), "error %d", mrc);
  return tpl__fail(err, TPL_EPEER, "MPI %s failed: %.*s", what, len, s);
}

/* Whether the launcher put every rank on this one node: mpirun's local
 * and world sizes agree, or a Slurm step spans one node. */
static int single_node_job(void) {
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char *world = getenv("OMPI_COMM_WORLD_SIZE");
  const char *nodes = getenv("SLURM_STEP_NUM_NODES");
  if (local != NULL && world != NULL) return strcmp(local, world) == 0;
  return nodes != NULL && strcmp(nodes, "1") == 0;
}

int tpl__engine_init(int *argc, char ***argv, uint32_t *rank, uint32_t *world,
                     struct tpl__error *err) {
  int provided, r, w;
  /* Receivers spend the load waiting for rank 0; spinning there takes the
   * CPU rank 0 needs whenever ranks share cores (measured: about twice as
   * slow with 4 ranks on 2 cores).  A user's own setting wins. */
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  /* On one node every byte goes through shared memory (ob1 + vader),
   * which is what Open MPI ends up choosing there anyway; naming it skips
   * probing the network layers (UCX, OFI, PSM), a large part of every
   * start.  A user's own --mca pml wins. */
  if (single_node_job()) setenv("OMPI_MCA_pml", "ob1", 0);
  if (mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                "init", err) != 0)
    return TPL_EPEER;
  if (mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                "set error handler", err) != 0)
    return TPL_EPEER;
  if (mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "rank", err) != 0)
    return TPL_EPEER;
  if (mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &w), "size", err) != 0)
    return TPL_EPEER;
  *rank = (uint32_t)r;
  *world = (uint32_t)w;
  return 0;
}

int tpl__engine_finalize(struct tpl__error *err) {
  return mpi_check(MPI_Finalize(), "finalize", err);
}

/* Aborts the whole job with exit code `code` (after printing); never
 * returns. */
static void engine_abort(int code) {
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
  grid.ep = o->ep ? grid.tp : 0;
  if (rc == 0) rc = tpl__model_open_with(o->model, &o->http, 0, &e->model, err);
  if (rc == 0 && o->skip_mtp) rc = tpl__plan_skip_mtp(e->model, err);
  if (rc == 0 && o->verify_md5)
    rc = tpl__mlc_md5_ready(e->model,
                            e->model->shown ? e->model->shown : o->model, err);
  if (rc == 0)
    rc = tpl__job_plan(o->plan, e->model, o->model, &grid, o->bias_scaling,
                       &e->plan, &e->job, err);
  if (rc == 0 && o->steps.prepare != NULL)
    rc = o->steps.prepare(o->steps.ctx, err);
  return rc;
}

/* --- waiting with a progress deadline (stall.c) --- */

/* Nothing moved for --stall-timeout: say who this rank was waiting for
 * (`peer`, or -1 for any of the others at collective step `what`) and end
 * the whole job (the peer may never answer a collective). */
static void stall_abort(const struct engine *e, int peer, const char *what,
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
  engine_abort(tpl_exit_code(TPL_EPEER));
}

/* Waits for a nonblocking collective, polling like wait_reqs, for at
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
    if (mpi_check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what, err) != 0)
      return TPL_EPEER;
    if (done) return 0;
    if (beats != NULL &&
        mpi_check(tpl__beats_hear(beats, &heard), "heartbeat", err) != 0)
      return TPL_EPEER;
    if (heard)
      tpl__stall_progress(&st);
    else if (tpl__stall_idle(&st))
      stall_abort(e, beats ? tpl__beats_quietest(beats) : peer, what, &st);
  }
}

static int wait_collective(const struct engine *e, MPI_Request *req, int peer,
                           const char *what, struct tpl__error *err) {
  return wait_hearing(e, req, peer, NULL, what, err);
}

/* Polls `n` requests in order until all completed, backing off while
 * the oldest pending one does not complete.  Testing only the oldest
 * keeps a wait on a million requests linear (any MPI_Test drives all of
 * them), and when it stalls, its peer is the one to name: after
 * --stall-timeout without progress the job ends. */
static int wait_reqs(const struct engine *e, struct pending *reqs, size_t n,
                     struct tpl__error *err) {
  struct tpl__stall st;
  size_t first = 0;
  tpl__stall_start(&st, e->o->stall_timeout);
  while (first < n) {
    int done = 0;
    if (mpi_check(MPI_Test(&reqs[first].req, &done, MPI_STATUS_IGNORE), "wait",
                  err) != 0)
      return TPL_EPEER;
    if (done) {
      first++;
      tpl__stall_progress(&st);
    } else if (tpl__stall_idle(&st)) {
      stall_abort(e, reqs[first].peer, "wait", &st);
    }
  }
  return 0;
}

/* Rank 0's `count` items at buf to every rank, waiting for rank 0 under
 * --stall-timeout (wait_collective). */
static int bcast_from_0(const struct engine *e, void *buf, int count,
                        MPI_Datatype type, struct tpl__error *err) {
  MPI_Request req;
  if (mpi_check(MPI_Ibcast(buf, count, type, 0, MPI_COMM_WORLD, &req),
                "broadcast", err) != 0)
    return TPL_EPEER;
  return wait_collective(e, &req, 0, "broadcast", err);
}

/* Broadcasts `n` bytes at buf (allocated by every rank) in int-sized
 * parts. */
static int bcast_bytes(const struct engine *e, uint8_t *buf, uint64_t n,
                       struct tpl__error *err) {
  for (uint64_t off = 0; off < n;) {
    int part = (int)(n - off > INT_MAX ? INT_MAX : n - off);
    int rc = bcast_from_0(e, buf + off, part, MPI_BYTE, err);
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
  if (mpi_check(MPI_Iallreduce(&mine, worst, 1, MPI_2INT, MPI_MINLOC,
                               MPI_COMM_WORLD, &req),
                "agreement", err) != 0)
    return TPL_EPEER;
  return wait_hearing(e, &req, -1, beats, "agreement", err);
}

/* The agreement, waiting for the others under --stall-timeout: every
 * step before one is short, but for the long local ones that beat
 * (agree_after_beats). */
static int agree(const struct engine *e, int rc, struct tpl__error *err) {
  struct verdict worst;
  rc = reduce_verdicts(e, rc, NULL, &worst, err);
  return rc != 0 ? rc : agreed(e, worst, err);
}

/* agree() after a step that beat (--read local's reading, preshard's
 * write): a rank that finished waits for the others under the stall
 * deadline, which their heartbeats move (beat.h); when a rank still in
 * the step went quiet for --stall-timeout, the job ends naming it. */
static int agree_after_beats(struct engine *e, int rc, struct tpl__error *err) {
  struct verdict worst;
  if (mpi_check(tpl__beats_done(&e->beats), "heartbeat", err) != 0)
    return TPL_EPEER;
  rc = reduce_verdicts(e, rc, &e->beats, &worst, err);
  if (rc != 0) return rc;
  if (mpi_check(tpl__beats_close(&e->beats), "heartbeat", err) != 0)
    return TPL_EPEER;
  return agreed(e, worst, err);
}

/* Rank 0's verdict with the job table's size, then the table: every rank
 * returns the same code, and only rank 0 has a message for a refused job.
 * Each rank then lays out its store: the tensors of its stage. */
static int share_job(struct engine *e, struct tpl__error *err) {
  int64_t head[2] = {0, 0}; /* the verdict, the table's size */
  uint8_t *buf = NULL;
  size_t len = 0;
  int code = 0, mrc;
  tpl__stall_test_stop("validate", e->rank);
  if (e->rank == 0) code = validate(e, err);
  if (code == 0 && e->rank == 0 && tpl__job_pack(e->job, &buf, &len) != 0)
    code = tpl__fail(err, -ENOMEM, "cannot encode the job table");
  head[0] = code;
  head[1] = (int64_t)len;
  mrc = bcast_from_0(e, head, 2, MPI_INT64_T, err);
  if (mrc != 0 || head[0] != 0) {
    if (mrc == 0 && e->rank != 0) err->msg[0] = '\0';
    free(buf);
    return mrc != 0 ? mrc : (int)head[0];
  }
  /* From here every rank takes every collective step, failed or not. */
  len = (size_t)head[1];
  if (e->rank != 0 && (buf = malloc(len + 1)) == NULL)
    code = tpl__fail(err, -ENOMEM, "no memory for the job table");
  code = agree(e, code, err);
  if (code == 0) code = agree(e, bcast_bytes(e, buf, len, err), err);
  if (code == 0 && e->rank != 0) code = tpl__job_unpack(buf, len, &e->job, err);
  if (code == 0 && e->rank == 0) { /* kept: status serves it */
    e->job_table = buf;
    e->job_table_len = len;
  } else {
    free(buf);
  }
  if (code == 0) code = tpl__job_place(e->job, e->rank, err);
  return agree(e, code, err);
}

/* --- the store --- */

static int make_store(struct engine *e, struct tpl__error *err) {
  const struct tpl__job *job = e->job;
  int rc = tpl__store_create(&e->store, e->o->steps.store_kind, job->store_size,
                             job->ntensors, e->o->huge, err);
  /* With --read local every rank reads and copies at once: a thread
   * populating the store beside it only competes for the cores. */
  if (rc == 0 && !e->o->read_local) tpl__store_prefault(&e->store);
  return rc;
}

/* --- rank 0: streaming and sending --- */

static void beat(struct engine *e);

static int slot_wait(const struct engine *e, struct slot *s,
                     struct tpl__error *err) {
  int rc = wait_reqs(e, s->reqs, s->nreqs, err);
  s->nreqs = 0;
  return rc;
}

static int slot_send(struct slot *s, const uint8_t *p, uint64_t n, int dest,
                     struct tpl__error *err) {
  if (s->nreqs == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    struct pending *r = realloc(s->reqs, cap * sizeof(*r));
    if (r == NULL) return tpl__oom(err);
    s->reqs = r;
    s->cap = cap;
  }
  s->reqs[s->nreqs].peer = dest;
  s->sent += n;
  if (mpi_check(MPI_Isend(p, (int)n, MPI_BYTE, dest, TAG_DATA, MPI_COMM_WORLD,
                          &s->reqs[s->nreqs].req),
                "send", err) != 0)
    return TPL_EPEER;
  s->nreqs++;
  return 0;
}

/* Sends the open batch, if any. */
static int batch_flush(struct slot *s, struct tpl__error *err) {
  int dest = s->batch_dest;
  if (dest < 0) return 0;
  s->batch_dest = -1;
  return slot_send(s, s->pack + s->batch_start, s->batch_len, dest, err);
}

/* `n` bytes just written at pack + *packed go to `dest`: a small part
 * joins (or opens) the batch for `dest`, a large one goes alone.  Any
 * other open batch is sent first, so every rank's bytes leave in order. */
static int send_packed(struct slot *s, uint64_t n, int dest, uint64_t *packed,
                       struct tpl__error *err) {
  uint64_t at = *packed;
  int rc = 0;
  *packed += n;
  if (n <= BATCH_PART_MAX && s->batch_dest == dest) {
    s->batch_len += n;
    return 0;
  }
  rc = batch_flush(s, err);
  if (rc != 0 || n > BATCH_PART_MAX)
    return rc != 0 ? rc : slot_send(s, s->pack + at, n, dest, err);
  s->batch_dest = dest;
  s->batch_start = at;
  s->batch_len = n;
  return 0;
}

/* A contiguous part: copied into the batch when small, else sent from
 * where it is (after the open batch, to keep the order). */
static int send_contiguous(struct slot *s, const uint8_t *p, uint64_t n,
                           int dest, uint64_t *packed, struct tpl__error *err) {
  int rc;
  if (n <= BATCH_PART_MAX) {
    memcpy(s->pack + *packed, p, (size_t)n);
    return send_packed(s, n, dest, packed, err);
  }
  rc = batch_flush(s, err);
  return rc != 0 ? rc : slot_send(s, p, n, dest, err);
}

/* The part of tensor `i` inside the chunk: tensor-relative [b, e) and the
 * chunk bytes holding it. */
struct piece_of_chunk {
  size_t i;
  uint64_t b, e;
  const uint8_t *src;
};

/* --- chains: who gets which bytes from whom --- */

/* The holders of one shard t of tensor i are the ranks (d, p, t) with p
 * among its stages; a tensor that is not cut has one "shard" every holder
 * gets.  They form a chain in rank order: rank 0 sends each byte once, to
 * the first holder other than itself, and each holder forwards what it
 * receives to the next one as soon as it has it, from its own store (what
 * a broadcast is for on a network).  With T = world and P = 1 a shard has
 * one holder and a replicated tensor goes 0 -> 1 -> 2 -> ...
 *
 * No deadlock: every chain runs from lower to higher ranks, every rank
 * walks the tensors it holds in job order (rank 0 sends them in that
 * order), and every send is non-blocking.  A rank waits only for bytes
 * from a lower rank, which that rank has sent or forwards as soon as it
 * has them itself, and the ranks that wait on a rank's sends (forwarders'
 * requests, rank 0's slots) are higher ranks that receive in the same
 * order; by induction on (tensor, rank) every wait ends. */

/* Ranks of one chain are this many apart in the numbering: the shards of
 * a cut tensor repeat every T ranks; any holder may follow any other in
 * the chain of a tensor that is not cut. */
static uint32_t chain_step(const struct engine *e, size_t i) {
  return e->job->tensors[i].kind == TPL_RULE_SHARD ? e->job->grid.tp : 1;
}

/* The first holder of tensor i at or after rank r, other than rank 0, in
 * the chain through r; -1 when there is none. */
static int holder_from(const struct engine *e, size_t i, uint32_t r) {
  for (; r < e->world; r += chain_step(e, i))
    if (r > 0 && tpl__job_holds(e->job, i, r)) return (int)r;
  return -1;
}

/* Where holder `r` (> 0) of tensor i gets it from: the previous holder in
 * its chain, or rank 0. */
static int predecessor(const struct engine *e, size_t i, uint32_t r) {
  uint32_t step = chain_step(e, i);
  while (r > step) {
    r -= step;
    if (tpl__job_holds(e->job, i, r)) return (int)r;
  }
  return 0;
}

/* Where this rank forwards tensor i (which it holds), or -1. */
static int successor(const struct engine *e, size_t i) {
  return holder_from(e, i, e->rank + chain_step(e, i));
}

/* Own parts at least this long are read straight into rank 0's store
 * (shorter ones share the chunk's one read). */
#define DIRECT_MIN (64u << 10)

/* Whether any part of tensor i may be read straight into rank 0's store:
 * a cut tensor rank 0 holds at least DIRECT_MIN bytes of, whose shard 0
 * no other rank holds (no send needs those bytes in the chunk): no other
 * replica, and no other shard of a replicated kv head (its shards are not
 * disjoint).  Cheap: no layout. */
static int may_go_direct(const struct engine *e, size_t i) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  /* a file read direct lands in the (aligned) slot as a whole */
  return !e->direct && t->kind == TPL_RULE_SHARD &&
         t->rank_stored >= DIRECT_MIN && tpl__job_holds(e->job, i, 0) &&
         holder_from(e, i, 0) < 0 &&
         tpl__shard_replicas(&t->spec, e->job->grid.tp) == 1;
}

/* Rank 0's own part of tensor i within its source range [b, end) when it
 * is read straight into rank 0's store (may_go_direct, and the part there
 * is one contiguous range of at least DIRECT_MIN bytes).  Returns its
 * length, 0 when it is not, with its start in *start. */
static uint64_t own_direct(const struct engine *e, size_t i,
                           const struct tpl__layout *l0, uint64_t b,
                           uint64_t end, uint64_t *start) {
  uint64_t n;
  if (!may_go_direct(e, i)) return 0;
  n = tpl__layout_contiguous(l0, b, end, start);
  return n != UINT64_MAX && n >= DIRECT_MIN ? n : 0;
}

/* Rank 0 keeps its own shard of a tensor its stage holds (read_chunk put
 * a direct part in place already). */
static int gather_own(struct engine *e, const struct piece_of_chunk *pc,
                      const struct tpl__layout *l, uint64_t *own,
                      struct tpl__error *err) {
  const struct tpl__job_tensor *jt = &e->job->tensors[pc->i];
  uint64_t start, direct = own_direct(e, pc->i, l, pc->b, pc->e, &start);
  int rc;
  if (direct != 0) {
    *own += direct;
    return 0;
  }
  rc = tpl__store_prepare(&e->store, jt->store_offset + jt->rank_bytes, err);
  if (rc != 0) return rc;
  *own += tpl__layout_gather(l, pc->b, pc->e, pc->src,
                             e->store.base + jt->store_offset + *own);
  return 0;
}

/* Shard `l`'s part of the piece to `dest`, the head of its chain. */
static int send_shard(struct slot *s, const struct piece_of_chunk *pc,
                      const struct tpl__layout *l, int dest, uint64_t *packed,
                      struct tpl__error *err) {
  uint64_t start, n = tpl__layout_contiguous(l, pc->b, pc->e, &start);
  if (n == 0) return 0;
  if (n != UINT64_MAX)
    return send_contiguous(s, pc->src + (start - pc->b), n, dest, packed, err);
  n = tpl__layout_gather(l, pc->b, pc->e, pc->src, s->pack + *packed);
  return send_packed(s, n, dest, packed, err);
}

/* The piece of one tensor in the chunk: rank 0's own shard, then each
 * shard (one for a tensor not cut) to the head of its chain (dests[t],
 * -1 when no other rank holds it). */
static int deliver_part(struct engine *e, struct slot *s,
                        const struct piece_of_chunk *pc,
                        const struct tpl__layout *layouts, const int *dests,
                        uint64_t *own, uint64_t *packed,
                        struct tpl__error *err) {
  double t = tpl__now();
  uint32_t nshards = chain_step(e, pc->i); /* T for a cut tensor, else 1 */
  for (uint32_t k = 0; k < nshards; k++) {
    int rc = 0;
    if (k == 0 && tpl__job_holds(e->job, pc->i, 0))
      rc = gather_own(e, pc, &layouts[0], own, err);
    if (rc == 0 && dests[k] >= 0)
      rc = send_shard(s, pc, &layouts[k], dests[k], packed, err);
    if (rc != 0) return rc;
  }
  e->st.t_pack += tpl__now() - t;
  return 0;
}

struct file_walk {
  size_t first, end; /* tensors [first, end) live in this file */
  size_t scan;       /* first tensor that may still have unread bytes */
  size_t cur;        /* tensor whose layouts are cached */
  uint64_t own;      /* bytes of tensor `cur` rank 0 already holds */
  uint64_t done;     /* tensor bytes delivered so far (all files) */
  struct tpl__layout *layouts; /* grid.tp entries: shard t's layout */
  int *dests; /* grid.tp entries: the head of shard t's chain, or -1 */
};

/* Every byte of a tensor is gathered exactly once; a shortfall here would
 * be a wrong shard, so it stops the job instead. */
static int check_own(const struct engine *e, const struct file_walk *w,
                     struct tpl__error *err) {
  if (w->cur == SIZE_MAX || w->own == w->layouts[0].total ||
      (w->own == 0 && !tpl__job_holds(e->job, w->cur, 0)))
    return 0;
  return tpl__fail(err, TPL_EINTERNAL,
                   "tensor '%s': rank 0 gathered %llu of its %llu bytes",
                   e->job->tensors[w->cur].name, (unsigned long long)w->own,
                   (unsigned long long)w->layouts[0].total);
}

static int cache_layouts(struct engine *e, struct file_walk *w, size_t i,
                         struct tpl__error *err) {
  int rc;
  if (w->cur == i) return 0;
  rc = check_own(e, w, err);
  for (uint32_t t = 0; rc == 0 && t < e->job->grid.tp; t++) {
    rc = tpl__job_layout(e->job, i, t, &w->layouts[t]);
    if (rc != 0)
      rc = tpl__fail(err, rc, "tensor '%s': layout for shard %u: %s",
                     e->job->tensors[i].name, t, tpl_strerror(rc));
    w->dests[t] = holder_from(e, i, t);
  }
  w->cur = i;
  w->own = 0;
  return rc;
}

/* Moves *scan past tensors that end at or before *pos (and empty ones)
 * and *pos over a gap to the next tensor's start.  Non-empty tensors of a
 * file are sorted by offset and never overlap, so their ends increase.
 * Returns 0 when the file has no bytes left to read. */
static int next_extent(const struct engine *e, const struct file_walk *w,
                       size_t *scan, uint64_t *pos) {
  for (; *scan < w->end; (*scan)++) {
    const struct tpl__job_tensor *t = &e->job->tensors[*scan];
    if (t->stored_bytes != 0 && t->file_offset + t->stored_bytes > *pos) {
      if (t->file_offset > *pos) *pos = t->file_offset;
      return 1;
    }
  }
  return 0;
}

/* Delivers the chunk's pieces, then lets rank 0's finisher have every
 * tensor whose last byte was in the chunk. */
static int deliver_chunk(struct engine *e, struct slot *s, struct file_walk *w,
                         uint64_t pos, uint64_t len, struct tpl__error *err) {
  uint64_t packed = 0;
  size_t complete = 0;
  for (size_t i = w->scan; i < w->end; i++) {
    const struct tpl__job_tensor *t = &e->job->tensors[i];
    uint64_t tb = t->file_offset, te = t->file_offset + t->stored_bytes;
    struct piece_of_chunk pc;
    int rc;
    if (te <= pos || t->stored_bytes == 0) continue;
    if (tb >= pos + len) break;
    pc.i = i;
    pc.b = (pos > tb ? pos : tb) - tb;
    pc.e = (pos + len < te ? pos + len : te) - tb;
    pc.src = s->data + (tb + pc.b - pos);
    rc = cache_layouts(e, w, i, err);
    if (rc == 0)
      rc = deliver_part(e, s, &pc, w->layouts, w->dests, &w->own, &packed, err);
    if (rc != 0) return rc;
    w->done += pc.e - pc.b;
    if (pc.e == t->stored_bytes) complete = i + 1;
  }
  tpl__finisher_release(&e->finisher, complete);
  return batch_flush(s, err);
}

/* End of the last non-empty tensor of the file, 0 when there is none. */
static uint64_t file_data_end(const struct engine *e,
                              const struct file_walk *w) {
  for (size_t i = w->end; i-- > w->first;) {
    const struct tpl__job_tensor *t = &e->job->tensors[i];
    if (t->stored_bytes != 0) return t->file_offset + t->stored_bytes;
  }
  return 0;
}

/* File bytes [from, to) into the slot's read buffer, at their offset from
 * the chunk's start. */
static int read_span(struct engine *e, uint32_t file, struct slot *s,
                     uint64_t from, uint64_t to, struct tpl__error *err) {
  return tpl__source_read(e->src, file, s->data + (from - s->pos), to - from,
                          from, err);
}

/* Tensor i's own bytes [start, start + n) (tensor-relative, one range of
 * layout l0) straight into rank 0's store. */
static int read_own(struct engine *e, size_t i, const struct tpl__layout *l0,
                    uint64_t start, uint64_t n, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  uint8_t *dst =
      e->store.base + t->store_offset + tpl__layout_count(l0, 0, start);
  int rc = tpl__store_prepare(&e->store, t->store_offset + t->rank_bytes, err);
  if (rc != 0) return rc;
  return tpl__source_read(e->src, t->file, dst, n, t->file_offset + start, err);
}

/* A buffered chunk: rank 0's direct own parts (own_direct) into its
 * store, every other byte into the slot's read buffer.  One copy less per
 * own byte of a cut tensor than reading it into the buffer and gathering
 * it from there. */
static int read_buffered(struct engine *e, uint32_t file, struct slot *s,
                         const struct file_walk *w, struct tpl__error *err) {
  uint64_t pos = s->pos, len = s->len, at = pos; /* read up to here */
  int rc = 0;
  for (size_t i = w->scan; rc == 0 && i < w->end; i++) {
    const struct tpl__job_tensor *t = &e->job->tensors[i];
    uint64_t tb = t->file_offset, te = tb + t->stored_bytes, start, n;
    struct tpl__layout l0;
    if (te <= pos || t->stored_bytes == 0) continue;
    if (tb >= pos + len) break;
    if (!may_go_direct(e, i) || tpl__job_layout(e->job, i, 0, &l0) != 0)
      continue; /* cache_layouts reports a layout that fails */
    n = own_direct(e, i, &l0, (pos > tb ? pos : tb) - tb,
                   (pos + len < te ? pos + len : te) - tb, &start);
    if (n == 0) continue;
    if (tb + start > at) rc = read_span(e, file, s, at, tb + start, err);
    if (rc == 0) rc = read_own(e, i, &l0, start, n, err);
    at = tb + start + n;
  }
  if (rc == 0 && at < pos + len) rc = read_span(e, file, s, at, pos + len, err);
  return rc;
}

/* A failed read of rank 0's (a device's EIO, a file cut short, a direct
 * read refused past a file's first) fails the load, but only after the
 * stream, as a file that changed does (deferred_check): the chunks from
 * there on go out unread, so every rank still gets all its bytes and the
 * failure is agreed on (deliver) instead of ending the job, and a reload
 * keeps the generation it serves.  Returns 0: the stream goes on. */
static int defer_failure(struct engine *e, int rc,
                         const struct tpl__error *err) {
  if (rc != 0 && e->deferred == 0) {
    e->deferred = rc;
    e->deferred_err = *err;
  }
  return 0;
}

/* Starts reading the chunk [pos, pos + len) of `file` into slot s: a file
 * read direct as one read the source splits into requests in flight; a
 * buffered one is only announced here (read_buffered reads it). */
static int chunk_start(struct engine *e, uint32_t file, struct slot *s,
                       uint64_t pos, uint64_t len, struct tpl__error *err) {
  int rc = 0;
  s->pos = pos;
  s->len = len;
  s->data = tpl__source_place(e->src, file, s->read, pos);
  s->rd = (struct tpl__read){.file = file, .off = pos, .len = len};
  s->rd.dst = s->data;
  s->reading = e->deferred == 0;
  if (s->reading && e->direct) rc = tpl__source_start(e->src, &s->rd, err);
  if (s->reading && !e->direct) tpl__source_hint(e->src, file, pos, len);
  s->reading = s->reading && rc == 0;
  return defer_failure(e, rc, err);
}

/* A file that changed since rank 0 validated it fails the load, but only
 * after the stream: every rank still gets all its bytes, so the failure
 * is agreed on (deliver) instead of stranding the receivers, and a
 * reload keeps the generation it serves. */
static void deferred_check(struct engine *e, uint32_t file) {
  if (e->deferred == 0)
    e->deferred = tpl__model_file_unchanged(e->model, file, &e->deferred_err);
}

static int chunk_finish(struct engine *e, uint32_t file, struct slot *s,
                        const struct file_walk *w, struct tpl__error *err) {
  double t = tpl__now();
  int rc = 0;
  if (!s->reading) return 0;
  rc = e->direct ? tpl__source_finish(e->src, &s->rd, err)
                 : read_buffered(e, file, s, w, err);
  e->st.t_read += tpl__now() - t;
  e->bytes_read += s->len;
  return defer_failure(e, rc, err);
}

static struct slot *slot_of(struct engine *e, uint64_t chunk) {
  return &e->slots[chunk % NSLOTS];
}

/* The file's chunks in order, each delivered while the reads of the
 * next ones are in flight (NSLOTS).  A chunk's slot is reused once the
 * sends of the chunk delivered before it have completed. */
static int stream_file(struct engine *e, struct file_walk *w, uint64_t *k,
                       struct tpl__error *err) {
  uint32_t file = e->job->tensors[w->first].file;
  uint64_t pos = 0, end = file_data_end(e, w), issued = *k, done = *k;
  size_t scan = w->scan;
  int rc = 0;
  if (end == 0) return 0;
  /* The descriptor validated at start, never the path again; a file
   * that changed is told once every byte went out (deferred_check). */
  deferred_check(e, file);
  e->direct = tpl__source_direct(e->src, file);
  posix_fadvise(e->model->files[file].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (;;) {
    struct slot *s;
    uint64_t at;
    while (rc == 0 && issued - done < NSLOTS - 1 &&
           next_extent(e, w, &scan, &pos)) {
      uint64_t len = end - pos < e->chunk ? end - pos : e->chunk;
      double t = tpl__now();
      s = slot_of(e, issued++);
      rc = slot_wait(e, s, err); /* its sends of NSLOTS chunks before */
      e->st.t_send += tpl__now() - t;
      if (rc == 0) rc = chunk_start(e, file, s, pos, len, err);
      pos += len;
    }
    if (rc != 0 || done == issued) break;
    s = slot_of(e, done++);
    at = s->pos;
    next_extent(e, w, &w->scan, &at); /* delivery's scan to the chunk */
    rc = chunk_finish(e, file, s, w, err);
    if (rc == 0) beat(e); /* completed reads are progress */
    if (rc == 0) rc = deliver_chunk(e, s, w, s->pos, s->len, err);
    if (e->o->progress)
      e->o->progress(e->o->ctx, w->done, e->job->source_bytes);
  }
  *k = issued;
  if (rc == 0) deferred_check(e, file);
  return rc == 0 ? check_own(e, w, err) : rc;
}

/* The report's record of how each file was read (by this rank). */
static void keep_io(struct engine *e) {
  if (e->src == NULL) return;
  free(e->st.file_io);
  e->st.file_io = malloc(e->job->nfiles + 1);
  free(e->st.file_align);
  e->st.file_align = malloc((e->job->nfiles + 1) * sizeof(uint64_t));
  e->st.nfile_io = e->st.file_io && e->st.file_align ? e->job->nfiles : 0;
  for (size_t f = 0; f < e->st.nfile_io; f++) {
    e->st.file_io[f] = (uint8_t)(e->src->used[f] + 1);
    /* a file that fell back to buffered (source.h) has no alignment */
    e->st.file_align[f] =
        tpl__source_direct(e->src, (uint32_t)f) ? e->src->align[f] : 0;
  }
}

/* Every completed request (a few MiB) is progress: a beat when one is
 * due, so a slow but steady reader is waited for. */
static void source_progress(void *ctx) {
  beat(ctx);
}

/* The source of a MODEL URL's files: rank 0 reads with the client that
 * validated them, the others (--read local) with one of their own, made
 * from the same options; every answer is checked against the size and
 * ETag rank 0 recorded (the job table carries them). */
static int open_http_source(struct engine *e, struct tpl__error *err) {
  size_t n = e->job->nfiles;
  struct tpl__http *h = e->rank == 0 ? e->model->http : NULL;
  int rc = 0;
  e->urls = calloc(n + 1, sizeof(*e->urls));
  if (e->urls == NULL) return tpl__oom(err);
  for (size_t f = 0; f < n; f++)
    e->urls[f] = (struct tpl__source_url){
        e->job->files[f].url, e->job->files[f].path, &e->job->files[f].obj};
  if (h == NULL) {
    rc = tpl__http_open(&e->o->http, &h, err);
    if (rc == 0 && n > 0)
      rc = tpl__remote_sign_client(h, e->job->files[0].path, err);
    if (rc != 0) tpl__http_close(h);
  }
  if (rc == 0)
    rc = tpl__source_http_open(&e->src, h, e->rank != 0, e->urls, n, err);
  if (rc == 0) tpl__source_on_progress(e->src, source_progress, e);
  return rc;
}

/* The source's fallback note, once (rank 0's only: the others' would
 * say the same): at open, or after the reads (a file system that refused
 * a file's first direct read, source.h). */
static void tell_note(struct engine *e) {
  if (e->src == NULL || e->src->note[0] == '\0') return;
  if (e->rank == 0 && !e->note_told)
    fprintf(stderr, "tpload: %s\n", e->src->note);
  e->note_told = 1;
}

static void close_source(struct engine *e) {
  tell_note(e);
  tpl__source_close(e->src);
  e->src = NULL;
  free(e->urls);
  e->urls = NULL;
}

/* A source over fds (the job's files, in order); its fallback note, if
 * any, on stderr (tell_note).  The files of a MODEL URL are read over
 * HTTP (open_http_source). */
static int open_source(struct engine *e, const int *fds,
                       const char *const *paths, struct tpl__error *err) {
  /* --read local on one node: the ranks share the page cache's pages,
   * where direct reads would fetch every page of a strided slice once per
   * rank, so auto reads buffered there. */
  int mode = e->o->read_local && e->o->io_mode == TPL_IO_AUTO ? TPL_IO_BUFFERED
                                                              : e->o->io_mode;
  int rc;
  if (e->job->nfiles > 0 && e->job->files[0].url != NULL)
    return open_http_source(e, err);
  rc = tpl__source_files_open(&e->src, fds, paths, e->job->nfiles, mode, err);
  if (rc == 0) tell_note(e);
  if (rc == 0) tpl__source_on_progress(e->src, source_progress, e);
  return rc;
}

static uint64_t round_up(uint64_t n, uint64_t unit) {
  return (n + unit - 1) / unit * unit;
}

/* The window as one mapping (huge pages: buffers of their own would
 * each take a whole one), cut into the slots' buffers, each aligned as
 * the source's direct reads need. */
static int alloc_slots(struct engine *e, struct tpl__error *err) {
  uint64_t unit = tpl__source_slack(e->src) / 2, read, pack;
  uint8_t *p;
  if (unit < 4096) unit = 4096;
  read = round_up(e->chunk + tpl__source_slack(e->src), unit);
  pack = round_up(e->chunk, unit);
  e->window_len = NSLOTS * (read + pack);
  e->window = p = tpl__huge_alloc((size_t)e->window_len);
  if (p == NULL)
    return tpl__fail(err, -ENOMEM, "cannot allocate the streaming window");
  for (int i = 0; i < NSLOTS; i++) {
    e->slots[i].batch_dest = -1;
    e->slots[i].read = p;
    e->slots[i].pack = p + read;
    p += read + pack;
  }
  return 0;
}

static void free_slots(struct engine *e) {
  e->st.bytes_sent = 0;
  for (int i = 0; i < NSLOTS; i++) {
    e->st.bytes_sent += e->slots[i].sent;
    free(e->slots[i].reqs);
  }
  tpl__huge_free(e->window, (size_t)e->window_len);
}

/* The model's descriptors and paths, in job file order. */
static int model_files(const struct engine *e, int **fds, const char ***paths) {
  size_t n = e->job->nfiles;
  *fds = malloc((n + 1) * sizeof(**fds));
  *paths = malloc((n + 1) * sizeof(**paths));
  if (*fds == NULL || *paths == NULL) return -ENOMEM;
  for (size_t f = 0; f < n; f++) {
    (*fds)[f] = e->model->files[f].fd;
    (*paths)[f] = e->model->files[f].path;
  }
  return 0;
}

static int stream_all(struct engine *e, struct tpl__error *err) {
  struct file_walk w = {0};
  uint64_t k = 0;
  int rc = alloc_slots(e, err);
  w.layouts = calloc(e->job->grid.tp, sizeof(*w.layouts));
  w.dests = calloc(e->job->grid.tp, sizeof(*w.dests));
  if (rc == 0 && (w.layouts == NULL || w.dests == NULL)) rc = tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < e->job->ntensors;) {
    w.first = w.scan = i;
    w.end = i + 1;
    while (w.end < e->job->ntensors &&
           e->job->tensors[w.end].file == e->job->tensors[i].file)
      w.end++;
    w.cur = SIZE_MAX;
    rc = stream_file(e, &w, &k, err);
    i = w.end;
  }
  for (int i = 0; rc == 0 && i < NSLOTS; i++) {
    double t = tpl__now();
    rc = slot_wait(e, &e->slots[i], err);
    e->st.t_send += tpl__now() - t;
  }
  free(w.layouts);
  free(w.dests);
  return rc;
}

static int send_all(struct engine *e, struct tpl__error *err) {
  int *fds = NULL;
  const char **paths = NULL;
  int rc = model_files(e, &fds, &paths) == 0 ? 0 : tpl__oom(err);
  if (rc == 0) rc = open_source(e, fds, paths, err);
  if (rc == 0) rc = stream_all(e, err);
  keep_io(e);
  close_source(e); /* before the buffers its reads land in */
  free_slots(e);
  free(fds);
  free(paths);
  return rc;
}

/* --- every rank: decode, scale, checksum --- */

/* Decodes and scales tensor i in place, then hashes it (each its own
 * phase). */
static int finish_tensor(struct engine *e, size_t i, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  uint8_t *p = e->store.base + t->store_offset;
  double t0 = tpl__now(), t2;
  int rc = tpl__job_finish_bytes(e->job, i, p, err);
  t2 = tpl__now();
  e->st.t_scale += t2 - t0;
  if (rc != 0) return rc;
  e->store.xxh3[i] = XXH3_64bits(p, (size_t)t->rank_bytes);
  e->st.t_hash += tpl__now() - t2;
  return 0;
}

/* Rank 0's finisher step (finisher.h): rank 0 hands it each of its
 * tensors as the tensor's last bytes land in its store (deliver_chunk),
 * so decoding, scaling and hashing them runs beside reading and sending,
 * on a neighbouring core where the launcher bound rank 0 to one, instead
 * of in a pass after the sends. */
static int finish_own(void *ctx, size_t i, struct tpl__error *err) {
  struct engine *e = ctx;
  return tpl__job_holds(e->job, i, e->rank) ? finish_tensor(e, i, err) : 0;
}

/* A receiver finishes a tensor as soon as it has it, while its bytes are
 * fresh in cache and rank 0 is still sending, unless it forwards the
 * tensor down the chain: those bytes must stay as received until the
 * forwarding sends complete, so it finishes them here, after. */
static int finish_store(struct engine *e, struct tpl__error *err) {
  if (e->rank == 0) return tpl__finisher_join(&e->finisher, err);
  for (size_t i = 0; i < e->job->ntensors; i++) {
    int rc = tpl__job_holds(e->job, i, e->rank) && successor(e, i) >= 0
                 ? finish_tensor(e, i, err)
                 : 0;
    if (rc != 0) return rc;
  }
  return 0;
}

/* --- --read local: every rank reads its own slices --- */

/* The step of local reads: small enough that a step's bytes are still in
 * cache when they are hashed (chosen by measurement: see the commit that
 * set it). */
#define LOCAL_STEP ((size_t)512 << 10)

/* A strided slice is read piece by piece when its pieces are this long,
 * instead of whole rows through the window (whole rows meant each rank
 * reading the row-parallel weights N times over). */
#define LOCAL_PIECE_MIN 1024

/* The step of local reads from a file read direct: requests in flight
 * need a step of several (source.c); hashing from the store after. */
#define LOCAL_DIRECT_STEP ((size_t)8 << 20)

/* Starts this rank's heartbeats (beat.h); every rank does, before a
 * step whose end is agree_after_beats. */
static void beats_begin(struct engine *e) {
  if (tpl__beats_open(&e->beats, e->rank, e->world, e->o->stall_timeout)) {
    fprintf(stderr, "tpload: rank %u: out of memory\n", e->rank);
    engine_abort(tpl_exit_code(-ENOMEM)); /* the others wait for beats */
  }
}

/* A heartbeat when one is due; an MPI failure ends the job. */
static void beat(struct engine *e) {
  int mrc = tpl__beats_tick(&e->beats);
  if (mrc != MPI_SUCCESS) {
    struct tpl__error err;
    mpi_check(mrc, "heartbeat", &err);
    fprintf(stderr, "tpload: rank %u: %s\n", e->rank, err.msg);
    engine_abort(tpl_exit_code(TPL_EPEER));
  }
  tpl__stall_test_slow(e->rank);
}

/* After every step of a rank's local reads: its heartbeat, and rank 0's
 * progress line. */
static void local_progress(void *ctx, uint64_t done, uint64_t total) {
  struct engine *e = ctx;
  beat(e);
  if (e->rank == 0 && e->o->progress) e->o->progress(e->o->ctx, done, total);
}

/* This rank's descriptors of the job's files: rank 0's are the ones it
 * validated (never the paths again), the others open the paths and
 * check they are the same files. */
static int local_fds(const struct engine *e, int *fds, struct tpl__error *err) {
  if (e->rank != 0) return tpl__local_open(e->job, fds, err);
  for (size_t f = 0; f < e->job->nfiles; f++)
    fds[f] = e->model->files[f].fd;
  return 0;
}

/* Whether some file is read in whole steps through the window (direct,
 * or over HTTP, which needs no slack). */
static int any_direct(const struct tpl__source *src) {
  for (uint32_t f = 0; f < src->nfiles; f++)
    if (tpl__source_direct(src, f)) return 1;
  return 0;
}

/* Nobody waits for anybody until the agreement after, so a failure here
 * is agreed on, not a reason to end the job. */
static int read_local(struct engine *e, struct tpl__error *err) {
  size_t n = e->job->nfiles;
  struct tpl__local_read lr = {.job = e->job,
                               .rank = e->rank,
                               .store = &e->store,
                               .window_len = LOCAL_STEP,
                               .direct_len = LOCAL_DIRECT_STEP,
                               .piece_min = LOCAL_PIECE_MIN,
                               .finish = finish_own,
                               .ctx = e};
  int *fds = malloc((n + 1) * sizeof(*fds)), rc;
  const char **paths = malloc((n + 1) * sizeof(*paths));
  size_t window = 0;
  for (size_t f = 0; fds != NULL && paths != NULL && f < n; f++) {
    fds[f] = -1; /* none of them open yet */
    paths[f] = e->job->files[f].path;
  }
  lr.progress = local_progress;
  if (fds == NULL || paths == NULL)
    rc = tpl__oom(err);
  else
    rc = local_fds(e, fds, err);
  if (rc == 0) rc = open_source(e, fds, paths, err);
  if (rc == 0) {
    window = !any_direct(e->src)
                 ? LOCAL_STEP /* no file is read direct */
                 : LOCAL_DIRECT_STEP + (size_t)tpl__source_slack(e->src);
    lr.window = tpl__huge_alloc(window);
    if (lr.window == NULL)
      rc = tpl__fail(err, -ENOMEM, "cannot allocate the read window");
  }
  if (rc == 0) tpl__stall_test_stop("deliver", e->rank); /* files open */
  lr.fds = fds;
  lr.src = e->src;
  if (rc == 0) rc = tpl__local_read_all(&lr, err);
  keep_io(e);
  close_source(e);
  e->st.t_read = lr.t_read;
  e->st.t_pack = lr.t_pack;
  e->st.t_hash += lr.t_hash;
  e->bytes_read = lr.bytes_read;
  if (e->rank != 0 && fds != NULL) tpl__local_close(fds, n);
  free(fds);
  free(paths);
  tpl__huge_free(lr.window, window);
  return rc;
}

/* --- rank 0: --verify-md5's pass --- */

/* Each hashed read is progress: a beat when one is due, and the line. */
static void md5_progress(void *ctx, uint64_t done, uint64_t total) {
  struct engine *e = ctx;
  beat(e);
  if (e->o->md5_progress) e->o->md5_progress(e->o->ctx, done, total);
}

/* Every file read whole through a source of its own and checked against
 * its md5sum (mlc_md5.h); the report names them. */
static int md5_pass(struct engine *e, struct tpl__error *err) {
  struct tpl__mlc_md5 v = {
      .m = e->model, .chunk = e->chunk, .progress = md5_progress, .ctx = e};
  int *fds = NULL;
  const char **paths = NULL;
  int rc = model_files(e, &fds, &paths) == 0 ? 0 : tpl__oom(err);
  if (rc == 0) rc = open_source(e, fds, paths, err);
  v.src = e->src;
  if (rc == 0) rc = tpl__mlc_md5_verify(&v, err);
  close_source(e);
  free(fds);
  e->md5_names = paths; /* the files' paths, replaced by their names */
  for (size_t f = 0; rc == 0 && f < e->job->nfiles; f++)
    paths[f] = e->model->files[f].name;
  e->md5 = (struct tpl__md5_summary){paths, rc == 0 ? e->job->nfiles : 0,
                                     v.bytes, v.seconds};
  return rc;
}

/* Before any byte moves: rank 0's pass, while the others wait for it
 * under the stall deadline its beats move; agreed. */
static int verify_md5(struct engine *e, struct tpl__error *err) {
  beats_begin(e);
  return agree_after_beats(e, e->rank == 0 ? md5_pass(e, err) : 0, err);
}

/* --- ranks > 0: receiving --- */

/* Waits for the next message from `from` and its size, polling like
 * wait_reqs() (and ending the job the same way when it stalls); a beat
 * from `from` (rank 0 beats as its reads complete) is progress too. */
static int probe_message(struct engine *e, int from, MPI_Message *msg, int *n,
                         struct tpl__error *err) {
  struct tpl__stall st;
  MPI_Status status;
  int flag = 0;
  tpl__stall_start(&st, e->o->stall_timeout);
  for (;;) {
    double heard_from = e->beats.heard[from];
    int heard = 0;
    if (mpi_check(
            MPI_Improbe(from, TAG_DATA, MPI_COMM_WORLD, &flag, msg, &status),
            "probe", err) != 0)
      return TPL_EPEER;
    if (flag) break;
    if (mpi_check(tpl__beats_hear(&e->beats, &heard), "heartbeat", err) != 0)
      return TPL_EPEER;
    if (heard && e->beats.heard[from] != heard_from)
      tpl__stall_progress(&st);
    else if (tpl__stall_idle(&st))
      stall_abort(e, from, "receive", &st);
  }
  if (mpi_check(MPI_Get_count(&status, MPI_BYTE, n), "receive", err) != 0)
    return TPL_EPEER;
  return 0;
}

static int take_message(struct engine *e, MPI_Message *msg, uint8_t *dst, int n,
                        int from, struct tpl__error *err) {
  struct pending p = {MPI_REQUEST_NULL, from};
  if (mpi_check(MPI_Imrecv(dst, n, MPI_BYTE, msg, &p.req), "receive", err) != 0)
    return TPL_EPEER;
  return wait_reqs(e, &p, 1, err);
}

static int inbox_fill(struct engine *e, struct inbox *in, MPI_Message *msg,
                      int n, int from, struct tpl__error *err) {
  if ((size_t)n > in->cap) {
    uint8_t *b = realloc(in->buf, (size_t)n);
    if (b == NULL) return tpl__oom(err);
    in->buf = b;
    in->cap = (size_t)n;
  }
  in->pos = 0;
  in->len = (uint64_t)n;
  return take_message(e, msg, in->buf, n, from, err);
}

/* Up to `want` bytes of the stream from `from` into dst, *got of them:
 * what is left of a batch in the inbox; else the next message, straight
 * into dst when it is no longer than `want` (then it is this tensor's
 * alone: a batch always holds the whole rest of its first part's tensor
 * and more), else through the inbox. */
static int receive_some(struct engine *e, struct inbox *in, int from,
                        uint8_t *dst, uint64_t want, uint64_t *got,
                        struct tpl__error *err) {
  if (in->pos == in->len) {
    MPI_Message msg;
    int n = 0;
    int rc = probe_message(e, from, &msg, &n, err);
    if (rc == 0 && (uint64_t)n <= want) {
      *got = (uint64_t)n;
      return take_message(e, &msg, dst, n, from, err);
    }
    if (rc == 0) rc = inbox_fill(e, in, &msg, n, from, err);
    if (rc != 0) return rc;
  }
  *got = in->len - in->pos < want ? in->len - in->pos : want;
  memcpy(dst, in->buf + in->pos, (size_t)*got);
  in->pos += *got;
  return 0;
}

/* Tensor i (held here) from its predecessor, through in[predecessor]
 * (one inbox per source: rank 0's batches and forwarded parts from
 * several ranks can all be pending), each part forwarded to `to` (its
 * successor, or -1) as it arrives. */
static int receive_tensor(struct engine *e, size_t i, struct inbox *in,
                          struct slot *fwd, int to, struct tpl__error *err) {
  const struct tpl__job_tensor *jt = &e->job->tensors[i];
  uint8_t *dst = e->store.base + jt->store_offset;
  int from = predecessor(e, i, e->rank);
  uint64_t got = 0, n;
  int rc =
      tpl__store_prepare(&e->store, jt->store_offset + jt->rank_bytes, err);
  while (rc == 0 && got < jt->rank_stored) {
    rc = receive_some(e, &in[from], from, dst + got, jt->rank_stored - got, &n,
                      err);
    if (rc == 0 && n == 0)
      rc = tpl__fail(err, TPL_EPEER, "tensor '%s': empty message", jt->name);
    if (rc == 0 && to >= 0) rc = slot_send(fwd, dst + got, n, to, err);
    got += n;
  }
  return rc;
}

/* Every byte a batch brought belongs to some tensor. */
static int inboxes_empty(const struct engine *e, const struct inbox *in,
                         struct tpl__error *err) {
  for (uint32_t k = 0; k < e->world; k++)
    if (in[k].pos != in[k].len)
      return tpl__fail(err, TPL_EPEER,
                       "%llu bytes from rank %u arrived beyond the last tensor",
                       (unsigned long long)(in[k].len - in[k].pos), k);
  return 0;
}

static int receive_all(struct engine *e, struct tpl__error *err) {
  struct slot fwd = {0};
  struct inbox *in = calloc(e->world, sizeof(*in));
  double t = tpl__now();
  int rc = in != NULL ? 0 : tpl__oom(err);
  tpl__stall_test_stop("deliver", e->rank);
  for (size_t i = 0; rc == 0 && i < e->job->ntensors; i++) {
    int to;
    if (!tpl__job_holds(e->job, i, e->rank)) continue;
    to = successor(e, i);
    rc = receive_tensor(e, i, in, &fwd, to, err);
    /* a tensor that cannot be finished fails the load after the stream */
    if (rc == 0 && to < 0 && e->deferred == 0)
      e->deferred = finish_tensor(e, i, &e->deferred_err);
    /* Forwarded parts stay in the store, so only the requests pile up. */
    if (rc == 0 && fwd.nreqs >= 1024) rc = slot_wait(e, &fwd, err);
  }
  if (rc == 0) rc = slot_wait(e, &fwd, err);
  if (rc == 0) rc = inboxes_empty(e, in, err);
  e->st.bytes_sent = fwd.sent;
  free(fwd.reqs);
  for (uint32_t k = 0; in != NULL && k < e->world; k++)
    free(in[k].buf);
  free(in);
  e->st.t_recv = tpl__now() - t - e->st.t_scale - e->st.t_hash;
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
  e->st.seconds = tpl__now() - t0;
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

/* Waits under --stall-timeout for a collective whose root is rank 0
 * (a gather, a reduction): the others wait for rank 0, rank 0 for all. */
static int wait_to_0(const struct engine *e, MPI_Request *req, const char *what,
                     struct tpl__error *err) {
  return wait_collective(e, req, e->rank == 0 ? -1 : 0, what, err);
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
  rc = agree(e, rc, err);
  n = (int)len;
  if (rc == 0)
    rc = mpi_check(MPI_Igather(&n, 1, MPI_INT, g.counts, 1, MPI_INT, 0,
                               MPI_COMM_WORLD, &req),
                   "gathering the report sizes", err);
  if (rc == 0) rc = wait_to_0(e, &req, "gathering the report sizes", err);
  if (rc == 0 && e->rank == 0) rc = gathered_layout(&g, e->world);
  rc = agree(e, rc, err);
  if (rc == 0)
    rc = mpi_check(MPI_Igatherv(mine, n, MPI_BYTE, g.all, g.counts, g.displs,
                                MPI_BYTE, 0, MPI_COMM_WORLD, &req),
                   "gathering the rank reports", err);
  if (rc == 0) rc = wait_to_0(e, &req, "gathering the rank reports", err);
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

/* --- the coordination sinks use (coord.h) --- */

/* A sink's waits are under --stall-timeout too: its steps between them
 * are short, but for its long local one (preshard's write), which beats
 * and ends in coord_agree_after_beats. */
static int coord_agree(void *ctx, int rc, struct tpl__error *err) {
  return agree(ctx, rc, err);
}

static int coord_share(void *ctx, void *buf, size_t len,
                       struct tpl__error *err) {
  return bcast_bytes(ctx, buf, len, err);
}

static void coord_beats_begin(void *ctx) {
  beats_begin(ctx);
}

static void coord_beat(void *ctx) {
  beat(ctx);
}

static int coord_agree_after_beats(void *ctx, int rc, struct tpl__error *err) {
  return agree_after_beats(ctx, rc, err);
}

static int coord_gather(void *ctx, const void *mine, size_t len, void *all,
                        struct tpl__error *err) {
  struct engine *e = ctx;
  MPI_Request req;
  int rc;
  if (len > INT_MAX)
    return tpl__fail(err, TPL_ELIMIT, "gathering %zu bytes per rank", len);
  rc = mpi_check(MPI_Igather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE,
                             0, MPI_COMM_WORLD, &req),
                 "gathering the sink's results", err);
  return rc != 0 ? rc : wait_to_0(e, &req, "gathering the sink's results", err);
}

/* Rank 0 tells everyone; another rank asks rank 0 to tell everyone. */
static int coord_request_shutdown(void *ctx) {
  struct engine *e = ctx;
  struct tpl__error *err = NULL;
  int one = 1;
  if (e->shutdown_sent) return 0;
  e->shutdown_sent = 1;
  if (e->rank != 0)
    return mpi_check(
        MPI_Send(&one, 1, MPI_INT, 0, TAG_SHUTDOWN, MPI_COMM_WORLD), "send",
        err);
  for (uint32_t r = 1; r < e->world; r++)
    if (mpi_check(
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
  if (mpi_check(MPI_Test(&e->shutdown_req, &flag, MPI_STATUS_IGNORE), "test",
                err) != 0)
    return TPL_EPEER;
  if (flag && e->rank == 0 && coord_request_shutdown(e) != 0) return TPL_EPEER;
  e->shutdown_flag = flag;
  return flag;
}

/* --- serve's reload (coord.h) --- */

static int load(struct engine *e, int reload, struct tpl__error *err);
static void engine_free(struct engine *e);

/* Ranks > 0 listen for rank 0's word that a reload starts. */
static int reload_arm(struct engine *e, struct tpl__error *err) {
  if (e->rank == 0) return 0;
  if (mpi_check(MPI_Irecv(&e->reload_value, 1, MPI_INT, 0, TAG_RELOAD,
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
  if (mpi_check(MPI_Test(&e->reload_req_mpi, &flag, MPI_STATUS_IGNORE), "test",
                err) != 0)
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
    if (mpi_check(
            MPI_Send(&one, 1, MPI_INT, (int)r, TAG_RELOAD, MPI_COMM_WORLD),
            "send", err) != 0)
      return TPL_EPEER;
  mrc = reload_arm(e, err);
  if (mrc == 0)
    mrc = bcast_bytes(e, (uint8_t *)e->reload_req, sizeof(e->reload_req), err);
  if (mrc == 0) mrc = bcast_from_0(e, &md5, 1, MPI_INT, err);
  if (mrc != 0) return mrc;
  e->reload_o = *e->o;
  e->reload_o.verify_md5 = e->o->verify_md5 || md5;
  e->reload_o.model = e->reload_req[0];
  e->reload_o.plan = e->reload_req[1];
  memset(&e->reload_o.steps, 0, sizeof(e->reload_o.steps));
  e->reload_o.steps.store_kind = TPL_STORE_MEMFD;
  return agree(e, rc, err);
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
  if (mpi_check(MPI_Iallreduce(&mine, &teller, 1, MPI_INT, MPI_MIN,
                               MPI_COMM_WORLD, &req),
                "agreement", err) != 0)
    return TPL_EPEER;
  mrc = wait_collective(e, &req, -1, "agreement", err);
  if (mrc == 0 && teller != INT_MAX) {
    if (mpi_check(MPI_Ibcast(err->msg, (int)sizeof(err->msg), MPI_CHAR, teller,
                             MPI_COMM_WORLD, &req),
                  "broadcast", err) != 0)
      return TPL_EPEER;
    mrc = wait_collective(e, &req, teller, "broadcast", err);
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

static void generation_free(struct engine *n) {
  if (n == NULL) return;
  engine_free(n);
  free(n);
}

/* The generation in e as the sink sees it: one record, e's, valid while
 * e is. */
static const struct tpl__loaded *loaded_of(struct engine *e) {
  e->loaded = (struct tpl__loaded){e->job,          &e->store,   e->report,
                                   e->report_len,   e->plan_arg, e->job_table,
                                   e->job_table_len};
  return &e->loaded;
}

static int coord_reload(void *ctx, const char *model, const char *plan,
                        int verify_md5, const struct tpl__reload_hooks *hooks,
                        const struct tpl__loaded **next,
                        struct tpl__error *err) {
  struct engine *e = ctx, *n = NULL;
  int rc = reload_request(e, model, plan, verify_md5, err);
  if (rc == 0) {
    n = generation_new(e, hooks);
    rc = agree(e,
               n != NULL
                   ? 0
                   : tpl__fail(err, -ENOMEM, "rank %u: out of memory", e->rank),
               err);
  }
  if (rc == 0) rc = load(n, 1, err);
  if (rc == 0) rc = agree(e, tpl__store_seal(&n->store, err), err);
  if (rc == 0) {
    *next = loaded_of(n);
    rc = agree(e, hooks->ready(hooks->ctx, *next, err), err);
  }
  if (rc != 0) {
    generation_free(n);
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
  generation_free(e->old);
  e->old = NULL;
}

/* While the sink runs, rank 0 listens for any rank's request to shut
 * down, another rank for rank 0's shutdown message. */
static int shutdown_arm(struct engine *e, struct tpl__error *err) {
  int from = e->rank == 0 ? MPI_ANY_SOURCE : 0;
  if (mpi_check(MPI_Irecv(&e->shutdown_value, 1, MPI_INT, from, TAG_SHUTDOWN,
                          MPI_COMM_WORLD, &e->shutdown_req),
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
      if (mpi_check(MPI_Cancel(reqs[i]), "cancel", err) != 0) return TPL_EPEER;
      if (mpi_check(MPI_Wait(reqs[i], MPI_STATUS_IGNORE), "wait", err) != 0)
        return TPL_EPEER;
    }
  while (e->rank == 0 && flag) {
    if (mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, TAG_SHUTDOWN, MPI_COMM_WORLD,
                             &flag, &st),
                  "probe", err) != 0)
      return TPL_EPEER;
    if (flag)
      if (mpi_check(MPI_Recv(&e->shutdown_value, 1, MPI_INT, st.MPI_SOURCE,
                             TAG_SHUTDOWN, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    "receive", err) != 0)
        return TPL_EPEER;
  }
  return 0;
}

/* The sink's own sequence, with the job's coordination; a failure to
 * stop listening after a good run is the job's failure too. */
static int run_sink(struct engine *e, struct tpl__error *err) {
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
                         .retire = coord_retire};
  int rc, end;
  if (s->run == NULL) return 0;
  rc = agree(e, shutdown_arm(e, err), err);
  if (rc == 0) rc = s->run(s->ctx, loaded_of(e), &c, err);
  end = shutdown_disarm(e, rc == 0 ? err : NULL);
  /* Every rank meets once more, under the deadline, before MPI_Finalize
   * (which waits for every rank, with none): a rank stopped while
   * serving ends the job naming it instead of holding the others there
   * after --shutdown.  A failed sink has agreed on its code already. */
  if (rc == 0 && end == 0) end = agree(e, 0, err);
  return rc != 0 ? rc : end;
}

/* --- the whole job --- */

/* Every rank builds its store; a failure there is agreed on and returned,
 * and so is one of rank 0's reads (defer_failure: the stream goes on).
 * Any other failure once bytes move (MPI's, memory) strands the others
 * mid-transfer: the rank says why and ends the whole job. */
static int deliver(struct engine *e, struct tpl__error *err) {
  double t = tpl__now();
  int rc = agree(e, make_store(e, err), err);
  e->st.t_alloc = tpl__now() - t;
  if (rc != 0) return rc;
  beats_begin(e);
  if (e->o->read_local) return agree_after_beats(e, read_local(e, err), err);
  if (e->hooks != NULL) /* a reload's: the others are in the stream */
    tpl__stall_test_stop("reload-stream", e->rank);
  if (e->rank == 0)
    tpl__finisher_start(&e->finisher, e->job->ntensors, finish_own, e);
  rc = e->rank == 0 ? send_all(e, err) : receive_all(e, err);
  if (rc != 0) {
    fprintf(stderr, "tpload: rank %u: %s\n", e->rank, err->msg);
    engine_abort(tpl_exit_code(rc));
  }
  /* This rank's stream is complete: what fails from here is agreed on */
  rc = finish_store(e, err);
  if (rc == 0 && e->deferred != 0) {
    rc = e->deferred;
    *err = e->deferred_err;
  }
  /* rank 0's beats (as its reads complete) end here */
  return agree_after_beats(e, rc, err);
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
  if (mpi_check(MPI_Ireduce(&mine, max, 1, MPI_DOUBLE, MPI_MAX, 0,
                            MPI_COMM_WORLD, &req),
                "reduce", err) != 0)
    return TPL_EPEER;
  rc = wait_to_0(e, &req, "the job's time", err);
  if (rc != 0) return rc;
  if (mpi_check(MPI_Ireduce(&mine_read, &e->bytes_read, 1, MPI_UINT64_T,
                            MPI_SUM, 0, MPI_COMM_WORLD, &req),
                "reduce", err) != 0)
    return TPL_EPEER;
  return wait_to_0(e, &req, "the bytes read", err);
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

/* One generation's load into e, up to its report: the first (`reload`
 * 0: the sink checks where its output goes) or a reload's (every rank
 * checks it has room for a second store).  Every step ends in an
 * agreement, so the ranks start the clock together. */
static int load(struct engine *e, int reload, struct tpl__error *err) {
  const struct tpl__sink *s = &e->o->steps;
  double t0, seconds;
  int rc = share_job(e, err);
  if (rc == 0 && e->o->verify_md5) rc = verify_md5(e, err);
  if (rc == 0 && reload) {
    if (e->hooks->sized != NULL)
      e->hooks->sized(e->hooks->ctx, e->job->store_size);
    tpl__stall_test_stop("reload", e->rank); /* validated, nothing moved */
    rc = agree(e, tpl__store_room(e->job->store_size, e->o->huge, e->rank, err),
               err);
  } else if (rc == 0 && s->check != NULL)
    rc = agree(e, s->check(s->ctx, e->rank, err), err);
  if (rc != 0) return rc;
  t0 = tpl__now();
  rc = deliver(e, err);
  if (rc != 0) return rc;
  fill_stats(e, t0);
  tpl__stall_test_stop("report", e->rank);
  rc = agree(e, job_totals(e, e->st.seconds, &seconds, err), err);
  if (rc == 0) rc = agree(e, gather_reports(e, seconds, err), err);
  if (rc == 0 && e->rank == 0 && e->o->report)
    e->o->report(e->o->ctx, e->report, e->report_len);
  release_sources(e);
  return rc;
}

static void engine_free(struct engine *e) {
  free(e->st.file_io);
  free(e->st.file_align);
  tpl__store_free(&e->store);
  tpl__job_free(e->job);
  release_sources(e);
  free(e->report);
  free(e->job_table);
  free(e->plan_owned);
  generation_free(e->gen);
  generation_free(e->old);
}

int tpl__engine_run(const struct tpl__load_opts *o, struct tpl__error *err) {
  struct engine e = {0};
  int rank, world, rc;
  if (mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "rank", err) != 0)
    return TPL_EPEER;
  if (mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world), "size", err) != 0)
    return TPL_EPEER;
  e.o = o;
  e.rank = (uint32_t)rank;
  e.world = (uint32_t)world;
  e.store.fd = -1;
  e.chunk = o->chunk_bytes / (2 * NSLOTS) ? o->chunk_bytes / (2 * NSLOTS) : 1;
  e.shutdown_req = e.reload_req_mpi = MPI_REQUEST_NULL;
  e.plan_arg = o->plan != NULL ? o->plan : "auto";
  rc = load(&e, 0, err);
  if (rc == 0) rc = run_sink(&e, err);
  engine_free(&e);
  return rc;
}
