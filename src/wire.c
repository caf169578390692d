/* wire.c - framing and protobuf for the daemon protocol.  A frame is a
 * 4-byte big-endian length and a protobuf message.  The frame reader takes
 * bytes as they come (one at a time if need be), checks the announced
 * length against its cap before allocating, and hands out one frame at a
 * time.  Request and Response are converted to and from plain C structs
 * here, so only this file (and report.c) sees the generated protobuf
 * code.  Nothing here touches a socket. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/tpload.pb-c.h"
#include "wire.h"

_Static_assert(TPL_REQ_HEALTH == (int)TPLOAD__REQUEST__KIND__HEALTH &&
                   TPL_REQ_STATUS == (int)TPLOAD__REQUEST__KIND__STATUS &&
                   TPL_REQ_ATTACH == (int)TPLOAD__REQUEST__KIND__ATTACH &&
                   TPL_REQ_SHUTDOWN == (int)TPLOAD__REQUEST__KIND__SHUTDOWN &&
                   TPL_REQ_RELOAD == (int)TPLOAD__REQUEST__KIND__RELOAD &&
                   TPL_REQ_WATCH == (int)TPLOAD__REQUEST__KIND__WATCH,
               "request kinds as in tpload.Request.Kind");

/* ---- frame reader ---- */

void tpl__frame_reader_init(struct tpl__frame_reader *r, uint32_t cap) {
  memset(r, 0, sizeof(*r));
  r->cap = cap;
}

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Takes header bytes; once all four are in, checks the cap and allocates
 * the body. */
static int feed_header(struct tpl__frame_reader *r, const uint8_t *data,
                       size_t n, size_t *used) {
  size_t take = TPL_WIRE_HEADER - r->hdr_have;
  if (take > n) take = n;
  memcpy(r->hdr + r->hdr_have, data, take);
  r->hdr_have += (uint32_t)take;
  *used = take;
  if (r->hdr_have < TPL_WIRE_HEADER) return 0;
  r->len = load_be32(r->hdr);
  if (r->len > r->cap) return TPL_ELIMIT;
  if (r->len == 0) return 1;
  r->body = malloc(r->len);
  return r->body == NULL ? -ENOMEM : 0;
}

int tpl__frame_feed(struct tpl__frame_reader *r, const uint8_t *data, size_t n,
                    size_t *used) {
  size_t h = 0, take;
  *used = 0;
  if (r->hdr_have < TPL_WIRE_HEADER) {
    int rc = feed_header(r, data, n, &h);
    *used = h;
    if (rc != 0) return rc;
    if (r->hdr_have < TPL_WIRE_HEADER) return 0;
  }
  take = r->len - r->have;
  if (take > n - h) take = n - h;
  if (take > 0) memcpy(r->body + r->have, data + h, take);
  r->have += (uint32_t)take;
  *used = h + take;
  return r->have == r->len ? 1 : 0;
}

void tpl__frame_reset(struct tpl__frame_reader *r) {
  free(r->body);
  tpl__frame_reader_init(r, r->cap);
}

/* ---- requests ---- */

int tpl__wire_decode_request(const uint8_t *body, size_t len, int *kind,
                             unsigned *flags, struct tpl__error *err) {
  Tpload__Request *m = tpload__request__unpack(NULL, len, body);
  if (m == NULL)
    return tpl__fail(err, TPL_EPROTO,
                     "request: expected a tpload.Request message, found %zu "
                     "bytes that do not decode",
                     len);
  *kind = (int)m->kind;
  *flags = m->summary ? TPL_REQ_F_SUMMARY : 0;
  tpload__request__free_unpacked(m, NULL);
  return 0;
}

static char *dup_or_null(const char *s) {
  return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

int tpl__wire_decode_request_args(const uint8_t *body, size_t len,
                                  struct tpl__wire_request_args *out,
                                  struct tpl__error *err) {
  Tpload__Request *m = tpload__request__unpack(NULL, len, body);
  int rc = 0;
  memset(out, 0, sizeof(*out));
  if (m == NULL)
    return tpl__fail(err, TPL_EPROTO,
                     "request: expected a tpload.Request message, found %zu "
                     "bytes that do not decode",
                     len);
  out->model = dup_or_null(m->model);
  out->plan = dup_or_null(m->plan);
  out->after_generation = m->after_generation;
  out->timeout_ms = m->timeout_ms;
  out->verify_md5 = m->verify_md5;
  if ((out->model == NULL && m->model != NULL && m->model[0] != '\0') ||
      (out->plan == NULL && m->plan != NULL && m->plan[0] != '\0')) {
    tpl__wire_request_args_free(out);
    rc = tpl__oom(err);
  }
  tpload__request__free_unpacked(m, NULL);
  return rc;
}

void tpl__wire_request_args_free(struct tpl__wire_request_args *a) {
  if (a == NULL) return;
  free(a->model);
  free(a->plan);
  memset(a, 0, sizeof(*a));
}

/* Packs `msg` behind a 4-byte length into a malloc'd frame. */
static int pack_frame(const ProtobufCMessage *msg, size_t cap, uint8_t **frame,
                      size_t *len) {
  size_t body = protobuf_c_message_get_packed_size(msg);
  uint8_t *f;
  if (body > cap) return TPL_ELIMIT;
  f = malloc(TPL_WIRE_HEADER + body);
  if (f == NULL) return -ENOMEM;
  store_be32(f, (uint32_t)body);
  protobuf_c_message_pack(msg, f + TPL_WIRE_HEADER);
  *frame = f;
  *len = TPL_WIRE_HEADER + body;
  return 0;
}

int tpl__wire_encode_request_args(int kind, unsigned flags,
                                  const struct tpl__wire_request_args *a,
                                  uint8_t **frame, size_t *len) {
  Tpload__Request m = TPLOAD__REQUEST__INIT;
  m.kind = (Tpload__Request__Kind)kind;
  m.summary = (flags & TPL_REQ_F_SUMMARY) != 0;
  if (a != NULL) {
    m.model = a->model != NULL ? a->model : "";
    m.plan = a->plan != NULL ? a->plan : "";
    m.after_generation = a->after_generation;
    m.timeout_ms = a->timeout_ms;
    m.verify_md5 = a->verify_md5 != 0;
  }
  return pack_frame(&m.base, TPL_WIRE_MAX_REQUEST, frame, len);
}

/* ---- responses ---- */

void tpl__wire_silent_str(const struct tpl__wire_silent *p, double deadline,
                          char *buf, size_t len) {
  snprintf(buf, len,
           "rank %u (host %s): no heartbeat for %.1f s of the %g s deadline",
           p->rank, p->host != NULL ? p->host : "?", p->seconds, deadline);
}

/* The silent ranks as protobuf messages, `in` borrowed: one allocation
 * (*out, the caller frees) holding the pointers, then the messages. */
static int pack_silent(const struct tpl__wire_silent *in, size_t n,
                       Tpload__SilentRank ***out) {
  Tpload__SilentRank **ptrs, *msgs;
  if (n == 0) {
    *out = NULL;
    return 0;
  }
  ptrs = calloc(n, sizeof(*ptrs) + sizeof(*msgs));
  if (ptrs == NULL) return -ENOMEM;
  msgs = (Tpload__SilentRank *)(ptrs + n);
  for (size_t i = 0; i < n; i++) {
    tpload__silent_rank__init(&msgs[i]);
    msgs[i].rank = in[i].rank;
    msgs[i].host = (char *)(in[i].host != NULL ? in[i].host : "");
    msgs[i].seconds = in[i].seconds;
    ptrs[i] = &msgs[i];
  }
  *out = ptrs;
  return 0;
}

int tpl__wire_encode_response(const struct tpl__wire_response *r,
                              uint8_t **frame, size_t *len,
                              struct tpl__error *err) {
  Tpload__Response m = TPLOAD__RESPONSE__INIT;
  int rc;
  m.ok = r->ok ? 1 : 0;
  m.error = (char *)(r->error ? r->error : "");
  m.rank = r->rank;
  m.world = r->world;
  m.tp = r->tp;
  m.pp = r->pp;
  m.store_bytes = r->store_bytes;
  m.job_id = (char *)(r->job_id ? r->job_id : "");
  m.model = (char *)(r->model ? r->model : "");
  m.uptime_seconds = r->uptime_seconds;
  m.clients = r->clients;
  m.attaches = r->attaches;
  m.table_bytes = r->table_bytes;
  m.generation = r->generation;
  m.plan = (char *)(r->plan ? r->plan : "");
  m.fingerprint = (char *)(r->fingerprint ? r->fingerprint : "");
  m.error_code = r->error_code;
  m.reload_model = (char *)(r->reload_model ? r->reload_model : "");
  m.reload_store_bytes = r->reload_store_bytes;
  m.status.data = (uint8_t *)r->status;
  m.status.len = r->status != NULL ? r->status_len : 0;
  m.job.data = (uint8_t *)r->job;
  m.job.len = r->job != NULL ? r->job_len : 0;
  m.stall_timeout_seconds = r->stall_timeout;
  m.n_silent = r->silent != NULL ? r->nsilent : 0;
  rc = pack_silent(r->silent, m.n_silent, &m.silent);
  if (rc == 0) rc = pack_frame(&m.base, TPL_WIRE_MAX_RESPONSE, frame, len);
  free(m.silent);
  if (rc == TPL_ELIMIT)
    tpl__fail(err, rc, "response: expected at most %u bytes, found more",
              TPL_WIRE_MAX_RESPONSE);
  else if (rc != 0)
    tpl__fail(err, rc, "response: out of memory");
  return rc;
}

/* m as plain C, borrowing its strings and bytes (out->msg keeps it): the
 * status bytes go as they came, the client unpacks them once. */
static void copy_response(struct tpl__wire_response *out,
                          const Tpload__Response *m) {
  out->ok = m->ok ? 1 : 0;
  out->rank = m->rank;
  out->world = m->world;
  out->tp = m->tp;
  out->pp = m->pp;
  out->store_bytes = m->store_bytes;
  out->uptime_seconds = m->uptime_seconds;
  out->clients = m->clients;
  out->attaches = m->attaches;
  out->table_bytes = m->table_bytes;
  out->generation = m->generation;
  out->plan = m->plan != NULL && m->plan[0] != '\0' ? m->plan : NULL;
  out->error_code = m->error_code;
  out->reload_model = m->reload_model != NULL && m->reload_model[0] != '\0'
                          ? m->reload_model
                          : NULL;
  out->reload_store_bytes = m->reload_store_bytes;
  out->error = m->error != NULL && m->error[0] != '\0' ? m->error : NULL;
  out->job_id = m->job_id ? m->job_id : "";
  out->model = m->model ? m->model : "";
  out->fingerprint = m->fingerprint ? m->fingerprint : "";
  out->status = m->status.len > 0 ? m->status.data : NULL;
  out->status_len = m->status.len;
  out->job = m->job.len > 0 ? m->job.data : NULL;
  out->job_len = m->job.len;
}

/* m's silent ranks as plain C, borrowing their host names: a malloc'd
 * array in *out (NULL when there are none).  Returns 0 or -ENOMEM. */
static int copy_silent(const Tpload__Response *m,
                       struct tpl__wire_silent **out) {
  struct tpl__wire_silent *s;
  *out = NULL;
  if (m->n_silent == 0) return 0;
  s = calloc(m->n_silent, sizeof(*s));
  if (s == NULL) return -ENOMEM;
  for (size_t i = 0; i < m->n_silent; i++) {
    const Tpload__SilentRank *p = m->silent[i];
    s[i].rank = p->rank;
    s[i].host = p->host;
    s[i].seconds = p->seconds;
  }
  *out = s;
  return 0;
}

int tpl__wire_decode_response(const uint8_t *body, size_t len,
                              struct tpl__wire_response *out,
                              struct tpl__error *err) {
  Tpload__Response *m = tpload__response__unpack(NULL, len, body);
  struct tpl__wire_response r = {.msg = m};
  struct tpl__wire_silent *silent;
  if (m == NULL)
    return tpl__fail(err, TPL_EPROTO,
                     "response: expected a tpload.Response message, found "
                     "%zu bytes that do not decode",
                     len);
  if (copy_silent(m, &silent) != 0) {
    tpload__response__free_unpacked(m, NULL);
    return tpl__fail(err, -ENOMEM, "response: out of memory");
  }
  copy_response(&r, m);
  r.silent = silent;
  r.nsilent = m->n_silent;
  r.stall_timeout = m->stall_timeout_seconds;
  *out = r;
  return 0;
}

void tpl__wire_response_free(struct tpl__wire_response *r) {
  if (r == NULL) return;
  if (r->msg != NULL) free((void *)r->silent); /* decoded: ours */
  if (r->msg != NULL) tpload__response__free_unpacked(r->msg, NULL);
  memset(r, 0, sizeof(*r));
}
