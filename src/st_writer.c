/* st_writer.c - builds safetensors headers.  Every tool that writes a
 * safetensors file (synth, preshard, dump) lays its tensors out back to
 * back in the order it chooses and asks this module for the header: the
 * 8-byte little-endian length N, then N bytes of compact JSON with
 * `__metadata__` first and one {"dtype","shape","data_offsets"} object per
 * tensor in data order, padded with spaces so the data starts at a
 * multiple of 8 (what the Rust safetensors writer does).  Names go through
 * jansson's encoder, so quotes, backslashes and control characters are
 * escaped and UTF-8 is kept as is: a name read back is byte for byte the
 * name written.
 *
 * Besides the codes the header promises (-ENOMEM, TPL_EOVERFLOW), a
 * caller's bug is reported rather than written into a file readers would
 * refuse: TPL_EDTYPE for an unknown dtype, TPL_EINTERNAL for a bad rank or
 * an nbytes that is not numel x itemsize, TPL_EFORMAT for a name or
 * metadata string that is not UTF-8, a repeated name or a tensor named
 * `__metadata__`, and TPL_ELIMIT for a header above the readers' cap. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "jsonu.h"
#include "st_writer.h"

static int check_tensor(const struct tpl__st_out *t) {
  uint64_t n;
  if (t->name == NULL) return TPL_EINTERNAL;
  if (t->dtype < 0 || t->dtype >= TPL_DT_COUNT) return TPL_EDTYPE;
  if (t->ndim < 0 || t->ndim > TPL_MAX_DIMS) return TPL_EINTERNAL;
  if (t->ndim > 0 && t->shape == NULL) return TPL_EINTERNAL;
  n = tpl__dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++)
    if (tpl__mul_u64(n, t->shape[d], &n) != 0) return TPL_EOVERFLOW;
  return n == t->nbytes ? 0 : TPL_EINTERNAL;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [begin, end]}; JSON
 * integers are signed 64-bit in jansson, and begin <= end. */
static int tensor_entry(const struct tpl__st_out *t, uint64_t begin,
                        uint64_t end, json_t **out) {
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > (uint64_t)INT64_MAX) return TPL_EOVERFLOW;
  if (end > (uint64_t)INT64_MAX) return TPL_EOVERFLOW;
  *out = json_pack("{ss so s[II]}", "dtype", tpl__dtype_st_name(t->dtype),
                   "shape", tpl__json_u64_array(t->shape, (size_t)t->ndim),
                   "data_offsets", (json_int_t)begin, (json_int_t)end);
  return *out == NULL ? -ENOMEM : 0;
}

static int add_metadata(json_t *root, const char *const *meta, size_t nmeta) {
  json_t *m;
  if (nmeta == 0) return 0;
  if (meta == NULL) return TPL_EINTERNAL;
  m = json_object();
  if (m == NULL) return -ENOMEM;
  for (size_t i = 0; i < nmeta; i++) {
    const char *k = meta[2 * i], *v = meta[2 * i + 1];
    /* json_string() refuses NULL and text that is not UTF-8; set_new
     * steals the value even when it fails. */
    if (k == NULL || v == NULL || json_object_get(m, k) != NULL ||
        json_object_set_new(m, k, json_string(v)) != 0) {
      json_decref(m);
      return TPL_EFORMAT;
    }
  }
  if (json_object_set_new(root, "__metadata__", m) != 0) return -ENOMEM;
  return 0;
}

static int add_tensor(json_t *root, const struct tpl__st_out *t,
                      uint64_t *offset) {
  uint64_t end;
  json_t *e;
  int rc = check_tensor(t);
  if (rc != 0) return rc;
  if (strcmp(t->name, "__metadata__") == 0 ||
      json_object_get(root, t->name) != NULL)
    return TPL_EFORMAT;
  rc = tpl__add_u64(*offset, t->nbytes, &end);
  if (rc != 0) return rc;
  rc = tensor_entry(t, *offset, end, &e);
  if (rc != 0) return rc;
  /* json_object_set_new fails on a name that is not valid UTF-8. */
  if (json_object_set_new(root, t->name, e) != 0) return TPL_EFORMAT;
  *offset = end;
  return 0;
}

/* Length prefix, JSON, then spaces up to a multiple of 8. */
static int frame_header(const char *json, uint8_t **out, size_t *out_len) {
  size_t jlen = strlen(json), padded = (jlen + 7) & ~(size_t)7;
  uint8_t *buf;
  if (padded > TPL_MAX_ST_HEADER) return TPL_ELIMIT;
  buf = malloc(8 + padded);
  if (buf == NULL) return -ENOMEM;
  for (int i = 0; i < 8; i++)
    buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  memcpy(buf + 8, json, jlen);
  memset(buf + 8 + jlen, ' ', padded - jlen);
  *out = buf;
  *out_len = 8 + padded;
  return 0;
}

int tpl__st_build_header(const struct tpl__st_out *t, size_t n,
                         const char *const *meta, size_t nmeta, uint8_t **out,
                         size_t *out_len) {
  uint64_t offset = 0;
  char *json = NULL;
  json_t *root = json_object();
  int rc;
  if (root == NULL) return -ENOMEM;
  rc = add_metadata(root, meta, nmeta);
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = add_tensor(root, &t[i], &offset);
  if (rc == 0) {
    json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    rc = json == NULL ? -ENOMEM : frame_header(json, out, out_len);
  }
  free(json);
  json_decref(root);
  return rc;
}
