/* store.c - a rank's shard store, and the huge-page memory behind it.
 * A store is one of the kinds of store.h, each a row of `kinds` below
 * (how it is made, sealed and exported): for `serve`, one memfd-backed
 * shared mapping that the engine writes into, then seals read-only and
 * exports (its descriptor) so the daemon can hand the same bytes to
 * consumers without copying; for `load` and `preshard`, plain private
 * memory that nobody else maps.  A store counts its exports, so whoever
 * retires it can wait until none is left. *
 * Page faults are the dominant cost of filling fresh memory (on a virtual
 * machine one 4 KiB fault can cost tens of microseconds), so every large
 * buffer is advised for transparent huge pages and aligned to 2 MiB:
 * 512 times fewer faults.  Shared memory only gets huge pages from
 * hugetlb (when pages are reserved, see tpl__store_create_huge) or when the
 * administrator sets shmem_enabled=advise; otherwise its pages are
 * populated writable in one kernel pass (MADV_POPULATE_WRITE) instead of
 * one write fault per 4 KiB page. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "affinity.h"
#include "store.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

#define HUGE_PAGE ((uint64_t)2 << 20)

static uint64_t round_huge(uint64_t n) {
  return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

/* An address range of `len` bytes (a multiple of 2 MiB) aligned to 2 MiB,
 * private anonymous memory with `prot` (PROT_NONE to reserve it for a
 * MAP_FIXED mapping); NULL when none is left.  Only the aligned middle of
 * a larger mapping is kept, so every huge page lies wholly inside. */
static uint8_t *map_aligned(size_t len, int prot) {
  size_t extra = (size_t)HUGE_PAGE;
  uint8_t *q, *p = mmap(NULL, len + extra, prot,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  q = (uint8_t *)(((uintptr_t)p + extra - 1) & ~(uintptr_t)(extra - 1));
  if (q > p) munmap(p, (size_t)(q - p));
  munmap(q + len, (size_t)(p + extra - q));
  return q;
}

/* Huge pages where the buffer fills them; a last one it fills only in
 * part is left to small pages, so its unused rest is never resident (up
 * to 2 MiB: 1.4 MiB of rank 0's store at 4 ranks of the bench's model).
 * Failure of either advice costs speed or that memory, nothing else. */
void *tpl__huge_alloc(size_t size) {
  size_t len = (size_t)round_huge(size), whole = size & ~(HUGE_PAGE - 1);
  uint8_t *q;
  if (size == 0 || len < size) return NULL;
  q = map_aligned(len, PROT_READ | PROT_WRITE);
  if (q != NULL && whole > 0) madvise(q, whole, MADV_HUGEPAGE);
  if (q != NULL && len > whole)
    madvise(q + whole, len - whole, MADV_NOHUGEPAGE);
  return q;
}

void tpl__huge_free(void *p, size_t size) {
  if (p != NULL) munmap(p, (size_t)round_huge(size));
}

/* Huge pages free in the hugetlb pool (HugePages_Free), 0 when unknown. */
static uint64_t hugetlb_free_bytes(void) {
  char line[128];
  unsigned long long pages = 0;
  FILE *f = fopen("/proc/meminfo", "r");
  if (f == NULL) return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "HugePages_Free: %llu", &pages) == 1) break;
  fclose(f);
  return (uint64_t)pages * HUGE_PAGE;
}

/* The `key:` value of /proc/meminfo in bytes, UINT64_MAX when unknown. */
static uint64_t meminfo_bytes(const char *key) {
  char line[128], name[64];
  unsigned long long kib;
  uint64_t v = UINT64_MAX;
  FILE *f = fopen("/proc/meminfo", "r");
  if (f == NULL) return v;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "%63[^:]: %llu", name, &kib) == 2 &&
        strcmp(name, key) == 0) {
      v = (uint64_t)kib * 1024u;
      break;
    }
  fclose(f);
  return v;
}

/* One number from the file `dir`/`name`; UINT64_MAX when unknown or
 * "max". */
static uint64_t cgroup_number(const char *dir, const char *name) {
  char path[4096 + 64];
  unsigned long long v;
  FILE *f;
  int n;
  snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", dir, name);
  f = fopen(path, "r");
  if (f == NULL) return UINT64_MAX;
  n = fscanf(f, "%llu", &v);
  fclose(f);
  return n == 1 ? (uint64_t)v : UINT64_MAX;
}

/* What this process's cgroup (v2) still allows, UINT64_MAX when none. */
static uint64_t cgroup_room(void) {
  char line[4096];
  uint64_t max, cur;
  FILE *f = fopen("/proc/self/cgroup", "r");
  int found = 0;
  if (f == NULL) return UINT64_MAX;
  while (!found && fgets(line, sizeof(line), f) != NULL)
    found = strncmp(line, "0::", 3) == 0;
  fclose(f);
  if (!found) return UINT64_MAX;
  line[strcspn(line, "\n")] = '\0';
  max = cgroup_number(line + 3, "memory.max");
  cur = cgroup_number(line + 3, "memory.current");
  if (max == UINT64_MAX || cur == UINT64_MAX) return UINT64_MAX;
  return max > cur ? max - cur : 0;
}

/* The test hook's BYTES when it names `rank`. */
static int test_room(uint32_t rank, uint64_t *out) {
  const char *v = getenv("TPLOAD_TEST_MEM_AVAILABLE");
  unsigned long r;
  unsigned long long b;
  if (v == NULL || sscanf(v, "%lu:%llu", &r, &b) != 2 || r != rank) return 0;
  *out = (uint64_t)b;
  return 1;
}

static int want_hugetlb(int huge, uint64_t size);

int tpl__store_room(uint64_t size, int huge, uint32_t rank,
                    struct tpl__error *err) {
  uint64_t avail = meminfo_bytes("MemAvailable"), cg = cgroup_room();
  const char *what = "MemAvailable";
  if (want_hugetlb(huge, size)) { /* the pool's pages, not MemAvailable */
    avail = hugetlb_free_bytes();
    what = "huge pages free in the hugetlb pool";
    size = round_huge(size);
  } else if (cg < avail) {
    avail = cg;
    what = "the cgroup's memory.max";
  }
  if (test_room(rank, &avail)) what = "TPLOAD_TEST_MEM_AVAILABLE";
  if (avail == UINT64_MAX || avail >= size) return 0;
  return tpl__fail(err, -ENOMEM,
                   "rank %u: no room for a second store of %llu bytes: "
                   "%llu available (%s)",
                   rank, (unsigned long long)size, (unsigned long long)avail,
                   what);
}

/* Shared memory in huge pages even where shmem THP is off (shmem_enabled
 * = never; only "deny" forbids it): one byte written per 2 MiB through the
 * file (no page-table fault, unlike a write through the mapping: measured
 * half the cost), then MADV_COLLAPSE (Linux 6.1+) makes each 2 MiB a huge
 * page, filling the holes.  Best effort: on failure the 4 KiB pages stay. */
static void collapse_huge(const struct tpl__store *s, uint64_t from,
                          uint64_t to) {
  uint64_t whole = (to - from) & ~(HUGE_PAGE - 1);
  for (uint64_t off = 0; off < whole; off += HUGE_PAGE)
    if (pwrite(s->fd, "", 1, (off_t)(from + off)) != 1) s->base[from + off] = 0;
  if (whole > 0) madvise(s->base + from, (size_t)whole, MADV_COLLAPSE);
}

/* Maps the memfd at a 2 MiB aligned address (so huge pages can be mapped
 * whole); the writable mapping is prepared piece by piece as the shard
 * arrives (tpl__store_prepare), the read-only one populated at once. */
static int map_store(struct tpl__store *s, int prot, struct tpl__error *err) {
  uint8_t *at;
  void *p = MAP_FAILED;
  int flags = MAP_SHARED | MAP_FIXED;
  if (s->size == 0) {
    s->base = NULL;
    return 0;
  }
  if (!(prot & PROT_WRITE)) flags |= MAP_POPULATE;
  at = map_aligned((size_t)round_huge(s->size), PROT_NONE);
  if (at != NULL) p = mmap(at, (size_t)s->size, prot, flags, s->fd, 0);
  if (p == MAP_FAILED) {
    int e = at != NULL ? errno : ENOMEM;
    if (at != NULL) munmap(at, (size_t)round_huge(s->size));
    return tpl__fail(err, -e, "cannot map a %llu-byte shard store: %s",
                     (unsigned long long)s->size, strerror(e));
  }
  s->base = p;
  s->mapped = round_huge(s->size);
  if (prot & PROT_WRITE)
    madvise(p, (size_t)s->size, MADV_HUGEPAGE); /* shmem_enabled=advise */
  return 0;
}

/* A memfd store is prepared in steps: large enough to amortize the calls,
 * small enough for the writer to follow closely. */
#define PREPARE_STEP ((uint64_t)32 << 20)

static uint32_t step_count(uint64_t bytes) {
  return (uint32_t)((bytes + PREPARE_STEP - 1) / PREPARE_STEP);
}

/* Puts step `k` of the writable mapping in huge pages where it can (a
 * memfd needs MADV_COLLAPSE unless it is hugetlb; private memory is
 * advised already) and populates it writable in one pass: a shared
 * mapping would otherwise take one write fault per 4 KiB page.  Returns 0
 * or -errno; EINVAL (an old kernel) is not an error: pages fault in. */
static int populate(const struct tpl__store *s, uint32_t k) {
  uint64_t from = (uint64_t)k * PREPARE_STEP;
  uint64_t to = s->size - from > PREPARE_STEP ? from + PREPARE_STEP : s->size;
  if (s->fd >= 0 && !s->hugetlb) collapse_huge(s, from, to);
  if (madvise(s->base + from, (size_t)(to - from), MADV_POPULATE_WRITE) != 0 &&
      errno != EINVAL)
    return -errno;
  return 0;
}

/* Steps are handed out in order, under the lock, to whoever asks first:
 * the prefault thread working ahead, or the writer when it has caught up
 * with the thread (so neither waits while a step is left to take). */
static int step_left(const struct tpl__store *s, uint32_t below) {
  return s->taken < below && s->prefault_rc == 0;
}

/* The prefault thread: takes steps from the start, so that the page
 * clearing runs beside the transfer instead of inside it, on any core of
 * the rank's NUMA node (affinity.h): a thread left on a rank's one bound
 * core would take turns with the writer instead of running beside it.
 * The step it is on is marked in the
 * same lock that hands it out, and a writer waiting for it is woken when it
 * ends. */
static void *prefault_main(void *arg) {
  struct tpl__store *s = arg;
  tpl__thread_widen_to_node();
  pthread_mutex_lock(&s->lock);
  while (!s->stop && step_left(s, step_count(s->size))) {
    uint32_t k = s->taken++;
    int rc;
    s->thread_step = k;
    pthread_mutex_unlock(&s->lock);
    rc = populate(s, k);
    pthread_mutex_lock(&s->lock);
    s->thread_step = -1;
    if (rc != 0) s->prefault_rc = rc;
    pthread_cond_broadcast(&s->step_done);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

void tpl__store_prefault(struct tpl__store *s) {
  if (s->size == 0 || s->prefaulting || s->sealed) return;
  s->prefaulting = pthread_create(&s->prefaulter, NULL, prefault_main, s) == 0;
}

static void prefault_join(struct tpl__store *s) {
  if (!s->prefaulting) return;
  pthread_mutex_lock(&s->lock);
  s->stop = 1;
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->prefaulter, NULL);
  s->prefaulting = 0;
}

/* Whether steps [0, need) are all populated: every one is taken and none
 * of them is still in the thread's hands (the writer's own step is done
 * when it asks).  Called under the lock. */
static int steps_done(const struct tpl__store *s, uint32_t need) {
  return s->taken >= need && !(s->thread_step >= 0 && s->thread_step < need);
}

/* The writer's side: takes the steps below `need` that the thread has not
 * taken yet, then waits for the one the thread may still be working on. */
static int prepare_steps(struct tpl__store *s, uint32_t need) {
  int rc;
  pthread_mutex_lock(&s->lock);
  while (s->prefault_rc == 0 && !steps_done(s, need)) {
    if (step_left(s, need)) {
      uint32_t k = s->taken++;
      pthread_mutex_unlock(&s->lock);
      rc = populate(s, k);
      pthread_mutex_lock(&s->lock);
      if (rc != 0) s->prefault_rc = rc;
    } else {
      pthread_cond_wait(&s->step_done, &s->lock);
    }
  }
  rc = s->prefault_rc;
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int tpl__store_prepare(struct tpl__store *s, uint64_t end,
                       struct tpl__error *err) {
  int rc;
  if (s->fd < 0 || s->sealed || end <= s->prepared) return 0;
  if (end > s->size) end = s->size;
  rc = prepare_steps(s, step_count(end));
  if (rc != 0)
    return tpl__fail(err, rc, "cannot populate the %llu-byte shard store: %s",
                     (unsigned long long)s->size, strerror(-rc));
  s->prepared = (uint64_t)step_count(end) * PREPARE_STEP;
  return 0;
}

int tpl__store_populate(struct tpl__store *s, uint64_t from, uint64_t to,
                        struct tpl__error *err) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  if (s->fd >= 0 || s->sealed) return tpl__store_prepare(s, to, err);
  if (to > s->size) to = s->size;
  from &= ~(page - 1);
  if (from < to)
    (void)madvise(s->base + from, (size_t)(to - from), MADV_POPULATE_WRITE);
  return 0;
}

/* An empty store (fd -1) with room for `ntensors` zero checksums. */
static int init_store(struct tpl__store *s, size_t ntensors,
                      struct tpl__error *err) {
  memset(s, 0, sizeof(*s));
  s->fd = -1;
  s->thread_step = -1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->step_done, NULL);
  s->xxh3 = calloc(ntensors ? ntensors : 1, sizeof(*s->xxh3));
  if (s->xxh3 == NULL) return tpl__oom(err);
  s->ntensors = ntensors;
  return 0;
}

int tpl__store_create_private(struct tpl__store *s, uint64_t size,
                              size_t ntensors, struct tpl__error *err) {
  void *p;
  if (init_store(s, ntensors, err) != 0) return -ENOMEM;
  s->kind = TPL_STORE_PRIVATE;
  if (size == 0) return 0;
  /* Faulted in as the shard arrives, not up front: the faults then overlap
   * with rank 0's reading instead of delaying it. */
  p = size <= SIZE_MAX - 2 * HUGE_PAGE ? tpl__huge_alloc((size_t)size) : NULL;
  if (p == NULL)
    return tpl__fail(err, -ENOMEM, "cannot allocate a %llu-byte shard store",
                     (unsigned long long)size);
  s->base = p;
  s->size = size;
  s->mapped = round_huge(size);
  return 0;
}

/* hugetlb when asked, or (auto) when the reserved pool holds the store. */
static int want_hugetlb(int huge, uint64_t size) {
  if (huge == TPL_HUGE_HUGETLB) return 1;
  return huge == TPL_HUGE_AUTO && size > 0 &&
         hugetlb_free_bytes() >= round_huge(size);
}

static int open_memfd(struct tpl__store *s, int huge, uint64_t size,
                      struct tpl__error *err) {
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  if (want_hugetlb(huge, size)) {
    s->fd = memfd_create("tpload-store", flags | MFD_HUGETLB);
    s->hugetlb = s->fd >= 0;
    if (!s->hugetlb && huge == TPL_HUGE_HUGETLB) {
      int e = errno;
      return tpl__fail(err, -e, "memfd_create(MFD_HUGETLB): %s", strerror(e));
    }
  }
  if (s->fd < 0) s->fd = memfd_create("tpload-store", flags);
  if (s->fd < 0) {
    int e = errno;
    return tpl__fail(err, -e, "memfd_create: %s", strerror(e));
  }
  return 0;
}

int tpl__store_create_huge(struct tpl__store *s, uint64_t size, size_t ntensors,
                           int huge, struct tpl__error *err) {
  int rc = init_store(s, ntensors, err);
  s->kind = TPL_STORE_MEMFD;
  if (rc == 0) rc = open_memfd(s, huge, size, err);
  if (rc != 0) return rc;
  /* A hugetlb file holds whole huge pages only. */
  if (s->hugetlb) size = round_huge(size);
  if (ftruncate(s->fd, (off_t)size) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "cannot size a %llu-byte shard store%s: %s",
                     (unsigned long long)size,
                     s->hugetlb ? " in hugetlb pages" : "", strerror(e));
  }
  s->size = size;
  return map_store(s, PROT_READ | PROT_WRITE, err);
}

static int seal_memfd(struct tpl__store *s, struct tpl__error *err) {
  const int seals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  prefault_join(s);
  if (s->base != NULL) munmap(s->base, (size_t)s->mapped);
  s->base = NULL;
  if (fcntl(s->fd, F_ADD_SEALS, seals) != 0) {
    int e = errno;
    return tpl__fail(err, -e, "cannot seal the shard store: %s", strerror(e));
  }
  s->sealed = 1;
  return map_store(s, PROT_READ, err);
}

/* A memfd is exported as its descriptor: once sent, the consumer's copy
 * holds the bytes for as long as it maps them, whatever the store does. */
static int export_memfd(struct tpl__store *s, struct tpl__store_export *out) {
  out->fds[0] = s->fd;
  out->nfds = 1;
  return 0;
}

static int create_private(struct tpl__store *s, uint64_t size, size_t ntensors,
                          int huge, struct tpl__error *err) {
  (void)huge;
  return tpl__store_create_private(s, size, ntensors, err);
}

static const struct tpl__store_kind_ops private_kind = {
    "private", create_private, NULL, NULL};
static const struct tpl__store_kind_ops memfd_kind = {
    "memfd", tpl__store_create_huge, seal_memfd, export_memfd};

/* Every kind of store, by its enum tpl__store_kind (a kind in a file of
 * its own: &its descriptor). */
static const struct tpl__store_kind_ops *const kinds[TPL_STORE_KINDS] = {
    [TPL_STORE_PRIVATE] = &private_kind,
    [TPL_STORE_MEMFD] = &memfd_kind,
};

int tpl__store_create(struct tpl__store *s, enum tpl__store_kind kind,
                      uint64_t size, size_t ntensors, int huge,
                      struct tpl__error *err) {
  return kinds[kind]->create(s, size, ntensors, huge, err);
}

int tpl__store_seal(struct tpl__store *s, struct tpl__error *err) {
  const struct tpl__store_kind_ops *k = kinds[s->kind];
  if (s->sealed) return 0;
  if (k->seal == NULL)
    return tpl__fail(err, -ENOTSUP, "a %s shard store cannot be sealed",
                     k->name);
  return k->seal(s, err);
}

int tpl__store_export(struct tpl__store *s, struct tpl__store_export *out,
                      struct tpl__error *err) {
  const struct tpl__store_kind_ops *k = kinds[s->kind];
  int rc;
  if (k->export == NULL)
    return tpl__fail(err, -ENOTSUP, "a %s shard store cannot be exported",
                     k->name);
  if (!s->sealed)
    return tpl__fail(err, -EBUSY, "the shard store is not sealed yet");
  rc = k->export(s, out);
  if (rc == 0) s->exports++;
  return rc;
}

unsigned tpl__store_unexport(struct tpl__store *s) {
  if (s->exports > 0) s->exports--;
  return s->exports;
}

unsigned tpl__store_exports(const struct tpl__store *s) {
  return s->exports;
}

void tpl__store_free(struct tpl__store *s) {
  prefault_join(s);
  if (s->base != NULL) munmap(s->base, (size_t)s->mapped);
  if (s->fd >= 0) close(s->fd);
  free(s->xxh3);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->step_done);
  memset(s, 0, sizeof(*s));
  s->fd = -1;
}
