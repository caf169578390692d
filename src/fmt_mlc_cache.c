/* fmt_mlc_cache.c - MLC LLM weight directories: tensor-cache.json (or the
 * older ndarray-cache.json) lists shard files ({"dataPath":
 * "params_shard_0.bin", "format": "raw-shard", "nbytes": N, "records":
 * [...]}) and, inside each, the tensors it holds ({"name", "shape",
 * "dtype", "format": "raw" | "f32-to-bf16", "nbytes", "byteOffset"}).
 * This parser reads the cache from bytes and checks every record strictly
 * -- plain file names, dtype and byte counts, ranges inside the file's
 * declared size, no overlaps, no duplicate names -- and appends the files
 * (not opened: the checkpoint loader opens them and checks their size)
 * and the tensors to the model in file order, then byteOffset order.
 * Formats are read as TVM reads them: MLC converts with encode_format
 * "f32-to-bf16", which TVM's dump_tensor_cache writes on every record;
 * only a float32 record is then stored as bf16 (numel x 2 bytes, decoded
 * to numel x 4), every other dtype is raw.  A cache presharded by MLC
 * (MLC_INTERNAL_PRESHARD_NUM: records "X_shard-K", one per worker, already
 * cut) is read as it is with tpl__mlc_parse_flags' `presharded` (the MLC
 * load always asks so, and marks the model for its cut: format.c,
 * mlc_cut.h); without it such a record is refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fileio.h"
#include "fmt_mlc_cache.h"
#include "jsonu.h"
#include "md5sum.h"

struct mlc_ctx {
  const char *what;     /* "DIR/tensor-cache.json" */
  json_t *names;        /* tensor name -> dataPath, across all files */
  json_t *paths;        /* dataPath set */
  struct tpl__model *m; /* the model being filled */
  int presharded;       /* "NAME_shard-K" records are read, not refused */
};

/* One shard file: its records are the model's tensors from `first` on,
 * sorted by offset once all are in. */
struct shard {
  const char *data_path; /* borrowed from the JSON */
  uint32_t file;
  uint64_t size; /* as "nbytes" declares it */
  size_t first;
};

/* --- one tensor record --- */

/* MLC's preshard names worker K's piece of X "X_shard-K" (support/
 * preshard.py, _sharded_param_name).  Returns 1 for such a name. */
static int is_preshard_name(const char *name, size_t len) {
  static const char tag[] = "_shard-";
  size_t digits = 0;
  while (digits < len && name[len - 1 - digits] >= '0' &&
         name[len - 1 - digits] <= '9')
    digits++;
  if (digits == 0 || len < digits + sizeof(tag) - 1) return 0;
  return memcmp(name + len - digits - (sizeof(tag) - 1), tag,
                sizeof(tag) - 1) == 0;
}

static int get_name(struct mlc_ctx *c, const struct shard *s, size_t k,
                    json_t *rec, const char **name, struct tpl__error *err) {
  json_t *v = json_object_get(rec, "name");
  json_t *prev;
  size_t len;
  if (!json_is_string(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': record %zu: expected a \"name\" string, "
                     "found %s",
                     c->what, s->data_path, k,
                     v ? "another JSON type" : "none");
  len = json_string_length(v);
  *name = json_string_value(v);
  if (len == 0 || len > TPL_MAX_NAME || tpl__has_nul(*name, len))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': record %zu: expected a name of 1 to %d "
                     "bytes without NUL, found %zu bytes",
                     c->what, s->data_path, k, TPL_MAX_NAME, len);
  /* safetensors keeps this key for the header's metadata: preshard and
   * dump could not write the tensor, so it is refused where it is read,
   * as the safetensors reader does. */
  if (strcmp(*name, "__metadata__") == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': record %zu: tensor '__metadata__': "
                     "expected another name (safetensors reserves "
                     "__metadata__ for the header's metadata)",
                     c->what, s->data_path, k);
  if (!c->presharded && is_preshard_name(*name, len))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a cache of full tensors, "
                     "found one presharded by MLC (MLC_INTERNAL_PRESHARD_NUM "
                     "at convert_weight: each 'NAME_shard-K' record is "
                     "worker K's piece, already cut); tpload shards full "
                     "tensors itself, so convert again without "
                     "MLC_INTERNAL_PRESHARD_NUM",
                     c->what, *name);
  prev = json_object_get(c->names, *name);
  if (prev != NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected one record per name, found "
                     "it in '%s' and again in '%s'",
                     c->what, *name, json_string_value(prev), s->data_path);
  if (json_object_set_new(c->names, *name, json_string(s->data_path)) != 0)
    return tpl__oom(err);
  return 0;
}

static int get_shape(struct mlc_ctx *c, const char *name, json_t *rec,
                     struct tpl__tensor *t, struct tpl__error *err) {
  json_t *a = json_object_get(rec, "shape"), *d;
  size_t i;
  if (!json_is_array(a))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a \"shape\" array, found %s",
                     c->what, name, a ? "another JSON type" : "none");
  if (json_array_size(a) > TPL_MAX_DIMS)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected at most %d dims, found %zu",
                     c->what, name, TPL_MAX_DIMS, json_array_size(a));
  json_array_foreach(a, i, d) {
    if (tpl__json_u64(d, &t->shape[i]) != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected dim %zu to be a "
                       "non-negative integer, found another value",
                       c->what, name, i);
  }
  t->ndim = (int)json_array_size(a);
  return 0;
}

static int get_dtype(struct mlc_ctx *c, const char *name, json_t *rec,
                     struct tpl__tensor *t, struct tpl__error *err) {
  json_t *dt = json_object_get(rec, "dtype");
  json_t *fmt = json_object_get(rec, "format");
  const char *f;
  if (!json_is_string(dt))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a \"dtype\" string, found %s",
                     c->what, name, dt ? "another JSON type" : "none");
  t->dtype = tpl__dtype_from_mlc(json_string_value(dt));
  if (t->dtype < 0)
    return tpl__fail(err, TPL_EDTYPE,
                     "%s: tensor '%s': expected an MLC dtype such as "
                     "float16 or bfloat16, found '%s'",
                     c->what, name, json_string_value(dt));
  if (!json_is_string(fmt))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected a \"format\" string, found %s",
                     c->what, name, fmt ? "another JSON type" : "none");
  f = json_string_value(fmt);
  if (strcmp(f, "raw") == 0) {
    t->encoding = TPL_ENC_RAW;
  } else if (strcmp(f, "f32-to-bf16") == 0) {
    /* TVM's dump_tensor_cache stamps the cache's encode format on every
     * record, but converts (and its loaders decode) float32 only: a
     * float16 or uint32 record under "f32-to-bf16" is stored raw. */
    t->encoding = t->dtype == TPL_DT_F32 ? TPL_ENC_F32_TO_BF16 : TPL_ENC_RAW;
  } else {
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected format \"raw\" or "
                     "\"f32-to-bf16\", found '%s'",
                     c->what, name, f);
  }
  return 0;
}

/* Decoded and stored byte counts from the shape; the record's "nbytes"
 * must equal the stored count. */
static int get_sizes(struct mlc_ctx *c, const char *name, json_t *rec,
                     struct tpl__tensor *t, struct tpl__error *err) {
  uint64_t numel = 1, stored, nbytes;
  size_t item =
      t->encoding == TPL_ENC_F32_TO_BF16 ? 2 : tpl__dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++)
    if (tpl__mul_u64(numel, t->shape[i], &numel) != 0)
      return tpl__fail(err, TPL_EOVERFLOW,
                       "%s: tensor '%s': expected a shape whose element "
                       "count fits 64 bits, found an overflow",
                       c->what, name);
  if (tpl__mul_u64(numel, tpl__dtype_size(t->dtype), &t->nbytes) != 0 ||
      tpl__mul_u64(numel, item, &stored) != 0)
    return tpl__fail(err, TPL_EOVERFLOW,
                     "%s: tensor '%s': expected a byte size that fits 64 "
                     "bits, found %llu elements",
                     c->what, name, (unsigned long long)numel);
  if (tpl__json_u64(json_object_get(rec, "nbytes"), &nbytes) != 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected \"nbytes\" to be a "
                     "non-negative integer, found another value",
                     c->what, name);
  if (nbytes != stored)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected nbytes %llu (%llu elements "
                     "x %zu bytes), found %llu",
                     c->what, name, (unsigned long long)stored,
                     (unsigned long long)numel, item,
                     (unsigned long long)nbytes);
  t->stored_bytes = stored;
  return 0;
}

static int get_range(struct mlc_ctx *c, const struct shard *s, const char *name,
                     json_t *rec, struct tpl__tensor *t,
                     struct tpl__error *err) {
  uint64_t end;
  if (tpl__json_u64(json_object_get(rec, "byteOffset"), &t->offset) != 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected \"byteOffset\" to be a "
                     "non-negative integer, found another value",
                     c->what, name);
  if (tpl__add_u64(t->offset, t->stored_bytes, &end) != 0)
    return tpl__fail(err, TPL_EOVERFLOW,
                     "%s: tensor '%s': expected byteOffset + nbytes to fit "
                     "64 bits, found %llu + %llu",
                     c->what, name, (unsigned long long)t->offset,
                     (unsigned long long)t->stored_bytes);
  if (end > s->size)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected bytes [%llu, %llu) inside "
                     "'%s' of %llu bytes, found them past its end",
                     c->what, name, (unsigned long long)t->offset,
                     (unsigned long long)end, s->data_path,
                     (unsigned long long)s->size);
  return 0;
}

static int parse_tensor(struct mlc_ctx *c, const struct shard *s, size_t k,
                        json_t *rec, struct tpl__error *err) {
  struct tpl__tensor t = {0};
  const char *name = NULL;
  int rc;
  if (!json_is_object(rec))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': record %zu: expected an object, found "
                     "another JSON type",
                     c->what, s->data_path, k);
  rc = get_name(c, s, k, rec, &name, err);
  if (rc == 0) rc = get_shape(c, name, rec, &t, err);
  if (rc == 0) rc = get_dtype(c, name, rec, &t, err);
  if (rc == 0) rc = get_sizes(c, name, rec, &t, err);
  if (rc == 0) rc = get_range(c, s, name, rec, &t, err);
  if (rc != 0) return rc;
  t.file = s->file;
  t.name = strdup(name);
  if (t.name == NULL) return tpl__oom(err);
  return tpl__model_take_tensor(c->m, &t, s->data_path, err);
}

/* --- one shard file --- */

static int cmp_offset(const void *a, const void *b) {
  const struct tpl__tensor *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  if (x->stored_bytes != y->stored_bytes)
    return x->stored_bytes < y->stored_bytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* After sorting by offset, a record overlaps when it starts before the
 * furthest end seen so far (empty records occupy no bytes). */
static int check_overlaps(struct mlc_ctx *c, const struct shard *s,
                          struct tpl__error *err) {
  const struct tpl__tensor *far = NULL;
  uint64_t end = 0;
  for (size_t i = s->first; i < c->m->ntensors; i++) {
    const struct tpl__tensor *t = &c->m->tensors[i];
    if (t->stored_bytes == 0) continue;
    if (far != NULL && t->offset < end)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected bytes [%llu, %llu) of "
                       "'%s' to be its own, found them overlapping tensor "
                       "'%s' at [%llu, %llu)",
                       c->what, t->name, (unsigned long long)t->offset,
                       (unsigned long long)(t->offset + t->stored_bytes),
                       s->data_path, far->name, (unsigned long long)far->offset,
                       (unsigned long long)end);
    if (t->offset + t->stored_bytes > end) {
      end = t->offset + t->stored_bytes;
      far = t;
    }
  }
  return 0;
}

/* The shard file's name and size as the cache declares them; the
 * checkpoint loader opens it later and checks the size on disk. */
static int read_shard_header(struct mlc_ctx *c, json_t *frec, size_t i,
                             struct shard *s, json_t **recs,
                             struct tpl__error *err) {
  json_t *dp = json_object_get(frec, "dataPath");
  json_t *fmt = json_object_get(frec, "format");
  char ctx[64];
  int rc;
  snprintf(ctx, sizeof(ctx), "file record %zu", i);
  if (!json_is_string(dp))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a \"dataPath\" string, found %s",
                     c->what, ctx, dp ? "another JSON type" : "none");
  s->data_path = json_string_value(dp);
  rc = tpl__model_check_file_name(s->data_path, json_string_length(dp), c->what,
                                  ctx, err);
  if (rc != 0) return rc;
  if (json_object_get(c->paths, s->data_path) != NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected each dataPath once, found '%s' again",
                     c->what, ctx, s->data_path);
  if (json_object_set_new(c->paths, s->data_path, json_true()) != 0)
    return tpl__oom(err);
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "raw-shard"))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': expected format \"raw-shard\", found "
                     "'%s'",
                     c->what, s->data_path,
                     json_is_string(fmt) ? json_string_value(fmt) : "");
  if (tpl__json_u64(json_object_get(frec, "nbytes"), &s->size) != 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': expected \"nbytes\" to be a "
                     "non-negative integer, found another value",
                     c->what, s->data_path);
  *recs = json_object_get(frec, "records");
  if (!json_is_array(*recs))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file '%s': expected a \"records\" array, found %s",
                     c->what, s->data_path,
                     *recs ? "another JSON type" : "none");
  return 0;
}

/* The file's "md5sum" as TVM records it (md5sum.h), kept for
 * --verify-md5, which alone judges it: absent, 32 hex digits or neither. */
static void read_md5sum(json_t *frec, struct tpl__file *f) {
  json_t *v = json_object_get(frec, "md5sum");
  if (v == NULL) return;
  f->md5_state =
      json_is_string(v) && tpl__md5_parse(json_string_value(v),
                                          json_string_length(v), f->md5) == 0
          ? TPL_MD5_OK
          : TPL_MD5_BAD;
}

static int add_shard_file(struct tpl__model *m, json_t *frec, struct shard *s,
                          struct tpl__error *err) {
  char *path = tpl__path_join(m->dir, s->data_path);
  int rc = path ? tpl__model_add_file(m, path, s->data_path, s->size, &s->file)
                : -ENOMEM;
  free(path);
  if (rc != 0) return tpl__fail(err, rc, "%s: out of memory", s->data_path);
  read_md5sum(frec, &m->files[s->file]);
  return 0;
}

static int parse_shard(struct mlc_ctx *c, json_t *frec, size_t i,
                       struct tpl__error *err) {
  struct shard s = {.first = c->m->ntensors};
  json_t *recs = NULL;
  int rc;
  if (!json_is_object(frec))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: file record %zu: expected an object, found "
                     "another JSON type",
                     c->what, i);
  rc = read_shard_header(c, frec, i, &s, &recs, err);
  if (rc == 0) rc = add_shard_file(c->m, frec, &s, err);
  for (size_t k = 0; rc == 0 && k < json_array_size(recs); k++)
    rc = parse_tensor(c, &s, k, json_array_get(recs, k), err);
  if (rc != 0) return rc;
  /* A shard without records may come before any tensor was added: the
   * model's array is then still NULL, which qsort must not be given. */
  if (c->m->ntensors > s.first)
    qsort(c->m->tensors + s.first, c->m->ntensors - s.first,
          sizeof(*c->m->tensors), cmp_offset);
  return check_overlaps(c, &s, err);
}

/* --- the cache file --- */

static int parse_root(struct mlc_ctx *c, json_t *root, struct tpl__error *err) {
  json_t *meta = json_object_get(root, "metadata");
  json_t *files = json_object_get(root, "records"), *frec;
  size_t i;
  int rc;
  if (meta != NULL && !json_is_object(meta))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected \"metadata\" to be an object, found "
                     "another JSON type",
                     c->what);
  if (!json_is_array(files))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a \"records\" array of files, found %s",
                     c->what, files ? "another JSON type" : "none");
  json_array_foreach(files, i, frec) {
    rc = parse_shard(c, frec, i, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int tpl__mlc_check_nonempty(const struct tpl__model *m, const char *what,
                            struct tpl__error *err) {
  if (m->ntensors == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected at least one tensor record, found none",
                     what);
  return 0;
}

int tpl__mlc_parse_flags(const char *buf, size_t len, const char *what,
                         int presharded, struct tpl__model *m,
                         struct tpl__error *err) {
  struct mlc_ctx c = {.what = what,
                      .names = json_object(),
                      .paths = json_object(),
                      .m = m,
                      .presharded = presharded};
  json_t *root = NULL;
  int rc;
  if (c.names == NULL || c.paths == NULL)
    rc = tpl__oom(err);
  else
    rc = tpl__json_parse_object(buf, len, what, &root, err);
  if (rc == 0) rc = parse_root(&c, root, err);
  json_decref(root);
  json_decref(c.names);
  json_decref(c.paths);
  return rc;
}
