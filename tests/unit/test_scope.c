/* test_scope.c - bias scaling and the half-precision conversions it uses.
 * Expected bit patterns are hand-derived from IEEE 754 (noted per case). */
#include <math.h>
#include <string.h>

#include "common.h"
#include "dtype.h"
#include "scope.h"
#include "tap.h"

static uint16_t scale16(uint16_t h, int dtype, uint32_t n) {
  CHECK_EQ_INT(tpl__scale_bias(&h, 2, dtype, n), 0);
  return h;
}

static void test_f16_divide_rounds_to_nearest_even(void) {
  CHECK_EQ_U64(scale16(0x3C00, TPL_DT_F16, 2), 0x3800); /* 1/2 = 0.5 */
  /* 1/3 = 0.33333334f lies between 0x3555 (0.333251953) and 0x3556
   * (0.333496094); nearer the first. */
  CHECK_EQ_U64(scale16(0x3C00, TPL_DT_F16, 3), 0x3555);
  /* smallest subnormal / 2 = 2^-25: a tie between 0 and 2^-24, even is 0 */
  CHECK_EQ_U64(scale16(0x0001, TPL_DT_F16, 2), 0x0000);
  /* 3 * 2^-24 / 2 = 1.5 * 2^-24: tie between 1 and 2 units, even is 2 */
  CHECK_EQ_U64(scale16(0x0003, TPL_DT_F16, 2), 0x0002);
  CHECK_EQ_U64(scale16(0xBC00, TPL_DT_F16, 4), 0xB400); /* -1/4 */
  CHECK_EQ_U64(scale16(0x7C00, TPL_DT_F16, 3), 0x7C00); /* inf stays */
  CHECK((scale16(0x7E00, TPL_DT_F16, 3) & 0x7C00) == 0x7C00);
  CHECK((scale16(0x7E00, TPL_DT_F16, 3) & 0x03FF) != 0); /* NaN stays */
}

static void test_bf16_divide_rounds_to_nearest_even(void) {
  CHECK_EQ_U64(scale16(0x3F80, TPL_DT_BF16, 2), 0x3F00); /* 1/2 */
  /* 1/3 = 0x3EAAAAAB: low half 0xAAAB > 0x8000 rounds up to 0x3EAB */
  CHECK_EQ_U64(scale16(0x3F80, TPL_DT_BF16, 3), 0x3EAB);
  /* 3.0 = 0x4040 / 2 = 1.5 = 0x3FC0 exactly */
  CHECK_EQ_U64(scale16(0x4040, TPL_DT_BF16, 2), 0x3FC0);
}

static void test_f32_f64_native(void) {
  float f[2] = {1.0f, -6.0f};
  double d[2] = {1.0, 9.0};
  CHECK_EQ_INT(tpl__scale_bias(f, sizeof(f), TPL_DT_F32, 3), 0);
  CHECK(f[0] == 1.0f / 3.0f && f[1] == -2.0f);
  CHECK_EQ_INT(tpl__scale_bias(d, sizeof(d), TPL_DT_F64, 3), 0);
  CHECK(d[0] == 1.0 / 3.0 && d[1] == 3.0);
}

static void test_divisor_one_leaves_bytes(void) {
  uint16_t h[3] = {0x3555, 0x0001, 0x7E01};
  uint16_t before[3];
  memcpy(before, h, sizeof(h));
  CHECK_EQ_INT(tpl__scale_bias(h, sizeof(h), TPL_DT_F16, 1), 0);
  CHECK(memcmp(h, before, sizeof(h)) == 0);
}

static void test_other_dtypes_refused(void) {
  int32_t v = 9;
  CHECK_EQ_INT(tpl__scale_bias(&v, 4, TPL_DT_I32, 3), TPL_EDTYPE);
  CHECK_EQ_INT(v, 9);
  CHECK_EQ_INT(tpl__scale_bias(&v, 1, TPL_DT_F8_E4M3, 3), TPL_EDTYPE);
}

static void test_f16_round_trip_every_value(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    int nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    uint16_t back = tpl__f32_to_f16(tpl__f16_to_f32((uint16_t)h));
    if (!nan && back != h) bad++;
    if (nan && !isnan(tpl__f16_to_f32((uint16_t)h))) bad++;
  }
  CHECK_EQ_INT(bad, 0);
}

static void test_f16_known_values(void) {
  CHECK(tpl__f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(tpl__f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK_EQ_U64(tpl__f32_to_f16(65520.0f), 0x7C00); /* rounds to inf */
  CHECK_EQ_U64(tpl__f32_to_f16(65519.0f), 0x7BFF);
  CHECK_EQ_U64(tpl__f32_to_f16(ldexpf(1.0f, -14)), 0x0400);
}

static void test_bf16_expand_in_place(void) {
  uint8_t buf[12] = {0};
  uint16_t in[3] = {0x3F80, 0xC000, 0x0001};
  uint32_t out[3];
  memcpy(buf, in, sizeof(in));
  tpl__bf16_expand_inplace(buf, 3);
  memcpy(out, buf, sizeof(out));
  CHECK_EQ_U64(out[0], 0x3F800000u);
  CHECK_EQ_U64(out[1], 0xC0000000u);
  CHECK_EQ_U64(out[2], 0x00010000u);
}

int main(void) {
  RUN(test_f16_divide_rounds_to_nearest_even);
  RUN(test_bf16_divide_rounds_to_nearest_even);
  RUN(test_f32_f64_native);
  RUN(test_divisor_one_leaves_bytes);
  RUN(test_other_dtypes_refused);
  RUN(test_f16_round_trip_every_value);
  RUN(test_f16_known_values);
  RUN(test_bf16_expand_in_place);
  return tap_done();
}
