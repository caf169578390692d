/* presets.h - built-in shard plans for every architecture MLC LLM shards
 * (tables in preset_tables.c), with sizes and divisibility checks taken
 * from config.json (HF checkpoints) or mlc-chat-config.json (MLC weight
 * directories), and the check that a model has every tensor its preset
 * must shard.  DESIGN.md section 3. */
#ifndef TPL_PRESETS_H
#define TPL_PRESETS_H

#include <jansson.h>
#include <stdint.h>

#include "plan.h"

/* Returns 1 when `name` is a preset name or a model_type alias of one
 * ("deepseek_v3", "stablelm", ...), else 0. */
int tpl__preset_known(const char *name);

/* Returns a static comma-separated list of the preset names. */
const char *tpl__preset_names(void);

/* Builds preset `name` from a parsed config: for HF names (`mlc` 0)
 * `config` is config.json; for MLC's fused names (`mlc` 1) it is
 * mlc-chat-config.json (sizes read from its "model_config").  `what`
 * names the config file in messages.  Checks heads, kv heads and
 * intermediate size divide by `nshards` (TPL_EINDIVISIBLE naming the
 * number and the shard counts 1..64 that would work); with `ep` (--ep:
 * routed experts go whole to the ranks, experts.h) the routed experts'
 * moe_intermediate_size (and intermediate_size where they are the only
 * MLP: mixtral, gpt-oss) is not cut, so it is not checked.  The plan records
 * the preset it came from (preset, preset_mlc).  *out is freed with
 * tpl__plan_free.  Returns 0, TPL_EPLAN (unknown name), TPL_EFORMAT (bad
 * config), TPL_EINDIVISIBLE or -ENOMEM. */
int tpl__preset_from_config(const char *name, int mlc, const json_t *config,
                            const char *what, uint32_t nshards, int ep,
                            struct tpl__plan **out, struct tpl__error *err);

/* Stores in *name the preset a parsed config asks for (static string):
 * HF config.json by "architectures"[0] (e.g. "LlamaForCausalLM"), else by
 * "model_type"; mlc-chat-config.json by "model_type".  Returns 0 or
 * TPL_EPLAN naming what was found. */
int tpl__preset_detect(const json_t *config, int mlc, const char *what,
                       const char **name, struct tpl__error *err);

/* Checks model `m` against the preset plan `p` was built from
 * (p->preset), after tpl__plan_apply filled `s` (one strategy per
 * tensor); plans from files pass unchecked.  `config` is the parsed
 * config the preset was built from (NULL if none), which says where a
 * mixture-of-experts model puts its MoE layers.  Refuses (TPL_EPLAN,
 * naming the preset, the tensor or glob and the layer) a tensor of 2 or
 * more dims inside a layer that no rule matched, a layer without a
 * tensor the preset must shard there, and a model where no layer matches
 * the preset at all.  Quantized params (".q_weight", ".q_scale",
 * ".weight_scale_inv") count for their weight.  Returns 0, TPL_EPLAN or
 * -ENOMEM. */
int tpl__preset_check(const struct tpl__plan *p, const struct tpl__model *m,
                      const struct tpl__strategy *s, const json_t *config,
                      struct tpl__error *err);

#endif
