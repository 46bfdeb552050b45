// ===================================================================================================
// Design "tma4" (session 18; docs/PAGED.md "Session 18", "Session 19"): the decode kernel with DeepGEMM's block
// structure at next_n x H = 96 / 128, where "auto" runs it on batches of >= 16 K tiles (dispatch/paged_sm90.py) (PAGED_TMA4_INSTANCES; its other next_n run kernels/sm90/paged_tma.cuh's persistent
// one-warpgroup form). The experiment switch PAGED_TMA_WG4 (off) builds the same body into design "tma"'s symbols.
// Included by kernels/sm90/paged_tma.cuh, which keeps the shipped one-warpgroup body.
//
// Why: at N = 128 the shipped grid runs four 160-thread blocks per SM, each paying its own prologue (lengths ->
// table -> first K tile, ~3 us in series), Q staging (16 KB per block) and drain; session 13's trace put that at
// 15-20% of a 15.5-tile block's life, and the persistent one-warpgroup form (decode7) paid a Q staging stall per
// sequence instead. DeepGEMM's paged kernel (read for facts only) runs one block per SM: four math warpgroups, one
// TMA warp per math warpgroup with its own ring, Q shared by the four.
//
// Block = four consumer warpgroups (warps 0-15) + four producer warps (16-19; warp 16 + g feeds warpgroup g), 640
// threads, one block per SM, grid = SMs (the persistent argument list: `batch` last). Block c takes tiles
// [T c / G, T (c + 1) / G) of the batch's T tiles in b-major order (PAGED_TMA_WG4_BALANCED, computed by every block
// from context_lens; 0: the (b, split) units [U c / G, U (c + 1) / G)); the tiles it holds of one b are one
// contiguous range ("run"), dealt round-robin: tile run_begin + g + 4 k to warpgroup g.
//   * setmaxnreg: the producer warpgroup down to 32 registers, the consumers up to 112, each lane's weights held in
//     registers (PAGED_TMA_WG4_REGS, PAGED_TMA_WG4_WREGS).
//   * Each warpgroup has its own ring of PAGED_TMA_WG4_STAGES slots fed by its producer warp as pt_produce_tiles does,
//     with a stride of four tiles; the slot and phase come from the warpgroup's running tile count.
//   * Q and the weights are double-buffered: the 512 consumer threads stage run r + 1's by cp.async right after the
//     barrier that opens run r (every warpgroup is then past run r - 1, the buffer's last reader), so a new sequence
//     costs no staging stall once the first is in.
//   * The consumer loop, the head reduce and the -inf fill are the shipped ones (pt_consume_tiles, head_reduce_store,
//     fill_row_tails by the block's 16 consumer warps: per sequence of [B c / G, B (c + 1) / G) in the balanced form,
//     per unit in the units form).
// Shared memory: rings [4][S][64 D] | Q [2][rows H D] | scales [4][S][64] | weights [2][rows H] | full [4][S],
// empty [4][S] (+ 1024 alignment): rawindexer/paged_kernels.sm90_shared_bytes with groups = 4.
// ===================================================================================================
#pragma once

#ifndef PAGED_TMA_WG4_STAGES
#define PAGED_TMA_WG4_STAGES 4
#endif
constexpr int PW_GROUPS = 4;
constexpr int PW_CONSUMERS = PW_GROUPS * PT_CONSUMERS;           // 512
constexpr int PW_THREADS = PW_CONSUMERS + PW_GROUPS * WARP;      // 640
constexpr int PW_BAR = 2;                                        // named barrier of the 512 consumer threads
// The defaults below are the form measured best (session 18 call 4, `wreb`): 112 registers, the weights in registers,
// the balanced schedule; each can be set to 0 for the earlier forms.
// PAGED_TMA_WG4_REGS R (0 = off): the block's 96 registers per thread re-dealt by setmaxnreg, the producer warpgroup
// (warps 16-19) down to PW_PRODUCER_REGS, the consumers up to R; the pool is 640 x 96, so 512 (R - 96) <= 128 (96 -
// PW_PRODUCER_REGS). Each region ends in its own exit (pt_exit): a join would be allocated at the entry count.
#ifndef PAGED_TMA_WG4_REGS
#define PAGED_TMA_WG4_REGS 112
#endif
#ifndef PW_PRODUCER_REGS
#define PW_PRODUCER_REGS 32
#endif
// PAGED_TMA_WG4_WREGS 1 (with PAGED_TMA_WG4_REGS; 0 = the weights from shared memory per tile): each lane holds its
// 2 next_n H / 8 weight pairs in registers, read once per run (DeepGEMM's form), so the tile loop has no weight loads.
#ifndef PAGED_TMA_WG4_WREGS
#define PAGED_TMA_WG4_WREGS 1
#endif
static_assert(PAGED_TMA_WG4_REGS == 0 ||
                  (PAGED_TMA_WG4_REGS % 8 == 0 && PW_CONSUMERS * (PAGED_TMA_WG4_REGS - 96) <=
                                                      PW_GROUPS * WARP * (96 - PW_PRODUCER_REGS)),
              "PAGED_TMA_WG4_REGS: a multiple of 8 the producers' registers pay for");
__device__ __forceinline__ void pt_exit() {
  asm volatile("exit;" ::: "memory");
  __builtin_unreachable();
}

// The four-warpgroup form runs where one accumulator set fits the 96 registers of a 640-thread block and the shipped
// loop is the one-accumulator one (N = 96, 128; the pipelined N <= 64 loop spilled 180-264 bytes at 96 registers).
template <int H, int NN>
__host__ __device__ constexpr bool pw_applies() {
  return H * NN > PAGED_TMA_PIPE_MAX_N && H * NN <= 128;
}

// A float of shared memory by its shared-space address (volatile: it stays after the full-barrier wait before it).
__device__ __forceinline__ float pw_lds(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

// A warp-uniform pointer, marked as such for ptxas (lane 0's value through a shuffle).
template <typename T>
__device__ __forceinline__ T* pw_uniform(T* p) {
  const uint64_t v = reinterpret_cast<uint64_t>(p);
  const uint32_t lo = __shfl_sync(0xffffffffu, (uint32_t)v, 0), hi = __shfl_sync(0xffffffffu, (uint32_t)(v >> 32), 0);
  return reinterpret_cast<T*>(((uint64_t)hi << 32) | lo);
}

__device__ __forceinline__ int pw_uniform(int v) {
  return __shfl_sync(0xffffffffu, v, 0);
}

// One b's share of a block's units: its splits [s_lo, s_hi] and their tiles [tile_begin, tile_end).
struct PwRun {
  int s_lo, s_hi, len_max, tiles, tile_begin, tile_end;  // tiles: all of b's
  int len[MAX_NEXT_N];
};

template <int NN>
__device__ __forceinline__ PwRun pw_run(int b, int u_begin, int u_end, int split_n,
                                        const int* __restrict__ context_lens, int flags, i64 limit) {
  PwRun r;
  r.s_lo = max(u_begin - b * split_n, 0);
  r.s_hi = min(u_end - 1 - b * split_n, split_n - 1);
  r.len_max = row_lengths<NN>(r.len, context_lens, b, flags, limit);
  r.tiles = (r.len_max + TILE - 1) / TILE;
  r.tile_begin = (int)((i64)r.tiles * r.s_lo / split_n);
  r.tile_end = (int)((i64)r.tiles * (r.s_hi + 1) / split_n);
  return r;
}

// PAGED_TMA_WG4_BALANCED 1 (0 = the persistent form's (b, split) units, b-major: unbalanced for ragged lengths):
// block c takes tiles [T c / G, T (c + 1) / G) of the T tiles of the whole batch in b-major
// order (DeepGEMM's balance, computed by every block from context_lens instead of by a metadata kernel), and fills the
// -inf tails of the sequences [B c / G, B (c + 1) / G). split_n is not read. A run of b is then the intersection of
// [p_b, p_b + tiles_b) (p_b: the tiles of the sequences before b) with the block's range.
#ifndef PAGED_TMA_WG4_BALANCED
#define PAGED_TMA_WG4_BALANCED 1
#endif
template <int NN>
__device__ __forceinline__ PwRun pw_run_balanced(int b, int p, int t0, int t1, const int* __restrict__ context_lens,
                                                 int flags, i64 limit) {
  PwRun r;
  r.s_lo = 0;
  r.s_hi = -1;  // no units: the fill is per sequence range
  r.len_max = row_lengths<NN>(r.len, context_lens, b, flags, limit);
  r.tiles = (r.len_max + TILE - 1) / TILE;
  r.tile_begin = min(max(t0 - p, 0), r.tiles);
  r.tile_end = max(min(t1 - p, r.tiles), r.tile_begin);
  return r;
}

// Sum of v over the block's 640 threads, for every thread. red: one int per warp of shared memory.
__device__ __forceinline__ int pw_block_sum(int v, int* red, int lane, int warp) {
#pragma unroll
  for (int d = WARP / 2; d; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  int t = lane < PW_THREADS / WARP ? red[lane] : 0;
#pragma unroll
  for (int d = WARP / 2; d; d >>= 1) t += __shfl_xor_sync(0xffffffffu, t, d);
  __syncthreads();
  return t;
}

// Block c's tile range [t0, t1) of the batch's T tiles, and the first sequence b_lo with tiles in it and p_lo, the
// tiles before b_lo (b_lo = batch where the range is empty). Two passes over context_lens by all 640 threads: the
// total, then an exclusive scan in chunks of 640 sequences until the one holding tile t0.
template <int NN>
__device__ __forceinline__ void pw_balance(int batch, const int* __restrict__ context_lens, int flags, i64 limit,
                                           int tid, int lane, int warp, int& t0, int& t1, int& b_lo, int& p_lo) {
  __shared__ int red[PW_THREADS / WARP];
  __shared__ int found[2];
  auto tiles_of = [&](int b) {
    int len[MAX_NEXT_N];
    return b < batch ? (row_lengths<NN>(len, context_lens, b, flags, limit) + TILE - 1) / TILE : 0;
  };
  int mine = 0;
  for (int b = tid; b < batch; b += PW_THREADS) mine += tiles_of(b);
  if (tid == 0) found[0] = batch, found[1] = 0;
  const i64 total = pw_block_sum(mine, red, lane, warp);
  t0 = (int)(total * blockIdx.x / gridDim.x);
  t1 = (int)(total * (blockIdx.x + 1) / gridDim.x);
  int carry = 0;
  for (int base = 0; base < batch && t0 < t1; base += PW_THREADS) {
    const int x = tiles_of(base + tid);
    int incl = x;
#pragma unroll
    for (int d = 1; d < WARP; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    if (lane == WARP - 1) red[warp] = incl;
    __syncthreads();
    int before = 0, chunk = 0;
    for (int w = 0; w < PW_THREADS / WARP; ++w) {
      before += w < warp ? red[w] : 0;
      chunk += red[w];
    }
    const int excl = carry + before + incl - x;
    if (x > 0 && excl <= t0 && t0 < excl + x) found[0] = base + tid, found[1] = excl;
    __syncthreads();
    if (found[0] < batch) break;  // block-uniform (read after the barrier)
    carry += chunk;
  }
  b_lo = found[0];
  p_lo = found[1];
}

// PAGED_TMA_WG4_SUSPEND_NS (0 = off): the producers' wait for a free slot as one try_wait with this suspend-time hint
// in a PTX loop (DeepGEMM's producer sleeps there; ncu of call 2 counted our spin at ~67 try_wait rounds per tile,
// ~16% of the block's issued instructions).
#ifndef PAGED_TMA_WG4_SUSPEND_NS
#define PAGED_TMA_WG4_SUSPEND_NS 0
#endif
__device__ __forceinline__ void pw_wait_free(uint32_t bar, uint32_t parity) {
  if constexpr (PAGED_TMA_WG4_SUSPEND_NS == 0) {
    mbar_wait(bar, parity);
  } else {
    asm volatile(
        "{\n.reg .pred p;\nPW_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n"
        "@!p bra PW_WAIT;\n}\n" ::"r"(bar),
        "r"(parity), "n"(PAGED_TMA_WG4_SUSPEND_NS)
        : "memory");
  }
}

// (Its per-tile body is pt_produce_tiles's; moving that body into a helper shared by both changed the shipped kernels'
// producer code -- 24 of the 168 decode kernels, +8 instructions each -- so the two stay apart.)
// Producer warp of one warpgroup: tiles tile_first, tile_first + PW_GROUPS, ... < tile_end of b's table row into
// ring tiles i0, i0 + 1, ... (pt_produce_tiles with a stride). Returns the number of tiles.
template <int D, int S>
__device__ __forceinline__ int pw_produce_tiles(const int* table_row, int tile_first, int tile_end, int i0, int lane,
                                                const u8* kv_cache, const PagedCacheMap& kv_map, uint32_t ring0,
                                                uint32_t s0, uint32_t full0, uint32_t empty0) {
  constexpr uint32_t K_STAGE = TILE * D, TX_BYTES = TILE * D + TILE * 4;
  constexpr i64 BLOCK_BYTES = (i64)TILE * (D + 4);
  const int n = tile_first < tile_end ? (tile_end - tile_first + PW_GROUPS - 1) / PW_GROUPS : 0;
  for (int k0 = 0; k0 < n; k0 += WARP) {
    const int mine = k0 + lane < n ? __ldg(table_row + tile_first + PW_GROUPS * (k0 + lane)) : 0;
    const int count = min(WARP, n - k0);
    for (int j = 0; j < count; ++j) {
      const int block = __shfl_sync(0xffffffffu, mine, j);
      const int i = i0 + k0 + j, stage = i % S;
      if (lane == 0) {
        if (i >= S) pw_wait_free(empty0 + 8 * stage, ((i / S) - 1) & 1);
        mbar_arrive_expect_tx(full0 + 8 * stage, TX_BYTES);
        pt_tma_block(ring0 + stage * K_STAGE, &kv_map, block, full0 + 8 * stage);
        bulk_copy_g2s(s0 + stage * TILE * 4, kv_cache + (i64)block * BLOCK_BYTES + (i64)TILE * D, TILE * 4,
                      full0 + 8 * stage);
      }
      __syncwarp();
    }
  }
  return n;
}

template <int H, int D, int NN>
__device__ __forceinline__ void paged_tma_wg4_body(const u8* __restrict__ q, const u8* __restrict__ kv_cache,
                                                   const float* __restrict__ weights,
                                                   const int* __restrict__ context_lens,
                                                   const int* __restrict__ block_table, float* __restrict__ out,
                                                   i64 out_row_stride, int max_context_len, int max_blocks,
                                                   int split_n, int flags, int batch, const PagedCacheMap& kv_map) {
  constexpr int S = PAGED_TMA_WG4_STAGES;
  constexpr int NC = NN * H, NACC = NC / 2;
  constexpr bool PIPE = PAGED_PIPELINE && NC <= PAGED_TMA_PIPE_MAX_N;
  constexpr uint32_t K_STAGE = TILE * D, Q_BYTES = NN * H * D;

  // Shared-space addresses only: the scales are read by ld.shared (pw_lds), so no generic pointer into shared memory
  // lives across the tile loop (with them, ptxas rebuilt the CTA's shared window base every tile).
  extern __shared__ u8 pt_raw[];
  const uint32_t raw0 = (uint32_t)__cvta_generic_to_shared(pt_raw);
  const uint32_t ring_all = raw0 + (PT_ALIGN - raw0 % PT_ALIGN) % PT_ALIGN;  // [4][S][64 D], swizzled
  const uint32_t q_all = ring_all + PW_GROUPS * S * K_STAGE;                // [2][NN H][D], swizzled
  const uint32_t s_all = q_all + 2 * Q_BYTES;                               // [4][S][64] f32
  const uint32_t w_all = s_all + PW_GROUPS * S * TILE * 4;                  // [2][NN H] f32
  const uint32_t full_all = w_all + 2 * NN * H * 4, empty_all = full_all + 8 * PW_GROUPS * S;

  const int tid = threadIdx.x;
  // (the warp index through a shuffle: ptxas then keeps it, and the ring addresses and descriptors derived from it,
  // in uniform registers -- from threadIdx.x directly they took 104 vector integer instructions per tile, not 23)
  const int lane = tid & (WARP - 1), warp = __shfl_sync(0xffffffffu, tid / WARP, 0);
  const int group = warp < 4 * PW_GROUPS ? warp / 4 : warp - 4 * PW_GROUPS;  // the ring this warp works on
  const uint32_t ring0 = ring_all + group * S * K_STAGE, s0 = s_all + group * S * TILE * 4;
  const uint32_t full0 = full_all + 8 * S * group, empty0 = empty_all + 8 * S * group;
  const bool clean = flags & FLAG_CLEAN_LOGITS;
  const i64 limit = min((i64)max_context_len, (i64)max_blocks * TILE);
  constexpr bool BAL = PAGED_TMA_WG4_BALANCED;
  // The block's runs in b order, as a cursor (b, p): units form, b in [b_first, b_last] (p unused); balanced form,
  // from (b_lo, p_lo) while p < t1, p the tiles of the sequences before b.
  int b_first = 0, b_last = -1, u_begin = 0, u_end = 0, t0 = 0, t1 = 0, p_first = 0;
  if constexpr (BAL) {
    pw_balance<NN>(max(batch, 0), context_lens, flags, limit, tid, lane, warp, t0, t1, b_first, p_first);
  } else {
    const i64 units = (i64)max(batch, 0) * split_n;
    u_begin = (int)(units * blockIdx.x / gridDim.x);
    u_end = (int)(units * (blockIdx.x + 1) / gridDim.x);
    if (u_begin >= u_end) return;  // block-uniform
    b_first = u_begin / split_n;
    b_last = (u_end - 1) / split_n;
  }
  // (the schedule's bounds kept in shared memory and read at each run, not held in registers across the tile loop:
  // held, they cost the balanced form's consumers 224-272 bytes of spills, 5 of them in the tile loop)
  __shared__ int pw_sched[3];
  if (tid == 0) {
    pw_sched[0] = BAL ? t0 : u_begin;
    pw_sched[1] = BAL ? t1 : u_end;
    pw_sched[2] = BAL ? batch : b_last;
  }
  // (values read from shared memory are not known warp-uniform to ptxas; through pw_uniform the run's tile range and
  // everything derived from it stay in uniform registers)
  auto sched = [&](int k) { return pw_uniform(reinterpret_cast<volatile int*>(pw_sched)[k]); };
  b_first = pw_uniform(b_first);
  p_first = pw_uniform(p_first);
  auto run_at = [&](int b, int p) {
    return BAL ? pw_run_balanced<NN>(b, p, sched(0), sched(1), context_lens, flags, limit)
               : pw_run<NN>(b, sched(0), sched(1), split_n, context_lens, flags, limit);
  };
  auto more = [&](int b, int p) { return BAL ? p < sched(1) && b < sched(2) : b <= sched(2); };

  if (tid < PW_GROUPS) pt_init_ring<S>(full_all + 8 * S * tid, empty_all + 8 * S * tid);
  __syncthreads();

  if (warp >= 4 * PW_GROUPS) {
    if constexpr (PAGED_TMA_WG4_REGS > 0)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PW_PRODUCER_REGS) : "memory");
    if (lane == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&kv_map)) : "memory");
    int i = 0;
    for (int b = b_first, p = p_first; more(b, p); ++b) {
      const PwRun r = run_at(b, p);
      i += pw_produce_tiles<D, S>(block_table + (i64)b * max_blocks, r.tile_begin + group, r.tile_end, i, lane,
                                  kv_cache, kv_map, ring0, s0, full0, empty0);
      p += r.tiles;
    }
    if constexpr (PAGED_TMA_WG4_REGS > 0) pt_exit();
    return;
  }
  if constexpr (PAGED_TMA_WG4_REGS > 0)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(PAGED_TMA_WG4_REGS) : "memory");

  const int wwarp = warp & 3;  // the warp within its warpgroup (rows 16 wwarp .. of the wgmma's M)
  const int gid = lane >> 2, tig = lane & 3;
  // DESIGN: Q and the weights of b into buffer `buf` by cp.async from the 512 consumer threads (one commit group)
  auto stage = [&](int b, int buf) {
    const u8* const span = q + (i64)b * NN * H * D;
    for (uint32_t off = 16 * tid; off < Q_BYTES; off += 16 * PW_CONSUMERS)
      cp_async16_zfill(q_all + buf * Q_BYTES + swizzled<D>(off), span + off, 16u);
    for (int c = tid; c < NN * H; c += PW_CONSUMERS)
      cp_async4_zfill(w_all + 4 * (buf * NN * H + c), weights + (i64)b * NN * H + c, 4u);
    cp_async_commit_group();
  };
  // the first b at or after cursor (b, p) whose run has tiles, or -1
  auto next_busy = [&](int b, int p) {
    for (; more(b, p); ++b) {
      const PwRun r = run_at(b, p);
      if (r.tile_end > r.tile_begin) return b;
      p += r.tiles;
    }
    return -1;
  };

  float acc0[NACC], acc1[PIPE ? NACC : 1];
#pragma unroll
  for (int k = 0; k < NACC; ++k) acc0[k] = 0.0f;
#pragma unroll
  for (int k = 0; k < (PIPE ? NACC : 1); ++k) acc1[k] = 0.0f;

  {
    const int b_staged = next_busy(b_first, p_first);
    if (b_staged >= 0) stage(b_staged, 0);
  }
  if (BAL && clean) {  // the balanced form's -inf fill: whole sequences [B c / G, B (c + 1) / G), 16 warps each
    const int f_begin = (int)((i64)batch * blockIdx.x / gridDim.x);
    const int f_end = (int)((i64)batch * (blockIdx.x + 1) / gridDim.x);
    for (int b = f_begin; b < f_end; ++b) {
      int len[MAX_NEXT_N];
      const int len_max = row_lengths<NN>(len, context_lens, b, flags, limit);
      fill_row_tails<NN>(out, (i64)b * NN, out_row_stride, len_max, max_context_len, warp, 4 * PW_GROUPS, lane);
    }
  }
  int parity = 0, i_ring = 0;
  for (int b = b_first, p = p_first; more(b, p); ++b) {
    asm volatile("" ::: "memory");
    const PwRun r = run_at(b, p);
    p += r.tiles;
    const i64 row0 = (i64)b * NN;
    if (clean)  // units form: this block's units of b, their share of b's -inf fill, 16 consumer warps per unit
      for (int s = r.s_lo; s <= r.s_hi; ++s)
        fill_row_tails<NN>(out, row0, out_row_stride, r.len_max, max_context_len, s * 4 * PW_GROUPS + warp,
                           split_n * 4 * PW_GROUPS, lane);
    if (r.tile_end <= r.tile_begin) continue;  // block-uniform
    // (the next run's lengths read before the waits below: their latency hides behind them)
    const int b_next = next_busy(b + 1, p);
    // b's Q in, and every warpgroup past the previous run (the other buffer's last reads)
    cp_async_wait_groups<0>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync %0, %1;" ::"n"(PW_BAR), "n"(PW_CONSUMERS) : "memory");
    if (b_next >= 0) stage(b_next, parity ^ 1);
    const uint32_t q0 = q_all + parity * Q_BYTES;
    const uint32_t w_run = w_all + parity * NN * H * 4;
    const int first = r.tile_begin + group;
    const int n_mine = first < r.tile_end ? (r.tile_end - first + PW_GROUPS - 1) / PW_GROUPS : 0;
    if (n_mine > 0) {  // warpgroup-uniform
      int len_min = r.len[0];
#pragma unroll
      for (int j = 1; j < NN; ++j) len_min = min(len_min, r.len[j]);
      constexpr bool PEEL = PIPE ? (bool)PAGED_TMA_PIPE_PEEL : pt_peel<H>();
      const int t_int = len_min / TILE;  // tiles below it lie inside every row
      const int n_int = PEEL && t_int > first ? min((t_int - first + PW_GROUPS - 1) / PW_GROUPS, n_mine) : 0;
      const int i_begin = i_ring;
      // (i >= 0 told to the compiler: the slot and phase i % S, i / S then need no sign fix-up)
      auto wait_full = [&](int i) {
        __builtin_assume(i >= 0);
        pt_wait_full<S>(full0, i);
      };
      auto scales = [&](int i) {
        __builtin_assume(i >= 0);
        TileOut t;
        t.tile = first + PW_GROUPS * (i - i_begin);
        const uint32_t a = s0 + 4 * ((i % S) * TILE + 16 * wwarp + gid);
        t.sc0 = pw_lds(a);
        t.sc1 = pw_lds(a + 32);
        return t;
      };
      auto release = [&](int i) {
        __builtin_assume(i >= 0);
        pt_release<S>(empty0, i);
      };
      auto issue = [&](float (&acc)[NACC], int i, int chunk) {
        __builtin_assume(i >= 0);
        pt_issue<H, D, NN, S>(acc, ring0, q0, i, chunk);
      };
      // (b's first output row as the base, row0 0: the 64-bit row product is then not redone per tile)
      // (through a shuffle, so ptxas sees it warp-uniform and keeps it in uniform registers: in vector registers
      // at 112 it was rebuilt from the constant bank with 64-bit multiplies every tile)
      float* const out_b = pw_uniform(out + row0 * out_row_stride);
      auto consume = [&](const auto& w) {
        auto reduce = [&](float (&acc)[NACC], int, const TileOut& t, bool interior) {
          fence_regs(acc);
          if (interior)
            head_reduce_store<H, NN, NN, true>(acc, 0, w, out_b, 0, out_row_stride, t, r.len, r.len_max, wwarp, gid,
                                               tig, clean);
          else
            head_reduce_store<H, NN, NN>(acc, 0, w, out_b, 0, out_row_stride, t, r.len, r.len_max, wwarp, gid, tig,
                                         clean);
        };
        pt_consume_tiles<PIPE, 1>(acc0, acc1, i_begin, i_begin + n_mine, i_begin + n_int, wait_full, issue, scales,
                                  release, reduce);
      };
      if constexpr (PAGED_TMA_WG4_WREGS) {
        WeightRegs<H, NN> wr;
#pragma unroll
        for (int rr = 0; rr < NN; ++rr)
#pragma unroll
          for (int j = 0; j < H / 8; ++j) {
            const uint32_t a = w_run + 4 * (rr * H + 8 * j + 2 * tig);
            wr.v[rr][j] = make_float2(pw_lds(a), pw_lds(a + 4));
          }
        consume(wr);
      } else {
        consume(reinterpret_cast<const float*>(pt_raw + (w_run - raw0)));
      }
      i_ring += n_mine;
    }
    parity ^= 1;
  }
  if constexpr (PAGED_TMA_WG4_REGS > 0) pt_exit();
}
