/* test_report.c - the report encodings (src/report.c): the job table's
 * broadcast round trip and its refusal of junk, each rank's RankReport
 * aggregated into the job's LoadReport, decoded, and rendered as JSON
 * with the job's params (the shard info of DESIGN.md's GQA example: [8, 2]
 * f32, segs [4, 2, 2], N 2), its summary, the per-rank checksums read
 * back for shard-info.json, the bias policy of a report from a daemon
 * that sent none, and the refusals of a malformed or mismatched report. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "report.h"
#include "tap.h"

static struct tpl__job_tensor tensors[2];
static struct tpl__job job;

/* qkv: [8, 2] f32 sharded dim 0 with segs [4, 2, 2]; o.bias: [4] f32
 * scale_bias.  World 2, bias scaling on. */
static void make_job(void) {
  memset(tensors, 0, sizeof(tensors));
  tensors[0].name = "qkv";
  tensors[0].dtype = TPL_DT_F32;
  tensors[0].ndim = 2;
  tensors[0].shape[0] = 8;
  tensors[0].shape[1] = 2;
  tensors[0].kind = TPL_RULE_SHARD;
  tensors[0].func_name = "_shard_qkv";
  tensors[0].spec.nsegs = 3;
  tensors[0].spec.segs[0] = 4;
  tensors[0].spec.segs[1] = 2;
  tensors[0].spec.segs[2] = 2;
  tensors[1].name = "o.bias";
  tensors[1].dtype = TPL_DT_F32;
  tensors[1].ndim = 1;
  tensors[1].shape[0] = 4;
  tensors[1].kind = TPL_RULE_SCALE_BIAS;
  tensors[1].bias = TPL_BIAS_SCALE;
  memset(&job, 0, sizeof(job));
  job.grid = (struct tpl__grid){2, 2, 1, 1, 0};
  job.bias_family = TPL_BIASF_MLC;
  job.model = "M";
  job.plan_source = "preset p";
  tpl__quant_info_init(&job.quant);
  snprintf(job.quant.method, sizeof(job.quant.method), "fp8");
  job.quant.block[0] = 64;
  job.tensors = tensors;
  job.ntensors = 2;
  if (tpl__job_finish(&job, NULL) != 0) abort();
}

/* qkv's k and v segments of one kv head each at N = 2: both ranks hold
 * them (parts 1); the table carries the parts, so a receiver computes
 * the same shard shape (4 / 2 + 2 + 2 rows). */
static void test_job_table_parts_roundtrip(void) {
  uint8_t *buf = NULL;
  size_t len = 0;
  struct tpl__job *out = NULL;
  make_job();
  tensors[0].spec.parts[1] = tensors[0].spec.parts[2] = 1;
  if (tpl__job_finish(&job, NULL) != 0) abort();
  CHECK_EQ_U64(tensors[0].rank_shape[0], 6);
  CHECK_EQ_INT(tpl__job_pack(&job, &buf, &len), 0);
  CHECK_EQ_INT(tpl__job_unpack(buf, len, &out, NULL), 0);
  free(buf);
  if (out == NULL) return;
  CHECK_EQ_U64(out->tensors[0].spec.parts[0], 0);
  CHECK_EQ_U64(out->tensors[0].spec.parts[1], 1);
  CHECK_EQ_U64(out->tensors[0].spec.parts[2], 1);
  CHECK_EQ_U64(out->tensors[0].rank_shape[0], 6);
  CHECK_EQ_U64(out->tensors[1].spec.parts[0], 0);
  tpl__job_free(out);
}

static void test_job_table_roundtrip(void) {
  uint8_t *buf = NULL;
  size_t len = 0;
  struct tpl__job *out = NULL;
  make_job();
  CHECK_EQ_INT(tpl__job_pack(&job, &buf, &len), 0);
  CHECK_EQ_INT(tpl__job_unpack(buf, len, &out, NULL), 0);
  free(buf);
  if (out == NULL) return;
  CHECK_EQ_U64(out->grid.world, 2);
  CHECK_EQ_U64(out->grid.tp, 2);
  CHECK_EQ_INT(out->bias_family, TPL_BIASF_MLC);
  if (out->ntensors == 2) CHECK_EQ_INT(out->tensors[1].bias, TPL_BIAS_SCALE);
  CHECK(strcmp(out->model, "M") == 0);
  CHECK(strcmp(out->plan_source, "preset p") == 0);
  CHECK_EQ_U64(out->ntensors, 2);
  CHECK_EQ_U64(out->store_size, job.store_size);
  for (size_t i = 0; i < 2 && out->ntensors == 2; i++) {
    const struct tpl__job_tensor *a = &tensors[i], *b = &out->tensors[i];
    CHECK(strcmp(a->name, b->name) == 0);
    CHECK_EQ_INT(a->dtype, b->dtype);
    CHECK_EQ_INT(a->ndim, b->ndim);
    CHECK_EQ_U64(a->shape[0], b->shape[0]);
    CHECK_EQ_INT(a->kind, b->kind);
    CHECK_EQ_U64(a->spec.nsegs, b->spec.nsegs);
    CHECK_EQ_U64(a->spec.segs[2], b->spec.segs[2]);
    CHECK_EQ_U64(a->rank_shape[0], b->rank_shape[0]);
    CHECK_EQ_U64(a->rank_bytes, b->rank_bytes);
    CHECK_EQ_U64(a->store_offset, b->store_offset);
  }
  CHECK(out->ntensors == 2 &&
        strcmp(out->tensors[0].func_name, "_shard_qkv") == 0);
  tpl__job_free(out);
}

static void test_job_unpack_refuses_junk(void) {
  static const uint8_t junk[] = {0x22, 0x7f, 0x01}; /* tensor runs off */
  struct tpl__job *out = NULL;
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__job_unpack(junk, sizeof(junk), &out, &err), TPL_EPEER);
  CHECK(out == NULL);
  CHECK_STR_CONTAINS(err.msg, "job table");
}

/* The source table: a job with files carries each tensor's file and
 * offset and each file's path, size and time to the other ranks. */
static struct tpl__job_file two_files[2] = {
    {.path = "a.st", .size = 100, .mtime_ns = 7},
    {.path = "b.st", .size = 64, .mtime_ns = 9}};

static int roundtrip_sources(struct tpl__job **out, struct tpl__error *err) {
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc;
  if (tpl__job_pack(&job, &buf, &len) != 0) return -ENOMEM;
  rc = tpl__job_unpack(buf, len, out, err);
  free(buf);
  return rc;
}

static void make_job_with_files(void) {
  make_job();
  job.files = two_files;
  job.nfiles = 2;
  tensors[0].file = 1;
  tensors[0].file_offset = 0; /* 64 bytes: all of b.st */
  tensors[1].file = 0;
  tensors[1].file_offset = 84; /* 16 bytes: up to a.st's end */
}

static void test_job_table_carries_sources(void) {
  struct tpl__job *out = NULL;
  make_job_with_files();
  CHECK_EQ_INT(roundtrip_sources(&out, NULL), 0);
  if (out == NULL) return;
  CHECK_EQ_U64(out->nfiles, 2);
  CHECK(out->nfiles == 2 && strcmp(out->files[1].path, "b.st") == 0);
  CHECK_EQ_U64(out->files[0].size, 100);
  CHECK_EQ_INT((int)out->files[1].mtime_ns, 9);
  CHECK_EQ_U64(out->tensors[0].file, 1);
  CHECK_EQ_U64(out->tensors[1].file_offset, 84);
  tpl__job_free(out);
}

/* A remote file travels with its URL (the signature included: the other
 * ranks fetch it with --read local) and the validators rank 0 saw. */
static void test_job_table_carries_remote_files(void) {
  struct tpl__job_file remote[2] = {
      {.path = "http://h/a.st?...", .size = 100, .url = "http://h/a.st?sig=1"},
      {.path = "b.st", .size = 64, .mtime_ns = 9}};
  struct tpl__job *out = NULL;
  make_job_with_files();
  snprintf(remote[0].obj.etag, sizeof(remote[0].obj.etag), "\"e1\"");
  snprintf(remote[0].obj.modified, sizeof(remote[0].obj.modified), "Tue");
  job.files = remote;
  CHECK_EQ_INT(roundtrip_sources(&out, NULL), 0);
  job.files = two_files;
  if (out == NULL) return;
  CHECK(out->files[0].url != NULL &&
        strcmp(out->files[0].url, "http://h/a.st?sig=1") == 0);
  CHECK(strcmp(out->files[0].path, "http://h/a.st?...") == 0);
  CHECK(out->files[0].obj.known && out->files[0].obj.size == 100);
  CHECK(strcmp(out->files[0].obj.etag, "\"e1\"") == 0);
  CHECK(strcmp(out->files[0].obj.modified, "Tue") == 0);
  CHECK(out->files[1].url == NULL && !out->files[1].obj.known);
  tpl__job_free(out);
}

static void test_job_table_refuses_a_file_it_lacks(void) {
  struct tpl__job *out = NULL;
  struct tpl__error err = {0};
  make_job_with_files();
  tensors[1].file = 2;
  CHECK_EQ_INT(roundtrip_sources(&out, &err), TPL_EPEER);
  CHECK(out == NULL);
  CHECK_STR_CONTAINS(err.msg, "tensor 'o.bias': no file 2");
}

static void test_job_table_refuses_a_tensor_beyond_its_file(void) {
  struct tpl__job *out = NULL;
  struct tpl__error err = {0};
  make_job_with_files();
  tensors[1].file_offset = 85; /* one byte beyond a.st */
  CHECK_EQ_INT(roundtrip_sources(&out, &err), TPL_EPEER);
  CHECK_STR_CONTAINS(err.msg, "tensor 'o.bias' ends beyond its file");
  tensors[1].file_offset = UINT64_MAX - 3; /* the end overflows */
  CHECK_EQ_INT(roundtrip_sources(&out, &err), TPL_EPEER);
  CHECK_STR_CONTAINS(err.msg, "tensor 'o.bias' ends beyond its file");
  CHECK(out == NULL);
}

/* The report of st->rank: checksums 0x1000 * (i + 1) + rank for tensor
 * i. */
static int pack_stats(const struct tpl__rank_stats *st, uint8_t **buf,
                      size_t *len) {
  uint64_t sums[2] = {0x1000 + st->rank, 0x2000 + st->rank};
  struct tpl__store store = {.fd = -1, .xxh3 = sums, .ntensors = 2};
  return tpl__rank_report_pack(&job, &store, st, buf, len);
}

/* Rank r's report on host "node": CPU seconds 0.5 + r user, `sys`
 * system; 3 + r GETs read its 100 x (r + 1) bytes. */
static int pack_rank_cpu(uint32_t r, double sys, uint8_t **buf, size_t *len) {
  struct tpl__rank_stats st = {.rank = r,
                               .pid = 10 + (int)r,
                               .seconds = 1.0,
                               .cpu_user = 0.5 + r,
                               .cpu_sys = sys,
                               .bytes_read = 100 * (r + 1),
                               .gets = 3 + r};
  snprintf(st.host, sizeof(st.host), "node");
  return pack_stats(&st, buf, len);
}

static int pack_rank(uint32_t r, uint8_t **buf, size_t *len) {
  return pack_rank_cpu(r, 0.25 * (r + 1), buf, len);
}

/* The LoadReport of the two ranks (*buf malloc'd) or -1; `md5` as
 * tpl__load_report_pack takes it. */
static int load_report_md5(const struct tpl__md5_summary *md5, uint8_t **buf,
                           size_t *len) {
  uint8_t *parts[2] = {NULL, NULL};
  size_t lens[2];
  int rc = pack_rank(0, &parts[0], &lens[0]);
  if (rc == 0) rc = pack_rank(1, &parts[1], &lens[1]);
  if (rc == 0)
    rc = tpl__load_report_pack(&job, parts, lens, 1.5, 1234, md5, buf, len,
                               NULL);
  free(parts[0]);
  free(parts[1]);
  return rc;
}

static int load_report(uint8_t **buf, size_t *len) {
  return load_report_md5(NULL, buf, len);
}

static int u64_at(const json_t *a, size_t i, uint64_t want) {
  return json_integer_value(json_array_get(a, i)) == (json_int_t)want;
}

static const char *str(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* params[0] of the JSON with the job: qkv as shard-info.json has it. */
static void check_sharded_param(const json_t *t) {
  const json_t *pre = json_array_get(json_object_get(t, "preprocs"), 0);
  const json_t *out = json_object_get(pre, "out_shape");
  const json_t *segs = json_object_get(t, "segs");
  const json_t *ranks = json_object_get(t, "ranks");
  CHECK(strcmp(str(t, "name"), "qkv") == 0);
  CHECK(strcmp(str(t, "dtype"), "float32") == 0);
  CHECK(strcmp(str(pre, "func_name"), "_shard_qkv") == 0);
  CHECK(u64_at(json_object_get(t, "shape"), 0, 4));
  CHECK(u64_at(json_object_get(pre, "in_shape"), 0, 8));
  CHECK_EQ_U64(json_array_size(out), 3);
  CHECK(u64_at(out, 0, 2) && u64_at(out, 1, 4) && u64_at(out, 2, 2));
  CHECK_EQ_U64(json_integer_value(json_object_get(t, "dim")), 0);
  CHECK_EQ_U64(json_array_size(segs), 3);
  CHECK(u64_at(segs, 0, 2) && u64_at(segs, 1, 1) && u64_at(segs, 2, 1));
  CHECK_EQ_U64(json_array_size(ranks), 2);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(json_array_get(ranks, 0), "nbytes")),
      32);
  CHECK(strcmp(str(json_array_get(ranks, 0), "xxh3"), "0000000000001000") == 0);
  CHECK(strcmp(str(json_array_get(ranks, 1), "xxh3"), "0000000000001001") == 0);
}

static void check_bias_param(const json_t *t) {
  const json_t *r1 = json_array_get(json_object_get(t, "ranks"), 1);
  CHECK_EQ_U64(json_array_size(json_object_get(t, "preprocs")), 0);
  CHECK(json_real_value(json_object_get(t, "bias_scale")) == 0.5);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "nbytes")), 16);
  CHECK(strcmp(str(r1, "xxh3"), "0000000000002001") == 0);
}

/* The JSON of a packed report (NULL when it does not decode). */
static json_t *json_of(const uint8_t *buf, size_t len) {
  struct tpl__report *rep = NULL;
  json_t *o = NULL;
  if (buf != NULL && tpl__report_decode(buf, len, &rep, NULL) == 0)
    o = tpl__report_json(rep, NULL);
  tpl__report_free(rep);
  return o;
}

/* --verify-md5's pass in the report: absent without one; with one,
 * md5 {verified: the names in order, bytes, seconds}, kept by a status
 * summary. */
static void test_load_report_md5(void) {
  static const char *const names[] = {"params_shard_0.bin",
                                      "params_shard_1.bin"};
  struct tpl__md5_summary md5 = {names, 2, 4096, 0.25};
  uint8_t *buf = NULL, *sum = NULL;
  size_t len = 0, slen = 0;
  json_t *o, *m;
  make_job();
  CHECK_EQ_INT(load_report(&buf, &len), 0);
  o = json_of(buf, len);
  REQUIRE(o != NULL);
  CHECK(json_object_get(o, "md5") == NULL);
  json_decref(o);
  free(buf);
  CHECK_EQ_INT(load_report_md5(&md5, &buf, &len), 0);
  CHECK_EQ_INT(buf ? tpl__report_summary(buf, len, &sum, &slen) : -1, 0);
  for (int k = 0; k < 2; k++) {
    o = k == 0 ? json_of(buf, len) : json_of(sum, slen);
    REQUIRE(o != NULL);
    m = json_object_get(o, "md5");
    CHECK_EQ_U64(json_array_size(json_object_get(m, "verified")), 2);
    CHECK(strcmp(json_string_value(
                     json_array_get(json_object_get(m, "verified"), 1)),
                 "params_shard_1.bin") == 0);
    CHECK_EQ_U64(json_integer_value(json_object_get(m, "bytes")), 4096);
    CHECK(json_real_value(json_object_get(m, "seconds")) == 0.25);
    json_decref(o);
  }
  free(sum);
  free(buf);
}

/* nodes[i] of a report's JSON is {host, ranks [r], bytes_in, bytes_out}. */
static int node_is(const json_t *a, size_t i, const char *host, uint32_t r,
                   uint64_t in, uint64_t out) {
  const json_t *nd = json_array_get(a, i);
  const json_t *ranks = json_object_get(nd, "ranks");
  const char *h = json_string_value(json_object_get(nd, "host"));
  return h != NULL && strcmp(h, host) == 0 && json_array_size(ranks) == 1 &&
         u64_at(ranks, 0, r) &&
         json_integer_value(json_object_get(nd, "bytes_in")) ==
             (json_int_t)in &&
         json_integer_value(json_object_get(nd, "bytes_out")) ==
             (json_int_t)out;
}

/* Two ranks on two hosts: each host's bytes in and out are its ranks'
 * counts of what came from and went to the other host, in the JSON's
 * nodes[] and from tpl__report_nodes, through a status summary. */
static void test_load_report_nodes(void) {
  struct tpl__rank_stats st[2] = {
      {.rank = 0, .bytes_out_remote = 700, .bytes_in_remote = 5},
      {.rank = 1, .bytes_in_remote = 600, .bytes_out_remote = 9}};
  uint8_t *parts[2] = {NULL, NULL}, *buf = NULL, *sum = NULL;
  size_t lens[2] = {0, 0}, len = 0, slen = 0, n = 0;
  struct tpl__node_bytes *nodes = NULL;
  struct tpl__report *rep = NULL;
  json_t *o = NULL;
  make_job();
  snprintf(st[0].host, sizeof(st[0].host), "n0");
  snprintf(st[1].host, sizeof(st[1].host), "n1");
  CHECK_EQ_INT(pack_stats(&st[0], &parts[0], &lens[0]), 0);
  CHECK_EQ_INT(pack_stats(&st[1], &parts[1], &lens[1]), 0);
  if (parts[0] != NULL && parts[1] != NULL)
    CHECK_EQ_INT(tpl__load_report_pack(&job, parts, lens, 1.0, 0, NULL, &buf,
                                       &len, NULL),
                 0);
  CHECK_EQ_INT(buf ? tpl__report_summary(buf, len, &sum, &slen) : -1, 0);
  CHECK_EQ_INT(sum ? tpl__report_decode(sum, slen, &rep, NULL) : -1, 0);
  if (rep != NULL) {
    CHECK_EQ_INT(tpl__report_nodes(rep, &nodes, &n), 0);
    CHECK_EQ_U64(n, 2);
    CHECK(n == 2 && nodes[1].nranks == 1 && nodes[1].bytes_in == 600 &&
          nodes[1].bytes_out == 9);
    o = tpl__report_json(rep, NULL);
  }
  CHECK_EQ_U64(json_array_size(json_object_get(o, "nodes")), 2);
  CHECK(node_is(json_object_get(o, "nodes"), 0, "n0", 0, 5, 700));
  CHECK(node_is(json_object_get(o, "nodes"), 1, "n1", 1, 600, 9));
  json_decref(o);
  free(nodes);
  tpl__report_free(rep);
  free(sum);
  free(buf);
  free(parts[0]);
  free(parts[1]);
}

static void check_report_json(const json_t *o) {
  const json_t *r1 = json_array_get(json_object_get(o, "ranks"), 1);
  const json_t *n0 = json_array_get(json_object_get(o, "nodes"), 0);
  CHECK(strcmp(str(o, "model"), "M") == 0);
  CHECK_EQ_U64(json_integer_value(json_object_get(o, "tensor_parallel_shards")),
               2);
  CHECK(json_is_true(json_object_get(o, "bias_scaling")));
  CHECK(strcmp(str(o, "bias_policy"), "mlc") == 0);
  CHECK(strcmp(str(json_object_get(o, "quant"), "quant_method"), "fp8") == 0);
  CHECK_EQ_U64(
      json_integer_value(json_array_get(
          json_object_get(json_object_get(o, "quant"), "weight_block_size"),
          0)),
      64);
  CHECK(json_is_true(json_object_get(o, "replicas_agree")));
  CHECK_EQ_U64(json_integer_value(json_object_get(o, "bytes_read")), 1234);
  CHECK_EQ_U64(json_integer_value(json_object_get(o, "bytes_delivered")),
               2 * (32 + 16));
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "rank")), 1);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "shard")), 1);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "pid")), 11);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "bytes")), 48);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "tensor_count")), 2);
  CHECK(strcmp(str(r1, "host"), "node") == 0);
  CHECK_EQ_U64(json_array_size(json_object_get(o, "nodes")), 1);
  /* both ranks on host "node": one node, nothing crossed a link */
  CHECK(strcmp(str(n0, "host"), "node") == 0);
  CHECK_EQ_U64(json_array_size(json_object_get(n0, "ranks")), 2);
  CHECK_EQ_U64(json_integer_value(json_object_get(n0, "bytes_in")), 0);
  CHECK(json_real_value(json_object_get(r1, "cpu_user_seconds")) == 1.5);
  CHECK(json_real_value(json_object_get(r1, "cpu_sys_seconds")) == 0.5);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "bytes_read")), 200);
  CHECK_EQ_U64(json_integer_value(json_object_get(r1, "gets")), 4);
  CHECK(json_object_get(r1, "tensors") == NULL);
}

/* Every rank's CPU seconds survive the LoadReport, its status summary
 * and decoding; a rank whose CPU time is not a number is refused by
 * name. */
static void test_load_report_cpu(void) {
  uint8_t *parts[2] = {NULL, NULL}, *buf = NULL, *sum = NULL;
  size_t lens[2] = {0, 0}, len = 0, slen = 0;
  struct tpl__report *rep = NULL;
  struct tpl__error err = {0};
  make_job();
  CHECK_EQ_INT(load_report(&buf, &len), 0);
  CHECK_EQ_INT(buf ? tpl__report_summary(buf, len, &sum, &slen) : -1, 0);
  CHECK_EQ_INT(sum ? tpl__report_decode(sum, slen, &rep, &err) : -1, 0);
  if (rep != NULL) {
    CHECK(rep->ranks[0].cpu_user == 0.5 && rep->ranks[0].cpu_sys == 0.25);
    CHECK(rep->ranks[1].cpu_user == 1.5 && rep->ranks[1].cpu_sys == 0.5);
    CHECK_EQ_U64(rep->ranks[1].gets, 4); /* the summary keeps them */
    CHECK_EQ_U64(rep->ranks[1].bytes_read, 200);
  }
  tpl__report_free(rep);
  free(sum);
  free(buf);
  buf = NULL;
  CHECK_EQ_INT(pack_rank(0, &parts[0], &lens[0]), 0);
  CHECK_EQ_INT(pack_rank_cpu(1, NAN, &parts[1], &lens[1]), 0);
  if (parts[0] != NULL && parts[1] != NULL)
    CHECK_EQ_INT(tpl__load_report_pack(&job, parts, lens, 1.0, 0, NULL, &buf,
                                       &len, &err),
                 0);
  CHECK_EQ_INT(buf ? tpl__report_decode(buf, len, &rep, &err) : -1, TPL_EPEER);
  CHECK_STR_CONTAINS(err.msg, "rank 1");
  free(buf);
  free(parts[0]);
  free(parts[1]);
}

/* The decoded report, and its JSON without and with the job. */
static void test_load_report_json(void) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  json_t *o;
  make_job();
  CHECK_EQ_INT(load_report(&buf, &len), 0);
  CHECK_EQ_INT(buf ? tpl__report_decode(buf, len, &rep, NULL) : -1, 0);
  if (rep == NULL) goto out;
  CHECK_EQ_U64(rep->ntensors, 2);
  CHECK_EQ_U64(rep->ranks[1].tensor_count, 2);
  o = tpl__report_json(rep, NULL);
  CHECK(o != NULL && json_object_get(o, "params") == NULL);
  if (o != NULL) check_report_json(o);
  json_decref(o);
  o = tpl__report_json(rep, &job);
  CHECK(o != NULL);
  if (o != NULL) {
    check_report_json(o);
    check_sharded_param(json_array_get(json_object_get(o, "params"), 0));
    check_bias_param(json_array_get(json_object_get(o, "params"), 1));
  }
  json_decref(o);
out:
  tpl__report_free(rep);
  free(buf);
}

/* Decodes a report of the job with --ep group `ep` and `experts`. */
static int decode_ep_report(uint32_t ep, uint32_t experts,
                            struct tpl__report **rep) {
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc;
  make_job();
  job.grid.ep = ep;
  job.experts = experts;
  rc = load_report(&buf, &len);
  if (rc == 0) rc = tpl__report_decode(buf, len, rep, NULL);
  free(buf);
  return rc;
}

/* --ep in the load report: the group and E travel in it, its JSON has
 * vLLM's map (3 experts over 2 ranks: [0, 2] and [2, 1]); a group that
 * is not the TP group, fewer experts than ranks, or experts without a
 * group are refused as a peer's bad report. */
static void test_load_report_experts(void) {
  struct tpl__report *rep = NULL;
  const json_t *ep, *r1;
  json_t *o;
  CHECK_EQ_INT(decode_ep_report(2, 3, &rep), 0);
  o = rep != NULL ? tpl__report_json(rep, NULL) : NULL;
  ep = json_object_get(o, "expert_parallel");
  r1 = json_array_get(json_object_get(ep, "ranks"), 1);
  CHECK_EQ_U64(json_integer_value(json_object_get(ep, "size")), 2);
  CHECK_EQ_U64(json_integer_value(json_object_get(ep, "experts")), 3);
  CHECK(u64_at(json_object_get(r1, "experts"), 0, 2));
  CHECK(u64_at(json_object_get(r1, "experts"), 1, 1));
  json_decref(o);
  tpl__report_free(rep);
  rep = NULL;
  CHECK_EQ_INT(decode_ep_report(0, 0, &rep), 0);
  o = rep != NULL ? tpl__report_json(rep, NULL) : NULL;
  CHECK(o != NULL && json_object_get(o, "expert_parallel") == NULL);
  json_decref(o);
  tpl__report_free(rep);
  rep = NULL;
  CHECK_EQ_INT(decode_ep_report(1, 3, &rep), TPL_EPEER);
  CHECK_EQ_INT(decode_ep_report(2, 1, &rep), TPL_EPEER);
  CHECK_EQ_INT(decode_ep_report(0, 3, &rep), TPL_EPEER);
  job.grid.ep = 0;
  job.experts = 0;
}

/* The varint at p (before end) into *v; the bytes it took, 0 when it
 * runs off the end or past ten bytes. */
static size_t varint_at(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  size_t n = 0;
  *v = 0;
  while (p + n < end && n < 10) {
    *v |= (uint64_t)(p[n] & 0x7f) << (7 * n);
    if ((p[n++] & 0x80) == 0) return n;
  }
  return 0;
}

/* The message in buf without its top-level field `field`, compacted in
 * place by the protobuf wire format's rules (a key is the varint field
 * << 3 | type; type 0 a varint follows, 1 eight bytes, 2 a varint length
 * and that many bytes, 5 four bytes); its new length, 0 when it does not
 * parse. */
static size_t drop_field(uint8_t *buf, size_t len, uint64_t field) {
  const uint8_t *end = buf + len;
  size_t in = 0, out = 0;
  while (in < len) {
    uint64_t key, v = 0;
    size_t k = varint_at(buf + in, end, &key), body = 0;
    if (k == 0) return 0;
    if ((key & 7) == 0) body = varint_at(buf + in + k, end, &v);
    if ((key & 7) == 1) body = 8;
    if ((key & 7) == 5) body = 4;
    if ((key & 7) == 2) {
      size_t l = varint_at(buf + in + k, end, &v);
      body = l != 0 && v <= len ? l + (size_t)v : 0;
    }
    if (body == 0 || body > len - in - k) return 0;
    if (key >> 3 != field) memmove(buf + out, buf + in, k + body);
    if (key >> 3 != field) out += k + body;
    in += k + body;
  }
  return out;
}

/* The job's report packed and decoded, its bias_family (LoadReport field
 * 13) dropped first when `old` (a daemon from before the bias policies:
 * bias_scaling, field 3, alone); the decoded policy's name, "" when it
 * does not decode. */
static const char *policy_of(int family, int bias, int old) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  const char *name = "";
  make_job();
  job.bias_family = family;
  tensors[1].bias = bias;
  if (load_report(&buf, &len) == 0 && old) len = drop_field(buf, len, 13);
  if (buf != NULL && tpl__report_decode(buf, len, &rep, NULL) == 0)
    name = tpl__bias_family_name(rep->bias_family);
  tpl__report_free(rep);
  free(buf);
  return name;
}

/* A report without bias_family is decoded from its bias_scaling: false
 * was --no-bias-scaling (every bias whole), true mlc's scale; a report
 * with the field keeps it (vllm's has bias_scaling false too). */
static void test_load_report_without_bias_family(void) {
  CHECK_STR_CONTAINS(policy_of(TPL_BIASF_WHOLE, TPL_BIAS_WHOLE, 1), "whole");
  CHECK_STR_CONTAINS(policy_of(TPL_BIASF_MLC, TPL_BIAS_SCALE, 1), "mlc");
  CHECK_STR_CONTAINS(policy_of(TPL_BIASF_WHOLE, TPL_BIAS_WHOLE, 0), "whole");
  CHECK_STR_CONTAINS(policy_of(TPL_BIASF_VLLM, TPL_BIAS_RANK0, 0), "vllm");
  CHECK_STR_CONTAINS(policy_of(TPL_BIASF_MLC, TPL_BIAS_SCALE, 0), "mlc");
}

/* The job's report (its read as `local` and `automatic` say), packed,
 * LoadReport field 18 (read) removed when `drop` is set, and `as` (3
 * bytes) written over an "mpi" there, decoded: its JSON's "read" (NULL
 * when absent). */
static json_t *read_of(int local, int automatic, int drop, const char *as) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL, *at;
  size_t len = 0;
  json_t *o = NULL, *r = NULL;
  make_job();
  job.read_local = local;
  job.read_auto = automatic;
  if (load_report(&buf, &len) == 0 && drop) len = drop_field(buf, len, 18);
  /* field 18, length-delimited (key 0x92 0x01), 3 bytes: "mpi" */
  at = buf && as ? memmem(buf, len, "\x92\x01\x03mpi", 6) : NULL;
  if (at != NULL) memcpy(at + 3, as, 3);
  if (buf != NULL && tpl__report_decode(buf, len, &rep, NULL) == 0)
    o = tpl__report_json(rep, NULL);
  if (o != NULL && (r = json_object_get(o, "read")) != NULL) json_incref(r);
  json_decref(o);
  tpl__report_free(rep);
  free(buf);
  job.read_local = job.read_auto = 0;
  return r;
}

static int read_is(json_t *r, const char *by, int automatic) {
  int ok = r != NULL && strcmp(str(r, "by"), by) == 0 &&
           json_is_true(json_object_get(r, "auto")) == automatic;
  json_decref(r);
  return ok;
}

/* Who read the files (--read): "mpi" or "local" and whether auto chose
 * it travel in the report; a report without them (before --read auto)
 * or with another word has no "read". */
static void test_load_report_read(void) {
  json_t *r;
  CHECK(read_is(read_of(1, 1, 0, NULL), "local", 1));
  CHECK(read_is(read_of(0, 1, 0, NULL), "mpi", 1));
  CHECK(read_is(read_of(0, 0, 0, NULL), "mpi", 0));
  CHECK(read_is(read_of(1, 0, 0, NULL), "local", 0));
  CHECK((r = read_of(1, 1, 1, NULL)) == NULL);
  json_decref(r);
  CHECK((r = read_of(0, 0, 0, "xyz")) == NULL);
  json_decref(r);
}

/* A status summary keeps each rank's counts and drops the arrays; the
 * job's params cannot be rendered from it. */
static void test_summary_drops_the_arrays(void) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL, *sum = NULL;
  size_t len = 0, slen = 0;
  make_job();
  CHECK_EQ_INT(load_report(&buf, &len), 0);
  CHECK_EQ_INT(buf ? tpl__report_summary(buf, len, &sum, &slen) : -1, 0);
  CHECK(slen > 0 && slen < len);
  CHECK_EQ_INT(sum ? tpl__report_decode(sum, slen, &rep, NULL) : -1, 0);
  if (rep != NULL) {
    CHECK_EQ_U64(rep->ntensors, 0);
    CHECK(rep->infos == NULL);
    CHECK_EQ_U64(rep->ranks[0].tensor_count, 2);
    CHECK_EQ_U64(rep->ranks[1].bytes, 48);
    CHECK(tpl__report_json(rep, &job) == NULL);
  }
  tpl__report_free(rep);
  free(sum);
  sum = NULL; /* the model's name cut short does not decode */
  CHECK_EQ_INT(tpl__report_summary(buf, 2, &sum, &slen), TPL_EPEER);
  CHECK(sum == NULL);
  free(sum);
  free(buf);
}

/* What preshard writes into shard-info.json: each rank's bytes and
 * checksum per tensor, taken from the gathered report. */
static void test_rank_infos_for_shard_info(void) {
  struct tpl__report *rep = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  json_t *info = NULL, *ranks;
  make_job();
  CHECK_EQ_INT(load_report(&buf, &len), 0);
  CHECK_EQ_INT(buf ? tpl__report_decode(buf, len, &rep, NULL) : -1, 0);
  if (rep == NULL) goto out;
  CHECK_EQ_U64(rep->infos[0 * 2 + 1].xxh3, 0x1001);
  CHECK_EQ_U64(rep->infos[1 * 2 + 0].xxh3, 0x2000);
  CHECK_EQ_U64(rep->infos[1 * 2 + 1].nbytes, 16);
  CHECK_EQ_INT(tpl__shardinfo_build(&job, rep->infos, &info), 0);
  ranks = json_object_get(json_array_get(json_object_get(info, "params"), 1),
                          "ranks");
  CHECK_EQ_U64(json_array_size(ranks), 2);
  CHECK(strcmp(str(json_array_get(ranks, 1), "xxh3"), "0000000000002001") == 0);
  CHECK_EQ_U64(
      json_integer_value(json_object_get(json_array_get(ranks, 1), "nbytes")),
      16);
  json_decref(info);
out:
  tpl__report_free(rep);
  free(buf);
}

static void test_malformed_rank_report(void) {
  uint8_t good[512], *parts[2], *buf = NULL, *mine = NULL;
  static uint8_t junk[] = {0x22, 0x40}; /* a field that runs off */
  size_t lens[2], len = 0, n = 0;
  struct tpl__error err = {0};
  struct tpl__report *rep = NULL;
  make_job();
  CHECK_EQ_INT(pack_rank(0, &mine, &n), 0);
  if (mine == NULL || n > sizeof(good)) return;
  memcpy(good, mine, n);
  free(mine);
  parts[0] = good;
  lens[0] = n;
  parts[1] = junk;
  lens[1] = sizeof(junk);
  CHECK_EQ_INT(
      tpl__load_report_pack(&job, parts, lens, 1.0, 0, NULL, &buf, &len, &err),
      TPL_EPEER);
  CHECK_STR_CONTAINS(err.msg, "rank 1");
  CHECK_EQ_INT(tpl__report_decode(junk, sizeof(junk), &rep, &err), TPL_EPEER);
  CHECK_STR_CONTAINS(err.msg, "do not decode");
}

int main(void) {
  RUN(test_job_table_roundtrip);
  RUN(test_job_table_parts_roundtrip);
  RUN(test_job_unpack_refuses_junk);
  RUN(test_job_table_carries_sources);
  RUN(test_job_table_carries_remote_files);
  RUN(test_job_table_refuses_a_file_it_lacks);
  RUN(test_job_table_refuses_a_tensor_beyond_its_file);
  RUN(test_load_report_json);
  RUN(test_load_report_md5);
  RUN(test_load_report_cpu);
  RUN(test_load_report_nodes);
  RUN(test_summary_drops_the_arrays);
  RUN(test_rank_infos_for_shard_info);
  RUN(test_malformed_rank_report);
  RUN(test_load_report_experts);
  RUN(test_load_report_without_bias_family);
  RUN(test_load_report_read);
  return tap_done();
}
