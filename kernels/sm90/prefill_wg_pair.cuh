// ===================================================================================================
// Design "wgpr" (session 9, issue 14): "wg" with each block's two warpgroups sharing a PAIR of row blocks.
//
// Why: at 1024^2 causal H 64, "wg" runs 512 one-warpgroup blocks of two rows (four per SM, one pass of the card),
// and a bottom row block walks its 16 tiles alone while a top one has 1. ncu (docs/results/session9/half): the
// busiest SM is active 32.7 k cycles against an average of 26.5 k (DeepGEMM 23.2 k / 21.6 k), so the longest
// chain, not the SM's total work, sets the time; which row blocks share an SM is the hardware's choice.
//
// DESIGN: row-block pairs. Block x (grid ceil(R / 2), exactly 8 warps, no SplitN: the host's plan) stages Q, weights
// and windows of row blocks R - 1 - x and x (one when they coincide), and its warpgroups walk the concatenation of the
// two row blocks' tile lists in two contiguous halves, one per warpgroup. A causal long row block and its short
// partner add up to about the same tiles in every block (1024^2: ~17), so each block is balanced by itself whatever SM
// it lands on, and each warpgroup's chain is half the pair's tiles (~8.5 against the bottom row block's 16 in "wg").
// Two blocks of 256 threads per SM keep four warpgroups per SM, as "wg" has. The tile step, the K prefetch (one tile
// ahead into registers), the head reduce, the stores and the interior peel (WG_PEEL_INTERIOR) are "wg"'s.
// Measured (H200, docs/PERFORMANCE.md v15): 1024^2 causal H 64 20.2 -> 17.1 us; ncu's busiest SM over the average
// 1.24 -> 1.06.
// ===================================================================================================
#pragma once
#include "common.cuh"
#include "wgmma.cuh"

template <int H, int D, int BM>
__device__ __forceinline__ void fp8_mqa_logits_wg_pair_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                            const float* __restrict__ kv_scale,
                                                            const float* __restrict__ weights,
                                                            const int* __restrict__ cu_seqlen_ks,
                                                            const int* __restrict__ cu_seqlen_ke,
                                                            float* __restrict__ out, i64 out_row_stride, int M,
                                                            int N, int split_n, int num_warps, int flags) {
  constexpr int NQ = BM * H;
  static_assert(NQ == 64 || NQ == 128, "wgpr: two row blocks' Q in 32 KB of static shared memory");
  constexpr int NCH = D / 64, TILE = 64, NACC = NQ / 2;

  __shared__ __align__(128) u8 q_s[2][NQ * D];
  __shared__ float w_s[2][NQ];
  __shared__ int2 win_s[2][BM];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wg = warp / 4, wq = warp % 4;
  const int nwg = num_warps / 4;
  const int gid = lane >> 2, tig = lane & 3;
  const int nthreads = num_warps * WARP;

  const int row_blocks = (M + BM - 1) / BM, x = (int)blockIdx.x, split = (int)blockIdx.y;
  const int pairs = x < row_blocks - 1 - x ? 2 : 1;  // row blocks row_blocks - 1 - x and x
  int m0[2], nrows[2];
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    m0[p] = (p == 0 ? row_blocks - 1 - x : x) * BM;
    nrows[p] = p < pairs ? min(BM, M - m0[p]) : 0;
  }
  const bool clean = (flags & FLAG_CLEAN_LOGITS) != 0;
  // Q staging, loads first (as "wg", v13): both row blocks' Q and weights in flight before the first shared store.
  {
    constexpr int CHUNKS = NQ * (D / 16), W_TRIPS = (NQ + 127) / 128;
    static_assert(CHUNKS % 256 == 0, "Q chunks: a whole number per thread of a 256-thread block");
    constexpr int TRIPS = CHUNKS / 256;  // per row block, 8 warps
    uint4 v[2][TRIPS];
    float wv[2][W_TRIPS];
#pragma unroll
    for (int p = 0; p < 2; ++p) {
#pragma unroll
      for (int i = 0; i < TRIPS; ++i) {
        const int idx = tid + i * nthreads, n = idx / (D / 16), r = n / H;
        v[p][i] = make_uint4(0, 0, 0, 0);
        if (idx < CHUNKS && r < nrows[p])
          v[p][i] = ldg16(q + ((i64)(m0[p] + r) * H + (n % H)) * D + 16 * (idx % (D / 16)));
      }
#pragma unroll
      for (int i = 0; i < W_TRIPS; ++i) {
        const int idx = tid + i * nthreads, r = idx / H;
        wv[p][i] = idx < NQ && r < nrows[p] ? weights[(i64)(m0[p] + r) * H + (idx % H)] : 0.0f;
      }
    }
    if (tid < 2 * BM) {  // windows of both row blocks (empty for a missing partner and rows past M)
      const int p = tid / BM, r = tid % BM, row = (p ? m0[1] : m0[0]) + r;
      int s = 0, e = 0;
      if (r < (p ? nrows[1] : nrows[0])) {
        s = max(min(cu_seqlen_ks[row], N), 0);
        e = max(min(cu_seqlen_ke[row], N), s);
      }
      win_s[p][r] = make_int2(s, e);
    }
#pragma unroll
    for (int p = 0; p < 2; ++p) {
#pragma unroll
      for (int i = 0; i < TRIPS; ++i) {
        const int idx = tid + i * nthreads;
        if (idx < CHUNKS) store_q_chunk_permuted<D>(q_s[p], idx / (D / 16), 16 * (idx % (D / 16)), v[p][i]);
      }
#pragma unroll
      for (int i = 0; i < W_TRIPS; ++i)
        if (tid + i * nthreads < NQ) w_s[p][tid + i * nthreads] = wv[p][i];
    }
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  // Per row block: the union span and this split's tiles of it, and the interior tiles (inside every row's window).
  BlockSpan bs[2];
  TileRange in[2];
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    bs[p] = uniform_block_span<BM, TILE>(win_s[p], N, split, split_n);
    in[p] = rows_interior_tile_range<BM>(win_s[p], nrows[p], bs[p].lo, N, TILE);
  }
  // DESIGN: each warpgroup takes a contiguous share of the pair's concatenated tile list (row block 0's tiles, then
  // row block 1's), so it walks at most two segments, one per row block, each with "wg"'s peeled loop (general tiles,
  // interior tiles without window tests, general tiles) and its K prefetch one tile ahead.
  const int items0 = bs[0].tile_end - bs[0].tile_begin;
  const int items = items0 + bs[1].tile_end - bs[1].tile_begin;
  const int share = (items + nwg - 1) / nwg;
  const int my_begin = min(items, wg * share), my_end = min(items, my_begin + share);
  const uint32_t q_base0 = (uint32_t)__cvta_generic_to_shared(q_s[0]);

  float acc[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  // Tiles [t_begin, t_end) of row block p (a constant at each call site once inlined).
  auto segment = [&](int p, int t_begin, int t_end) {
    if (t_begin >= t_end) return;
    const int lo = bs[p].lo, hi = bs[p].hi, rows = nrows[p];
    const i64 row0 = (i64)m0[p] * out_row_stride;
    const int2* win = win_s[p];
    const float* w_p = w_s[p];
    const uint32_t q_base = q_base0 + p * NQ * D;
    auto weight = [&](int j) { return *reinterpret_cast<const float2*>(w_p + 8 * j + 2 * tig); };
    WgTile<NCH> cur, nxt;
    int t = t_begin;
    load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
    auto step = [&](bool interior) {
      const int base = lo + t * TILE;
      cur = nxt;
      if (t + 1 < t_end) load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + (t + 1) * TILE + 16 * wq, hi, gid, tig);
      const bool hit = interior || any_window_meets<BM>(win, base, TILE);
      if (hit) wgmma_rs_tile_sync<NQ, D, NCH>(acc, cur, q_base);
      const int tok0 = base + 16 * wq + gid;
      if (interior) {
        wg_head_sum_fp32<H, NQ>(acc, weight, true, true, tig, tok0, cur.scale[0], cur.scale[1],
                                [&](int r, int tok, bool, float v) { out[row0 + (i64)r * out_row_stride + tok] = v; });
      } else {
        wg_head_sum_fp32<H, NQ>(acc, weight, hit, hit, tig, tok0, cur.scale[0], cur.scale[1],
                                [&](int r, int tok, bool h, float v) {
                                  if (r < rows)
                                    store_logit(out + row0 + (i64)r * out_row_stride, tok, hi, win[r], h, clean, v);
                                });
      }
    };
    for (; t < t_end && t < in[p].begin; ++t) step(false);
    for (; t < t_end && t < in[p].end; ++t) step(true);
    for (; t < t_end; ++t) step(false);
  };
  segment(0, bs[0].tile_begin + my_begin, bs[0].tile_begin + min(my_end, items0));
  segment(1, bs[1].tile_begin + max(my_begin, items0) - items0, bs[1].tile_begin + my_end - items0);

  if (clean) {
#pragma unroll
    for (int p = 0; p < 2; ++p)
      fill_outside_union(out, out_row_stride, m0[p], nrows[p], bs[p].lo, bs[p].hi, N, flags & FLAG_VEC4_FILL,
                         split * num_warps + warp, split_n * num_warps, lane);
  }
}
