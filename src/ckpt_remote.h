/* ckpt_remote.h - opening a checkpoint at an http:// or https:// URL:
 * the same formats as on disk, their JSON fetched whole, a safetensors
 * header by ranged GETs, validated by the same parsers, and every member
 * file recorded with its URL, size and validators instead of a
 * descriptor. */
#ifndef TPL_CKPT_REMOTE_H
#define TPL_CKPT_REMOTE_H

#include <stddef.h>

#include "http.h"
#include "model.h"

/* Opens the MODEL URL `s` (url.h) with a client made from `o`: a
 * .safetensors URL, or a directory URL probed for
 * model.safetensors.index.json, tensor-cache.json, ndarray-cache.json and
 * model.safetensors in that order (the first the server has decides).
 * On success *out holds the model, its client and its files (fd -1, url
 * and obj set).  Returns 0, the parsers' TPL_E* codes, TPL_ENOMODEL when
 * the directory has none of them, or the client's codes (http.h).
 * `presharded`: an MLC cache of MLC's preshard layout is read as it is
 * (tpl__mlc_parse_flags), for listing. */
int tpl__remote_open(const char *s, const struct tpl__http_opts *o,
                     int presharded, struct tpl__model **out,
                     struct tpl__error *err);

/* Loads the safetensors file `name` of a remote model's directory (or
 * the model's own file): its header by a ranged GET of its first 64 KiB,
 * which also tells its size, ETag and Last-Modified (a second GET when
 * the header is longer), parsed, the file recorded with its URL and
 * validators.  `what` and `ctx` (the index naming it) are unused: a URL
 * needs no confining.  Returns 0, -ENOENT (404), TPL_EDENIED, the
 * parser's codes or the client's (the HTTP origin's st_member). */
int tpl__remote_st_member(struct tpl__model *m, const char *name,
                          const char *what, const char *ctx,
                          struct tpl__error *err);

/* Member `name` of a remote model as messages show it (its URL without a
 * presigned query); malloc'd, NULL on ENOMEM. */
char *tpl__remote_shown(const struct tpl__model *m, const char *name);

/* Files [first, m->nfiles) of a remote model, listed by a parser with
 * the sizes its JSON (`what`) declares: each gets its URL, and its size
 * as the server tells it (one-byte ranged GETs, all at once) is checked
 * against the JSON's "nbytes".  Returns 0, TPL_EFORMAT or the client's
 * codes (the HTTP origin's probe, origin.h). */
int tpl__remote_probe(struct tpl__model *m, uint32_t first, const char *what,
                      struct tpl__error *err);

/* Fetches member `name` of a remote model's directory (config.json),
 * whole, at most `cap` bytes, into a NUL-terminated malloc'd *buf.
 * Returns 0, -ENOENT when the server has none (404), or the client's
 * codes. */
int tpl__remote_read_member(const struct tpl__model *m, const char *name,
                            size_t cap, char **buf, size_t *len,
                            struct tpl__error *err);

/* Makes h, another rank's client for the files of a remote model (the
 * job table's shown name `shown` of one), sign as rank 0's does: an
 * s3:// one with the AWS chain (s3.h), an hf:// one with the hub token
 * (hf.h); a plain URL needs nothing.  Returns 0 or the failure of
 * tpl__s3_sign_client / tpl__hf_sign_client. */
int tpl__remote_sign_client(struct tpl__http *h, const char *shown,
                            struct tpl__error *err);

#endif
