/* test_job.c - the job table (src/job.c): tpl__job_finish's per-rank
 * shapes, byte counts and store offsets, and tpl__job_layout's bytes, on
 * DESIGN.md section 2's worked examples (expected slices copied from its
 * table); MLC's segs and out_shape; f32-to-bf16 storage; the bias scope
 * through tpl__job_finish_bytes; the source location a job built from a
 * model carries; the overflow refusal naming the tensor; and the grid:
 * which ranks hold a tensor (docs/TOPOLOGY.md's TP2 x PP2 x DP2 table),
 * per-stage store offsets, T (not the world) as the shard count, and the
 * planner's stages and refusals for --pp; --ep's map, holders and its
 * refusal of an expert missing in one layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "experts.h"
#include "fileio.h"
#include "job.h"
#include "model.h"
#include "store.h"
#include "tap.h"

#define ARR(...) ((const uint64_t[]){__VA_ARGS__})

/* A one-byte-element (u8) tensor of `shape`, sharded along `dim` with the
 * full `segs` (nsegs 0: one segment). */
static struct tpl__job_tensor sharded(const char *name, const uint64_t *shape,
                                      int ndim, int dim, size_t nsegs,
                                      const uint64_t *segs) {
  struct tpl__job_tensor t = {.name = (char *)name,
                              .dtype = TPL_DT_U8,
                              .ndim = ndim,
                              .kind = TPL_RULE_SHARD,
                              .func_name = "_shard"};
  memcpy(t.shape, shape, (size_t)ndim * sizeof(uint64_t));
  t.spec.dim = dim;
  t.spec.nsegs = nsegs;
  for (size_t j = 0; j < nsegs; j++)
    t.spec.segs[j] = segs[j];
  return t;
}

static struct tpl__job one_tensor_job(struct tpl__job_tensor *t,
                                      uint32_t world) {
  struct tpl__job job = {
      .grid = {world, world, 1, 1, 0}, .tensors = t, .ntensors = 1};
  return job;
}

/* Finishes a one-tensor job of the example, checks the shape each rank
 * holds, then gathers every rank's bytes from a source filled 0, 1, 2,
 * ... and compares them with the example's slices (want[r], each of
 * `per_rank` elements). */
static void check_example(struct tpl__job_tensor t, uint32_t world,
                          const uint64_t *rank_shape, const uint8_t *want,
                          size_t per_rank) {
  struct tpl__job job = one_tensor_job(&t, world);
  uint8_t src[64], dst[64];
  for (size_t i = 0; i < sizeof(src); i++)
    src[i] = (uint8_t)i;
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  for (int d = 0; d < t.ndim; d++)
    CHECK_EQ_U64(t.rank_shape[d], rank_shape[d]);
  CHECK_EQ_U64(t.rank_bytes, per_rank);
  CHECK_EQ_U64(t.rank_stored, per_rank);
  CHECK_EQ_U64(t.store_offset, 0);
  CHECK_EQ_U64(job.store_size, per_rank);
  for (uint32_t r = 0; r < world; r++) {
    struct tpl__layout l;
    CHECK_EQ_INT(tpl__job_layout(&job, 0, r, &l), 0);
    CHECK_EQ_U64(l.total, per_rank);
    CHECK_EQ_U64(tpl__layout_gather(&l, 0, t.stored_bytes, src, dst), per_rank);
    CHECK(memcmp(dst, want + r * per_rank, per_rank) == 0);
  }
}

/* [12], dim 0, segs [4,4,4], N 2: r0 0 1 4 5 8 9, r1 2 3 6 7 10 11. */
static void test_example_12_segs_444(void) {
  static const uint8_t want[] = {0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11};
  check_example(sharded("t", ARR(12), 1, 0, 3, ARR(4, 4, 4)), 2, ARR(6), want,
                6);
}

/* [8,2], dim 0, segs [4,2,2] (GQA q,k,v), N 2. */
static void test_example_gqa(void) {
  static const uint8_t want[] = {0, 1, 2, 3, 8,  9,  12, 13,
                                 4, 5, 6, 7, 10, 11, 14, 15};
  check_example(sharded("qkv", ARR(8, 2), 2, 0, 3, ARR(4, 2, 2)), 2, ARR(4, 2),
                want, 8);
}

/* [3,4], dim 1, N 2. */
static void test_example_dim1(void) {
  static const uint8_t want[] = {0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11};
  check_example(sharded("o", ARR(3, 4), 2, 1, 0, NULL), 2, ARR(3, 2), want, 6);
}

/* [2,8,3], dim 1, segs [4,4], N 2: r0 0..5 12..17 24..29 36..41. */
static void test_example_3d(void) {
  uint8_t want[48];
  for (size_t k = 0; k < 4; k++)
    for (size_t i = 0; i < 6; i++) {
      want[k * 6 + i] = (uint8_t)(k * 12 + i);
      want[24 + k * 6 + i] = (uint8_t)(k * 12 + 6 + i);
    }
  check_example(sharded("x", ARR(2, 8, 3), 3, 1, 2, ARR(4, 4)), 2, ARR(2, 4, 3),
                want, 24);
}

/* [12], dim 0, segs [6,3,3], N 3: r0 0 1 6 9, r1 2 3 7 10, r2 4 5 8 11. */
static void test_example_three_ranks(void) {
  static const uint8_t want[] = {0, 1, 6, 9, 2, 3, 7, 10, 4, 5, 8, 11};
  check_example(sharded("t", ARR(12), 1, 0, 3, ARR(6, 3, 3)), 3, ARR(4), want,
                4);
}

/* [3,2], dim 1, N 1: the whole tensor. */
static void test_example_n1(void) {
  static const uint8_t want[] = {0, 1, 2, 3, 4, 5};
  check_example(sharded("t", ARR(3, 2), 2, 1, 0, NULL), 1, ARR(3, 2), want, 6);
}

/* MLC's shard info units: segs / N, and out_shape [N, *rank_shape]. */
static void test_mlc_segs_and_out_shape(void) {
  struct tpl__job_tensor t[2] = {
      sharded("qkv", ARR(8, 2), 2, 0, 3, ARR(4, 2, 2)),
      sharded("o", ARR(3, 4), 2, 1, 0, NULL)};
  struct tpl__job job = {.grid = {2, 2, 1, 1, 0}, .tensors = t, .ntensors = 2};
  uint64_t segs[TPL_MAX_SEGS], out[TPL_MAX_DIMS + 1];
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_U64(tpl__job_mlc_segs(&job, &t[0], segs), 3);
  CHECK_EQ_U64(segs[0], 2);
  CHECK_EQ_U64(segs[1], 1);
  CHECK_EQ_U64(segs[2], 1);
  CHECK_EQ_U64(tpl__job_mlc_segs(&job, &t[1], segs), 1);
  CHECK_EQ_U64(segs[0], 2);
  CHECK_EQ_U64(tpl__job_out_shape(&job, &t[0], out), 3);
  CHECK_EQ_U64(out[0], 2);
  CHECK_EQ_U64(out[1], 4);
  CHECK_EQ_U64(out[2], 2);
}

/* Store offsets: back to back, each 64-byte aligned; replicated tensors
 * hold their full shape; source_bytes sums the stored tensors. */
static void test_offsets_and_replicated(void) {
  struct tpl__job_tensor t[3] = {
      {.name = "emb", .dtype = TPL_DT_F32, .ndim = 2, .shape = {3, 5}},
      sharded("q", ARR(8, 2), 2, 0, 0, NULL),
      {.name = "b",
       .dtype = TPL_DT_F16,
       .ndim = 1,
       .shape = {4},
       .kind = TPL_RULE_SCALE_BIAS}};
  struct tpl__job job = {.grid = {2, 2, 1, 1, 0}, .tensors = t, .ntensors = 3};
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_U64(t[0].rank_shape[0], 3);
  CHECK_EQ_U64(t[0].rank_shape[1], 5);
  CHECK_EQ_U64(t[0].rank_bytes, 60);
  CHECK_EQ_U64(t[0].store_offset, 0);
  CHECK_EQ_U64(t[1].rank_shape[0], 4);
  CHECK_EQ_U64(t[1].rank_bytes, 8);
  CHECK_EQ_U64(t[1].store_offset, 64);
  CHECK_EQ_U64(t[2].rank_bytes, 8);
  CHECK_EQ_U64(t[2].store_offset, 128);
  CHECK_EQ_U64(job.store_size, 136);
  CHECK_EQ_U64(t[0].stored_bytes, 60);
  CHECK_EQ_U64(t[1].stored_bytes, 16);
  CHECK_EQ_U64(job.source_bytes, 60 + 16 + 8);
  CHECK(strcmp(tpl__rule_name(t[0].kind, t[0].func_name), "replicate") == 0);
  CHECK(strcmp(tpl__rule_name(t[1].kind, t[1].func_name), "_shard") == 0);
  CHECK(strcmp(tpl__rule_name(t[2].kind, t[2].func_name), "scale_bias") == 0);
}

/* An f32 tensor stored as bf16: a rank receives half the bytes it holds,
 * and finish_bytes widens them in place (bf16 0x3f80 is 1.0f). */
static void test_f32_to_bf16(void) {
  struct tpl__job_tensor t = sharded("w", ARR(4), 1, 0, 0, NULL);
  struct tpl__job job = one_tensor_job(&t, 2);
  union {
    uint8_t b[8];
    float f[2];
  } buf;
  static const uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
  t.dtype = TPL_DT_F32;
  t.encoding = TPL_ENC_F32_TO_BF16;
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_U64(t.rank_bytes, 8);
  CHECK_EQ_U64(t.rank_stored, 4);
  CHECK_EQ_U64(t.stored_bytes, 8); /* 4 elements of 2 bytes as stored */
  memcpy(buf.b, bf16, sizeof(bf16));
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 0, buf.b, NULL), 0);
  CHECK(buf.f[0] == 1.0f);
  CHECK(buf.f[1] == -2.0f);
}

/* DESIGN.md's bias scope: a scale_bias tensor is divided by N on each
 * shard under scale, zeroed on shards but 0 under rank0, left whole under
 * whole; a dtype it cannot scale is refused naming the tensor. */
static void test_finish_bytes_scales_bias(void) {
  struct tpl__job_tensor t = {.name = "o.bias",
                              .dtype = TPL_DT_F32,
                              .ndim = 1,
                              .shape = {2},
                              .kind = TPL_RULE_SCALE_BIAS,
                              .bias = TPL_BIAS_SCALE};
  struct tpl__job job = one_tensor_job(&t, 4);
  struct tpl__error err = {0};
  float v[2] = {2.0f, -8.0f};
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK(!tpl__job_bytes_final(&job, 0));
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 3, (uint8_t *)v, NULL), 0);
  CHECK(v[0] == 0.5f);
  CHECK(v[1] == -2.0f);
  t.bias = TPL_BIAS_WHOLE;
  CHECK(tpl__job_bytes_final(&job, 0));
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 3, (uint8_t *)v, NULL), 0);
  CHECK(v[0] == 0.5f);
  t.bias = TPL_BIAS_RANK0;
  CHECK(!tpl__job_bytes_final(&job, 0));
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 0, (uint8_t *)v, NULL), 0);
  CHECK(v[0] == 0.5f && v[1] == -2.0f);
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 1, (uint8_t *)v, NULL), 0);
  CHECK(v[0] == 0.0f && v[1] == 0.0f);
  t.bias = TPL_BIAS_SCALE;
  t.dtype = TPL_DT_I32;
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 0, 0, (uint8_t *)v, &err),
               TPL_EDTYPE);
  CHECK_STR_CONTAINS(err.msg, "o.bias");
}

/* The family decides a rule without a policy of its own; a plan file's
 * policy wins over mlc and vllm but not over whole (--no-bias-scaling). */
static void test_bias_resolve(void) {
  CHECK_EQ_INT(tpl__bias_resolve(0, 0, TPL_BIASF_MLC), TPL_BIAS_SCALE);
  CHECK_EQ_INT(tpl__bias_resolve(0, 0, TPL_BIASF_VLLM), TPL_BIAS_WHOLE);
  CHECK_EQ_INT(tpl__bias_resolve(0, 0, TPL_BIASF_WHOLE), TPL_BIAS_WHOLE);
  CHECK_EQ_INT(tpl__bias_resolve(0, TPL_BIAS_RANK0, TPL_BIASF_MLC),
               TPL_BIAS_SCALE);
  CHECK_EQ_INT(tpl__bias_resolve(0, TPL_BIAS_RANK0, TPL_BIASF_VLLM),
               TPL_BIAS_RANK0);
  CHECK_EQ_INT(tpl__bias_resolve(TPL_BIAS_RANK0, 0, TPL_BIASF_MLC),
               TPL_BIAS_RANK0);
  CHECK_EQ_INT(tpl__bias_resolve(TPL_BIAS_SCALE, 0, TPL_BIASF_VLLM),
               TPL_BIAS_SCALE);
  CHECK_EQ_INT(tpl__bias_resolve(TPL_BIAS_SCALE, 0, TPL_BIASF_WHOLE),
               TPL_BIAS_WHOLE);
  CHECK_EQ_INT(tpl__bias_family_parse("vllm"), TPL_BIASF_VLLM);
  CHECK_EQ_INT(tpl__bias_family_parse("scale"), -1);
  CHECK_EQ_INT(tpl__bias_parse("rank0"), TPL_BIAS_RANK0);
  CHECK_EQ_INT(tpl__bias_parse("default"), -1);
  CHECK(tpl__bias_factor(TPL_BIAS_SCALE, 4) == 0.25);
  CHECK(tpl__bias_factor(TPL_BIAS_RANK0, 4) == 1.0);
}

static void test_overflow_names_tensor(void) {
  struct tpl__job_tensor t = {.name = "huge",
                              .dtype = TPL_DT_F64,
                              .ndim = 2,
                              .shape = {UINT64_C(1) << 31, UINT64_C(1) << 31}};
  struct tpl__job job = one_tensor_job(&t, 1);
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__job_finish(&job, &err), TPL_EOVERFLOW);
  CHECK_STR_CONTAINS(err.msg, "huge");
}

static void add_tensor(struct tpl__model *m, const char *name, uint32_t file,
                       uint64_t offset, uint64_t n) {
  struct tpl__tensor t = {.name = strdup(name),
                          .dtype = TPL_DT_F16,
                          .ndim = 1,
                          .shape = {n},
                          .file = file,
                          .offset = offset,
                          .stored_bytes = 2 * n,
                          .nbytes = 2 * n};
  if (tpl__model_add_tensor(m, &t) != 0) free(t.name);
}

/* A job built from a model keeps each tensor's source (rank 0's walk
 * needs nothing else) and the strategy of its rule. */
static void test_from_model_carries_source(void) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_ST_INDEX, ".");
  struct tpl__strategy st[2] = {
      {.kind = TPL_RULE_SHARD, .rule = 0, .func_name = "_shard_q"},
      {.kind = TPL_RULE_REPLICATE, .rule = -1}};
  struct tpl__job *job = NULL;
  uint32_t f0 = 0, f1 = 0;
  CHECK(m != NULL);
  if (m == NULL) return;
  tpl__model_add_file(m, "./a.safetensors", "a.safetensors", 100, &f0);
  tpl__model_add_file(m, "./b.safetensors", "b.safetensors", 100, &f1);
  add_tensor(m, "q", f1, 40, 8);
  add_tensor(m, "norm", f0, 16, 4);
  CHECK_EQ_INT(tpl__job_from_model(m, st, NULL, "preset x", "MODEL",
                                   &(struct tpl__grid){2, 2, 1, 1, 0},
                                   TPL_BIASF_MLC, &job, NULL),
               0);
  if (job != NULL) {
    CHECK_EQ_U64(job->ntensors, 2);
    CHECK(strcmp(job->model, "MODEL") == 0);
    CHECK(strcmp(job->plan_source, "preset x") == 0);
    CHECK_EQ_U64(job->tensors[0].file, f1);
    CHECK_EQ_U64(job->tensors[0].file_offset, 40);
    CHECK_EQ_U64(job->tensors[0].stored_bytes, 16);
    CHECK_EQ_U64(job->tensors[0].rank_bytes, 8);
    CHECK(strcmp(job->tensors[0].func_name, "_shard_q") == 0);
    CHECK_EQ_U64(job->tensors[1].file, f0);
    CHECK_EQ_U64(job->tensors[1].file_offset, 16);
    CHECK_EQ_U64(job->tensors[1].rank_bytes, 8);
    CHECK_EQ_U64(job->source_bytes, 24);
  }
  tpl__job_free(job);
  tpl__model_free(m);
}

/* The stages of docs/TOPOLOGY.md's llama example, two stages: a layer of
 * the first half, a layer of the second, model.norm (last stage) and
 * embed_tokens (every stage), each a 4-byte u8 tensor. */
static void staged_tensors(struct tpl__job_tensor *t) {
  static const char *names[4] = {"model.layers.0.x", "model.layers.1.x",
                                 "model.norm.weight",
                                 "model.embed_tokens.weight"};
  static const struct tpl__stages st[4] = {{0, 1}, {1, 1}, {1, 1}, {0, 2}};
  for (int i = 0; i < 4; i++)
    t[i] = (struct tpl__job_tensor){.name = (char *)names[i],
                                    .dtype = TPL_DT_U8,
                                    .ndim = 1,
                                    .shape = {4},
                                    .stages = st[i]};
}

/* TP2 x PP2 x DP2 (-np 8): ranks 0, 1, 4, 5 are stage 0, ranks 2, 3, 6,
 * 7 stage 1 (rank = (d * P + p) * T + t). */
static void test_holds_by_stage(void) {
  struct tpl__job_tensor t[4];
  struct tpl__job job = {.grid = {8, 2, 2, 2, 0}, .tensors = t, .ntensors = 4};
  static const int stage1[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  staged_tensors(t);
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  for (uint32_t r = 0; r < 8; r++) {
    CHECK_EQ_INT(tpl__job_holds(&job, 0, r) != 0, !stage1[r]);
    CHECK_EQ_INT(tpl__job_holds(&job, 1, r) != 0, stage1[r]);
    CHECK_EQ_INT(tpl__job_holds(&job, 2, r) != 0, stage1[r]);
    CHECK_EQ_INT(tpl__job_holds(&job, 3, r) != 0, 1);
  }
}

/* vLLM's determine_expert_map (expert_map_manager.py, 54f88b20),
 * linear placement: E // size each, the remainder one more each to the
 * first ranks, written out by hand for E = 6 over 4 ranks (2, 2, 1, 1)
 * and DeepSeek-V3's 256 over 8 (32 each); every expert's owner is the
 * rank whose range holds it. */
static void test_ep_map(void) {
  static const uint32_t want6[4][2] = {{0, 2}, {2, 2}, {4, 1}, {5, 1}};
  static const uint32_t owner6[6] = {0, 0, 1, 1, 2, 3};
  for (uint32_t r = 0; r < 4; r++) {
    struct tpl__ep_range e = tpl__ep_range(6, 4, r);
    CHECK_EQ_U64(e.start, want6[r][0]);
    CHECK_EQ_U64(e.count, want6[r][1]);
  }
  for (uint32_t x = 0; x < 6; x++)
    CHECK_EQ_U64(tpl__ep_owner(6, 4, x), owner6[x]);
  for (uint32_t r = 0; r < 8; r++) {
    CHECK_EQ_U64(tpl__ep_range(256, 8, r).start, 32 * r);
    CHECK_EQ_U64(tpl__ep_range(256, 8, r).count, 32);
  }
  for (uint32_t x = 0; x < 256; x++)
    CHECK_EQ_U64(tpl__ep_owner(256, 8, x), x / 32);
}

/* A u8 vector of `n` elements named `name` (not owned); with `owner`
 * >= 0 one expert's tensor (TPL_EP_WHOLE) of that group rank. */
static struct tpl__job_tensor u8_vector(const char *name, uint64_t n,
                                        int owner) {
  struct tpl__job_tensor t = {
      .name = (char *)name, .dtype = TPL_DT_U8, .ndim = 1, .shape = {n}};
  if (owner >= 0) {
    t.ep = TPL_EP_WHOLE;
    t.owner = (uint32_t)owner;
  }
  return t;
}

/* One expert's tensor (TPL_EP_WHOLE, owner shard 1) on TP2 x DP2: held
 * by ranks 1 and 3 only, whole; rank 1's store has it after the shared
 * tensor, rank 0's not at all. */
static void test_ep_holds_owner(void) {
  struct tpl__job_tensor t[2] = {
      u8_vector("model.norm.weight", 4, -1),
      u8_vector("model.layers.0.mlp.experts.3.up_proj.weight", 8, 1)};
  struct tpl__job job = {.grid = {4, 2, 1, 2, 2}, .tensors = t, .ntensors = 2};
  static const int holds[4] = {0, 1, 0, 1};
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  for (uint32_t r = 0; r < 4; r++) {
    CHECK_EQ_INT(tpl__job_holds(&job, 0, r) != 0, 1);
    CHECK_EQ_INT(tpl__job_holds(&job, 1, r) != 0, holds[r]);
  }
  CHECK_EQ_U64(t[1].rank_bytes, 8);
  CHECK_EQ_U64(t[1].store_offset, UINT64_MAX);
  CHECK_EQ_U64(job.store_size, 4);
  CHECK_EQ_INT(tpl__job_place(&job, 3, NULL), 0);
  CHECK_EQ_U64(t[1].store_offset, 64);
  CHECK_EQ_U64(job.store_size, 72);
}

/* --ep-size T x D on TP2 x DP2 (vLLM's ep_rank = dp_rank x tp_size +
 * tp_rank, written out: ranks 0..3 are group ranks 0..3): expert tensor
 * of owner 3 held by rank 3 only, of owner 1 by rank 1 only, the shared
 * tensor by all; the map of 6 experts over 4 is rank 3's [5, 1]. */
static void test_ep_spans_replicas(void) {
  struct tpl__job_tensor t[3] = {
      u8_vector("model.norm.weight", 4, -1),
      u8_vector("model.layers.0.mlp.experts.5.up_proj.weight", 8, 3),
      u8_vector("model.layers.0.mlp.experts.2.up_proj.weight", 8, 1)};
  struct tpl__job job = {.grid = {4, 2, 1, 2, 4}, .tensors = t, .ntensors = 3};
  static const int holds5[4] = {0, 0, 0, 1}, holds2[4] = {0, 1, 0, 0};
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  for (uint32_t r = 0; r < 4; r++) {
    CHECK_EQ_U64(tpl__grid_ep_rank(&job.grid, r), r);
    CHECK_EQ_INT(tpl__job_holds(&job, 0, r) != 0, 1);
    CHECK_EQ_INT(tpl__job_holds(&job, 1, r) != 0, holds5[r]);
    CHECK_EQ_INT(tpl__job_holds(&job, 2, r) != 0, holds2[r]);
  }
  CHECK_EQ_U64(tpl__ep_range(6, 4, tpl__grid_ep_rank(&job.grid, 3)).start, 5);
}

/* --ep-size: T or T x D; 0 is T; anything else a usage error naming the
 * allowed values; without --ep no group.  On TP2 x PP2 x DP2 the group
 * of T x D = 4 is the ranks of one stage, rank 6 (d 1, p 1, t 0) group
 * rank 2. */
static void test_ep_size(void) {
  struct tpl__grid g = {0};
  struct tpl__error err = {0};
  CHECK_EQ_INT(tpl__grid_make(8, 2, 2, NULL, &g), 0);
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 1, 0, NULL), 0);
  CHECK_EQ_U64(g.ep, 2);
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 1, 4, NULL), 0);
  CHECK_EQ_U64(g.ep, 4);
  CHECK_EQ_U64(tpl__grid_ep_rank(&g, 6), 2);
  CHECK_EQ_U64(tpl__grid_ep_rank(&g, 3), 1);
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 1, 3, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "--ep-size 3: expected 2 (--tp, the TP group) "
                              "or 4 (--tp x 2 replicas)");
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 1, 8, NULL), TPL_EUSAGE);
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 0, 0, NULL), 0);
  CHECK_EQ_U64(g.ep, 0);
  CHECK_EQ_INT(tpl__grid_make(2, 2, 1, NULL, &g), 0);
  CHECK_EQ_INT(tpl__grid_set_ep(&g, 1, 4, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "expected 2 (--tp, the TP group; the grid has "
                              "one replica)");
}

/* tpl__ep_apply over a hand-built model of `n` u8 tensors named `names`
 * (shape {rows[i], 2}) with num_local_experts 4, for 2 ranks; returns
 * its code, err the message. */
static int ep_apply_names(const char *const *names, const uint64_t *rows,
                          size_t n, struct tpl__error *err) {
  struct tpl__tensor t[16] = {{0}};
  struct tpl__strategy s[16] = {{0}};
  struct tpl__model m = {.dir = "moe", .tensors = t, .ntensors = n};
  json_t *config = json_pack("{s:i}", "num_local_experts", 4);
  struct tpl__grid g = {2, 2, 1, 1, 2};
  struct tpl__plan *p = tpl__plan_new("test");
  uint32_t experts = 0;
  int rc;
  for (size_t i = 0; i < n; i++) {
    s[i].rule = -1;
    t[i].name = (char *)names[i];
    t[i].dtype = TPL_DT_U8;
    t[i].ndim = 2;
    t[i].shape[0] = rows[i];
    t[i].shape[1] = 2;
  }
  rc = tpl__ep_apply(p, &m, config, &g, s, &experts, err);
  json_decref(config);
  tpl__plan_free(p);
  return rc;
}

/* An expert missing in one layer (layer 1's w2 of expert 2, with experts
 * 0, 1 and 3 present and layer 0 complete) is refused with 65 naming
 * the missing tensor; the complete model passes; expert 2 named twice
 * ("2" and "02", expert 3 absent) is refused; a stacked [E, ...] tensor
 * with 3 rows in one layer is refused naming it. */
static void test_ep_missing_expert(void) {
  static const char *const names[] = {"model.layers.0.mlp.experts.0.w2.weight",
                                      "model.layers.0.mlp.experts.1.w2.weight",
                                      "model.layers.0.mlp.experts.2.w2.weight",
                                      "model.layers.0.mlp.experts.3.w2.weight",
                                      "model.layers.1.mlp.experts.0.w2.weight",
                                      "model.layers.1.mlp.experts.1.w2.weight",
                                      "model.layers.1.mlp.experts.3.w2.weight",
                                      "model.layers.1.mlp.experts.2.w2.weight"};
  static const uint64_t rows[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  static const char *const stacked[] = {
      "model.layers.0.mlp.moe_down_proj.weight",
      "model.layers.1.mlp.moe_down_proj.weight"};
  static const uint64_t srows[2] = {4, 3};
  static const char *const twice[] = {
      "model.layers.0.mlp.experts.0.w2.weight",
      "model.layers.0.mlp.experts.1.w2.weight",
      "model.layers.0.mlp.experts.2.w2.weight",
      "model.layers.0.mlp.experts.02.w2.weight"};
  struct tpl__error err = {0};
  CHECK_EQ_INT(ep_apply_names(names, rows, 8, &err), 0);
  CHECK_EQ_INT(ep_apply_names(names, rows, 7, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expert 2 is missing: no tensor "
                              "'model.layers.1.mlp.experts.2.w2.weight'");
  CHECK_STR_CONTAINS(err.msg, "3 of the config's 4 experts");
  CHECK_EQ_INT(ep_apply_names(twice, rows, 4, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "expert 2 is named twice");
  CHECK_EQ_INT(ep_apply_names(stacked, srows, 1, &err), 0);
  CHECK_EQ_INT(ep_apply_names(stacked, srows, 2, &err), TPL_EFORMAT);
  CHECK_STR_CONTAINS(err.msg, "'model.layers.1.mlp.moe_down_proj.weight'");
  CHECK_STR_CONTAINS(err.msg, "dim 0 of 4 experts, found 3");
}

/* A stage's store holds its tensors only, back to back and aligned; the
 * others are at UINT64_MAX. */
static void test_place_per_stage(void) {
  struct tpl__job_tensor t[4];
  struct tpl__job job = {.grid = {4, 1, 2, 2, 0}, .tensors = t, .ntensors = 4};
  staged_tensors(t);
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_U64(job.stage, 0);
  CHECK_EQ_U64(t[0].store_offset, 0);
  CHECK_EQ_U64(t[1].store_offset, UINT64_MAX);
  CHECK_EQ_U64(t[2].store_offset, UINT64_MAX);
  CHECK_EQ_U64(t[3].store_offset, 64);
  CHECK_EQ_U64(job.store_size, 68);
  CHECK_EQ_INT(tpl__job_place(&job, 1, NULL), 0);
  CHECK_EQ_U64(job.stage, 1);
  CHECK_EQ_U64(t[0].store_offset, UINT64_MAX);
  CHECK_EQ_U64(t[1].store_offset, 0);
  CHECK_EQ_U64(t[2].store_offset, 64);
  CHECK_EQ_U64(t[3].store_offset, 128);
  CHECK_EQ_U64(job.store_size, 132);
  CHECK_EQ_U64(job.source_bytes, 16);
}

/* On a grid the shard count is T, not the world: TP2 x DP2 cuts [12]
 * segs [4,4,4] as DESIGN.md's N = 2 example (shard 1: 2 3 6 7 10 11),
 * out_shape and MLC segs use 2, and a bias is divided by 2. */
static void test_grid_shards_by_tp(void) {
  static const uint8_t want1[] = {2, 3, 6, 7, 10, 11};
  struct tpl__job_tensor t[2] = {sharded("t", ARR(12), 1, 0, 3, ARR(4, 4, 4)),
                                 {.name = "b",
                                  .dtype = TPL_DT_F32,
                                  .ndim = 1,
                                  .shape = {1},
                                  .kind = TPL_RULE_SCALE_BIAS,
                                  .bias = TPL_BIAS_SCALE}};
  struct tpl__job job = {.grid = {4, 2, 1, 2, 0}, .tensors = t, .ntensors = 2};
  uint64_t v[TPL_MAX_DIMS + 1];
  uint8_t src[12], dst[12];
  float bias = 3.0f;
  struct tpl__layout l;
  for (size_t i = 0; i < sizeof(src); i++)
    src[i] = (uint8_t)i;
  CHECK_EQ_INT(tpl__job_finish(&job, NULL), 0);
  CHECK_EQ_U64(t[0].rank_shape[0], 6);
  CHECK_EQ_U64(tpl__job_out_shape(&job, &t[0], v), 2);
  CHECK_EQ_U64(v[0], 2);
  CHECK_EQ_U64(tpl__job_mlc_segs(&job, &t[0], v), 3);
  CHECK_EQ_U64(v[0], 2);
  CHECK_EQ_INT(tpl__job_layout(&job, 0, 1, &l), 0);
  CHECK_EQ_U64(tpl__layout_gather(&l, 0, 12, src, dst), 6);
  CHECK(memcmp(dst, want1, sizeof(want1)) == 0);
  CHECK_EQ_INT(tpl__job_finish_bytes(&job, 1, 1, (uint8_t *)&bias, NULL), 0);
  CHECK(bias == 1.5f);
  for (uint32_t r = 0; r < 4; r++)
    CHECK(tpl__job_holds(&job, 0, r));
}

/* --- the planner's stages (tpl__job_plan on a grid) --- */

static char tmpdir[64];

static void write_text(const char *name, const char *text) {
  char *path = tpl__path_join(tmpdir, name);
  FILE *f = path != NULL ? fopen(path, "w") : NULL;
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
  free(path);
}

static void remove_tmpdir(void) {
  static const char *files[] = {"plan.json", "config.json",
                                "mlc-chat-config.json"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char *p = tpl__path_join(tmpdir, files[i]);
    if (p != NULL) unlink(p);
    free(p);
  }
  rmdir(tmpdir);
}

/* A four-layer llama-named model in tmpdir (fmt: HF index or MLC), one
 * f16 tensor per layer plus embed_tokens, model.norm and lm_head. */
static struct tpl__model *staged_model(int fmt) {
  static const char *names[] = {"model.embed_tokens.weight",
                                "model.layers.0.mlp.w",
                                "model.layers.1.mlp.w",
                                "model.layers.2.mlp.w",
                                "model.layers.3.mlp.w",
                                "model.norm.weight",
                                "lm_head.weight"};
  struct tpl__model *m = tpl__model_new(fmt, tmpdir);
  uint32_t f = 0;
  if (m == NULL) return NULL;
  tpl__model_add_file(m, "x.safetensors", "x.safetensors", 1024, &f);
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    add_tensor(m, names[i], f, 16 * i, 4);
  return m;
}

/* Plans `m` with the plan file in tmpdir on grid (world, tp, pp); the
 * stages land in *first (one per tensor) on success. */
static int plan_grid(struct tpl__model *m, uint32_t world, uint32_t tp,
                     uint32_t pp, uint32_t *first, struct tpl__error *err) {
  struct tpl__grid g;
  struct tpl__plan *p = NULL;
  struct tpl__job *job = NULL;
  char *plan = tpl__path_join(tmpdir, "plan.json");
  int rc = tpl__grid_make(world, tp, pp, err, &g);
  if (rc == 0)
    rc = tpl__job_plan(plan, m, "M", &g, TPL_BIASF_MLC, &p, &job, err);
  for (size_t i = 0; rc == 0 && i < job->ntensors; i++)
    first[i] = job->tensors[i].stages.count == 1
                   ? job->tensors[i].stages.first
                   : 100 + job->tensors[i].stages.count;
  tpl__job_free(job);
  tpl__plan_free(p);
  free(plan);
  return rc;
}

/* L = 4 over P = 2 (MLC's layer // (L // P)): layers 0, 1 on stage 0,
 * layers 2, 3 and model.norm on stage 1, embed and lm_head on both
 * (100 + 2 below).  From config.json and from mlc-chat-config.json's
 * model_config. */
static void test_plan_stages(void) {
  static const uint32_t want[7] = {102, 0, 0, 1, 1, 1, 102};
  uint32_t got[7] = {0};
  struct tpl__error err = {0};
  struct tpl__model *m = staged_model(TPL_FMT_ST_INDEX);
  write_text("plan.json", "{\"rules\": []}");
  write_text("config.json", "{\"num_hidden_layers\": 4}");
  CHECK_EQ_INT(plan_grid(m, 4, 2, 2, got, &err), 0);
  for (int i = 0; i < 7; i++)
    CHECK_EQ_U64(got[i], want[i]);
  CHECK_EQ_INT(plan_grid(m, 2, 2, 1, got, &err), 0);
  CHECK_EQ_U64(got[0], 0);
  CHECK_EQ_U64(got[6], 0);
  tpl__model_free(m);
  m = staged_model(TPL_FMT_MLC);
  memset(got, 0, sizeof(got));
  write_text("mlc-chat-config.json",
             "{\"model_config\": {\"num_hidden_layers\": 4}}");
  CHECK_EQ_INT(plan_grid(m, 2, 1, 2, got, &err), 0);
  for (int i = 0; i < 7; i++)
    CHECK_EQ_U64(got[i], want[i]);
  tpl__model_free(m);
}

/* Refusals: P above the layer count and P not dividing it are usage
 * errors with the numbers; no layer count at all is one too; a tied
 * model with an lm_head is a plan error naming it. */
static void test_plan_stage_refusals(void) {
  uint32_t got[7];
  struct tpl__error err = {0};
  struct tpl__model *m = staged_model(TPL_FMT_ST_INDEX);
  write_text("plan.json", "{\"rules\": []}");
  write_text("config.json", "{\"num_hidden_layers\": 4}");
  CHECK_EQ_INT(plan_grid(m, 8, 1, 8, got, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "--pp 8: expected 1..4");
  CHECK_EQ_INT(plan_grid(m, 3, 1, 3, got, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "--pp 3 does not divide the 4 layers");
  write_text("config.json", "{\"hidden_size\": 4}");
  CHECK_EQ_INT(plan_grid(m, 2, 1, 2, got, &err), TPL_EUSAGE);
  CHECK_STR_CONTAINS(err.msg, "num_hidden_layers");
  write_text("config.json",
             "{\"num_hidden_layers\": 4, \"tie_word_embeddings\": true}");
  CHECK_EQ_INT(plan_grid(m, 2, 1, 2, got, &err), TPL_EPLAN);
  CHECK_STR_CONTAINS(err.msg, "lm_head.weight");
  tpl__model_free(m);
}

int main(void) {
  RUN(test_example_12_segs_444);
  RUN(test_example_gqa);
  RUN(test_example_dim1);
  RUN(test_example_3d);
  RUN(test_example_three_ranks);
  RUN(test_example_n1);
  RUN(test_mlc_segs_and_out_shape);
  RUN(test_offsets_and_replicated);
  RUN(test_f32_to_bf16);
  RUN(test_finish_bytes_scales_bias);
  RUN(test_bias_resolve);
  RUN(test_overflow_names_tensor);
  RUN(test_from_model_carries_source);
  RUN(test_holds_by_stage);
  RUN(test_place_per_stage);
  RUN(test_ep_map);
  RUN(test_ep_holds_owner);
  RUN(test_ep_spans_replicas);
  RUN(test_ep_size);
  RUN(test_ep_missing_expert);
  RUN(test_grid_shards_by_tp);
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_job.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) {
    printf("Bail out! mkdtemp failed\n");
    return 1;
  }
  RUN(test_plan_stages);
  RUN(test_plan_stage_refusals);
  remove_tmpdir();
  return tap_done();
}
