/* quant.h - MLC LLM's quantized parameters and what the weight directory's
 * config says about them: the scheme (mlc-chat-config.json "quantization",
 * e.g. q4f16_1), the shard count it was configured for
 * ("tensor_parallel_shards") and the fp8 block size ("weight_block_size").
 * A quantized param is sharded as its base weight's rule says, transformed
 * as the files of MLC's quantization/ do (DESIGN.md section 2). */
#ifndef TPL_QUANT_H
#define TPL_QUANT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "shard.h"

enum tpl__quant_kind {
  TPL_QK_NONE = 0,    /* q0f16 ... (or no "quantization" key) */
  TPL_QK_GROUP,       /* group-quant: q4f16_1, q3f16_0, ... */
  TPL_QK_PER_TENSOR,  /* per-tensor-quant: e4m3_e4m3_f16, ... */
  TPL_QK_BLOCK_SCALE, /* block-scale-quant: fp8_e4m3fn_bf16_block_scale */
  TPL_QK_FT,          /* ft-quant: q4f16_ft */
  TPL_QK_AWQ          /* awq: q4f16_autoawq */
};

/* One of MLC's schemes (quantization/quantization.py, QUANTIZATION). */
struct tpl__quant_scheme {
  const char *name;
  int kind;               /* enum tpl__quant_kind */
  int kn_layout;          /* group-quant with linear_weight_layout "KN" */
  uint32_t group_size;    /* group-quant */
  uint32_t bits;          /* group-quant: quantize_dtype int3 / int4 */
  int model_dtype;        /* enum tpl_dtype of unquantized params and scales */
  int weight_dtype;       /* fp8 kinds: the quantized weight's dtype */
  unsigned embedding : 1; /* quantize_embedding */
  unsigned final_fc : 1;  /* quantize_final_fc (lm_head) */
  unsigned scale : 1;     /* per-tensor: use_scale (q_scale [1]) */
  unsigned calib : 1;     /* per-tensor: q_calibration_scale [1] */
  unsigned act_scale : 1; /* block-scale: static activation_scale */
};

/* What a model directory's config says about quantization. */
struct tpl__quant_info {
  char scheme_name[64];                   /* "" when the config has none */
  const struct tpl__quant_scheme *scheme; /* NULL: none, or unknown name */
  uint32_t config_shards; /* mlc-chat-config tensor_parallel_shards; 0 none */
  uint64_t block[2];      /* fp8 weight_block_size; MLC's default 128 x 128 */
  /* HF config.json quantization_config.quant_method ("fp8", "mxfp4",
   * "compressed-tensors", ...); "" when the config has none. */
  char method[32];
};

/* The quantized params MLC writes beside (or instead of) `<base>.weight`. */
enum tpl__qparam {
  TPL_QP_NONE = 0,
  TPL_QP_Q_WEIGHT,  /* <base>.q_weight: group / per-tensor packed weight */
  TPL_QP_Q_SCALE,   /* <base>.q_scale: group scales, or per-tensor [1] */
  TPL_QP_Q_CALIB,   /* <base>.q_calibration_scale: per-tensor [1] */
  TPL_QP_SCALE_INV, /* <base>.weight_scale_inv: fp8 block scales */
  TPL_QP_ACT_SCALE, /* <base>.activation_scale: fp8 static activation */
  TPL_QP_COUNT
};

/* Returns the scheme called `name`, or NULL. */
const struct tpl__quant_scheme *tpl__quant_find(const char *name);

/* {"quantization": scheme_name, "quant_method": method,
 * "weight_block_size": [bn, bk]}: what `plan` (its plan.config),
 * `inspect` and the load report say of `q`.  Returns a new reference, or
 * NULL on ENOMEM. */
json_t *tpl__quant_json(const struct tpl__quant_info *q);

/* The one-line form into buf (`len` bytes, cut when too long): the HF
 * method ("fp8, weight_block_size [128, 128]" for fp8) or else MLC's
 * scheme name; "" when the config names neither.  Returns buf. */
const char *tpl__quant_label(const struct tpl__quant_info *q, char *buf,
                             size_t len);

/* Sets `q` to "no quantization known" (block 128 x 128). */
void tpl__quant_info_init(struct tpl__quant_info *q);

/* Reads quantization facts from a parsed config: for `mlc` 1 an
 * mlc-chat-config.json ("quantization", "tensor_parallel_shards",
 * "model_config"."weight_block_size"), else an HF config.json
 * ("quantization_config"."weight_block_size").  `what` names the file in
 * messages.  Returns 0 or TPL_EFORMAT; `q` is written only on success. */
int tpl__quant_info_parse(const json_t *cfg, int mlc, const char *what,
                          struct tpl__quant_info *q, struct tpl__error *err);

/* Refuses an HF quantization method tpload does not know how to shard
 * (anything but "fp8" and "mxfp4": compressed-tensors, modelopt, awq,
 * gptq, bitsandbytes, ...), whatever the plan, before any tensor is
 * looked at.  Returns 0 or TPL_EPLAN naming the method and `what`. */
int tpl__quant_check_method(const struct tpl__quant_info *q, const char *what,
                            struct tpl__error *err);

/* Refuses, for nshards > 1, the schemes MLC refuses under tensor
 * parallelism: KN layouts (q3f16_0, q4f16_0, q4bf16_0: compile.py), ft-quant
 * (compile.py, convert_weight.py) and AWQ (its layers carry no shard
 * strategy).  Returns 0 or TPL_EPLAN naming the scheme. */
int tpl__quant_check_tp(const struct tpl__quant_info *q, uint32_t nshards,
                        const char *what, struct tpl__error *err);

/* When `name` is "<base>.<suffix>", stores "<base>.weight" in `base`
 * (cap bytes) and returns 1; else (or when it does not fit) 0. */
int tpl__quant_weight_of(const char *name, const char *suffix, char *base,
                         size_t cap);

/* Classifies `name` by its suffix; for a quantized param stores
 * "<base>.weight" in `base` (cap bytes; a name that does not fit is
 * TPL_QP_NONE).  Returns enum tpl__qparam. */
int tpl__quant_param(const char *name, char *base, size_t cap);

/* The func_name suffix MLC gives a param of kind `qp` ("_q_weight",
 * "_q_scale", "_scale_inv", "_activation_scale"), or NULL for kinds MLC
 * never shards. */
const char *tpl__quant_func_suffix(int qp);

/* Derives the rule of quantized param `t` (kind `qp`) from its base
 * weight's shard spec `base` (the weight itself, when present, is
 * `weight`, else NULL), as MLC does:
 *   q_weight / group q_scale: the same dim and segs (utils.py
 *     apply_sharding), groups along the sharded dim divisible by N
 *     (group_quantization.py, GroupQuantizeLinear);
 *   per-tensor q_scale / q_calibration_scale (one element): replicated
 *     (per_tensor_quantization.py: "the same for all shards");
 *   weight_scale_inv: the same dim, segs in block units (segs[j] /
 *     block[dim], block_scale_quantization.py);
 *   activation_scale [in blocks]: sharded along its only dim, segs in
 *     block units, when the weight is cut along its input (last) dim, else
 *     replicated (every rank sees the whole input).  MLC applies the
 *     weight's dim to this 1-D tensor, which cannot run; this is the rule
 *     its per-shard param shapes imply.
 * Stores the spec in *out and whether to replicate in *replicate; checks
 * the spec against `t` (tpl__shard_check).  Returns 0, TPL_EPLAN or
 * TPL_EINDIVISIBLE naming the tensor and the quantization rule. */
int tpl__quant_derive(int qp, const struct tpl__quant_info *q,
                      const struct tpl__tensor *t,
                      const struct tpl__tensor *weight,
                      const struct tpl__shard_spec *base, uint32_t nshards,
                      struct tpl__shard_spec *out, int *replicate,
                      struct tpl__error *err);

/* The block-scale cut of scale tensor `t` whose weight (`weight`, NULL
 * if absent) is cut by `base`, in `block`-wide blocks along the cut dim:
 * segs in block units, and for nshards > 1 each rank's slice of every
 * segment whole blocks (vLLM's validate_fp8_block_shape).  Stores the
 * spec in *out (which must hold a copy of *base).  Returns 0 or
 * TPL_EINDIVISIBLE naming `method` (the scheme and its blocks, "fp8
 * weight_block_size [128, 128]"), the tensor and the numbers. */
int tpl__quant_block_cut(const struct tpl__tensor *t,
                         const struct tpl__tensor *weight,
                         const struct tpl__shard_spec *base, uint64_t block,
                         const char *method, uint32_t nshards,
                         struct tpl__shard_spec *out, struct tpl__error *err);

/* Returns 1 when `name` is a scale or zero-point param whose values belong
 * to slices of a weight (q_scale, weight_scale_inv, and the HF names
 * scales, qzeros, weight_scale), storing the candidate weight names'
 * common stem "<base>." in `stem`; else 0. */
int tpl__quant_is_scale(const char *name, char *stem, size_t cap);

#endif
