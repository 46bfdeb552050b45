// Vector ALU: per-lane integer and float ops, conversions, and divergent control flow (VOPC + EXEC).
#include "common.h"

KERNEL void valu_int(const u32* __restrict__ a, const u32* __restrict__ b, u32* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const u32 x = a[i], y = b[i];
  const int sx = (int)x, sy = (int)y;
  u32 r[20];
  r[0] = x + y;
  r[1] = x - y;
  r[2] = x * y;
  r[3] = (u32)(((u64)x * y) >> 32);
  r[4] = (u32)(((i64)sx * sy) >> 32);
  r[5] = x / (y | 1u);
  r[6] = x % (y | 1u);
  r[7] = x << (y & 31);
  r[8] = (u32)(sx >> (y & 31));
  r[9] = x >> (y & 31);
  r[10] = (x & y) | (~x & (y >> 3));
  r[11] = (u32)(sx < sy ? sx : sy);
  r[12] = x > y ? x : y;
  r[13] = (x >> 5) & 0x3ff;
  r[14] = (u32)__builtin_popcount(x) + (x ? (u32)__builtin_clz(x) : 32u);
  r[15] = (u32)((((u64)x << 32) | y) >> (y & 63));
  r[16] = (u32)(((u64)x * y + x) >> 7);
  r[17] = (u32)((signed char)x) + (u32)((short)y);
  r[18] = (x & 0xff) * (y & 0xffff);
  r[19] = x ^ (y << 3) ^ 0x9e3779b9u;
  for (int k = 0; k < 20; ++k) out[k * n + i] = r[k];
}

KERNEL void valu_float(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                       float* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const float x = a[i], y = b[i], z = c[i];
  float r[16];
  r[0] = x + y;
  r[1] = x - y;
  r[2] = x * y;
  r[3] = __builtin_fmaf(x, y, z);
  r[4] = __builtin_fmaxf(x, y);
  r[5] = __builtin_fminf(x, z);
  r[6] = __builtin_fmaxf(x, 0.0f);
  r[7] = (float)(int)x;
  r[8] = (float)(u32)__builtin_fabsf(y);
  r[9] = __builtin_floorf(x) + __builtin_ceilf(y);
  r[10] = __builtin_truncf(z) - __builtin_rintf(x);
  r[11] = x * 0.5f + 3.0f;
  r[12] = -__builtin_fabsf(x) * y;
  r[13] = __builtin_ldexpf(x, 3);
  r[14] = (float)(i - 7);
  r[15] = x < y ? z : x * z;
  for (int k = 0; k < 16; ++k) out[k * n + i] = r[k];
}

// Data-dependent branches and a per-lane trip count: exercises v_cmp, s_and_saveexec, execz branches.
KERNEL void divergence(const int* __restrict__ a, int* __restrict__ out, int n) {
  const int i = bid() * 64 + tid();
  if (i >= n) return;
  const int x = a[i];
  int y;
  if (x > 10) {
    y = x * 3;
    if (x & 1) y += 7;
    else y -= 2;
  } else {
    y = 0;
    for (int k = 0; k < (x & 7); ++k) y += k * x + 1;
  }
  out[i] = y;
}
