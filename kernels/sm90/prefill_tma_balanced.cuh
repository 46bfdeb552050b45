// ===================================================================================================
// "tmasb" / "tmasb2": the shipped "tmas" (prefill_tma.cuh, v9 loop) on a balanced persistent schedule the device
// computes itself (issue 14, docs/PERFORMANCE.md v10). "tmasb2" ships: "auto" takes it where the H200 measured it
// faster (dispatch/sm90.py balanced_wins); "tmasb" (piece cost 2) is the first measured form, an experiment.
//
// Why: "tmas" launches (row blocks x split_n) blocks of one per SM, split_n chosen on the host from N alone (the
// host cannot read the windows: no device-to-host sync, the call must stay capturable in a CUDA graph). Every row
// block's tile range is cut into split_n equal parts, so the grid's time is set by the row block with the widest
// union window: at 671 x 131072 multi_req (4 requests, each its own key slice) the 3 row blocks that straddle a
// request boundary span two slices (1024 tiles against 512) and run twice as long as the other 123 blocks of the
// single wave; at H = 64 (8 rows per block) a 4096-row problem runs ~3.9 waves, the last one a quarter full, and
// causal row blocks differ in length.
//
// Design: grid = G blocks (the host passes G = the SM count; one 640-thread block per SM, as "tmas"). Prologue,
// all 640 threads: read every row's window (clipped to [0, N)), form each row block's union span [lo, hi), its
// tile count and its cost = tiles + tmab_piece_cost (0 for an empty span: the Q staging a piece pays, in tile
// units), and an exclusive prefix sum of the costs in shared memory (R = ceil(M / BM) row blocks; the host keeps
// R <= TMAB_MAX_ROW_BLOCKS and takes "tmas" above it). Block b owns the cost units [b T / G, (b + 1) T / G) of the
// concatenated row blocks and walks its pieces (row block r, tile sub-range) in order:
//   * producer lane: streams the K tiles of piece after piece into one ring; mbarrier stages and phases continue
//     across pieces, so the next piece's first tiles are in flight while the current piece drains;
//   * consumer warpgroup c (rows [c BM/4, (c+1) BM/4) of the row block): per piece, a barrier of its own 128
//     threads (the previous piece's wgmmas and epilogue are done with its Q, weights and windows), then it stages
//     its own Q rows (swizzled), weights and windows, fence.proxy.async, barrier, and runs the piece's tiles through
//     "tmas"'s loop itself (tma_consumer_tiles, prefill_tma.cuh); the four consumers never wait for each other;
//   * fill warps (1-3): the -inf fill (clean = 1) of [0, lo_r) and [hi_r, N) of rows m = b, b + G, ... (whole rows,
//     spread over all G blocks; rows of an empty-span row block get the whole row). Inside a span the tile stores
//     keep "tmas"'s rules (window value, -inf elsewhere under clean, nothing at clean = 0), each element written
//     once: the pieces of a row block are disjoint tile ranges.
// Shared memory: "tmas"'s layout, then the row blocks' spans (R int2) and the prefix (R + 1 int).
// "tmasb3" / "tmasb4" (v11, experiments): a second Q / weights / windows buffer per consumer, the next piece's staged
// by cp.async while the current piece runs (see VER 3 below); measured: no gain at clean = 0 (the per-piece cost is
// not the Q staging), 5-14% on clean = 1 short-span multi_req, -4% at H = 64 long rows from tmasb3's longer tile loop,
// which tmasb4 (the loop compiled per buffer) removes statically (unmeasured).
// ===================================================================================================
#pragma once
#include "prefill_tma.cuh"

// A piece's fixed cost (barrier, Q staging), in tiles (~1 us each): "tmasb" 2 (the guess before the H200); "tmasb2"
// 4, the per-piece cost fitted to tmasb's measured times (3.75 us per piece, docs/PERFORMANCE.md v10).
// "tmasb3" keeps tmasb2's 4 until its own H200 run (its Q staging overlaps the previous piece: the fit may drop).
template <int VER>
__host__ __device__ constexpr int tmab_piece_cost() {
  return VER >= 2 ? 4 : 2;
}
constexpr int TMAB_MAX_ROW_BLOCKS = 4096;   // mirrored in rawindexer/dispatch/sm90.py (48 KB of spans + prefix)
// "tmasb3": a second Q / weights / windows buffer per consumer (+66 KB at D = 128) leaves room for 2048 row blocks
constexpr int TMAB3_MAX_ROW_BLOCKS = 2048;  // mirrored in rawindexer/dispatch/sm90.py

// A compile-time buffer index ("tmasb4"'s per-buffer copies of the piece body).
template <int B>
struct TmabBuf {
  static constexpr int value = B;
};

constexpr int TMAB_BAR0 = 1;                // named barriers 1..4: one per consumer warpgroup (0 = __syncthreads)

// The pieces of one block's cost range [u0, u1): row block r from the last r with prefix[r] <= u0 while
// prefix[r] < u1; tiles [t0, t1) of r's span (its first COST units are the piece cost, no tiles).
template <int COST>
struct TmabWalk {
  const int* pre;
  int R, u0, u1, r;
  __device__ __forceinline__ TmabWalk(const int* pre_s, int rows, int a, int b) : pre(pre_s), R(rows), u0(a), u1(b) {
    int lo = 0, hi = R;  // largest r in [0, R) with pre[r] <= u0 (pre[0] = 0 <= u0)
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (pre[mid] <= u0) lo = mid;
      else hi = mid;
    }
    r = lo;
  }
  // The next non-empty piece: false when the range is done.
  __device__ __forceinline__ bool next(int& row_block, int& t0, int& t1) {
    while (r < R && pre[r] < u1) {
      const int p = pre[r], cur = r++;
      const int a = max(u0 - p, 0) - COST, b = min(u1, pre[cur + 1]) - p - COST;
      if (b > max(a, 0)) {
        row_block = cur;
        t0 = max(a, 0);
        t1 = b;
        return true;
      }
    }
    return false;
  }
  // The row block of the next non-empty piece, without advancing ("tmasb3" stages it one piece ahead; keeping the
  // peeked piece instead of re-walking costs registers the consumer loop does not have: spills at H >= 64).
  __device__ __forceinline__ bool peek(int& row_block) const {
    for (int rr = r; rr < R && pre[rr] < u1; ++rr) {
      const int p = pre[rr];
      const int a = max(u0 - p, 0) - COST, b = min(u1, pre[rr + 1]) - p - COST;
      if (b > max(a, 0)) {
        row_block = rr;
        return true;
      }
    }
    return false;
  }
};

// The windows of consumer rows [r0, r0 + BMW) of a piece's row block (`win`: its staged windows; CLIP: they were
// staged raw, as the two-buffer forms stage them, and are clipped to [0, N] here as the one-buffer staging does).
template <int BMW, bool CLIP>
__device__ __forceinline__ TmaRowWindows piece_row_windows(const int2* win, int r0, int nrows, int N) {
  int clo = N, chi = 0, in_lo = 0, in_hi = r0 + BMW <= nrows ? N : 0;
#pragma unroll
  for (int r = 0; r < BMW; ++r) {
    int2 w = win[r0 + r];
    if constexpr (CLIP) {
      w.x = max(min(w.x, N), 0);
      w.y = max(min(w.y, N), w.x);
    }
    if (w.y > w.x) {
      clo = min(clo, w.x);
      chi = max(chi, w.y);
    }
    in_lo = max(in_lo, w.x);
    in_hi = min(in_hi, w.y);
  }
  return TmaRowWindows{clo, chi, in_lo, in_hi};
}

// VER 2 ("tmasb2", after the first H200 run): piece cost 4; the producer prefetches each piece's Q rows into L2 when
// it starts streaming that piece's K tiles (~8 tiles before the consumers stage them); the -inf fill takes
// contiguous row ranges [b M / G, (b + 1) M / G) per block (as "tmas"'s blocks own consecutive rows).
// VER 3 ("tmasb3", issue 14 v11): tmasb2 with two Q / weights / windows buffers per consumer. A consumer issues the
// cp.async copies of piece p + 1 into the other buffer right after the barrier that opens piece p (every thread of
// the warpgroup is then past its last wgmma_wait and epilogue read of piece p - 1, the buffer's previous user), and
// waits for them (cp.async.wait_group 0, fence.proxy.async, barrier) only when piece p + 1 starts: the staging runs
// under piece p's tiles instead of between pieces. The windows land unclipped; the consumer clips them when it reads
// them (the per-lane test tok in [s, e) is the same on raw and clipped bounds for tok in [0, N)).
template <int H, int D, int BM, bool WKEEP, int VER = 1>
__device__ __forceinline__ void fp8_mqa_logits_tmab_body(const u8* __restrict__ q, const float* __restrict__ kv_scale,
                                                         const float* __restrict__ weights,
                                                         const int* __restrict__ cu_seqlen_ks,
                                                         const int* __restrict__ cu_seqlen_ke, float* __restrict__ out,
                                                         i64 out_row_stride, int M, int N, int flags,
                                                         const TmaMap& k_map) {
  constexpr int NC = TMA_NC;
  constexpr int BMW = BM / NC;  // rows per consumer
  constexpr int NQ = BMW * H;   // wgmma N of one consumer
  constexpr int THREADS = ws_threads<NC>();
  constexpr int NWARPS = THREADS / WARP;
  static_assert(BM % NC == 0 && NQ == 128, "TMA design: BLOCK_M = 4 * 128 / H (wgmma N = 128 per consumer)");
  static_assert(NC * (ws_consumer_regs<NC>() - ws_entry_regs<NC>()) <= ws_entry_regs<NC>() - ws_producer_regs<NC>(),
                "setmaxnreg: the consumers may take only what the producer warpgroup gives back");
  constexpr int V = 2 * BMW, VPL = V >= 4 ? V / 4 : 1;
  constexpr uint32_t STAGE_BYTES = TMA_TILE * D, Q_BYTES = NQ * D;
  constexpr bool V2 = VER >= 2, V3 = VER >= 3;
  constexpr int NBUF = V3 ? 2 : 1;  // Q / weights / windows buffers per consumer
  constexpr int COST = tmab_piece_cost<VER>();
  using Walk = TmabWalk<COST>;

  extern __shared__ u8 dyn_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(dyn_raw);
  u8* const dyn_s = dyn_raw + ((TMA_SMEM_ALIGN - (raw0 % TMA_SMEM_ALIGN)) % TMA_SMEM_ALIGN);
  u8* const q_all = dyn_s;                                                   // [NBUF][NC][NQ * D], swizzled
  u8* const ring_s = q_all + NBUF * NC * Q_BYTES;                            // [TMA_STAGES][STAGE_BYTES], swizzled
  float* const w_all = reinterpret_cast<float*>(ring_s + TMA_STAGES * STAGE_BYTES);  // [NBUF][NC][NQ]
  int2* const win_s = reinterpret_cast<int2*>(w_all + NBUF * NC * NQ);       // [NBUF][BM]: the pieces' windows
  uint64_t* const bars = reinterpret_cast<uint64_t*>(win_s + NBUF * BM);     // full[STAGES], empty[STAGES]
  int2* const span_s = reinterpret_cast<int2*>(bars + 2 * TMA_STAGES);       // [R]: row block r's union [lo, hi)
  const int R = (M + BM - 1) / BM;
  int* const pre_s = reinterpret_cast<int*>(span_s + R);                     // [R + 1]: exclusive prefix of costs
  static_assert((NBUF * (NC * NQ * 4 + BM * 8)) % 8 == 0, "mbarriers 8-byte aligned");
  __shared__ int warp_cost[NWARPS];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wgi = __shfl_sync(0xffffffffu, warp / 4, 0), wq = warp % 4;
  const int gid = lane >> 2, tig = lane & 3;
  const bool clean = flags & FLAG_CLEAN_LOGITS;
  const int G = gridDim.x, b = blockIdx.x;
  if (tid == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&k_map)) : "memory");

  // DESIGN: the schedule, computed by every block from the windows alone. Thread t takes row blocks
  // [t C, (t + 1) C) so its running sum is the prefix within them.
  const int C = (R + THREADS - 1) / THREADS;
  const int rb_begin = min(R, tid * C), rb_end = min(R, rb_begin + C);
  int my_cost = 0;
  for (int r = rb_begin; r < rb_end; ++r) {
    int lo = N, hi = 0;
#pragma unroll
    for (int i = 0; i < BM; ++i) {
      const int m = r * BM + i;
      if (m < M) {
        const int s = max(min(cu_seqlen_ks[m], N), 0);
        const int e = max(min(cu_seqlen_ke[m], N), s);
        if (e > s) {
          lo = min(lo, s);
          hi = max(hi, e);
        }
      }
    }
    if (hi <= lo) lo = hi = 0;
    span_s[r] = make_int2(lo, hi);
    const int tiles = (hi - lo + TMA_TILE - 1) / TMA_TILE;
    my_cost += tiles > 0 ? tiles + COST : 0;
  }
  int incl = my_cost;  // inclusive scan within the warp
#pragma unroll
  for (int d = 1; d < WARP; d <<= 1) {
    const int x = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += x;
  }
  if (lane == WARP - 1) warp_cost[warp] = incl;

  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars);
  const uint32_t empty0 = full0 + 8 * TMA_STAGES;
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  init_ring_barriers<TMA_STAGES>(full0, empty0, 1, 4 * NC, tid);  // includes __syncthreads: warp_cost visible
  int before = 0, total = 0;
#pragma unroll 1
  for (int w = 0; w < NWARPS; ++w) {
    const int c = warp_cost[w];
    before += w < warp ? c : 0;
    total += c;
  }
  {
    int run = before + incl - my_cost;
    for (int r = rb_begin; r < rb_end; ++r) {
      pre_s[r] = run;
      const int2 sp = span_s[r];
      const int tiles = (sp.y - sp.x + TMA_TILE - 1) / TMA_TILE;
      run += tiles > 0 ? tiles + COST : 0;
    }
    if (tid == 0) pre_s[R] = total;
  }
  __syncthreads();
  const int u0 = (int)((i64)total * b / G), u1 = (int)((i64)total * (b + 1) / G);

  if (wgi == 0) {
    setmaxnreg_dec<ws_producer_regs<NC>()>();
    if (warp == 0) {
      if (lane == 0) {
        Walk walk(pre_s, R, u0, u1);
        int stage = 0, i = 0, r, t0, t1;
        uint32_t phase = 0;
        while (walk.next(r, t0, t1)) {
          const int lo = span_s[r].x;
          if constexpr (V2) {  // this piece's Q rows into L2 for the consumers' staging (a hint: no effect on results)
            const int m0 = r * BM, nrows = min(BM, M - m0);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(q + (i64)m0 * H * D),
                         "r"((uint32_t)(nrows * H * D))
                         : "memory");
          }
          for (int t = t0; t < t1; ++t, ++i) {
            if (i >= TMA_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
            mbar_arrive_expect_tx(full0 + 8 * stage, STAGE_BYTES);  // the whole box counts, zero-filled rows too
            tma_load_tile(ring0 + stage * STAGE_BYTES, &k_map, lo + t * TMA_TILE, full0 + 8 * stage);
            if (++stage == TMA_STAGES) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
      }
    } else if (clean) {
      // DESIGN: the -inf fill outside every row block's span, whole rows m = b, b + G, ... per block.
      const int t0 = (warp - 1) * WARP + lane, step = 3 * WARP;
      const bool vec4 = flags & FLAG_VEC4_FILL;
#pragma unroll 1
      const int m_first = V2 ? (int)((i64)M * b / G) : b, m_end = V2 ? (int)((i64)M * (b + 1) / G) : M;
      const int m_step = V2 ? 1 : G;
      for (int m = m_first; m < m_end; m += m_step) {
        const int2 sp = span_s[m / BM];
        float* dst_row = out + (i64)m * out_row_stride;
        tma_fill_neg_inf(dst_row, 0, sp.x, vec4, t0, step);
        tma_fill_neg_inf(dst_row, sp.y, N, vec4, t0, step);
      }
    }
  } else {
    setmaxnreg_inc<ws_consumer_regs<NC>()>();
    const int wg = wgi - 1;  // consumer index: rows [wg * BMW, (wg + 1) * BMW) of each piece's row block
    const int r0 = wg * BMW;
    const int ctid = tid - 128 * wgi;  // 0..127 within this consumer
    const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_all) + wg * Q_BYTES;
    u8* const q_s = q_all + wg * Q_BYTES;
    float* const w_s = w_all + wg * NQ;
    const uint64_t q_desc = swizzled_desc<D>(q_base);
    const uint64_t k_desc0 = swizzled_desc<D>(ring0);
    const int v0 = V >= 4 ? VPL * tig : (tig >> 1);
    const int r_lane = v0 >> 1;
    const bool lane_stores = V >= 4 || (tig & 1) == 0;
    constexpr int WRP = WKEEP ? tma_kept_weight_pairs<H>() : 0;

    int stage = 0;
    uint32_t phase = 0;
    Walk walk(pre_s, R, u0, u1);
    int rb, tile_begin, tile_end;
    // V3: issue the cp.async copies of row block rbx's Q rows, weights and raw windows into buffer bx (one group).
    auto issue_stage = [&](int rbx, int bx) {
      const int m0x = rbx * BM, nrowsx = min(BM, M - m0x);
      const uint32_t qd = q_base + (uint32_t)(bx * NC * Q_BYTES);
      // rolled: the consumer's 112 registers have no room for eight unrolled addresses (spills at H >= 64). The
      // consumer's Q rows are one contiguous NQ x D span of q.
      const u8* const q_span = q + (i64)(m0x + r0) * H * D;
      const uint32_t valid_bytes = (uint32_t)max(nrowsx - r0, 0) * H * D;  // rows past M: zeros
      cp_async_span_swizzled<D, true>(qd, q_span, NQ * D, valid_bytes, q + (i64)m0x * H * D, ctid, 128);
      {
        const int n = ctid;  // tmas's LDS.128 weight layout, as the V1/V2 staging below
        const int r = r0 + n / H;
        const bool ok = r < nrowsx;
        const int j = n / 8;
        const uint32_t wd = (uint32_t)__cvta_generic_to_shared(w_all + (bx * NC + wg) * NQ +
                                                               16 * (j / 2) + 4 * ((n % 8) / 2) + 2 * (j % 2) + n % 2);
        cp_async4_zfill(wd, weights + (i64)(m0x + (ok ? r : 0)) * H + n % H, ok ? 4u : 0u);
      }
      if (ctid < BMW) {
        const bool ok = r0 + ctid < nrowsx;
        const int m = m0x + (ok ? r0 + ctid : 0);
        const uint32_t wn = (uint32_t)__cvta_generic_to_shared(win_s + bx * BM + r0 + ctid);
        cp_async4_zfill(wn, cu_seqlen_ks + m, ok ? 4u : 0u);
        cp_async4_zfill(wn + 4, cu_seqlen_ke + m, ok ? 4u : 0u);
      }
      cp_async_commit_group();
    };
    int buf = 0;
    bool have = false;  // V3: the piece to run was walked (and its staging issued) one piece ahead
    if constexpr (V3) {
      have = walk.next(rb, tile_begin, tile_end);
      if (have) issue_stage(rb, 0);
    }
    while (V3 ? have : walk.next(rb, tile_begin, tile_end)) {
      const int m0 = rb * BM, nrows = min(BM, M - m0);
      const int2 sp = span_s[rb];
      const int lo = sp.x, hi = sp.y;
      if constexpr (V3) {
        // This piece's copies (issued during the previous piece) landed and are visible to wgmma in every thread;
        // all four warps are past the previous piece (whose buffer buf ^ 1 the next copies overwrite).
        cp_async_wait_groups<0>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        named_bar_sync(TMAB_BAR0 + wg, 128);
        int next_rb;
        if (walk.peek(next_rb)) issue_stage(next_rb, buf ^ 1);
      } else {
      // Stage this consumer's Q rows, weights and windows for the piece, once its four warps are done with the
      // previous piece's (wgmmas waited for, epilogue done).
      named_bar_sync(TMAB_BAR0 + wg, 128);
#pragma unroll 2
      for (int idx = ctid; idx < NQ * (D / 16); idx += 128) {
        const int n = idx / (D / 16), j = idx % (D / 16);
        const int r = r0 + n / H;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < nrows) v = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + 16 * j);
        *reinterpret_cast<uint4*>(q_s + swizzled<D>(n * D + 16 * j)) = v;
      }
      {
        const int n = ctid;  // NQ = 128 = the consumer's threads: one weight each, in tmas's LDS.128 layout
        const int r = r0 + n / H;
        const float w = r < nrows ? weights[(i64)(m0 + r) * H + n % H] : 0.0f;
        const int j = n / 8;
        w_s[16 * (j / 2) + 4 * ((n % 8) / 2) + 2 * (j % 2) + n % 2] = w;
      }
      if (ctid < BMW) {
        int s = 0, e = 0;
        if (r0 + ctid < nrows) {
          s = max(min(cu_seqlen_ks[m0 + r0 + ctid], N), 0);
          e = max(min(cu_seqlen_ke[m0 + r0 + ctid], N), s);
        }
        win_s[r0 + ctid] = make_int2(s, e);
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the Q stores, visible to wgmma
      named_bar_sync(TMAB_BAR0 + wg, 128);
      }
      if constexpr (VER >= 4) {
        // "tmasb4": the piece body below, compiled once per buffer (BI a compile-time constant), so the Q
        // descriptor and the weight / window pointers are loop invariants the compiler folds as in "tmasb2";
        // "tmasb3"'s runtime index costs 12 SASS in the H = 64 tile loop (v11). A copy, not a lambda shared with
        // the other versions: routing "tmasb2" through it reorders its (shipped, measured) SASS.
        auto run_piece = [&](auto bsel) {
          constexpr int BI = decltype(bsel)::value;
          const int2* const win_c = win_s + BI * BM;
          const float* const w_c = w_all + (BI * NC + wg) * NQ;
          const uint64_t q_desc_c = swizzled_desc<D>(q_base + (uint32_t)(BI * NC * Q_BYTES));
          const bool row_ok = r0 + r_lane < nrows;
          tma_consumer_tiles<H, D, BM, WRP>(tile_begin, tile_end, lo, hi,
                                            piece_row_windows<BMW, true>(win_c, r0, nrows, N), out, out_row_stride,
                                            m0, r0, r_lane, win_c, row_ok, clean, kv_scale, w_c, q_desc_c, k_desc0,
                                            full0, empty0, stage, phase, v0, lane_stores, lane, wq, gid, tig);
        };
        if (buf) run_piece(TmabBuf<1>{});
        else run_piece(TmabBuf<0>{});
      } else {
      const int2* const win_c = win_s + buf * BM;
      const float* const w_c = w_all + (buf * NC + wg) * NQ;
      const uint64_t q_desc_c = V3 ? swizzled_desc<D>(q_base + (uint32_t)(buf * NC * Q_BYTES)) : q_desc;

      const bool row_ok = r0 + r_lane < nrows;
      tma_consumer_tiles<H, D, BM, WRP>(tile_begin, tile_end, lo, hi, piece_row_windows<BMW, V3>(win_c, r0, nrows, N),
                                        out, out_row_stride, m0, r0, r_lane, win_c, row_ok, clean, kv_scale, w_c,
                                        q_desc_c, k_desc0, full0, empty0, stage, phase, v0, lane_stores, lane, wq, gid,
                                        tig);
      }
      if constexpr (V3) {
        have = walk.next(rb, tile_begin, tile_end);
        buf ^= 1;
      }
    }
  }
}

// fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_tmasb / _tmasb2: tmas's argument list (split_n unused: the grid is the block count).
#define TMASB_KERNEL(H, D, BM, SUFFIX, VER)                                                                            \
  extern "C" __global__ void __launch_bounds__(ws_threads<TMA_NC>(), 1)                                               \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_##SUFFIX(KERNEL_PARAMS, const __grid_constant__ TmaMap k_map) {      \
    (void)k;                                                                                                          \
    (void)num_warps;                                                                                                  \
    (void)split_n;                                                                                                    \
    fp8_mqa_logits_tmab_body<H, D, BM, true, VER>(q, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out,               \
                                                 out_row_stride, M, N, flags, k_map);                                 \
  }
#define INSTANTIATE_tmasb(H, D, BM) TMASB_KERNEL(H, D, BM, tmasb, 1)
#define INSTANTIATE_tmasb2(H, D, BM) TMASB_KERNEL(H, D, BM, tmasb2, 2)
#define INSTANTIATE_tmasb3(H, D, BM) TMASB_KERNEL(H, D, BM, tmasb3, 3)
#define INSTANTIATE_tmasb4(H, D, BM) TMASB_KERNEL(H, D, BM, tmasb4, 4)
