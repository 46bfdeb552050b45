// Cross-lane: v_permlane32_swap_b32 and the 32x32x64 f8f6f4 MFMA (plain and scaled).
#include "common.h"

KERNEL void permlane_swap(const u32* __restrict__ a, const u32* __restrict__ b, u32* __restrict__ out) {
  const int l = tid();
  v2u r = __builtin_amdgcn_permlane32_swap(a[l], b[l], false, false);
  u32 x = r.x;  // copied to scalars first (clang 22 bit_cast issue, see NOTES)
  u32 y = r.y;
  out[l] = x;
  out[64 + l] = y;
}

static __attribute__((device)) inline v8i load8(const GLOBAL u8* p) {
  v4u lo = ((const GLOBAL v4u*)p)[0], hi = ((const GLOBAL v4u*)p)[1];
  v8i r;
  r.s0 = (int)lo.x; r.s1 = (int)lo.y; r.s2 = (int)lo.z; r.s3 = (int)lo.w;
  r.s4 = (int)hi.x; r.s5 = (int)hi.y; r.s6 = (int)hi.z; r.s7 = (int)hi.w;
  return r;
}

// a_lanes / b_lanes: 32 bytes per lane, in lane order; c / out: 16 floats per lane, in lane order
#define MFMA_KERNEL(NAME, CBSZ, BLGP)                                                                \
  KERNEL void NAME(const u8* a_lanes, const u8* b_lanes, const float* c, float* out) {              \
    const int l = tid();                                                                             \
    v8i a = load8((const GLOBAL u8*)a_lanes + 32 * l), b = load8((const GLOBAL u8*)b_lanes + 32 * l); \
    v16f acc;                                                                                        \
    for (int r = 0; r < 16; ++r) acc[r] = ((const GLOBAL float*)c)[16 * l + r];                     \
    acc = __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a, b, acc, CBSZ, BLGP, 0, 0, 0, 0);        \
    for (int r = 0; r < 16; ++r) ((GLOBAL float*)out)[16 * l + r] = acc[r];                         \
  }
MFMA_KERNEL(mfma_e4m3, 0, 0)
MFMA_KERNEL(mfma_e5m2, 1, 1)
MFMA_KERNEL(mfma_e4m3_e5m2, 0, 1)

KERNEL void mfma_scaled(const u8* a_lanes, const u8* b_lanes, const float* c, const u32* scales, float* out) {
  const int l = tid();
  v8i a = load8((const GLOBAL u8*)a_lanes + 32 * l), b = load8((const GLOBAL u8*)b_lanes + 32 * l);
  v16f acc;
  for (int r = 0; r < 16; ++r) acc[r] = ((const GLOBAL float*)c)[16 * l + r];
  const int sa = ((const GLOBAL int*)scales)[l], sb = ((const GLOBAL int*)scales)[64 + l];
  // byte 1 of sa scales A, byte 2 of sb scales B
  acc = __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a, b, acc, 0, 0, 1, sa, 2, sb);
  for (int r = 0; r < 16; ++r) ((GLOBAL float*)out)[16 * l + r] = acc[r];
}
