/* quant_ct.h - compressed-tensors checkpoints (llm-compressor's
 * quantization_config, quant_method "compressed-tensors"): the scheme of
 * its weights and how each quantized param is cut, as vLLM's
 * compressed-tensors schemes load them (DESIGN.md section 2). */
#ifndef TPL_QUANT_CT_H
#define TPL_QUANT_CT_H

#include <jansson.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "shard.h"

/* What a compressed-tensors config says about its weights. */
struct tpl__ct_scheme {
  int present;         /* quant_method "compressed-tensors" */
  char format[32];     /* "pack-quantized", "float-quantized", ... */
  char strategy[16];   /* "group", "channel", "tensor", "block" */
  uint32_t num_bits;   /* 4 or 8 */
  uint64_t group_size; /* group strategy */
  uint64_t block[2];   /* block strategy: block_structure */
  int actorder;        /* weights.actorder set: scales whole on row cuts */
  char problem[160];   /* why tpload cannot shard it; "" when it can */
};

/* Reads quantization_config's format and config_groups into *s (zeroed
 * first); a config that mixes weight schemes, or a format or strategy
 * without rules here, is recorded in s->problem, not failed on, so that
 * tpl__ct_check names it. */
void tpl__ct_parse(const json_t *quant_config, struct tpl__ct_scheme *s);

/* Reads a ModelOpt scheme ({"quant_algo": "NVFP4" | "FP8", "group_size"}
 * from config.json's quantization_config or hf_quant_config.json's
 * "quantization") into *s: NVFP4 is 4-bit groups of group_size (16 by
 * default) packed two per byte along the input dim, FP8 per-tensor; any
 * other algorithm is recorded in s->problem. */
void tpl__ct_parse_modelopt(const json_t *quant, struct tpl__ct_scheme *s);

/* The length along `dim` of weight `x` before packing: NVFP4 packs two
 * values a byte along the input (last) dim of its uint8 weight. */
uint64_t tpl__ct_unpacked(const struct tpl__ct_scheme *s,
                          const struct tpl__tensor *x, int dim);

/* Refuses (TPL_EPLAN, naming `what` and the reason) a scheme whose
 * problem is set.  Returns 0 otherwise. */
int tpl__ct_check(const struct tpl__ct_scheme *s, const char *what,
                  struct tpl__error *err);

/* The compressed-tensors params beside `<base>.weight` (or instead of
 * it: weight_packed). */
enum tpl__ct_param {
  TPL_CT_NONE = 0,
  TPL_CT_PACKED, /* weight_packed [out, in / pack] int32 */
  TPL_CT_SCALE,  /* weight_scale [out, in / g], [out, 1], [1] or blocks */
  TPL_CT_ZERO,   /* weight_zero_point [out / pack, in / g] int32 */
  TPL_CT_SHAPE,  /* weight_shape [2]: the full shape */
  TPL_CT_GIDX,   /* weight_g_idx [in]: activation order */
  TPL_CT_INPUT   /* input_scale: static activation scale */
};

/* Classifies `name` by its suffix; for a compressed-tensors param stores
 * "<base>.weight" in `base` (cap bytes).  Returns enum tpl__ct_param. */
int tpl__ct_param(const char *name, char *base, size_t cap);

/* Derives the rule of compressed-tensors param `t` (kind `ct`) from its
 * weight's shard spec `base`; `weight` is the weight (`<base>.weight`
 * or `<base>.weight_packed`), NULL if absent.  As vLLM loads them
 * (compressed_tensors_wNa16.py, compressed_tensors_w8a8_fp8.py,
 * compressed_tensors_w8a8_int8.py):
 *   weight_packed: the weight's dim and segs (the packed dim is the
 *     input dim; segs there are refused);
 *   weight_scale: one element, or per channel [out, 1] under an input
 *     cut, or with activation order under an input cut: whole; blocks:
 *     segs in block units, each rank's slice whole blocks; else the
 *     weight's dim (rows, or the input's groups);
 *   weight_zero_point: under a row cut, segs in packed rows (out /
 *     rows of the zero point), each whole; under an input cut as
 *     weight_scale;
 *   weight_shape, input_scale: whole (vLLM copies the full shape);
 *   weight_g_idx: cut along its only dim under an input cut, else
 *     whole.
 * Stores the spec in *out and whether to replicate in *replicate.
 * Returns 0 or TPL_EINDIVISIBLE / TPL_EPLAN naming the tensor. */
int tpl__ct_derive(int ct, const struct tpl__ct_scheme *s,
                   const struct tpl__tensor *t,
                   const struct tpl__tensor *weight,
                   const struct tpl__shard_spec *base, uint32_t nshards,
                   struct tpl__shard_spec *out, int *replicate,
                   struct tpl__error *err);

#endif
