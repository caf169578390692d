/* hf.h - hf://org/name[@revision] MODELs (DESIGN.md section 4.2): the
 * files of a Hugging Face hub repository as the hub serves them,
 * {endpoint}/{org}/{name}/resolve/{commit}/{file}, the revision pinned to
 * the commit the hub reports for it, and the user's hub token sent to the
 * hub's host only. */
#ifndef TPL_HF_H
#define TPL_HF_H

#include "common.h"
#include "http.h"
#include "url.h"

/* Whether `s` starts with hf:// (any case). */
int tpl__hf_is_url(const char *s);

/* Parses an hf:// MODEL: the endpoint from HF_ENDPOINT (else
 * https://huggingface.co), the token from HF_TOKEN (else the file
 * HF_TOKEN_PATH, $HF_HOME/token or ~/.cache/huggingface/token, when it
 * exists), the revision (default main) pinned to its commit by one GET of
 * {endpoint}/api/models/{org}/{name}/revision/{revision} with a client of
 * options `o` (a 40-digit commit is taken as it is).  Fills *u (members
 * under resolve/{commit}/, shown as hf://org/name@commit/file), *signer
 * (the token; its ctx the caller's until handed to tpl__http_set_signer)
 * and *where ("revision R, endpoint E", malloc'd).  Returns 0;
 * TPL_EUSAGE for a malformed MODEL, endpoint or token; TPL_EDENIED (a
 * gated or private model), -ENOENT (no such model or revision),
 * TPL_EREMOTE, TPL_EFORMAT for the hub's answer; -ENOMEM.  Outputs are
 * written on success only. */
int tpl__hf_parse(const char *s, const struct tpl__http_opts *o,
                  struct tpl__url *u, struct tpl__http_signer *signer,
                  char **where, struct tpl__error *err);

/* For a client of another rank (--read local): when `shown` is an hf://
 * member, reads the same token and sends it to the hub; else does
 * nothing.  Returns 0, TPL_EUSAGE or -ENOMEM. */
int tpl__hf_sign_client(struct tpl__http *h, const char *shown,
                        struct tpl__error *err);

#endif
