// gfx942 (CDNA3) matrix-core and cross-lane micro-kernels: the fp8/bf8 MFMAs read e4m3fnuz / e5m2fnuz
// there, the bf16 MFMAs are the "_1k" forms, and ds_bpermute_b32 is how a half-wave swap is done
// without gfx950's v_permlane32_swap. Each kernel is one wave; operands arrive already in lane order
// (lane l's register bytes at a[l]) so the test owns the layout.
#include "common.h"
typedef float v4f __attribute__((ext_vector_type(4)));
typedef short v4s __attribute__((ext_vector_type(4)));

#define MFMA_32(NAME, BUILTIN)                                                                 \
  KERNEL void NAME(const long* a, const long* b, const v16f* c, v16f* out) {                     \
    const int l = tid();                                                                       \
    out[l] = BUILTIN(a[l], b[l], c[l], 0, 0, 0);                                               \
  }
#define MFMA_16(NAME, BUILTIN)                                                                 \
  KERNEL void NAME(const long* a, const long* b, const v4f* c, v4f* out) {                       \
    const int l = tid();                                                                       \
    out[l] = BUILTIN(a[l], b[l], c[l], 0, 0, 0);                                               \
  }
MFMA_32(mfma32_fp8_fp8, __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8)
MFMA_32(mfma32_fp8_bf8, __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8)
MFMA_32(mfma32_bf8_fp8, __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8)
MFMA_32(mfma32_bf8_bf8, __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8)
MFMA_16(mfma16_fp8_fp8, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8)
MFMA_16(mfma16_bf8_bf8, __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8)

// bf16: 4 values per lane (one 64-bit register pair)
KERNEL void mfma16_bf16(const v4s* a, const v4s* b, const v4f* c, v4f* out) {
  const int l = tid();
  out[l] = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a[l], b[l], c[l], 0, 0, 0);
}
KERNEL void mfma32_bf16(const v4s* a, const v4s* b, const v16f* c, v16f* out) {
  const int l = tid();
  out[l] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a[l], b[l], c[l], 0, 0, 0);
}

// the half-wave swap of the gfx942 kernel: lane l reads lane l ^ 32 (byte address 4 * (l ^ 32))
KERNEL void half_swap(const u32* a, u32* out) {
  const int l = tid();
  out[l] = (u32)__builtin_amdgcn_ds_bpermute(4 * (l ^ 32), (int)a[l]);
}
