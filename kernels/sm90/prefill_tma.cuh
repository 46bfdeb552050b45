// ===================================================================================================
// Warp-specialised SS-wgmma path fed by TMA tensor copies (designs "tmas", "tma" and "tmas8"; issue 14,
// docs/PERFORMANCE.md v8).
//
// What v7 left untried: "wss" had the right shape (four unordered consumer warpgroups at 112 registers, both
// wgmma operands from shared memory, the K tile fetched once per block for all of them) but built the tile with
// 16-byte cp.async from 64 producer threads into the no-swizzle core-matrix layout. Here one lane of the
// producer warp issues one cp.async.bulk.tensor per 64-token tile through a tensor map of K with 128-byte
// swizzle (64-byte at D = 64), the layout wgmma reads at full rate, completed on the stage's mbarrier by
// transaction count; no producer-side fences, no LDGSTS, no lag.
//
// The tensor map is one extra kernel parameter after the common argument list: `const __grid_constant__
// TmaMap k_map` (CUtensorMap's 128 opaque bytes, 64-byte aligned in the kernel-argument buffer), encoded on the
// host by cuTensorMapEncodeTiled over K as a 2-D uint8 tensor {D, N} with box {D, 64}; tokens past N arrive as
// zeros (their logits are never stored). "tmas" takes a second one after it, `q_map`: Q as {D, M * H} with box
// {D, 128}, one consumer's Q per box (v19).
//
// Block = 5 warpgroups, one block per SM (__launch_bounds__(640, 1)):
//   * warpgroup 0: warp 0 lane 0 = the TMA producer over a TMA_STAGES-deep ring; warps 1-3 = the fused -inf
//     fill of [0, lo) and [hi, N). setmaxnreg.dec to 32.
//   * warpgroups 1-4: consumers (setmaxnreg.inc to 112). Consumer c owns rows [c*BM/4, (c+1)*BM/4) of the block,
//     wgmma N = 128 (= BM/4 * H), its Q in shared memory in the same swizzled layout ("tmas": one TMA box of Q's
//     map per consumer, waited on by the consumers only; the experiment forms: cp.async by every thread before
//     the block meets, then fence.proxy.async). Per tile: wait full, 4 (D=128) SS wgmmas, wait, release the stage
//     (one arrive per warp), exact f32 epilogue as "wg"/"wss". Weights in registers ("tma", as DeepGEMM's math
//     warpgroups hold them) or in shared memory ("tmas", if the former spills).
//   * LEAN (v9, "tmas"; "tmas8" keeps v8's loop): the consumer's per-tile instruction stream cut without touching
//     the f32 epilogue's order: the warpgroup index made warp-uniform (shuffle from lane 0), so the loop state and
//     the wgmma descriptors live in uniform registers (one base descriptor per operand, plus the stage and k-step
//     offsets: no per-k-step rebuild); tiles inside the window of every row of the consumer store without a compare
//     (the exact masked store only on edge tiles, decided per tile); the weights in a layout read as one LDS.128 per
//     two column groups. Static SASS of the loop (nvcc 13.0): 291 -> 245 at H = 64, 344 -> 297 at H = 32 (D = 128).
//     WKEEP (v9, "tmas"; "tmas9" without): at H >= 64 six of the lane's eight weight float4s stay in registers for
//     the whole loop (2 LDS.128 per tile instead of 8; spill-free), none at H = 32 (tma_kept_weight_pairs).
//
// Shared-memory layout of both operands (K-major, "swizzle-128B" at D = 128): row n of a buffer is D contiguous
// bytes at n * D; its 16-byte chunk j sits at chunk j ^ ((n * D / 128) % (D / 16)) -- address bits [4, 4+log2(D/16))
// XORed with bits [7, ...). Matrix descriptor: start >> 4, LBO unused (0), SBO = 8 * D (one 8-row group), layout
// type 1 (128B) or 2 (64B) in bits 62-63; k-step s starts 32 * s bytes into the row. Buffers 1024-byte aligned.
// ===================================================================================================
#pragma once
#include "common.cuh"
#include "wgmma.cuh"
#include "prefill_ws.cuh"  // mbarrier / setmaxnreg / named-barrier helpers and the CTA-pool register rule

constexpr int TMA_NC = 4;          // consumer warpgroups
constexpr int TMA_STAGES = 8;      // K tiles in flight (8 KB each at D = 128); mirrored in bench/race_sm90.py
constexpr int TMA_TILE = 64;       // tokens per tile = the wgmma M of one consumer
constexpr int TMA_SMEM_ALIGN = 1024;  // the 128B-swizzle pattern repeats every 8 rows of 128 bytes

// One tile of K: box {D bytes, TMA_TILE tokens} at (0, token) into `dst`, completion counted on `bar`.
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const TmaMap* map, int token, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(0), "r"(token), "r"(bar)
      : "memory");
}

// -inf over [a, b) of one row by the fill warps (thread t0 of `step`), float4 stores in the 16-byte-aligned middle
// when `vec4`: common.cuh's fill_neg_inf with its loops kept rolled, which the producer warpgroup needs to stay
// within its 32 registers (the unrolled form spilled 8-40 bytes there).
__device__ __forceinline__ void tma_fill_neg_inf(float* __restrict__ row, int a, int b, bool vec4, int t0, int step) {
  const float ninf = -__int_as_float(0x7f800000);
  if (b <= a) return;
  int a4 = a, b4 = a;
  if (vec4) {
    a4 = min(b, (a + 3) & ~3);
    b4 = max(a4, b & ~3);
    float4* v = reinterpret_cast<float4*>(row + a4);
    const int n4 = (b4 - a4) >> 2;
#pragma unroll 1
    for (int i = t0; i < n4; i += step) v[i] = make_float4(ninf, ninf, ninf, ninf);
  }
  const int head = a4 - a, rest = head + (b - b4);
#pragma unroll 1
  for (int i = t0; i < rest; i += step) row[i < head ? a + i : b4 + (i - head)] = ninf;
}

// Dynamic shared memory of one block (bench/race_sm90.py computes the same sum plus TMA_SMEM_ALIGN of slack):
//   Q (TMA_NC * 128 * D) | K ring (TMA_STAGES * TMA_TILE * D) | weights (TMA_NC * 128 f32, "tmas") |
//   windows (BM int2) | full and empty mbarriers (2 * TMA_STAGES u64)
// Weight float4s (two column groups each) a v9 consumer keeps in registers next to its 64 accumulators: 6 of 8 at
// H >= 64 (the most that stays spill-free at 112 registers, ptxas 13.0, D = 64 and 128; measured 0.8% faster than
// none at H = 64); none at H = 32, where the 2 that fit measured 2.9% slower (docs/PERFORMANCE.md v9, call 2).
// One tile's wgmmas, issued and waited for: KS k-steps of 32 bytes, A from k_desc(s), B from q_desc(s).
template <int NQ, int KS, int NACC, typename KDesc, typename QDesc>
__device__ __forceinline__ void tile_wgmmas(float (&acc)[NACC], KDesc k_desc, QDesc q_desc) {
  fence_regs(acc);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int s = 0; s < KS; ++s) wgmma_ss_k32<NQ>(acc, k_desc(s), q_desc(s), s > 0);
  fence_regs(acc);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  wgmma_wait<0>();
  fence_regs(acc);
}

// After a tile's wgmmas: this warp's share of the release of the ring stage they read (one arrival per warp), and
// the consumer's step to its next stage: STEP stages on in a ring of STAGES (a "tmaq" consumer takes every TMA_NC-th
// tile of its deeper ring).
template <int STEP = 1, int STAGES = TMA_STAGES>
__device__ __forceinline__ void release_stage(uint32_t empty0, int& stage, uint32_t& phase, int lane) {
  static_assert(STEP >= 1 && STEP <= STAGES, "release_stage: one wrap of the ring per step at most");
  __syncwarp();
  if (lane == 0) mbar_arrive(empty0 + 8 * stage);
  if constexpr (STEP == 1) {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  } else {
    stage += STEP;
    if (stage >= STAGES) {
      stage -= STAGES;
      phase ^= 1;
    }
  }
}

// TMA_KEPT_PAIRS (experiment, -1 = the rule below): the kept float4 pairs at H >= 64 forced to this count. Session 6's
// static reading (PERFORMANCE.md "v12 static") ties the epilogue's encoded stalls to the registers the six kept pairs
// hold; bench/race_sm90.py --build --define TMA_KEPT_PAIRS=N builds the variants.
#ifndef TMA_KEPT_PAIRS
#define TMA_KEPT_PAIRS -1
#endif
template <int H>
__host__ __device__ constexpr int tma_kept_weight_pairs() {
  return H == 32 ? 0 : (TMA_KEPT_PAIRS >= 0 ? TMA_KEPT_PAIRS : 6);
}

// Exact f32 head reduction of one tile (as "wg"; kv_scale after it, kv_scale >= 0 commutes with the ReLU): column
// group j of acc holds two heads (weight(j): their float2) of tokens tok0 (acc[4j + 0/1]) and tok0 + 8 (acc[4j + 2/3]).
// Two FMA chains per (row, token) (even / odd head of each pair), added at the end: 4 * BMW independent chains per warp
// instead of 2 * BMW, so the latency-bound chain of v7 is half as deep; then the quad reduce into this lane's res.
// DESIGN: ReLU first (H >= 64). The ReLU of every accumulator is applied in place before the FMA chains start, so no
// FFMA waits on the FMNMX just before it: ncu's `wait` stalls ran 1.8 per issue against DeepGEMM's 0.9 (session 7), and
// v12 static put the excess on the FMNMX -> FFMA pairs. The accumulators are dead after the reduction (the next tile's
// first wgmma overwrites them), so it costs no register. Static (encoded stall cycles per tile, H = 64, D = 128):
// tmasb4 599 -> 531, tmas 673 -> 558; measured (H200, same run): +0.8% (tmasb4) and +1.4% (tmas) at H = 64, -0.8% for
// tmas at H = 32 (whose loop it made slower statically too: 644 -> 669), so H = 32 keeps the fused form.
// TMA_RELU_FIRST (measurement builds): -1 = that rule, 0 = never, 1 = always.
#ifndef TMA_RELU_FIRST
#define TMA_RELU_FIRST -1
#endif
template <int H>
__host__ __device__ constexpr bool tma_relu_first() {
  return TMA_RELU_FIRST >= 0 ? TMA_RELU_FIRST != 0 : H >= 64;
}
template <int H, int NQ, typename Weight>
__device__ __forceinline__ void tma_head_sums(float (&acc)[NQ / 2], const Weight& weight,
                                              float (&res)[2 * (NQ / H) >= 4 ? NQ / H / 2 : 1], int tig) {
  constexpr int V = 2 * (NQ / H);
  float part[V], odd[V];
#pragma unroll
  for (int v = 0; v < V; ++v) part[v] = odd[v] = 0.0f;
  constexpr bool RELU_FIRST = tma_relu_first<H>();
  if constexpr (RELU_FIRST) relu_in_place(acc);
  auto relu = [&](int i) { return RELU_FIRST ? acc[i] : fmaxf(acc[i], 0.0f); };
#pragma unroll
  for (int j = 0; j < NQ / 8; ++j) {
    const int r = j / (H / 8);
    const float2 w = weight(j);
    part[2 * r] = fmaf(relu(4 * j + 0), w.x, part[2 * r]);
    odd[2 * r] = fmaf(relu(4 * j + 1), w.y, odd[2 * r]);
    part[2 * r + 1] = fmaf(relu(4 * j + 2), w.x, part[2 * r + 1]);
    odd[2 * r + 1] = fmaf(relu(4 * j + 3), w.y, odd[2 * r + 1]);
  }
#pragma unroll
  for (int v = 0; v < V; ++v) part[v] += odd[v];
  quad_sums<V>(part, res, tig);
}

// TMA_PEEL_INTERIOR (session 8, v14; 1 = shipped, 0 = the session-7 loop for measurements): tma_consumer_tiles runs its
// interior tiles in a copy of the tile body without window tests. v12 static had 7 branches per tile against
// DeepGEMM's 2, two of them behind S11-S13 predicate moves; the interior copy is 211 instructions / 340 encoded stall
// cycles per tile against the general body's 248 / 531 (tmasb4, H 64; DeepGEMM 230 / 353). Measured (H200, three
// races each beside the session-7 build): tmas +7.4% at H 64, +0.7% at H 32; tmasb4 +1.7% at H 64, +2.7% at H 32
// (docs/PERFORMANCE.md v14).
#ifndef TMA_PEEL_INTERIOR
#define TMA_PEEL_INTERIOR 1
#endif
// A consumer's window bounds over its BMW rows, for the v9 tile loop below.
struct TmaRowWindows {
  int clo, chi;      // union of the non-empty windows: a tile outside it needs no wgmma ("hit" is false)
  int in_lo, in_hi;  // intersection, empty unless all BMW rows are valid: a tile inside it is "interior"
};

// The v9 ("LEAN" + WKEEP) consumer loop over tiles [tile_begin, tile_end) of the span [lo, hi): one copy for "tmas"
// and its balanced schedules ("tmasb*": prefill_tma_balanced.cuh runs it once per piece), both measured on the H200.
// Why the shape: the statements keep the order the two copies had, and the row / window indices are formed here,
// where the copies formed them (precomputed by the caller they reordered tmas's prologue), so both kernels keep
// their instruction streams (bench/sass_compare.py). The caller owns the ring: `stage` / `phase` continue across
// calls. Rows: block row m0 + r0 + r of out is consumer row r; this lane stores row r_lane (valid: row_ok; window
// win[r0 + r_lane], read on edge tiles only), results v0 .. v0 + VPL - 1 of the quad reduction when `lane_stores`,
// at tokens lo + 64 t + 16 wq + gid (+ 8). w_s: the consumer's NQ weights in the LDS.128 layout (WRP of this lane's
// float4s stay in registers for the whole call); q_desc / k_desc0: the base descriptors of its Q and of the ring.
// STEP: the consumer runs tiles tile_begin, tile_begin + STEP, ..., each STEP ring stages after its previous one in a
// ring of STAGES ("tmaq": the four consumers deal one row block's tiles between them; 1 and TMA_STAGES elsewhere).
template <int H, int D, int BM, int WRP, int STEP = 1, int STAGES = TMA_STAGES>
__device__ __forceinline__ void tma_consumer_tiles(int tile_begin, int tile_end, int lo, int hi,
                                                   const TmaRowWindows& wb, float* __restrict__ out,
                                                   i64 out_row_stride, int m0, int r0, int r_lane, const int2* win,
                                                   bool row_ok, bool clean, const float* __restrict__ kv_scale,
                                                   const float* w_s, uint64_t q_desc, uint64_t k_desc0,
                                                   uint32_t full0, uint32_t empty0, int& stage, uint32_t& phase,
                                                   int v0, bool lane_stores, int lane, int wq, int gid, int tig) {
  constexpr int BMW = BM / TMA_NC, NQ = BMW * H, KS = D / 32, NACC = NQ / 2;
  constexpr int V = 2 * BMW, VPL = V >= 4 ? V / 4 : 1;
  constexpr uint32_t STAGE_BYTES = TMA_TILE * D;
  const int clo = wb.clo, chi = wb.chi, in_lo = wb.in_lo, in_hi = wb.in_hi;
  float4 wkeep[WRP > 0 ? WRP : 1];
#pragma unroll
  for (int i = 0; i < WRP; ++i) wkeep[i] = *reinterpret_cast<const float4*>(w_s + 16 * i + 4 * tig);

  float acc[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  // out + this lane's row + its token tok0 of the current tile, advanced by one tile per step
  float* out_tile = out + (i64)(m0 + r0 + r_lane) * out_row_stride + (lo + tile_begin * TMA_TILE + 16 * wq + gid);
  // One tile; known_interior (TMA_PEEL_INTERIOR, a constant per call site once inlined): the caller knows the tile is
  // interior (so hit), no window tests.
  auto tile = [&](int t, bool known_interior) {
    const int base = lo + t * TMA_TILE;
    const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
    float sc[VPL];
#pragma unroll
    for (int i2 = 0; i2 < VPL; ++i2) sc[i2] = __ldg(kv_scale + min(tok0 + 8 * ((v0 + i2) & 1), hi - 1));
    const bool hit = known_interior || (base < chi && base + TMA_TILE > clo);
    const bool interior = known_interior || (base >= in_lo && base + TMA_TILE <= in_hi);
    mbar_wait(full0 + 8 * stage, phase);
    if (hit) {
      const uint64_t k_desc = k_desc0 + (uint32_t)stage * (STAGE_BYTES >> 4);
      tile_wgmmas<NQ, KS>(acc, [&](int s) { return k_desc + 2 * s; },  // +32 bytes per k-step
                          [&](int s) { return q_desc + 2 * s; });
    }
    release_stage<STEP, STAGES>(empty0, stage, phase, lane);
    float res[VPL];
    if (hit) {
      // column groups 2i and 2i + 1 share float4 i of this lane's weights (kept, or read once per pair)
      tma_head_sums<H, NQ>(acc, [&](int j) {
        const float4 w4 = j / 2 < WRP ? wkeep[j / 2] : *reinterpret_cast<const float4*>(w_s + 16 * (j / 2) + 4 * tig);
        return j % 2 == 0 ? make_float2(w4.x, w4.y) : make_float2(w4.z, w4.w);
      }, res, tig);
    }
    if (interior) {
#pragma unroll
      for (int i2 = 0; i2 < VPL; ++i2)
        if (lane_stores) out_tile[8 * ((v0 + i2) & 1)] = res[i2] * sc[i2];
    } else {
#pragma unroll
      for (int i2 = 0; i2 < VPL; ++i2) {
        const int tok = tok0 + 8 * ((v0 + i2) & 1);
        if (lane_stores && row_ok && tok < hi) {
          const int2 w_lane = win[r0 + r_lane];
          if (hit && tok >= w_lane.x && tok < w_lane.y)
            out_tile[8 * ((v0 + i2) & 1)] = res[i2] * sc[i2];
          else if (clean)
            out_tile[8 * ((v0 + i2) & 1)] = -__int_as_float(0x7f800000);
        }
      }
    }
    out_tile += STEP * TMA_TILE;
  };
  if constexpr (TMA_PEEL_INTERIOR) {
    // DESIGN: the interior tiles [ib, ie) -- base >= in_lo and base + 64 <= in_hi -- run a copy of the
    // body without the window tests and their branches; the tiles before and after them run the general body.
    const TileRange in = interior_tile_range(lo, in_lo, in_hi, TMA_TILE);
    const int ib = min(max(in.begin, tile_begin), tile_end);
    const int ie = min(max(in.end, ib), tile_end);
    int t = tile_begin;
    for (; t < ib; t += STEP) tile(t, false);
    for (; t < ie; t += STEP) tile(t, true);
    for (; t < tile_end; t += STEP) tile(t, false);
  } else {
    for (int t = tile_begin; t < tile_end; t += STEP) tile(t, false);
  }
}

template <int H, int D, int BM, bool WREG, bool LEAN, bool WKEEP = false, bool QMAP = false>
__device__ __forceinline__ void fp8_mqa_logits_tma_body(const u8* __restrict__ q, const float* __restrict__ kv_scale,
                                                        const float* __restrict__ weights,
                                                        const int* __restrict__ cu_seqlen_ks,
                                                        const int* __restrict__ cu_seqlen_ke, float* __restrict__ out,
                                                        i64 out_row_stride, int M, int N, int split_n, int flags,
                                                        const TmaMap& k_map, const TmaMap& q_map) {
  constexpr int NC = TMA_NC;
  constexpr int BMW = BM / NC;  // rows per consumer
  constexpr int NQ = BMW * H;   // wgmma N of one consumer
  constexpr int THREADS = ws_threads<NC>();
  static_assert(!(LEAN && WREG), "LEAN reads the weights from shared memory (tmas's form; in registers it spills)");
  static_assert(BM % NC == 0 && NQ == 128, "TMA design: BLOCK_M = 4 * 128 / H (wgmma N = 128 per consumer)");
  static_assert(NC * (ws_consumer_regs<NC>() - ws_entry_regs<NC>()) <= ws_entry_regs<NC>() - ws_producer_regs<NC>(),
                "setmaxnreg: the consumers may take only what the producer warpgroup gives back");
  constexpr int KS = D / 32, NACC = NQ / 2;
  constexpr int V = 2 * BMW, VPL = V >= 4 ? V / 4 : 1;
  constexpr uint32_t STAGE_BYTES = TMA_TILE * D, Q_BYTES = NQ * D;

  extern __shared__ u8 dyn_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(dyn_raw);
  u8* const dyn_s = dyn_raw + ((TMA_SMEM_ALIGN - (raw0 % TMA_SMEM_ALIGN)) % TMA_SMEM_ALIGN);
  u8* const q_all = dyn_s;                                                   // [NC][NQ * D], swizzled
  u8* const ring_s = q_all + NC * Q_BYTES;                                   // [TMA_STAGES][STAGE_BYTES], swizzled
  float* const w_all = reinterpret_cast<float*>(ring_s + TMA_STAGES * STAGE_BYTES);  // [NC][NQ] ("tmas")
  int2* const win_s = reinterpret_cast<int2*>(w_all + NC * NQ);              // [BM]
  // full[STAGES], empty[STAGES] (QMAP: then "Q full")
  uint64_t* const bars = reinterpret_cast<uint64_t*>(win_s + BM);
  static_assert((NC * NQ * 4 + BM * 8) % 8 == 0, "mbarriers 8-byte aligned");

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  // LEAN: the warpgroup index through a shuffle from lane 0, so the compiler knows it (and the consumer's loop state,
  // descriptors and branches derived from it) is warp-uniform and keeps them in uniform registers.
  const int wgi = LEAN ? __shfl_sync(0xffffffffu, warp / 4, 0) : warp / 4, wq = warp % 4;
  const int gid = lane >> 2, tig = lane & 3;

  // Q staging by cp.async (the experiment forms; "tmas" takes Q by TMA, QMAP below). Q (and the weights) of the
  // block go to shared memory as cp.async copies, all of them in flight at once and issued before the windows are
  // read (they need only the row block); the wait comes
  // just before the ring's barrier. A rolled LDG -> STS loop waited one memory latency per trip: ncu put 13% of the
  // stall samples of 4096^2 multi_req H = 32 on its stores (docs/PERFORMANCE.md v13). Consumer c's Q = rows
  // [c * BMW, (c + 1) * BMW), column n = (row - c * BMW) * H + head, natural depth order: the block's Q is the
  // NC * Q_BYTES contiguous bytes of q from row m0 on (cp_async_span_swizzled); rows past M read as zeros. The
  // (consumer, column, chunk) split of each copy's index on signed ints that this replaced was ~300 instructions per
  // warp, in all 20 warps (docs/PERFORMANCE.md v16).
  const RowBlock rb = row_block_of<BM>(M, flags);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  const uint32_t q0 = (uint32_t)__cvta_generic_to_shared(q_all);
  const u8* const q_rows = q + (i64)m0 * H * D;
  const uint32_t valid_cols = (uint32_t)nrows * H;  // columns of rows below M, over all consumers
  if constexpr (QMAP) {
    // DESIGN: Q by TMA ("tmas", v19): NC boxes of Q's [M * H, D] map (one per consumer, zeros past M * H) on a "Q
    // full" barrier only the consumers wait on, so the block meets and the producer's first K tiles go out while Q
    // is still in flight (the cp.async form below made every thread wait for its Q copies before the block met)
    if (tid == 0) {
      const uint32_t q_full = (uint32_t)__cvta_generic_to_shared(bars) + 16 * TMA_STAGES;
      mbar_init(q_full, 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&q_map)) : "memory");
      mbar_arrive_expect_tx(q_full, NC * Q_BYTES);
#pragma unroll
      for (int c = 0; c < NC; ++c) tma_load_tile(q0 + c * Q_BYTES, &q_map, (m0 + c * BMW) * H, q_full);
    }
  } else {
    cp_async_span_swizzled<D>(q0, q_rows, NC * Q_BYTES, valid_cols * D, q_rows, tid, THREADS);
  }
  if constexpr (!WREG) {
    const uint32_t w0 = (uint32_t)__cvta_generic_to_shared(w_all);
    const float* const w_rows = weights + (i64)m0 * H;  // idx = (c * BMW + row) * H + head, as Q's columns
    for (uint32_t idx = tid; idx < NC * NQ; idx += THREADS) {
      const bool ok = idx < valid_cols;
      uint32_t slot = idx;
      if constexpr (LEAN) {
        // Column n = 8j + 2tig + e of consumer c at c NQ + 16 (j / 2) + 4 tig + 2 (j % 2) + e: the weights of
        // column groups j and j + 1 (j even) are one float4 per lane (one LDS.128 for two groups).
        const uint32_t c = idx / NQ, n = idx % NQ, j = n / 8;
        slot = c * NQ + 16 * (j / 2) + 4 * ((n % 8) / 2) + 2 * (j % 2) + n % 2;
      }
      cp_async4_zfill(w0 + 4 * slot, w_rows + (ok ? idx : 0), ok ? 4u : 0u);
    }
  }
  cp_async_commit_group();
  stage_row_windows<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, rb, N, tid);
  if (tid == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&k_map)) : "memory");
  cp_async_wait_groups<0>();  // this thread's Q and weight copies landed (init_ring_barriers fences and meets)
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars);
  const uint32_t empty0 = full0 + 8 * TMA_STAGES;
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  // full: the producer's arrive.expect_tx (+ the copy's bytes); empty: one arrive per consumer warp, once its wgmma
  // has read the tile
  init_ring_barriers<TMA_STAGES>(full0, empty0, 1, 4 * NC, tid);

  const BlockSpan span = uniform_block_span<BM, TMA_TILE>(win_s, N, split, split_n);
  const int lo = span.lo, hi = span.hi, tile_begin = span.tile_begin, tile_end = span.tile_end;

  if (wgi == 0) {
    setmaxnreg_dec<ws_producer_regs<NC>()>();
    if (warp == 0) {
      if (lane == 0) {
        int stage = 0;
        uint32_t phase = 0;
        for (int t = tile_begin, i = 0; t < tile_end; ++t, ++i) {
          if (i >= TMA_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
          mbar_arrive_expect_tx(full0 + 8 * stage, STAGE_BYTES);  // the whole box counts, zero-filled rows too
          tma_load_tile(ring0 + stage * STAGE_BYTES, &k_map, lo + t * TMA_TILE, full0 + 8 * stage);
          if (++stage == TMA_STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    } else if (clean) {
      // DESIGN: fused -inf fill, overlapped with the consumers' tiles (disjoint columns).
      const int t0 = (split * 3 + (warp - 1)) * WARP + lane, step = split_n * 3 * WARP;
      const bool vec4 = flags & FLAG_VEC4_FILL;
      float* dst_row = out + (i64)m0 * out_row_stride;
#pragma unroll 1
      for (int r = 0; r < nrows; ++r, dst_row += out_row_stride) {
        tma_fill_neg_inf(dst_row, 0, lo, vec4, t0, step);
        tma_fill_neg_inf(dst_row, hi, N, vec4, t0, step);
      }
    }
  } else {
    setmaxnreg_inc<ws_consumer_regs<NC>()>();
    if constexpr (QMAP) mbar_wait(full0 + 16 * TMA_STAGES, 0);  // the block's Q boxes landed
    const int wg = wgi - 1;  // consumer index: rows [wg * BMW, (wg + 1) * BMW) of the block
    const int r0 = wg * BMW;
    // Accumulator column group j holds columns 8j + 2tig + {0, 1} = (row 8j / H, heads 8j % H + 2tig + {0, 1}).
    float2 wr[WREG ? NQ / 8 : 1];
    if constexpr (WREG) {
#pragma unroll
      for (int j = 0; j < NQ / 8; ++j) {
        const int r = r0 + (8 * j) / H, h = (8 * j) % H + 2 * tig;
        const float* wp = weights + (i64)(m0 + r) * H + h;  // 4-byte aligned only: two scalar loads
        wr[j] = r < nrows ? make_float2(wp[0], wp[1]) : make_float2(0.f, 0.f);
      }
    }
    const float* const w_s = w_all + wg * NQ;
    auto weight = [&](int j) {
      if constexpr (WREG) return wr[j];
      else return *reinterpret_cast<const float2*>(w_s + 8 * j + 2 * tig);
    };
    // The union of this consumer's windows: a tile outside it needs no wgmma (only -inf stores under clean).
    int clo = N, chi = 0;
#pragma unroll
    for (int r = 0; r < BMW; ++r) {
      const int2 w = win_s[r0 + r];
      if (w.y > w.x) {
        clo = min(clo, w.x);
        chi = max(chi, w.y);
      }
    }
    const uint32_t q_base = q0 + wg * Q_BYTES;

    if constexpr (LEAN) {
      // The rows and tokens this lane stores are fixed: one row of the consumer (r_lane), tokens tok0 + 8 hh(i2).
      const int v0 = V >= 4 ? VPL * tig : (tig >> 1);
      const int r_lane = v0 >> 1;
      const bool lane_stores = V >= 4 || (tig & 1) == 0;
      const bool row_ok = r0 + r_lane < nrows;
      // A tile inside [in_lo, in_hi) lies in the window of every row of this consumer (all rows valid; windows end
      // at or before hi): its logits are stored without a compare ("interior"); the others take the exact masked
      // store ("edge"). Warp-uniform, decided per tile.
      int in_lo = 0, in_hi = r0 + BMW <= nrows ? N : 0;
#pragma unroll
      for (int r = 0; r < BMW; ++r) {
        const int2 w = win_s[r0 + r];
        in_lo = max(in_lo, w.x);
        in_hi = min(in_hi, w.y);
      }
      // Descriptors: the matrix start address (>> 4) is the low 14-bit field; shared addresses stay below 2^18
      // bytes, so adding the stage and k-step offsets to the base descriptor never carries out of that field.
      const uint64_t q_desc = swizzled_desc<D>(q_base);
      const uint64_t k_desc0 = swizzled_desc<D>(ring0);
      // WKEEP: the first WRP float4s of this lane's weights (2 WRP column groups) held in registers for the whole
      // loop, the rest read per tile; WRP as large as ptxas keeps without a spill at 112 registers.
      constexpr int WRP = WKEEP ? tma_kept_weight_pairs<H>() : 0;
      int stage = 0;
      uint32_t phase = 0;
      tma_consumer_tiles<H, D, BM, WRP>(tile_begin, tile_end, lo, hi, TmaRowWindows{clo, chi, in_lo, in_hi}, out,
                                        out_row_stride, m0, r0, r_lane, win_s, row_ok, clean, kv_scale, w_s, q_desc,
                                        k_desc0, full0, empty0, stage, phase, v0, lane_stores, lane, wq, gid, tig);
    } else {
      auto put = [&](int r, int tok, bool hit, float v) {  // r: row of this consumer
        if (r0 + r < nrows && tok < hi) {
          const int2 w = win_s[r0 + r];
          float* dst = out + (i64)(m0 + r0 + r) * out_row_stride + tok;
          if (hit && tok >= w.x && tok < w.y)
            *dst = v;
          else if (clean)
            *dst = -__int_as_float(0x7f800000);
        }
      };

      float acc[NACC];
  #pragma unroll
      for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
      int stage = 0;
      uint32_t phase = 0;
      for (int t = tile_begin; t < tile_end; ++t) {
        const int base = lo + t * TMA_TILE;
        const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
        const float sc0 = __ldg(kv_scale + min(tok0, hi - 1));
        const float sc1 = __ldg(kv_scale + min(tok0 + 8, hi - 1));
        const bool hit = base < chi && base + TMA_TILE > clo;
        mbar_wait(full0 + 8 * stage, phase);
        if (hit) {
          const uint32_t k_base = ring0 + stage * STAGE_BYTES;
          tile_wgmmas<NQ, KS>(acc, [&](int s) { return swizzled_desc<D>(k_base + 32 * s); },
                              [&](int s) { return swizzled_desc<D>(q_base + 32 * s); });
        }
        release_stage(empty0, stage, phase, lane);
        // Exact f32 head reduction (as "wg"), kv_scale after it (kv_scale >= 0 commutes with the ReLU).
        float res[VPL];
        if (hit) tma_head_sums<H, NQ>(acc, weight, res, tig);
  #pragma unroll
        for (int i2 = 0; i2 < VPL; ++i2) {
          const int v = V >= 4 ? VPL * tig + i2 : (tig >> 1);
          const int r = v >> 1, hh = v & 1;
          if (V >= 4 || (tig & 1) == 0) put(r, tok0 + 8 * hh, hit, hit ? res[i2] * (hh ? sc1 : sc0) : 0.0f);
        }
      }
    }
  }
}

// Kernel symbols fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_tma / _tmas: the common argument list, then the tensor map
// of K (build.py's SM90_TENSOR_MAP_ARGS; the `k` pointer stays in the list, unused, so every design packs alike).
#define TMA_KERNEL(H, D, BM, SUFFIX, WREG, LEAN, WKEEP)                                                                \
  extern "C" __global__ void __launch_bounds__(ws_threads<TMA_NC>(), 1)                                                \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_##SUFFIX(KERNEL_PARAMS, const __grid_constant__ TmaMap k_map) {       \
    (void)k;                                                                                                           \
    (void)num_warps;                                                                                                   \
    fp8_mqa_logits_tma_body<H, D, BM, WREG, LEAN, WKEEP>(q, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out,        \
                                                  out_row_stride, M, N, split_n, flags, k_map, k_map);                 \
  }
// "tmas": the lean consumer loop with weights kept (v9) and Q's CUtensorMap ([M * H, D] rows, box 128 rows) after
// K's (v19).
#define INSTANTIATE_tmas(H, D, BM)                                                                                     \
  extern "C" __global__ void __launch_bounds__(ws_threads<TMA_NC>(), 1)                                                \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_tmas(KERNEL_PARAMS, const __grid_constant__ TmaMap k_map,             \
                                                       const __grid_constant__ TmaMap q_map) {                         \
    (void)k;                                                                                                           \
    (void)num_warps;                                                                                                   \
    fp8_mqa_logits_tma_body<H, D, BM, false, true, true, true>(q, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out,  \
                                                               out_row_stride, M, N, split_n, flags, k_map, q_map);    \
  }
#define INSTANTIATE_tma(H, D, BM) TMA_KERNEL(H, D, BM, tma, true, false, false)
#define INSTANTIATE_tmas8(H, D, BM) TMA_KERNEL(H, D, BM, tmas8, false, false, false)  // tmas as v8 shipped it
#define INSTANTIATE_tmas9(H, D, BM) TMA_KERNEL(H, D, BM, tmas9, false, true, false)   // v9 without WKEEP
