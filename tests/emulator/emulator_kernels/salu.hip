// Scalar ALU: every value is uniform per workgroup, so the compiler keeps it in SGPRs.
#include "common.h"

KERNEL void salu_ops(const int* __restrict__ in, int* __restrict__ out) {
  const int g = bid();
  const int a = in[3 * g], b = in[3 * g + 1], c = in[3 * g + 2];
  const u32 ua = (u32)a, ub = (u32)b, uc = (u32)c | 1u;
  int r[24];
  r[0] = a + b;
  r[1] = a - b;
  r[2] = a * b;
  r[3] = (int)(ua / uc);
  r[4] = (int)(ua % uc);
  r[5] = a << (b & 31);
  r[6] = a >> (b & 31);
  r[7] = (int)(ua >> (ub & 31));
  r[8] = (a & b) ^ (a | ~c);
  r[9] = a < b ? a : b;
  r[10] = ua > ub ? a : b;
  r[11] = (int)((u64)ua * ub >> 32);
  r[12] = (int)(((i64)a * b) >> 32);
  r[13] = __builtin_popcount(ua);
  r[14] = ua ? __builtin_clz(ua) : 32;
  r[15] = ua ? __builtin_ctz(ua) : 32;
  r[16] = a < 0 ? -a : a;
  r[17] = (int)(((u64)ua << 33 | ub) >> 7);
  int s = 0;
  for (int k = 0; k < (c & 15); ++k) s += k * a + (k & 1 ? b : -b);  // branches + loop on SCC
  r[18] = s;
  r[19] = (a == b) + 2 * (ua >= ub) + 4 * (a <= c) + 8 * (a != c);
  r[20] = (short)a + (signed char)b;
  r[21] = (int)(((i64)a * c) % 1000003);
  r[22] = (a >> 3) & 0x7f;
  r[23] = c / (b | 1);
  if (tid() == 0)
    for (int k = 0; k < 24; ++k) out[24 * g + k] = r[k];
}
