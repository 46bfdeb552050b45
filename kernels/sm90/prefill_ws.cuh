// ===================================================================================================
// Warp-specialised wgmma design "ws" (docs/PERFORMANCE.md v7).
//
// Block = 3 warpgroups, one block per SM (__launch_bounds__(384, 1)):
//   * warpgroup 0, warp 0: the PRODUCER. It keeps a WS_STAGES-deep ring of K tiles (64 tokens each) in dynamic
//     shared memory full with cp.async.bulk (the bulk copy engine without a tensor map: a tile of K is
//     64 * D contiguous bytes, so one copy per tile, no descriptor, and the kernel keeps the plain argument
//     list), completed on a "full" mbarrier per stage with complete_tx; it waits on the stage's "empty"
//     mbarrier before refilling. (Per-row copies into padded rows were tried first: ptxas turns a per-lane
//     cp.async.bulk into a ~10-instruction waterfall per copy, 640 producer issue slots per tile.)
//   * warpgroup 0, warps 1-3: the fused -inf fill of [0, lo) and [hi, N), while the consumers compute.
//   * warpgroups 1 and 2: CONSUMERS. Each owns half of the block's rows (BMW = BM / 2 rows, wgmma N = BMW * H)
//     and its own copy of their Q in shared memory; both read every K tile of the ring (the tile is fetched
//     once for 2 * N query columns). A = the K tile from registers (the same k-permuted fragments as "wg",
//     read from the ring with LDS.128), B = Q from shared memory. Exact f32 epilogue as "wg", weights held in
//     registers. The two consumers take turns issuing their wgmmas (named barriers 1 and 2, CUTLASS's
//     "ping-pong"), so the tensor core runs one warpgroup's tile while the other does its epilogue.
//   * setmaxnreg moves registers from the producer warpgroup (40) to the consumers (232).
//   The same body, templated on NC consumers (ORDER: the turn-taking above; SS: both operands from shared memory,
//   see fp8_mqa_logits_ws_body), gives the experiment forms ws3 / ws4 / ws4n / wss (bench/race_sm90.py --build).
// ===================================================================================================
#pragma once
#include "common.cuh"
#include "wgmma.cuh"
#include "async_copy.cuh"

constexpr int WS_STAGES = 6;          // K tiles in flight; mirrored by WS_STAGES in rawindexer/dispatch/sm90.py
constexpr int WS_ORDER_BAR = 1;       // named barriers 1..NC: the consumers' wgmma issue order (0 = __syncthreads)
// NC consumer warpgroups: 128 * (1 + NC) threads. setmaxnreg.inc draws on the CTA's own pool (SASS:
// USETMAXREG.TRY_ALLOC.CTAPOOL), which holds only what the producer warpgroup gave back with setmaxnreg.dec, so
//   NC * (consumer - entry) <= entry - producer,   entry = the registers per thread the block launched with
// (65536 / threads rounded down to 8, as ptxas allocates under __launch_bounds__(threads, 1)). An increase past
// that waits forever: the first 4-consumer build asked for 120 with entry 96 and producer 32 and hung on the H200.
template <int NC>
__host__ __device__ constexpr int ws_threads() { return 128 * (1 + NC); }
template <int NC>
__host__ __device__ constexpr int ws_entry_regs() { return 65536 / ws_threads<NC>() / 8 * 8; }
template <int NC>
__host__ __device__ constexpr int ws_producer_regs() { return NC >= 4 ? 32 : 40; }  // NC = 4: 96 + 64 / 4 = 112
template <int NC>
__host__ __device__ constexpr int ws_consumer_regs() {
  return (ws_entry_regs<NC>() + (ws_entry_regs<NC>() - ws_producer_regs<NC>()) / NC) / 8 * 8 > 240
             ? 240
             : (ws_entry_regs<NC>() + (ws_entry_regs<NC>() - ws_producer_regs<NC>()) / NC) / 8 * 8;
}
// Dynamic shared memory of one block (the host computes the same sum, rawindexer/dispatch/sm90.py):
//   Q of every consumer (NC * NQ * D) | the K ring (WS_STAGES * 64 * D) | the weights (NC * NQ floats)

__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// SS = false: the K tile is read into registers (RS wgmma), filled by one cp.async.bulk per tile (row-major).
// SS = true ("wss", experiment): both wgmma operands from shared memory, so the consumers hold no K registers
// (4 consumers fit in 112 registers); the K tile must then be in core-matrix layout, which a one-dimensional
// bulk copy cannot produce, so warps 0-1 of the producer warpgroup build it with 16-byte cp.async.cg (8 lanes
// per 128-byte core-matrix row: conflict-free); warps 2-3 do the fill. A stage is signalled WS_SS_LAG tiles
// later, after cp.async.wait_group + fence.proxy.async in the writing threads (generic-proxy writes read by
// wgmma's async proxy), so the consumers need no fence of their own (on them it would be a MEMBAR.ALL.CTA
// waiting for their own previous stores every tile).
constexpr int WS_SS_LAG = 3;  // tiles of copies in flight per producer thread, < WS_STAGES
template <int H, int D, int BM, int NC, bool ORDER, bool SS>
__device__ __forceinline__ void fp8_mqa_logits_ws_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                       const float* __restrict__ kv_scale,
                                                       const float* __restrict__ weights,
                                                       const int* __restrict__ cu_seqlen_ks,
                                                       const int* __restrict__ cu_seqlen_ke,
                                                       float* __restrict__ out, i64 out_row_stride, int M, int N,
                                                       int split_n, int flags) {
  constexpr int BMW = BM / NC;  // rows per consumer warpgroup
  constexpr int NQ = BMW * H;   // wgmma N of one consumer
  constexpr int THREADS = ws_threads<NC>();
  constexpr bool WREG = NC <= 3;  // weights in registers (32 at N = 128) while the register budget allows it
  static_assert(BM % NC == 0, "BLOCK_M splits evenly over the consumers");
  static_assert(NC * (ws_consumer_regs<NC>() - ws_entry_regs<NC>()) <= ws_entry_regs<NC>() - ws_producer_regs<NC>(),
                "setmaxnreg: the consumers may take only what the producer warpgroup gives back");
  static_assert(NQ == 64 || NQ == 128 || NQ == 256, "BLOCK_M / NC * H must be 64, 128 or 256");
  static_assert(D % 64 == 0, "D must be a multiple of 64");
  constexpr int KS = D / 32, NCH = D / 64, TILE = 64, NACC = NQ / 2;
  constexpr int ROW = D;  // ring row pitch: the tile as it lies in global memory
  constexpr int STAGE_BYTES = TILE * ROW;
  constexpr uint32_t LBO = 128, SBO = 8 * D;

  __shared__ int2 win_s[BM];
  __shared__ __align__(8) uint64_t full_bar[WS_STAGES];
  __shared__ __align__(8) uint64_t empty_bar[WS_STAGES];
  extern __shared__ __align__(128) u8 dyn_s[];
  u8* const q_all = dyn_s;                                   // [NC][NQ * D]
  u8* const ring_s = dyn_s + NC * NQ * D;                    // [WS_STAGES][STAGE_BYTES]
  float* const w_all = reinterpret_cast<float*>(ring_s + WS_STAGES * STAGE_BYTES);  // [NC][NQ]

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wgi = warp / 4, wq = warp % 4;
  const int gid = lane >> 2, tig = lane & 3;

  const RowBlock rb = start_row_block<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, M, N, flags, tid);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  // Q of consumer c = rows [c * BMW, (c + 1) * BMW): RS in the permuted core-matrix layout of the "wg" path (the
  // A fragments carry the same permutation), SS in natural depth order (the K tile is in natural order too).
  for (int idx = tid; idx < NC * NQ * (D / 16); idx += THREADS) {
    const int c = idx / (NQ * (D / 16));
    const int rest = idx % (NQ * (D / 16));
    const int n = rest / (D / 16);
    const int d0 = 16 * (rest % (D / 16));
    const int r = c * BMW + n / H;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows) v = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + d0);
    if constexpr (SS) {
      *reinterpret_cast<uint4*>(q_all + c * (NQ * D) + (n / 8) * SBO + (n % 8) * 16 + (d0 / 16) * LBO) = v;
    } else {
      store_q_chunk_permuted<D>(q_all + c * (NQ * D), n, d0, v);
    }
  }
  constexpr int PRODUCERS = SS ? 64 : 1;  // threads that fill the ring (SS: warps 0-1; RS: one lane)
  constexpr int FILL_WARP0 = SS ? 2 : 1;  // the producer warpgroup's warps from here on do the -inf fill
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(full_bar);
  const uint32_t empty0 = (uint32_t)__cvta_generic_to_shared(empty_bar);
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  // full: RS the arrive.expect_tx, SS each producer thread once its copies landed; empty: every consumer thread
  // once its fragments are read
  init_ring_barriers<WS_STAGES>(full0, empty0, PRODUCERS, 128 * NC, tid);

  const BlockSpan bs = uniform_block_span<BM, TILE>(win_s, N, split, split_n);
  const int lo = bs.lo, hi = bs.hi, tile_begin = bs.tile_begin, tile_end = bs.tile_end;

  if (wgi == 0) {
    setmaxnreg_dec<ws_producer_regs<NC>()>();
    if (SS && warp < FILL_WARP0) {
      if constexpr (SS) {
        // PRODUCER (SS): chunk c of a tile = token 8 * (c / (8 * D/16)) + c % 8, depth chunk (c / 8) % (D/16),
        // stored at its core-matrix place; tokens past hi are zero-filled.
        static_assert(PRODUCERS % (8 * (D / 16)) == 0, "each producer thread keeps one (token % 8, chunk) place");
        constexpr int TH_STEP = PRODUCERS / (8 * (D / 16));  // 8-token groups advanced per copy of one thread
        const int t8 = tid % 8, kc = (tid / 8) % (D / 16), th0 = tid / (8 * (D / 16));
        const uint32_t dst_lane = th0 * SBO + kc * LBO + t8 * 16;
        const u8* src_lane = k + 16 * kc;
        static_assert(WS_SS_LAG < WS_STAGES, "a stage is signalled before the producer waits to refill it");
        int stage = 0, signal = 0, issued = 0;
        uint32_t phase = 0;
        auto signal_next = [&] {
          mbar_arrive(full0 + 8 * signal);
          signal = signal == WS_STAGES - 1 ? 0 : signal + 1;
        };
        for (int t = tile_begin, i = 0; t < tile_end; ++t, ++i) {
          if (i >= WS_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
          const int tok0 = lo + t * TILE + 8 * th0 + t8;
          const uint32_t dst0 = ring0 + stage * STAGE_BYTES + dst_lane;
#pragma unroll
          for (int j = 0; j < TILE / 8 / TH_STEP; ++j) {
            const int tok = tok0 + 8 * TH_STEP * j;
            const bool in = tok < hi;
            cp_async16_zfill(dst0 + j * TH_STEP * SBO, src_lane + (i64)(in ? tok : lo) * D, in ? 16u : 0u);
          }
          cp_async_commit_group();
          if (i >= WS_SS_LAG) {  // tile i - WS_SS_LAG has landed: make it visible to wgmma, then signal it
            cp_async_wait_groups<WS_SS_LAG>();
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            signal_next();
          }
          issued = i + 1;
          if (++stage == WS_STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        cp_async_wait_groups<0>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int r = 0; r < min(issued, WS_SS_LAG); ++r) signal_next();
      }
    } else if (!SS && warp == 0) {
      // PRODUCER (one lane): one copy per tile; tokens past hi are not fetched (their logits are never stored).
      int stage = 0;
      uint32_t phase = 0;
      for (int t = tile_begin, i = 0; lane == 0 && t < tile_end; ++t, ++i) {
        if (i >= WS_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
        const int base = lo + t * TILE;
        const uint32_t bytes = (uint32_t)(min(TILE, hi - base) * D);
        mbar_arrive_expect_tx(full0 + 8 * stage, bytes);
        bulk_copy_g2s(ring0 + stage * STAGE_BYTES, k + (i64)base * D, bytes, full0 + 8 * stage);
        if (++stage == WS_STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    } else if (clean) {
      // DESIGN: fused -inf fill, here overlapped with the consumers' tiles (disjoint columns).
      const int worker = split * (4 - FILL_WARP0) + (warp - FILL_WARP0);  // the producer warpgroup's other warps
      fill_outside_union(out, out_row_stride, m0, nrows, lo, hi, N, flags & FLAG_VEC4_FILL, worker,
                         split_n * (4 - FILL_WARP0), lane);
    }
  } else {
    setmaxnreg_inc<ws_consumer_regs<NC>()>();
    const int wg = wgi - 1;   // consumer index: rows [wg * BMW, (wg + 1) * BMW) of the block
    const int r0 = wg * BMW;
    // This lane's weights: accumulator column group j holds columns 8j + 2tig + {0, 1} = (row 8j / H, heads).
    // WREG: in registers; else in this consumer's slice of shared memory (written and read by its own warps).
    float2 wr[WREG ? NQ / 8 : 1];
    float* const w_s = w_all + wg * NQ;
    if constexpr (WREG) {
#pragma unroll
      for (int j = 0; j < NQ / 8; ++j) {
        const int r = r0 + (8 * j) / H, h = (8 * j) % H + 2 * tig;
        const float* wp = weights + (i64)(m0 + r) * H + h;  // 4-byte aligned only: two scalar loads
        wr[j] = r < nrows ? make_float2(wp[0], wp[1]) : make_float2(0.f, 0.f);
      }
    } else {
      stage_weights<H>(w_s, weights, m0 + r0, nrows - r0, NQ, tid - 128 * wgi, 128);
      named_bar_sync(WS_ORDER_BAR + NC + wg, 128);  // this consumer's warps only
    }
    auto weight = [&](int j) {
      if constexpr (WREG) return wr[j];
      else return *reinterpret_cast<const float2*>(w_s + 8 * j + 2 * tig);
    };
    const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_all + wg * (NQ * D));
    const u8* frag0 = ring_s + (16 * wq + gid) * ROW + (D / 4) * tig;

    auto put = [&](int r, int tok, bool hit, float v) {  // r: row of this consumer
      if (r0 + r < nrows)
        store_logit(out + (i64)(m0 + r0 + r) * out_row_stride, tok, hi, win_s[r0 + r], hit, clean, v);
    };

    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int t = tile_begin, i = 0; t < tile_end; ++t, ++i) {
      const int base = lo + t * TILE;
      const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
      const float sc0 = __ldg(kv_scale + min(tok0, hi - 1));
      const float sc1 = __ldg(kv_scale + min(tok0 + 8, hi - 1));
      const bool hit = any_window_meets<BMW>(win_s + r0, base, TILE);
      mbar_wait(full0 + 8 * stage, phase);
      WgTile<SS ? 1 : NCH> kt;
      if constexpr (!SS) {
        // Rows are D bytes apart, so at D = 128 the 8 gids of one LDS.128 would hit the same banks: odd gids read
        // their two chunks in the other order (8 distinct 16-byte bank groups per instruction), then swap back.
        const u8* fr = frag0 + stage * STAGE_BYTES;
        constexpr bool FLIP = NCH == 2 && NC < 4;  // NC = 4: no registers to spare for the swap (2-way conflicts)
        const int flip = FLIP ? (gid & 1) : 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int c = 0; c < NCH; ++c)
            kt.k[h][c] = *reinterpret_cast<const uint4*>(fr + h * 8 * ROW + 16 * (c ^ flip));
          if constexpr (FLIP) {
            const uint4 a = kt.k[h][0], b = kt.k[h][1];
            kt.k[h][0] = flip ? b : a;
            kt.k[h][1] = flip ? a : b;
          }
        }
        // Materialise the swapped fragments before the first wgmma: built lazily, they shared 4 registers and
        // ptxas then waited for each wgmma before building the next one's A (DEPBAR after every QGMMA).
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < NCH; ++c)
            asm volatile("" : "+r"(kt.k[h][c].x), "+r"(kt.k[h][c].y), "+r"(kt.k[h][c].z), "+r"(kt.k[h][c].w));
      }
      // ORDER (ping-pong): consumer 0 issues tile t, then consumer 1 tile t, ..., then consumer 0 tile t + 1.
      // Consumer c waits on barrier 1 + c and passes the turn on barrier 1 + (c + 1) % NC; consumer 0 skips its
      // first wait and the last consumer its last pass, so every arrive meets a sync.
      if (ORDER && (wg > 0 || i > 0)) named_bar_sync(WS_ORDER_BAR + wg, 256);
      const bool pass_turn = ORDER && !(wg == NC - 1 && t + 1 == tile_end);
      const int next_bar = WS_ORDER_BAR + (wg + 1) % NC;
      if (hit) {
        fence_regs(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        if constexpr (SS) {
#pragma unroll
          for (int s = 0; s < KS; ++s)
            wgmma_ss_k32<NQ>(acc, smem_desc(ring0 + stage * STAGE_BYTES + 256 * s, LBO, SBO),
                             smem_desc(q_base + 256 * s, LBO, SBO), s > 0);
        } else {
          wgmma_rs_tile<NQ, D, NCH>(acc, kt, q_base);
        }
        fence_regs(acc);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        if (pass_turn) named_bar_arrive(next_bar, 256);
        if (!SS) mbar_arrive(empty0 + 8 * stage);  // RS: the fragments are in registers (the wgmma has read them)
        wgmma_wait<0>();
        fence_regs(acc);
        if (SS) mbar_arrive(empty0 + 8 * stage);  // SS: the wgmma has finished reading the tile
      } else {
        if (pass_turn) named_bar_arrive(next_bar, 256);
        mbar_arrive(empty0 + 8 * stage);
      }
      if (++stage == WS_STAGES) {
        stage = 0;
        phase ^= 1;
      }
      // Exact f32 head reduction (as "wg"), weights from registers (WREG) or shared memory, kv_scale after it.
      wg_head_sum_fp32<H, NQ>(acc, weight, hit, hit, tig, tok0, sc0, sc1, put);
    }
  }
}
