/* engine_recv.c - ranks > 0: each held tensor received from its
 * predecessor in source order, batches taken apart from an inbox, each
 * part forwarded down the chain (DESIGN.md section 4.1, step 3). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "job.h"
#include "stall.h"

/* The part of a batch that belongs to later tensors, on a receiver. */
struct inbox {
  uint8_t *buf;
  size_t cap;
  uint64_t pos, len;
};

/* --- ranks > 0: receiving --- */

/* Waits for the next message from `from` and its size, polling like
 * tpl__eng_wait_reqs() (and ending the job the same way when it stalls); a beat
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
    if (tpl__eng_mpi_check(
            MPI_Improbe(from, TAG_DATA, MPI_COMM_WORLD, &flag, msg, &status),
            "probe", err) != 0)
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
  for (uint32_t k = 0; in != NULL && k < e->world; k++)
    free(in[k].buf);
  free(in);
  e->st.t_recv = tpl__now() - t - e->st.t_scale - e->st.t_hash;
  return rc;
}
