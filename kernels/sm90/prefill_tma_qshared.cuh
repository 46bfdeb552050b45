// ===================================================================================================
// "tmaq": "tmas"'s consumer loop with the four consumers on ONE row block's Q, dealing its K tiles between them, on a
// persistent grid whose next row block's Q is staged while the current one runs (issue 14, docs/PERFORMANCE.md v17).
//
// Why: "tmas" gives each of its four consumers its own rows (BM = 4 * 128 / H rows per block) and all four read
// every K tile of the block's span, so a block's time is its span: at 1024^2 causal H 64 the last of 128 blocks walks
// 16 tiles while the first walks 1, one block per SM (0.78x DeepGEMM). "wgpr" balances the chains but stages Q at
// every block start with nothing to hide it (ncu, session 9: 7.8% of the stall samples) and keeps one wgmma -> reduce
// chain per warpgroup. DeepGEMM's structure is the other decomposition: the warpgroups of an SM share one row block
// of 128 / H rows and split its keys, and the SM walks row blocks b, b + SMs, ... with the next one's Q fetched
// during the current one. Its K is read once per row block, four times what "tmas" reads, so this is a small-problem
// design: "auto" takes it only where the H200 measured it faster (dispatch/sm90.py).
//
// DESIGN: Q-shared row blocks. BQ = 128 / H rows (wgmma N = 128 = BQ * H, as every tmas consumer), one copy of their
// Q, weights and windows in shared memory, read by all four consumers.
// DESIGN: tiles dealt by ring position. Tile j of a row block's span (64 tokens from the union's start) is ring
// position p = g0 + j, g0 = the tiles the block streamed before it, and consumer p % 4 reads it (tma_consumer_tiles
// with STEP = 4): consumer c owns ring stages c, c + 4, c + 8, c + 12, so a stage's empty barrier counts that
// consumer's four warps, and over a block's row blocks the consumers' tile counts differ by one at most (dealing from
// tile 0 of every row block would give consumer 0 the odd tiles of every row block).
// DESIGN: snake order. Block b of G takes row blocks i G + b (i even) and i G + G - 1 - b (i odd): a causal row
// block's work grows with its index, and the pairs (b, 2G - 1 - b) sum to the same.
// DESIGN: Q double-buffered by loader warps. Warps 1-2 of the producer warpgroup stage row block i + 1 into buffer
// (i + 1) & 1 while the consumers run row block i: its Q as one TMA box of Q's own tensor map (Q viewed as [M * H, D]
// rows, box BQ * H = 128 rows, swizzled by the copy engine, zeros past M * H; the box's bytes counted on the
// buffer's "Q full" barrier), its weights (cp.async, tmas's LDS.128 layout) and clipped windows; they wait on the
// buffer's "Q empty" barrier (one arrival per consumer thread) and arrive on "Q full" after cp.async.wait_all. The
// 16 KB Q box replaced 1024 16-byte cp.async by the two loader warps: 0.3-0.8 us faster at 1024^2 H 64 (v19).
// (Measured slower: one loader warp per buffer, and four buffers with two row blocks' copies in flight;
// PERFORMANCE.md v17, calls 3 and 5.)
// Warp 0 lane 0 streams the K tiles of row block after row block through one TMAQ_STAGES-deep ring, each row block's
// span read from the windows in global memory (so the first tiles are in flight while Q is still being copied);
// warp 3 runs the fused -inf fill outside each row block's span (clean_logits). Register split as "tmas"
// (setmaxnreg 32 / 112).
// ===================================================================================================
#pragma once
#include "prefill_tma_balanced.cuh"  // piece_row_windows, TmabBuf; prefill_tma.cuh's consumer loop

constexpr int TMAQ_QBUF = 2;        // Q / weights / windows buffers
// K tiles in flight: four per consumer (each consumer owns every fourth stage, so "tmas"'s 8 would leave it two; the
// Q-shared layout frees the shared memory: 128 KB of ring at D = 128); mirrored in dispatch/sm90_tensor_map.py
constexpr int TMAQ_STAGES = 16;
constexpr int TMAQ_LOADER_WARPS = 2;  // warps 1 .. TMAQ_LOADER_WARPS of the producer warpgroup stage Q
// DIAGNOSTIC (TMAQ_TRACE, never in a shipped build): per block, SM cycle stamps (clock64, relative to the stamping
// thread's own start) of each role's steps for its first TMAQ_TRACE_ROW_BLOCKS row blocks, plus %globaltimer at entry
// and exit to line blocks up; read back by bench/tmaq_trace.py through cuModuleGetGlobal (docs/PERFORMANCE.md v18).
#ifndef TMAQ_TRACE
#define TMAQ_TRACE 0
#endif
#if TMAQ_TRACE
constexpr int TMAQ_TRACE_BLOCKS = 132, TMAQ_TRACE_ROW_BLOCKS = 6;
// slots: 0 entry globaltimer, 1 exit globaltimer (consumer 0), 2 exit clock; 3 + 2 i (+1): producer span read,
// row block i's last TMA issued; 15 + 2 i (+1): loaders' copy start (Q buffer free), Q full arrive;
// 27 + 12 c + 2 i (+1): consumer c past Q full, done with the row block; 75, 76: the first loader thread past the
// barrier set-up, past its register release; 77: consumer 0's first thread past its register claim
constexpr int TMAQ_TRACE_SLOTS = 27 + 12 * 4 + 3;
__device__ long long tmaq_trace[TMAQ_TRACE_BLOCKS][TMAQ_TRACE_SLOTS];
#define TMAQ_STAMP(slot, t0)                                                                              \
  do {                                                                                                    \
    if (b < TMAQ_TRACE_BLOCKS) tmaq_trace[b][(slot)] = (long long)clock64() - (t0);                     \
  } while (0)
#define TMAQ_STAMP_RB(base, i, k, t0)                                                                     \
  do {                                                                                                    \
    if ((i) < TMAQ_TRACE_ROW_BLOCKS) TMAQ_STAMP((base) + 2 * (i) + (k), t0);                            \
  } while (0)
#else
#define TMAQ_STAMP(slot, t0) ((void)0)
#define TMAQ_STAMP_RB(base, i, k, t0) ((void)0)
#endif

// The i-th row block of block b of G (snake order); >= the row block count once the block is done.
__device__ __forceinline__ int tmaq_row_block(int i, int b, int G) { return i * G + ((i & 1) ? G - 1 - b : b); }

template <int H, int D, bool WKEEP>
__device__ __forceinline__ void fp8_mqa_logits_tmaq_body(const float* __restrict__ kv_scale,
                                                         const float* __restrict__ weights,
                                                         const int* __restrict__ cu_seqlen_ks,
                                                         const int* __restrict__ cu_seqlen_ke, float* __restrict__ out,
                                                         i64 out_row_stride, int M, int N, int flags,
                                                         const TmaMap& k_map, const TmaMap& q_map) {
  constexpr int NC = TMA_NC;
  constexpr int BQ = 128 / H;   // rows of a row block
  constexpr int NQ = BQ * H;    // wgmma N of every consumer
  constexpr int BM = NC * BQ;   // tma_consumer_tiles's block rows (its rows per consumer, BM / NC, are BQ)
  constexpr int THREADS = ws_threads<NC>();
  static_assert(NQ == 128, "tmaq: BQ * H = 128 (H in {32, 64, 128})");
  static_assert(TMAQ_STAGES % NC == 0, "tmaq: each consumer owns the ring stages c, c + NC, ...");
  static_assert(NC * (ws_consumer_regs<NC>() - ws_entry_regs<NC>()) <= ws_entry_regs<NC>() - ws_producer_regs<NC>(),
                "setmaxnreg: the consumers may take only what the producer warpgroup gives back");
  constexpr int V = 2 * BQ, VPL = V >= 4 ? V / 4 : 1;
  constexpr uint32_t STAGE_BYTES = TMA_TILE * D, Q_BYTES = NQ * D;
  constexpr int LOADERS = TMAQ_LOADER_WARPS * WARP;

  extern __shared__ u8 dyn_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(dyn_raw);
  u8* const dyn_s = dyn_raw + ((TMA_SMEM_ALIGN - (raw0 % TMA_SMEM_ALIGN)) % TMA_SMEM_ALIGN);
  u8* const q_all = dyn_s;                                                   // [QBUF][Q_BYTES], swizzled
  u8* const ring_s = q_all + TMAQ_QBUF * Q_BYTES;                            // [TMAQ_STAGES][STAGE_BYTES], swizzled
  float* const w_all = reinterpret_cast<float*>(ring_s + TMAQ_STAGES * STAGE_BYTES);  // [QBUF][NQ], LDS.128 layout
  int2* const win_all = reinterpret_cast<int2*>(w_all + TMAQ_QBUF * NQ);     // [QBUF][BQ], clipped
  // full, empty [TMAQ_STAGES]; q_full, q_empty [TMAQ_QBUF]
  uint64_t* const bars = reinterpret_cast<uint64_t*>(win_all + TMAQ_QBUF * BQ);
  static_assert((TMAQ_QBUF * (NQ * 4 + BQ * 8)) % 8 == 0, "mbarriers 8-byte aligned");

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wgi = __shfl_sync(0xffffffffu, warp / 4, 0), wq = warp % 4;
  const int gid = lane >> 2, tig = lane & 3;
  const bool clean = flags & FLAG_CLEAN_LOGITS;
  const int G = gridDim.x, b = blockIdx.x;
  const int R = (M + BQ - 1) / BQ;
#if TMAQ_TRACE
  const long long t_entry = clock64();
  if (tid == 0 && b < TMAQ_TRACE_BLOCKS) tmaq_trace[b][0] = globaltimer_ns();
#endif

  const uint32_t q0 = (uint32_t)__cvta_generic_to_shared(q_all);
  const uint32_t w0 = (uint32_t)__cvta_generic_to_shared(w_all);
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars);
  const uint32_t empty0 = full0 + 8 * TMAQ_STAGES;
  const uint32_t q_full0 = empty0 + 8 * TMAQ_STAGES;
  const uint32_t q_empty0 = q_full0 + 8 * TMAQ_QBUF;
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  if (tid == 0) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&k_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&q_map)) : "memory");
#pragma unroll
    for (int s = 0; s < TMAQ_QBUF; ++s) {
      mbar_init(q_full0 + 8 * s, LOADERS);
      mbar_init(q_empty0 + 8 * s, 128 * NC);
    }
  }
  // full: the producer's arrive.expect_tx; empty: the four warps of the one consumer that reads the stage
  init_ring_barriers<TMAQ_STAGES>(full0, empty0, 1, 4, tid);
  if (tid == WARP) TMAQ_STAMP(75, t_entry);

  if (wgi == 0) {
    setmaxnreg_dec<ws_producer_regs<NC>()>();
    if (tid == WARP) TMAQ_STAMP(76, t_entry);
    if (warp == 0) {
      if (lane == 0) {
        int g = 0;  // ring position of the next tile
#pragma unroll 1
        for (int i = 0;; ++i) {
          const int rb = tmaq_row_block(i, b, G);
          if (rb >= R) break;
          // the span from global memory, not from the loaders' copy: the first K tiles need not wait for Q
          const int m0 = rb * BQ;
          const int2 span = rows_union_window<BQ>(cu_seqlen_ks, cu_seqlen_ke, m0, min(BQ, M - m0), N);
          const int n_t = (span.y - span.x + TMA_TILE - 1) / TMA_TILE;
          TMAQ_STAMP_RB(3, i, 0, t_entry);
#pragma unroll 1
          for (int j = 0; j < n_t; ++j, ++g) {
            const int stage = g % TMAQ_STAGES;
            if (g >= TMAQ_STAGES) mbar_wait(empty0 + 8 * stage, ((g / TMAQ_STAGES) & 1) ^ 1);
            mbar_arrive_expect_tx(full0 + 8 * stage, STAGE_BYTES);  // the whole box counts, zero-filled rows too
            tma_load_tile(ring0 + stage * STAGE_BYTES, &k_map, span.x + j * TMA_TILE, full0 + 8 * stage);
          }
          TMAQ_STAMP_RB(3, i, 1, t_entry);
        }
      }
    } else if (warp <= TMAQ_LOADER_WARPS) {
      const int lt = tid - WARP;  // 0 .. LOADERS - 1
#pragma unroll 1
      for (int i = 0;; ++i) {
        const int rb = tmaq_row_block(i, b, G);
        if (rb >= R) break;
        const int buf = i & 1;
        if (i >= TMAQ_QBUF) mbar_wait(q_empty0 + 8 * buf, ((i >> 1) - 1) & 1);  // the consumers left use i - 2
        if (lt == 0) TMAQ_STAMP_RB(15, i, 0, t_entry);
        const int m0 = rb * BQ, nrows = min(BQ, M - m0);
        if (lt == 0) {  // the box's bytes join "Q full" before this thread's own arrival below
          mbar_expect_tx(q_full0 + 8 * buf, Q_BYTES);
          tma_load_tile(q0 + buf * Q_BYTES, &q_map, m0 * H, q_full0 + 8 * buf);
        }
        const float* const w_rows = weights + (i64)m0 * H;
#pragma unroll 1
        for (uint32_t n = lt; n < NQ; n += LOADERS) {  // tmas's LDS.128 layout: column groups j, j + 1 per float4
          const bool ok = n < (uint32_t)nrows * H;
          const uint32_t j = n / 8, slot = 16 * (j / 2) + 4 * ((n % 8) / 2) + 2 * (j % 2) + n % 2;
          cp_async4_zfill(w0 + 4 * (buf * NQ + slot), w_rows + (ok ? n : 0), ok ? 4u : 0u);
        }
        cp_async_commit_group();
        if (lt < BQ) win_all[buf * BQ + lt] = lt < nrows ? clipped_window(cu_seqlen_ks, cu_seqlen_ke, m0 + lt, N)
                                                        : make_int2(0, 0);
        cp_async_wait_groups<0>();
        mbar_arrive(q_full0 + 8 * buf);
        if (lt == 0) TMAQ_STAMP_RB(15, i, 1, t_entry);
      }
    } else if (clean) {
      // DESIGN: fused -inf fill outside each row block's span, by the last warp (disjoint from the tiles' stores)
      const bool vec4 = flags & FLAG_VEC4_FILL;
#pragma unroll 1
      for (int i = 0;; ++i) {
        const int rb = tmaq_row_block(i, b, G);
        if (rb >= R) break;
        const int m0 = rb * BQ, nrows = min(BQ, M - m0);
        const int2 span = rows_union_window<BQ>(cu_seqlen_ks, cu_seqlen_ke, m0, nrows, N);
        float* dst_row = out + (i64)m0 * out_row_stride;
#pragma unroll 1
        for (int r = 0; r < nrows; ++r, dst_row += out_row_stride) {
          tma_fill_neg_inf(dst_row, 0, span.x, vec4, lane, WARP);
          tma_fill_neg_inf(dst_row, span.y, N, vec4, lane, WARP);
        }
      }
    }
  } else {
    setmaxnreg_inc<ws_consumer_regs<NC>()>();
    if (tid == 128) TMAQ_STAMP(77, t_entry);
    const int c = wgi - 1;  // this consumer reads the tiles at ring positions c, c + NC, ...
    const uint64_t k_desc0 = swizzled_desc<D>(ring0);
    const int v0 = V >= 4 ? VPL * tig : (tig >> 1);
    const int r_lane = v0 >> 1;
    const bool lane_stores = V >= 4 || (tig & 1) == 0;
    constexpr int WRP = WKEEP ? tma_kept_weight_pairs<H>() : 0;
    int g = 0;  // ring position of the row block's first tile (every consumer counts all tiles)
#pragma unroll 1
    for (int i = 0;; ++i) {
      const int rb = tmaq_row_block(i, b, G);
      if (rb >= R) break;
      const int buf = i & 1;
      const int m0 = rb * BQ, nrows = min(BQ, M - m0);
      mbar_wait(q_full0 + 8 * buf, (i >> 1) & 1);
      if (tid % 128 == 0) TMAQ_STAMP_RB(27 + 12 * c, i, 0, t_entry);
      // the buffer's body compiled per buffer (tmasb4's reason: a runtime buffer index costs SASS in the tile loop)
      auto run_row_block = [&](auto bsel) {
        constexpr int BI = decltype(bsel)::value;
        const int2* const win_c = win_all + BI * BQ;
        const int2 span = union_window<BQ>(win_c, N);
        const int lo = __shfl_sync(0xffffffffu, span.x, 0), hi = __shfl_sync(0xffffffffu, span.y, 0);
        const int n_t = (hi - lo + TMA_TILE - 1) / TMA_TILE;
        const int j0 = (c - g) & (NC - 1);  // the row block's first tile at a ring position of this consumer's
        if (j0 < n_t) {
          const uint32_t first = (uint32_t)(g + j0);
          int stage = (int)(first % TMAQ_STAGES);
          uint32_t phase = (first / TMAQ_STAGES) & 1;
          tma_consumer_tiles<H, D, BM, WRP, NC, TMAQ_STAGES>(
              j0, n_t, lo, hi, piece_row_windows<BQ, false>(win_c, 0, nrows, N), out, out_row_stride, m0, 0, r_lane,
              win_c, r_lane < nrows, clean, kv_scale, w_all + BI * NQ, swizzled_desc<D>(q0 + BI * Q_BYTES), k_desc0,
              full0, empty0, stage, phase, v0, lane_stores, lane, wq, gid, tig);
        }
        g += n_t;
      };
      if (buf) run_row_block(TmabBuf<1>{});
      else run_row_block(TmabBuf<0>{});
      // this thread's wgmmas and epilogue are done with the buffer: one arrival per thread, so each thread's own
      // reads are ordered before the loaders' next copies (the protocol racecheck follows; decode's ring, session 6)
      if (tid % 128 == 0) TMAQ_STAMP_RB(27 + 12 * c, i, 1, t_entry);
      mbar_arrive(q_empty0 + 8 * buf);
    }
#if TMAQ_TRACE
    if (tid == 128 && b < TMAQ_TRACE_BLOCKS) {
      tmaq_trace[b][1] = globaltimer_ns();
      tmaq_trace[b][2] = clock64() - t_entry;
    }
#endif
  }
}

// fp8_mqa_logits_sm90_h{H}_d{D}_bm{BQ}_tmaq: tmas's argument list (split_n unused: the grid is the block count), then
// Q's CUtensorMap ([M * H, D] rows of q, box 128 rows) after K's.
#define INSTANTIATE_tmaq(H, D, BM)                                                                                    \
  extern "C" __global__ void __launch_bounds__(ws_threads<TMA_NC>(), 1)                                               \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_tmaq(KERNEL_PARAMS, const __grid_constant__ TmaMap k_map,            \
                                                      const __grid_constant__ TmaMap q_map) {                         \
    static_assert(BM == 128 / H, "tmaq: BLOCK_M = 128 / H rows per row block");                                       \
    (void)q;                                                                                                          \
    (void)k;                                                                                                          \
    (void)num_warps;                                                                                                  \
    (void)split_n;                                                                                                    \
    fp8_mqa_logits_tmaq_body<H, D, true>(kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, out_row_stride, M, N,    \
                                         flags, k_map, q_map);                                                       \
  }
