/* table_map.c - the tensor table a consumer reads in place (layout in
 * table_map.h).  `tpload serve` lays it out once per generation, so
 * an attach costs the daemon nothing per tensor and the consumer one
 * validating pass over memory the daemon already populated: no copy, no
 * allocation per tensor, no protobuf.  Building refuses what a table
 * cannot carry; opening refuses any region whose sizes, entries or index
 * would let a reader leave it, or leave the store its entries point into.
 * Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dtype.h"
#include "table_map.h"

#define TMAP_MAGIC "TPLM"
#define TMAP_ORDER 0x01020304u
#define TMAP_VERSION 1u

struct header {
  char magic[4];
  uint32_t order, version, zero;
  uint64_t count, slots, names_len, ndims;
  uint8_t pad[16];
};

_Static_assert(sizeof(struct header) == TPL_TMAP_HEADER, "header size");
_Static_assert(sizeof(struct tpl__tmap_entry) == 40, "entry size");
_Static_assert(sizeof(struct tpl__tmap_slot) == 8, "slot size");

static uint32_t tag_of(uint64_t h) {
  return (uint32_t)(h >> 32);
}

/* ---- building ---- */

static int cannot_carry(struct tpl__error *err, const char *name,
                        const char *what) {
  return tpl__fail(err, TPL_EFORMAT, "tensor table: tensor '%s': %s", name,
                   what);
}

/* Checks what the table can carry; sums the names' bytes and the dims
 * into h. */
static int measure(const struct tpl__tmap_tensor *t, size_t n, struct header *h,
                   struct tpl__error *err) {
  uint64_t total = 0, ndims = 0;
  if (n > TPL_MAX_TENSORS)
    return tpl__fail(err, TPL_EFORMAT,
                     "tensor table: expected at most %u tensors, found %zu",
                     TPL_MAX_TENSORS, n);
  for (size_t i = 0; i < n; i++) {
    size_t nl = strlen(t[i].name);
    if (nl == 0 || nl > UINT16_MAX)
      return cannot_carry(err, t[i].name,
                          "expected a name of 1 to 65535 "
                          "bytes");
    if (tpl__dtype_from_mlc(t[i].dtype) < 0)
      return cannot_carry(err, t[i].name, "expected a known dtype");
    if (t[i].ndim < 0 || t[i].ndim > TPL_MAX_DIMS)
      return cannot_carry(err, t[i].name, "expected at most 8 dims");
    total += nl + 1;
    ndims += (uint64_t)t[i].ndim;
  }
  if (total > UINT32_MAX)
    return tpl__fail(err, TPL_EFORMAT,
                     "tensor table: expected names of at most 4 GiB in all");
  h->names_len = total;
  h->ndims = ndims;
  return 0;
}

/* Fills entry e (zeroed) from t, its shape at dims[dims_off]. */
static void put_entry(struct tpl__tmap_entry *e,
                      const struct tpl__tmap_tensor *t, uint32_t name_off,
                      uint64_t *dims, uint32_t dims_off) {
  e->offset = t->offset;
  e->nbytes = t->nbytes;
  e->xxh3 = t->xxh3;
  memcpy(dims + dims_off, t->shape, sizeof(uint64_t) * (size_t)t->ndim);
  e->dims_off = dims_off;
  e->name_off = name_off;
  e->name_len = (uint16_t)strlen(t->name);
  e->dtype = (uint8_t)tpl__dtype_from_mlc(t->dtype);
  e->ndim = (uint8_t)t->ndim;
}

/* Enters entry i in the index; refuses a name already there. */
static int put_index(struct tpl__tmap_slot *index, uint64_t mask,
                     const char *names, const struct tpl__tmap_entry *es,
                     size_t i, struct tpl__error *err) {
  const char *name = names + es[i].name_off;
  uint64_t h = XXH3_64bits(name, es[i].name_len), j = h & mask;
  for (; index[j].entry != 0; j = (j + 1) & mask)
    if (index[j].tag == tag_of(h) &&
        strcmp(names + es[index[j].entry - 1].name_off, name) == 0)
      return cannot_carry(err, name, "expected one entry, found two");
  index[j].entry = (uint32_t)(i + 1);
  index[j].tag = tag_of(h);
  return 0;
}

int tpl__tmap_build(const struct tpl__tmap_tensor *t, size_t n, uint8_t **out,
                    size_t *len, struct tpl__error *err) {
  struct header h = {.order = TMAP_ORDER, .version = TMAP_VERSION};
  uint64_t slots = 16, *dims;
  uint8_t *b;
  struct tpl__tmap_entry *es;
  struct tpl__tmap_slot *index;
  char *names;
  size_t total, used = 0, ndims = 0;
  int rc = measure(t, n, &h, err);
  if (rc != 0) return rc;
  while (4 * slots < 5 * (uint64_t)n)
    slots *= 2;
  total = TPL_TMAP_HEADER + n * sizeof(*es) + h.ndims * 8 +
          slots * sizeof(*index) + h.names_len;
  if ((b = calloc(1, total)) == NULL)
    return tpl__fail(err, -ENOMEM, "tensor table: out of memory");
  memcpy(h.magic, TMAP_MAGIC, 4);
  h.count = n;
  h.slots = slots;
  memcpy(b, &h, sizeof(h));
  es = (struct tpl__tmap_entry *)(b + TPL_TMAP_HEADER);
  dims = (uint64_t *)(es + n);
  index = (struct tpl__tmap_slot *)(dims + h.ndims);
  names = (char *)(index + slots);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    put_entry(&es[i], &t[i], (uint32_t)used, dims, (uint32_t)ndims);
    ndims += (size_t)t[i].ndim;
    memcpy(names + used, t[i].name, es[i].name_len + 1u);
    used += es[i].name_len + 1u;
    rc = put_index(index, slots - 1, names, es, i, err);
  }
  if (rc != 0) {
    free(b);
    return rc;
  }
  *out = b;
  *len = total;
  return 0;
}

/* ---- opening ---- */

static int corrupt(struct tpl__error *err, const char *what) {
  return tpl__fail(err, TPL_EPROTO, "tensor table: %s", what);
}

/* The header and the sizes it implies against the region's length. */
static int open_header(const uint8_t *b, size_t len, struct header *h,
                       struct tpl__error *err) {
  uint64_t need = TPL_TMAP_HEADER;
  if (((uintptr_t)b & 7) != 0)
    return corrupt(err, "expected a region aligned to 8 bytes");
  if (len < sizeof(*h))
    return corrupt(err, "expected a 64-byte header, found less");
  memcpy(h, b, sizeof(*h));
  if (memcmp(h->magic, TMAP_MAGIC, 4) != 0 || h->order != TMAP_ORDER ||
      h->version != TMAP_VERSION)
    return corrupt(err, "expected \"" TMAP_MAGIC "\" version 1 in this "
                        "machine's byte order, found another header");
  if (h->count > TPL_MAX_TENSORS || h->slots <= h->count ||
      h->slots > 4 * (uint64_t)TPL_MAX_TENSORS ||
      (h->slots & (h->slots - 1)) != 0 || h->names_len > UINT32_MAX ||
      h->ndims > TPL_MAX_DIMS * h->count)
    return corrupt(err, "expected a count, a power-of-two slot count above "
                        "it, names and dims within the caps, found others");
  need += h->count * sizeof(struct tpl__tmap_entry) + h->ndims * 8 +
          h->slots * sizeof(struct tpl__tmap_slot) + h->names_len;
  if (need != len)
    return tpl__fail(err, TPL_EPROTO,
                     "tensor table: expected %llu bytes for its header, "
                     "found a region of %zu",
                     (unsigned long long)need, len);
  if (h->names_len > 0 ? b[len - 1] != '\0' : h->count > 0)
    return corrupt(err, "expected names ending in a NUL byte");
  return 0;
}

static int bad_entry(struct tpl__error *err, size_t i, const char *what) {
  return tpl__fail(err, TPL_EPROTO, "tensor table: entry %zu: %s", i, what);
}

static int check_entry(const struct tpl__tmap *m, const struct header *h,
                       uint64_t store_bytes, size_t i, struct tpl__error *err) {
  const struct tpl__tmap_entry *e = &m->entries[i];
  uint64_t numel_bytes, end, names_len = h->names_len;
  const uint64_t *shape;
  if (e->dtype >= TPL_DT_COUNT || e->ndim > TPL_MAX_DIMS ||
      (uint64_t)e->dims_off + e->ndim > h->ndims)
    return bad_entry(err, i,
                     "expected a known dtype and at most 8 dims "
                     "inside the table");
  shape = m->dims + e->dims_off;
  /* The names end in a NUL (open_header), so any name inside them is a
   * string inside the region; not reading each one here keeps this pass
   * to the entries.  A name_len that disagrees with its string only
   * makes lookups of that name miss. */
  if (e->name_len == 0 || (uint64_t)e->name_off + e->name_len >= names_len)
    return bad_entry(err, i, "expected a name inside the table");
  numel_bytes = tpl__dtype_size(e->dtype);
  for (int d = 0; d < e->ndim; d++)
    if (tpl__mul_u64(numel_bytes, shape[d], &numel_bytes) != 0)
      numel_bytes = UINT64_MAX;
  if (numel_bytes != e->nbytes)
    return bad_entry(err, i, "expected nbytes = elements x dtype size");
  if (tpl__add_u64(e->offset, e->nbytes, &end) != 0 || end > store_bytes)
    return bad_entry(err, i, "expected its bytes inside the store");
  return 0;
}

/* Every slot empty or naming an entry, every entry named exactly once:
 * then the index has an empty slot (slots > count) and probing ends. */
static int check_index(const struct tpl__tmap *m, struct tpl__error *err) {
  uint8_t *seen = calloc(m->count / 8 + 1, 1);
  size_t named = 0;
  int rc = 0;
  if (seen == NULL) return tpl__oom(err);
  for (uint64_t j = 0; rc == 0 && j <= m->mask; j++) {
    uint32_t v = m->index[j].entry;
    if (v == 0) continue;
    if (v > m->count || (seen[(v - 1) / 8] & (1u << ((v - 1) % 8))) != 0)
      rc = corrupt(err, "expected each index slot to name a distinct "
                        "entry, found one that does not");
    else
      seen[(v - 1) / 8] |= (uint8_t)(1u << ((v - 1) % 8));
    named++;
  }
  free(seen);
  if (rc == 0 && named != m->count)
    rc = corrupt(err, "expected every entry in the index, found some "
                      "missing");
  return rc;
}

int tpl__tmap_open(const uint8_t *b, size_t len, uint64_t store_bytes,
                   struct tpl__tmap *out, struct tpl__error *err) {
  struct header h;
  struct tpl__tmap m;
  int rc = open_header(b, len, &h, err);
  if (rc != 0) return rc;
  m.count = (size_t)h.count;
  m.mask = h.slots - 1;
  m.entries = (const struct tpl__tmap_entry *)(b + TPL_TMAP_HEADER);
  m.dims = (const uint64_t *)(m.entries + m.count);
  m.index = (const struct tpl__tmap_slot *)(m.dims + h.ndims);
  m.names = (const char *)(m.index + h.slots);
  for (size_t i = 0; rc == 0 && i < m.count; i++)
    rc = check_entry(&m, &h, store_bytes, i, err);
  if (rc == 0) rc = check_index(&m, err);
  if (rc != 0) return rc;
  *out = m;
  return 0;
}

int tpl__tmap_find(const struct tpl__tmap *m, const char *name, size_t *index) {
  size_t len = strlen(name);
  uint64_t h = XXH3_64bits(name, len);
  uint32_t tag = tag_of(h);
  for (uint64_t j = h & m->mask; m->index[j].entry != 0;
       j = (j + 1) & m->mask) {
    const struct tpl__tmap_entry *e;
    if (m->index[j].tag != tag) continue; /* another name: stay here */
    e = &m->entries[m->index[j].entry - 1];
    /* The NUL check makes the entry's string the name asked for, even
     * when a confused table gave a name_len shorter than its string. */
    if (e->name_len == len && m->names[e->name_off + len] == '\0' &&
        memcmp(m->names + e->name_off, name, len) == 0) {
      *index = m->index[j].entry - 1;
      return 0;
    }
  }
  return -ENOENT;
}
