// Vector memory of each width (global and buffer), scalar loads, memcheck targets.
#include "common.h"

typedef unsigned short u16;

KERNEL void global_widths(const u8* __restrict__ in, u8* __restrict__ out) {
  const int i = tid();
  const GLOBAL u8* src = (const GLOBAL u8*)in;
  GLOBAL u8* dst = (GLOBAL u8*)out;
  // byte, short, dword, dwordx2, dwordx3, dwordx4 loads and stores; signed loads widen
  int sb = ((const GLOBAL signed char*)src)[i];
  int ss = ((const GLOBAL short*)(src + 64))[i];
  u32 w1 = ((const GLOBAL u32*)(src + 256))[i];
  v2u w2 = ((const GLOBAL v2u*)(src + 512))[i];
  v3u w3 = *(const GLOBAL v3u*)(src + 1024 + 12 * i);
  v4u w4 = ((const GLOBAL v4u*)(src + 2048))[i];
  ((GLOBAL int*)dst)[i] = sb;
  ((GLOBAL int*)(dst + 256))[i] = ss;
  ((GLOBAL u8*)(dst + 512))[i] = (u8)(w1 >> 8);
  ((GLOBAL u16*)(dst + 576))[i] = (u16)(w1 >> 16);
  ((GLOBAL v2u*)(dst + 1024))[i] = w2;
  *(GLOBAL v3u*)(dst + 1536 + 12 * i) = w3;
  ((GLOBAL v4u*)(dst + 2560))[i] = w4;
}

KERNEL void buffer_widths(const u32* in, u32* out, int num_records) {
  // raw buffer loads honour num_records: lanes past it read 0 (how Triton masks loads)
  __amdgpu_buffer_rsrc_t rin = __builtin_amdgcn_make_buffer_rsrc((void*)in, 0, num_records, 0x00020000);
  __amdgpu_buffer_rsrc_t rout = __builtin_amdgcn_make_buffer_rsrc((void*)out, 0, 4096, 0x00020000);
  const int i = tid();
  u32 x = __builtin_amdgcn_raw_buffer_load_b32(rin, 4 * i, 0, 0);
  v2u y = __builtin_amdgcn_raw_buffer_load_b64(rin, 8 * i, 0, 0);
  v4u z = __builtin_amdgcn_raw_buffer_load_b128(rin, 16 * i, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b32(x + 1, rout, 4 * i, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b64(y, rout, 256 + 8 * i, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b128(z, rout, 768 + 16 * i, 0, 0);
}

KERNEL void scalar_loads(const int* __restrict__ p, int* __restrict__ out) {
  // uniform addresses from a const __restrict__ pointer become s_load_dword{,x2,x4,x8,x16}
  int s = 0;
  for (int k = 0; k < 31; ++k) s += p[k] * (k + 1);
  int t = p[40] ^ p[41];
  if (tid() == 0) {
    out[0] = s;
    out[1] = t;
  }
}

KERNEL void store_at(int* out, int n) {
  // lane i writes out[n + i]: with n > 0 the last lanes run past a 64-int buffer
  out[n + tid()] = tid();
}
