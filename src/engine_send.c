/* engine_send.c - rank 0's chunk into sends: its own shard gathered
 * into its store, every other holder's bytes sent to the head of its
 * chain, contiguous, packed or batched (DESIGN.md section 4.1, step 2). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "job.h"

/* Parts up to this size are batched (a copy costs less than a message). */
#define BATCH_PART_MAX (32u << 10)

/* --- rank 0: streaming and sending --- */

/* Tests slot s's sends in order up to the first in flight; whether all
 * are done. */
static int slot_test(struct slot *s) {
  while (s->tested < s->nreqs && s->mrc == MPI_SUCCESS) {
    int done = 0;
    s->mrc = MPI_Test(&s->reqs[s->tested].req, &done, MPI_STATUS_IGNORE);
    if (!done) return 0;
    s->tested += s->mrc == MPI_SUCCESS;
  }
  return s->tested == s->nreqs;
}

int tpl__eng_slot_wait(struct engine *e, struct slot *s,
                       struct tpl__error *err) {
  int rc;
  /* rank 0's window held up by its sends: the source's cue to yield */
  if (e->src != NULL && s >= e->slots && s < e->slots + NSLOTS)
    tpl__source_yield(e->src, !slot_test(s));
  rc = s->mrc != MPI_SUCCESS ? tpl__eng_mpi_check(s->mrc, "send", err)
                             : tpl__eng_wait_reqs(e, s->reqs + s->tested,
                                                  s->nreqs - s->tested, err);
  s->nreqs = s->tested = 0;
  s->mrc = MPI_SUCCESS;
  return rc;
}

void tpl__eng_slots_poke(struct engine *e) {
  for (int i = 0; i < NSLOTS; i++)
    slot_test(&e->slots[i]);
}

static int send_one(struct slot *s, const uint8_t *p, uint64_t n, int dest,
                    struct tpl__error *err) {
  struct pending *q = tpl__eng_pending_next(&s->reqs, s->nreqs, &s->cap);
  if (q == NULL) return tpl__oom(err);
  q->peer = dest;
  if (tpl__eng_mpi_check(MPI_Isend(p, (int)n, MPI_BYTE, dest, TAG_DATA,
                                   MPI_COMM_WORLD, &q->req),
                         "send", err) != 0)
    return TPL_EPEER;
  s->nreqs++;
  return 0;
}

/* To another host in messages of at most REMOTE_MSG_MAX bytes (its
 * receiver keeps receives of that size posted), else in one. */
int tpl__eng_slot_send(struct slot *s, const uint8_t *p, uint64_t n, int dest,
                       struct tpl__error *err) {
  int remote = s->remote != NULL && s->remote[dest];
  uint64_t max = remote ? REMOTE_MSG_MAX : n, at = 0;
  int rc;
  s->sent += n;
  if (remote) s->sent_remote += n;
  do {
    uint64_t len = n - at < max ? n - at : max;
    rc = send_one(s, p + at, len, dest, err);
    at += len;
  } while (rc == 0 && at < n);
  return rc;
}

/* Sends the open batch, if any. */
static int batch_flush(struct slot *s, struct tpl__error *err) {
  int dest = s->batch_dest;
  if (dest < 0) return 0;
  s->batch_dest = -1;
  return tpl__eng_slot_send(s, s->pack + s->batch_start, s->batch_len, dest,
                            err);
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
    return rc != 0 ? rc : tpl__eng_slot_send(s, s->pack + at, n, dest, err);
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
  return rc != 0 ? rc : tpl__eng_slot_send(s, p, n, dest, err);
}

/* The part of tensor `i` inside the chunk: tensor-relative [b, e) and the
 * chunk bytes holding it. */
struct piece_of_chunk {
  size_t i;
  uint64_t b, e;
  const uint8_t *src;
};

/* Own parts at least this long are read straight into rank 0's store
 * (shorter ones share the chunk's one read). */
#define DIRECT_MIN (64u << 10)

/* Whether any part of tensor i may be read straight into rank 0's store:
 * a cut tensor rank 0 holds at least DIRECT_MIN bytes of, whose shard 0
 * no other rank holds (no send needs those bytes in the chunk): no other
 * replica, and no other shard of a replicated kv head (its shards are not
 * disjoint).  Cheap: no layout. */
int tpl__eng_may_go_direct(const struct engine *e, size_t i) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  /* a file read direct lands in the (aligned) slot as a whole */
  return !e->direct && t->kind == TPL_RULE_SHARD &&
         t->rank_stored >= DIRECT_MIN && tpl__job_holds(e->job, i, 0) &&
         tpl__eng_chain_head(e, i, 0) < 0 &&
         tpl__shard_replicas(&t->spec, e->job->grid.tp) == 1;
}

/* Rank 0's own part of tensor i within its source range [b, end) when it
 * is read straight into rank 0's store (tpl__eng_may_go_direct, and the part
 * there is one contiguous range of at least DIRECT_MIN bytes).  Returns its
 * length, 0 when it is not, with its start in *start. */
uint64_t tpl__eng_own_direct(const struct engine *e, size_t i,
                             const struct tpl__layout *l0, uint64_t b,
                             uint64_t end, uint64_t *start) {
  uint64_t n;
  if (!tpl__eng_may_go_direct(e, i)) return 0;
  n = tpl__layout_contiguous(l0, b, end, start);
  return n != UINT64_MAX && n >= DIRECT_MIN ? n : 0;
}

/* Rank 0 keeps its own shard of a tensor its stage holds (read_chunk put
 * a direct part in place already). */
static int gather_own(struct engine *e, const struct piece_of_chunk *pc,
                      const struct tpl__layout *l, uint64_t *own,
                      struct tpl__error *err) {
  const struct tpl__job_tensor *jt = &e->job->tensors[pc->i];
  uint64_t start,
      direct = tpl__eng_own_direct(e, pc->i, l, pc->b, pc->e, &start);
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
  uint32_t nshards =
      tpl__eng_chain_step(e, pc->i); /* T for a cut tensor, else 1 */
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

/* Every byte of a tensor is gathered exactly once; a shortfall here would
 * be a wrong shard, so it stops the job instead. */
int tpl__eng_check_own(const struct engine *e, const struct file_walk *w,
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
  rc = tpl__eng_check_own(e, w, err);
  for (uint32_t t = 0; rc == 0 && t < e->job->grid.tp; t++) {
    rc = tpl__job_layout(e->job, i, t, &w->layouts[t]);
    if (rc != 0)
      rc = tpl__fail(err, rc, "tensor '%s': layout for shard %u: %s",
                     e->job->tensors[i].name, t, tpl_strerror(rc));
    w->dests[t] = tpl__eng_chain_head(e, i, t);
  }
  w->cur = i;
  w->own = 0;
  return rc;
}

/* Delivers the chunk's pieces, then lets rank 0's finisher have every
 * tensor whose last byte was in the chunk. */
int tpl__eng_deliver_chunk(struct engine *e, struct slot *s,
                           struct file_walk *w, uint64_t pos, uint64_t len,
                           struct tpl__error *err) {
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
