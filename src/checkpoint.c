/* checkpoint.c - opening a checkpoint: tpl__model_open decides what kind
 * of checkpoint a path holds (one .safetensors file, a directory with
 * model.safetensors, a sharded index, an MLC weight directory) and runs
 * its driver.  A driver reads the format's JSON, hands the bytes to the
 * format's parser (fmt_*.c, which only parse), and opens the member files
 * the parser listed through the loader (ckpt_files.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "ckpt_files.h"
#include "fileio.h"
#include "fmt_mlc_cache.h"
#include "fmt_st_index.h"
#include "origin.h"

/* --- the drivers of the JSON-described formats --- */

static int load_index_files(const struct tpl__st_index *ix, const char *dir,
                            const char *what, struct tpl__model *m,
                            struct tpl__error *err) {
  for (size_t i = 0; i < tpl__st_index_nfiles(ix); i++) {
    const char *first, *fname = tpl__st_index_file(ix, i, &first);
    char ctx[TPL_MAX_NAME + 16], *path = tpl__path_join(dir, fname);
    int rc;
    if (path == NULL) return tpl__oom(err);
    snprintf(ctx, sizeof(ctx), "tensor '%s'", first);
    rc = tpl__member_confine(dir, path, fname, what, ctx, err);
    if (rc == 0) rc = tpl__st_load(path, fname, m, err);
    free(path);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Builds a sharded checkpoint from its index JSON (`what`): parses it,
 * loads each member file once in sorted name order, and checks that the
 * map and the files agree. */
static int load_index(const char *buf, size_t len, const char *dir,
                      const char *what, struct tpl__model *m,
                      struct tpl__error *err) {
  struct tpl__st_index *ix = NULL;
  int rc = tpl__st_index_parse(buf, len, what, &ix, err);
  if (rc == 0) rc = load_index_files(ix, dir, what, m, err);
  if (rc == 0) rc = tpl__st_index_check(ix, m, err);
  tpl__st_index_free(ix);
  return rc;
}

/* Builds an MLC weight directory from its cache JSON (`what`): parses
 * every record, then confines and opens each shard file, checking its
 * size. */
static int load_mlc(const char *buf, size_t len, const char *what,
                    int presharded, struct tpl__model *m,
                    struct tpl__error *err) {
  int rc = tpl__mlc_parse_flags(buf, len, what, presharded, m, err);
  if (rc == 0) rc = tpl__model_origin(m)->probe(m, 0, what, err);
  if (rc == 0) rc = tpl__mlc_check_nonempty(m, what, err);
  return rc;
}

/* --- format detection --- */

/* Opens `path`, a file named `name` in `dir`, as a checkpoint of
 * `format`: a safetensors file, or the JSON of an index or MLC cache. */
static int open_format(const char *dir, const char *path, const char *name,
                       int format, int presharded, struct tpl__model **out,
                       struct tpl__error *err) {
  struct tpl__model *m = tpl__model_new(format, dir);
  char *buf = NULL;
  size_t len = 0;
  int rc;
  if (m == NULL) return tpl__oom(err);
  m->origin = &tpl__origin_local;
  if (format == TPL_FMT_SAFETENSORS)
    rc = tpl__st_load(path, name, m, err);
  else
    rc = tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc == 0 && format == TPL_FMT_ST_INDEX)
    rc = load_index(buf, len, dir, path, m, err);
  else if (rc == 0 && format == TPL_FMT_MLC)
    rc = load_mlc(buf, len, path, presharded, m, err);
  free(buf);
  if (rc == 0)
    *out = m;
  else
    tpl__model_free(m);
  return rc;
}

static int open_single_file(const char *path, struct tpl__model **out,
                            struct tpl__error *err) {
  const char *slash = strrchr(path, '/');
  char *dir = tpl__dir_of(path);
  int rc;
  if (dir == NULL) return tpl__oom(err);
  rc = open_format(dir, path, slash ? slash + 1 : path, TPL_FMT_SAFETENSORS, 0,
                   out, err);
  free(dir);
  return rc;
}

/* The first of the probes that exists decides the format. */
static int open_directory(const char *dir, int presharded,
                          struct tpl__model **out, struct tpl__error *err) {
  const struct tpl__model_probe *probes = tpl__model_probes;
  for (size_t i = 0; i < TPL_MODEL_NPROBES; i++) {
    char *p = tpl__path_join(dir, probes[i].name);
    int rc;
    if (p == NULL) return tpl__oom(err);
    if (!tpl__exists(p)) {
      free(p);
      continue;
    }
    rc = open_format(dir, p, probes[i].name, probes[i].format, presharded, out,
                     err);
    free(p);
    return rc;
  }
  return tpl__model_none_found(dir, "", err);
}

int tpl__model_open_with(const char *path, const struct tpl__http_opts *http,
                         int presharded, struct tpl__model **out,
                         struct tpl__error *err) {
  const struct tpl__origin *o = tpl__origin_for(path);
  int rc = o->open(path, http, presharded, out, err);
  if (rc == 0) (*out)->origin = o;
  return rc;
}

int tpl__model_read(const struct tpl__model *m, uint32_t idx, void *dst,
                    uint64_t len, uint64_t off, struct tpl__error *err) {
  return tpl__model_origin(m)->read(m, idx, dst, len, off, err);
}

int tpl__model_file_unchanged(const struct tpl__model *m, uint32_t idx,
                              struct tpl__error *err) {
  return tpl__model_origin(m)->unchanged(m, idx, err);
}

int tpl__model_read_member(const struct tpl__model *m, const char *name,
                           size_t cap, char **buf, size_t *len,
                           struct tpl__error *err) {
  return tpl__model_origin(m)->get(m, name, cap, buf, len, err);
}

int tpl__model_open(const char *path, struct tpl__model **out,
                    struct tpl__error *err) {
  return tpl__model_open_flags(path, 0, out, err);
}

int tpl__model_open_flags(const char *path, int presharded,
                          struct tpl__model **out, struct tpl__error *err) {
  /* Every member stays open from validation to the end of the load (see
   * tpl__model_hold_fd). */
  tpl__raise_fd_limit();
  if (!tpl__exists(path))
    return tpl__fail(err, TPL_ENOMODEL, "%s: no such file or directory", path);
  if (tpl__is_dir(path)) return open_directory(path, presharded, out, err);
  return open_single_file(path, out, err);
}
