/* scope.h - the bias-scaling scope (DESIGN.md section 2): what each rank
 * makes of its delivered copy of a row-parallel bias (the bias policy:
 * divide it by N, keep it on rank 0 only, or keep it whole); plus the
 * element conversions it needs.  Pure: works on a buffer. */
#ifndef TPL_SCOPE_H
#define TPL_SCOPE_H

#include <stddef.h>
#include <stdint.h>

/* A row-parallel (scale_bias) tensor's policy.  A rule's DEFAULT takes
 * the load's family's choice (tpl__bias_resolve). */
enum tpl__bias {
  TPL_BIAS_DEFAULT = 0,
  TPL_BIAS_SCALE, /* bias / N on every rank: MLC's graph adds every copy */
  TPL_BIAS_RANK0, /* whole on shard 0, zeros on the others */
  TPL_BIAS_WHOLE, /* whole on every rank: the engine adds it once */
  TPL_BIAS_COUNT
};

/* A load's bias family (--bias-policy): the policy of rules that name
 * none.  MLC scales every one; vLLM loads them whole (RowParallelLinear
 * adds the bias on tp_rank 0 only) except where its model's loader zeroes
 * the other ranks' copies (a rule's `vllm` choice); WHOLE (the
 * --no-bias-scaling alias, and layouts whose engine divides the biases
 * itself) delivers every one whole, the rules' own choices included. */
enum tpl__bias_family {
  TPL_BIASF_MLC = 0,
  TPL_BIASF_VLLM,
  TPL_BIASF_WHOLE,
  TPL_BIASF_COUNT
};

/* The policy a scale_bias tensor gets under `family`: `fixed` (a plan
 * file's "bias") unless the family is WHOLE, else the family's default,
 * where `vllm` (a preset's TPL_BIAS_RANK0, or DEFAULT for whole) is
 * vLLM's. */
int tpl__bias_resolve(int fixed, int vllm, int family);

/* "scale", "rank0", "whole" ("default" for DEFAULT); static. */
const char *tpl__bias_name(int policy);
/* "mlc", "vllm", "whole"; static. */
const char *tpl__bias_family_name(int family);
/* The enum value `s` names, or -1: tpl__bias_name's names, not
 * "default" / tpl__bias_family_name's. */
int tpl__bias_parse(const char *s);
int tpl__bias_family_parse(const char *s);

/* What shard `shard` of `nshards` makes of its `nbytes` bytes at `p`
 * (elements of `dtype`) of a bias under `policy`: SCALE divides them by
 * nshards (tpl__scale_bias), RANK0 zeroes them on shards other than 0,
 * WHOLE keeps them.  Returns 0 or TPL_EDTYPE (not a float dtype). */
int tpl__bias_apply(void *p, uint64_t nbytes, int dtype, int policy,
                    uint32_t nshards, uint32_t shard);

/* The factor shard 0's copy carries: 1/nshards under SCALE, else 1. */
double tpl__bias_factor(int policy, uint32_t nshards);

/* Divides the `nbytes` bytes at `p` (elements of `dtype`) by `divisor` in
 * place: F32 and F64 natively, F16 and BF16 through F32 with
 * round-to-nearest-even.  Returns 0, or TPL_EDTYPE for any other dtype.
 * divisor 1 leaves the bytes unchanged. */
int tpl__scale_bias(void *p, uint64_t nbytes, int dtype, uint32_t divisor);

/* The inverse of tpl__scale_bias for a re-shard: multiplies the `nbytes`
 * bytes at `p` by `factor` in place, F32 natively, F64 in double, F16
 * and BF16 through F32 rounded once to nearest-even.  Exact for F32 and
 * F64 when factor is a power of two; otherwise within one unit of the
 * last place of the scaled bias.  Returns 0, or TPL_EDTYPE. */
int tpl__unscale_bias(void *p, uint64_t nbytes, int dtype, uint32_t factor);

/* Expands `count` bf16 values stored at the start of `p` into float32
 * values filling 4 * count bytes of `p` (f32 bits = u16 << 16), in place. */
void tpl__bf16_expand_inplace(void *p, uint64_t count);

/* IEEE binary16 <-> binary32 (round to nearest even). */
float tpl__f16_to_f32(uint16_t h);
uint16_t tpl__f32_to_f16(float f);

#endif
