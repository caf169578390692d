/* st_index.c - the sharded safetensors checkpoint: reads
 * model.safetensors.index.json ({"metadata": {...}, "weight_map":
 * {"tensor": "model-00001-of-00002.safetensors", ...}}), confines every
 * file it names to the model directory, loads each distinct file once in
 * sorted name order with tpl__st_load, and checks that the map and the
 * files agree exactly: every mapped tensor is in its file, every tensor of
 * a file is mapped to that file, and no tensor lives in two files.
 * Checkpoint order is files in sorted order, tensors of a file in offset
 * order.  Also home of tpl__member_path, the confinement rule the MLC
 * reader shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "jsonu.h"
#include "readers.h"

#define INDEX_NAME "model.safetensors.index.json"

/* --- confinement of file names to the model directory --- */

static int check_name_syntax(const char *name, size_t len, const char *what,
                             const char *ctx, struct tpl_error *err) {
  if (len == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found an empty name",
                     what, ctx);
  if (tpl__has_nul(name, len))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name, found a NUL byte in it",
                     what, ctx);
  if (name[0] == '/')
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found the absolute path '%s'",
                     what, ctx, name);
  if (strchr(name, '/') != NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a plain file name without '/', "
                     "found '%s'",
                     what, ctx, name);
  if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found '%s'",
                     what, ctx, name);
  return 0;
}

/* Returns 1 when `path` (a resolved path) lies inside `root` (resolved). */
static int path_inside(const char *path, const char *root) {
  size_t n = strlen(root);
  if (strcmp(root, "/") == 0) return 1;
  return strncmp(path, root, n) == 0 && path[n] == '/';
}

/* The HF hub cache keeps a model as REPO/snapshots/REV/NAME -> symlinks
 * into REPO/blobs/HASH.  When the resolved model directory is such a
 * snapshot, returns REPO/blobs (malloc'd), else NULL. */
static char *hub_blobs(const char *rdir) {
  const char *rev = strrchr(rdir, '/'), *snaps;
  size_t repo_len;
  char *out;
  if (rev == NULL || rev == rdir) return NULL;
  for (snaps = rev - 1; snaps > rdir && *snaps != '/'; snaps--) {
  }
  if ((size_t)(rev - snaps) != strlen("/snapshots") ||
      strncmp(snaps, "/snapshots", strlen("/snapshots")) != 0)
    return NULL;
  repo_len = (size_t)(snaps - rdir);
  out = malloc(repo_len + sizeof("/blobs"));
  if (out == NULL) return NULL;
  memcpy(out, rdir, repo_len);
  memcpy(out + repo_len, "/blobs", sizeof("/blobs"));
  return out;
}

static int inside_hub_blobs(const char *rpath, const char *rdir) {
  char *blobs = hub_blobs(rdir);
  int in = blobs != NULL && path_inside(rpath, blobs);
  free(blobs);
  return in;
}

/* A symlink is followed only when it resolves inside the directory, or,
 * for a snapshot of the HF hub cache, inside its repository's blobs. */
static int check_symlink(const char *dir, const char *path, const char *name,
                         const char *what, const char *ctx,
                         struct tpl_error *err) {
  char *rdir = realpath(dir, NULL), *rpath;
  int rc = 0;
  if (rdir == NULL) {
    int e = errno;
    return tpl__fail(err, -e, "%s: cannot resolve directory: %s", dir,
                     strerror(e));
  }
  rpath = realpath(path, NULL);
  if (rpath == NULL) {
    int e = errno;
    rc = tpl__fail(err, -e,
                   "%s: %s: expected file '%s' (a symlink) to resolve, "
                   "found: %s",
                   what, ctx, name, strerror(e));
  } else if (!path_inside(rpath, rdir) && !inside_hub_blobs(rpath, rdir)) {
    rc = tpl__fail(err, TPL_EFORMAT,
                   "%s: %s: expected file '%s' inside the model directory, "
                   "found a symlink to '%s' outside it",
                   what, ctx, name, rpath);
  }
  free(rdir);
  free(rpath);
  return rc;
}

int tpl__member_path(const char *dir, const char *name, size_t len,
                     const char *what, const char *ctx, char **path,
                     struct tpl_error *err) {
  struct stat st;
  char *p;
  int rc = check_name_syntax(name, len, what, ctx, err);
  if (rc != 0) return rc;
  p = tpl__path_join(dir, name);
  if (p == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  if (lstat(p, &st) != 0) {
    int e = errno;
    rc = tpl__fail(err, -e, "%s: %s: expected file '%s', found %s", what, ctx,
                   name, e == ENOENT ? "no such file" : strerror(e));
  } else if (S_ISLNK(st.st_mode)) {
    rc = check_symlink(dir, p, name, what, ctx, err);
  }
  if (rc != 0) {
    free(p);
    return rc;
  }
  *path = p;
  return 0;
}

/* --- the index --- */

struct index_ctx {
  const char *dir;
  const char *what;    /* "DIR/model.safetensors.index.json" */
  json_t *weight_map;  /* borrowed from the root */
  json_t *files;       /* file name -> first tensor mapped to it */
  const char **sorted; /* file names, sorted; borrowed from `files` */
  size_t nsorted;
};

static int check_top_level(json_t *root, struct index_ctx *c,
                           struct tpl_error *err) {
  json_t *meta = json_object_get(root, "metadata");
  json_t *wm = json_object_get(root, "weight_map");
  if (meta != NULL && !json_is_object(meta))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected \"metadata\" to be an object, found "
                     "another JSON type",
                     c->what);
  if (wm == NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a \"weight_map\" object, found none",
                     c->what);
  if (!json_is_object(wm))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected \"weight_map\" to be an object, found "
                     "another JSON type",
                     c->what);
  if (json_object_size(wm) == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected at least one tensor in \"weight_map\", "
                     "found an empty map",
                     c->what);
  c->weight_map = wm;
  return 0;
}

/* Checks one weight_map entry and records its file in c->files. */
static int check_entry(struct index_ctx *c, const char *tensor,
                       size_t tensor_len, json_t *v, struct tpl_error *err) {
  char ctx[TPL_MAX_NAME + 16];
  const char *fname;
  int rc;
  if (tensor_len == 0 || tensor_len > TPL_MAX_NAME ||
      strlen(tensor) != tensor_len)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a name of 1 to %d bytes "
                     "without NUL, found %zu bytes",
                     c->what, tensor, TPL_MAX_NAME, tensor_len);
  if (!json_is_string(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a file name string in "
                     "\"weight_map\", found another JSON type",
                     c->what, tensor);
  fname = json_string_value(v);
  if (json_object_get(c->files, fname) != NULL) return 0;
  snprintf(ctx, sizeof(ctx), "tensor '%s'", tensor);
  rc = check_name_syntax(fname, json_string_length(v), c->what, ctx, err);
  if (rc != 0) return rc;
  if (json_object_set_new(c->files, fname, json_string(tensor)) != 0)
    return tpl__fail(err, -ENOMEM, "out of memory");
  return 0;
}

static int collect_files(struct index_ctx *c, struct tpl_error *err) {
  const char *key;
  json_t *v;
  void *it;
  int rc;
  c->files = json_object();
  if (c->files == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  for (it = json_object_iter(c->weight_map); it != NULL;
       it = json_object_iter_next(c->weight_map, it)) {
    key = json_object_iter_key(it);
    v = json_object_iter_value(it);
    rc = check_entry(c, key, json_object_iter_key_len(it), v, err);
    if (rc != 0) return rc;
  }
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int sort_files(struct index_ctx *c, struct tpl_error *err) {
  const char *key;
  json_t *v;
  size_t i = 0;
  c->nsorted = json_object_size(c->files);
  c->sorted = calloc(c->nsorted, sizeof(*c->sorted));
  if (c->sorted == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  json_object_foreach(c->files, key, v) c->sorted[i++] = key;
  qsort(c->sorted, c->nsorted, sizeof(*c->sorted), cmp_str);
  return 0;
}

static int load_files(struct index_ctx *c, struct tpl_model *m,
                      struct tpl_error *err) {
  for (size_t i = 0; i < c->nsorted; i++) {
    const char *fname = c->sorted[i];
    const char *first = json_string_value(json_object_get(c->files, fname));
    char ctx[TPL_MAX_NAME + 16], *path = NULL;
    int rc;
    snprintf(ctx, sizeof(ctx), "tensor '%s'", first);
    rc = tpl__member_path(c->dir, fname, strlen(fname), c->what, ctx, &path,
                          err);
    if (rc != 0) return rc;
    rc = tpl__st_load(path, fname, m, err);
    free(path);
    if (rc != 0) return rc;
  }
  return 0;
}

/* No tensor may live in two files; `owner` maps name -> file index. */
static int check_unique(struct index_ctx *c, const struct tpl_model *m,
                        json_t *owner, struct tpl_error *err) {
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    json_t *prev = json_object_get(owner, t->name);
    if (prev != NULL)
      return tpl__fail(
          err, TPL_EFORMAT,
          "%s: tensor '%s': expected it in one file, found it in both "
          "'%s' and '%s'",
          c->what, t->name, m->files[json_integer_value(prev)].name,
          m->files[t->file].name);
    if (json_object_set_new(owner, t->name, json_integer(t->file)) != 0)
      return tpl__fail(err, -ENOMEM, "out of memory");
  }
  return 0;
}

/* Every tensor found in a file is mapped to that very file. */
static int check_files_mapped(struct index_ctx *c, const struct tpl_model *m,
                              struct tpl_error *err) {
  for (size_t i = 0; i < m->ntensors; i++) {
    const struct tpl__tensor *t = &m->tensors[i];
    const char *fname = m->files[t->file].name;
    json_t *v = json_object_get(c->weight_map, t->name);
    if (v == NULL)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected every tensor of '%s' in "
                       "\"weight_map\", found it missing from the map",
                       c->what, t->name, fname);
    if (strcmp(json_string_value(v), fname) != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected it in '%s' as "
                       "\"weight_map\" says, found it in '%s'",
                       c->what, t->name, json_string_value(v), fname);
  }
  return 0;
}

/* Every mapped tensor exists (in its file, given check_files_mapped). */
static int check_map_present(struct index_ctx *c, json_t *owner,
                             struct tpl_error *err) {
  const char *key;
  json_t *v;
  json_object_foreach(c->weight_map, key, v) {
    if (json_object_get(owner, key) == NULL)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected it in '%s' as "
                       "\"weight_map\" says, found no such tensor there",
                       c->what, key, json_string_value(v));
  }
  return 0;
}

static int check_agreement(struct index_ctx *c, const struct tpl_model *m,
                           struct tpl_error *err) {
  json_t *owner = json_object();
  int rc;
  if (owner == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  rc = check_unique(c, m, owner, err);
  if (rc == 0) rc = check_files_mapped(c, m, err);
  if (rc == 0) rc = check_map_present(c, owner, err);
  json_decref(owner);
  return rc;
}

int tpl__st_index_parse(const char *buf, size_t len, const char *dir,
                        struct tpl_model *m, struct tpl_error *err) {
  struct index_ctx c = {.dir = dir};
  json_t *root = NULL;
  char *what = tpl__path_join(dir, INDEX_NAME);
  int rc;
  if (what == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  c.what = what;
  rc = tpl__json_parse_object(buf, len, what, &root, err);
  if (rc != 0) goto out;
  rc = check_top_level(root, &c, err);
  if (rc == 0) rc = collect_files(&c, err);
  if (rc == 0) rc = sort_files(&c, err);
  if (rc == 0) rc = load_files(&c, m, err);
  if (rc == 0) rc = check_agreement(&c, m, err);
out:
  free(c.sorted);
  json_decref(c.files);
  json_decref(root);
  free(what);
  return rc;
}
