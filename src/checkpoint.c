/* checkpoint.c - opening a checkpoint: tpl__model_open_with asks which
 * origin MODEL has (origin.h) and lets it open the model; a local one is
 * opened here: one file (read by the single-file format its name says,
 * tpl__format_for_file), or a directory whose first probe of the formats
 * (format.h) that exists decides its format, whose load (written once
 * over the origin) then builds the model.  The reads a model answers
 * afterwards go to its origin too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fileio.h"
#include "format.h"
#include "origin.h"

/* An empty local model of format `id` in `dir`. */
static struct tpl__model *local_model(int id, const char *dir) {
  struct tpl__model *m = tpl__model_new(id, dir);
  if (m != NULL) m->origin = &tpl__origin_local;
  return m;
}

static int done(struct tpl__model *m, int rc, struct tpl__model **out) {
  if (rc == 0)
    *out = m;
  else
    tpl__model_free(m);
  return rc;
}

/* The model's own file: opened by the path given, not a member, by the
 * single-file format its name says (format.h). */
static int open_single_file(const char *path, struct tpl__model **out,
                            struct tpl__error *err) {
  const char *slash = strrchr(path, '/');
  const struct tpl__format *f = tpl__format_for_file(path);
  char *dir = tpl__dir_of(path);
  struct tpl__model *m = dir ? local_model(f->id, dir) : NULL;
  free(dir);
  if (m == NULL) return tpl__oom(err);
  return done(m, f->load_file(path, slash ? slash + 1 : path, m, err), out);
}

/* Whether member `name` of `dir` exists: 1, 0, or -ENOMEM. */
static int has_member(const char *dir, const char *name) {
  char *p = tpl__path_join(dir, name);
  int there = p ? tpl__exists(p) : -ENOMEM;
  free(p);
  return there;
}

/* The first of the formats' probes that exists decides the format. */
static int open_directory(const char *dir, int presharded,
                          struct tpl__model **out, struct tpl__error *err) {
  for (size_t i = 0; i < tpl__nformats; i++) {
    const struct tpl__format *f = tpl__formats[i];
    for (const char *const *probe = f->probes; *probe != NULL; probe++) {
      int there = has_member(dir, *probe);
      struct tpl__model *m;
      if (there < 0) return tpl__oom(err);
      if (!there) continue;
      m = local_model(f->id, dir);
      if (m == NULL) return tpl__oom(err);
      return done(m, f->load(m, *probe, presharded, err), out);
    }
  }
  return tpl__model_none_found(dir, "", err);
}

int tpl__model_open_with(const char *path, const struct tpl__http_opts *http,
                         int presharded, struct tpl__model **out,
                         struct tpl__error *err) {
  const struct tpl__origin *o = tpl__origin_for(path);
  int rc = o->open(path, http, presharded, out, err);
  /* a format may have put a wrapper over it (a presharded MODEL) */
  if (rc == 0 && (*out)->origin == NULL) (*out)->origin = o;
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
  /* Members are held by identity and open while read, a quarter of the
   * limit at most (tpl__model_hold_fd, fdcache.h): the higher the limit,
   * the fewer re-opens. */
  tpl__raise_fd_limit();
  if (!tpl__exists(path))
    return tpl__fail(err, TPL_ENOMODEL, "%s: no such file or directory", path);
  if (tpl__is_dir(path)) return open_directory(path, presharded, out, err);
  return open_single_file(path, out, err);
}
