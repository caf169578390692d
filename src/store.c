/* store.c - a rank's shard store.  For `serve`, one memfd-backed shared
 * mapping that the engine writes into, then seals read-only so the daemon
 * can hand the same bytes to consumers without copying.  For `load` and
 * `preshard`, plain private memory: nobody else maps it, and the kernel
 * may back it with transparent huge pages, which makes it several times
 * cheaper to fault in than shared memory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store.h"

/* MAP_POPULATE: the pages are allocated in one pass now instead of one
 * fault at a time while the shard arrives (several times faster). */
static int map_store(struct tpl__store *s, int prot, struct tpl_error *err) {
  void *p;
  if (s->size == 0) {
    s->base = NULL;
    return 0;
  }
  p = mmap(NULL, (size_t)s->size, prot, MAP_SHARED | MAP_POPULATE, s->fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    return tpl__fail(err, -e, "cannot map a %llu-byte shard store: %s",
                     (unsigned long long)s->size, strerror(e));
  }
  s->base = p;
  return 0;
}

static int alloc_table(struct tpl__store *s, size_t ntensors,
                       struct tpl_error *err) {
  s->tensors = calloc(ntensors ? ntensors : 1, sizeof(*s->tensors));
  if (s->tensors == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  s->ntensors = ntensors;
  return 0;
}

int tpl__store_create_private(struct tpl__store *s, uint64_t size,
                              size_t ntensors, struct tpl_error *err) {
  void *p;
  memset(s, 0, sizeof(*s));
  s->fd = -1;
  if (alloc_table(s, ntensors, err) != 0) return -ENOMEM;
  if (size == 0) return 0;
  /* Faulted in as the shard arrives, not up front: the faults then overlap
   * with rank 0's reading instead of delaying it. */
  p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    return tpl__fail(err, -e, "cannot allocate a %llu-byte shard store: %s",
                     (unsigned long long)size, strerror(e));
  }
  s->base = p;
  s->size = size;
  return 0;
}

int tpl__store_create(struct tpl__store *s, uint64_t size, size_t ntensors,
                      struct tpl_error *err) {
  memset(s, 0, sizeof(*s));
  s->fd = memfd_create("tpload-store", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s->fd < 0) {
    int e = errno;
    return tpl__fail(err, -e, "memfd_create: %s", strerror(e));
  }
  if (ftruncate(s->fd, (off_t)size) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "cannot size a %llu-byte shard store: %s",
                     (unsigned long long)size, strerror(e));
  }
  s->size = size;
  if (alloc_table(s, ntensors, err) != 0) return -ENOMEM;
  return map_store(s, PROT_READ | PROT_WRITE, err);
}

int tpl__store_seal(struct tpl__store *s, struct tpl_error *err) {
  const int seals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  if (s->sealed) return 0;
  if (s->base != NULL) munmap(s->base, (size_t)s->size);
  s->base = NULL;
  if (fcntl(s->fd, F_ADD_SEALS, seals) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "cannot seal the shard store: %s", strerror(e));
  }
  s->sealed = 1;
  return map_store(s, PROT_READ, err);
}

void tpl__store_free(struct tpl__store *s) {
  if (s->base != NULL) munmap(s->base, (size_t)s->size);
  if (s->fd >= 0) close(s->fd);
  for (size_t i = 0; s->tensors != NULL && i < s->ntensors; i++)
    free(s->tensors[i].name);
  free(s->tensors);
  memset(s, 0, sizeof(*s));
  s->fd = -1;
}
