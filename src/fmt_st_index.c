/* fmt_st_index.c - the sharded safetensors checkpoint's index,
 * model.safetensors.index.json ({"metadata": {...}, "weight_map":
 * {"tensor": "model-00001-of-00002.safetensors", ...}}), parsed from
 * bytes: every file it names must be a plain name inside the model
 * directory, and the distinct files come out in sorted name order (the
 * checkpoint's order).  Once the checkpoint loader has read those files
 * into the model, tpl__st_index_check says whether the map and the files
 * agree exactly: every mapped tensor is in its file, every tensor of a
 * file is mapped to that file, and no tensor lives in two files.  No
 * file is opened here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_st_index.h"
#include "jsonu.h"

struct tpl__st_index {
  const char *what;    /* borrowed: "DIR/model.safetensors.index.json" */
  json_t *root;        /* owned: the parsed index */
  json_t *weight_map;  /* borrowed from the root */
  json_t *files;       /* owned: file name -> first tensor mapped to it */
  const char **sorted; /* owned array of file names borrowed from `files` */
  size_t nsorted;
};

static int check_top_level(json_t *root, struct tpl__st_index *c,
                           struct tpl__error *err) {
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
static int check_entry(struct tpl__st_index *c, const char *tensor,
                       size_t tensor_len, json_t *v, struct tpl__error *err) {
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
  rc = tpl__model_check_file_name(fname, json_string_length(v), c->what, ctx,
                                  err);
  if (rc != 0) return rc;
  if (json_object_set_new(c->files, fname, json_string(tensor)) != 0)
    return tpl__oom(err);
  return 0;
}

static int collect_files(struct tpl__st_index *c, struct tpl__error *err) {
  int rc = 0;
  c->files = json_object();
  if (c->files == NULL) return tpl__oom(err);
  /* The iterator gives each key's length: a NUL in a name is refused. */
  for (void *it = json_object_iter(c->weight_map); rc == 0 && it != NULL;
       it = json_object_iter_next(c->weight_map, it))
    rc = check_entry(c, json_object_iter_key(it), json_object_iter_key_len(it),
                     json_object_iter_value(it), err);
  return rc;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int sort_files(struct tpl__st_index *c, struct tpl__error *err) {
  const char *key;
  json_t *v;
  size_t i = 0;
  c->nsorted = json_object_size(c->files);
  c->sorted = calloc(c->nsorted, sizeof(*c->sorted));
  if (c->sorted == NULL) return tpl__oom(err);
  json_object_foreach(c->files, key, v) c->sorted[i++] = key;
  qsort(c->sorted, c->nsorted, sizeof(*c->sorted), cmp_str);
  return 0;
}

/* No tensor may live in two files; `owner` maps name -> file index. */
static int check_unique(const struct tpl__st_index *c,
                        const struct tpl__model *m, json_t *owner,
                        struct tpl__error *err) {
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
      return tpl__oom(err);
  }
  return 0;
}

/* Every tensor found in a file is mapped to that very file. */
static int check_files_mapped(const struct tpl__st_index *c,
                              const struct tpl__model *m,
                              struct tpl__error *err) {
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
static int check_map_present(const struct tpl__st_index *c, json_t *owner,
                             struct tpl__error *err) {
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

int tpl__st_index_check(const struct tpl__st_index *c,
                        const struct tpl__model *m, struct tpl__error *err) {
  json_t *owner = json_object();
  int rc;
  if (owner == NULL) return tpl__oom(err);
  rc = check_unique(c, m, owner, err);
  if (rc == 0) rc = check_files_mapped(c, m, err);
  if (rc == 0) rc = check_map_present(c, owner, err);
  json_decref(owner);
  return rc;
}

void tpl__st_index_free(struct tpl__st_index *c) {
  if (c == NULL) return;
  free(c->sorted);
  json_decref(c->files);
  json_decref(c->root);
  free(c);
}

int tpl__st_index_parse(const char *buf, size_t len, const char *what,
                        struct tpl__st_index **out, struct tpl__error *err) {
  struct tpl__st_index *c = calloc(1, sizeof(*c));
  int rc;
  if (c == NULL) return tpl__oom(err);
  c->what = what;
  rc = tpl__json_parse_object(buf, len, what, &c->root, err);
  if (rc == 0) rc = check_top_level(c->root, c, err);
  if (rc == 0) rc = collect_files(c, err);
  if (rc == 0) rc = sort_files(c, err);
  if (rc != 0) {
    tpl__st_index_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

size_t tpl__st_index_nfiles(const struct tpl__st_index *c) {
  return c->nsorted;
}

const char *tpl__st_index_file(const struct tpl__st_index *c, size_t i,
                               const char **first_tensor) {
  const char *fname = c->sorted[i];
  *first_tensor = json_string_value(json_object_get(c->files, fname));
  return fname;
}
