// Packed 16-bit integer VOP3P ops (v_pk_*_i16 / _u16 / _b16), the family the MFMA-reduce kernel's
// packed ReLU (v_pk_max_i16 against 0 on bf16 bit patterns) belongs to. Swizzled operands (.yx) make
// the compiler set op_sel / op_sel_hi.
#include "common.h"
typedef short s2 __attribute__((ext_vector_type(2)));
typedef unsigned short us2 __attribute__((ext_vector_type(2)));

KERNEL void pk16_ops(const u32* __restrict__ a, const u32* __restrict__ b, u32* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const s2 x = __builtin_bit_cast(s2, a[i]), y = __builtin_bit_cast(s2, b[i]);
  const us2 ux = __builtin_bit_cast(us2, a[i]), uy = __builtin_bit_cast(us2, b[i]);
  const s2 zero = {0, 0};
  out[0 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_max(x, y));
  out[1 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_min(x, y));
  out[2 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_max(ux, uy));
  out[3 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_min(ux, uy));
  out[4 * n + i] = __builtin_bit_cast(u32, (s2)(x + y));
  out[5 * n + i] = __builtin_bit_cast(u32, (s2)(x - y));
  out[6 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_max(x, zero));
  out[7 * n + i] = __builtin_bit_cast(u32, __builtin_elementwise_max(x.yx, y));
  out[8 * n + i] = __builtin_bit_cast(u32, (us2)(ux * uy));
}
