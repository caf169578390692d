/* source_http.h - the checkpoint's bytes from an HTTP(S) server: the
 * second implementation of source.h, over the ranged-GET client of
 * http.h.  A read is started as ranged GETs in flight (at most the
 * client's --http-connections at once) and finished when its last byte
 * has landed, so the engine reads the next chunks while it delivers one;
 * every answer is checked against what rank 0 validated. */
#ifndef TPL_SOURCE_HTTP_H
#define TPL_SOURCE_HTTP_H

#include <stddef.h>

#include "http.h"
#include "source.h"

/* One remote file of a source: its URL as fetched, as shown, and what the
 * server said about it at validation (size, ETag, Last-Modified).  All
 * borrowed: they must outlive the source. */
struct tpl__source_url {
  const char *url, *shown;
  struct tpl__http_obj *obj;
};

/* Opens a source over the n files of `files`, read with client `http`
 * (owned by the source when `own` is set, else borrowed: it must outlive
 * the source).  Every file reads as TPL_IO_USED_HTTP.  Returns 0 or
 * -ENOMEM (an owned client is then closed). */
int tpl__source_http_open(struct tpl__source **s, struct tpl__http *http,
                          int own, const struct tpl__source_url *files,
                          size_t n, struct tpl__error *err);

/* Whether a read of source s (an HTTP one) may ask for several ranges
 * (tpl__read.spans), fetched as multi-range GETs while the server
 * answers them (http.h): an origin's choice (DESIGN.md, "The GET
 * policy"). */
void tpl__source_http_multi(struct tpl__source *s, int on);

#endif
