/* fuzz_plan.c - libFuzzer target for plans: the input is parsed as a plan
 * file and, when valid, applied to a fixed small model (scalar, vector,
 * matrix, 3-D, int and float tensors, and MLC quantized params) for 1, 2
 * and 3 shards, and the shard info built from the result (each count
 * under another bias family, so the "bias" rule key is resolved all
 * three ways); the same input
 * is also read as a config.json (and an mlc-chat-config.json) for a few
 * presets whose sizes differ in kind (fused qkv, GPT defaults, MoE, latent
 * attention, text_config, halved intermediate), detected as an
 * architecture, used as a tensor name that the preset check (layer
 * number, quantized suffix, required tensors) must judge, and read as an
 * mlc-chat-config.json whose quantization facts the quantized params are
 * then derived under, and as a config.json whose compressed-tensors
 * scheme (quant_ct.c) the compressed-tensors params are derived under.
 * Any crash, leak or UB is a bug. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "job.h"
#include "model.h"
#include "plan.h"
#include "presets.h"
#include "quant.h"
#include "shardinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void add(struct tpl__model *m, const char *name, int dtype, int ndim,
                uint64_t a, uint64_t b, uint64_t c) {
  struct tpl__tensor t;
  memset(&t, 0, sizeof(t));
  t.name = strdup(name);
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape[0] = a;
  t.shape[1] = b;
  t.shape[2] = c;
  t.nbytes = tpl__tensor_numel(&t) * tpl__dtype_size(dtype);
  if (t.name == NULL || tpl__model_add_tensor(m, &t) != 0) free(t.name);
}

static struct tpl__model *fixed_model(void) {
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  uint32_t idx;
  if (m == NULL) return NULL;
  tpl__model_add_file(m, "fuzz", "fuzz", 0, &idx);
  add(m, "scalar", TPL_DT_F32, 0, 0, 0, 0);
  add(m, "model.layers.0.self_attn.qkv_proj.weight", TPL_DT_BF16, 2, 64, 32, 0);
  add(m, "model.layers.0.mlp.gate_up_proj.weight", TPL_DT_BF16, 2, 96, 32, 0);
  add(m, "h.0.attn.c_attn.weight", TPL_DT_F32, 2, 32, 96, 0);
  add(m, "h.0.attn.c_proj.bias", TPL_DT_F16, 1, 32, 0, 0);
  add(m, "ids", TPL_DT_I64, 1, 6, 0, 0);
  add(m, "experts", TPL_DT_F16, 3, 2, 12, 4);
  add(m, "empty", TPL_DT_F32, 2, 0, 4, 0);
  add(m, "h.0.mlp.c_fc.q_weight", TPL_DT_U32, 2, 96, 4, 0);
  add(m, "h.0.mlp.c_fc.q_scale", TPL_DT_F16, 2, 96, 1, 0);
  add(m, "h.0.mlp.c_fc.q_calibration_scale", TPL_DT_F32, 1, 1, 0, 0);
  add(m, "h.0.attn.c_proj.weight", TPL_DT_F8_E4M3, 2, 32, 256, 0);
  add(m, "h.0.attn.c_proj.weight_scale_inv", TPL_DT_F32, 2, 1, 2, 0);
  add(m, "h.0.attn.c_proj.activation_scale", TPL_DT_F32, 1, 2, 0, 0);
  add(m, "h.0.attn.c_proj.scales", TPL_DT_F16, 2, 2, 32, 0);
  add(m, "h.0.mlp.c_fc.weight_packed", TPL_DT_I32, 2, 96, 4, 0);
  add(m, "h.0.mlp.c_fc.weight_scale", TPL_DT_F16, 2, 96, 1, 0);
  add(m, "h.0.mlp.c_fc.weight_zero_point", TPL_DT_I32, 2, 12, 1, 0);
  add(m, "h.0.mlp.c_fc.weight_shape", TPL_DT_I64, 1, 2, 0, 0);
  add(m, "h.0.mlp.c_fc.weight_g_idx", TPL_DT_I32, 1, 32, 0, 0);
  add(m, "h.0.mlp.c_fc.input_scale", TPL_DT_F32, 1, 1, 0, 0);
  return m;
}

static void apply_all(const struct tpl__plan *p, const struct tpl__model *m,
                      uint32_t n, const json_t *cfg) {
  struct tpl__strategy *st = calloc(m->ntensors, sizeof(*st));
  struct tpl__job *job = NULL;
  struct tpl__error err;
  json_t *info = NULL;
  if (st == NULL) return;
  if (tpl__plan_apply(p, m, n, st, &err) == 0 &&
      tpl__preset_check(p, m, st, cfg, &err) <= 0 &&
      tpl__job_from_model(
          m, st, NULL, "fuzz", "m", &(struct tpl__grid){n, n, 1, 1, 0},
          TPL_BIASF_MLC + (int)(n % TPL_BIASF_COUNT), &job, &err) == 0 &&
      tpl__shardinfo_build(job, NULL, &info) == 0)
    json_decref(info);
  tpl__job_free(job);
  free(st);
}

static void try_presets(const uint8_t *data, size_t size,
                        const struct tpl__model *m) {
  static const char *const names[] = {"phi3",   "gpt2",        "qwen2_moe",
                                      "llama4", "deepseek_v2", "qwen"};
  json_t *cfg = json_loadb((const char *)data, size, 0, NULL);
  struct tpl__error err;
  const char *detected;
  if (!json_is_object(cfg)) {
    json_decref(cfg);
    return;
  }
  (void)tpl__preset_detect(cfg, 0, "fuzz", &detected, &err);
  (void)tpl__preset_detect(cfg, 1, "fuzz", &detected, &err);
  for (size_t i = 0; i < ARRAY_SIZE(names); i++)
    for (uint32_t n = 1; n <= 2; n++) {
      struct tpl__plan *p = NULL;
      if (tpl__preset_from_config(names[i], (int)n - 1, cfg, "fuzz", n, 0, &p,
                                  &err) == 0)
        apply_all(p, m, n, cfg);
      tpl__plan_free(p);
    }
  json_decref(cfg);
}

/* The input as a tensor name, checked against the llama preset. */
static void try_name(const uint8_t *data, size_t size) {
  static const char cfg_text[] =
      "{\"hidden_size\": 32, \"num_attention_heads\": 4, "
      "\"intermediate_size\": 48}";
  struct tpl__model *m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  json_t *cfg = json_loads(cfg_text, 0, NULL);
  struct tpl__plan *p = NULL;
  struct tpl__error err;
  char name[256];
  size_t len = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
  memcpy(name, data, len);
  name[len] = '\0';
  if (m != NULL && cfg != NULL && name[0] != '\0' &&
      tpl__preset_from_config("llama", 0, cfg, "fuzz", 2, 0, &p, &err) == 0) {
    add(m, name, TPL_DT_F16, 2, 4, 4, 0);
    add(m, "model.layers.0.self_attn.q_proj.weight", TPL_DT_F16, 2, 32, 32, 0);
    apply_all(p, m, 2, cfg);
  }
  tpl__plan_free(p);
  json_decref(cfg);
  tpl__model_free(m);
}

/* The input as an mlc-chat-config.json: a fixed plan over the quantized
 * params, derived under whatever it says. */
static void try_quant(const uint8_t *data, size_t size,
                      const struct tpl__model *m) {
  struct tpl__shard_spec row = {.dim = 1, .nsegs = 2, .segs = {128, 128}};
  struct tpl__shard_spec col = {.dim = 0};
  struct tpl__plan *p = tpl__plan_new("fuzz quant");
  json_t *cfg = json_loadb((const char *)data, size, 0, NULL);
  struct tpl__error err;
  if (p != NULL && json_is_object(cfg) &&
      tpl__plan_add_rule(p, "*.c_fc.weight", TPL_RULE_SHARD, NULL, &col) == 0 &&
      tpl__plan_add_rule(p, "*.c_proj.weight", TPL_RULE_SHARD, NULL, &row) ==
          0 &&
      tpl__quant_info_parse(cfg, 1, "fuzz", &p->quant, &err) == 0)
    for (uint32_t n = 1; n <= 2; n++)
      if (tpl__quant_check_tp(&p->quant, n, "fuzz", &err) == 0)
        apply_all(p, m, n, NULL);
  /* And as an HF config's compressed-tensors quantization_config. */
  if (p != NULL && json_is_object(cfg)) {
    tpl__ct_parse(json_object_get(cfg, "quantization_config"), &p->ct);
    if (tpl__ct_check(&p->ct, "fuzz", &err) == 0)
      for (uint32_t n = 1; n <= 2; n++)
        apply_all(p, m, n, NULL);
    tpl__ct_parse_modelopt(cfg, &p->ct);
    if (tpl__ct_check(&p->ct, "fuzz", &err) == 0) apply_all(p, m, 2, NULL);
  }
  json_decref(cfg);
  tpl__plan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__model *m = fixed_model();
  struct tpl__plan *p = NULL;
  struct tpl__error err;
  if (m == NULL) return 0;
  if (tpl__plan_parse((const char *)data, size, "fuzz", &p, &err) == 0)
    for (uint32_t n = 1; n <= 3; n++)
      apply_all(p, m, n, NULL);
  tpl__plan_free(p);
  try_quant(data, size, m);
  try_presets(data, size, m);
  try_name(data, size);
  tpl__model_free(m);
  return 0;
}
