/* table_map.h - the tensor table laid out to be read in place ("TPLM"):
 * the daemon builds it once per generation it serves and passes it in a
 * sealed memfd beside the store; a consumer maps it, validates it once
 * (O(n)) and looks names up in it without copying or allocating per
 * tensor.
 *
 * Layout (native byte order: the daemon and its consumers share a
 * machine; the header says which order it was written in):
 *
 *   header, 64 bytes: "TPLM", u32 0x01020304, u32 version (1), u32 0,
 *                     u64 count, u64 slots, u64 names_len, u64 ndims,
 *                     16 zero bytes
 *   count x entry (struct tpl__tmap_entry, 40 bytes)
 *   ndims x u64:      every entry's shape, back to back (an entry's at
 *                     dims_off; kept out of the entries so that they
 *                     stay small: fewer pages to map and walk)
 *   slots x slot:     the name index, struct tpl__tmap_slot: entry index
 *                     + 1 (0 = empty) and a tag, the hash's high 32 bits;
 *                     open addressing from XXH3-64(name) & (slots - 1),
 *                     linear probing; slots is a power of two > count
 *                     (the builder takes the least >= 1.25 x count, and
 *                     16 at least): a probe that meets another name
 *                     compares tags, not names, so it stays in the index
 *   names_len bytes:  every name, NUL-terminated
 *
 * Pure buffer functions: no I/O, safe to fuzz. */
#ifndef TPL_TABLE_MAP_H
#define TPL_TABLE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define TPL_TMAP_HEADER 64

struct tpl__tmap_entry {
  uint64_t offset, nbytes, xxh3; /* in the store */
  uint32_t name_off;             /* into the names, NUL-terminated */
  uint32_t dims_off;             /* into the dims: ndim of them */
  uint16_t name_len;             /* without the NUL */
  uint8_t dtype;                 /* enum tpl_dtype */
  uint8_t ndim;
  uint32_t zero;
};

struct tpl__tmap_slot {
  uint32_t entry; /* entry index + 1, 0 when empty */
  uint32_t tag;   /* XXH3-64(name) >> 32 */
};

/* A validated table.  Every pointer is borrowed from the region given to
 * tpl__tmap_open and valid as long as it is. */
struct tpl__tmap {
  size_t count;
  uint64_t mask; /* slots - 1 */
  const struct tpl__tmap_entry *entries;
  const uint64_t *dims;
  const struct tpl__tmap_slot *index;
  const char *names;
};

/* One tensor as the daemon holds it: the builder's input. */
struct tpl__tmap_tensor {
  const char *name;
  const char *dtype; /* MLC name */
  int ndim;
  uint64_t shape[TPL_MAX_DIMS];
  uint64_t offset, nbytes, xxh3;
};

/* Lays out `n` tensors (dtype as MLC names) as a TPLM region in *out
 * (malloc'd, caller frees; *len its size).  Returns 0; TPL_EFORMAT naming
 * the tensor for one it cannot carry (unknown dtype, too many dims, an
 * empty or too long name) or a name given twice; or -ENOMEM. */
int tpl__tmap_build(const struct tpl__tmap_tensor *t, size_t n, uint8_t **out,
                    size_t *len, struct tpl__error *err);

/* Checks the region `b` (len bytes, 8-byte aligned) before anything is
 * trusted: header, sizes, names ending in a NUL (so every name is a string
 * inside the region), every entry (known dtype, at most 8 dims inside the
 * dims, nbytes =
 * numel x itemsize, inside a store of `store_bytes`, a non-empty name
 * inside the names) and the index (each slot empty or naming an entry,
 * each entry named once).  Reads the entries and the index once, not the
 * names: O(count + slots), one allocation of count / 8 bytes.  Fills *out
 * (borrowing b) and returns 0, or TPL_EPROTO saying what was found. */
int tpl__tmap_open(const uint8_t *b, size_t len, uint64_t store_bytes,
                   struct tpl__tmap *out, struct tpl__error *err);

/* Stores in *index the entry called `name` in an opened table; returns 0
 * or -ENOENT.  Probing ends at an empty slot, which an opened table is
 * known to have. */
int tpl__tmap_find(const struct tpl__tmap *m, const char *name, size_t *index);

#endif
