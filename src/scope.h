/* scope.h - the bias-scaling scope (DESIGN.md section 2): each rank
 * divides its own delivered copy of a row-parallel bias by N; plus the
 * element conversions it needs.  Pure: works on a buffer. */
#ifndef TPL_SCOPE_H
#define TPL_SCOPE_H

#include <stddef.h>
#include <stdint.h>

/* Divides the `nbytes` bytes at `p` (elements of `dtype`) by `divisor` in
 * place: F32 and F64 natively, F16 and BF16 through F32 with
 * round-to-nearest-even.  Returns 0, or TPL_EDTYPE for any other dtype.
 * divisor 1 leaves the bytes unchanged. */
int tpl__scale_bias(void *p, uint64_t nbytes, int dtype, uint32_t divisor);

/* Expands `count` bf16 values stored at the start of `p` into float32
 * values filling 4 * count bytes of `p` (f32 bits = u16 << 16), in place. */
void tpl__bf16_expand_inplace(void *p, uint64_t count);

/* IEEE binary16 <-> binary32 (round to nearest even). */
float tpl__f16_to_f32(uint16_t h);
uint16_t tpl__f32_to_f16(float f);

#endif
