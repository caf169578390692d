/* engine_recv.c - ranks > 0: each held tensor received from its
 * predecessor in source order, batches taken apart from an inbox, each
 * part forwarded down the chain (DESIGN.md section 4.1, step 3). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "job.h"
#include "stall.h"

/* Receives kept posted for a sender on another host.  Open MPI's ob1
 * answers a large message's rendezvous when a receive matches it, and
 * the answer crosses the sender's inbound link behind whatever else it
 * carries (rank 0's GETs from a URL); with a few receives posted the
 * next messages' answers go out while this one flows, instead of one
 * round trip per message. */
#define NPOSTED 4

struct posted {
  uint8_t *buf; /* NPOSTED buffers of REMOTE_MSG_MAX bytes */
  MPI_Request req[NPOSTED];
  int head;    /* the oldest receive */
  int reading; /* head's receive is done and its buffer the inbox's */
};

/* A sender's stream on a receiver: the part of a batch that belongs to
 * later tensors; from another host, every message (through ring). */
struct inbox {
  uint8_t *buf; /* a batch from this host */
  size_t cap;
  const uint8_t *data; /* the message being taken apart */
  uint64_t pos, len;
  struct posted *ring; /* from another host, once heard from */
};

/* --- ranks > 0: receiving --- */

/* Waits for the next message from `from` and its size: probed (req
 * NULL, into *msg) or received by the posted *req; polling like
 * tpl__eng_wait_reqs() (and ending the job the same way when it stalls);
 * a beat from `from` (rank 0 beats as its reads complete) is progress
 * too. */
static int await_message(struct engine *e, int from, MPI_Request *req,
                         MPI_Message *msg, int *n, struct tpl__error *err) {
  struct tpl__stall st;
  MPI_Status status;
  int flag = 0;
  tpl__stall_start(&st, e->o->stall_timeout);
  for (;;) {
    double heard_from = e->beats.heard[from];
    int heard = 0;
    int mrc = req != NULL ? MPI_Test(req, &flag, &status)
                          : MPI_Improbe(from, TAG_DATA, MPI_COMM_WORLD, &flag,
                                        msg, &status);
    if (tpl__eng_mpi_check(mrc, req != NULL ? "receive" : "probe", err) != 0)
      return TPL_EPEER;
    if (flag) break;
    if (tpl__eng_mpi_check(tpl__beats_hear(&e->beats, &heard), "heartbeat",
                           err) != 0)
      return TPL_EPEER;
    if (heard && e->beats.heard[from] != heard_from)
      tpl__stall_progress(&st);
    else if (tpl__stall_idle(&st))
      tpl__eng_stall_abort(e, from, "receive", &st);
  }
  if (tpl__eng_mpi_check(MPI_Get_count(&status, MPI_BYTE, n), "receive", err) !=
      0)
    return TPL_EPEER;
  return 0;
}

static int take_message(struct engine *e, MPI_Message *msg, uint8_t *dst, int n,
                        int from, struct tpl__error *err) {
  struct pending p = {MPI_REQUEST_NULL, from};
  if (tpl__eng_mpi_check(MPI_Imrecv(dst, n, MPI_BYTE, msg, &p.req), "receive",
                         err) != 0)
    return TPL_EPEER;
  return tpl__eng_wait_reqs(e, &p, 1, err);
}

static int inbox_fill(struct engine *e, struct inbox *in, MPI_Message *msg,
                      int n, int from, struct tpl__error *err) {
  if ((size_t)n > in->cap) {
    uint8_t *b = realloc(in->buf, (size_t)n);
    if (b == NULL) return tpl__oom(err);
    in->buf = b;
    in->cap = (size_t)n;
  }
  in->data = in->buf;
  in->pos = 0;
  in->len = (uint64_t)n;
  return take_message(e, msg, in->buf, n, from, err);
}

/* The next message from `from` on this host: straight into dst (*got
 * its size, the inbox left empty) when it is no longer than `want`
 * (then it is this tensor's alone: a batch always holds the whole rest
 * of its first part's tensor and more), else into the inbox. */
static int local_next(struct engine *e, struct inbox *in, int from,
                      uint8_t *dst, uint64_t want, uint64_t *got,
                      struct tpl__error *err) {
  MPI_Message msg;
  int n = 0;
  int rc = await_message(e, from, NULL, &msg, &n, err);
  if (rc == 0 && (uint64_t)n <= want) {
    *got = (uint64_t)n;
    return take_message(e, &msg, dst, n, from, err);
  }
  return rc != 0 ? rc : inbox_fill(e, in, &msg, n, from, err);
}

static int ring_post(struct posted *r, int k, int from,
                     struct tpl__error *err) {
  return tpl__eng_mpi_check(MPI_Irecv(r->buf + (size_t)k * REMOTE_MSG_MAX,
                                      REMOTE_MSG_MAX, MPI_BYTE, from, TAG_DATA,
                                      MPI_COMM_WORLD, &r->req[k]),
                            "receive", err) != 0
             ? TPL_EPEER
             : 0;
}

static int ring_open(struct inbox *in, int from, struct tpl__error *err) {
  struct posted *r = calloc(1, sizeof(*r));
  int rc = 0;
  if (r != NULL) r->buf = malloc((size_t)NPOSTED * REMOTE_MSG_MAX);
  if (r == NULL || r->buf == NULL) {
    free(r);
    return tpl__oom(err);
  }
  for (int k = 0; k < NPOSTED; k++)
    r->req[k] = MPI_REQUEST_NULL;
  in->ring = r;
  for (int k = 0; rc == 0 && k < NPOSTED; k++)
    rc = ring_post(r, k, from, err);
  return rc;
}

/* The next message from `from` on another host into the inbox: the
 * buffer just taken apart posted again, the oldest receive waited for
 * (every message from there is at most REMOTE_MSG_MAX bytes). */
static int ring_next(struct engine *e, struct inbox *in, int from,
                     struct tpl__error *err) {
  struct posted *r;
  int n = 0, rc = in->ring == NULL ? ring_open(in, from, err) : 0;
  if (rc != 0) return rc;
  r = in->ring;
  if (r->reading) {
    rc = ring_post(r, r->head, from, err);
    r->head = (r->head + 1) % NPOSTED;
    r->reading = 0;
  }
  if (rc == 0) rc = await_message(e, from, &r->req[r->head], NULL, &n, err);
  if (rc != 0) return rc;
  r->reading = 1;
  in->data = r->buf + (size_t)r->head * REMOTE_MSG_MAX;
  in->pos = 0;
  in->len = (uint64_t)n;
  return 0;
}

/* Up to `want` bytes of the stream from `from` into dst, *got of them:
 * what is left of the message in the inbox, else the next one's. */
static int receive_some(struct engine *e, struct inbox *in, int from,
                        uint8_t *dst, uint64_t want, uint64_t *got,
                        struct tpl__error *err) {
  *got = 0;
  if (in->pos == in->len) {
    int rc = e->remote[from] ? ring_next(e, in, from, err)
                             : local_next(e, in, from, dst, want, got, err);
    if (rc != 0 || in->pos == in->len) return rc; /* or straight into dst */
  }
  *got = in->len - in->pos < want ? in->len - in->pos : want;
  memcpy(dst, in->data + in->pos, (size_t)*got);
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
  int from = tpl__eng_predecessor(e, i, e->rank);
  uint64_t got = 0, n;
  int rc =
      tpl__store_prepare(&e->store, jt->store_offset + jt->rank_bytes, err);
  while (rc == 0 && got < jt->rank_stored) {
    rc = receive_some(e, &in[from], from, dst + got, jt->rank_stored - got, &n,
                      err);
    if (rc == 0 && n == 0)
      rc = tpl__fail(err, TPL_EPEER, "tensor '%s': empty message", jt->name);
    if (rc == 0 && e->remote[from]) e->st.bytes_in_remote += n;
    if (rc == 0 && to >= 0) rc = tpl__eng_slot_send(fwd, dst + got, n, to, err);
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

/* Cancels the receives still posted for `from`: after a load (ok) one
 * that matched a message is bytes beyond the last tensor; after a
 * failure one not done yet may still be written into, so its buffer is
 * left alone (the job ends). */
static int ring_close(struct posted *r, uint32_t from, int ok,
                      struct tpl__error *err) {
  int rc = 0, busy = 0;
  for (int k = 0; k < NPOSTED; k++) {
    MPI_Status st;
    int done = 1, cancelled = 1, n = 0;
    if (r->req[k] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r->req[k]);
    if (ok)
      MPI_Wait(&r->req[k], &st);
    else
      MPI_Test(&r->req[k], &done, &st);
    if (done) MPI_Test_cancelled(&st, &cancelled);
    busy |= !done;
    if (done && !cancelled && rc == 0) {
      MPI_Get_count(&st, MPI_BYTE, &n);
      rc = tpl__fail(err, TPL_EPEER,
                     "%d bytes from rank %u arrived beyond the last tensor", n,
                     from);
    }
  }
  if (!busy) free(r->buf);
  free(r);
  return rc;
}

int tpl__eng_receive_all(struct engine *e, struct tpl__error *err) {
  struct slot fwd = {.remote = e->remote};
  struct inbox *in = calloc(e->world, sizeof(*in));
  double t = tpl__now();
  int rc = in != NULL ? 0 : tpl__oom(err);
  tpl__stall_test_stop("deliver", e->rank);
  for (size_t i = 0; rc == 0 && i < e->job->ntensors; i++) {
    int to;
    if (!tpl__job_holds(e->job, i, e->rank)) continue;
    to = tpl__eng_successor(e, i);
    rc = receive_tensor(e, i, in, &fwd, to, err);
    /* a tensor that cannot be finished fails the load after the stream */
    if (rc == 0 && to < 0 && e->deferred == 0)
      e->deferred = tpl__eng_finish_tensor(e, i, &e->deferred_err);
    /* Forwarded parts stay in the store, so only the requests pile up. */
    if (rc == 0 && fwd.nreqs >= 1024) rc = tpl__eng_slot_wait(e, &fwd, err);
  }
  if (rc == 0) rc = tpl__eng_slot_wait(e, &fwd, err);
  if (rc == 0) rc = inboxes_empty(e, in, err);
  e->st.bytes_sent = fwd.sent;
  e->st.bytes_out_remote = fwd.sent_remote;
  free(fwd.reqs);
  for (uint32_t k = 0; in != NULL && k < e->world; k++) {
    int crc = in[k].ring != NULL ? ring_close(in[k].ring, k, rc == 0, err) : 0;
    if (rc == 0) rc = crc;
    free(in[k].buf);
  }
  free(in);
  e->st.t_recv = tpl__now() - t - e->st.t_scale - e->st.t_hash;
  return rc;
}
