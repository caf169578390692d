/* store.h - one rank's delivered shard: a single shared-memory region
 * (a memfd, so the daemon can pass it to consumers) holding every tensor
 * back to back at 64-byte aligned offsets, plus the table describing it.
 * The engine fills it; scope, preshard and the daemon read it. */
#ifndef TPL_STORE_H
#define TPL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define TPL_STORE_ALIGN 64

struct tpl__held {
  char *name;                   /* owned */
  int dtype;                    /* enum tpl_dtype */
  int ndim;
  uint64_t shape[TPL_MAX_DIMS]; /* what this rank holds */
  uint64_t offset;              /* in the store, TPL_STORE_ALIGN aligned */
  uint64_t nbytes;
  uint64_t xxh3;                /* XXH3-64 of the bytes (after scaling) */
};

struct tpl__store {
  int fd;                       /* memfd, -1 when closed */
  uint8_t *base;                /* mapping of `size` bytes (NULL if 0) */
  uint64_t size;
  int sealed;                   /* 1 once read-only and sealed */
  struct tpl__held *tensors;    /* owned */
  size_t ntensors;
};

/* Creates a writable store of `size` bytes backed by a memfd named
 * "tpload-store" and an (initially empty) table of `ntensors` entries.
 * Returns 0 or -errno; *s is left valid for tpl__store_free either way. */
int tpl__store_create(struct tpl__store *s, uint64_t size, size_t ntensors,
                      struct tpl_error *err);

/* The same for a store only this process reads (load, preshard): private
 * anonymous memory, fd -1, never sealed. */
int tpl__store_create_private(struct tpl__store *s, uint64_t size,
                              size_t ntensors, struct tpl_error *err);

/* Makes the store read-only for good: unmaps the writable mapping, seals
 * the memfd (write, grow, shrink, seal) and maps it read-only again. */
int tpl__store_seal(struct tpl__store *s, struct tpl_error *err);

/* Releases mapping, fd and table; safe on a zeroed or freed store. */
void tpl__store_free(struct tpl__store *s);

#endif
