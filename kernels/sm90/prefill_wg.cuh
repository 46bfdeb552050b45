// ===================================================================================================
// wgmma path (the default): fp8 on Hopper's warpgroup tensor cores.
//
// Measured while building this file: on sm_90a, ptxas lowers mma.sync...e4m3 (the path above) to F2FP
// conversions plus two f16 HMMA.16816 and FADDs per MMA -- there is no native fp8 mma.sync on Hopper, only
// wgmma (QGMMA). So the warpgroup instruction is not an optional refinement here; it is the fp8 path.
//
// Shape: wgmma.m64nNk32, A = 64 tokens of K from REGISTERS (each warp of the warpgroup holds 16 tokens in
// exactly the m16n8k32 A-fragment layout, loaded with the same 16-byte-per-lane scheme as the mma path),
// B = the block's Q (N = BLOCK_M * H columns: query row r's heads are columns [r*H, (r+1)*H)) from shared
// memory through a matrix descriptor. K never touches shared memory: it is streamed HBM -> registers per
// warpgroup (the seed's "no LDS staging"), and warpgroups split the block's tile range.
//
// The A-register k-permutation (lane tig carries ITS OWN contiguous D/4 bytes, see mma_e4m3) is undone by
// writing Q into shared memory with the same permutation: logical k slot (s, 16*hh + 4*tig + j) of the
// wgmma holds Q[n, tig*D/4 + 8s + 4hh + j]. Q is staged once per block, so the permutation is free.
//
// Shared-memory layout of B: no swizzle, K-major "core matrices" of 8 columns (n) x 16 bytes (k), 128
// contiguous bytes each; core matrix (n/8, kc) at (n/8) * SBO + kc * LBO with LBO = 128 (adjacent in K)
// and SBO = 8 * D (adjacent in N). k-step s starts at kc = 2s, i.e. base + 256 s.
//
// Accumulator layout (PTX ISA, wgmma D fragment): warp w of the warpgroup owns rows 16w..16w+15; lane
// (gid, tig) holds d[4j + 0/1] = (row gid, cols 8j + 2tig + 0/1) and d[4j + 2/3] = (row gid + 8, same cols).
// Rows are tokens, so query row r's head sum is an in-thread FMA chain over j in [r*H/8, (r+1)*H/8) plus
// the same quad butterfly as the mma path.
// ===================================================================================================
// Designs "wg" (the default) and "wgr" (EPI_MMA: head reduce on the tensor cores): fp8_mqa_logits_wg_body.
// WG_PEEL_INTERIOR (session 8, v14; 1 = shipped, 0 = the session-7 loop for measurements): "wg"'s tiles inside every
// row's window run a copy of the tile step without window tests, as tmas's TMA_PEEL_INTERIOR. Static (h64 bm2): 244
// instructions / 442 encoded stall cycles per tile against 287 / 657, 128 registers either way. Measured (H200, two
// races each beside the v14 build, docs/results/session8/wg): +12.7% at H 32, +7.9% at H 64 in geomean over the 64
// cases, every case faster (1.2-22%).
#ifndef WG_PEEL_INTERIOR
#define WG_PEEL_INTERIOR 1
#endif
#pragma once
#include "common.cuh"
#include "wgmma.cuh"

// ---- helpers of the epilogues ---------------------------------------------------------------------
// relu + round to bf16, two at a time: `lo` lands in the low half (the lower k index of an MMA fragment).
__device__ __forceinline__ uint32_t relu_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// D += A(16x16 bf16) * B(16x8 bf16), f32 accumulate: native HMMA.16816.F32.BF16 on sm_90.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Epilogues of the wgmma path (template parameter EPI):
enum : int {
  EPI_FP32 = 0,  // v1-v3: per accumulator FMNMX + FFMA on the CUDA cores, quad butterfly
  EPI_MMA = 1,   // mirror of the gfx950 MFMA head-reduce: cvt.rn.relu.bf16x2 then a bf16 mma.sync against
                 // block-diagonal weights, so the head sum runs on the tensor cores
};

// Hooks for kernels/experimental/fp8_mqa_logits_sm90_experiments.cu, which alone defines them (the shipped
// instantiations, PP = false with EPI_FP32 / EPI_MMA, never instantiate either):
//   WgPingPongLoop<true>::run  the tile loop of PP = true (two accumulator sets, ping-pong);
//   WgEpilogueExt<EPI>::run    the epilogue of any EPI other than EPI_FP32 / EPI_MMA (diagnostics).
template <bool PP>
struct WgPingPongLoop;
template <int EPI>
struct WgEpilogueExt;

template <int H, int D, int BM, int EPI, bool PP>
__device__ __forceinline__ void fp8_mqa_logits_wg_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                       const float* __restrict__ kv_scale,
                                                       const float* __restrict__ weights,
                                                       const int* __restrict__ cu_seqlen_ks,
                                                       const int* __restrict__ cu_seqlen_ke,
                                                       float* __restrict__ out, i64 out_row_stride, int M, int N,
                                                       int split_n, int num_warps, int flags) {
  constexpr int NQ = BM * H;  // wgmma N: every head of every row of the block
  static_assert(NQ == 64 || NQ == 128 || NQ == 256, "BLOCK_M * H must be 64, 128 or 256");
  static_assert(D % 64 == 0, "D must be a multiple of 64");
  static_assert(BM <= 8, "the MMA head-reduce puts the block's rows on an n8 MMA");
  constexpr int NCH = D / 64;    // 16-byte chunks per lane per token
  constexpr int TILE = 64;       // tokens per warpgroup tile (the wgmma's M)
  constexpr int NACC = NQ / 2;   // accumulator floats per thread
  constexpr int SLABS = NQ / 16; // k16 slabs of the head-reduce MMA

  __shared__ __align__(128) u8 q_s[NQ * D];
  __shared__ float w_s[NQ];
  __shared__ int2 win_s[BM];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup, and this warp's 16-row slice of the wgmma's 64
  const int nwg = num_warps / 4;
  const int gid = lane >> 2, tig = lane & 3;
  const int nthreads = num_warps * WARP;

  const RowBlock rb = row_block_of<BM>(M, flags);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  // DESIGN: Q staging, loads first. Every 16-byte global read of Q and every weight this thread stages is issued
  // before its first shared store, and before the windows are read and staged, so a block waits one memory latency,
  // not one per trip of a rolled LDG -> STS loop (session 7 ncu, 1024^2 causal H = 64: 20% of the stall samples on
  // that loop's stores; docs/PERFORMANCE.md v13). Q is scattered as 4-byte words into the permuted core-matrix
  // layout; rows past M are zeros.
  {
    constexpr int CHUNKS = NQ * (D / 16), TRIPS = CHUNKS / 128, W_TRIPS = (NQ + 127) / 128;  // num_warps >= 4
    static_assert(CHUNKS % 128 == 0, "Q chunks: a whole number per thread of a 128-thread block");
    uint4 v[TRIPS];
    float wv[W_TRIPS];
#pragma unroll
    for (int i = 0; i < TRIPS; ++i) {
      const int idx = tid + i * nthreads, n = idx / (D / 16), r = n / H;
      v[i] = make_uint4(0, 0, 0, 0);
      if (idx < CHUNKS && r < nrows) v[i] = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + 16 * (idx % (D / 16)));
    }
#pragma unroll
    for (int i = 0; i < W_TRIPS; ++i) {
      const int idx = tid + i * nthreads, r = idx / H;
      wv[i] = idx < NQ && r < nrows ? weights[(i64)(m0 + r) * H + (idx % H)] : 0.0f;
    }
    stage_row_windows<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, rb, N, tid);
#pragma unroll
    for (int i = 0; i < TRIPS; ++i) {
      const int idx = tid + i * nthreads;
      if (idx < CHUNKS) store_q_chunk_permuted<D>(q_s, idx / (D / 16), 16 * (idx % (D / 16)), v[i]);
    }
#pragma unroll
    for (int i = 0; i < W_TRIPS; ++i)
      if (tid + i * nthreads < NQ) w_s[tid + i * nthreads] = wv[i];
  }
  // Generic-proxy stores read by the async proxy (wgmma) need this fence before the barrier.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const BlockSpan bs = uniform_block_span<BM, TILE>(win_s, N, split, split_n);
  const int lo = bs.lo, hi = bs.hi, tile_begin = bs.tile_begin, tile_end = bs.tile_end;
  const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_s);

  // EPI_MMA: B operand of the head-reduce MMA, the block-diagonal weights, staged once per block in
  // shared memory in fragment order (one 8-byte read per lane per slab; registers would cost 2 per slab and
  // a resident warpgroup). Slab i covers columns [16i, 16i + 16) = row 16i / H (H >= 16), so lane
  // (gid, tig) holds weights[row][16i%H + 2tig + {0, 1, 8, 9}] when gid == that row, zero otherwise.
  __shared__ uint2 wb_s[EPI == EPI_MMA ? SLABS * WARP : 1];
  if constexpr (EPI == EPI_MMA) {
    for (int idx = tid; idx < SLABS * WARP; idx += nthreads) {
      const int i = idx / WARP, l = idx % WARP, g = l >> 2, tg = l & 3;
      const bool mine = g == (16 * i) / H;
      wb_s[idx] = mine ? make_uint2(bf16x2(w_s[16 * i + 2 * tg], w_s[16 * i + 2 * tg + 1]),
                                    bf16x2(w_s[16 * i + 8 + 2 * tg], w_s[16 * i + 9 + 2 * tg]))
                       : make_uint2(0u, 0u);
    }
    __syncthreads();
  }

  // Warpgroup-uniform: skip the tensor work when no row's window meets this tile (packed requests).
  auto tile_hit = [&](int base) { return any_window_meets<BM>(win_s, base, TILE); };
  auto issue = [&](float (&acc)[NACC], const WgTile<NCH>& kt) {
    fence_regs(acc);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    wgmma_rs_tile<NQ, D, NCH>(acc, kt, q_base);
    fence_regs(acc);
  };
  auto commit = [] { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); };
  // One value (row r, token tok) of the tile: the logit inside the row's window, -inf outside it.
  auto put = [&](int r, int tok, bool hit, float v) {
    if (r < nrows) store_logit(out + (i64)(m0 + r) * out_row_stride, tok, hi, win_s[r], hit, clean, v);
  };
  // This lane's two weights of column group j (columns 8j + 2tig, 8j + 2tig + 1): the fp32 head reduce's operand.
  auto weight = [&](int j) { return *reinterpret_cast<const float2*>(w_s + 8 * j + 2 * tig); };
  auto epilogue = [&](float (&acc)[NACC], float sc0, float sc1, int base, bool hit) {
    const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
    if constexpr (EPI == EPI_MMA) {
      // Accumulator (row gid / gid+8, cols 8j + 2tig + {0,1}) is exactly the m16n8k16 A fragment of slab
      // i = columns 16i..16i+15: a0 = (gid, 2tig..) = d[8i+0,1], a1 = (gid+8, ..) = d[8i+2,3],
      // a2 = (gid, 8+2tig..) = d[8i+4,5], a3 = (gid+8, 8+2tig..) = d[8i+6,7]. No shuffles.
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (PP || hit) {  // PP: no accumulator read under a branch (ptxas would serialize the wgmmas)
#pragma unroll
        for (int i = 0; i < SLABS; ++i) {
          const uint2 b = wb_s[i * WARP + lane];
          mma_bf16(c, relu_bf16x2(acc[8 * i + 0], acc[8 * i + 1]), relu_bf16x2(acc[8 * i + 2], acc[8 * i + 3]),
                   relu_bf16x2(acc[8 * i + 4], acc[8 * i + 5]), relu_bf16x2(acc[8 * i + 6], acc[8 * i + 7]),
                   b.x, b.y);
        }
      }
      // C fragment: c0/c1 = (token gid, rows 2tig, 2tig+1), c2/c3 = (token gid+8, same rows).
      if (2 * tig < BM) {
        put(2 * tig, tok0, hit, c[0] * sc0);
        put(2 * tig, tok0 + 8, hit, c[2] * sc1);
        if (2 * tig + 1 < BM) {
          put(2 * tig + 1, tok0, hit, c[1] * sc0);
          put(2 * tig + 1, tok0 + 8, hit, c[3] * sc1);
        }
      }
    } else if constexpr (EPI != EPI_FP32) {
      WgEpilogueExt<EPI>::run(acc, sc0, sc1, tok0, hit, put);  // experiments only
    } else {
      wg_head_sum_fp32<H, NQ>(acc, weight, PP || hit, hit, tig, tok0, sc0, sc1, put);
    }
  };

  float accA[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) accA[i] = 0.0f;

  if constexpr (!PP) {
    // DESIGN: warpgroups split the tile range; the next tile's K is prefetched into registers while
    // this one is multiplied, so each warpgroup keeps a K stream in flight.
    WgTile<NCH> cur, nxt;
    int t = tile_begin + wg;
    if (t < tile_end) load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
    // interior: the tile lies in every row's window (WG_PEEL_INTERIOR), so it is hit and its stores need no tests
    auto step = [&](bool interior) {
      const int base = lo + t * TILE;
      cur = nxt;
      if (t + nwg < tile_end)
        load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
      const bool hit = interior || tile_hit(base);
      if (hit) wgmma_rs_tile_sync<NQ, D, NCH>(accA, cur, q_base);
      if (interior && EPI == EPI_FP32) {
        wg_head_sum_fp32<H, NQ>(accA, weight, true, true, tig, base + 16 * wq + gid, cur.scale[0], cur.scale[1],
                                [&](int r, int tok, bool, float v) { out[(i64)(m0 + r) * out_row_stride + tok] = v; });
      } else {
        epilogue(accA, cur.scale[0], cur.scale[1], base, hit);
      }
    };
    if constexpr (WG_PEEL_INTERIOR && EPI == EPI_FP32) {
      // DESIGN: the tiles inside the intersection [in_lo, in_hi) of the BM rows' windows (empty unless
      // all BM rows exist) run without window tests: t in [ib, ie), the rest before and after it
      const TileRange in = rows_interior_tile_range<BM>(win_s, nrows, lo, N, TILE);
      for (; t < tile_end && t < in.begin; t += nwg) step(false);
      for (; t < tile_end && t < in.end; t += nwg) step(true);
    }
    for (; t < tile_end; t += nwg) step(false);
  } else {  // PP: the ping-pong loop (kernels/experimental/ only)
    WgPingPongLoop<PP>::template run<D, NCH, TILE>(accA, k, kv_scale, lo, hi, tile_begin, tile_end, wg, nwg, wq, gid,
                                                  tig, tile_hit, issue, commit, epilogue);
  }

  // The fused -inf fill of [0, lo) and [hi, N), spread over every (split, warp) worker.
  if (clean)
    fill_outside_union(out, out_row_stride, m0, nrows, lo, hi, N, flags & FLAG_VEC4_FILL, split * num_warps + warp,
                       split_n * num_warps, lane);
}
