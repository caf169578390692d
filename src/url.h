/* url.h - the URL forms a MODEL may take (DESIGN.md section 1): an
 * http:// or https:// URL of one .safetensors file, or of a directory
 * whose members are named by the checkpoint's JSON.  Pure string rules:
 * no I/O, no libcurl. */
#ifndef TPL_URL_H
#define TPL_URL_H

#include <stddef.h>

#include "common.h"

#define TPL_MAX_URL 8192 /* bytes in a MODEL URL */

/* A parsed MODEL URL.  Every string is owned (tpl__url_clear). */
struct tpl__url {
  char *origin; /* "scheme://host[:port]", the scheme in lower case */
  char *dir;    /* the directory part of the path, ending in '/' */
  char *name;   /* the last segment of a file URL; NULL for a directory */
  char *query;  /* what follows '?', without it; NULL when none */
  char *shown;  /* the shown directory when it is not origin + dir (an
                   s3:// or hf:// MODEL: "s3://bucket/prefix/",
                   "hf://org/name@commit/", ending in '/'),
                   members shown under it by their plain names; NULL */
};

/* Whether `s` names a remote MODEL: it starts with http://, https://,
 * s3:// or hf:// (the scheme in any case; s3.c and hf.c parse the last
 * two).  Anything else is a local path. */
int tpl__url_is_remote(const char *s);

/* Parses a MODEL URL.  Refused (TPL_EUSAGE, err saying what was found):
 * a scheme other than http or https, an empty host, credentials in the
 * URL (user:password@: use a token), a '#' fragment, a space, control or
 * non-ASCII byte (a URL must be percent-encoded), more than TPL_MAX_URL
 * bytes.  The URL is a file when its last path segment ends in
 * ".safetensors", else a directory (an empty path is "/").  Returns 0,
 * TPL_EUSAGE or -ENOMEM; *u is filled on success only. */
int tpl__url_parse(const char *s, struct tpl__url *u, struct tpl__error *err);

/* Frees what `u` owns and zeroes it. */
void tpl__url_clear(struct tpl__url *u);

/* The URL of member `name` of the URL's directory (a plain file name,
 * tpl__model_check_file_name): origin + dir + name percent-encoded +
 * "?query" when a directory URL has one (a directory-wide token such as
 * a container SAS travels to every member).  `name` == u->name (the
 * pointer) is the file URL itself, its query kept and its name as the
 * URL spelt it; other members of a file URL's directory (config.json)
 * get no query: a presigned URL signs one object.  Malloc'd; NULL on
 * ENOMEM. */
char *tpl__url_member(const struct tpl__url *u, const char *name);

/* The same member as messages and reports show it: the query, which may
 * hold a signature, replaced by "?...".  Malloc'd; NULL on ENOMEM. */
char *tpl__url_member_shown(const struct tpl__url *u, const char *name);

/* The directory as shown (origin + dir without its last '/'), the
 * model's `dir`.  Malloc'd; NULL on ENOMEM. */
char *tpl__url_dir_shown(const struct tpl__url *u);

/* MODEL as messages and logs show it: a URL (tpl__url_is_remote) with
 * its query, which may hold a presigned URL's signature, replaced by
 * "?..."; any other string as it is.  Malloc'd; NULL on ENOMEM. */
char *tpl__url_shown(const char *model);

/* Percent-encodes `len` bytes of `s` for one path segment: letters,
 * digits and -._~ stay, every other byte is %XX.  Writes at most
 * `cap` bytes (NUL included) into out; returns the length it needs
 * without the NUL (as snprintf). */
size_t tpl__url_encode_segment(const char *s, size_t len, char *out,
                               size_t cap);

#endif
