// sm_90a kernels of fp8_mqa_logits: what every design shares -- types, flags, constants, 16-byte loads, the
// quad reduce-scatter, row-block dispatch, per-row windows clamped to [0, N) and the fused -inf fill. The
// design bodies (prefill_mma.cuh, prefill_wg.cuh, prefill_ws.cuh) use these, so the window, tile-range and
// fill rules are written once for the target.
#pragma once

#include <stdint.h>

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,  // write -inf outside each row's window (the fused -inf fill)
  FLAG_REVERSE_ROWS = 2,  // dispatch high-m row blocks first
  FLAG_VEC4_FILL = 4,     // out and out_row_stride keep every row 16-byte aligned: float4 -inf fill (sm_90a)
};

constexpr int WARP = 32;
constexpr int FRAG_TOKENS = 16;   // the MMA's M: tokens per A fragment
constexpr int FRAG_HEADS = 8;     // the MMA's N: heads per B fragment
constexpr int MAX_THREADS = 256;  // __launch_bounds__: num_warps <= 8 keeps the full 255-register budget

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  // i is a compile-time constant after unrolling; a switch keeps the uint4 in registers.
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ uint4 ldg16(const u8* p) {
  // K and Q are read-only for the whole launch: the non-coherent path is safe.
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// The four lanes of a quad (same gid) each hold partial head sums of the same 2U tokens. A butterfly
// reduce-scatter (xor 2, then xor 1) leaves lane tig with the full sums of values [tig*U/2, (tig+1)*U/2):
// 3 shuffles for U = 2 instead of 8 for an all-reduce, and the stores that follow use every lane.
template <int U>
__device__ __forceinline__ void reduce_scatter(const float (&v)[2 * U], float (&out)[U / 2], int tig) {
  constexpr int V = 2 * U;
  float a[V / 2];
  const bool up2 = tig & 2;
#pragma unroll
  for (int i = 0; i < V / 2; ++i) {
    const float keep = up2 ? v[V / 2 + i] : v[i];
    const float send = up2 ? v[i] : v[V / 2 + i];
    a[i] = keep + __shfl_xor_sync(0xffffffffu, send, 2);
  }
  const bool up1 = tig & 1;
#pragma unroll
  for (int i = 0; i < V / 4; ++i) {
    const float keep = up1 ? a[V / 4 + i] : a[i];
    const float send = up1 ? a[i] : a[V / 4 + i];
    out[i] = keep + __shfl_xor_sync(0xffffffffu, send, 1);
  }
}

// DESIGN: grid is (ceil(M / BM), SplitN); high-m row blocks first when asked, since under causal
// masking a block's work grows with m and the longest blocks should not be the tail.
struct RowBlock {
  int m0, nrows, split;
  bool clean;
};

template <int BM>
__device__ __forceinline__ RowBlock row_block_of(int M, int flags) {
  const int row_blocks = (M + BM - 1) / BM;
  const int row_block = (flags & FLAG_REVERSE_ROWS) ? row_blocks - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int m0 = row_block * BM;
  return {m0, min(BM, M - m0), (int)blockIdx.y, (flags & FLAG_CLEAN_LOGITS) != 0};
}

// Each row's window clamped to [0, N) (empty when ke <= ks), staged once per block for every warp.
template <int BM>
__device__ __forceinline__ void stage_windows(int2* win_s, const int* __restrict__ ks, const int* __restrict__ ke,
                                              const RowBlock& rb, int N, int tid) {
  if (tid < BM) {
    int s = 0, e = 0;
    if (tid < rb.nrows) {
      s = max(min(ks[rb.m0 + tid], N), 0);
      e = max(min(ke[rb.m0 + tid], N), s);
    }
    win_s[tid] = make_int2(s, e);
  }
}

// -inf over [a, b) of one row, spread over `workers` warps; float4 stores in the 16-byte-aligned middle
// when the host says every row starts 16-byte aligned (FLAG_VEC4_FILL).
__device__ __forceinline__ void fill_neg_inf(float* __restrict__ row, int a, int b, bool vec4, int worker,
                                             int workers, int lane) {
  const float ninf = -__int_as_float(0x7f800000);
  if (b <= a) return;
  int a4 = a, b4 = a;
  if (vec4) {
    a4 = min(b, (a + 3) & ~3);
    b4 = max(a4, b & ~3);
    const int n4 = (b4 - a4) >> 2;
    float4* v = reinterpret_cast<float4*>(row + a4);
    for (int idx = worker * WARP + lane; idx < n4; idx += workers * WARP)
      v[idx] = make_float4(ninf, ninf, ninf, ninf);
  }
  // scalar head [a, a4) and tail [b4, b) (the whole range when not vectorised)
  const int head = a4 - a, tail = b - b4;
  for (int idx = worker * WARP + lane; idx < head + tail; idx += workers * WARP)
    row[idx < head ? a + idx : b4 + (idx - head)] = ninf;
}
