/* fmt_safetensors.c - the strict safetensors reader.  A file is an 8-byte
 * little-endian header length N, N bytes of UTF-8 JSON (an object mapping
 * tensor names to {dtype, shape, data_offsets}, plus an optional
 * "__metadata__" object of strings), then the data section.  Every rule is
 * checked before anything is appended to the model: the length prefix and
 * its cap, UTF-8, JSON syntax (duplicate keys refused), the exact key set of
 * each entry, dtypes, shapes, offsets, names, that each tensor's byte range
 * matches its shape, that the ranges tile the data section exactly, and that
 * the file ends where the data does.  Tensors are appended in data-offset
 * order (checkpoint order) with absolute file offsets.  It parses bytes
 * already in memory: the checkpoint loader reads the header, and tensor
 * bytes are left to the engine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "fmt_safetensors.h"
#include "jsonu.h"

#define METADATA_KEY "__metadata__"

/* One header entry, validated, before it becomes a model tensor: `t`
 * holds its dtype and shape, and its name borrowed from the JSON tree (it
 * lives as long as the tree). */
struct st_entry {
  struct tpl__tensor t;
  size_t seq; /* position in the JSON object */
  uint64_t begin, end;
};

/* Renders `s` for a one-line message: printable ASCII as is, anything else
 * as \xHH, at most ~120 bytes of input (then "...").  Returns buf. */
static const char *show(const char *s, char *buf, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0, i;
  for (i = 0; s[i] != '\0' && i < 120 && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      buf[o++] = (char)c;
    } else {
      buf[o++] = '\\';
      buf[o++] = 'x';
      buf[o++] = hex[c >> 4];
      buf[o++] = hex[c & 15];
    }
  }
  if (s[i] != '\0' && o + 4 < cap) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = '\0';
  return buf;
}

int tpl__st_header_len(const void *buf, size_t len, uint64_t file_size,
                       const char *fname, uint64_t *header_len,
                       struct tpl__error *err) {
  uint64_t n = 0;
  if (file_size < 8)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected at least 8 bytes (the header length), "
                     "found a file of %llu bytes",
                     fname, (unsigned long long)file_size);
  if (len < 8)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected the 8-byte header length in memory, "
                     "found %zu bytes",
                     fname, len);
  for (int i = 7; i >= 0; i--) /* little-endian */
    n = (n << 8) | ((const uint8_t *)buf)[i];
  if (n > TPL_MAX_ST_HEADER)
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: expected a header length of at most %u bytes, "
                     "found %llu",
                     fname, TPL_MAX_ST_HEADER, (unsigned long long)n);
  /* Compared against file_size - 8, so 8 + n never has to be computed. */
  if (n > file_size - 8)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected a header length of at most %llu (file "
                     "size - 8), found %llu: header runs past end of file",
                     fname, (unsigned long long)(file_size - 8),
                     (unsigned long long)n);
  *header_len = n;
  return 0;
}

/* Length of the UTF-8 sequence starting at s[0] (at most `left` bytes), or
 * 0 when it is invalid: overlong forms, surrogates and code points above
 * U+10FFFF are refused, as RFC 3629 says. */
static size_t utf8_seq(const uint8_t *s, size_t left) {
  uint32_t cp, min;
  size_t n;
  if (s[0] < 0x80) return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    n = 2, cp = s[0] & 0x1f, min = 0x80;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    n = 3, cp = s[0] & 0x0f, min = 0x800;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    n = 4, cp = s[0] & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (left < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

static int check_utf8(const uint8_t *s, size_t len, const char *fname,
                      struct tpl__error *err) {
  size_t i = 0;
  while (i < len) {
    size_t n = utf8_seq(s + i, len - i);
    if (n == 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: header: expected UTF-8 text, found invalid byte "
                       "0x%02x at header offset %zu",
                       fname, s[i], i);
    i += n;
  }
  return 0;
}

/* Tensor count and name bytes against the model caps, before the JSON
 * parser allocates a node per value (1.7 M empty tensors under the
 * header cap once took 3.9 GB).  __metadata__ is one member more. */
static int check_counts(const char *s, size_t len, const char *fname,
                        struct tpl__error *err) {
  size_t members, key_bytes;
  tpl__json_top_members(s, len, &members, &key_bytes);
  if (members > (size_t)TPL_MAX_TENSORS + 1 || key_bytes > TPL_MAX_NAME_BYTES)
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: header: expected at most %u tensors and %u bytes of "
                     "names, found %zu entries and %zu bytes of keys",
                     fname, TPL_MAX_TENSORS, TPL_MAX_NAME_BYTES, members,
                     key_bytes);
  return 0;
}

/* Parses the header text with tpl__json_parse_object and turns jansson's
 * terse texts for duplicate keys, NUL in keys and integers beyond 64 bits
 * into clear messages. */
static int parse_json(const char *s, size_t len, const char *fname,
                      json_t **root, struct tpl__error *err) {
  static const struct {
    const char *terse, *clear;
  } texts[] = {
      {"duplicate object key",
       "expected every key (tensor name) once, found a duplicate key"},
      {"NUL byte in object key", "expected tensor names without NUL bytes, "
                                 "found a name containing \\u0000"},
      {"too big integer", "expected integers below 2^63, found a larger one"},
  };
  struct tpl__error e = {0};
  char what[512];
  const char *at;
  int rc;
  snprintf(what, sizeof(what), "%s: header", fname);
  rc = tpl__json_parse_object(s, len, what, root, &e);
  if (rc == 0) return 0;
  at = strstr(e.msg, "at line ");
  for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
    if (strstr(e.msg, texts[i].terse) != NULL)
      return tpl__fail(err, rc, "%s: header: %s (%s)", fname, texts[i].clear,
                       at ? at : texts[i].terse);
  return tpl__fail(err, rc, "%s", e.msg);
}

static int check_metadata(const json_t *v, const char *fname,
                          struct tpl__error *err) {
  const char *key;
  json_t *val;
  char sb[512];
  if (!json_is_object(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: '" METADATA_KEY "': expected an object of string "
                     "to string, found another JSON value (a tensor may "
                     "not be named " METADATA_KEY ")",
                     fname);
  json_object_foreach((json_t *)v, key, val) {
    if (!json_is_string(val))
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: '" METADATA_KEY "': expected an object of string "
                       "to string, found key '%s' with a non-string value "
                       "(a tensor may not be named " METADATA_KEY ")",
                       fname, show(key, sb, sizeof(sb)));
  }
  return 0;
}

/* `shown` is `name` as show() renders it, for messages. */
static int check_name(const char *name, const char *shown, const char *fname,
                      struct tpl__error *err) {
  size_t len = strlen(name);
  if (len == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected non-empty tensor names, found an empty "
                     "name",
                     fname);
  if (len > TPL_MAX_NAME)
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: tensor '%s': expected a name of at most %d bytes, "
                     "found %zu bytes",
                     fname, shown, TPL_MAX_NAME, len);
  return 0;
}

/* The entry checks below name the tensor by `shown` (its name as show()
 * renders it).  An entry must be an object with exactly dtype, shape,
 * data_offsets. */
static int check_keys(const json_t *v, const char *shown, const char *fname,
                      struct tpl__error *err) {
  static const char *const want[] = {"dtype", "shape", "data_offsets"};
  const char *key;
  json_t *val;
  char kb[512];
  if (!json_is_object(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected an object with dtype, shape "
                     "and data_offsets, found another JSON value",
                     fname, shown);
  for (size_t i = 0; i < ARRAY_SIZE(want); i++)
    if (json_object_get(v, want[i]) == NULL)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected key '%s', found it "
                       "missing",
                       fname, shown, want[i]);
  json_object_foreach((json_t *)v, key, val) {
    if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
        strcmp(key, "data_offsets") != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected only the keys dtype, shape "
                       "and data_offsets, found unknown key '%s'",
                       fname, shown, show(key, kb, sizeof(kb)));
  }
  return 0;
}

static int parse_dtype(const json_t *v, const char *shown, const char *fname,
                       int *dtype, struct tpl__error *err) {
  const char *s;
  size_t len;
  char db[512];
  if (!json_is_string(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected dtype to be a string, found "
                     "another JSON value",
                     fname, shown);
  s = json_string_value(v);
  len = json_string_length(v);
  if (!tpl__has_nul(s, len) && tpl__dtype_is_known_unsupported(s))
    return tpl__fail(err, TPL_EDTYPE,
                     "%s: tensor '%s': unsupported dtype %s (expected one of "
                     "BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, "
                     "I64, U64, F8_E4M3, F8_E5M2)",
                     fname, shown, s);
  *dtype = tpl__dtype_from_st(s, len);
  if (*dtype < 0)
    return tpl__fail(err, TPL_EDTYPE,
                     "%s: tensor '%s': expected a known dtype (BOOL, U8, I8, "
                     "I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, "
                     "F8_E4M3, F8_E5M2), found unknown dtype '%s'",
                     fname, shown, show(s, db, sizeof(db)));
  return 0;
}

static int parse_shape(const json_t *v, const char *shown, const char *fname,
                       struct st_entry *e, struct tpl__error *err) {
  size_t n;
  if (!json_is_array(v))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected shape to be an array of "
                     "integers, found another JSON value",
                     fname, shown);
  n = json_array_size(v);
  if (n > TPL_MAX_DIMS)
    return tpl__fail(err, TPL_ELIMIT,
                     "%s: tensor '%s': expected at most %d dims, found %zu",
                     fname, shown, TPL_MAX_DIMS, n);
  for (size_t i = 0; i < n; i++)
    if (tpl__json_u64(json_array_get(v, i), &e->t.shape[i]) != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected shape[%zu] to be an "
                       "integer >= 0, found a negative, fractional or "
                       "non-numeric value",
                       fname, shown, i);
  e->t.ndim = (int)n;
  return 0;
}

static int parse_offsets(const json_t *v, const char *shown, const char *fname,
                         struct st_entry *e, struct tpl__error *err) {
  if (!json_is_array(v) || json_array_size(v) != 2)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected data_offsets to be an array "
                     "[begin, end], found another JSON value",
                     fname, shown);
  if (tpl__json_u64(json_array_get(v, 0), &e->begin) != 0 ||
      tpl__json_u64(json_array_get(v, 1), &e->end) != 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected data_offsets to be integers "
                     ">= 0, found a negative, fractional or non-numeric "
                     "value",
                     fname, shown);
  if (e->begin > e->end)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected data_offsets begin <= end, "
                     "found begin %llu > end %llu",
                     fname, shown, (unsigned long long)e->begin,
                     (unsigned long long)e->end);
  return 0;
}

/* shape product x itemsize must equal end - begin, without overflow. */
static int check_size(const struct st_entry *e, const char *fname,
                      struct tpl__error *err) {
  uint64_t bytes = tpl__dtype_size(e->t.dtype);
  char sb[512], shp[256];
  for (int i = 0; i < e->t.ndim; i++)
    if (tpl__mul_u64(bytes, e->t.shape[i], &bytes) != 0)
      return tpl__fail(err, TPL_EOVERFLOW,
                       "%s: tensor '%s': expected a byte size below 2^64, "
                       "found shape %s x %zu bytes overflowing",
                       fname, show(e->t.name, sb, sizeof(sb)),
                       tpl__shape_str(e->t.shape, e->t.ndim, shp, sizeof(shp)),
                       tpl__dtype_size(e->t.dtype));
  if (bytes != e->end - e->begin)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: tensor '%s': expected %llu bytes (%s shape %s), "
                     "found data_offsets [%llu, %llu] spanning %llu bytes",
                     fname, show(e->t.name, sb, sizeof(sb)),
                     (unsigned long long)bytes, tpl__dtype_st_name(e->t.dtype),
                     tpl__shape_str(e->t.shape, e->t.ndim, shp, sizeof(shp)),
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     (unsigned long long)(e->end - e->begin));
  return 0;
}

/* Checks one tensor entry (the seq-th in the header) and fills *e. */
static int parse_entry(const char *name, size_t seq, const json_t *v,
                       const char *fname, struct st_entry *e,
                       struct tpl__error *err) {
  char sb[512];
  const char *shown = show(name, sb, sizeof(sb));
  int rc = check_name(name, shown, fname, err);
  e->t.name = (char *)name; /* borrowed, see struct st_entry */
  e->seq = seq;
  if (rc == 0) rc = check_keys(v, shown, fname, err);
  if (rc == 0)
    rc = parse_dtype(json_object_get(v, "dtype"), shown, fname, &e->t.dtype,
                     err);
  if (rc == 0)
    rc = parse_shape(json_object_get(v, "shape"), shown, fname, e, err);
  if (rc == 0)
    rc =
        parse_offsets(json_object_get(v, "data_offsets"), shown, fname, e, err);
  return rc == 0 ? check_size(e, fname, err) : rc;
}

/* Walks the header object; *entries (caller frees) gets every tensor. */
static int collect_entries(json_t *root, const char *fname,
                           struct st_entry **entries, size_t *count,
                           struct tpl__error *err) {
  size_t cap = json_object_size(root), n = 0;
  struct st_entry *es = calloc(cap ? cap : 1, sizeof(*es));
  const char *key;
  json_t *val;
  int rc;
  if (es == NULL) return tpl__fail(err, -ENOMEM, "%s: out of memory", fname);
  json_object_foreach(root, key, val) {
    if (strcmp(key, METADATA_KEY) == 0) {
      rc = check_metadata(val, fname, err);
    } else {
      rc = parse_entry(key, n, val, fname, &es[n], err);
      n++;
    }
    if (rc != 0) {
      free(es);
      return rc;
    }
  }
  *entries = es;
  *count = n;
  return 0;
}

static int cmp_entry(const void *a, const void *b) {
  const struct st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  /* Only zero-size tensors tie; the header order (jansson iterates in
   * insertion order) decides, as the writer listed them. */
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorted entries must cover [0, data_len) with no gap and no overlap. */
static int check_tiling(const struct st_entry *es, size_t n, const char *fname,
                        uint64_t *data_len, struct tpl__error *err) {
  uint64_t at = 0;
  char sb[512], pb[512];
  for (size_t i = 0; i < n; i++) {
    const struct st_entry *e = &es[i];
    if (i == 0 && e->begin != 0)
      return tpl__fail(err, TPL_EFORMAT,
                       "%s: tensor '%s': expected the first tensor's data to "
                       "begin at offset 0, found %llu",
                       fname, show(e->t.name, sb, sizeof(sb)),
                       (unsigned long long)e->begin);
    if (e->begin != at)
      return tpl__fail(
          err, TPL_EFORMAT,
          "%s: tensor '%s': expected data to begin at %llu "
          "(where '%s' ends), found %llu: %s %llu bytes",
          fname, show(e->t.name, sb, sizeof(sb)), (unsigned long long)at,
          show(es[i - 1].t.name, pb, sizeof(pb)), (unsigned long long)e->begin,
          e->begin > at ? "a gap of" : "overlaps it by",
          (unsigned long long)(e->begin > at ? e->begin - at : at - e->begin));
    at = e->end;
  }
  *data_len = at;
  return 0;
}

static int check_file_size(uint64_t header_len, uint64_t data_len,
                           uint64_t file_size, const char *fname,
                           struct tpl__error *err) {
  uint64_t want;
  if (tpl__add_u64(8 + header_len, data_len, &want) != 0)
    return tpl__fail(err, TPL_EOVERFLOW,
                     "%s: expected a data section below 2^64 bytes, found "
                     "data_offsets ending at %llu",
                     fname, (unsigned long long)data_len);
  if (file_size > want)
    return tpl__fail(
        err, TPL_EFORMAT,
        "%s: expected %llu bytes (8 + header %llu + data %llu), "
        "found %llu: %llu trailing bytes after the last tensor",
        fname, (unsigned long long)want, (unsigned long long)header_len,
        (unsigned long long)data_len, (unsigned long long)file_size,
        (unsigned long long)(file_size - want));
  if (file_size < want)
    return tpl__fail(
        err, TPL_EFORMAT,
        "%s: expected %llu bytes (8 + header %llu + data %llu), "
        "found %llu: file truncated by %llu bytes",
        fname, (unsigned long long)want, (unsigned long long)header_len,
        (unsigned long long)data_len, (unsigned long long)file_size,
        (unsigned long long)(want - file_size));
  return 0;
}

static int append_tensors(const struct st_entry *es, size_t n,
                          uint64_t data_start, uint32_t file_idx,
                          const char *fname, struct tpl__model *m,
                          struct tpl__error *err) {
  for (size_t i = 0; i < n; i++) {
    struct tpl__tensor t = es[i].t; /* calloc'd: encoding TPL_ENC_RAW */
    t.name = strdup(es[i].t.name);
    if (t.name == NULL)
      return tpl__fail(err, -ENOMEM, "%s: out of memory", fname);
    t.file = file_idx;
    t.offset = data_start + es[i].begin;
    t.stored_bytes = t.nbytes = es[i].end - es[i].begin;
    int rc = tpl__model_take_tensor(m, &t, fname, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int tpl__st_parse(const void *buf, size_t len, uint64_t file_size,
                  const char *fname, uint32_t file_idx, struct tpl__model *m,
                  struct tpl__error *err) {
  const char *json = NULL; /* the header text, once its length is known */
  struct st_entry *es = NULL;
  json_t *root = NULL;
  uint64_t hlen, data_len = 0;
  size_t n = 0;
  int rc = tpl__st_header_len(buf, len, file_size, fname, &hlen, err);
  if (rc != 0) return rc;
  if (len - 8 < hlen)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: expected %llu header bytes in memory, found %zu",
                     fname, (unsigned long long)hlen, len - 8);
  json = (const char *)buf + 8;
  rc = check_utf8((const uint8_t *)json, (size_t)hlen, fname, err);
  if (rc == 0) rc = check_counts(json, (size_t)hlen, fname, err);
  if (rc == 0) rc = parse_json(json, (size_t)hlen, fname, &root, err);
  if (rc == 0) rc = collect_entries(root, fname, &es, &n, err);
  if (rc == 0) {
    qsort(es, n, sizeof(*es), cmp_entry);
    rc = check_tiling(es, n, fname, &data_len, err);
  }
  if (rc == 0) rc = check_file_size(hlen, data_len, file_size, fname, err);
  if (rc == 0) rc = append_tensors(es, n, 8 + hlen, file_idx, fname, m, err);
  free(es);
  json_decref(root);
  return rc;
}
