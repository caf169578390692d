/* job.h - the job table, the one per-tensor record after planning: what
 * every rank needs to know about every tensor to take part in a load
 * (name, dtype, full shape, storage encoding, the strategy of its plan
 * rule), what follows from it for each rank (its shape, its byte counts,
 * where the tensor sits in its store) and where its bytes are in the
 * checkpoint's files.  Rank 0 builds it from the model and plan; the other
 * ranks get it by broadcast.  Pure: no I/O, no MPI. */
#ifndef TPL_JOB_H
#define TPL_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "http.h"
#include "model.h"
#include "plan.h"
#include "shard.h"
#include "topology.h"

struct tpl__origin;

/* Every tensor sits in a rank's store (store.h) at a multiple of this
 * offset: the job lays the store out (tpl__job_place). */
#define TPL_STORE_ALIGN 64

struct tpl__job_tensor {
  char *name; /* owned */
  int dtype;  /* decoded dtype */
  int ndim;
  uint64_t shape[TPL_MAX_DIMS]; /* full shape */
  int encoding;                 /* enum tpl__encoding */
  int kind;                     /* enum tpl__rule_kind */
  int bias;        /* SCALE_BIAS: enum tpl__bias, resolved (never DEFAULT) */
  char *func_name; /* owned; NULL unless SHARD */
  int rule;        /* rank 0 only: index of the plan rule that decided, or -1 */
  struct tpl__shard_spec spec; /* SHARD only */
  /* the source, from the model (broadcast with the job) */
  uint32_t file;        /* index into the model's files and job->files */
  uint64_t file_offset; /* absolute byte offset in that file */
  /* The pipeline stages that hold it (MLC's "pipeline_stages"; [0, 1)
   * when pp == 1); broadcast with the job. */
  struct tpl__stages stages;
  /* Under --ep: enum tpl__ep_kind (plan.h) and, for TPL_EP_WHOLE,
   * the group rank that holds the tensor (its expert's owner: t, or
   * d x tp + t when the group spans replicas); broadcast
   * with the job. */
  int ep;
  uint32_t owner;
  /* derived by tpl__job_finish: */
  uint64_t rank_shape[TPL_MAX_DIMS]; /* what each holder holds */
  uint64_t rank_bytes;               /* decoded bytes each holder holds */
  uint64_t rank_stored;              /* source bytes each holder receives */
  uint64_t stored_bytes;             /* source bytes of the whole tensor */
  /* Per (stage, shard) (tpl__job_place; tpl__job_finish places rank
   * 0): the offset in the store of a rank there, UINT64_MAX when it
   * does not hold the tensor. */
  uint64_t store_offset;
};

/* A checkpoint file as rank 0 validated it (`--read local`). */
struct tpl__job_file {
  char *path; /* owned: as rank 0 opened it (a URL's shown form) */
  uint64_t size;
  int64_t mtime_ns;
  char *url;                /* owned: a remote file's URL, else NULL */
  struct tpl__http_obj obj; /* a remote file's size and validators */
};

struct tpl__job {
  /* world = tp * pp * dp; tp is the shard count of every layout, shape
   * and segs function below and the divisor of bias scaling. */
  struct tpl__grid grid;
  uint32_t stage;   /* the stage store_offset and store_size are for */
  uint32_t experts; /* routed experts per MoE layer under --ep, else 0 */
  int bias_family;  /* enum tpl__bias_family (scope.h): --bias-policy */
  /* Rank 0 (tpl__job_plan): the plan's quantization facts, for the
   * report; zeros in a job from the table. */
  struct tpl__quant_info quant;
  /* Rank 0: the model's tensors rebuilt within an ulp (model.h), for
   * the report; 0 in a job from the table. */
  uint32_t approximate;
  /* Every rank, this generation (tpl__eng_choose_read): every rank read
   * its own slices (read_local, else rank 0 read and MPI delivered), and
   * whether --read auto chose that; for the report. */
  int read_local, read_auto;
  char *model;       /* owned: the MODEL argument */
  char *plan_source; /* owned */
  struct tpl__job_tensor *tensors;
  size_t ntensors;
  /* The model's files (none in a job built by hand or from a table
   * without them); every tensor's file indexes them. */
  struct tpl__job_file *files;
  size_t nfiles;
  /* Where they live (origin.h): the model's, or the one rank 0's table
   * implies; NULL (a job built by hand) is the local origin. */
  const struct tpl__origin *origin;
  uint64_t store_size;   /* per stage: bytes of the store of its ranks */
  uint64_t source_bytes; /* stored bytes of the whole checkpoint */
};

/* Builds the job table for `m` on `grid` under `strategies` and `stages`
 * (one each per tensor; stages NULL: every tensor on stage 0, for
 * grid->pp == 1) and finishes it.  *out is freed with tpl__job_free. */
int tpl__job_from_model(const struct tpl__model *m,
                        const struct tpl__strategy *strategies,
                        const struct tpl__stages *stages,
                        const char *plan_source, const char *model_arg,
                        const struct tpl__grid *grid, int bias_family,
                        struct tpl__job **out, struct tpl__error *err);

/* Resolves --plan `plan_arg` for `m` on `grid` (tpl__plan_for_grid: the
 * plan for grid->tp shards and, when grid->pp > 1, MLC's stages) and
 * builds the job from it: on success *plan (tpl__plan_free) and *out
 * (tpl__job_free) are the caller's.  Returns 0 or what resolving,
 * applying or building returned. */
int tpl__job_plan(const char *plan_arg, const struct tpl__model *m,
                  const char *model_arg, const struct tpl__grid *grid,
                  int bias_family, struct tpl__plan **plan,
                  struct tpl__job **out, struct tpl__error *err);

/* Computes the derived fields (per-holder shapes, bytes) after the
 * tensors' own fields and job->grid are set, and places rank 0
 * (tpl__job_place).  A tensor with stages.count 0 is put on [0, 1) when
 * pp == 1. */
int tpl__job_finish(struct tpl__job *job, struct tpl__error *err);

/* Lays out the store of global rank `rank` (< grid.world): the tensors
 * it holds (tpl__job_holds), in job order, aligned; the others get
 * store_offset UINT64_MAX.  Every rank at the same (stage, shard) gets
 * the same layout.  Sets job->stage and job->store_size.  Returns 0 or
 * TPL_EOVERFLOW naming the tensor. */
int tpl__job_place(struct tpl__job *job, uint32_t rank, struct tpl__error *err);

/* Nonzero when global rank `rank` (< grid.world) holds tensor i: its
 * stage is among the tensor's stages and, for one expert's tensor under
 * --ep, its rank in the expert-parallel group (tpl__grid_ep_rank) is the
 * expert's owner. */
int tpl__job_holds(const struct tpl__job *job, size_t i, uint32_t rank);

/* Shard `shard`'s (0 .. grid.tp - 1) layout over the tensor's stored
 * bytes (every shard of a tensor that is not cut has all of them). */
int tpl__job_layout(const struct tpl__job *job, size_t i, uint32_t shard,
                    struct tpl__layout *out);

/* Turns the `rank_stored` bytes a holder at shard `shard` received of
 * tensor `i` at `p` into what it holds (`rank_bytes` at `p`): decodes
 * f32-to-bf16 storage and applies a scale_bias tensor's policy
 * (tpl__bias_apply: divides by grid.tp, or zeroes it off shard 0).
 * Returns 0 or TPL_EDTYPE (err names the tensor). */
int tpl__job_finish_bytes(const struct tpl__job *job, size_t i, uint32_t shard,
                          uint8_t *p, struct tpl__error *err);

/* Nonzero when the bytes a holder receives of tensor i are already what
 * it holds (tpl__job_finish_bytes would leave them as they are). */
int tpl__job_bytes_final(const struct tpl__job *job, size_t i);

/* MLC's out_shape of a sharded tensor, [tp, *rank_shape], into out
 * (TPL_MAX_DIMS + 1 entries); returns its length. */
size_t tpl__job_out_shape(const struct tpl__job *job,
                          const struct tpl__job_tensor *t, uint64_t *out);

/* A sharded tensor's per-shard segment lengths in MLC's units (full
 * segs / tp, or / parts for a replicated segment; one segment when the
 * rule has none) into out (TPL_MAX_SEGS entries); returns how many. */
size_t tpl__job_mlc_segs(const struct tpl__job *job,
                         const struct tpl__job_tensor *t, uint64_t *out);

/* Checks that every rule of plan file `p` decided some tensor of `job`
 * (built from `p`).  Presets are exempt (they name tensors an
 * architecture may lack, such as biases).  Returns 0 when all were used
 * (or `p` is a preset); else fills err naming the first unused rule and
 * how many there are, and returns TPL_EPLAN when `strict`, 1 (a warning
 * for the caller to print) otherwise. */
int tpl__job_check_unused(const struct tpl__job *job, const struct tpl__plan *p,
                          int strict, struct tpl__error *err);

/* The origin of job's files (origin.h; local for a job built by hand). */
const struct tpl__origin *tpl__job_origin(const struct tpl__job *job);

/* Frees a job; NULL accepted. */
void tpl__job_free(struct tpl__job *job);

#endif
