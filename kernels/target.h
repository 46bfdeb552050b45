// What differs between the AMD targets the gfx kernels are built for, behind one set of names. The kernel
// bodies call only these; the target is chosen by the compiler's --offload-arch (clang defines
// __gfx950__ / __gfx942__). Adding a target is one more branch here and one registry entry.
//
//   operation (kernel's name)       gfx950 (CDNA4, MI355X)                  gfx942 (CDNA3, MI300X/MI325X)
//   mfma_32x32x64_fp8               v_mfma_f32_32x32x64_f8f6f4              4 x v_mfma_f32_32x32x16_fp8_fp8
//   mfma_16x16x128_fp8              v_mfma_f32_16x16x128_f8f6f4             4 x v_mfma_f32_16x16x32_fp8_fp8
//   mfma_16x16x32_bf16              v_mfma_f32_16x16x32_bf16                2 x v_mfma_f32_16x16x16_bf16
//   permlane32_swap                 v_permlane32_swap_b32                   1 x ds_bpermute_b32 (lane ^ 32)
//   permlane16_swap                 v_permlane16_swap_b32                   1 x ds_bpermute_b32 (lane ^ 16)
//   fp8 format the MFMA reads       OCP e4m3fn (bias 7, max 448)            e4m3fnuz (bias 8, max 240)
//
// Why the splits are exact: an MFMA pairs item n of lane (i + R*g) of A with item n of lane (j + R*g) of B
// and sums over every (g, n); which depth index a (g, n) stands for is the kernel's choice as long as A
// and B agree. Splitting each lane's items into consecutive chunks and accumulating one smaller MFMA per
// chunk sums the same products; only the rounding differs (one float32 rounding per instruction).
//
// e4m3fn inputs on gfx942 (fn_as_fnuz_*): an e4m3fn byte read as e4m3fnuz is exactly half its value,
// except 0x80 (fn: -0; fnuz: NaN) and fn's NaNs 0x7F / 0xFF (fnuz: +-240). So q.k read as fnuz is
// exactly a quarter of the fn product and the kernel multiplies its weights by 4 (exact: a power of 2),
// and the bytes are patched where they are loaded: 0x80 -> 0x00 in K and Q (4 VALU per dword), and in Q
// (once per block) also 0x7F / 0xFF -> 0x80 so that a NaN of q stays a NaN score, as on gfx950. A NaN
// byte of K reads as +-240 instead (its column is unspecified by the NaN contract either way).
#pragma once

#ifndef TARGET_DEVICE
#define TARGET_DEVICE static __attribute__((device)) __attribute__((always_inline)) inline
#endif

namespace target {
typedef int v8i_t __attribute__((ext_vector_type(8)));
typedef float v16f_t __attribute__((ext_vector_type(16)));
typedef float v4f_t __attribute__((ext_vector_type(4)));
typedef __bf16 v8bf_t __attribute__((ext_vector_type(8)));
typedef unsigned int v2u_t __attribute__((ext_vector_type(2)));

#if defined(__gfx950__)
constexpr bool FNUZ = false;  // the fp8 MFMAs read OCP e4m3fn

TARGET_DEVICE v16f_t mfma_32x32x64_fp8(v8i_t a, v8i_t b, v16f_t c) {
  // constant-zero E8M0 scales: the backend emits the unscaled encoding (fp8 e4m3 = format 0)
  return __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a, b, c, 0, 0, 0, 0, 0, 0);
}
TARGET_DEVICE v4f_t mfma_16x16x128_fp8(v8i_t a, v8i_t b, v4f_t c) {
  return __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, c, 0, 0, 0, 0, 0, 0);
}
TARGET_DEVICE v4f_t mfma_16x16x32_bf16(v8bf_t a, v8bf_t b, v4f_t c) {
  return __builtin_amdgcn_mfma_f32_16x16x32_bf16(a, b, c, 0, 0, 0);
}
// {new vdst, new vsrc}: lanes 32-63 of `old` trade places with lanes 0-31 of `src`
TARGET_DEVICE v2u_t permlane32_swap(unsigned old, unsigned src) {
  return __builtin_amdgcn_permlane32_swap(old, src, false, false);
}
// the same within each 32-lane half: lanes 16-31 (48-63) of `old` with lanes 0-15 (32-47) of `src`
TARGET_DEVICE v2u_t permlane16_swap(unsigned old, unsigned src) {
  return __builtin_amdgcn_permlane16_swap(old, src, false, false);
}

#elif defined(__gfx942__)
constexpr bool FNUZ = true;  // the fp8 MFMAs read e4m3fnuz

// the 8-byte chunk s of a lane's 32 operand bytes, as the 64-bit operand the CDNA3 fp8 MFMAs take
TARGET_DEVICE long chunk(v8i_t v, int s) {
  const unsigned lo = (unsigned)v[2 * s], hi = (unsigned)v[2 * s + 1];  // scalars first (clang 22 bit_cast)
  return (long)(((unsigned long)hi << 32) | lo);
}
TARGET_DEVICE v16f_t mfma_32x32x64_fp8(v8i_t a, v8i_t b, v16f_t c) {
#pragma unroll
  for (int s = 0; s < 4; ++s) c = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(chunk(a, s), chunk(b, s), c, 0, 0, 0);
  return c;
}
TARGET_DEVICE v4f_t mfma_16x16x128_fp8(v8i_t a, v8i_t b, v4f_t c) {
#pragma unroll
  for (int s = 0; s < 4; ++s) c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(chunk(a, s), chunk(b, s), c, 0, 0, 0);
  return c;
}
TARGET_DEVICE v4f_t mfma_16x16x32_bf16(v8bf_t a, v8bf_t b, v4f_t c) {
  typedef short v4s_t __attribute__((ext_vector_type(4)));
  typedef short v8s_t __attribute__((ext_vector_type(8)));
  const v8s_t as = __builtin_bit_cast(v8s_t, a), bs = __builtin_bit_cast(v8s_t, b);
  const v4s_t a0 = __builtin_shufflevector(as, as, 0, 1, 2, 3), a1 = __builtin_shufflevector(as, as, 4, 5, 6, 7);
  const v4s_t b0 = __builtin_shufflevector(bs, bs, 0, 1, 2, 3), b1 = __builtin_shufflevector(bs, bs, 4, 5, 6, 7);
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a0, b0, c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a1, b1, c, 0, 0, 0);
}
// No gfx9 DPP or swizzle crosses the 32-lane halves: one ds_bpermute_b32 (through the LDS crossbar, no
// LDS memory) fetches lane ^ SPAN of the value each side gives away.
template <int SPAN>
TARGET_DEVICE v2u_t lane_swap(unsigned old, unsigned src) {
  const int lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  const bool low = (lane & SPAN) == 0;
  const unsigned give = low ? src : old;
  const unsigned got = (unsigned)__builtin_amdgcn_ds_bpermute(4 * (lane ^ SPAN), (int)give);
  return (v2u_t){low ? old : got, low ? got : src};
}
TARGET_DEVICE v2u_t permlane32_swap(unsigned old, unsigned src) { return lane_swap<32>(old, src); }
TARGET_DEVICE v2u_t permlane16_swap(unsigned old, unsigned src) { return lane_swap<16>(old, src); }

#else
#error "kernels/target.h: build for --offload-arch=gfx950 or gfx942"
#endif

// ---- e4m3fn bytes on an e4m3fnuz target (see the top of this file) ----
// per byte: bit 7 set where the low 7 bits are non-zero / all ones
TARGET_DEVICE unsigned low7_nonzero(unsigned w) { return ((w & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) & 0x80808080u; }
TARGET_DEVICE unsigned low7_all_ones(unsigned w) { return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u; }

// K: 0x80 (fn -0) -> 0x00 (+0); every other byte unchanged
TARGET_DEVICE unsigned fn_as_fnuz_k(unsigned w) { return w & (low7_nonzero(w) | 0x7F7F7F7Fu); }

// Q: as K, and fn's NaNs 0x7F / 0xFF -> 0x80 (the fnuz NaN)
TARGET_DEVICE unsigned fn_as_fnuz_q(unsigned w) {
  const unsigned nan = low7_all_ones(w);
  return (fn_as_fnuz_k(w) ^ (nan - (nan >> 7))) | nan;
}

// The same on a lane's 32 operand bytes, where the kernel reads e4m3fn bytes on an fnuz target
// (FN_ON_FNUZ); the identity otherwise.
template <bool FN_ON_FNUZ>
TARGET_DEVICE v8i_t k_operand(v8i_t v) {
  if constexpr (FN_ON_FNUZ) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (int)fn_as_fnuz_k((unsigned)v[i]);
  }
  return v;
}
template <bool FN_ON_FNUZ>
TARGET_DEVICE v8i_t q_operand(v8i_t v) {
  if constexpr (FN_ON_FNUZ) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (int)fn_as_fnuz_q((unsigned)v[i]);
  }
  return v;
}
// e4m3fn read as e4m3fnuz halves q and k, so q.k reads a quarter: the weights carry the 4 back (exact).
template <bool FN_ON_FNUZ>
TARGET_DEVICE float weight(float w) {
  if constexpr (FN_ON_FNUZ) return 4.0f * w;
  return w;
}
}  // namespace target
