/* planner.h - resolving --plan for a model: a plan file, a preset name or
 * "auto", with the model's config read once for the preset, its
 * quantization and the preset check.  DESIGN.md section 3. */
#ifndef TPL_PLANNER_H
#define TPL_PLANNER_H

#include <stdint.h>

#include "plan.h"
#include "topology.h"

/* Resolves --plan ARG for model `m` and grid->tp shards: ARG is a plan
 * file path, a preset name (llama, mistral, qwen2, gemma, mixtral, phi3,
 * gpt2, gpt_neox, ...) or "auto" (from m->dir's config.json, or
 * mlc-chat-config.json for an MLC directory).  Presets read their sizes
 * from the config and check that heads, kv heads and intermediate size
 * divide by grid->tp (TPL_EINDIVISIBLE naming the number and the shard
 * counts that would work); a preset without its config is -ENOENT with a
 * hint to pass --plan FILE.  The plan's `quant` is read from the same
 * config (a missing one, or any error in an HF config.json, leaves the
 * defaults), and a scheme MLC cannot shard grid->tp ways is refused
 * (tpl__quant_check_tp).
 *
 * Then applies the plan to every tensor of `m` (tpl__plan_apply), checks
 * the model against its preset (tpl__preset_check) and gives every tensor
 * its pipeline stages.  With grid->pp > 1 the same config gives the layer
 * count ("num_hidden_layers" of config.json, of "model_config" in
 * mlc-chat-config.json) and "tie_word_embeddings"; a missing count is
 * TPL_EUSAGE, a pp that does not split the layers TPL_EUSAGE with the
 * numbers (tpl__stage_check), a tensor MLC puts on no stage TPL_EPLAN
 * (tpl__tensor_stages).  With pp == 1 every tensor is on [0, 1).
 *
 * On success *plan (tpl__plan_free), *strategies (free(); one per tensor,
 * func_name borrowing from *plan) and *stages (free(); one per tensor) are
 * the caller's. */
/* --skip-mtp: removes from `m` the multi-token-prediction layers its
 * config.json declares (num_nextn_predict_layers, DeepSeek-V3): every
 * tensor of layer num_hidden_layers and above, so that the job holds the
 * main model only, as vLLM's main model loads it (deepseek_v2.py skips
 * them, get_spec_layer_idx_from_weight_name).  A model without them (an
 * MLC directory, another architecture, no config) is left as it is.
 * Returns 0, or the config's read or parse failure (err naming the
 * file). */
int tpl__plan_skip_mtp(struct tpl__model *m, struct tpl__error *err);

/* The quantization facts of `m`'s config, as a plan for it would hold
 * them (its `quant`: MLC's scheme, HF's quant_method, also from
 * hf_quant_config.json, the fp8 block), for a listing without a plan.
 * Returns 0 with *out filled (defaults when the config names none), or
 * the read or parse failure of an MLC config or of
 * hf_quant_config.json. */
int tpl__plan_quant(const struct tpl__model *m, struct tpl__quant_info *out,
                    struct tpl__error *err);

/* The plan --plan ARG gives model `m` at `nshards` shards, resolved as
 * tpl__plan_for_grid resolves it (its config, quantization, checks) but
 * applied to nothing.  On success *out is the caller's (tpl__plan_free).
 * Returns tpl__plan_for_grid's codes. */
int tpl__plan_resolve(const char *arg, const struct tpl__model *m,
                      uint32_t nshards, struct tpl__plan **out,
                      struct tpl__error *err);

int tpl__plan_for_grid(const char *arg, const struct tpl__model *m,
                       const struct tpl__grid *grid, struct tpl__plan **plan,
                       struct tpl__strategy **strategies,
                       struct tpl__stages **stages, struct tpl__error *err);

#endif
