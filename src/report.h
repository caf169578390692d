/* report.h - protobuf encodings of what ranks tell each other: the job
 * table rank 0 broadcasts, each rank's RankReport, and the LoadReport rank
 * 0 assembles; plus the LoadReport's JSON form for scripts.  Only
 * report.c and wire.c include the generated protobuf header. */
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
  /* per job file: 0 not read by this rank, else enum tpl__io_used + 1 */
  uint8_t *file_io;
  uint64_t *file_align; /* per job file: its direct reads' alignment */
  size_t nfile_io;
};

/* Packs this rank's RankReport: where the rank sits in the grid
 * (replica, stage, shard), every job tensor's shard info (from the job)
 * with, for the tensors its stage holds, its bytes, store offset and
 * checksum (from the store; the job placed for the rank's stage), and for
 * the others 0 bytes, checksum 0 and offset UINT64_MAX; totals and
 * timings.  *buf is malloc'd (caller frees). */
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

/* The JSON form of a packed LoadReport (`tpload load --json`, `tpload
 * status --json`): model, tensor_parallel_shards, pipeline_parallel_stages,
 * data_parallel_replicas, replicas_agree (recomputed from the report's
 * checksums; absent for a report without a consistent grid),
 * bias_scaling, seconds, bytes_read, bytes_delivered, md5 {verified
 * (file names), bytes, seconds} after --verify-md5's pass, ranks[] {rank,
 * replica, stage, shard, host, pid, bytes, tensor_count, peak_rss_bytes,
 * seconds, phases {read, pack, send, receive, scale, allocate, hash},
 * tensors[] (those the rank holds) when `with_tensors`}.  NULL when
 * `packed` is malformed. */
json_t *tpl__report_json(const uint8_t *packed, size_t len, int with_tensors);

/* The one-line grid summary of a LoadReport's JSON form (`rep`, from
 * tpl__report_json, which computed the verdict), for the load summary and
 * `tpload status`:
 *   "grid: tp 2 x pp 2 x dp 2, rank = (d*2 + p)*2 + t; replicas agree: yes"
 * ("yes (one replica)" when D = 1, "NO" when a checksum differs) into buf
 * of `size` bytes (truncated to fit, always terminated when size > 0).
 * Returns 0, or TPL_EPEER when `rep` is NULL or has no replicas_agree (a
 * report that does not describe its grid; buf untouched). */
int tpl__report_grid_line(const json_t *rep, char *buf, size_t size);

/* Fills out[i * world + r] with rank r's bytes and checksum of tensor i
 * from a packed LoadReport (0 and 0 for a tensor of another stage).  Returns 0
 * or TPL_EPEER when it does not match (`world` ranks of `ntensors` tensors
 * each). */
int tpl__report_rank_infos(const uint8_t *packed, size_t len, uint32_t world,
                           size_t ntensors, struct tpl__rank_info *out);

#endif
