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
                    struct tpl_error *err);

/* What a rank measured about itself. */
struct tpl__rank_stats {
  uint32_t rank;
  int pid;
  char host[256];
  uint64_t peak_rss;
  double seconds; /* first read (rank 0) / first receive to done */
  double t_alloc, t_read, t_pack, t_send, t_recv, t_scale, t_hash;
  uint64_t bytes_sent; /* tensor bytes this rank sent (rank 0) or forwarded */
};

/* Packs this rank's RankReport: each held tensor's shard info (from the
 * job) with its bytes, store offset and checksum (from the store), totals
 * and timings.  *buf is malloc'd (caller frees). */
int tpl__rank_report_pack(const struct tpl__job *job,
                          const struct tpl__store *store,
                          const struct tpl__rank_stats *st, uint8_t **buf,
                          size_t *len);

/* Rank 0: builds the packed LoadReport from the `world` packed
 * RankReports (ranks[i], lens[i]).  *buf is malloc'd (caller frees). */
int tpl__load_report_pack(const struct tpl__job *job, uint8_t *const *ranks,
                          const size_t *lens, double seconds,
                          uint64_t bytes_read, uint8_t **buf, size_t *len,
                          struct tpl_error *err);

/* The JSON form of a packed LoadReport (`tpload load --json`, `tpload
 * status --json`): model, tensor_parallel_shards, bias_scaling, seconds,
 * bytes_read, bytes_delivered, ranks[] {rank, host, pid, bytes,
 * peak_rss_bytes, seconds, phases {read, pack, send, receive, scale},
 * tensors[] when `with_tensors`}.  NULL when `packed` is malformed. */
json_t *tpl__report_json(const uint8_t *packed, size_t len, int with_tensors);

/* Fills out[i * world + r] with rank r's bytes and checksum of tensor i
 * from a packed LoadReport.  Returns 0 or TPL_EPEER when it does not
 * match (`world` ranks of `ntensors` tensors each). */
int tpl__report_rank_infos(const uint8_t *packed, size_t len, uint32_t world,
                           size_t ntensors, struct tpl__rank_info *out);

#endif
