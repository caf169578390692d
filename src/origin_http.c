/* origin_http.c - the HTTP origin (origin.h): a MODEL at an http:// or
 * https:// URL (an s3:// or hf:// one is resolved into such URLs by s3.c
 * and hf.c when it is parsed).  Its members are objects fetched whole or
 * by ranged GETs (http.c), each recorded with its URL, size, ETag and
 * Last-Modified at validation (ckpt_remote.c), and every later answer is
 * checked against them, so there is no identity to re-check and nothing
 * for another rank to open: its source (source_http.c) is the check. */
#include <stddef.h>

#include "ckpt_remote.h"
#include "hf.h"
#include "origin.h"
#include "s3.h"
#include "url.h"

static int open_model(const char *path, const struct tpl__http_opts *http,
                      int presharded, struct tpl__model **out,
                      struct tpl__error *err) {
  static const struct tpl__http_opts defaults = TPL_HTTP_OPTS_DEFAULT;
  return tpl__remote_open(path, http ? http : &defaults, presharded, out, err);
}

static int read_range(const struct tpl__model *m, uint32_t idx, void *dst,
                      uint64_t len, uint64_t off, struct tpl__error *err) {
  struct tpl__file *f = &m->files[idx];
  struct tpl__http_read r = {.url = f->url,
                             .shown = f->path,
                             .off = off,
                             .len = len,
                             .dst = dst,
                             .obj = &f->obj};
  return tpl__http_read_all(m->http, &r, 1, err);
}

/* Every answer was checked against the validators as it came. */
static int unchanged(const struct tpl__model *m, uint32_t idx,
                     struct tpl__error *err) {
  return 0;
}

/* Read over HTTP: no descriptor. */
static int member_open(const char *path, uint64_t size, int64_t mtime_ns,
                       int *fd, struct tpl__error *err) {
  *fd = -1;
  return 0;
}

static int member_unchanged(const char *path, uint64_t size, int64_t mtime_ns,
                            int fd, struct tpl__error *err) {
  return 0;
}

/* Whether a source's reads may be multi-range GETs: plain http(s) yes;
 * s3:// (GetObject documents one range a GET) and hf:// (redirected to
 * such a store) no. */
static int multi_ranges(const struct tpl__origin_files *in) {
  return in->n > 0 && !tpl__s3_is_url(in->paths[0]) &&
         !tpl__hf_is_url(in->paths[0]);
}

/* Rank 0 reads with the client that validated the files (borrowed); the
 * others (--read local) with one of their own, made from the same
 * options and signed as rank 0's is. */
static int source(const struct tpl__origin_files *in, struct tpl__source **src,
                  struct tpl__error *err) {
  struct tpl__http *h = in->http;
  int rc = 0;
  if (h == NULL) {
    rc = tpl__http_open(in->opts, &h, err);
    if (rc == 0 && in->n > 0)
      rc = tpl__remote_sign_client(h, in->paths[0], err);
    if (rc != 0) tpl__http_close(h);
  }
  if (rc != 0) return rc;
  rc = tpl__source_http_open(src, h, in->http == NULL, in->urls, in->n, err);
  if (rc == 0) tpl__source_http_multi(*src, multi_ranges(in));
  return rc;
}

const struct tpl__origin tpl__origin_http = {
    .name = "http",
    .claims = tpl__url_is_remote,
    .paths = 0,
    .open = open_model,
    .probe = tpl__remote_probe,
    .shown = tpl__remote_shown,
    .st_member = tpl__remote_st_member,
    .get = tpl__remote_read_member,
    .read = read_range,
    .unchanged = unchanged,
    .member_open = member_open,
    .member_unchanged = member_unchanged,
    .source = source,
};
