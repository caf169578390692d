/* scope.c - bias scaling: a rank divides its own copy of a row-parallel
 * bias by N so that the all-reduce of N partial outputs adds the bias
 * once.  Half-precision types go through float32 and round to nearest
 * even, exactly as numpy's astype does. */
#include <string.h>

#include "common.h"
#include "dtype.h"
#include "scope.h"

float tpl__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, x;
  float f;
  if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in binary32 */
    f = (float)man * 0x1p-24f;
    return sign ? -f : f;
  }
  if (exp == 0x1f)
    x = sign | 0x7f800000u | (man << 13);
  else
    x = sign | ((exp + 112) << 23) | (man << 13);
  memcpy(&f, &x, 4);
  return f;
}

/* Rounds `v` right by `shift` bits to nearest, ties to even. */
static uint32_t round_shift(uint32_t v, uint32_t shift) {
  uint32_t q = v >> shift, rem = v & ((1u << shift) - 1),
           half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

uint16_t tpl__f32_to_f16(float f) {
  uint32_t x, sign, absx;
  memcpy(&x, &f, 4);
  sign = (x >> 16) & 0x8000u;
  absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) /* NaN: keep it quiet and non-zero */
    return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
  if (absx >= 0x477ff000u) /* rounds past 65504: infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) { /* below 2^-14: subnormal half or zero */
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    if (absx < 0x33000000u) return (uint16_t)sign;
    return (uint16_t)(sign | round_shift(m, 126 - e));
  }
  return (uint16_t)(sign | round_shift(absx - (112u << 23), 13));
}

static float bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Rounds to nearest even; a NaN stays a quiet NaN. */
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* The scope divides (a bias / N); a re-shard multiplies back (mul). */
static void scale_f32(uint8_t *p, uint64_t n, float k, int mul) {
  for (uint64_t i = 0; i < n; i++) {
    float v;
    memcpy(&v, p + 4 * i, 4);
    v = mul ? v * k : v / k;
    memcpy(p + 4 * i, &v, 4);
  }
}

static void scale_f64(uint8_t *p, uint64_t n, double k, int mul) {
  for (uint64_t i = 0; i < n; i++) {
    double v;
    memcpy(&v, p + 8 * i, 8);
    v = mul ? v * k : v / k;
    memcpy(p + 8 * i, &v, 8);
  }
}

static void scale_half(uint8_t *p, uint64_t n, float k, int bf16, int mul) {
  for (uint64_t i = 0; i < n; i++) {
    uint16_t h;
    float v;
    memcpy(&h, p + 2 * i, 2);
    v = bf16 ? bf16_to_f32(h) : tpl__f16_to_f32(h);
    v = mul ? v * k : v / k;
    h = bf16 ? f32_to_bf16(v) : tpl__f32_to_f16(v);
    memcpy(p + 2 * i, &h, 2);
  }
}

/* The nbytes at p divided (or, mul, multiplied) by k; 1 leaves them. */
static int rescale(void *p, uint64_t nbytes, int dtype, uint32_t k, int mul) {
  uint64_t n =
      nbytes /
      (dtype >= 0 && dtype < TPL_DT_COUNT ? tpl__dtype_size(dtype) : 1);
  switch (dtype) {
  case TPL_DT_F32:
    if (k != 1) scale_f32(p, n, (float)k, mul);
    return 0;
  case TPL_DT_F64:
    if (k != 1) scale_f64(p, n, (double)k, mul);
    return 0;
  case TPL_DT_F16:
  case TPL_DT_BF16:
    if (k != 1) scale_half(p, n, (float)k, dtype == TPL_DT_BF16, mul);
    return 0;
  default:
    return TPL_EDTYPE;
  }
}

int tpl__scale_bias(void *p, uint64_t nbytes, int dtype, uint32_t divisor) {
  return rescale(p, nbytes, dtype, divisor, 0);
}

int tpl__unscale_bias(void *p, uint64_t nbytes, int dtype, uint32_t factor) {
  return rescale(p, nbytes, dtype, factor, 1);
}

void tpl__bf16_expand_inplace(void *p, uint64_t count) {
  uint8_t *b = p;
  /* Backwards: f32 i (bytes 4i..4i+3) only overwrites bf16 values at index
   * >= i, which have already been expanded. */
  for (uint64_t i = count; i-- > 0;) {
    uint16_t h;
    uint32_t x;
    memcpy(&h, b + 2 * i, 2);
    x = (uint32_t)h << 16;
    memcpy(b + 4 * i, &x, 4);
  }
}

static const char *const bias_names[TPL_BIAS_COUNT] = {"default", "scale",
                                                       "rank0", "whole"};
static const char *const family_names[TPL_BIASF_COUNT] = {"mlc", "vllm",
                                                          "whole"};

int tpl__bias_resolve(int fixed, int vllm, int family) {
  if (family == TPL_BIASF_WHOLE) return TPL_BIAS_WHOLE;
  if (fixed != TPL_BIAS_DEFAULT) return fixed;
  if (family == TPL_BIASF_MLC) return TPL_BIAS_SCALE;
  return vllm != TPL_BIAS_DEFAULT ? vllm : TPL_BIAS_WHOLE;
}

const char *tpl__bias_name(int policy) {
  return policy >= 0 && policy < TPL_BIAS_COUNT ? bias_names[policy] : "?";
}

const char *tpl__bias_family_name(int family) {
  return family >= 0 && family < TPL_BIASF_COUNT ? family_names[family] : "?";
}

int tpl__bias_parse(const char *s) {
  for (int i = TPL_BIAS_SCALE; i < TPL_BIAS_COUNT; i++)
    if (strcmp(s, bias_names[i]) == 0) return i;
  return -1;
}

int tpl__bias_family_parse(const char *s) {
  for (int i = 0; i < TPL_BIASF_COUNT; i++)
    if (strcmp(s, family_names[i]) == 0) return i;
  return -1;
}

int tpl__bias_apply(void *p, uint64_t nbytes, int dtype, int policy,
                    uint32_t nshards, uint32_t shard) {
  if (dtype != TPL_DT_F32 && dtype != TPL_DT_F64 && dtype != TPL_DT_F16 &&
      dtype != TPL_DT_BF16)
    return TPL_EDTYPE;
  if (policy == TPL_BIAS_SCALE)
    return tpl__scale_bias(p, nbytes, dtype, nshards);
  if (policy == TPL_BIAS_RANK0 && shard != 0) memset(p, 0, (size_t)nbytes);
  return 0;
}

double tpl__bias_factor(int policy, uint32_t nshards) {
  return policy == TPL_BIAS_SCALE && nshards > 1 ? 1.0 / (double)nshards : 1.0;
}
