/* engine_internal.h - the engine's private header (libuv's
 * src/unix/internal.h): struct engine, rank 0's slots, and the functions
 * the engine's files share.  Included only by src/engine*.c, the unit
 * that sees mpi.h (DESIGN.md section 4); how they move bytes is section
 * 4.1. */
#ifndef TPL_ENGINE_INTERNAL_H
#define TPL_ENGINE_INTERNAL_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "beat.h"
#include "common.h"
#include "coord.h"
#include "engine.h"
#include "finisher.h"
#include "job.h"
#include "report.h"
#include "shardinfo.h"
#include "source.h"
#include "source_http.h"
#include "stall.h"
#include "store.h"

enum { TAG_DATA = 1, TAG_SHUTDOWN = 2, TAG_RELOAD = 4, TAG_NODE = 5 };
/* beat.c: 3 */

/* Messages to a rank on another host are cut at this size, so that the
 * receiver can keep a few receives of it posted (engine_recv.c). */
#define REMOTE_MSG_MAX (1u << 20)

/* A request in flight and the rank it talks to. */
struct pending {
  MPI_Request req;
  int peer;
};

/* One slot of rank 0's window: a chunk's read and pack buffers, its read
 * in flight and its sends. */
struct slot {
  uint8_t *read; /* the chunk's read buffer (chunk + the source's slack) */
  uint8_t *data; /* where the chunk's first byte is in it */
  uint8_t *pack;
  struct tpl__read rd; /* the chunk's read while in flight (direct) */
  int reading;         /* the chunk is read (not after a failed read) */
  uint64_t pos, len;   /* the chunk: file bytes [pos, pos + len) */
  struct pending *reqs;
  size_t nreqs, cap;
  size_t tested;         /* reqs[0, tested) completed (tpl__eng_slots_poke) */
  int mrc;               /* MPI's failure of a poke's test, MPI_SUCCESS */
  uint64_t sent;         /* bytes of every send so far */
  const uint8_t *remote; /* world flags: rank r is on another host */
  uint64_t sent_remote;  /* bytes of the sends to other hosts */
  int batch_dest;        /* the rank of the open batch, -1 when none */
  uint64_t batch_start;  /* the open batch: pack[start, start + len) */
  uint64_t batch_len;
};

/* Rank 0's window (--chunk-mib) is NSLOTS slots of a read and a pack
 * buffer of one chunk each: while one chunk is delivered the reads of
 * the next NSLOTS - 2 are in flight, and the slot delivered before has
 * time for its sends to complete. */
#define NSLOTS 4

struct engine {
  const struct tpl__load_opts *o;
  uint32_t rank, world;
  struct tpl__model *model; /* rank 0 */
  struct tpl__plan *plan;   /* rank 0 */
  struct tpl__job *job;
  struct tpl__store store;
  struct tpl__rank_stats st;
  uint64_t bytes_read;
  uint64_t gets;    /* requests the sources made (HTTP: GETs) */
  uint8_t *remote;  /* world flags: rank r's host is not this rank's */
  char *hosts;      /* world host names, sizeof(st.host) bytes apart */
  uint32_t *chains; /* 5 * world (tpl__eng_map_hosts): each rank's node
                       (its first rank), tpl__node_order's order with
                       stride 1 and T, then its place with 1 and T */
  uint32_t *mates;  /* world: a node's holders of a tensor (engine_node.c) */
  struct node_turn *turns; /* ntensors, under --read local from a URL:
                              who of the node fetches each (engine_node.c) */
  int watching;      /* serve's watch runs over `beats` (engine_reload.c) */
  double watch_last; /* when the loop last looked */
  double watch_back; /* when it came back from a pause of over a beat */
  uint8_t *report;   /* rank 0: packed LoadReport */
  size_t report_len;
  uint8_t *job_table; /* rank 0: the packed job table it broadcast */
  size_t job_table_len;
  /* Every rank: the job's fingerprint from rank 0's report (shardinfo.h),
   * "" before the report. */
  char fingerprint[TPL_FINGERPRINT_LEN + 1];
  struct tpl__loaded loaded; /* what the sink is handed (loaded_of) */
  struct slot slots[NSLOTS];
  uint64_t chunk;  /* a slot's buffers hold one */
  uint8_t *window; /* every slot's buffers, window_len bytes */
  uint64_t window_len;
  struct tpl__source *src; /* rank 0's, or every rank's with --read local */
  struct tpl__source_url *urls; /* a MODEL URL's files, for src */
  int direct;                   /* the file streamed now is read direct */
  int read_mode; /* rank 0's --read: enum tpl__read_mode (share_job) */
  int read_asks; /* rank 0's tpl__eng_auto_asks (share_job) */
  struct tpl__fdcache *probed; /* a rank > 0's files, opened to find them
                                  warm, for its local reads */
  int local; /* this generation: every rank reads its own slices (--read
            local, or auto's choice: tpl__eng_choose_read) */
  struct tpl__finisher finisher; /* rank 0's (tpl__eng_finish_own) */
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

/* Rank 0's walk over one file's tensors: engine_read.c's stream, the
 * delivery of engine_send.c. */
struct file_walk {
  size_t first, end; /* tensors [first, end) live in this file */
  size_t scan;       /* first tensor that may still have unread bytes */
  size_t cur;        /* tensor whose layouts are cached */
  uint64_t own;      /* bytes of tensor `cur` rank 0 already holds */
  uint64_t done;     /* tensor bytes delivered so far (all files) */
  struct tpl__layout *layouts; /* grid.tp entries: shard t's layout */
  int *dests; /* grid.tp entries: the head of shard t's chain, or -1 */
};

/* --- engine_core.c: checks, waits, agreements, chains, finishing --- */

/* 0 for MPI_SUCCESS, else TPL_EPEER with MPI's words for `what` in err
 * (may be NULL). */
int tpl__eng_mpi_check(int mrc, const char *what, struct tpl__error *err);

/* Ends the whole job with exit code `code` (MPI_Abort); never returns. */
void tpl__eng_abort(int code);

/* `fn(arg)` runs in tpl__eng_abort before the job ends (NULL: none). */
void tpl__eng_on_abort(void (*fn)(void *), void *arg);

/* Says which rank (`peer`, or -1: any at step `what`) went quiet for
 * --stall-timeout and ends the job; never returns. */
void tpl__eng_stall_abort(const struct engine *e, int peer, const char *what,
                          const struct tpl__stall *st);

/* Waits for nonblocking collective *req under --stall-timeout (`peer`:
 * the rank waited for, or -1); 0 or TPL_EPEER. */
int tpl__eng_wait_collective(const struct engine *e, MPI_Request *req, int peer,
                             const char *what, struct tpl__error *err);

/* Waits for `n` requests in order under --stall-timeout, naming the
 * stalled one's peer; 0 or TPL_EPEER. */
int tpl__eng_wait_reqs(struct engine *e, struct pending *reqs, size_t n,
                       struct tpl__error *err);

/* The entry after the n in use of a growing array of requests (*reqs,
 * *cap allocated), grown when full; NULL when out of memory. */
struct pending *tpl__eng_pending_next(struct pending **reqs, size_t n,
                                      size_t *cap);

/* Rank 0's `count` items at buf to every rank; 0 or TPL_EPEER. */
int tpl__eng_bcast_from_0(const struct engine *e, void *buf, int count,
                          MPI_Datatype type, struct tpl__error *err);

/* Rank 0's `n` bytes at buf (allocated by every rank) to every rank, in
 * int-sized parts; 0 or TPL_EPEER. */
int tpl__eng_bcast_bytes(const struct engine *e, uint8_t *buf, uint64_t n,
                         struct tpl__error *err);

/* The worst of every rank's rc (the same on every rank; only the rank
 * that failed keeps its message in err). */
int tpl__eng_agree(const struct engine *e, int rc, struct tpl__error *err);

/* An agreement inside a step of heartbeats, which goes on: a rank waits
 * for the others under the stall deadline their beats move. */
int tpl__eng_agree_hearing(struct engine *e, int rc, struct tpl__error *err);

/* tpl__eng_agree after a step that beat (beat.h): waits under the
 * deadline the others' heartbeats move, then closes this rank's beats. */
int tpl__eng_agree_after_beats(struct engine *e, int rc,
                               struct tpl__error *err);

/* Rank 0 validates, every rank gets the verdict and the job table
 * (e->job) and places its store; agreed. */
int tpl__eng_share_job(struct engine *e, struct tpl__error *err);

/* How many ranks apart the holders of tensor i's chain are (T or 1). */
uint32_t tpl__eng_chain_step(const struct engine *e, size_t i);

/* The first holder of shard t of tensor i other than 0, or -1. */
int tpl__eng_chain_head(const struct engine *e, size_t i, uint32_t t);

/* The rank holder r (> 0) of tensor i receives it from. */
int tpl__eng_predecessor(const struct engine *e, size_t i, uint32_t r);

/* The rank this rank forwards tensor i to, or -1. */
int tpl__eng_successor(const struct engine *e, size_t i);

/* The ranks of this rank's node that hold the bytes it holds of tensor i
 * (its chain's ranks on its node: this rank among them when it holds
 * i), in node order, into out (room for a node's ranks); their count. */
uint32_t tpl__eng_node_holders(const struct engine *e, size_t i, uint32_t *out);

/* Decodes, scales and hashes tensor i in this rank's store; 0 or < 0. */
int tpl__eng_finish_tensor(struct engine *e, size_t i, struct tpl__error *err);

/* The finisher's step (finisher.h; ctx: the engine): tensor i if held. */
int tpl__eng_finish_own(void *ctx, size_t i, struct tpl__error *err);

/* After the stream: rank 0 joins its finisher, a receiver finishes the
 * tensors it forwarded; 0 or < 0. */
int tpl__eng_finish_store(struct engine *e, struct tpl__error *err);

/* Starts this rank's heartbeats; out of memory ends the job. */
void tpl__eng_beats_begin(struct engine *e);

/* A heartbeat when one is due; an MPI failure ends the job. */
void tpl__eng_beat(struct engine *e);

/* Finds this process's node (MPI_COMM_TYPE_SHARED) once, at start: a
 * blocking collective, like MPI_Init; 0 or TPL_EPEER. */
int tpl__eng_find_node(uint32_t rank, struct tpl__error *err);

/* Fills e->hosts and e->remote from every rank's host name, and
 * e->chains from every rank's node (all-gathers under --stall-timeout);
 * 0, -ENOMEM or TPL_EPEER.  Collective; e->job is known. */
int tpl__eng_map_hosts(struct engine *e, struct tpl__error *err);

/* Waits for a collective rooted at rank 0 under --stall-timeout. */
int tpl__eng_wait_to_0(const struct engine *e, MPI_Request *req,
                       const char *what, struct tpl__error *err);

/* --- engine_send.c: rank 0's chunk into sends --- */

/* Waits for the slot's sends, then forgets them; 0 or TPL_EPEER. */
int tpl__eng_slot_wait(struct engine *e, struct slot *s,
                       struct tpl__error *err);

/* Tests the sends of every slot in order up to the first in flight:
 * rank 0's sends move only inside MPI calls, so it calls this while it
 * waits on a remote source (source.h's idle hook). */
void tpl__eng_slots_poke(struct engine *e);

/* Sends `n` bytes at p (kept until tpl__eng_slot_wait) to `dest`, the
 * requests kept in the slot (one, or to another host one per
 * REMOTE_MSG_MAX bytes); 0, or < 0 (out of memory, MPI). */
int tpl__eng_slot_send(struct slot *s, const uint8_t *p, uint64_t n, int dest,
                       struct tpl__error *err);

/* Whether part of tensor i may be read straight into rank 0's store. */
int tpl__eng_may_go_direct(const struct engine *e, size_t i);

/* The length of rank 0's own direct part of tensor i in [b, end) (its
 * start in *start), or 0 when it is read through the chunk. */
uint64_t tpl__eng_own_direct(const struct engine *e, size_t i,
                             const struct tpl__layout *l0, uint64_t b,
                             uint64_t end, uint64_t *start);

/* TPL_EINTERNAL when rank 0 gathered less of tensor w->cur than its
 * shard, else 0. */
int tpl__eng_check_own(const struct engine *e, const struct file_walk *w,
                       struct tpl__error *err);

/* The chunk [pos, pos + len) in slot s to every holder and rank 0's
 * store, its complete tensors to the finisher; 0 or < 0. */
int tpl__eng_deliver_chunk(struct engine *e, struct slot *s,
                           struct file_walk *w, uint64_t pos, uint64_t len,
                           struct tpl__error *err);

/* --- engine_read.c: sources, rank 0's stream, --read local, md5 --- */

/* Rank 0's whole stream: opens the source, reads and delivers every
 * file, closes; 0 or < 0 (the others are stranded: the caller aborts). */
int tpl__eng_send_all(struct engine *e, struct tpl__error *err);

/* Rank 0, once the job is built: whether --read auto asks the other
 * ranks' page caches (local files read with --io auto, every one warm
 * on rank 0; never a URL's or a presharded MODEL's). */
int tpl__eng_auto_asks(const struct engine *e);

/* --read: sets e->local on every rank (auto: whether every rank finds
 * every file warm in its page cache); collective, 0 or TPL_EPEER. */
int tpl__eng_choose_read(struct engine *e, struct tpl__error *err);

/* --read local: this rank reads its own slices into its store; 0 or < 0
 * (to be agreed on). */
int tpl__eng_read_local(struct engine *e, struct tpl__error *err);

/* --- engine_node.c: --read local from a URL, a node's bytes once --- */

/* Whether the node's ranks share what they fetch: --read local from a
 * MODEL's URL (every rank decides alike from the job). */
int tpl__eng_node_shares(const struct engine *e);

/* Whose turn it is to fetch each tensor this rank holds: the holder of
 * its bytes on this node given the fewest bytes so far, among the
 * tensors those same holders share (every one of them decides alike).
 * Before the reads; 0 or -ENOMEM. */
int tpl__eng_node_turns(struct engine *e, struct tpl__error *err);

/* local_read's skip (ctx: the engine): tensor i, held, is fetched by
 * another rank of this node. */
int tpl__eng_node_skips(void *ctx, size_t i);

/* local_read's finish (ctx: the engine): tensor i as tpl__eng_finish_own
 * does, unless this rank fetched it for others (then tpl__eng_node_share
 * finishes it after handing it over). */
int tpl__eng_node_finish(void *ctx, size_t i, struct tpl__error *err);

/* After every rank's local reads are agreed on (tpl__eng_agree_hearing:
 * the reads' heartbeats go on): each rank hands what it fetched for its
 * node's other ranks to them and takes what they fetched for it, under
 * --stall-timeout, then finishes those tensors, beating.  0 or what
 * finishing returned; an MPI failure ends the job. */
int tpl__eng_node_share(struct engine *e, struct tpl__error *err);

/* --verify-md5: rank 0's pass over the files before any byte moves;
 * agreed. */
int tpl__eng_verify_md5(struct engine *e, struct tpl__error *err);

/* --- engine_recv.c: ranks > 0 --- */

/* Receives (and forwards down its chains) every tensor this rank holds;
 * 0 or < 0 (the caller aborts). */
int tpl__eng_receive_all(struct engine *e, struct tpl__error *err);

/* --- engine_gen.c: one generation --- */

/* One generation's load into e up to its report (`reload`: a reload's,
 * with e->hooks); 0 or the agreed code. */
int tpl__eng_load(struct engine *e, int reload, struct tpl__error *err);

/* Frees what e owns (not e), its successor generations too. */
void tpl__eng_free(struct engine *e);

/* tpl__eng_free, then frees n itself; n may be NULL. */
void tpl__eng_generation_free(struct engine *n);

/* --- engine_reload.c: the sink's run (coord.h) and serve's reloads --- */

/* Runs the sink's own steps with the job's coordination (coord.h);
 * 0 or the agreed code. */
int tpl__eng_run_sink(struct engine *e, struct tpl__error *err);

#endif
