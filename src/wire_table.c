/* wire_table.c - the tensor table in its compact form, carried in the
 * attach reply (Response.table) so a consumer gets the table and the store
 * in one round trip and decodes 20,000 entries without 20,000 protobuf
 * messages.  Little-endian throughout:
 *
 *   "TPLT"  u32 count
 *   count x { u64 offset, u64 nbytes, u64 xxh3, u16 name_len, u8 dtype,
 *             u8 ndim, ndim x u64 shape, name_len bytes of name }
 *
 * `dtype` is an enum tpl_dtype.  The decoder checks every size against
 * the bytes really left and the caps before allocating.  Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "wire.h"

#define TABLE_MAGIC "TPLT"
#define TABLE_HEAD 8
#define ENTRY_FIXED 28 /* offset, nbytes, xxh3, name_len, dtype, ndim */

_Static_assert(TPL_MAX_DIMS == 8, "the dims message below says 8");

static uint8_t *put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
  return p + n;
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint8_t *put_entry(uint8_t *p, const struct tpl__wire_tensor *t) {
  size_t nl = strlen(t->name);
  p = put_le(p, t->offset, 8);
  p = put_le(p, t->nbytes, 8);
  p = put_le(p, t->xxh3, 8);
  p = put_le(p, nl, 2);
  p = put_le(p, (uint64_t)tpl__dtype_from_mlc(t->dtype), 1);
  p = put_le(p, (uint64_t)t->ndim, 1);
  for (int d = 0; d < t->ndim; d++)
    p = put_le(p, t->shape[d], 8);
  memcpy(p, t->name, nl);
  return p + nl;
}

int tpl__wire_table_encode(const struct tpl__wire_tensor *t, size_t n,
                           uint8_t **out, size_t *len) {
  size_t total = TABLE_HEAD;
  uint8_t *b, *p;
  for (size_t i = 0; i < n; i++) {
    if (strlen(t[i].name) > UINT16_MAX || t[i].ndim > TPL_MAX_DIMS ||
        tpl__dtype_from_mlc(t[i].dtype) < 0)
      return -EINVAL;
    total += ENTRY_FIXED + 8 * (size_t)t[i].ndim + strlen(t[i].name);
  }
  if (n > TPL_MAX_TENSORS || (b = malloc(total)) == NULL) return -ENOMEM;
  memcpy(b, TABLE_MAGIC, 4);
  p = put_le(b + 4, n, 4);
  for (size_t i = 0; i < n; i++)
    p = put_entry(p, &t[i]);
  *out = b;
  *len = total;
  return 0;
}

/* ---- decoding ---- */

struct cursor {
  const uint8_t *p, *end;
  size_t index; /* the entry being read, for messages */
};

static int bad(struct tpl__error *err, const struct cursor *c,
               const char *what) {
  return tpl__fail(err, TPL_EPROTO, "tensor table: entry %zu: %s", c->index,
                   what);
}

/* Reads entry fields into *t; the name stays in the input (copied by the
 * caller).  *name_len gets its length. */
static int read_entry(struct cursor *c, struct tpl__wire_tensor *t,
                      const uint8_t **name, size_t *name_len,
                      struct tpl__error *err) {
  int dtype;
  if ((size_t)(c->end - c->p) < ENTRY_FIXED)
    return bad(err, c, "expected its fixed fields, found the table's end");
  t->offset = get_le(c->p, 8);
  t->nbytes = get_le(c->p + 8, 8);
  t->xxh3 = get_le(c->p + 16, 8);
  *name_len = (size_t)get_le(c->p + 24, 2);
  dtype = c->p[26];
  t->ndim = c->p[27];
  c->p += ENTRY_FIXED;
  if (dtype >= TPL_DT_COUNT) return bad(err, c, "expected a known dtype");
  t->dtype = tpl__dtype_mlc_name(dtype);
  if (t->ndim > TPL_MAX_DIMS) return bad(err, c, "expected at most 8 dims");
  if (*name_len == 0) return bad(err, c, "expected a name, found an empty one");
  if ((size_t)(c->end - c->p) < 8 * (size_t)t->ndim + *name_len)
    return bad(err, c, "expected its shape and name, found the table's end");
  for (int d = 0; d < t->ndim; d++, c->p += 8)
    t->shape[d] = get_le(c->p, 8);
  *name = c->p;
  c->p += *name_len;
  if (memchr(*name, '\0', *name_len) != NULL)
    return bad(err, c, "expected a name without NUL bytes");
  return 0;
}

static int read_count(struct cursor *c, size_t *n, struct tpl__error *err) {
  size_t left = (size_t)(c->end - c->p);
  if (left < TABLE_HEAD || memcmp(c->p, TABLE_MAGIC, 4) != 0)
    return tpl__fail(err, TPL_EPROTO,
                     "tensor table: expected \"" TABLE_MAGIC "\" and a "
                     "count, found %zu bytes that are not",
                     left);
  *n = (size_t)get_le(c->p + 4, 4);
  c->p += TABLE_HEAD;
  if (*n > TPL_MAX_TENSORS || *n > (left - TABLE_HEAD) / (ENTRY_FIXED + 1))
    return tpl__fail(err, TPL_EPROTO,
                     "tensor table: expected at most %u entries in %zu "
                     "bytes, found a count of %zu",
                     TPL_MAX_TENSORS, left, *n);
  return 0;
}

static int read_entries(struct cursor *c, struct tpl__wire_response *out,
                        struct tpl__error *err) {
  char *pool = out->strings;
  for (c->index = 0; c->index < out->ntensors; c->index++) {
    const uint8_t *name = NULL;
    size_t nl = 0;
    int rc = read_entry(c, &out->tensors[c->index], &name, &nl, err);
    if (rc != 0) return rc;
    memcpy(pool, name, nl);
    pool[nl] = '\0';
    out->tensors[c->index].name = pool;
    pool += nl + 1;
  }
  if (c->p != c->end)
    return tpl__fail(err, TPL_EPROTO,
                     "tensor table: expected its end after %zu entries, "
                     "found %zu more bytes",
                     out->ntensors, (size_t)(c->end - c->p));
  return 0;
}

int tpl__wire_table_decode(const uint8_t *b, size_t len,
                           struct tpl__wire_response *out,
                           struct tpl__error *err) {
  struct cursor c = {b, b + len, 0};
  size_t n = 0;
  int rc = read_count(&c, &n, err);
  if (rc != 0) return rc;
  /* names take fewer bytes than the table, plus a NUL each */
  out->tensors = calloc(n ? n : 1, sizeof(*out->tensors));
  out->strings = malloc(len + n + 1);
  if (out->tensors == NULL || out->strings == NULL) return tpl__oom(err);
  out->ntensors = n;
  return read_entries(&c, out, err);
}
