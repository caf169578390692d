/* engine.h - the entry points of the distributed load (libtplengine, with
 * beat.h the one unit that sees mpi.h): validate, deliver every rank its
 * shard, report, then run the sink through coord.h (DESIGN.md section 4.1). */
#ifndef TPL_ENGINE_H
#define TPL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"
#include "http.h"

/* --read: who reads the files.  mpi: rank 0, once, and MPI delivers;
 * local: every rank its own slices (local_read.h); auto (the default):
 * local when every rank finds every file of the job in its node's page
 * cache (nobody reads a device then, and nobody copies for another),
 * else mpi (DESIGN.md section 4.1). */
enum tpl__read_mode { TPL_READ_AUTO, TPL_READ_MPI, TPL_READ_LOCAL };

struct tpl__load_opts {
  struct tpl__sink steps; /* what the engine runs for the sink */
  const char *model;
  const char *plan; /* plan file, preset name or "auto" */
  uint32_t tp, pp;  /* --tp, --pp; 0: N / P, 1 (one TP group) */
  /* --ep: every MoE layer's experts whole over the expert-parallel
   * group (experts.h) of --ep-size ranks (0: the TP group, T) */
  int ep;
  uint32_t ep_size;
  int bias_family;            /* enum tpl__bias_family: --bias-policy */
  int skip_mtp;               /* --skip-mtp: the main model only */
  double stall_timeout;       /* seconds without progress that end the
                                 job (exit 69); 0 waits forever */
  uint64_t chunk_bytes;       /* rank 0's streaming window */
  int huge;                   /* memfd store: enum tpl__huge (store.h) */
  int read_mode;              /* --read: enum tpl__read_mode */
  uint64_t read_gap;          /* --read-gap: local_read.h's run_gap, or
                                 TPL_READ_GAP_AUTO (the origin's) */
  int io_mode;                /* --io: enum tpl__io_mode (source.h) */
  struct tpl__http_opts http; /* a MODEL URL's client (http.h) */
  int verify_md5;             /* --verify-md5: rank 0 checks every file of
                                 an MLC directory against its md5sum before
                                 the load (mlc_md5.h); a reload too */
  /* Rank 0 only: called after every chunk with bytes delivered so far
   * (`own`: rank 0's own reads of its share, every rank reading its own). */
  void (*progress)(void *ctx, uint64_t done, uint64_t total, int own);
  /* Rank 0 only: called during --verify-md5's pass with bytes hashed. */
  void (*md5_progress)(void *ctx, uint64_t done, uint64_t total);
  /* Rank 0 only: called once the LoadReport is assembled, before the
   * sink runs (packed tpload.LoadReport, valid during the call). */
  void (*report)(void *ctx, const uint8_t *packed, size_t len);
  void *ctx;
};

/* Initializes MPI (threads: funneled). Stores rank and world size. */
int tpl__engine_init(int *argc, char ***argv, uint32_t *rank, uint32_t *world,
                     struct tpl__error *err);

/* Runs the whole job on this rank.  Returns the same code on every rank
 * for bad input (rank 0's err holds the one message to print) and for
 * failures the ranks agreed on; a failure that strands the job mid-way
 * aborts it through MPI instead. */
int tpl__engine_run(const struct tpl__load_opts *o, struct tpl__error *err);

/* Finalizes MPI.  Returns 0 or TPL_EPEER (err says why). */
int tpl__engine_finalize(struct tpl__error *err);

#endif
