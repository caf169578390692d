/* client.h - the blocking client side of the daemon protocol (DESIGN.md
 * section 5): one request and its reply (and passed fds) over a rank's
 * socket, for the consumer API and `status`, `dump`, `reload`; no libuv. */
#ifndef TPL_CLIENT_H
#define TPL_CLIENT_H

#include "common.h"
#include "wire.h"

#define TPL_CLIENT_TIMEOUT_MS 10000

/* Connects to the daemon socket `path` (after checking that it and the
 * daemon run as the trusted uid: trust.h), sends a request of `kind` with
 * TPL_REQ_F_* `flags` (e.g. a summary status, or 0), reads its reply into
 * *resp (free with tpl__wire_response_free) and disconnects.  The first
 * `nfds` descriptors the daemon sends along with the reply go to
 * fds[0..nfds) in order, the rest are -1 (caller closes); descriptors
 * nobody asked for are closed.  Each step waits at most timeout_ms.
 * Returns 0 (also for a reply with ok == 0), TPL_EUNREACHABLE (nothing
 * answers, an untrusted daemon, timeout, connection closed before a
 * reply; err names the path and the reason), -ENAMETOOLONG or TPL_EPROTO
 * (oversized or undecodable reply); on failure no descriptor is left
 * open. */
int tpl__client_call(const char *path, int kind, unsigned flags, int timeout_ms,
                     struct tpl__wire_response *resp, int *fds, size_t nfds,
                     struct tpl__error *err);

/* A request with arguments (a reload, a watch) and its own wait for the
 * reply: `timeout_ms` bounds connecting and sending, `reply_ms` the
 * reply (a reload's or a watch's may take long). */
struct tpl__client_req {
  int kind;
  unsigned flags;
  const struct tpl__wire_request_args *args; /* NULL: none */
  int timeout_ms, reply_ms;
};

/* tpl__client_call of `q`. */
int tpl__client_call_req(const char *path, const struct tpl__client_req *q,
                         struct tpl__wire_response *resp, int *fds, size_t nfds,
                         struct tpl__error *err);

/* tpl__client_call without descriptors. */
int tpl__client_request_flags(const char *path, int kind, unsigned flags,
                              int timeout_ms, struct tpl__wire_response *resp,
                              struct tpl__error *err);

/* rank0.sock in the directory of `path` (malloc'd), NULL on ENOMEM: where
 * the job-wide requests go. */
char *tpl__client_rank0_path(const char *path);

/* A job-wide request (status, shutdown, reload): `q` to `path`, and
 * once more to rank0.sock beside it when another rank refused it.  As
 * tpl__client_call_req otherwise. */
int tpl__client_job_call(const char *path, const struct tpl__client_req *q,
                         struct tpl__wire_response *resp,
                         struct tpl__error *err);

/* tpl_attach with a timeout and a full error record. */
struct tpl_shard;
int tpl__client_attach(const char *path, int timeout_ms, struct tpl_shard **out,
                       struct tpl__error *err);

/* The grid of the job the attached daemon serves (world = tp x pp x
 * replicas); both 0 when the daemon is older than the grid field. */
void tpl__shard_grid(const struct tpl_shard *s, uint32_t *tp, uint32_t *pp);

/* The served generation's job fingerprint (shardinfo.h), "" when the
 * daemon names none (an older tpload); valid while s is attached. */
const char *tpl__shard_fingerprint(const struct tpl_shard *s);

#endif
