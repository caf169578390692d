/* report.c - protobuf encodings of the job table, the per-rank reports and
 * the job's LoadReport; the LoadReport decoded into plain C, and its JSON
 * form.  A RankReport carries only what its rank alone knows: where it
 * sits in the TP x PP x DP grid, its timings, and per job tensor the bytes
 * it holds and their checksum; everything else about a tensor is the job
 * table's.  Rank 0 checks, from the gathered checksums alone, that every
 * replica holds the same bytes as replica 0 before it accepts the job's
 * report. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "experts.h"
#include "jsonu.h"
#include "origin.h"
#include "proto/tpload.pb-c.h"
#include "report.h"
#include "source.h"
#include "topology.h"

/* Packs any message into a malloc'd *buf (caller frees). */
static int pack_message(const ProtobufCMessage *m, uint8_t **buf, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  *buf = malloc(*len ? *len : 1);
  if (*buf == NULL) return -ENOMEM;
  protobuf_c_message_pack(m, *buf);
  return 0;
}

/* --- job table --- */

/* How many parts entries a spec sends: none unless a segment is
 * replicated, so a table without replication packs as before. */
static size_t spec_parts(const struct tpl__shard_spec *spec) {
  size_t n = spec->nsegs ? spec->nsegs : 1;
  for (size_t j = 0; j < n && j < TPL_MAX_SEGS; j++)
    if (spec->parts[j] != 0) return n;
  return 0;
}

static void job_tensor_to_msg(const struct tpl__job_tensor *t,
                              Tpload__JobTensor *m) {
  tpload__job_tensor__init(m);
  m->name = t->name;
  m->dtype = (uint32_t)t->dtype;
  m->n_shape = (size_t)t->ndim;
  m->shape = (uint64_t *)t->shape;
  m->encoding = (uint32_t)t->encoding;
  m->kind = (uint32_t)t->kind;
  m->bias = (uint32_t)t->bias;
  m->stage_first = t->stages.first;
  m->stage_count = t->stages.count;
  m->file = t->file;
  m->file_offset = t->file_offset;
  m->ep = (uint32_t)t->ep;
  m->owner = t->owner;
  if (t->kind == TPL_RULE_SHARD) {
    m->func_name = t->func_name;
    m->dim = t->spec.dim;
    m->n_segs = t->spec.nsegs;
    m->segs = (uint64_t *)t->spec.segs;
    m->n_parts = spec_parts(&t->spec);
    m->parts = (uint32_t *)t->spec.parts;
  }
}

int tpl__job_pack(const struct tpl__job *job, uint8_t **buf, size_t *len) {
  Tpload__JobTable table = TPLOAD__JOB_TABLE__INIT;
  Tpload__JobTensor *msgs = calloc(job->ntensors + 1, sizeof(*msgs));
  Tpload__JobTensor **ptrs = calloc(job->ntensors + 1, sizeof(*ptrs));
  Tpload__SourceFile *fmsgs = calloc(job->nfiles + 1, sizeof(*fmsgs));
  Tpload__SourceFile **fptrs = calloc(job->nfiles + 1, sizeof(*fptrs));
  int rc = -ENOMEM;
  if (msgs == NULL || ptrs == NULL || fmsgs == NULL || fptrs == NULL) goto out;
  for (size_t i = 0; i < job->ntensors; i++) {
    job_tensor_to_msg(&job->tensors[i], &msgs[i]);
    ptrs[i] = &msgs[i];
  }
  for (size_t f = 0; f < job->nfiles; f++) {
    tpload__source_file__init(&fmsgs[f]);
    fmsgs[f].path = job->files[f].path;
    fmsgs[f].size = job->files[f].size;
    fmsgs[f].mtime_ns = job->files[f].mtime_ns;
    /* a remote file's URL and validators; a local file's are NULL and
     * "", which proto3 does not send */
    fmsgs[f].url = job->files[f].url;
    fmsgs[f].etag = job->files[f].obj.etag;
    fmsgs[f].last_modified = job->files[f].obj.modified;
    fptrs[f] = &fmsgs[f];
  }
  table.n_files = job->nfiles;
  table.files = fptrs;
  table.model = job->model;
  table.world = job->grid.world;
  table.tp = job->grid.tp;
  table.pp = job->grid.pp;
  table.ep = job->grid.ep;
  table.experts = job->experts;
  table.bias_family = (uint32_t)job->bias_family;
  table.plan_source = job->plan_source;
  table.n_tensors = job->ntensors;
  table.tensors = ptrs;
  rc = pack_message(&table.base, buf, len);
out:
  free(msgs);
  free(ptrs);
  free(fmsgs);
  free(fptrs);
  return rc;
}

static int msg_to_job_tensor(const Tpload__JobTensor *m,
                             struct tpl__job_tensor *t,
                             struct tpl__error *err) {
  if (m->n_shape > TPL_MAX_DIMS || m->dtype >= TPL_DT_COUNT ||
      m->n_segs > TPL_MAX_SEGS || m->n_parts > TPL_MAX_SEGS ||
      m->kind > TPL_RULE_SCALE_BIAS || m->ep > TPL_EP_STACKED ||
      m->bias >= TPL_BIAS_COUNT ||
      (m->kind == TPL_RULE_SCALE_BIAS && m->bias == TPL_BIAS_DEFAULT))
    return tpl__fail(err, TPL_EPEER, "job table: malformed tensor entry");
  t->name = strdup(m->name);
  if (t->name == NULL) return tpl__oom(err);
  t->dtype = (int)m->dtype;
  t->ndim = (int)m->n_shape;
  if (m->n_shape) /* protobuf-c leaves an empty array NULL */
    memcpy(t->shape, m->shape, m->n_shape * sizeof(uint64_t));
  t->encoding = (int)m->encoding;
  t->kind = (int)m->kind;
  t->bias = (int)m->bias;
  t->stages = (struct tpl__stages){m->stage_first, m->stage_count};
  t->file = m->file;
  t->file_offset = m->file_offset;
  t->ep = (int)m->ep;
  t->owner = m->owner;
  t->rule = -1; /* known to rank 0 only */
  if (t->kind == TPL_RULE_SHARD) {
    t->func_name = strdup(m->func_name);
    if (t->func_name == NULL) return tpl__oom(err);
    t->spec.dim = m->dim;
    t->spec.nsegs = m->n_segs;
    if (m->n_segs) memcpy(t->spec.segs, m->segs, m->n_segs * sizeof(uint64_t));
    if (m->n_parts)
      memcpy(t->spec.parts, m->parts, m->n_parts * sizeof(uint32_t));
  }
  return 0;
}

/* A remote file's URL and validators (an empty url: a local file). */
static int msg_to_remote_file(const Tpload__SourceFile *m,
                              struct tpl__job_file *f, struct tpl__error *err) {
  struct tpl__http_obj *o = &f->obj;
  if (m->url == NULL || m->url[0] == '\0') return 0;
  if (strlen(m->etag) >= sizeof(o->etag) ||
      strlen(m->last_modified) >= sizeof(o->modified))
    return tpl__fail(err, TPL_EPEER,
                     "job table: file '%s': validators too "
                     "long",
                     f->path);
  f->url = strdup(m->url);
  if (f->url == NULL) return tpl__oom(err);
  o->known = 1;
  o->size = f->size;
  memcpy(o->etag, m->etag, strlen(m->etag) + 1);
  memcpy(o->modified, m->last_modified, strlen(m->last_modified) + 1);
  return 0;
}

static int msgs_to_job_files(const Tpload__JobTable *table,
                             struct tpl__job *job, struct tpl__error *err) {
  int rc;
  job->files = calloc(table->n_files + 1, sizeof(*job->files));
  if (job->files == NULL) return tpl__oom(err);
  job->nfiles = table->n_files;
  for (size_t f = 0; f < table->n_files; f++) {
    job->files[f].path = strdup(table->files[f]->path);
    job->files[f].size = table->files[f]->size;
    job->files[f].mtime_ns = table->files[f]->mtime_ns;
    if (job->files[f].path == NULL) return tpl__oom(err);
    rc = msg_to_remote_file(table->files[f], &job->files[f], err);
    if (rc != 0) return rc;
  }
  /* rank 0's choice at open, as its table carries it */
  job->origin =
      tpl__origin_for_file(table->n_files ? table->files[0]->url : NULL);
  return 0;
}

/* A table with files places every tensor's bytes inside one of them. */
static int check_sources(const struct tpl__job *job, struct tpl__error *err) {
  for (size_t i = 0; job->nfiles > 0 && i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    uint64_t end;
    if (t->file >= job->nfiles)
      return tpl__fail(err, TPL_EPEER, "job table: tensor '%s': no file %u",
                       t->name, t->file);
    if (tpl__add_u64(t->file_offset, t->stored_bytes, &end) != 0 ||
        end > job->files[t->file].size)
      return tpl__fail(err, TPL_EPEER,
                       "job table: tensor '%s' ends beyond its file", t->name);
  }
  return 0;
}

/* Every expert's tensor is held by a rank of the expert-parallel group
 * (--ep). */
static int check_owners(const struct tpl__job *job, struct tpl__error *err) {
  for (size_t i = 0; i < job->ntensors; i++)
    if (job->tensors[i].ep == TPL_EP_WHOLE &&
        (job->grid.ep == 0 || job->tensors[i].owner >= job->grid.ep))
      return tpl__fail(err, TPL_EPEER,
                       "job table: tensor '%s': no group rank %u",
                       job->tensors[i].name, job->tensors[i].owner);
  return 0;
}

int tpl__job_unpack(const uint8_t *buf, size_t len, struct tpl__job **out,
                    struct tpl__error *err) {
  Tpload__JobTable *table = tpload__job_table__unpack(NULL, len, buf);
  struct tpl__job *job;
  int rc = 0;
  if (table == NULL)
    return tpl__fail(err, TPL_EPEER, "job table: cannot decode");
  job = calloc(1, sizeof(*job));
  if (job == NULL) {
    tpload__job_table__free_unpacked(table, NULL);
    return tpl__oom(err);
  }
  if (tpl__grid_make(table->world, table->tp, table->pp, NULL, &job->grid) ||
      tpl__grid_set_ep(&job->grid, table->ep != 0, table->ep, NULL) != 0)
    rc = tpl__fail(err, TPL_EPEER, "job table: malformed grid");
  else if (table->bias_family >= TPL_BIASF_COUNT)
    rc = tpl__fail(err, TPL_EPEER, "job table: bias family %u unknown",
                   table->bias_family);
  job->experts = table->experts;
  job->bias_family = (int)table->bias_family;
  job->model = strdup(table->model);
  job->plan_source = strdup(table->plan_source);
  job->tensors = calloc(table->n_tensors + 1, sizeof(*job->tensors));
  job->ntensors = table->n_tensors;
  if (rc == 0 &&
      (job->model == NULL || job->plan_source == NULL || job->tensors == NULL))
    rc = tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < table->n_tensors; i++)
    rc = msg_to_job_tensor(table->tensors[i], &job->tensors[i], err);
  if (rc == 0) rc = msgs_to_job_files(table, job, err);
  tpload__job_table__free_unpacked(table, NULL);
  if (rc == 0) rc = tpl__job_finish(job, err);
  if (rc == 0) rc = check_sources(job, err);
  if (rc == 0) rc = check_owners(job, err);
  if (rc != 0) {
    tpl__job_free(job);
    return rc;
  }
  *out = job;
  return 0;
}

/* --- rank report --- */

/* The FileRead messages of a rank report, for the files it read. */
struct file_reads {
  Tpload__FileRead *msgs;
  Tpload__FileRead **ptrs;
};

static int fill_reads(const struct tpl__job *job,
                      const struct tpl__rank_stats *st, struct file_reads *fr,
                      Tpload__RankReport *r) {
  size_t n = st->nfile_io < job->nfiles ? st->nfile_io : job->nfiles;
  fr->msgs = calloc(n + 1, sizeof(*fr->msgs));
  fr->ptrs = calloc(n + 1, sizeof(*fr->ptrs));
  if (fr->msgs == NULL || fr->ptrs == NULL) return -ENOMEM;
  for (size_t f = 0; f < n; f++) {
    Tpload__FileRead *m = &fr->msgs[r->n_reads];
    if (st->file_io[f] == 0) continue;
    tpload__file_read__init(m);
    m->file = job->files[f].path;
    m->mode = (char *)tpl__io_used_name(st->file_io[f] - 1);
    m->align = (uint32_t)st->file_align[f];
    fr->ptrs[r->n_reads++] = m;
  }
  r->reads = fr->ptrs;
  return 0;
}

/* What only `rank` knows of each job tensor: the bytes it holds and
 * their checksum (0 and 0 for a tensor of another stage); its totals. */
static int fill_tensor_facts(const struct tpl__job *job,
                             const struct tpl__store *store, uint32_t rank,
                             Tpload__RankReport *r) {
  size_t n = job->ntensors;
  r->tensor_nbytes = calloc(n + 1, sizeof(uint64_t));
  r->tensor_xxh3 = calloc(n + 1, sizeof(uint64_t));
  if (r->tensor_nbytes == NULL || r->tensor_xxh3 == NULL) return -ENOMEM;
  r->n_tensor_nbytes = r->n_tensor_xxh3 = n;
  for (size_t i = 0; i < n; i++) {
    if (!tpl__job_holds(job, i, rank)) continue;
    r->tensor_nbytes[i] = job->tensors[i].rank_bytes;
    r->tensor_xxh3[i] = store->xxh3[i];
    r->bytes += job->tensors[i].rank_bytes;
    r->tensor_count++;
  }
  return 0;
}

int tpl__rank_report_pack(const struct tpl__job *job,
                          const struct tpl__store *store,
                          const struct tpl__rank_stats *st, uint8_t **buf,
                          size_t *len) {
  Tpload__RankReport r = TPLOAD__RANK_REPORT__INIT;
  Tpload__PhaseTimes times = TPLOAD__PHASE_TIMES__INIT;
  struct file_reads reads = {0};
  struct tpl__pos c = tpl__grid_coord(&job->grid, st->rank);
  int rc;
  times.read = st->t_read;
  times.pack = st->t_pack;
  times.send = st->t_send;
  times.receive = st->t_recv;
  times.scale = st->t_scale;
  times.allocate = st->t_alloc;
  times.hash = st->t_hash;
  r.rank = st->rank;
  r.replica = c.d;
  r.stage = c.p;
  r.shard = c.t;
  r.host = (char *)st->host;
  r.pid = st->pid;
  r.peak_rss_bytes = st->peak_rss;
  r.bytes_sent = st->bytes_sent;
  r.bytes_read = st->bytes_read;
  r.gets = st->gets;
  r.cpu_user_seconds = st->cpu_user;
  r.cpu_sys_seconds = st->cpu_sys;
  r.bytes_in_remote = st->bytes_in_remote;
  r.bytes_out_remote = st->bytes_out_remote;
  r.times = &times;
  r.seconds = st->seconds;
  rc = fill_tensor_facts(job, store, st->rank, &r);
  if (rc == 0) rc = fill_reads(job, st, &reads, &r);
  if (rc == 0) rc = pack_message(&r.base, buf, len);
  free(reads.msgs);
  free(reads.ptrs);
  free(r.tensor_nbytes);
  free(r.tensor_xxh3);
  return rc;
}

/* --- the grid and replica agreement --- */

/* The grid a LoadReport describes, its ranks in order at their (d, p,
 * t), each with `*ntensors` entries in both tensor arrays. */
static int check_shape(const Tpload__LoadReport *lr, struct tpl__grid *g,
                       size_t *ntensors, struct tpl__error *err) {
  if (tpl__grid_make((uint32_t)lr->n_ranks, lr->tensor_parallel_shards,
                     lr->pipeline_parallel_stages, NULL, g) != 0 ||
      g->dp != lr->data_parallel_replicas || lr->n_ranks > UINT32_MAX)
    return tpl__fail(err, TPL_EPEER,
                     "report: %zu ranks for a grid of tp %u x pp %u x dp %u",
                     lr->n_ranks, lr->tensor_parallel_shards,
                     lr->pipeline_parallel_stages, lr->data_parallel_replicas);
  *ntensors = lr->ranks[0]->n_tensor_nbytes;
  for (uint32_t k = 0; k < g->world; k++) {
    const Tpload__RankReport *r = lr->ranks[k];
    struct tpl__pos c = tpl__grid_coord(g, k);
    if (r->rank != k || r->replica != c.d || r->stage != c.p || r->shard != c.t)
      return tpl__fail(err, TPL_EPEER,
                       "report: entry %u is rank %u at (d %u, p %u, t %u), "
                       "expected rank %u at (%u, %u, %u)",
                       k, r->rank, r->replica, r->stage, r->shard, k, c.d, c.p,
                       c.t);
    if (r->n_tensor_nbytes != *ntensors || r->n_tensor_xxh3 != *ntensors)
      return tpl__fail(err, TPL_EPEER,
                       "report: rank %u reports %zu tensors (%zu checksums), "
                       "rank 0 %zu",
                       k, r->n_tensor_nbytes, r->n_tensor_xxh3, *ntensors);
  }
  return 0;
}

/* Under an expert-parallel group spanning the replicas (--ep-size T x
 * D) an expert's tensor is held by one replica's rank only, so replicas
 * compare only the rest: tensor i of `job` is skipped when it is one
 * expert's; without a job (a decoded report) when exactly one of the two
 * ranks holds it. */
static int not_replicated(const struct tpl__grid *g, const struct tpl__job *job,
                          const Tpload__RankReport *r,
                          const Tpload__RankReport *base, size_t i) {
  if (g->ep <= g->tp) return 0;
  if (job != NULL) return job->tensors[i].ep == TPL_EP_WHOLE;
  return (r->tensor_nbytes[i] == 0) != (base->tensor_nbytes[i] == 0);
}

/* Replica d's rank `r` against replica 0's rank `base` at the same
 * (p, t): the same bytes and checksums for every tensor both hold
 * (not_replicated; named from `job` when there is one). */
static int same_as_base(const struct tpl__grid *g, const Tpload__RankReport *r,
                        const Tpload__RankReport *base,
                        const struct tpl__job *job, struct tpl__error *err) {
  for (size_t i = 0; i < r->n_tensor_nbytes; i++) {
    char name[32];
    if ((r->tensor_nbytes[i] == base->tensor_nbytes[i] &&
         r->tensor_xxh3[i] == base->tensor_xxh3[i]) ||
        not_replicated(g, job, r, base, i))
      continue;
    snprintf(name, sizeof(name), "#%zu", i);
    return tpl__fail(err, TPL_EMISMATCH,
                     "replicas disagree: rank %u (d %u, p %u, t %u) tensor "
                     "'%s': %llu bytes, xxh3 %016llx; replica 0's rank %u: "
                     "%llu bytes, xxh3 %016llx",
                     r->rank, r->replica, r->stage, r->shard,
                     job != NULL ? job->tensors[i].name : name,
                     (unsigned long long)r->tensor_nbytes[i],
                     (unsigned long long)r->tensor_xxh3[i], base->rank,
                     (unsigned long long)base->tensor_nbytes[i],
                     (unsigned long long)base->tensor_xxh3[i]);
  }
  return 0;
}

/* Every replica's (p, t) rank holds what replica 0's does, experts
 * aside when the expert-parallel group spans the replicas (the report's
 * shape checked).  Returns 0 or TPL_EMISMATCH naming the first rank and
 * tensor that differ. */
static int check_replicas(const Tpload__LoadReport *lr,
                          const struct tpl__grid *g, const struct tpl__job *job,
                          struct tpl__error *err) {
  uint32_t cell = g->tp * g->pp;
  int rc = 0;
  for (uint32_t k = cell; rc == 0 && k < g->world; k++)
    rc = same_as_base(g, lr->ranks[k], lr->ranks[k % cell], job, err);
  return rc;
}

/* The gathered report's shape, against the job's: then the replicas. */
static int check_gathered(const Tpload__LoadReport *lr,
                          const struct tpl__job *job, struct tpl__error *err) {
  struct tpl__grid g;
  size_t n;
  int rc = check_shape(lr, &g, &n, err);
  if (rc == 0 && n != job->ntensors)
    rc = tpl__fail(err, TPL_EPEER, "report: %zu tensors, the job %zu", n,
                   job->ntensors);
  g.ep = job->grid.ep;
  return rc != 0 ? rc : check_replicas(lr, &g, job, err);
}

int tpl__load_report_pack(const struct tpl__job *job, uint8_t *const *ranks,
                          const size_t *lens, double seconds,
                          uint64_t bytes_read,
                          const struct tpl__md5_summary *md5, uint8_t **buf,
                          size_t *len, struct tpl__error *err) {
  Tpload__LoadReport lr = TPLOAD__LOAD_REPORT__INIT;
  Tpload__Md5Check mc = TPLOAD__MD5_CHECK__INIT;
  uint32_t world = job->grid.world;
  Tpload__RankReport **rr = calloc(world, sizeof(*rr));
  int rc = 0;
  if (rr == NULL) return tpl__oom(err);
  for (uint32_t i = 0; i < world && rc == 0; i++) {
    rr[i] = tpload__rank_report__unpack(NULL, lens[i], ranks[i]);
    if (rr[i] == NULL)
      rc = tpl__fail(err, TPL_EPEER, "rank %u sent a malformed report", i);
    else
      lr.bytes_delivered += rr[i]->bytes;
  }
  lr.model = job->model;
  lr.tensor_parallel_shards = job->grid.tp;
  lr.pipeline_parallel_stages = job->grid.pp;
  lr.data_parallel_replicas = job->grid.dp;
  lr.expert_parallel_size = job->grid.ep;
  lr.experts = job->experts;
  lr.bias_scaling = job->bias_family == TPL_BIASF_MLC;
  lr.bias_family = (uint32_t)job->bias_family;
  lr.quantization = (char *)job->quant.scheme_name; /* only read */
  lr.quant_method = (char *)job->quant.method;
  lr.approximate_tensors = job->approximate;
  lr.read = (char *)(job->read_local ? "local" : "mpi"); /* only read */
  lr.read_auto = job->read_auto != 0;
  lr.n_weight_block_size = 2;
  lr.weight_block_size = (uint64_t *)job->quant.block;
  lr.seconds = seconds;
  lr.bytes_read = bytes_read;
  lr.n_ranks = world;
  lr.ranks = rr;
  if (md5 != NULL) {
    mc.n_files = md5->nfiles;
    mc.files = (char **)md5->files; /* only read by the packing */
    mc.bytes = md5->bytes;
    mc.seconds = md5->seconds;
    lr.md5 = &mc;
  }
  if (rc == 0) rc = check_gathered(&lr, job, err);
  if (rc == 0 && pack_message(&lr.base, buf, len) != 0) rc = tpl__oom(err);
  for (uint32_t i = 0; i < world; i++)
    if (rr[i] != NULL) tpload__rank_report__free_unpacked(rr[i], NULL);
  free(rr);
  return rc;
}

/* Frees the fields of `m` this version does not know (unpacked with the
 * default allocator): protobuf-c keeps a known field number with the
 * wrong wire type as unknown and would pack it back, which would not
 * decode again. */
static void drop_unknown(ProtobufCMessage *m) {
  if (m == NULL) return;
  for (unsigned k = 0; k < m->n_unknown_fields; k++)
    free(m->unknown_fields[k].data);
  free(m->unknown_fields);
  m->unknown_fields = NULL;
  m->n_unknown_fields = 0;
}

/* The report without every rank's tensor arrays (protobuf-c frees a
 * repeated number field by its pointer alone, so their counts can go)
 * and without unknown fields. */
int tpl__report_summary(const uint8_t *packed, size_t len, uint8_t **out,
                        size_t *out_len) {
  Tpload__LoadReport *m = tpload__load_report__unpack(NULL, len, packed);
  int rc;
  if (m == NULL) return TPL_EPEER;
  drop_unknown(&m->base);
  drop_unknown(m->md5 != NULL ? &m->md5->base : NULL);
  for (size_t r = 0; r < m->n_ranks; r++) {
    Tpload__RankReport *rr = m->ranks[r];
    rr->n_tensor_nbytes = rr->n_tensor_xxh3 = 0;
    drop_unknown(&rr->base);
    drop_unknown(rr->times != NULL ? &rr->times->base : NULL);
    for (size_t k = 0; k < rr->n_reads; k++)
      drop_unknown(&rr->reads[k]->base);
  }
  rc = pack_message(&m->base, out, out_len);
  tpload__load_report__free_unpacked(m, NULL);
  return rc;
}

/* --- decoding --- */

static struct tpl__phase_times phase_times(const Tpload__PhaseTimes *t) {
  struct tpl__phase_times p = {0};
  if (t != NULL)
    p = (struct tpl__phase_times){t->read,  t->pack,     t->send, t->receive,
                                  t->scale, t->allocate, t->hash};
  return p;
}

/* The rank's strings are UTF-8 and its times finite, as its JSON form
 * needs. */
static int check_values(const Tpload__RankReport *m, struct tpl__error *err) {
  const Tpload__PhaseTimes *t = m->times;
  int ok = tpl__json_utf8(m->host) && isfinite(m->seconds) &&
           isfinite(m->cpu_user_seconds) && isfinite(m->cpu_sys_seconds);
  for (size_t k = 0; ok && k < m->n_reads; k++)
    ok = tpl__json_utf8(m->reads[k]->file) && tpl__json_utf8(m->reads[k]->mode);
  if (ok && t != NULL)
    ok = isfinite(t->read + t->pack + t->send + t->receive + t->scale +
                  t->allocate + t->hash);
  return ok ? 0
            : tpl__fail(err, TPL_EPEER,
                        "report: rank %u: a host or file name that is not "
                        "UTF-8, or a time that is not a number",
                        m->rank);
}

static int decode_rank(const Tpload__RankReport *m, struct tpl__rank_report *r,
                       struct tpl__error *err) {
  int rc = check_values(m, err);
  if (rc != 0) return rc;
  r->rank = m->rank;
  r->pos = (struct tpl__pos){m->replica, m->stage, m->shard};
  r->host = m->host;
  r->pid = m->pid;
  r->tensor_count = m->tensor_count;
  r->bytes = m->bytes;
  r->peak_rss = m->peak_rss_bytes;
  r->bytes_sent = m->bytes_sent;
  r->bytes_read = m->bytes_read;
  r->gets = m->gets;
  r->cpu_user = m->cpu_user_seconds;
  r->cpu_sys = m->cpu_sys_seconds;
  r->bytes_in_remote = m->bytes_in_remote;
  r->bytes_out_remote = m->bytes_out_remote;
  r->seconds = m->seconds;
  r->times = phase_times(m->times);
  r->reads = calloc(m->n_reads + 1, sizeof(*r->reads));
  if (r->reads == NULL) return tpl__oom(err);
  r->nreads = m->n_reads;
  for (size_t k = 0; k < m->n_reads; k++)
    r->reads[k] = (struct tpl__file_read){m->reads[k]->file, m->reads[k]->mode,
                                          m->reads[k]->align};
  return 0;
}

/* infos[i * world + r] from every rank's arrays. */
static int decode_infos(const Tpload__LoadReport *lr, struct tpl__report *rep,
                        struct tpl__error *err) {
  uint32_t world = rep->grid.world;
  if (rep->ntensors == 0) return 0;
  if (rep->ntensors > SIZE_MAX / sizeof(*rep->infos) / world)
    return tpl__oom(err);
  rep->infos = calloc(rep->ntensors * world, sizeof(*rep->infos));
  if (rep->infos == NULL) return tpl__oom(err);
  for (uint32_t r = 0; r < world; r++)
    for (size_t i = 0; i < rep->ntensors; i++)
      rep->infos[i * world + r] = (struct tpl__rank_info){
          lr->ranks[r]->tensor_nbytes[i], lr->ranks[r]->tensor_xxh3[i]};
  return 0;
}

/* --verify-md5's pass, when the report has one: names UTF-8, its time
 * a number. */
static int decode_md5(const Tpload__Md5Check *m, struct tpl__report *rep,
                      struct tpl__error *err) {
  int ok = isfinite(m->seconds);
  for (size_t k = 0; ok && k < m->n_files; k++)
    ok = tpl__json_utf8(m->files[k]);
  if (!ok)
    return tpl__fail(err, TPL_EPEER,
                     "report: md5: a file name that is not UTF-8, or a time "
                     "that is not a number");
  rep->has_md5 = 1;
  rep->md5_files = (const char *const *)m->files;
  rep->md5_nfiles = m->n_files;
  rep->md5_bytes = m->bytes;
  rep->md5_seconds = m->seconds;
  return 0;
}

/* --ep: the group is the TP group or every replica's (T x D), and every
 * rank of it holds an expert (experts.h); 0 and 0 without --ep. */
static int decode_ep(const Tpload__LoadReport *lr, struct tpl__report *rep,
                     struct tpl__error *err) {
  uint32_t size = lr->expert_parallel_size;
  if ((size == 0 && lr->experts != 0) ||
      (size != 0 && (tpl__grid_set_ep(&rep->grid, 1, size, NULL) != 0 ||
                     lr->experts < size)))
    return tpl__fail(err, TPL_EPEER,
                     "report: an expert-parallel group of %u ranks with %u "
                     "experts, for tp %u x dp %u",
                     size, lr->experts, rep->grid.tp, rep->grid.dp);
  rep->grid.ep = size;
  rep->experts = lr->experts;
  return 0;
}

/* The model's quantization (a report without one: none). */
static int decode_quant(const Tpload__LoadReport *lr, struct tpl__quant_info *q,
                        struct tpl__error *err) {
  tpl__quant_info_init(q);
  if (!tpl__json_utf8(lr->quantization) || !tpl__json_utf8(lr->quant_method) ||
      (lr->n_weight_block_size != 0 && lr->n_weight_block_size != 2))
    return tpl__fail(err, TPL_EPEER,
                     "report: a quantization that is not UTF-8, or a block "
                     "size that is not two numbers");
  snprintf(q->scheme_name, sizeof(q->scheme_name), "%s", lr->quantization);
  snprintf(q->method, sizeof(q->method), "%s", lr->quant_method);
  if (lr->n_weight_block_size == 2)
    memcpy(q->block, lr->weight_block_size, sizeof(q->block));
  return 0;
}

/* The report's bias policy (enum tpl__bias_family).  A daemon from
 * before the policies sent bias_scaling alone (true: mlc's scale; false:
 * --no-bias-scaling, every bias whole), and its missing bias_family
 * reads as 0, mlc; a newer one sends bias_scaling true exactly with mlc,
 * so mlc without scaling is such an old report's whole.  An unknown
 * family reads as mlc. */
static int decode_bias_family(const Tpload__LoadReport *lr) {
  if (lr->bias_family >= TPL_BIASF_COUNT) return TPL_BIASF_MLC;
  if (lr->bias_family == TPL_BIASF_MLC && !lr->bias_scaling)
    return TPL_BIASF_WHOLE;
  return (int)lr->bias_family;
}

/* Who read the files, as the report says it: "mpi" or "local", else
 * NULL (a report from before --read auto, or a word it never writes). */
static const char *read_by(const char *read) {
  if (read != NULL && (strcmp(read, "mpi") == 0 || strcmp(read, "local") == 0))
    return read;
  return NULL;
}

static int decode_report(const Tpload__LoadReport *lr, struct tpl__report *rep,
                         struct tpl__error *err) {
  int rc = check_shape(lr, &rep->grid, &rep->ntensors, err);
  if (rc == 0 && (!tpl__json_utf8(lr->model) || !isfinite(lr->seconds)))
    rc = tpl__fail(err, TPL_EPEER,
                   "report: a model name that is not UTF-8, or a time that "
                   "is not a number");
  if (rc == 0) rc = decode_ep(lr, rep, err);
  rep->model = lr->model;
  rep->bias_scaling = lr->bias_scaling;
  rep->bias_family = decode_bias_family(lr);
  if (rc == 0) rc = decode_quant(lr, &rep->quant, err);
  rep->seconds = lr->seconds;
  rep->bytes_read = lr->bytes_read;
  rep->bytes_delivered = lr->bytes_delivered;
  rep->approximate = lr->approximate_tensors;
  rep->read = read_by(lr->read);
  rep->read_auto = lr->read_auto;
  if (rc == 0) {
    rep->ranks = calloc(rep->grid.world, sizeof(*rep->ranks));
    if (rep->ranks == NULL) rc = tpl__oom(err);
  }
  for (uint32_t r = 0; rc == 0 && r < rep->grid.world; r++)
    rc = decode_rank(lr->ranks[r], &rep->ranks[r], err);
  if (rc == 0) rc = decode_infos(lr, rep, err);
  if (rc == 0 && lr->md5 != NULL) rc = decode_md5(lr->md5, rep, err);
  if (rc == 0) rep->agree = check_replicas(lr, &rep->grid, NULL, NULL);
  return rc;
}

int tpl__report_decode(const uint8_t *packed, size_t len,
                       struct tpl__report **out, struct tpl__error *err) {
  Tpload__LoadReport *lr = tpload__load_report__unpack(NULL, len, packed);
  struct tpl__report *rep;
  int rc;
  if (lr == NULL)
    return tpl__fail(err, TPL_EPEER, "report: %zu bytes that do not decode",
                     len);
  rep = calloc(1, sizeof(*rep));
  if (rep == NULL) {
    tpload__load_report__free_unpacked(lr, NULL);
    return tpl__oom(err);
  }
  rep->msg = lr;
  rc = lr->n_ranks == 0 ? tpl__fail(err, TPL_EPEER, "report: no ranks")
                        : decode_report(lr, rep, err);
  if (rc != 0) {
    tpl__report_free(rep);
    return rc;
  }
  *out = rep;
  return 0;
}

void tpl__report_free(struct tpl__report *r) {
  if (r == NULL) return;
  for (uint32_t k = 0; r->ranks != NULL && k < r->grid.world; k++)
    free(r->ranks[k].reads);
  free(r->ranks);
  free(r->infos);
  if (r->msg != NULL) tpload__load_report__free_unpacked(r->msg, NULL);
  free(r);
}

/* --- JSON --- */

/* A duration in the JSON form: seconds rounded to the microsecond (the
 * clock's honest resolution here; printed short with TPL_JSON_REPORT). */
static double usec(double s) {
  double r = round(s * 1e6) / 1e6;
  return isfinite(r) ? r : s; /* s * 1e6 overflows: s is no duration */
}

static json_t *phases_json(const struct tpl__phase_times *t) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "read", usec(t->read),
                   "pack", usec(t->pack), "send", usec(t->send), "receive",
                   usec(t->receive), "scale", usec(t->scale), "allocate",
                   usec(t->allocate), "hash", usec(t->hash));
}

static json_t *reads_json(const struct tpl__rank_report *r) {
  json_t *a = json_array();
  for (size_t k = 0; k < r->nreads; k++)
    json_array_append_new(
        a, json_pack("{s:s, s:s, s:I}", "file", r->reads[k].file, "mode",
                     r->reads[k].mode, "align", (json_int_t)r->reads[k].align));
  return a;
}

static json_t *rank_json(const struct tpl__rank_report *r) {
  json_t *o = json_pack(
      "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "rank",
      (json_int_t)r->rank, "replica", (json_int_t)r->pos.d, "stage",
      (json_int_t)r->pos.p, "shard", (json_int_t)r->pos.t, "host", r->host,
      "pid", (json_int_t)r->pid, "bytes", (json_int_t)r->bytes, "tensor_count",
      (json_int_t)r->tensor_count, "peak_rss_bytes", (json_int_t)r->peak_rss,
      "bytes_sent", (json_int_t)r->bytes_sent, "seconds", usec(r->seconds),
      "phases", phases_json(&r->times));
  json_object_set_new(o, "bytes_read", json_integer((json_int_t)r->bytes_read));
  json_object_set_new(o, "gets", json_integer((json_int_t)r->gets));
  json_object_set_new(o, "cpu_user_seconds", json_real(usec(r->cpu_user)));
  json_object_set_new(o, "cpu_sys_seconds", json_real(usec(r->cpu_sys)));
  json_object_set_new(o, "reads", reads_json(r));
  return o;
}

/* --- nodes --- */

/* The rank read its checkpoint bytes over HTTP (its node's link). */
static int reads_http(const struct tpl__rank_report *r) {
  for (size_t k = 0; k < r->nreads; k++)
    if (strcmp(r->reads[k].mode, "http") == 0) return 1;
  return 0;
}

/* The entry of `host` among the n in `nodes`, added when missing. */
static struct tpl__node_bytes *node_entry(struct tpl__node_bytes *nodes,
                                          size_t *n, const char *host) {
  for (size_t k = 0; k < *n; k++)
    if (strcmp(nodes[k].host, host) == 0) return &nodes[k];
  nodes[*n] = (struct tpl__node_bytes){host, 0, 0, 0};
  return &nodes[(*n)++];
}

int tpl__report_nodes(const struct tpl__report *r, struct tpl__node_bytes **out,
                      size_t *n) {
  struct tpl__node_bytes *nodes = calloc(r->grid.world, sizeof(*nodes));
  if (nodes == NULL) return -ENOMEM;
  *n = 0;
  for (uint32_t k = 0; k < r->grid.world; k++) {
    const struct tpl__rank_report *rk = &r->ranks[k];
    struct tpl__node_bytes *nd = node_entry(nodes, n, rk->host);
    nd->nranks++;
    nd->bytes_in += rk->bytes_in_remote + (reads_http(rk) ? rk->bytes_read : 0);
    nd->bytes_out += rk->bytes_out_remote;
  }
  *out = nodes;
  return 0;
}

/* nodes[] {host, ranks, bytes_in, bytes_out}; NULL on ENOMEM. */
static json_t *nodes_json(const struct tpl__report *r) {
  struct tpl__node_bytes *nodes;
  json_t *a;
  size_t n;
  if (tpl__report_nodes(r, &nodes, &n) != 0) return NULL;
  a = json_array();
  for (size_t i = 0; a != NULL && i < n; i++) {
    json_t *ranks = json_array();
    for (uint32_t k = 0; k < r->grid.world; k++)
      if (strcmp(r->ranks[k].host, nodes[i].host) == 0)
        json_array_append_new(ranks, json_integer(k));
    json_array_append_new(
        a, json_pack("{s:s, s:o, s:I, s:I}", "host", nodes[i].host, "ranks",
                     ranks, "bytes_in", (json_int_t)nodes[i].bytes_in,
                     "bytes_out", (json_int_t)nodes[i].bytes_out));
  }
  free(nodes);
  return a;
}

/* --verify-md5's pass: {verified: [file names], bytes, seconds}. */
static json_t *md5_json(const struct tpl__report *r) {
  json_t *files = json_array();
  for (size_t i = 0; i < r->md5_nfiles; i++)
    json_array_append_new(files, json_string(r->md5_files[i]));
  return json_pack("{s:o, s:I, s:f}", "verified", files, "bytes",
                   (json_int_t)r->md5_bytes, "seconds", usec(r->md5_seconds));
}

/* Every tensor of `job` as shard-info.json has it, with its holders. */
static json_t *params_json(const struct tpl__report *r,
                           const struct tpl__job *job) {
  json_t *a = json_array();
  for (size_t i = 0; a != NULL && i < job->ntensors; i++)
    if (json_array_append_new(
            a, tpl__shardinfo_param(job, i, &r->infos[i * r->grid.world])) !=
        0) {
      json_decref(a);
      a = NULL;
    }
  return a;
}

/* The report describes `job`'s tensors on `job`'s grid. */
static int matches(const struct tpl__report *r, const struct tpl__job *job) {
  return r->infos != NULL && r->ntensors == job->ntensors &&
         r->grid.tp == job->grid.tp && r->grid.pp == job->grid.pp &&
         r->grid.world == job->grid.world;
}

json_t *tpl__report_json(const struct tpl__report *r,
                         const struct tpl__job *job) {
  json_t *ranks, *o;
  if (job != NULL && !matches(r, job)) return NULL;
  ranks = json_array();
  o = json_pack("{s:s, s:I, s:I, s:I, s:b, s:b, s:f, s:I, s:I, s:o}", "model",
                r->model, "tensor_parallel_shards", (json_int_t)r->grid.tp,
                "pipeline_parallel_stages", (json_int_t)r->grid.pp,
                "data_parallel_replicas", (json_int_t)r->grid.dp,
                "replicas_agree", r->agree == 0, "bias_scaling",
                r->bias_scaling, "seconds", usec(r->seconds), "bytes_read",
                (json_int_t)r->bytes_read, "bytes_delivered",
                (json_int_t)r->bytes_delivered, "ranks", ranks);
  for (uint32_t k = 0; o != NULL && k < r->grid.world; k++)
    json_array_append_new(ranks, rank_json(&r->ranks[k]));
  if (o != NULL) {
    json_object_set_new(o, "bias_policy",
                        json_string(tpl__bias_family_name(r->bias_family)));
    json_object_set_new(o, "quant", tpl__quant_json(&r->quant));
  }
  if (o != NULL && json_object_set_new(o, "nodes", nodes_json(r)) != 0) {
    json_decref(o);
    return NULL;
  }
  if (o != NULL && r->read != NULL)
    json_object_set_new(
        o, "read",
        json_pack("{s:s, s:b}", "by", r->read, "auto", r->read_auto));
  if (o != NULL && r->has_md5) json_object_set_new(o, "md5", md5_json(r));
  if (o != NULL && r->approximate > 0)
    json_object_set_new(o, "approximate",
                        json_pack("{s:I, s:s}", "tensors",
                                  (json_int_t)r->approximate, "max_error",
                                  "1 ulp"));
  if (o != NULL && r->grid.ep > 0 &&
      json_object_set_new(o, "expert_parallel",
                          tpl__shardinfo_ep(&r->grid, r->experts)) != 0) {
    json_decref(o);
    return NULL;
  }
  if (o != NULL && job != NULL &&
      json_object_set_new(o, "params", params_json(r, job)) != 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

void tpl__report_grid_line(const struct tpl__report *r, char *buf,
                           size_t size) {
  const struct tpl__grid *g = &r->grid;
  int n = snprintf(buf, size,
                   "grid: tp %u x pp %u x dp %u, rank = (d*%u + p)*%u + t; "
                   "replicas agree: %s",
                   g->tp, g->pp, g->dp, g->pp, g->tp,
                   g->dp == 1      ? "yes (one replica)"
                   : r->agree == 0 ? "yes"
                                   : "NO");
  if (g->ep > 0 && n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "; ep %u (%s), %u experts", g->ep,
             tpl__grid_ep_what(g), r->experts);
}
