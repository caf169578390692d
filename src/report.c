/* report.c - protobuf encodings of the job table, the per-rank reports and
 * the job's LoadReport, and the LoadReport's JSON form.  Each RankReport
 * says where its rank sits in the TP x PP x DP grid (replica, stage,
 * shard); rank 0 checks, from the gathered checksums alone, that every
 * replica holds the same bytes as replica 0 before it accepts the job's
 * report. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "jsonu.h"
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

static void job_tensor_to_msg(const struct tpl__job_tensor *t,
                              Tpload__JobTensor *m) {
  tpload__job_tensor__init(m);
  m->name = t->name;
  m->dtype = (uint32_t)t->dtype;
  m->n_shape = (size_t)t->ndim;
  m->shape = (uint64_t *)t->shape;
  m->encoding = (uint32_t)t->encoding;
  m->kind = (uint32_t)t->kind;
  m->stage_first = t->stages.first;
  m->stage_count = t->stages.count;
  m->file = t->file;
  m->file_offset = t->file_offset;
  if (t->kind == TPL_RULE_SHARD) {
    m->func_name = t->func_name;
    m->dim = t->spec.dim;
    m->n_segs = t->spec.nsegs;
    m->segs = (uint64_t *)t->spec.segs;
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
    if (job->files[f].url != NULL) { /* a remote file */
      fmsgs[f].url = job->files[f].url;
      fmsgs[f].etag = (char *)job->files[f].obj.etag;
      fmsgs[f].last_modified = (char *)job->files[f].obj.modified;
    }
    fptrs[f] = &fmsgs[f];
  }
  table.n_files = job->nfiles;
  table.files = fptrs;
  table.model = job->model;
  table.world = job->grid.world;
  table.tp = job->grid.tp;
  table.pp = job->grid.pp;
  table.bias_scaling = job->bias_scaling;
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
      m->n_segs > TPL_MAX_SEGS || m->kind > TPL_RULE_SCALE_BIAS)
    return tpl__fail(err, TPL_EPEER, "job table: malformed tensor entry");
  t->name = strdup(m->name);
  if (t->name == NULL) return tpl__oom(err);
  t->dtype = (int)m->dtype;
  t->ndim = (int)m->n_shape;
  if (m->n_shape) /* protobuf-c leaves an empty array NULL */
    memcpy(t->shape, m->shape, m->n_shape * sizeof(uint64_t));
  t->encoding = (int)m->encoding;
  t->kind = (int)m->kind;
  t->stages = (struct tpl__stages){m->stage_first, m->stage_count};
  t->file = m->file;
  t->file_offset = m->file_offset;
  t->rule = -1; /* known to rank 0 only */
  if (t->kind == TPL_RULE_SHARD) {
    t->func_name = strdup(m->func_name);
    if (t->func_name == NULL) return tpl__oom(err);
    t->spec.dim = m->dim;
    t->spec.nsegs = m->n_segs;
    if (m->n_segs) memcpy(t->spec.segs, m->segs, m->n_segs * sizeof(uint64_t));
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
  if (tpl__grid_make(table->world, table->tp, table->pp, NULL, &job->grid))
    rc = tpl__fail(err, TPL_EPEER, "job table: malformed grid");
  job->bias_scaling = table->bias_scaling;
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
  if (rc != 0) {
    tpl__job_free(job);
    return rc;
  }
  *out = job;
  return 0;
}

/* --- rank report --- */

/* A ShardInfo message with room for the arrays it points to. */
struct shard_msg {
  Tpload__ShardInfo info;
  uint64_t out_shape[TPL_MAX_DIMS + 1];
  uint64_t segs[TPL_MAX_SEGS];
};

/* Tensor i as rank `rank` holds it.  A tensor of another pipeline stage
 * keeps its place in the list (so reports index tensors as the job does)
 * with no bytes, checksum 0 and offset UINT64_MAX. */
static void fill_shard_info(const struct tpl__job *job, size_t i, uint32_t rank,
                            uint64_t xxh3, struct shard_msg *s) {
  const struct tpl__job_tensor *t = &job->tensors[i];
  Tpload__ShardInfo *m = &s->info;
  int held = tpl__job_holds(job, i, rank);
  tpload__shard_info__init(m);
  m->name = t->name;
  m->dtype = (char *)tpl__dtype_mlc_name(t->dtype);
  m->n_shape = (size_t)t->ndim;
  m->shape = (uint64_t *)t->rank_shape;
  m->dim = -1;
  m->bias_scale = tpl__bias_scale(t->kind, job->grid.tp, job->bias_scaling);
  m->nbytes = held ? t->rank_bytes : 0;
  m->xxh3 = held ? xxh3 : 0;
  m->offset = held ? t->store_offset : UINT64_MAX;
  if (t->kind != TPL_RULE_SHARD) return;
  m->func_name = t->func_name;
  m->n_in_shape = (size_t)t->ndim;
  m->in_shape = (uint64_t *)t->shape;
  m->out_shape = s->out_shape;
  m->n_out_shape = tpl__job_out_shape(job, t, m->out_shape);
  m->dim = t->spec.dim;
  m->segs = s->segs;
  m->n_segs = tpl__job_mlc_segs(job, t, m->segs);
}

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

int tpl__rank_report_pack(const struct tpl__job *job,
                          const struct tpl__store *store,
                          const struct tpl__rank_stats *st, uint8_t **buf,
                          size_t *len) {
  Tpload__RankReport r = TPLOAD__RANK_REPORT__INIT;
  Tpload__PhaseTimes times = TPLOAD__PHASE_TIMES__INIT;
  struct file_reads reads = {0};
  struct tpl__pos c = tpl__grid_coord(&job->grid, st->rank);
  struct shard_msg *msgs = calloc(job->ntensors + 1, sizeof(*msgs));
  Tpload__ShardInfo **ptrs = calloc(job->ntensors + 1, sizeof(*ptrs));
  int rc = -ENOMEM;
  if (msgs == NULL || ptrs == NULL) goto out;
  for (size_t i = 0; i < job->ntensors; i++) {
    fill_shard_info(job, i, st->rank, store->xxh3[i], &msgs[i]);
    ptrs[i] = &msgs[i].info;
    r.bytes += msgs[i].info.nbytes;
  }
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
  r.n_tensors = job->ntensors;
  r.tensors = ptrs;
  r.peak_rss_bytes = st->peak_rss;
  r.bytes_sent = st->bytes_sent;
  r.times = &times;
  r.seconds = st->seconds;
  rc = fill_reads(job, st, &reads, &r);
  if (rc == 0) rc = pack_message(&r.base, buf, len);
out:
  free(reads.msgs);
  free(reads.ptrs);
  free(msgs);
  free(ptrs);
  return rc;
}

/* --- the grid and replica agreement --- */

/* The grid a LoadReport describes; P and D are 0 in reports written
 * before the grid existed, which were one TP group. */
static struct tpl__grid report_grid(const Tpload__LoadReport *lr) {
  struct tpl__grid g = {.tp = lr->tensor_parallel_shards,
                        .pp = lr->pipeline_parallel_stages,
                        .dp = lr->data_parallel_replicas};
  uint64_t cell, world;
  g.pp = g.pp ? g.pp : 1;
  g.dp = g.dp ? g.dp : 1;
  /* world 0 (no ranks match it) when the product does not fit */
  if (tpl__mul_u64(g.tp, g.pp, &cell) != 0 ||
      tpl__mul_u64(cell, g.dp, &world) != 0 || world > UINT32_MAX)
    world = 0;
  g.world = (uint32_t)world;
  return g;
}

/* Rank k of the report is global rank k at its (d, p, t). */
static int check_coords(const Tpload__LoadReport *lr, const struct tpl__grid *g,
                        struct tpl__error *err) {
  if (g->world == 0 || g->world != lr->n_ranks)
    return tpl__fail(err, TPL_EPEER,
                     "report: %zu ranks for a grid of tp %u x pp %u x dp %u",
                     lr->n_ranks, g->tp, g->pp, g->dp);
  for (uint32_t k = 0; k < g->world; k++) {
    const Tpload__RankReport *r = lr->ranks[k];
    struct tpl__pos c = tpl__grid_coord(g, k);
    if (r->rank != k || r->replica != c.d || r->stage != c.p || r->shard != c.t)
      return tpl__fail(err, TPL_EPEER,
                       "report: entry %u is rank %u at (d %u, p %u, t %u), "
                       "expected rank %u at (%u, %u, %u)",
                       k, r->rank, r->replica, r->stage, r->shard, k, c.d, c.p,
                       c.t);
  }
  return 0;
}

/* Replica d's rank `r` against replica 0's rank `base` at the same
 * (p, t): the same tensors with the same bytes and checksums. */
static int same_as_base(const Tpload__RankReport *r,
                        const Tpload__RankReport *base,
                        struct tpl__error *err) {
  if (r->n_tensors != base->n_tensors)
    return tpl__fail(err, TPL_EMISMATCH,
                     "replicas disagree: rank %u (d %u, p %u, t %u) reports "
                     "%zu tensors, replica 0's rank %u %zu",
                     r->rank, r->replica, r->stage, r->shard, r->n_tensors,
                     base->rank, base->n_tensors);
  for (size_t i = 0; i < r->n_tensors; i++) {
    const Tpload__ShardInfo *a = r->tensors[i], *b = base->tensors[i];
    if (strcmp(a->name, b->name) != 0 || a->nbytes != b->nbytes ||
        a->xxh3 != b->xxh3)
      return tpl__fail(err, TPL_EMISMATCH,
                       "replicas disagree: rank %u (d %u, p %u, t %u) tensor "
                       "'%s': %llu bytes, xxh3 %016llx; replica 0's rank %u "
                       "holds '%s': %llu bytes, xxh3 %016llx",
                       r->rank, r->replica, r->stage, r->shard, a->name,
                       (unsigned long long)a->nbytes,
                       (unsigned long long)a->xxh3, base->rank, b->name,
                       (unsigned long long)b->nbytes,
                       (unsigned long long)b->xxh3);
  }
  return 0;
}

/* Every replica's (p, t) rank holds what replica 0's does.  Returns 0,
 * TPL_EMISMATCH naming the first rank and tensor that differ, or
 * TPL_EPEER when the report does not describe its grid. */
static int check_replicas(const Tpload__LoadReport *lr,
                          struct tpl__error *err) {
  struct tpl__grid g = report_grid(lr);
  uint32_t cell;
  int rc = check_coords(lr, &g, err);
  cell = g.tp * g.pp;
  for (uint32_t k = cell; rc == 0 && k < g.world; k++)
    rc = same_as_base(lr->ranks[k], lr->ranks[k % cell], err);
  return rc;
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
  lr.bias_scaling = job->bias_scaling;
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
  if (rc == 0) rc = check_replicas(&lr, err);
  if (rc == 0 && pack_message(&lr.base, buf, len) != 0) rc = tpl__oom(err);
  for (uint32_t i = 0; i < world; i++)
    if (rr[i] != NULL) tpload__rank_report__free_unpacked(rr[i], NULL);
  free(rr);
  return rc;
}

int tpl__report_rank_infos(const uint8_t *packed, size_t len, uint32_t world,
                           size_t ntensors, struct tpl__rank_info *out) {
  Tpload__LoadReport *lr = tpload__load_report__unpack(NULL, len, packed);
  int rc = 0;
  if (lr == NULL) return TPL_EPEER;
  if (lr->n_ranks != world) rc = TPL_EPEER;
  for (size_t r = 0; rc == 0 && r < world; r++) {
    const Tpload__RankReport *rr = lr->ranks[r];
    if (rr->rank >= world || rr->n_tensors != ntensors) {
      rc = TPL_EPEER;
      break;
    }
    for (size_t i = 0; i < ntensors; i++) {
      out[i * world + rr->rank].nbytes = rr->tensors[i]->nbytes;
      out[i * world + rr->rank].xxh3 = rr->tensors[i]->xxh3;
    }
  }
  tpload__load_report__free_unpacked(lr, NULL);
  return rc;
}

/* --- JSON --- */

static json_t *shard_info_json(const Tpload__ShardInfo *s) {
  char hex[17];
  json_t *o = json_pack("{s:s, s:s, s:o}", "name", s->name, "dtype", s->dtype,
                        "shape", tpl__json_u64_array(s->shape, s->n_shape));
  snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)s->xxh3);
  if (s->func_name[0] != '\0')
    json_object_update_new(
        o, json_pack(
               "{s:s, s:o, s:o, s:I, s:o}", "func_name", s->func_name,
               "in_shape", tpl__json_u64_array(s->in_shape, s->n_in_shape),
               "out_shape", tpl__json_u64_array(s->out_shape, s->n_out_shape),
               "dim", (json_int_t)s->dim, "segs",
               tpl__json_u64_array(s->segs, s->n_segs)));
  json_object_update_new(o, json_pack("{s:f, s:I, s:I, s:s}", "bias_scale",
                                      s->bias_scale, "nbytes",
                                      (json_int_t)s->nbytes, "offset",
                                      (json_int_t)s->offset, "xxh3", hex));
  return o;
}

/* A duration in the JSON form: seconds rounded to the microsecond (the
 * clock's honest resolution here; printed short with TPL_JSON_REPORT). */
static double usec(double s) {
  return round(s * 1e6) / 1e6;
}

/* A report entry for a tensor of another pipeline stage (fill_shard_info)
 * is not shown. */
static int held(const Tpload__ShardInfo *s) {
  return s->offset != UINT64_MAX;
}

static json_t *held_tensors_json(const Tpload__RankReport *r) {
  json_t *ts = json_array();
  for (size_t i = 0; i < r->n_tensors; i++)
    if (held(r->tensors[i]))
      json_array_append_new(ts, shard_info_json(r->tensors[i]));
  return ts;
}

static size_t held_count(const Tpload__RankReport *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->n_tensors; i++)
    n += (size_t)held(r->tensors[i]);
  return n;
}

static json_t *phases_json(const Tpload__PhaseTimes *t) {
  if (t == NULL) return json_object();
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "read", usec(t->read),
                   "pack", usec(t->pack), "send", usec(t->send), "receive",
                   usec(t->receive), "scale", usec(t->scale), "allocate",
                   usec(t->allocate), "hash", usec(t->hash));
}

static json_t *reads_json(const Tpload__RankReport *r) {
  json_t *a = json_array();
  for (size_t k = 0; k < r->n_reads; k++)
    json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "file",
                                       r->reads[k]->file, "mode",
                                       r->reads[k]->mode, "align",
                                       (json_int_t)r->reads[k]->align));
  return a;
}

static json_t *rank_json(const Tpload__RankReport *r, int with_tensors) {
  json_t *o = json_pack(
      "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "rank",
      (json_int_t)r->rank, "replica", (json_int_t)r->replica, "stage",
      (json_int_t)r->stage, "shard", (json_int_t)r->shard, "host", r->host,
      "pid", (json_int_t)r->pid, "bytes", (json_int_t)r->bytes, "tensor_count",
      (json_int_t)held_count(r), "peak_rss_bytes",
      (json_int_t)r->peak_rss_bytes, "bytes_sent", (json_int_t)r->bytes_sent,
      "seconds", usec(r->seconds), "phases", phases_json(r->times));
  json_object_set_new(o, "reads", reads_json(r));
  if (with_tensors) json_object_set_new(o, "tensors", held_tensors_json(r));
  return o;
}

/* --verify-md5's pass: {verified: [file names], bytes, seconds}. */
static json_t *md5_json(const Tpload__Md5Check *mc) {
  json_t *files = json_array();
  for (size_t i = 0; i < mc->n_files; i++)
    json_array_append_new(files, json_string(mc->files[i]));
  return json_pack("{s:o, s:I, s:f}", "verified", files, "bytes",
                   (json_int_t)mc->bytes, "seconds", usec(mc->seconds));
}

json_t *tpl__report_json(const uint8_t *packed, size_t len, int with_tensors) {
  Tpload__LoadReport *lr = tpload__load_report__unpack(NULL, len, packed);
  struct tpl__grid g;
  json_t *o, *ranks;
  int agree;
  if (lr == NULL) return NULL;
  ranks = json_array();
  g = report_grid(lr);
  agree = check_replicas(lr, NULL);
  o = json_pack("{s:s, s:I, s:I, s:I}", "model", lr->model,
                "tensor_parallel_shards", (json_int_t)g.tp,
                "pipeline_parallel_stages", (json_int_t)g.pp,
                "data_parallel_replicas", (json_int_t)g.dp);
  /* Recomputed from the checksums this report carries; absent when the
   * report does not describe its grid (one written before the grid). */
  if (agree != TPL_EPEER)
    json_object_set_new(o, "replicas_agree", json_boolean(agree == 0));
  for (size_t i = 0; i < lr->n_ranks; i++)
    json_array_append_new(ranks, rank_json(lr->ranks[i], with_tensors));
  json_object_update_new(
      o, json_pack("{s:b, s:f, s:I, s:I, s:o}", "bias_scaling",
                   (int)lr->bias_scaling, "seconds", usec(lr->seconds),
                   "bytes_read", (json_int_t)lr->bytes_read, "bytes_delivered",
                   (json_int_t)lr->bytes_delivered, "ranks", ranks));
  if (lr->md5 != NULL) json_object_set_new(o, "md5", md5_json(lr->md5));
  tpload__load_report__free_unpacked(lr, NULL);
  return o;
}

int tpl__report_grid_line(const json_t *rep, char *buf, size_t size) {
  const json_t *agree = json_object_get(rep, "replicas_agree");
  json_int_t tp, pp, dp;
  if (agree == NULL) return TPL_EPEER;
  tp = json_integer_value(json_object_get(rep, "tensor_parallel_shards"));
  pp = json_integer_value(json_object_get(rep, "pipeline_parallel_stages"));
  dp = json_integer_value(json_object_get(rep, "data_parallel_replicas"));
  snprintf(buf, size,
           "grid: tp %lld x pp %lld x dp %lld, rank = (d*%lld + p)*%lld + t; "
           "replicas agree: %s",
           (long long)tp, (long long)pp, (long long)dp, (long long)pp,
           (long long)tp,
           dp == 1               ? "yes (one replica)"
           : json_is_true(agree) ? "yes"
                                 : "NO");
  return 0;
}
