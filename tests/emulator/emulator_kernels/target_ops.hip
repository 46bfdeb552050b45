// The per-target operations of kernels/target.h, one wave each, compiled for gfx950 and for gfx942: the
// test checks both against numpy with each target's fp8 table, so the gfx942 splits (4 x 32x32x16 fp8,
// 4 x 16x16x32 fp8, 2 x 16x16x16 bf16, ds_bpermute half swap) are held to gfx950's semantics.
#include "common.h"
#include "../../../kernels/target.h"
typedef float v4f __attribute__((ext_vector_type(4)));
typedef __bf16 v8bf __attribute__((ext_vector_type(8)));

KERNEL void t_mfma32(const v8i* a, const v8i* b, const v16f* c, v16f* out) {
  const int l = tid();
  out[l] = target::mfma_32x32x64_fp8(a[l], b[l], c[l]);
}
KERNEL void t_mfma16(const v8i* a, const v8i* b, const v4f* c, v4f* out) {
  const int l = tid();
  out[l] = target::mfma_16x16x128_fp8(a[l], b[l], c[l]);
}
KERNEL void t_mfma16_bf16(const v8bf* a, const v8bf* b, const v4f* c, v4f* out) {
  const int l = tid();
  out[l] = target::mfma_16x16x32_bf16(a[l], b[l], c[l]);
}
KERNEL void t_swap(const u32* a, const u32* b, u32* out) {
  const int l = tid();
  const v2u r = target::permlane32_swap(a[l], b[l]);
  const u32 x = r.x, y = r.y;
  out[l] = x;
  out[64 + l] = y;
}
KERNEL void t_swap16(const u32* a, const u32* b, u32* out) {
  const int l = tid();
  const v2u r = target::permlane16_swap(a[l], b[l]);
  const u32 x = r.x, y = r.y;
  out[l] = x;
  out[64 + l] = y;
}
KERNEL void t_fn_fix(const u32* a, u32* out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  out[i] = target::fn_as_fnuz_k(a[i]);
  out[n + i] = target::fn_as_fnuz_q(a[i]);
}
