// ===================================================================================================
// Decode design "tma" (sm_90a, block size 64): the fused cache streamed by TMA tensor copies, SS-form fp8 wgmma.
// Included by kernels/fp8_paged_mqa_logits_sm90.cu after its shared pieces (TILE, MAX_NEXT_N, TileOut,
// head_reduce_store, FLAG_CONTEXT_LENS_2D); docs/PAGED.md "The sm_90a twin" and "Measured on the H200".
//
// Why: the cp.async designs run gather issue, ld.shared of K, the wgmma and the head reduce on the same four warps,
// one barrier per tile; measured, they reach the read bandwidth only at next_n x H = 32. DeepGEMM's sm90 paged
// kernel (read for facts only) feeds its math warpgroups from a TMA-issuing warp and reads K by descriptor.
//
// Block = one consumer warpgroup (warps 0-3) + one producer warp (warp 4), 160 threads; grid (B, split_n) and the
// split rule as the other designs (the host's heuristic, from host numbers only: capturable).
//   * Producer: lane l reads block-table entry tile_begin + 32r + l (coalesced, 32 tiles at a time); lane 0, per
//     tile, waits for the slot to be free, posts expect_tx(64 D + 256) on the slot's full mbarrier, and issues one
//     3-D cp.async.bulk.tensor of the block's 64 x D key bytes (box {D, 64, 1} of the map over kv_cache as
//     [num_blocks][64 * (D + 4)] bytes: dims {D, 64, num_blocks}, strides {D, 64 (D + 4)}; 128-byte swizzle at
//     D = 128, 64-byte at D = 64) plus one 1-D cp.async.bulk of its 64 float32 scales (256 bytes, 16-byte aligned
//     since 64 (D + 4) is a multiple of 16). A block index past num_blocks reads zeros (the map's bounds), where the
//     cp.async designs read the address as given.
//   * Consumers: Q staged once per block into the same swizzle (cp.async + fence.proxy.async), weights
//     as fp32 in shared memory. Per tile: wait full, read the two scales each lane needs, SS wgmma (A = the K
//     tile by descriptor, B = Q, N = next_n x H up to 256, chunks of two rows at H = 128 and next_n > 2), wait,
//     release the slot (one arrive per consumer thread on its empty mbarrier), fp32 head reduce as the other designs
//     (head_reduce_store; its interior tiles without length tests in both loops, PAGED_TMA_PEEL / PAGED_TMA_PIPE_PEEL).
//     At N <= PAGED_PIPE_MAX_N tile t+1's wgmma is issued before tile t's reduce; at N = 128
//     not (measured: the reduce's registers would halve the blocks per SM; splitting the rows instead is slower).
//   * The sm_90a default at block size 64 ("auto", rawindexer/dispatch/paged_sm90.py).
//   * fp8 products accumulate in the wgmma's fp8 accumulator: the "fp8" design's numerics (2e-3 * T gate).
// Shared memory (1024-byte aligned by the kernel itself): K ring (PAGED_TMA_STAGES x 64 D, swizzled) | Q (rows x
// H x D, swizzled) | scales (stages x 64 f32) | weights (rows x H f32) | full, empty mbarriers -- the sum
// rawindexer/paged_kernels.sm90_tma_shared_bytes computes (+ 1024 of slack).
// ===================================================================================================
#pragma once
#include "async_copy.cuh"  // mbarriers, bulk copies, TmaMap, the swizzle and its wgmma descriptor

#ifndef PAGED_TMA_STAGES
#define PAGED_TMA_STAGES 4
#endif
// Measured on the H200 and taken out of the source (docs/PAGED.md has each one's numbers and commit): row chunks
// through the pipeline at N = 128 (PAGED_TMA_ROW_PIPE), the weights in a per-lane float4 order or in registers
// (PAGED_TMA_WLAYOUT, PAGED_TMA_WREGS), the register split with a producer warpgroup and setmaxnreg
// (PAGED_TMA_SETMAXNREG), a blocks-per-SM cap (PAGED_TMA_MIN_BLOCKS), suspend-time hints on the ring's waits
// (PAGED_TMA_SUSPEND_NS, PAGED_TMA_PRODUCER_SUSPEND_NS), descriptors stepped by their address field
// (PAGED_TMA_DESC_ADD), two one-row wgmmas with the weights in registers (PAGED_TMA_ROW_REGS).
// PAGED_TMA_PIPE_MAX_N: the widest N that runs the two-accumulator pipeline (default PAGED_PIPE_MAX_N).
#ifndef PAGED_TMA_PIPE_MAX_N
#define PAGED_TMA_PIPE_MAX_N PAGED_PIPE_MAX_N
#endif
// PAGED_TMA_PERSISTENT 1 (experiment, off): a persistent grid (decode7; docs/PAGED.md "Call 7"). The kernels take one
// more argument, `batch` (after the map), and run grid = (resident blocks, 1, 1); block g walks the (b, split) units
// [U g / G, U (g + 1) / G) of U = batch x split_n, b-major (so consecutive units share b). The K ring and its mbarrier
// phases run on across units (the producer fills the next unit's tiles while the consumers finish this one's), Q and
// the weights are staged again only where b changes, the -inf fill is per unit as in the one-unit grid. The host
// tells the form from the manifest's argument list (dispatch/paged_sm90.py, is_persistent). Measured on the H200
// (docs/PAGED.md "Call 7"): correct (quick tma sweep 18/18 with several units per block), but 5-9% slower than the
// one-unit grid at the large N = 128 cases and up to 2 us slower per block at small batches: off.
#ifndef PAGED_TMA_PERSISTENT
#define PAGED_TMA_PERSISTENT 0
#endif
// PAGED_TMA_PEEL (session 8; 1 = shipped, 0 = session 7's loop for measurements): the one-accumulator loop
// (N > PAGED_TMA_PIPE_MAX_N) runs the tiles that lie inside every row's valid range (a prefix of the split) with a head
// reduce whose stores carry no length tests, as prefill's TMA_PEEL_INTERIOR (v14). Static, H 64 next_n 2: 244
// instructions per tile against ~260. Measured (H200, docs/PAGED.md "Session 8", three A/Bs beside session 7's kernel):
// N = 128 at H 64 2.6-3.3% faster on the large cases (64 x 131072: 325 -> 316-317 us), 1.3% at 64 x 32768.
// At H = 32 (next_n 4) the second copy of the reduce took ptxas from 92 to 102 registers (three blocks per SM; with
// __launch_bounds__(160, 4) the loop recomputes addresses: 270 -> 322 instructions), so the peel runs at H >= 64.
#ifndef PAGED_TMA_PEEL
#define PAGED_TMA_PEEL 1
#endif
// PAGED_TMA_PIPE_PEEL (session 16; 1 = shipped, 0 = the loop before it): the same peel for the two-accumulator loop
// (N <= PAGED_TMA_PIPE_MAX_N), which reduced every tile with the length tests: at H 32 next_n 2 its loop held 163
// integer / address instructions and 36 branches for three units where H 64 next_n 1 holds 40 and 4 for two. With the
// pair reduce (PAGED_PAIR_REDUCE) 383 -> 326 instructions per two units there; the pipelined kernels get
// __launch_bounds__(160, 4) (H 64 next_n 1 went 91 -> 98 registers uncapped; 95 capped, 0 spills). Measured on the
// H200 (docs/PAGED.md, session 16): see PAGED_PAIR_REDUCE.
#ifndef PAGED_TMA_PIPE_PEEL
#define PAGED_TMA_PIPE_PEEL 1
#endif
template <int H>
__host__ __device__ constexpr bool pt_peel() {
  return PAGED_TMA_PEEL && H >= 64;
}

// DIAGNOSTIC (PAGED_TMA_TRACE, never in a shipped build): per block of paged_tma_body (b * split_n + split, the
// first PT_TRACE_BLOCKS), %globaltimer at entry and exit, the SM, the tile count, and SM clock64 stamps (one counter per
// SM, so comparable between a block's threads and between the blocks of one SM): entry, Q staged, the producer's start
// and its last tile issued, and per tile i < PT_TRACE_TILES the consumers' full-barrier wait done and head reduce done.
// Read back by bench/paged_trace.py through cuModuleGetGlobal (docs/PAGED.md "Session 13").
#ifndef PAGED_TMA_TRACE
#define PAGED_TMA_TRACE 0
#endif
constexpr int PT_TRACE_BLOCKS = 8192, PT_TRACE_TILES = 20;
// slots, mirrored in bench/paged_trace.py; then PT_TRACE_FULL + i: tile i's full-barrier wait done, PT_TRACE_REDUCED + i:
// its head reduce done
enum : int {
  PT_TRACE_ENTRY_NS, PT_TRACE_EXIT_NS, PT_TRACE_SMID, PT_TRACE_N_TILES, PT_TRACE_ENTRY, PT_TRACE_Q_STAGED,
  PT_TRACE_PRODUCER_START, PT_TRACE_PRODUCER_LAST, PT_TRACE_EXIT, PT_TRACE_FULL,
  PT_TRACE_REDUCED = PT_TRACE_FULL + PT_TRACE_TILES, PT_TRACE_SLOTS = PT_TRACE_REDUCED + PT_TRACE_TILES
};
#if PAGED_TMA_TRACE
__device__ long long pt_trace[PT_TRACE_BLOCKS][PT_TRACE_SLOTS];
#define PT_TRACE(slot, value)                                                                           \
  do {                                                                                                  \
    const int pt_blk_ = blockIdx.x * gridDim.y + blockIdx.y;                                            \
    if (pt_blk_ < PT_TRACE_BLOCKS) pt_trace[pt_blk_][(slot)] = (long long)(value);                      \
  } while (0)
#else
#define PT_TRACE(slot, value) ((void)0)
#endif

// __launch_bounds__'s blocks-per-SM hint: 4 for the pipelined kernels (N <= 64) with PAGED_TMA_PIPE_PEEL (the peeled
// loop's second copy took them to 98 registers), 4 where N <= 128 in the persistent form (its unit loop takes the
// pipelined N = 64 kernels to 100-108 registers, 3 blocks per SM; capped at 96 they have 0 spills), else 0 (no hint).
__host__ __device__ constexpr int pt_min_blocks(int h, int nn) {
  return (PAGED_TMA_PIPE_PEEL && h * nn <= PAGED_TMA_PIPE_MAX_N) ? 4 : (PAGED_TMA_PERSISTENT && h * nn <= 128) ? 4 : 0;
}
constexpr int PT_STAGES = PAGED_TMA_STAGES;
constexpr int PT_CONSUMERS = 128;
constexpr int PT_THREADS = PT_CONSUMERS + WARP;  // the consumer warpgroup + the producer warp
constexpr int PT_ALIGN = 1024;                   // the 128B swizzle repeats every 8 rows of 128 bytes
constexpr int PT_CONSUMER_BAR = 1;               // named barrier of the consumer warpgroup (0 = __syncthreads)

using PagedCacheMap = TmaMap;  // the fused cache's CUtensorMap

// The 64 x D key bytes of cache block `block` (box {D, 64, 1} at {0, 0, block}), counted on `bar`.
__device__ __forceinline__ void pt_tma_block(uint32_t dst, const PagedCacheMap* map, int block, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(0), "r"(0), "r"(block), "r"(bar)
      : "memory");
}

// The ring's mbarriers, by one thread before the block's first __syncthreads.
template <int S>
__device__ __forceinline__ void pt_init_ring(uint32_t full0, uint32_t empty0) {
#pragma unroll
  for (int s = 0; s < S; ++s) {
    mbar_init(full0 + 8 * s, 1);   // the producer's expect_tx (+ the copies' bytes)
    mbar_init(empty0 + 8 * s, PT_CONSUMERS);  // one arrive per consumer thread (pt_release)
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// DESIGN: producer warp. Table entries 32 tiles at a time (one coalesced load), lane 0 issues the copies.
// Tiles [tile_begin, tile_end) of b's table row `table_row` go to ring tiles i0, i0 + 1, ... (slot i % S, reused
// once the consumers have released its previous tile i - S).
template <int D, int S>
__device__ __forceinline__ void pt_produce_tiles(const int* table_row, int tile_begin, int tile_end, int i0, int lane,
                                                 const u8* kv_cache, const PagedCacheMap& kv_map, uint32_t ring0,
                                                 uint32_t s0, uint32_t full0, uint32_t empty0) {
  constexpr int BS = TILE;  // one cache block per tile
  constexpr uint32_t K_STAGE = TILE * D, TX_BYTES = TILE * D + TILE * 4;
  constexpr i64 BLOCK_BYTES = (i64)BS * (D + 4);
  for (int t0 = tile_begin; t0 < tile_end; t0 += WARP) {
    const int mine = t0 + lane < tile_end ? __ldg(table_row + t0 + lane) : 0;
    const int count = min(WARP, tile_end - t0);
    for (int j = 0; j < count; ++j) {
      const int block = __shfl_sync(0xffffffffu, mine, j);
      const int i = i0 + t0 - tile_begin + j, stage = i % S;
      if (lane == 0) {
        if (i >= S) mbar_wait(empty0 + 8 * stage, ((i / S) - 1) & 1);
        mbar_arrive_expect_tx(full0 + 8 * stage, TX_BYTES);
        pt_tma_block(ring0 + stage * K_STAGE, &kv_map, block, full0 + 8 * stage);
        bulk_copy_g2s(s0 + stage * TILE * 4, kv_cache + (i64)block * BLOCK_BYTES + (i64)BS * D, TILE * 4,
                      full0 + 8 * stage);
      }
      __syncwarp();
    }
  }
}

// The consumers' side of the ring, shared by paged_tma_body and its persistent form. `i` counts the tiles through
// the ring (slot i % S, phase i / S): from 0 per block in paged_tma_body, the block's running count in the persistent
// form.
template <int S>
__device__ __forceinline__ void pt_wait_full(uint32_t full0, int i) {
  mbar_wait(full0 + 8 * (i % S), (i / S) & 1);
}
// A tile's scales of this lane's two accumulator rows; `tile` is its index in b's key range.
template <int S>
__device__ __forceinline__ TileOut pt_tile_scales(const float* s_s, int i, int tile, int warp, int gid) {
  TileOut t;
  t.tile = tile;
  t.sc0 = s_s[(i % S) * TILE + 16 * warp + gid];
  t.sc1 = s_s[(i % S) * TILE + 16 * warp + gid + 8];
  return t;
}
// Slot i % S back to the producer: every consumer thread arrives once its own reads of the slot (its two scales; the
// keys are read by its warpgroup's wgmma, complete at the wait before this) are done.
// DESIGN (session 6): one arrive per thread, not a __syncwarp and one arrive per warp. Both are ordered under the PTX
// memory model, but compute-sanitizer racecheck credits an arrive only with the arriving thread's own accesses: with
// one arrive per warp it reported the producer's next bulk copy of the scales against lanes 1-31's reads once a block's
// ring wraps (270336 hazards on one 32 x 16384 call), as it raises nothing on DeepGEMM's kernel, whose math threads
// each arrive. Measured on the H200 in three same-run A/Bs (docs/PAGED.md, session 6): within +0.5% at the large
// N = 128 cases, 1-3% faster at H 32 next_n 4 x 131072 and at one sequence; racecheck 0 hazards.
template <int S>
__device__ __forceinline__ void pt_release(uint32_t empty0, int i) {
  mbar_arrive(empty0 + 8 * (i % S));
}

// acc = the keys of ring slot i % S x Q's row chunk `chunk` (RPC rows of H columns), committed as one wgmma group.
template <int H, int D, int RPC, int S>
__device__ __forceinline__ void pt_issue(float (&acc)[RPC * H / 2], uint32_t ring0, uint32_t q0, int i, int chunk) {
  constexpr int NC = RPC * H, KS = D / 32;
  constexpr uint32_t K_STAGE = TILE * D;
  fence_regs(acc);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int s = 0; s < KS; ++s)
    wgmma_ss_k32<NC>(acc, swizzled_desc<D>(ring0 + (i % S) * K_STAGE + 32 * s),
                    swizzled_desc<D>(q0 + chunk * RPC * H * D + 32 * s), s > 0);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// The consumer loop over ring tiles [begin, end) (end > begin), CHUNKS row chunks per tile: wait_full(i),
// issue(acc, i, chunk), scales(i) -> TileOut, release(i), reduce(acc, chunk, t, interior). acc1 is used only
// where PIPE. Tiles [begin, interior_end) are reduced as interior (PAGED_TMA_PEEL, PAGED_TMA_PIPE_PEEL), the rest not.
template <bool PIPE, int CHUNKS, int NACC, int NACC1, typename WaitFull, typename Issue, typename Scales,
          typename Release, typename Reduce>
__device__ __forceinline__ void pt_consume_tiles(float (&acc0)[NACC], float (&acc1)[NACC1], int begin, int end,
                                                 int interior_end, WaitFull&& wait_full, Issue&& issue,
                                                 Scales&& scales, Release&& release, Reduce&& reduce) {
  if constexpr (PIPE) {
    // DESIGN: unit u + 1's wgmma runs while unit u's head reduce does (two accumulator sets); a unit is one
    // (tile, row chunk), u = tile * CHUNKS + chunk. A tile's slot is released after its last chunk's wgmma.
    auto start = [&](float (&acc)[NACC], int u) {
      if (u % CHUNKS == 0) wait_full(u / CHUNKS);
      issue(acc, u / CHUNKS, u % CHUNKS);
    };
    // units [u_begin, u_end) (u_end > u_begin), the pipeline drained at the end
    auto run = [&](int u_begin, int u_end, bool interior) {
      auto finish = [&](float (&acc)[NACC], int u) {
        const TileOut t = scales(u / CHUNKS);
        if (u % CHUNKS == CHUNKS - 1) release(u / CHUNKS);
        reduce(acc, u % CHUNKS, t, interior);
      };
      start(acc0, u_begin);
      for (int u = u_begin;; u += 2) {
        if (u + 1 >= u_end) {
          wgmma_wait<0>();
          finish(acc0, u);
          break;
        }
        start(acc1, u + 1);
        wgmma_wait<1>();
        finish(acc0, u);
        if (u + 2 >= u_end) {
          wgmma_wait<0>();
          finish(acc1, u + 1);
          break;
        }
        start(acc0, u + 2);
        wgmma_wait<1>();
        finish(acc1, u + 1);
      }
    };
    // PAGED_TMA_PIPE_PEEL: the interior tiles through their own copy of the loop (one drained pipeline between)
    if (interior_end > begin) run(begin * CHUNKS, interior_end * CHUNKS, true);
    if (end > max(begin, interior_end)) run(max(begin, interior_end) * CHUNKS, end * CHUNKS, false);
  } else {
    // wgmma -> wait -> reduce per (tile, chunk): one accumulator set, all of a tile's chunks on one wait_full.
    // (a bool, constant in each loop once inlined: a generic lambda with a tag type here crashed cicc 13.0)
    auto tile = [&](int i, bool interior) {
      wait_full(i);
      const TileOut t = scales(i);
#pragma unroll
      for (int chunk = 0; chunk < CHUNKS; ++chunk) {
        issue(acc0, i, chunk);
        wgmma_wait<0>();
        if (chunk == CHUNKS - 1) release(i);
        reduce(acc0, chunk, t, interior);
      }
    };
    int i = begin;
    for (; i < interior_end; ++i) tile(i, true);
    for (; i < end; ++i) tile(i, false);
  }
}

template <int H, int D, int NN>
__device__ __forceinline__ void paged_tma_body(const u8* __restrict__ q, const u8* __restrict__ kv_cache,
                                               const float* __restrict__ weights, const int* __restrict__ context_lens,
                                               const int* __restrict__ block_table, float* __restrict__ out,
                                               i64 out_row_stride, int max_context_len, int max_blocks, int split_n,
                                               int num_warps, int flags, const PagedCacheMap& kv_map) {
  constexpr int BS = TILE;  // one cache block per tile
  constexpr int S = PT_STAGES;
  // DESIGN: rows per wgmma. All next_n rows in one (N = next_n x H) up to 256 columns, else chunks of 256 columns
  // (H = 128, next_n > 2), one at a time; at N <= PAGED_TMA_PIPE_MAX_N the pipelined loop runs.
  constexpr int RPC = NN * H <= MAX_WGMMA_N ? NN : MAX_WGMMA_N / H;
  constexpr int CHUNKS = (NN + RPC - 1) / RPC;
  constexpr int QROWS = CHUNKS * RPC;
  constexpr int NC = RPC * H, NACC = NC / 2;
  constexpr bool PIPE = PAGED_PIPELINE && CHUNKS == 1 && NC <= PAGED_TMA_PIPE_MAX_N;

  constexpr uint32_t K_STAGE = TILE * D;

  extern __shared__ u8 pt_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(pt_raw);
  u8* const base = pt_raw + ((PT_ALIGN - raw0 % PT_ALIGN) % PT_ALIGN);
  u8* const ring_s = base;                                         // [S][64 D], swizzled
  u8* const q_s = ring_s + S * K_STAGE;                            // [QROWS H][D], swizzled
  float* const s_s = reinterpret_cast<float*>(q_s + QROWS * H * D);  // [S][64]
  float* const w_s = s_s + S * TILE;                               // [QROWS H]
  uint64_t* const bars = reinterpret_cast<uint64_t*>(w_s + QROWS * H);  // full[S], empty[S]

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1), warp = tid / WARP;
  const int gid = lane >> 2, tig = lane & 3;
  const int b = blockIdx.x, split = blockIdx.y;
  const bool clean = flags & FLAG_CLEAN_LOGITS;

  const i64 limit = min((i64)max_context_len, (i64)max_blocks * BS);
  int len[MAX_NEXT_N];
  const int len_max = row_lengths<NN>(len, context_lens, b, flags, limit);
  const int tiles = (len_max + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);
  const int n_tiles = tile_end - tile_begin;
  const i64 row0 = (i64)b * NN;
  if (PAGED_TMA_TRACE && tid == 0) {
    PT_TRACE(PT_TRACE_ENTRY_NS, globaltimer_ns());
    PT_TRACE(PT_TRACE_SMID, sm_id());
    PT_TRACE(PT_TRACE_N_TILES, n_tiles);
    PT_TRACE(PT_TRACE_ENTRY, clock64());
  }
  // the fused -inf fill (fill_row_tails), by the consumer warps
  auto fill_tail = [&]() {
    if (clean && warp < 4)
      fill_row_tails<NN>(out, row0, out_row_stride, len_max, max_context_len, split * num_warps + warp,
                         split_n * num_warps, lane);
  };

  if (n_tiles > 0) {  // block-uniform
    const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
    const uint32_t q0 = (uint32_t)__cvta_generic_to_shared(q_s);
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(s_s);
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars), empty0 = full0 + 8 * S;
    if (tid == 0) pt_init_ring<S>(full0, empty0);
    __syncthreads();

    if (warp == 4) {
      if (lane == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&kv_map)) : "memory");
      if (PAGED_TMA_TRACE && lane == 0) PT_TRACE(PT_TRACE_PRODUCER_START, clock64());
      pt_produce_tiles<D, S>(block_table + (i64)b * max_blocks, tile_begin, tile_end, 0, lane, kv_cache, kv_map, ring0,
                             s0, full0, empty0);
      if (PAGED_TMA_TRACE && lane == 0) PT_TRACE(PT_TRACE_PRODUCER_LAST, clock64());
    } else {
      // DESIGN: Q staging by cp.async. Q (natural depth order, column n = row * H + head) into the swizzled layout,
      // zero rows past next_n (src_bytes 0 from b's first row), and the weights: every copy in flight at once, one
      // memory latency per block where the register loads (unrolled by four) waited two to three (session 7).
      const uint32_t w0 = (uint32_t)__cvta_generic_to_shared(w_s);
      // b's Q rows are one contiguous span of q: copy i moves its bytes [16 i, 16 i + 16) to the same offset,
      // swizzled, on unsigned offsets (session 10: as the prefill tmas staging).
      const u8* const q_span = q + row0 * H * D;
      for (uint32_t off = 16 * tid; off < QROWS * H * D; off += 16 * PT_CONSUMERS) {
        const bool ok = off < NN * H * D;
        cp_async16_zfill(q0 + swizzled<D>(off), q_span + (ok ? off : 0), ok ? 16u : 0u);
      }
      for (int c = tid; c < QROWS * H; c += PT_CONSUMERS) {
        const bool ok = c < NN * H;
        cp_async4_zfill(w0 + 4 * c, weights + row0 * H + (ok ? c : 0), ok ? 4u : 0u);
      }
      cp_async_commit_group();
      cp_async_wait_groups<0>();
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // Q's cp.async writes are read by wgmma
      asm volatile("bar.sync %0, %1;" ::"n"(PT_CONSUMER_BAR), "n"(PT_CONSUMERS) : "memory");
      if (PAGED_TMA_TRACE && tid == 0) PT_TRACE(PT_TRACE_Q_STAGED, clock64());

      auto wait_full = [&](int i) {
        pt_wait_full<S>(full0, i);
        if (PAGED_TMA_TRACE && tid == 0 && i < PT_TRACE_TILES) PT_TRACE(PT_TRACE_FULL + i, clock64());
      };
      auto scales = [&](int i) { return pt_tile_scales<S>(s_s, i, tile_begin + i, warp, gid); };
      auto release = [&](int i) { pt_release<S>(empty0, i); };
      auto issue = [&](float (&acc)[NACC], int i, int chunk) {
        pt_issue<H, D, RPC, S>(acc, ring0, q0, i, chunk);
      };
      auto reduce = [&](float (&acc)[NACC], int chunk, const TileOut& t, bool interior) {
        fence_regs(acc);
        if (interior)
          head_reduce_store<H, RPC, NN, true>(acc, chunk * RPC, w_s, out, row0, out_row_stride, t, len, len_max, warp,
                                              gid, tig, clean);
        else
          head_reduce_store<H, RPC, NN>(acc, chunk * RPC, w_s, out, row0, out_row_stride, t, len, len_max, warp, gid,
                                        tig, clean);
        const int k = t.tile - tile_begin;
        if (PAGED_TMA_TRACE && tid == 0 && k < PT_TRACE_TILES) PT_TRACE(PT_TRACE_REDUCED + k, clock64());
      };

      float acc0[NACC], acc1[PIPE ? NACC : 1];
#pragma unroll
      for (int k = 0; k < NACC; ++k) acc0[k] = 0.0f;
#pragma unroll
      for (int k = 0; k < (PIPE ? NACC : 1); ++k) acc1[k] = 0.0f;
      // PAGED_TMA_PEEL: the split's tiles that end inside the shortest row, a prefix of it
      int len_min = len[0];
#pragma unroll
      for (int j = 1; j < NN; ++j) len_min = min(len_min, len[j]);
      constexpr bool PEEL = PIPE ? (bool)PAGED_TMA_PIPE_PEEL : pt_peel<H>();
      const int interior_end = PEEL ? min(max(len_min / TILE - tile_begin, 0), n_tiles) : 0;
      pt_consume_tiles<PIPE, CHUNKS>(acc0, acc1, 0, n_tiles, interior_end, wait_full, issue, scales, release, reduce);
      if (PAGED_TMA_TRACE && tid == 0) {
        PT_TRACE(PT_TRACE_EXIT_NS, globaltimer_ns());
        PT_TRACE(PT_TRACE_EXIT, clock64());
      }
    }
  }

  fill_tail();
}

// The persistent form (PAGED_TMA_PERSISTENT): the shipped loop of paged_tma_body (one consumer warpgroup, the
// two-accumulator pipeline at N <= PAGED_TMA_PIPE_MAX_N, else wgmma -> wait -> reduce per tile; none of the other
// experiment macros) inside a loop over this block's (b, split) units. Ring slot and parity come from the block's
// running tile count g, which producer and consumers advance by the same n_tiles per unit (both read the same
// context_lens), so the phases line up across units without any handshake beyond the ring's own barriers.
template <int H, int D, int NN>
__device__ __forceinline__ void paged_tma_persistent_body(
    const u8* __restrict__ q, const u8* __restrict__ kv_cache, const float* __restrict__ weights,
    const int* __restrict__ context_lens, const int* __restrict__ block_table, float* __restrict__ out,
    i64 out_row_stride, int max_context_len, int max_blocks, int split_n, int num_warps, int flags, int batch,
    const PagedCacheMap& kv_map) {
  constexpr int BS = TILE;
  constexpr int S = PT_STAGES;
  constexpr int RPC = NN * H <= MAX_WGMMA_N ? NN : MAX_WGMMA_N / H;
  constexpr int CHUNKS = (NN + RPC - 1) / RPC;
  constexpr int QROWS = CHUNKS * RPC;
  constexpr int NC = RPC * H, NACC = NC / 2;
  constexpr bool PIPE = PAGED_PIPELINE && CHUNKS == 1 && NC <= PAGED_TMA_PIPE_MAX_N;

  constexpr uint32_t K_STAGE = TILE * D;

  extern __shared__ u8 pt_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(pt_raw);
  u8* const base = pt_raw + ((PT_ALIGN - raw0 % PT_ALIGN) % PT_ALIGN);
  u8* const ring_s = base;                                            // [S][64 D], swizzled
  u8* const q_s = ring_s + S * K_STAGE;                               // [QROWS H][D], swizzled
  float* const s_s = reinterpret_cast<float*>(q_s + QROWS * H * D);   // [S][64]
  float* const w_s = s_s + S * TILE;                                  // [QROWS H]
  uint64_t* const bars = reinterpret_cast<uint64_t*>(w_s + QROWS * H);  // full[S], empty[S]
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  const uint32_t q0 = (uint32_t)__cvta_generic_to_shared(q_s);
  const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(s_s);
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars), empty0 = full0 + 8 * S;

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1), warp = tid / WARP;
  const int gid = lane >> 2, tig = lane & 3;
  const bool clean = flags & FLAG_CLEAN_LOGITS;
  const i64 limit = min((i64)max_context_len, (i64)max_blocks * BS);
  const i64 units = (i64)max(batch, 0) * split_n;
  const int u_begin = (int)(units * blockIdx.x / gridDim.x), u_end = (int)(units * (blockIdx.x + 1) / gridDim.x);
  // What the consumers need only between units, kept in shared memory (read there, after a "memory" clobber, so
  // not held in registers across the tile loop: the unit loop otherwise costs 4 blocks per SM at N = 64).
  struct UnitArgs {
    const u8* q;
    const float* weights;
    const int* context_lens;
    int u_begin, u_end;
  };
  __shared__ UnitArgs pt_args;

  // Unit u = (b, split): b = u / split_n, its rows' lengths and its tile range, as the one-unit grid computes them.
  struct Unit {
    int b, split, len_max, tile_begin, n_tiles;
    bool fresh;  // no earlier unit of this block has b's tiles: Q and the weights of b are not staged yet
    int len[MAX_NEXT_N];
  };
  // (context_lens[b] is read per unit; the producer, running ahead, has read the same line: an L1 hit for the
  // consumers. Keeping the last b's lengths in shared memory instead cost the pipelined H 32 next_n 2 kernel spills.)
  auto unit = [&](int u, const int* __restrict__ context_lens, int u_begin) {
    Unit x;
    x.b = u / split_n;
    x.split = u - x.b * split_n;
    x.len_max = row_lengths<NN>(x.len, context_lens, x.b, flags, limit);
    const int tiles = (x.len_max + TILE - 1) / TILE;
    x.tile_begin = (int)((i64)tiles * x.split / split_n);
    x.n_tiles = (int)((i64)tiles * (x.split + 1) / split_n) - x.tile_begin;
    // b's units are contiguous, so an earlier one of this block had tiles iff this unit starts past the first tile
    // of b's first unit here (derived, not carried across units: registers)
    const int s_first = (int)max((i64)u_begin - (i64)x.b * split_n, (i64)0);
    x.fresh = x.tile_begin == (int)((i64)tiles * s_first / split_n);
    return x;
  };

  if (tid == 0) {
    pt_init_ring<S>(full0, empty0);
    pt_args = UnitArgs{q, weights, context_lens, u_begin, u_end};
  }
  __syncthreads();

  if (warp == 4) {
    // DESIGN: pt_produce_tiles over every unit of the block in turn: ring tile i is the block's i-th tile (g counts
    // the tiles of the units before).
    if (lane == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&kv_map)) : "memory");
    int g = 0;
    for (int u = u_begin; u < u_end; ++u) {
      const Unit x = unit(u, context_lens, u_begin);
      pt_produce_tiles<D, S>(block_table + (i64)x.b * max_blocks, x.tile_begin, x.tile_begin + x.n_tiles, g, lane,
                             kv_cache, kv_map, ring0, s0, full0, empty0);
      g += x.n_tiles;
    }
    return;
  }
  if (warp > 4) return;

  auto wait_full = [&](int r) { pt_wait_full<S>(full0, r); };
  auto release = [&](int r) { pt_release<S>(empty0, r); };
  auto issue = [&](float (&acc)[NACC], int r, int chunk) { pt_issue<H, D, RPC, S>(acc, ring0, q0, r, chunk); };

  float acc0[NACC], acc1[PIPE ? NACC : 1];
#pragma unroll
  for (int k = 0; k < NACC; ++k) acc0[k] = 0.0f;
#pragma unroll
  for (int k = 0; k < (PIPE ? NACC : 1); ++k) acc1[k] = 0.0f;
  int g = 0;
  for (int u = u_begin;; ++u) {
    asm volatile("" ::: "memory");
    const UnitArgs a = pt_args;
    if (u >= a.u_end) break;
    const Unit x = unit(u, a.context_lens, a.u_begin);
    const i64 row0 = (i64)x.b * NN;
    // DESIGN: the unit's share of b's -inf fill [len_max, max_context_len), as paged_tma_body's; before the tiles
    // (disjoint columns), so the split and the fill's bounds are not held across the tile loop.
    if (clean)
      fill_row_tails<NN>(out, row0, out_row_stride, x.len_max, max_context_len, x.split * num_warps + warp,
                         split_n * num_warps, lane);
    if (x.n_tiles > 0) {  // block-uniform
      if (x.fresh) {
        // DESIGN: a new b: every consumer warp is past its last wgmma_wait<0> and head reduce of the old Q and
        // weights (the named barrier) before they are overwritten; then the staging of paged_tma_body.
        asm volatile("bar.sync %0, %1;" ::"n"(PT_CONSUMER_BAR), "n"(PT_CONSUMERS) : "memory");
        // (tid through an empty asm: the staging addresses are then not loop-invariant, so the compiler does not
        // hoist all of them out of the unit loop and hold them in registers across it)
        int me = tid;
        asm volatile("" : "+r"(me));
        // By cp.async: every copy in flight at once with no registers held (register loads in a rolled loop
        // serialised one global latency per iteration: measured ~2.3 us per staging in call 1).
#pragma unroll 1
        for (int c = me; c < QROWS * H * (D / 16); c += PT_CONSUMERS) {
          const int n = c / (D / 16), j = c % (D / 16);
          if (n < NN * H)
            cp_async16(q0 + swizzled<D>(n * D + 16 * j), a.q + (row0 * H + n) * D + 16 * j);
          else
            *reinterpret_cast<uint4*>(q_s + swizzled<D>(n * D + 16 * j)) = make_uint4(0, 0, 0, 0);
        }
        const uint32_t w0 = (uint32_t)__cvta_generic_to_shared(w_s);
#pragma unroll 1
        for (int c = me; c < QROWS * H; c += PT_CONSUMERS) {
          if (c < NN * H)
            cp_async4(w0 + 4 * c, a.weights + row0 * H + c);
          else
            w_s[c] = 0.0f;
        }
        cp_async_commit_group();
        cp_async_wait_groups<0>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, %1;" ::"n"(PT_CONSUMER_BAR), "n"(PT_CONSUMERS) : "memory");
      }
      // r: the block's running tile count (the ring slot r % S, its phase r / S); tile = r + tile_off
      const int tile_off = x.tile_begin - g, r_end = g + x.n_tiles;
      auto scales = [&](int r) { return pt_tile_scales<S>(s_s, r, r + tile_off, warp, gid); };
      auto reduce = [&](float (&acc)[NACC], int chunk, const TileOut& t, bool) {
        fence_regs(acc);
        head_reduce_store<H, RPC, NN>(acc, chunk * RPC, w_s, out, row0, out_row_stride, t, x.len, x.len_max, warp,
                                      gid, tig, clean);
      };
      pt_consume_tiles<PIPE, CHUNKS>(acc0, acc1, g, r_end, g, wait_full, issue, scales, release, reduce);
      g = r_end;
    }
  }
}

// PAGED_TMA_WG4 1 (experiment, off): the four-warpgroup persistent form at next_n x H <= 128
// (kernels/sm90/paged_tma_wg4.cuh); the wider kernels of such a build run the persistent form above.
#ifndef PAGED_TMA_WG4
#define PAGED_TMA_WG4 0
#endif
#include "paged_tma_wg4.cuh"

// Symbols: fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs64_tma_n{next_n}: the common argument list + the cache's map
// (+ `batch` in the persistent forms).
#define PT_LAUNCH_BOUNDS(H, NN) __launch_bounds__(PT_THREADS, pt_min_blocks(H, NN))
// The persistent argument list (`batch` after the map): the four-warpgroup body where pw_four (design "tma4", or a
// "tma" build with PAGED_TMA_WG4), else the persistent one-warpgroup body. ALWAYS: 1 for "tma4".
template <int ALWAYS, int H, int NN>
__host__ __device__ constexpr bool pw_four() {
  return (ALWAYS || PAGED_TMA_WG4) && pw_applies<H, NN>();
}
#define PT_PERSISTENT_KERNEL_NN(H, D, NN, SUFFIX, ALWAYS)                                                      \
  extern "C" __global__ void __launch_bounds__(pw_four<ALWAYS, H, NN>() ? PW_THREADS : PT_THREADS,            \
                                               pw_four<ALWAYS, H, NN>() ? 1 : pt_min_blocks(H, NN))             \
      fp8_paged_mqa_logits_sm90_h##H##_d##D##_bs64_##SUFFIX##_n##NN(                                           \
          const u8* q, const u8* kv_cache, const float* weights, const int* context_lens,                      \
          const int* block_table, float* out, i64 out_row_stride, int next_n, int max_context_len,             \
          int max_blocks, int split_n, int num_warps, int flags, const __grid_constant__ PagedCacheMap kv_map,   \
          int batch) {                                                                                         \
    if constexpr (pw_four<ALWAYS, H, NN>())                                                                    \
      paged_tma_wg4_body<H, D, NN>(q, kv_cache, weights, context_lens, block_table, out, out_row_stride,       \
                                   max_context_len, max_blocks, split_n, flags, batch, kv_map);                \
    else                                                                                                       \
      paged_tma_persistent_body<H, D, NN>(q, kv_cache, weights, context_lens, block_table, out,                \
                                          out_row_stride, max_context_len, max_blocks, split_n, num_warps,     \
                                          flags, batch, kv_map);                                               \
  }
#if PAGED_TMA_PERSISTENT || PAGED_TMA_WG4
#define PAGED_TMA_KERNEL_NN(H, D, NN) PT_PERSISTENT_KERNEL_NN(H, D, NN, tma, 0)
#else
#define PAGED_TMA_KERNEL_NN(H, D, NN)                                                                        \
  extern "C" __global__ void PT_LAUNCH_BOUNDS(H, NN) fp8_paged_mqa_logits_sm90_h##H##_d##D##_bs64_tma_n##NN( \
      const u8* q, const u8* kv_cache, const float* weights, const int* context_lens, const int* block_table,   \
      float* out, i64 out_row_stride, int next_n, int max_context_len, int max_blocks, int split_n,             \
      int num_warps, int flags, const __grid_constant__ PagedCacheMap kv_map) {                               \
    paged_tma_body<H, D, NN>(q, kv_cache, weights, context_lens, block_table, out, out_row_stride,             \
                             max_context_len, max_blocks, split_n, num_warps, flags, kv_map);                  \
  }
#endif
// Design "tma4" (opt-in, session 18; kernels/sm90/paged_tma_wg4.cuh): the four-warpgroup balanced kernel at next_n x H
// = 96 / 128 (640 threads), the persistent one-warpgroup form at the other next_n; both take `batch` after the map.
// Symbols: fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs64_tma4_n{next_n}.
#define PAGED_TMA4_KERNEL_NN(H, D, NN) PT_PERSISTENT_KERNEL_NN(H, D, NN, tma4, 1)
#define INSTANTIATE_PAGED_TMA4(H, D)                                                                  \
  PAGED_TMA4_KERNEL_NN(H, D, 1) PAGED_TMA4_KERNEL_NN(H, D, 2) PAGED_TMA4_KERNEL_NN(H, D, 3) \
  PAGED_TMA4_KERNEL_NN(H, D, 4)
#define INSTANTIATE_PAGED_TMA(H, D)                                                                  \
  PAGED_TMA_KERNEL_NN(H, D, 1) PAGED_TMA_KERNEL_NN(H, D, 2) PAGED_TMA_KERNEL_NN(H, D, 3) \
  PAGED_TMA_KERNEL_NN(H, D, 4)
