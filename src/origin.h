/* origin.h - where a MODEL's bytes live (SQLite's sqlite3_vfs is the
 * model): one object per kind answers "is this member there, how big,
 * with what identity", hands over small members whole, re-checks a
 * file's identity, and opens the bulk source (source.h) the readers
 * stream from.  Which origin a MODEL has is decided once, when it is
 * opened (tpl__origin_for); everything after asks the model's or the
 * job's origin instead of looking at a URL.  Two kinds: origin_local.c
 * (files held by dev/ino/mtime, fdcache.h; O_DIRECT or buffered through
 * source.c)
 * and origin_http.c (URLs, size/ETag/Last-Modified, ranged GETs through
 * http.c; s3:// and hf:// MODELs are HTTP URLs by then, s3.c, hf.c). */
#ifndef TPL_ORIGIN_H
#define TPL_ORIGIN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fdcache.h"
#include "http.h"
#include "model.h"
#include "source.h"
#include "source_http.h"

/* What a bulk source is opened over: the n files of a model or job, as
 * the caller holds them.  An origin uses the fields of its kind. */
struct tpl__origin_files {
  size_t n;
  struct tpl__fdcache *files; /* local: the files validated (fdcache.h) */
  const char *const *paths;   /* the files as shown */
  int mode;                   /* local: enum tpl__io_mode */
  /* http: per file its URL, shown form and validators (the caller's; they
   * must outlive the source); the client to borrow (rank 0's, which
   * validated them), or NULL for one of the source's own made from `opts`
   * and signed as paths[0] says (tpl__remote_sign_client). */
  const struct tpl__source_url *urls;
  struct tpl__http *http;
  const struct tpl__http_opts *opts;
  /* the model the files are rank 0's of, NULL on a rank without one
   * (--read local): a presharded MODEL's source gathers through it */
  const struct tpl__model *model;
};

struct tpl__origin {
  const char *name; /* "local", "http" */
  /* Nonzero when it claims MODEL `model` (a command line's operand);
   * the last row of the table claims every one. */
  int (*claims)(const char *model);
  /* Nonzero when its members are paths on this host: their directory
   * can be listed (the --layout mlc writer copies every file of it), and
   * a member that is not there is told apart from one refused, so
   * optional ones (hf_quant_config.json) are looked for (an object store
   * may answer a missing key with 403). */
  int paths;
  /* Opens MODEL `path` of this origin (the format's driver; checkpoint.h
   * tpl__model_open_with's contract). */
  int (*open)(const char *path, const struct tpl__http_opts *http,
              int presharded, struct tpl__model **out, struct tpl__error *err);
  /* probe: files [first, m->nfiles) of m, listed by a parser with the
   * sizes its JSON (`what`) declares: each is found, its size checked and
   * its identity recorded (local: confined, opened and held with its
   * dev/ino/mtime; http: its URL, and size/ETag/Last-Modified from a
   * one-byte ranged GET, all at once).  Returns 0, -errno, TPL_EFORMAT
   * or the client's codes. */
  int (*probe)(struct tpl__model *m, uint32_t first, const char *what,
               struct tpl__error *err);
  /* shown: member `name` of m's directory as messages name it (local:
   * dir/name; http: its URL without a presigned query); malloc'd, NULL
   * on ENOMEM. */
  char *(*shown)(const struct tpl__model *m, const char *name);
  /* st_member: adds safetensors file `name` of m's directory (or the
   * model's own) to m, its header read (each origin as suits it best:
   * local, the 8-byte length and then the header; http, one ranged GET of
   * the first 64 KiB, which also tells size and validators) and parsed.
   * With `what` (the index naming it) and `ctx` ("tensor 'x'"), a member
   * a JSON names: local confines it to the directory.  Returns 0, -ENOENT
   * when it is not there, the parser's codes or the origin's. */
  int (*st_member)(struct tpl__model *m, const char *name, const char *what,
                   const char *ctx, struct tpl__error *err);
  /* get: member `name` of m's directory whole, at most `cap` bytes, into
   * a NUL-terminated malloc'd *buf (the caller's).  Returns 0, -ENOENT
   * when there is none, or another code with err naming it. */
  int (*get)(const struct tpl__model *m, const char *name, size_t cap,
             char **buf, size_t *len, struct tpl__error *err);
  /* read: the bytes [off, off + len) of validated file idx of m. */
  int (*read)(const struct tpl__model *m, uint32_t idx, void *dst, uint64_t len,
              uint64_t off, struct tpl__error *err);
  /* unchanged: file idx of m is still the one validated (-EIO naming it
   * when not; http: every answer was checked, 0). */
  int (*unchanged)(const struct tpl__model *m, uint32_t idx,
                   struct tpl__error *err);
  /* member_open: on a rank that reads the files itself (--read local),
   * the file rank 0 validated (shown as `path`, `size` bytes, modified at
   * `mtime_ns`) into *fd (local: opened and checked, TPL_ENOMODEL /
   * TPL_EMISMATCH naming it; http: nothing to open, -1). */
  int (*member_open)(const char *path, uint64_t size, int64_t mtime_ns, int *fd,
                     struct tpl__error *err);
  /* member_unchanged: that file, open as fd, still has rank 0's size and
   * time (-EIO naming it when not; http: 0, the source checks). */
  int (*member_unchanged)(const char *path, uint64_t size, int64_t mtime_ns,
                          int fd, struct tpl__error *err);
  /* Why the other ranks cannot read its files themselves (--read
   * local), said before the job starts (64); NULL: they can. */
  const char *no_read_local;
  /* source: opens the bulk source over `in` into *src (source.h). */
  int (*source)(const struct tpl__origin_files *in, struct tpl__source **src,
                struct tpl__error *err);
};

extern const struct tpl__origin tpl__origin_local; /* origin_local.c */
extern const struct tpl__origin tpl__origin_http;  /* origin_http.c */

/* A presharded MODEL's origin over `base`, the one its rank files live
 * in (origin_presharded.c, reshard.h): members and rank files as base
 * has them, the virtual file of full tensors gathered from them.  Not
 * in the table: a format's load (reshard.c) sets it, no MODEL claims
 * it. */
const struct tpl__origin *
tpl__origin_presharded(const struct tpl__origin *base);

/* The origins, the one that claims every MODEL last (origin.c). */
extern const struct tpl__origin *const tpl__origins[];
extern const size_t tpl__norigins;

/* The origin of MODEL `model` as given on a command line: the first of
 * tpl__origins that claims it (http for an http://, https://, s3:// or
 * hf:// URL, url.h; local otherwise).  The one place the choice is
 * made. */
const struct tpl__origin *tpl__origin_for(const char *model);

/* The origin of a job-table file as rank 0 sent it: http when it carries
 * a URL (non-empty `url`), local otherwise (the job table's own form of
 * the choice made at open). */
const struct tpl__origin *tpl__origin_for_file(const char *url);

/* The origin of m (local for a model built by hand). */
const struct tpl__origin *tpl__model_origin(const struct tpl__model *m);

#endif
