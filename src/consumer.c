/* consumer.c - the public probes of a running `tpload serve` that a
 * consumer may need beside tpl_attach: is this rank serving (tpl_health)
 * and please stop the job (tpl_shutdown).  Thin wrappers over the
 * blocking client (client.c) that turn a reply into a code and one line
 * of text in the caller's buffer; they never print. */
#include "client.h"

TPL_API int tpl_health(const char *socket_path, struct tpl_health *out,
                       char *errbuf, size_t errlen) {
  struct tpl__wire_response r = {0};
  struct tpl_error err = {0};
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
  struct tpl_error err = {0};
  int rc = tpl__client_request_flags(socket_path, TPL_REQ_SHUTDOWN, 0,
                                     TPL_CLIENT_TIMEOUT_MS, &r, &err);
  if (rc == 0 && !r.ok)
    rc = tpl__fail(&err, TPL_EPEER, "%s: shutdown refused: %s", socket_path,
                   r.error ? r.error : "no reason given");
  tpl__wire_response_free(&r);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}
