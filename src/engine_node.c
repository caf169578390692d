/* engine_node.c - --read local from a MODEL's URL, node-aware: bytes
 * that several ranks of one node hold alike (a tensor that is not cut,
 * a shard held by the node's replicas or stages) enter the node once.
 * One of those ranks fetches them, the node's holders taking turns
 * tensor by tensor, and hands them to the others over the node's shared
 * memory once every rank's reads are agreed on (DESIGN.md section 4.1,
 * `--read local`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "origin.h"
#include "stall.h"

/* Messages of a tensor's bytes are at most this long (MPI counts are
 * ints). */
#define NODE_PART ((uint64_t)1 << 30)

int tpl__eng_node_shares(const struct engine *e) {
  return e->local && tpl__job_origin(e->job) != &tpl__origin_local;
}

/* Tensor i's turn on this node: who fetches it, of how many holders. */
struct node_turn {
  uint32_t reader, holders;
};

/* Some tensors' holders on this node (the same ranks for each), and the
 * bytes each of them was given to fetch so far. */
struct holders {
  uint32_t n;
  uint32_t *ranks;
  uint64_t *given;
};

static void holders_free(struct holders *hs, size_t len) {
  for (size_t k = 0; k < len; k++) {
    free(hs[k].ranks);
    free(hs[k].given);
  }
  free(hs);
}

/* The entry of the n ranks in e->mates among hs[0..*len), added when
 * new; NULL when out of memory. */
static struct holders *holders_of(const struct engine *e, struct holders **hs,
                                  size_t *len, uint32_t n) {
  struct holders *g;
  for (size_t k = 0; k < *len; k++)
    if ((*hs)[k].n == n &&
        memcmp((*hs)[k].ranks, e->mates, n * sizeof(*e->mates)) == 0)
      return &(*hs)[k];
  g = realloc(*hs, (*len + 1) * sizeof(**hs));
  if (g == NULL) return NULL;
  *hs = g;
  g = &g[*len];
  g->n = n;
  g->ranks = malloc(n * sizeof(*g->ranks));
  g->given = calloc(n, sizeof(*g->given));
  (*len)++; /* freed with the others even when half made */
  if (g->ranks == NULL || g->given == NULL) return NULL;
  memcpy(g->ranks, e->mates, n * sizeof(*e->mates));
  return g;
}

/* The holder given the fewest bytes so far (the first of equals), given
 * `bytes` more. */
static uint32_t take_turn(struct holders *g, uint64_t bytes) {
  uint32_t least = 0;
  for (uint32_t k = 1; k < g->n; k++)
    if (g->given[k] < g->given[least]) least = k;
  g->given[least] += bytes;
  return g->ranks[least];
}

int tpl__eng_node_turns(struct engine *e, struct tpl__error *err) {
  struct holders *hs = NULL;
  size_t len = 0;
  free(e->turns);
  e->turns = calloc(e->job->ntensors ? e->job->ntensors : 1, sizeof(*e->turns));
  if (e->turns == NULL) return tpl__oom(err);
  for (size_t i = 0; i < e->job->ntensors; i++) {
    struct node_turn *t = &e->turns[i];
    struct holders *g;
    t->reader = e->rank;
    if (!tpl__job_holds(e->job, i, e->rank)) continue;
    t->holders = tpl__eng_node_holders(e, i, e->mates);
    if (t->holders < 2) continue;
    g = holders_of(e, &hs, &len, t->holders);
    if (g == NULL) {
      holders_free(hs, len);
      return tpl__oom(err);
    }
    t->reader = take_turn(g, e->job->tensors[i].rank_stored);
  }
  holders_free(hs, len);
  return 0;
}

/* The rank of this node that fetches tensor i (held here) for this
 * rank, and in *n how many of the node's ranks hold its bytes. */
static uint32_t reader_of(const struct engine *e, size_t i, uint32_t *n) {
  *n = e->turns[i].holders;
  return e->turns[i].reader;
}

/* Whether this rank fetches tensor i (held here) for other ranks of its
 * node. */
static int lends(const struct engine *e, size_t i) {
  uint32_t n;
  return reader_of(e, i, &n) == e->rank && n > 1;
}

int tpl__eng_node_skips(void *ctx, size_t i) {
  const struct engine *e = ctx;
  uint32_t n;
  return reader_of(e, i, &n) != e->rank;
}

int tpl__eng_node_finish(void *ctx, size_t i, struct tpl__error *err) {
  struct engine *e = ctx;
  /* what it lends goes as fetched: each holder finishes its own copy */
  return lends(e, i) ? 0 : tpl__eng_finish_own(ctx, i, err);
}

/* Posts tensor i's bytes in this rank's store to `peer` (send) or from
 * it (receive: its place was populated as the reads skipped it),
 * NODE_PART at a time, onto *reqs. */
static int post(struct engine *e, size_t i, int peer, int send,
                struct pending **reqs, size_t *n, size_t *cap,
                struct tpl__error *err) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  uint8_t *p = e->store.base + t->store_offset;
  for (uint64_t off = 0; off < t->rank_stored; off += NODE_PART) {
    int len = (int)(t->rank_stored - off < NODE_PART ? t->rank_stored - off
                                                     : NODE_PART);
    struct pending *q = tpl__eng_pending_next(reqs, *n, cap);
    if (q == NULL) return tpl__oom(err);
    q->peer = peer;
    if (tpl__eng_mpi_check(send ? MPI_Isend(p + off, len, MPI_BYTE, peer,
                                            TAG_NODE, MPI_COMM_WORLD, &q->req)
                                : MPI_Irecv(p + off, len, MPI_BYTE, peer,
                                            TAG_NODE, MPI_COMM_WORLD, &q->req),
                           "handing over on the node", err) != 0)
      return TPL_EPEER;
    (*n)++;
  }
  if (send) e->st.bytes_sent += t->rank_stored;
  return 0;
}

/* Posts every hand-over of this rank: what it lends to each of the other
 * holders, what it is lent from the rank that fetched it. */
static int post_all(struct engine *e, struct pending **reqs, size_t *n,
                    size_t *cap, struct tpl__error *err) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < e->job->ntensors; i++) {
    uint32_t k, r;
    if (!tpl__job_holds(e->job, i, e->rank)) continue;
    r = reader_of(e, i, &k);
    if (r != e->rank) {
      rc = post(e, i, (int)r, 0, reqs, n, cap, err);
      continue;
    }
    if (k < 2) continue; /* nobody else holds it here */
    k = tpl__eng_node_holders(e, i, e->mates);
    for (uint32_t j = 0; rc == 0 && j < k; j++)
      if (e->mates[j] != e->rank)
        rc = post(e, i, (int)e->mates[j], 1, reqs, n, cap, err);
  }
  return rc;
}

/* Once every hand-over is done: each holder finishes (decodes, scales,
 * hashes) what it was lent and what it lent before finishing it, beating:
 * the others may be done and waiting for it. */
static int finish_shared(struct engine *e, struct tpl__error *err) {
  for (size_t i = 0; i < e->job->ntensors; i++) {
    uint32_t n;
    int rc;
    if (!tpl__job_holds(e->job, i, e->rank)) continue;
    if (reader_of(e, i, &n) == e->rank &&
        (n < 2 || tpl__job_bytes_final(e->job, i)))
      continue; /* finished as it was read */
    tpl__stall_test_slow_at("finish-shared", e->rank);
    tpl__eng_beat(e);
    rc = tpl__eng_finish_tensor(e, i, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int tpl__eng_node_share(struct engine *e, struct tpl__error *err) {
  struct pending *reqs = NULL;
  size_t n = 0, cap = 0;
  double t0 = tpl__now();
  int rc = post_all(e, &reqs, &n, &cap, err);
  if (rc == 0) rc = tpl__eng_wait_reqs(e, reqs, n, err);
  e->st.t_recv += tpl__now() - t0;
  free(reqs);
  if (rc != 0) { /* a request half posted strands its peer */
    fprintf(stderr, "tpload: rank %u: %s\n", e->rank, err->msg);
    tpl__eng_abort(tpl_exit_code(rc));
  }
  return finish_shared(e, err);
}
