// fp8 / bf8 conversions of gfx950 (OCP e4m3fn / e5m2): byte -> f32 (each byte select, so the compiler
// picks the e32, SDWA and VOP3 op_sel forms), packed pairs -> 2 x f32 (word select), 2 x f32 -> packed
// pair (word select, the other word kept) and stochastic rounding f32 -> one byte (byte select).
#include "common.h"
typedef float v2f __attribute__((ext_vector_type(2)));

// out[k * n + i]: k = 4 * kind + byte, kind 0 = fp8, 1 = bf8
KERNEL void cvt_f32_f8(const u32* __restrict__ a, float* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const int x = (int)a[i];
  out[0 * n + i] = __builtin_amdgcn_cvt_f32_fp8(x, 0);
  out[1 * n + i] = __builtin_amdgcn_cvt_f32_fp8(x, 1);
  out[2 * n + i] = __builtin_amdgcn_cvt_f32_fp8(x, 2);
  out[3 * n + i] = __builtin_amdgcn_cvt_f32_fp8(x, 3);
  out[4 * n + i] = __builtin_amdgcn_cvt_f32_bf8(x, 0);
  out[5 * n + i] = __builtin_amdgcn_cvt_f32_bf8(x, 1);
  out[6 * n + i] = __builtin_amdgcn_cvt_f32_bf8(x, 2);
  out[7 * n + i] = __builtin_amdgcn_cvt_f32_bf8(x, 3);
}

// out[k * n + i]: k = 4 * kind + 2 * word + half
KERNEL void cvt_pk_f32_f8(const u32* __restrict__ a, float* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const int x = (int)a[i];
  const v2f p0 = __builtin_amdgcn_cvt_pk_f32_fp8(x, false), p1 = __builtin_amdgcn_cvt_pk_f32_fp8(x, true);
  const v2f q0 = __builtin_amdgcn_cvt_pk_f32_bf8(x, false), q1 = __builtin_amdgcn_cvt_pk_f32_bf8(x, true);
  out[0 * n + i] = p0.x; out[1 * n + i] = p0.y; out[2 * n + i] = p1.x; out[3 * n + i] = p1.y;
  out[4 * n + i] = q0.x; out[5 * n + i] = q0.y; out[6 * n + i] = q1.x; out[7 * n + i] = q1.y;
}

// out[k * n + i]: k = 2 * kind + word; the other word keeps old[i]
KERNEL void cvt_pk_f8_f32(const float* __restrict__ a, const float* __restrict__ b, const u32* __restrict__ old,
                          u32* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const float x = a[i], y = b[i];
  const int o = (int)old[i];
  out[0 * n + i] = (u32)__builtin_amdgcn_cvt_pk_fp8_f32(x, y, o, false);
  out[1 * n + i] = (u32)__builtin_amdgcn_cvt_pk_fp8_f32(x, y, o, true);
  out[2 * n + i] = (u32)__builtin_amdgcn_cvt_pk_bf8_f32(x, y, o, false);
  out[3 * n + i] = (u32)__builtin_amdgcn_cvt_pk_bf8_f32(x, y, o, true);
}

// out[k * n + i]: k = 4 * kind + byte; the other bytes keep old[i]
KERNEL void cvt_sr_f8_f32(const float* __restrict__ a, const u32* __restrict__ rnd, const u32* __restrict__ old,
                          u32* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const float x = a[i];
  const int r = (int)rnd[i], o = (int)old[i];
  out[0 * n + i] = (u32)__builtin_amdgcn_cvt_sr_fp8_f32(x, r, o, 0);
  out[1 * n + i] = (u32)__builtin_amdgcn_cvt_sr_fp8_f32(x, r, o, 1);
  out[2 * n + i] = (u32)__builtin_amdgcn_cvt_sr_fp8_f32(x, r, o, 2);
  out[3 * n + i] = (u32)__builtin_amdgcn_cvt_sr_fp8_f32(x, r, o, 3);
  out[4 * n + i] = (u32)__builtin_amdgcn_cvt_sr_bf8_f32(x, r, o, 0);
  out[5 * n + i] = (u32)__builtin_amdgcn_cvt_sr_bf8_f32(x, r, o, 1);
  out[6 * n + i] = (u32)__builtin_amdgcn_cvt_sr_bf8_f32(x, r, o, 2);
  out[7 * n + i] = (u32)__builtin_amdgcn_cvt_sr_bf8_f32(x, r, o, 3);
}

// The VOP3 (e64) forms, which the compiler only picks for output modifiers: written as inline assembly.
// out[k * n + i]: k = 0 fp8 * 2 (mul:2), 1 bf8 clamped to [0, 1], 2/3 the packed fp8 pair of word 0
KERNEL void cvt_f32_f8_e64(const u32* __restrict__ a, float* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const u32 x = a[i];
  float r0, r1;
  v2f p;
  asm volatile("v_cvt_f32_fp8_e64 %0, %1 mul:2" : "=v"(r0) : "v"(x));
  asm volatile("v_cvt_f32_bf8_e64 %0, %1 clamp" : "=v"(r1) : "v"(x));
  asm volatile("v_cvt_pk_f32_fp8_e64 %0, %1" : "=v"(p) : "v"(x));
  out[0 * n + i] = r0;
  out[1 * n + i] = r1;
  out[2 * n + i] = p.x;
  out[3 * n + i] = p.y;
}
