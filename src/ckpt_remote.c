/* ckpt_remote.c - a checkpoint at a URL.  The formats are the local ones,
 * loaded by the same code (format.c) through the HTTP origin, whose
 * member operations are here: the JSON of an index or MLC cache is
 * fetched whole; a safetensors file's header comes from a ranged GET of
 * its first PROBE_BYTES (which also tells its size, ETag and
 * Last-Modified), and a second one when the header is longer; an MLC
 * shard file is probed with a one-byte range for its size, all of them at
 * once.  Each member file is recorded with its URL and what the server
 * said about it (model.h), so every later read can check that the object
 * did not change. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_remote.h"
#include "fmt_safetensors.h"
#include "format.h"
#include "hf.h"
#include "origin.h"
#include "s3.h"

#define PROBE_BYTES (64u << 10)

/* A member's URL as fetched and as shown. */
struct member {
  char *url, *shown;
};

static int member_of(const struct tpl__model *m, const char *name,
                     struct member *out, struct tpl__error *err) {
  out->url = tpl__url_member(m->url, name);
  out->shown = tpl__url_member_shown(m->url, name);
  if (out->url != NULL && out->shown != NULL) return 0;
  free(out->url);
  free(out->shown);
  return tpl__oom(err);
}

static void member_clear(struct member *mb) {
  free(mb->url);
  free(mb->shown);
}

/* --- one safetensors file --- */

/* The first bytes of the file (up to PROBE_BYTES) and, when the header is
 * longer, the rest of it: 8 + N bytes in *out (caller frees). */
static int fetch_header(struct tpl__http *h, const struct member *mb,
                        struct tpl__http_obj *obj, uint8_t **out,
                        size_t *out_len, struct tpl__error *err) {
  struct tpl__http_read r = {
      .url = mb->url, .shown = mb->shown, .len = PROBE_BYTES, .obj = obj};
  uint64_t hlen;
  uint8_t *b = malloc(PROBE_BYTES), *nb;
  int rc;
  if (b == NULL) return tpl__oom(err);
  r.dst = b;
  rc = tpl__http_read_all(h, &r, 1, err);
  if (rc == 0)
    rc = tpl__st_header_len(b, (size_t)r.got, obj->size, mb->shown, &hlen, err);
  if (rc == 0 && hlen + 8 > r.got) {
    nb = realloc(b, (size_t)hlen + 8);
    if (nb == NULL) rc = tpl__oom(err);
    if (nb != NULL) b = nb;
    r = (struct tpl__http_read){.url = mb->url,
                                .shown = mb->shown,
                                .off = r.got,
                                .len = hlen + 8 - r.got,
                                .dst = b + r.got,
                                .obj = obj};
    if (rc == 0) rc = tpl__http_read_all(h, &r, 1, err);
  }
  if (rc != 0) {
    free(b);
    return rc;
  }
  *out = b;
  *out_len = (size_t)hlen + 8;
  return 0;
}

/* Appends file `name` (URL and shown form in mb) to m with what the
 * server said about it. */
static int add_remote_file(struct tpl__model *m, const struct member *mb,
                           const char *name, const struct tpl__http_obj *obj,
                           uint32_t *idx, struct tpl__error *err) {
  int rc = tpl__model_add_file(m, mb->shown, name, obj->size, idx);
  if (rc == 0 && (m->files[*idx].url = strdup(mb->url)) == NULL) rc = -ENOMEM;
  if (rc != 0) return tpl__fail(err, rc, "%s: out of memory", mb->shown);
  m->files[*idx].obj = *obj;
  return 0;
}

int tpl__remote_st_member(struct tpl__model *m, const char *name,
                          const char *what, const char *ctx,
                          struct tpl__error *err) {
  struct tpl__http_obj obj = {0};
  struct member mb;
  uint8_t *buf = NULL;
  size_t len = 0;
  uint32_t idx;
  int rc = member_of(m, name, &mb, err);
  if (rc != 0) return rc;
  rc = fetch_header(m->http, &mb, &obj, &buf, &len, err);
  if (rc == 0) rc = add_remote_file(m, &mb, name, &obj, &idx, err);
  if (rc == 0) rc = tpl__st_parse(buf, len, obj.size, mb.shown, idx, m, err);
  free(buf);
  member_clear(&mb);
  return rc;
}

/* --- the members a format lists --- */

int tpl__remote_probe(struct tpl__model *m, uint32_t first, const char *what,
                      struct tpl__error *err) {
  size_t n = first < m->nfiles ? m->nfiles - first : 0;
  struct tpl__http_read *r = calloc(n ? n : 1, sizeof(*r));
  uint8_t *scratch = malloc(n ? n : 1);
  int rc = r && scratch ? 0 : tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    struct tpl__file *f = &m->files[first + i];
    struct member mb;
    rc = member_of(m, f->name, &mb, err);
    if (rc != 0) break;
    free(f->path);
    f->path = mb.shown;
    f->url = mb.url;
    r[i] = (struct tpl__http_read){.url = f->url,
                                   .shown = f->path,
                                   .len = 1,
                                   .dst = scratch + i,
                                   .obj = &f->obj};
  }
  if (rc == 0) rc = tpl__http_read_all(m->http, r, n, err);
  for (size_t i = first; rc == 0 && i < m->nfiles; i++)
    if (m->files[i].obj.size != m->files[i].size)
      rc = tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': expected %llu bytes on the server as "
                     "\"nbytes\" says, found %llu",
                     what, m->files[i].name,
                     (unsigned long long)m->files[i].size,
                     (unsigned long long)m->files[i].obj.size);
  free(r);
  free(scratch);
  return rc;
}

/* --- format detection --- */

/* The first of the formats' probes the server has decides the format: a
 * probe's load fails with -ENOENT (or TPL_EDENIED, which an object store
 * answers for a missing key to whoever may not list the bucket) when the
 * server has no such object. */
static int open_dir(struct tpl__model *m, int presharded,
                    struct tpl__error *err) {
  struct tpl__error denied = {0};
  for (size_t i = 0; i < tpl__nformats; i++) {
    const struct tpl__format *f = tpl__formats[i];
    for (const char *const *probe = f->probes; *probe != NULL; probe++) {
      int rc;
      m->format = f->id;
      rc = f->load(m, *probe, presharded, err);
      if (rc == TPL_EDENIED && denied.code == 0 && err != NULL) denied = *err;
      if (rc != -ENOENT && rc != TPL_EDENIED) return rc;
      if (m->nfiles != 0 || m->ntensors != 0) return rc; /* a member failed */
    }
  }
  if (denied.code != 0) {
    if (err != NULL) *err = denied;
    return TPL_EDENIED;
  }
  return tpl__model_none_found(m->dir, " at this URL (HTTP 404)", err);
}

/* MODEL as shown: the shown URL, and for s3:// where it is ("s3://b/p
 * (region R, endpoint E)"). */
static char *model_shown(const struct tpl__url *u, const char *where) {
  char *s = u->name ? tpl__url_member_shown(u, u->name) : tpl__url_dir_shown(u);
  size_t len = s && where ? strlen(s) + strlen(where) + 4 : 0;
  char *both = len ? malloc(len) : NULL;
  if (where == NULL || s == NULL) return s;
  if (both != NULL) snprintf(both, len, "%s (%s)", s, where);
  free(s);
  return both;
}

/* An empty model for the URL, owning the parsed URL and the client, which
 * signs with `signer` (taken) when it has one. */
static int remote_model(struct tpl__url *u, const struct tpl__http_opts *o,
                        const struct tpl__http_signer *signer,
                        const char *where, struct tpl__model **out,
                        struct tpl__error *err) {
  char *dir = tpl__url_dir_shown(u);
  struct tpl__model *m = dir ? tpl__model_new(0, dir) : NULL;
  int rc;
  free(dir);
  if (m != NULL) m->url = malloc(sizeof(*m->url));
  if (m == NULL || m->url == NULL) {
    tpl__model_free(m);
    if (signer->free != NULL) signer->free(signer->ctx);
    return tpl__oom(err);
  }
  *m->url = *u;
  memset(u, 0, sizeof(*u));
  m->origin = &tpl__origin_http;
  m->shown = model_shown(m->url, where);
  rc = m->shown ? tpl__http_open(o, &m->http, err) : tpl__oom(err);
  if (rc == 0 && signer->sign != NULL)
    tpl__http_set_signer(m->http, signer);
  else if (signer->free != NULL)
    signer->free(signer->ctx);
  if (rc != 0) {
    tpl__model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int tpl__remote_open(const char *s, const struct tpl__http_opts *o,
                     int presharded, struct tpl__model **out,
                     struct tpl__error *err) {
  struct tpl__url u;
  struct tpl__http_signer signer = {0};
  struct tpl__model *m = NULL;
  char *where = NULL;
  int rc = tpl__s3_is_url(s)   ? tpl__s3_parse(s, &u, &signer, &where, err)
           : tpl__hf_is_url(s) ? tpl__hf_parse(s, o, &u, &signer, &where, err)
                               : tpl__url_parse(s, &u, err);
  if (rc != 0) return rc;
  rc = remote_model(&u, o, &signer, where, &m, err);
  tpl__url_clear(&u);
  free(where);
  if (rc != 0) return rc;
  if (m->url->name != NULL) {
    const struct tpl__format *f = tpl__format_for_file(m->url->name);
    m->format = f->id;
    rc = f->load(m, m->url->name, presharded, err);
  } else {
    rc = open_dir(m, presharded, err);
  }
  if (rc != 0) {
    tpl__model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int tpl__remote_read_member(const struct tpl__model *m, const char *name,
                            size_t cap, char **buf, size_t *len,
                            struct tpl__error *err) {
  struct member mb;
  int rc = member_of(m, name, &mb, err);
  if (rc != 0) return rc;
  rc = tpl__http_get(m->http, mb.url, mb.shown, cap, buf, len, err);
  member_clear(&mb);
  return rc;
}

char *tpl__remote_shown(const struct tpl__model *m, const char *name) {
  return tpl__url_member_shown(m->url, name);
}

int tpl__remote_sign_client(struct tpl__http *h, const char *shown,
                            struct tpl__error *err) {
  int rc = tpl__s3_sign_client(h, shown, err);
  return rc != 0 ? rc : tpl__hf_sign_client(h, shown, err);
}
