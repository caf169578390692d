/* store.h - one rank's delivered shard: a single region holding every
 * tensor back to back at 64-byte aligned offsets, plus each tensor's
 * checksum.  Its kind (enum tpl__store_kind) says where the bytes live:
 * private memory only this process reads (load, preshard) or a memfd
 * serve seals and exports to consumers.  What the bytes are (name, dtype,
 * shape, offset) is the job table's (job.h); the store only holds them.
 * The engine fills it; preshard, the rank report and the daemon read it. */
#ifndef TPL_STORE_H
#define TPL_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Where a store's bytes live, as a sink asks for them (coord.h).  Each
 * kind is one row of store.c's table: how it is made, sealed and
 * exported.  Room for pinned host memory and device memory. */
enum tpl__store_kind {
  TPL_STORE_PRIVATE = 0, /* private anonymous memory, never exported */
  TPL_STORE_MEMFD,       /* a memfd (huge pages per enum tpl__huge),
                            sealed, then exported as its descriptor */
  TPL_STORE_KINDS
};

/* What a consumer is handed to map an exported store: descriptors the
 * daemon passes with SCM_RIGHTS (a memfd: its one sealed fd).  Borrowed
 * from the store, valid while it is. */
#define TPL_STORE_EXPORT_FDS 1
struct tpl__store_export {
  int fds[TPL_STORE_EXPORT_FDS];
  size_t nfds;
};

struct tpl__store {
  enum tpl__store_kind kind;
  unsigned exports; /* exports not yet ended (tpl__store_export) */
  int fd;           /* memfd, -1 when closed */
  uint8_t *base;    /* mapping of `size` bytes (NULL if 0) */
  uint64_t size;
  uint64_t mapped;          /* bytes reserved at base */
  uint64_t prepared;        /* memfd: [0, prepared) is populated */
  pthread_t prefaulter;     /* see tpl__store_prefault */
  int prefaulting;          /* 1 while the thread is to be joined */
  pthread_mutex_t lock;     /* guards the four fields below */
  pthread_cond_t step_done; /* signalled as the thread ends a step */
  uint32_t taken;           /* prepare steps [0, taken) handed out */
  int64_t thread_step;      /* the step the thread is on, or -1 */
  int stop;                 /* asks the thread to stop */
  int prefault_rc;          /* the first failed step's -errno */
  int sealed;               /* 1 once read-only and sealed */
  int hugetlb;              /* 1 when the memfd is in hugetlb pages */
  uint64_t *xxh3;           /* owned: per job tensor, XXH3-64 of its
                               bytes (after scaling) */
  size_t ntensors;
};

/* Where `serve` keeps its memfd: hugetlb pages when the reserved pool
 * (vm.nr_hugepages) holds the store, else shared memory (auto); always
 * hugetlb (an error when none are free); never hugetlb. */
enum tpl__huge { TPL_HUGE_AUTO = 0, TPL_HUGE_HUGETLB, TPL_HUGE_OFF };

/* Creates a writable store of kind `kind` of `size` bytes with room for
 * `ntensors` checksums, as the two functions below do; `huge` (enum
 * tpl__huge) is the memfd's.  Returns 0 or a negative code; *s is left
 * valid for tpl__store_free either way. */
int tpl__store_create(struct tpl__store *s, enum tpl__store_kind kind,
                      uint64_t size, size_t ntensors, int huge,
                      struct tpl__error *err);

/* Creates a writable TPL_STORE_MEMFD store of `size` bytes (rounded up
 * to 2 MiB in hugetlb pages) backed by a memfd named "tpload-store",
 * populated, and room for `ntensors` checksums (zero until the engine
 * fills them).  `huge` is an
 * enum tpl__huge.  Returns 0 or -errno; *s is left valid for tpl__store_free
 * either way. */
int tpl__store_create_huge(struct tpl__store *s, uint64_t size, size_t ntensors,
                           int huge, struct tpl__error *err);

/* The same for a TPL_STORE_PRIVATE store, one only this process reads
 * (load, preshard): private anonymous memory advised for transparent huge
 * pages (tpl__huge_alloc), faulted in as it is written, fd -1, never
 * sealed. */
int tpl__store_create_private(struct tpl__store *s, uint64_t size,
                              size_t ntensors, struct tpl__error *err);

/* Starts a thread that populates the whole store (huge pages where the
 * kernel allows) from the start, ahead of the writer; tpl__store_prepare
 * shares the steps with it (it takes those the thread has not, and waits
 * only for one the thread is on; a private store's writer never waits and
 * faults in what the thread has not reached).  The thread may run on any
 * core of the rank's NUMA node, not only the one the launcher bound the
 * rank to (affinity.h).  Best effort:
 * without a thread the store is populated as it is written.  Joined by
 * tpl__store_seal and tpl__store_free; the store must not move meanwhile. */
void tpl__store_prefault(struct tpl__store *s);

/* Prepares a memfd store's bytes [0, end) for writing, in huge pages
 * where the kernel allows (hugetlb, or MADV_COLLAPSE of shared memory)
 * and populated, a step ahead of `end`; call before writing below `end`
 * (bytes written without it are still correct, only slower to fault in).
 * A no-op for private and sealed stores.  Returns 0 or -errno. */
int tpl__store_prepare(struct tpl__store *s, uint64_t end,
                       struct tpl__error *err);

/* Bytes [from, to) of the store, to be written later by another's hand
 * (a receive), populated writable now: a memfd store prepared up to `to`
 * (tpl__store_prepare), a private one's pages faulted in
 * (MADV_POPULATE_WRITE), so the write costs no faults when it comes.
 * Returns 0 or -errno (a private store's failure to populate is not one:
 * the write faults them in). */
int tpl__store_populate(struct tpl__store *s, uint64_t from, uint64_t to,
                        struct tpl__error *err);

/* Makes the store read-only for good: unmaps the writable mapping, seals
 * the memfd (write, grow, shrink, seal) and maps it read-only again.  A
 * kind that cannot be sealed (private) refuses with -ENOTSUP. */
int tpl__store_seal(struct tpl__store *s, struct tpl__error *err);

/* Exports a sealed store to one consumer: fills *out with what it maps
 * (a memfd: its descriptor) and counts one export, which the exporter
 * ends with tpl__store_unexport once the consumer no longer needs the
 * store's own handle (a memfd: as soon as the descriptor is sent, the
 * kernel then keeps the bytes for the consumer).  Returns 0, -EBUSY (not
 * sealed yet) or -ENOTSUP (a kind that cannot be exported: private). */
int tpl__store_export(struct tpl__store *s, struct tpl__store_export *out,
                      struct tpl__error *err);

/* Ends one export of `s` (ignored when none is counted); returns the
 * exports left.  The store may be freed (retired) only at 0. */
unsigned tpl__store_unexport(struct tpl__store *s);

/* The exports of `s` not yet ended. */
unsigned tpl__store_exports(const struct tpl__store *s);

/* Whether this node can hold a store of `size` more bytes now (a reload's
 * second store, beside the one served): against MemAvailable and, when
 * this process is in a cgroup (v2) with a memory.max, what that leaves
 * above memory.current; a store that `huge` (enum tpl__huge) puts in
 * hugetlb pages, against the pool's free pages.  Refuses early instead
 * of being killed mid-way.
 * For tests, TPLOAD_TEST_MEM_AVAILABLE=R:BYTES makes rank R see BYTES
 * available.  Returns 0 or -ENOMEM with err naming both sizes. */
int tpl__store_room(uint64_t size, int huge, uint32_t rank,
                    struct tpl__error *err);

/* What one kind of store implements; store.c's table points to one per
 * enum tpl__store_kind (a new kind: a file exporting its descriptor, its
 * enum value, its row).
 * `create` as tpl__store_create, setting s->kind; `seal` as
 * tpl__store_seal (NULL: the kind cannot be sealed); `export` fills *out
 * as tpl__store_export does, for a sealed store, the count aside (NULL:
 * the kind is never exported). */
struct tpl__store_kind_ops {
  const char *name;
  int (*create)(struct tpl__store *s, uint64_t size, size_t ntensors, int huge,
                struct tpl__error *err);
  int (*seal)(struct tpl__store *s, struct tpl__error *err);
  int (*export)(struct tpl__store *s, struct tpl__store_export *out);
};

/* Releases mapping, fd and checksums; safe on a zeroed or freed store. */
void tpl__store_free(struct tpl__store *s);

/* `size` bytes (> 0) of private memory, 2 MiB aligned and advised for
 * transparent huge pages, faulted in on first touch; NULL when out of
 * memory or size is 0.  Free with tpl__huge_free and the same size. */
void *tpl__huge_alloc(size_t size);

/* Frees a tpl__huge_alloc buffer; NULL is ignored. */
void tpl__huge_free(void *p, size_t size);

#endif
