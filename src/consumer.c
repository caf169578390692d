/* consumer.c - the public probes of a running `tpload serve` that a
 * consumer may need beside tpl_attach: is this rank serving (tpl_health),
 * wait for the next version (tpl_watch) and please stop the job
 * (tpl_shutdown).  Thin wrappers over the
 * blocking client (client.c) that turn a reply into a code and one line
 * of text in the caller's buffer; they never print. */
#include <errno.h>
#include <limits.h>

#include "client.h"

TPL_API int tpl_health(const char *socket_path, struct tpl_health *out,
                       char *errbuf, size_t errlen) {
  struct tpl__wire_response r = {0};
  struct tpl__error err = {0};
  int rc = tpl__client_request_flags(socket_path, TPL_REQ_HEALTH, 0,
                                     TPL_CLIENT_TIMEOUT_MS, &r, &err);
  if (rc == 0 && !r.ok)
    rc = tpl__fail(&err, TPL_EUNREACHABLE, "%s: not serving: %s", socket_path,
                   r.error ? r.error : "no reason given");
  if (rc == 0 && out != NULL) {
    out->rank = r.rank;
    out->world = r.world;
    out->bytes = r.store_bytes;
  }
  tpl__wire_response_free(&r);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}

TPL_API int tpl_shutdown(const char *socket_path, char *errbuf, size_t errlen) {
  struct tpl__wire_response r = {0};
  struct tpl__error err = {0};
  int rc = tpl__client_request_flags(socket_path, TPL_REQ_SHUTDOWN, 0,
                                     TPL_CLIENT_TIMEOUT_MS, &r, &err);
  if (rc == 0 && !r.ok)
    rc = tpl__fail(&err, TPL_EPEER, "%s: shutdown refused: %s", socket_path,
                   r.error ? r.error : "no reason given");
  tpl__wire_response_free(&r);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}

/* How long a watch's reply may take: the daemon answers by itself once
 * `timeout_ms` passed (a little slack for a loaded machine), never when
 * it is negative. */
static int watch_reply_ms(int timeout_ms) {
  if (timeout_ms < 0 || timeout_ms > INT_MAX - TPL_CLIENT_TIMEOUT_MS)
    return INT_MAX;
  return timeout_ms + TPL_CLIENT_TIMEOUT_MS;
}

TPL_API int tpl_watch(const char *socket_path, uint64_t after_generation,
                      int timeout_ms, uint64_t *generation, char *errbuf,
                      size_t errlen) {
  struct tpl__wire_request_args a = {.after_generation = after_generation,
                                     .timeout_ms = timeout_ms};
  struct tpl__client_req q = {TPL_REQ_WATCH, 0, &a, TPL_CLIENT_TIMEOUT_MS,
                              watch_reply_ms(timeout_ms)};
  struct tpl__wire_response r = {0};
  struct tpl__error err = {0};
  int rc = tpl__client_call_req(socket_path, &q, &r, NULL, 0, &err);
  if (rc == 0 && !r.ok)
    rc = tpl__fail(&err, TPL_EPEER, "%s: watch refused: %s", socket_path,
                   r.error ? r.error : "no reason given");
  else if (rc == 0 && r.generation == 0)
    rc = tpl__fail(&err, TPL_EPROTO,
                   "%s: the daemon does not know generations (older than "
                   "reloads)",
                   socket_path);
  if (rc == 0 && generation != NULL) *generation = r.generation;
  if (rc == 0 && r.generation <= after_generation)
    rc = tpl__fail(&err, -ETIMEDOUT, "%s: still generation %llu after %d ms",
                   socket_path, (unsigned long long)r.generation, timeout_ms);
  tpl__wire_response_free(&r);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}
