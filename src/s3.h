/* s3.h - s3://bucket/prefix MODELs (DESIGN.md section 4.2): the object URL
 * of each member on the endpoint (virtual-hosted on AWS, path-style on a
 * custom endpoint), and AWS Signature V4 on every request from the
 * credential chain users already have (the environment, then the shared
 * credentials and config files of AWS_PROFILE).  No secret ever leaves
 * the signer: messages name where the credentials came from only. */
#ifndef TPL_S3_H
#define TPL_S3_H

#include "common.h"
#include "http.h"
#include "url.h"

/* Whether `s` starts with s3:// (any case). */
int tpl__s3_is_url(const char *s);

/* Parses an s3:// MODEL and resolves its endpoint, region and
 * credentials from the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; else AWS_PROFILE's section of
 * AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, then of
 * AWS_CONFIG_FILE or ~/.aws/config; AWS_REGION, AWS_DEFAULT_REGION or the
 * profile's region, else us-east-1; AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
 * or the profile's endpoint_url, else AWS).  Fills *u as tpl__url_parse
 * does (u->shown is "s3://bucket/prefix/"), *signer with the request
 * signer (its ctx the caller's until handed to tpl__http_set_signer; free
 * it with signer->free otherwise) and *where with "region R, endpoint E"
 * (malloc'd, caller frees).  Returns 0; TPL_EUSAGE for a malformed
 * MODEL, endpoint or credential file; TPL_EDENIED when no credentials
 * are found; -ENOMEM.  Outputs are written on success only. */
int tpl__s3_parse(const char *s, struct tpl__url *u,
                  struct tpl__http_signer *signer, char **where,
                  struct tpl__error *err);

/* For a client of another rank (--read local): when `shown` (a member's
 * shown form) is an s3:// one, resolves the same chain and signs every
 * request of h; else does nothing.  Returns 0, TPL_EUSAGE, TPL_EDENIED or
 * -ENOMEM. */
int tpl__s3_sign_client(struct tpl__http *h, const char *shown,
                        struct tpl__error *err);

#endif
