/* synth.h - random but deterministic checkpoints for demos, tests and
 * benchmarks: an HF-style directory (config.json plus one safetensors file
 * or a sharded set with model.safetensors.index.json) with the real tensor
 * names and shapes of eight architectures, or an MLC weight directory
 * (tensor-cache.json, params_shard_*.bin, mlc-chat-config.json). */
#ifndef TPL_SYNTH_H
#define TPL_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "quant.h"

enum tpl__synth_arch {
  TPL_ARCH_LLAMA,
  TPL_ARCH_MISTRAL,
  TPL_ARCH_QWEN2,
  TPL_ARCH_GEMMA,
  TPL_ARCH_MIXTRAL,
  TPL_ARCH_PHI3,
  TPL_ARCH_GPT2,
  TPL_ARCH_GPT_NEOX,
  TPL_ARCH_COUNT
};

enum tpl__synth_format {
  TPL_SYNTH_HF = 0, /* config.json + safetensors */
  TPL_SYNTH_MLC = 1 /* MLC weight directory */
};

/* Everything that decides a synthetic checkpoint.  Sizes left 0 take the
 * arch's defaults in tpl__synth_resolve; arch and dtype must be valid (the
 * command line checks them). */
struct tpl__synth_opts {
  int arch;   /* enum tpl__synth_arch */
  int format; /* enum tpl__synth_format */
  int dtype;  /* TPL_DT_BF16, TPL_DT_F16 or TPL_DT_F32 */
  uint64_t layers;
  uint64_t hidden;
  uint64_t heads;
  uint64_t kv_heads; /* llama-like archs; gpt2/gpt_neox: = heads */
  uint64_t intermediate;
  uint64_t vocab;
  uint64_t experts; /* mixtral only */
  uint64_t seed;
  uint64_t files; /* safetensors files (HF format) */
  double gib;     /* > 0: choose layers to reach this size */
  int force;      /* overwrite an existing non-empty dir */
  /* MLC only: the scheme to store quantized params as (q4f16_1, q3f16_1,
   * e4m3_e4m3_f16, fp8_e4m3fn_bf16_block_scale, ...), NULL for none;
   * its model dtype replaces `dtype`. */
  const struct tpl__quant_scheme *quant;
};

/* What tpl__synth_write wrote. */
struct tpl__synth_summary {
  size_t files; /* data files (safetensors or shard .bin) */
  size_t tensors;
  uint64_t bytes; /* tensor data bytes */
};

/* Returns the arch named `name` ("llama", ..., "gpt_neox"; "gpt-neox" is
 * accepted too), or -1. */
int tpl__synth_arch_from_name(const char *name);

/* Returns the static name of a valid arch. */
const char *tpl__synth_arch_name(size_t arch);

/* Fills the sizes left 0 in `o` with the arch's defaults (a model of a few
 * MiB), picks the layer count for o->gib, and checks every size (heads
 * divide hidden, kv heads divide heads, caps, --files against the tensor
 * count, --format mlc only for llama-like archs, --quant only with
 * --format mlc and a scheme synth writes; the scheme's model dtype
 * replaces o->dtype).  Returns 0 or TPL_EUSAGE with a message naming the
 * option. */
int tpl__synth_resolve(struct tpl__synth_opts *o, struct tpl__error *err);

/* Writes the checkpoint described by a resolved `o` into `dir` (created
 * when missing; an existing non-empty dir is refused with TPL_EOUTPUT
 * unless o->force, which first removes the files synth itself writes).
 * Every file goes to a temp name, is fsynced and renamed; data is
 * generated and written in bounded chunks; on failure the files already
 * written are removed again.  Fills *sum on success.
 * Returns 0, TPL_E* or -errno. */
int tpl__synth_write(const struct tpl__synth_opts *o, const char *dir,
                     struct tpl__synth_summary *sum, struct tpl__error *err);

#endif
