/* report.h - what ranks tell each other, as protobuf (DESIGN.md section
 * 4.1, step 4): the job table, each rank's RankReport and the LoadReport
 * rank 0 assembles once the replicas agree; that report decoded into plain
 * C, its summary, JSON form and grid line.  Only report.c and wire.c
 * include the generated protobuf header. */
#ifndef TPL_REPORT_H
#define TPL_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "job.h"
#include "shardinfo.h"
#include "store.h"

/* Packs the job table; *buf is malloc'd (caller frees). */
int tpl__job_pack(const struct tpl__job *job, uint8_t **buf, size_t *len);

/* Unpacks a job table and finishes it; free *out with tpl__job_free. */
int tpl__job_unpack(const uint8_t *buf, size_t len, struct tpl__job **out,
                    struct tpl__error *err);

/* What a rank measured about itself. */
struct tpl__rank_stats {
  uint32_t rank;
  int pid;
  char host[256];
  uint64_t peak_rss;
  double seconds; /* first read (rank 0) / first receive to done */
  double t_alloc, t_read, t_pack, t_send, t_recv, t_scale, t_hash;
  uint64_t bytes_sent; /* tensor bytes this rank sent (rank 0) or forwarded */
  uint64_t bytes_read; /* checkpoint bytes this rank read from the files */
  uint64_t gets;       /* ... in this many requests (HTTP GETs) */
  double cpu_user, cpu_sys; /* CPU seconds of the process so far */
  /* tensor bytes received from / sent to ranks on other hosts */
  uint64_t bytes_in_remote, bytes_out_remote;
  /* per job file: 0 not read by this rank, else enum tpl__io_used + 1 */
  uint8_t *file_io;
  uint64_t *file_align; /* per job file: its direct reads' alignment */
  size_t nfile_io;
};

/* Packs this rank's RankReport: where the rank sits in the grid
 * (replica, stage, shard), the count of tensors it holds and, for every
 * job tensor in the job's order, the bytes it holds and their checksum
 * (from the store; 0 and 0 for a tensor of another stage), totals and
 * timings.  Nothing else of a tensor: rank 0 has the job.  *buf is
 * malloc'd (caller frees). */
int tpl__rank_report_pack(const struct tpl__job *job,
                          const struct tpl__store *store,
                          const struct tpl__rank_stats *st, uint8_t **buf,
                          size_t *len);

/* --verify-md5's pass (rank 0, before the load): the files whose md5sum
 * it checked (their names in the cache), their bytes, its time. */
struct tpl__md5_summary {
  const char *const *files;
  size_t nfiles;
  uint64_t bytes;
  double seconds;
};

/* Rank 0: builds the packed LoadReport from the job->grid.world packed
 * RankReports (ranks[i], lens[i]), and checks that the replicas agree:
 * every rank of replica d > 0 reports the same bytes and XXH3 for every
 * tensor as replica 0's rank at the same (stage, shard).  Returns 0,
 * TPL_EMISMATCH naming the first rank and tensor that differ (a wrong
 * shard: the job fails), or TPL_EPEER for a malformed report.  *buf is
 * malloc'd (caller frees), set only on success.  `md5` (NULL: no pass)
 * goes into the report as it is. */
int tpl__load_report_pack(const struct tpl__job *job, uint8_t *const *ranks,
                          const size_t *lens, double seconds,
                          uint64_t bytes_read,
                          const struct tpl__md5_summary *md5, uint8_t **buf,
                          size_t *len, struct tpl__error *err);

/* Repacks a packed LoadReport without the per-tensor arrays (a status
 * summary: a few hundred bytes at any tensor count) into *out (malloc'd).
 * Returns 0, TPL_EPEER when `packed` does not decode, or -ENOMEM. */
int tpl__report_summary(const uint8_t *packed, size_t len, uint8_t **out,
                        size_t *out_len);

/* ---- a decoded LoadReport: what the tables and the JSON are made of ---- */

struct tpl__phase_times {
  double read, pack, send, receive, scale, allocate, hash;
};

struct tpl__file_read {
  const char *file, *mode; /* mode: "direct", "buffered" or "http" */
  uint32_t align;          /* direct: the alignment of its reads */
};

struct tpl__rank_report {
  uint32_t rank;
  struct tpl__pos pos; /* (replica, stage, shard) */
  const char *host;
  int pid;
  uint32_t tensor_count; /* the tensors it holds */
  uint64_t bytes, peak_rss, bytes_sent;
  uint64_t bytes_read;      /* from the files: its own under --read local */
  uint64_t gets;            /* the GETs that read them (a URL's) */
  double seconds;           /* first read (rank 0) / first receive to done */
  double cpu_user, cpu_sys; /* the process's CPU seconds at the load's end */
  uint64_t bytes_in_remote, bytes_out_remote; /* from / to other hosts */
  struct tpl__phase_times times;
  struct tpl__file_read *reads;
  size_t nreads;
};

struct tpl__report {
  const char *model;
  struct tpl__grid grid;
  int bias_scaling;             /* the family is mlc */
  int bias_family;              /* enum tpl__bias_family (scope.h) */
  struct tpl__quant_info quant; /* scheme_name, method, block (quant.h) */
  /* 0: every replica holds replica 0's bytes, TPL_EMISMATCH: one does
   * not (recomputed from the checksums; a summary, which has none, agrees:
   * a daemon serves only a load whose replicas agreed) */
  int agree;
  double seconds;
  uint64_t bytes_read, bytes_delivered;
  /* a presharded MODEL's tensors rebuilt within an ulp (model.h), 0:
   * exact */
  uint32_t approximate;
  /* who read the files: "mpi" or "local" (NULL: a report from before
   * --read auto), and whether auto chose it */
  const char *read;
  int read_auto;
  uint32_t experts; /* under --ep (grid.ep > 0): routed experts, else 0 */
  struct tpl__rank_report *ranks; /* grid.world of them, in rank order */
  /* infos[i * grid.world + r]: what rank r holds of tensor i, for the
   * ntensors tensors of the job; NULL (and 0) in a summary */
  struct tpl__rank_info *infos;
  size_t ntensors;
  /* --verify-md5's pass before the load (has_md5 0: none): the files
   * checked, by name, their bytes, its time */
  int has_md5;
  const char *const *md5_files;
  size_t md5_nfiles;
  uint64_t md5_bytes;
  double md5_seconds;
  void *msg; /* the unpacked message the strings point into */
};

/* Decodes a packed LoadReport: its ranks must be its grid's, in order,
 * each with the same number of tensor entries (0 in a summary), its
 * strings UTF-8.  Returns
 * 0, TPL_EPEER naming what does not fit, or -ENOMEM; free *out with
 * tpl__report_free. */
int tpl__report_decode(const uint8_t *packed, size_t len,
                       struct tpl__report **out, struct tpl__error *err);

void tpl__report_free(struct tpl__report *r);

/* One host of the job's ranks (a node), from its ranks' own counts:
 * bytes_in, the tensor bytes they received from ranks on other hosts
 * plus what they read over HTTP (a store's link is another); bytes_out,
 * what they sent to ranks on other hosts.  MPI's and TCP's own bytes
 * are not in them. */
struct tpl__node_bytes {
  const char *host; /* the report's; valid while it is */
  uint32_t nranks;
  uint64_t bytes_in, bytes_out;
};

/* The report's hosts in the order of their first rank: *out (malloc'd,
 * the caller frees it) holds *n of them.  0 or -ENOMEM. */
int tpl__report_nodes(const struct tpl__report *r, struct tpl__node_bytes **out,
                      size_t *n);

/* The JSON form (`tpload load --json`, `tpload status --json`): model,
 * tensor_parallel_shards, pipeline_parallel_stages,
 * data_parallel_replicas, replicas_agree,
 * bias_scaling, seconds, bytes_read, bytes_delivered, read {by ("mpi"
 * or "local"), auto}, md5 {verified
 * (file names), bytes, seconds} after --verify-md5's pass, ranks[] {rank,
 * replica, stage, shard, host, pid, bytes, tensor_count, peak_rss_bytes,
 * bytes_sent, seconds, phases {read, pack, send, receive, scale,
 * allocate, hash}, bytes_read, gets, cpu_user_seconds, cpu_sys_seconds,
 * reads[] {file, mode, align}}, nodes[] {host, ranks (their numbers), bytes_in,
 * bytes_out} (tpl__report_nodes); with `job`
 * (the job the report's arrays index: same grid, same tensor count, else
 * NULL is returned) also params[], each tensor as shard-info.json
 * describes it (tpl__shardinfo_param, its holders under "ranks").  NULL
 * on ENOMEM. */
json_t *tpl__report_json(const struct tpl__report *r,
                         const struct tpl__job *job);

/* The one-line grid summary, for the load summary and `tpload status`:
 *   "grid: tp 2 x pp 2 x dp 2, rank = (d*2 + p)*2 + t; replicas agree: yes"
 * ("yes (one replica)" when D = 1, "NO" when a checksum differs), and
 * under --ep "; ep T (the TP group), E experts", into buf
 * of `size` bytes (truncated to fit, always terminated when size > 0). */
void tpl__report_grid_line(const struct tpl__report *r, char *buf, size_t size);

#endif
