// fp8_paged_mqa_logits for sm_90a (Hopper, H100/H200): the CUDA twin of kernels/fp8_paged_mqa_logits.hip.
//
//   logits[b*next_n + j, t] = sum_h relu(<q[b,j,h,:], K_b[t,:]>) * scale_b[t] * weights[b*next_n + j, h]
//
// for t < len(b, j); -inf (FLAG_CLEAN_LOGITS) or untouched elsewhere in [0, max_context_len). Same argument
// list, flags, row-length rules and block-table contract as the gfx950 kernel (docs/PAGED.md).
//
// Design:
// * Grid (B, split_n), one warpgroup (128 threads) per (b, context split); split s walks the 64-token tiles
//   [T*s/split_n, T*(s+1)/split_n) of T = ceil(max_j len(b, j) / 64). split_n comes from host numbers only,
//   so a call is capturable; all next_n rows of b share the block, so each K byte is read once per split.
//   One kernel per next_n (symbol suffix _n1.._n4), each with its own register allocation.
// * K and scales stream through a STAGES-deep cp.async ring in dynamic shared memory, gathered through the
//   block table: 16-byte copies (cp.async.cg; 4-byte ones at block size 1, whose 132-byte blocks are only
//   4-byte aligned), eight consecutive threads per 128-byte key row (coalesced reads, conflict-free shared
//   writes into rows padded to D + 16 bytes). The table entries a stage needs are loaded one stage
//   earlier (one entry per tile at block size 64), so no table latency is exposed. One barrier per tile:
//   after it tile k has landed and every warp is done with tile k - 1's slot, which is refilled at once.
//   STAGES = 4: three 64-key tiles (27 KB at D = 128) in flight per block, several blocks per SM (a ring of
//   8 or 3 stages measured slower on the H200: docs/PAGED.md).
// * Scores: RS-form wgmma, A = the 64-key tile from registers (each lane ld.shared's the D/4 contiguous bytes
//   of its two keys; the k order is permuted, and Q, staged once per block, is stored in the same permuted
//   core-matrix order), B = Q from a shared-memory descriptor with N = next_n x H columns: every query row
//   of b in one wgmma chain (up to N = 256; H = 128 with next_n > 2 runs chunks of two rows, Q zero-padded
//   to whole chunks). Where N <= PAGED_PIPE_MAX_N (64) tile t+1's wgmma is issued before tile t's head
//   reduce (two accumulator sets). Keeping the ring out of the tensor cores' async proxy (cp.async writes,
//   ld.shared reads) means no proxy fence per tile; Q gets one fence before the loop.
//   Head reduce in fp32 on the CUDA cores (FMNMX + FFMA per accumulator, a 2-shuffle quad reduce): no bf16
//   step, so the per-logit error stays at fp32 rounding. kv-scale applied once per key after the sum.
// * Small batches are latency-bound (lengths -> table -> keys): Q and the table line a split would start at
//   are prefetched to L2 before the lengths are read, and the host splits them down to one tile per block.
// * Output: 64-bit offsets, any row stride >= max_context_len, fused -inf fill of [max_j len, max_context_len)
//   spread over every (split, warp); inside the tile range a column past the row's own length is -inf (or
//   not written). Row lengths clamped to [0, min(max_context_len, max_blocks * BS)].
//
// * Two designs of the score MMA (PREC, the symbol suffix). "f16" (the default): each key's fp8 bytes are
//   converted to f16 in registers (cvt.rn.f16x2.e4m3x2: exact) and Q is staged as f16, so the wgmma's
//   products are exact and its accumulation fp32-accurate -- the 1e-5 * T per-logit gate holds by design.
//   "fp8": the e4m3 wgmma directly, twice the tensor rate, but Hopper accumulates fp8 products with fewer
//   bits (DeepSeek-V3's report: ~14), so it is held to the 2e-3 * T fp8-wgmma gate. The f16 design's tensor
//   work is 2 N D flops per 132-byte token at the f16 rate: at N = 128 that exceeds what the H200's read
//   bandwidth delivers (docs/PAGED.md "tensor-core crossover").
//
// * A third design, "tma" (block size 64), in kernels/sm90/paged_tma.cuh: a producer warp feeding the ring by TMA
//   tensor copies through a CUtensorMap of the cache (one extra kernel parameter), SS-form fp8 wgmma.
//
// Template parameters: H (32, 64, 128), D (64, 128), BS (1, 16, 64), PREC (8, 16), NN (next_n). Symbols:
// fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs{BS}_{fp8|f16}_n{next_n}; build.py takes the list from
// rawindexer/paged_kernels.py (one manifest entry per design, its per-next_n resources beside).

#include <stdint.h>

#include "sm90/async_copy.cuh"  // cp_async_commit_group / cp_async_wait_groups (and the tma design's machinery)
#include "sm90/wgmma.cuh"  // wgmma RS forms, smem_desc, fence_regs, wgmma_wait; common.cuh: u8, i64, WARP, word

// FLAG_CLEAN_LOGITS (1) comes from sm90/common.cuh, the same bit as paged_kernels.FLAG_CLEAN_LOGITS.
constexpr int FLAG_CONTEXT_LENS_2D = 2;

constexpr int THREADS = 128;  // one warpgroup
constexpr int TILE = 64;      // tokens per tile (the wgmma's M)
constexpr int STAGES = 4;
constexpr int MAX_NEXT_N = 4;
constexpr int MAX_WGMMA_N = 256;
constexpr int K_PAD = 16;  // bytes added to each key row of the ring (conflict-free 16-byte reads/writes)

// Score wgmma of tile t+1 issued before tile t's head reduce (two accumulator sets) where the wgmma's N is at
// most PAGED_PIPE_MAX_N. Measured on the H200 (docs/PAGED.md, call 1): at N = 128 the second set costs ~80
// registers, 4 -> 2 blocks per SM, and the fp8 design ran 1.18x slower than without it; at N <= 64 it gains
// up to 1.12x. PAGED_PIPELINE 0 turns it off (measurement builds).
#ifndef PAGED_PIPELINE
#define PAGED_PIPELINE 1
#endif
#ifndef PAGED_PIPE_MAX_N
#define PAGED_PIPE_MAX_N 64
#endif

template <int V>
struct Int {
  static constexpr int value = V;
};

// Two e4m3 values (low 16 bits of w: byte 0 -> low half) to f16x2: exact, every e4m3 value is an f16.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
  uint32_t r;
  asm("{\n.reg .b16 t;\ncvt.u16.u32 t, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;\n}" : "=r"(r) : "r"(w));
  return r;
}

// Matrix descriptor of B (Q), no swizzle (sm90/wgmma.cuh's smem_desc): K-major core matrices of 8 rows x 16
// bytes: chunk kc of column n at (n / 8) * SBO + kc * LBO + (n % 8) * 16, LBO = 128 (adjacent in K),
// SBO = 8 * D * QB (adjacent in N); a k step (32 bytes) starts at kc = 2s (+256 s). Column n = row * H + head:
// query row r's heads follow row r - 1's, so one descriptor covers several rows (N = rows x H).
//
// The A fragment (PTX ISA, wgmma RS with 8-bit types, as m16n8k32): lane (gid, tig) of warp w holds rows
// (keys) 16w + gid and 16w + gid + 8; reg0/reg1 = k 4tig..+3 of those rows, reg2/reg3 = k 16+4tig..+3. Only
// the pairing of A's and B's k slots matters, so lane tig of k-step s takes bytes [8s, 8s + 8) of ITS OWN
// contiguous chunk [tig*D/4, (tig+1)*D/4) of each key (16-byte shared loads, no shuffles), and Q's depth
// index tig*D/4 + 8s + 4hh + j is stored where wgmma expects logical k = 16hh + 4tig + j of step s.

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

// The tile's gather, split over the warpgroup: chunk c = i * THREADS + tid (16 bytes of K) is key c / (D/16),
// chunk c % (D/16); one warp-wide copy moves 32 / (D/16) whole key rows into rows of D + K_PAD bytes. Threads tid < 64 also copy the
// scale of token tid. The block indices come from `blocks` (loaded one stage earlier by table_entries).
template <int D>
struct TileBlocks {
  static constexpr int K_CHUNKS = TILE * D / 16 / THREADS;  // 16-byte K chunks per thread per tile
  int k[K_CHUNKS];
  int scale;
};

template <int D, int BS>
__device__ __forceinline__ void table_entries(TileBlocks<D>& tb, const int* __restrict__ table_row, int tile,
                                              int len_max, int tid) {
  if constexpr (BS % TILE == 0) {
    // The whole tile lies in one block, its clamped tokens too (len_max - 1 >= tile * TILE): one entry.
    const int e = __ldg(table_row + (unsigned)(tile * TILE) / BS);
#pragma unroll
    for (int i = 0; i < TileBlocks<D>::K_CHUNKS; ++i) tb.k[i] = e;
    tb.scale = e;
  } else {
    constexpr int CPR = D / 16;  // chunks per key row
#pragma unroll
    for (int i = 0; i < TileBlocks<D>::K_CHUNKS; ++i) {
      const int tok = min(tile * TILE + (i * THREADS + tid) / CPR, len_max - 1);
      tb.k[i] = __ldg(table_row + (unsigned)tok / BS);
    }
    const int tok = min(tile * TILE + (tid & (TILE - 1)), len_max - 1);
    tb.scale = __ldg(table_row + (unsigned)tok / BS);
  }
}

template <int D, int BS>
__device__ __forceinline__ void issue_tile(uint32_t k_dst, uint32_t s_dst, const TileBlocks<D>& tb,
                                           const u8* __restrict__ kv_cache, int tile, int len_max, int tid) {
  constexpr int CPR = D / 16;
  constexpr i64 BLOCK_BYTES = (i64)BS * (D + 4);
#pragma unroll
  for (int i = 0; i < TileBlocks<D>::K_CHUNKS; ++i) {
    const int c = i * THREADS + tid, row = c / CPR, kc = c % CPR;
    const int tok = min(tile * TILE + row, len_max - 1);
    const u8* src = kv_cache + (i64)tb.k[i] * BLOCK_BYTES + ((unsigned)tok % BS) * D + kc * 16;
    const uint32_t dst = k_dst + row * (D + K_PAD) + kc * 16;
    if constexpr (BLOCK_BYTES % 16 == 0) {
      cp_async16(dst, src);
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) cp_async4(dst + 4 * w, src + 4 * w);
    }
  }
  if (tid < TILE) {
    const int tok = min(tile * TILE + tid, len_max - 1);
    cp_async4(s_dst + 4 * tid, kv_cache + (i64)tb.scale * BLOCK_BYTES + (i64)BS * D + ((unsigned)tok % BS) * 4);
  }
}

// What the head reduce of one tile needs besides its accumulators.
struct TileOut {
  int tile;
  float sc0, sc1;  // kv scales of this lane's two keys
};

// DESIGN: fp32 head reduce of NR query rows from one accumulator set. Accumulator d[4j + 0/1] = (token gid,
// column 8j + 2tig + 0/1), d[4j + 2/3] = (token gid + 8, same columns); column = (row - r0) * H + head. A
// 2-shuffle quad reduce leaves token gid's sum in lane tig 0 and token gid + 8's in tig 1, which store it.
// PAGED_RELU_FIRST (experiment, 0 = off): the ReLU of every accumulator applied in place before the FMA chains, so
// no FFMA waits on the FMNMX just before it (as prefill's TMA_RELU_FIRST); the accumulators are dead afterwards.
#ifndef PAGED_RELU_FIRST
#define PAGED_RELU_FIRST 0
#endif
// DESIGN: the pair reduce (PAGED_PAIR_REDUCE, session 16). Where next_n and the rows per chunk are even, rows are
// reduced two at a time. The quad's four lanes hold the partial sums of (row a, row b) x (token gid, gid + 8); one
// shuffle round over tig bit 0 per row (as the single-row reduce) then ONE round over tig bit 1 that trades rows, so
// lane tig ends with row a + (tig >> 1)'s sum for token gid + 8 (tig & 1): 3 shuffles and one store per lane for two
// rows, where the single-row reduce takes 4 shuffles and two stores by half the lanes. (common.cuh's quad_sums does
// the same exchange with the rounds the other way round, all four partial sums live at once: +2 registers at N = 128.)
// 3 (shipped): in the reduces of at most PAGED_PIPE_MAX_N columns (the two-accumulator loop; at the sm_90a default
// that is H 32 next_n 2). Measured on the H200 with PAGED_TMA_PIPE_PEEL (docs/PAGED.md, session 16): 64 x 32768 H 32
// next_n 2 2.6% faster (1.08 -> 1.05x DeepGEMM in the A/B), 3% on ragged lengths, the rest within 0.5%.
// 2: also the edge tiles of wider reduces (measured: H 32 next_n 4 1.7% slower, N = 128 at H 64 unchanged);
// 1: every reduce (at H 64 next_n 2 ptxas goes 96 -> 98 registers: three blocks per SM); 0: off.
#ifndef PAGED_PAIR_REDUCE
#define PAGED_PAIR_REDUCE 3
#endif
template <int H, int NR, int NN, bool INTERIOR>
__host__ __device__ constexpr bool pair_reduce() {
  return PAGED_PAIR_REDUCE != 0 && NR % 2 == 0 && NN % 2 == 0 &&
         (PAGED_PAIR_REDUCE == 1 || NR * H <= PAGED_PIPE_MAX_N || (PAGED_PAIR_REDUCE == 2 && !INTERIOR));
}
// The weights of query row r at this lane's heads 8 j + 2 tig, + 1: from shared memory ([rows][H] float32), or from
// registers (WeightRegs: the experiment form kernels/sm90/paged_tma_wg4.cuh, PAGED_TMA_WG4_WREGS).
template <int H>
__device__ __forceinline__ float2 weight_pair(const float* w_s, int r, int j, int tig) {
  return *reinterpret_cast<const float2*>(w_s + r * H + 8 * j + 2 * tig);
}
template <int H, int NR>
struct WeightRegs {
  float2 v[NR][H / 8];
};
template <int H, int NR>
__device__ __forceinline__ float2 weight_pair(const WeightRegs<H, NR>& w, int r, int j, int) {
  return w.v[r][j];
}
// INTERIOR: the caller knows every key of the tile is inside every row's valid range (PAGED_TMA_PEEL), so the stores
// need no length tests.
template <int H, int NR, int NN, bool INTERIOR = false, typename Weights = const float*>
__device__ __forceinline__ void head_reduce_store(float (&acc)[NR * H / 2], int r0, const Weights& w_s,
                                                  float* __restrict__ out, i64 row0, i64 out_row_stride,
                                                  const TileOut& t, const int (&len)[MAX_NEXT_N], int len_max,
                                                  int warp, int gid, int tig, bool clean) {
  const int tok = t.tile * TILE + 16 * warp + gid + 8 * (tig & 1);
  const bool odd = tig & 1;
  if constexpr (PAGED_RELU_FIRST) relu_in_place(acc);
  auto relu = [&](int i) { return PAGED_RELU_FIRST ? acc[i] : fmaxf(acc[i], 0.0f); };
  // Accumulator row i (query row r0 + i) folded into this lane's partial sums over its heads, then the round over
  // tig bit 0: this lane's token's half of the row's sum.
  auto token_half = [&](int i) {
    const int r = r0 + i;
    float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
    for (int j = 0; j < H / 8; ++j) {
      const float2 w = weight_pair<H>(w_s, r, j, tig);
      const int a = i * (H / 2) + 4 * j;
      p0 = fmaf(relu(a + 0), w.x, p0);
      p0 = fmaf(relu(a + 1), w.y, p0);
      p1 = fmaf(relu(a + 2), w.x, p1);
      p1 = fmaf(relu(a + 3), w.y, p1);
    }
    return (odd ? p1 : p0) + __shfl_xor_sync(0xffffffffu, odd ? p0 : p1, 1);
  };
  // (The pair and single-row paths keep their own stores: one store lambda for both moved ptxas's schedule in 10 of
  // the 168 kernels, unmeasured, where this form is SASS-identical to the measured one.)
  if constexpr (pair_reduce<H, NR, NN, INTERIOR>()) {
    const bool hi = tig & 2;
#pragma unroll
    for (int i = 0; i < NR; i += 2) {
      const int r = r0 + i;  // rows r, r + 1: both valid or both padding (r even, NN even)
      if (r >= NN) break;
      float vk[2];
#pragma unroll
      for (int k = 0; k < 2; ++k) vk[k] = token_half(i + k);
      // tig bit 1: the row; lane tig keeps row r + (tig >> 1)
      const float v = (hi ? vk[1] : vk[0]) + __shfl_xor_sync(0xffffffffu, hi ? vk[0] : vk[1], 2);
      const int row = r + (hi ? 1 : 0);
      if constexpr (INTERIOR) {
        out[(row0 + row) * out_row_stride + tok] = v * (odd ? t.sc1 : t.sc0);
      } else {
        int row_len = len[0];
#pragma unroll
        for (int rr = 1; rr < MAX_NEXT_N; ++rr)
          if (row == rr) row_len = len[rr];
        if (tok < len_max) {  // columns >= len_max belong to the -inf fill
          float* dst = out + (row0 + row) * out_row_stride + tok;
          if (tok < row_len)
            *dst = v * (odd ? t.sc1 : t.sc0);
          else if (clean)
            *dst = -__int_as_float(0x7f800000);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const int r = r0 + i;
    if (r >= NN) break;  // zero-padded Q rows of the last chunk
    float v = token_half(i);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if constexpr (INTERIOR) {
      if (tig < 2) out[(row0 + r) * out_row_stride + tok] = v * (odd ? t.sc1 : t.sc0);
    } else {
      int row_len = len[0];
#pragma unroll
      for (int rr = 1; rr < MAX_NEXT_N; ++rr)
        if (r == rr) row_len = len[rr];
      if (tig < 2 && tok < len_max) {
        float* dst = out + (row0 + r) * out_row_stride + tok;
        if (tok < row_len)
          *dst = v * (odd ? t.sc1 : t.sc0);
        else if (clean)
          *dst = -__int_as_float(0x7f800000);
      }
    }
  }
}

// Row j < NN of sequence b holds len[j] valid keys: context_lens[b] - NN + j + 1 (1-D) or context_lens[b, j] (2-D),
// clamped to [0, limit]; rows j >= NN get 0. Returns the longest, which sets the sequence's tile range.
template <int NN>
__device__ __forceinline__ int row_lengths(int (&len)[MAX_NEXT_N], const int* __restrict__ context_lens, int b,
                                           int flags, i64 limit) {
  int len_max = 0;
#pragma unroll
  for (int j = 0; j < MAX_NEXT_N; ++j) {
    i64 l = 0;
    if (j < NN)
      l = (flags & FLAG_CONTEXT_LENS_2D) ? (i64)context_lens[(i64)b * NN + j] : (i64)context_lens[b] - NN + j + 1;
    len[j] = (int)max(min(l, limit), (i64)0);
    len_max = max(len_max, len[j]);
  }
  return len_max;
}

// DESIGN: fused -inf fill of [len_max, max_context_len) in the NN rows of sequence b from row0, spread over every
// (split, warp) of b: `worker` of `workers` (split * num_warps + warp of split_n * num_warps). Every design's body
// calls it (here, and kernels/sm90/paged_tma.cuh's one-unit and persistent forms).
template <int NN>
__device__ __forceinline__ void fill_row_tails(float* __restrict__ out, i64 row0, i64 out_row_stride, int len_max,
                                               int max_context_len, int worker, int workers, int lane) {
  const int fill = max_context_len - len_max;
#pragma unroll
  for (int j = 0; j < NN; ++j) {
    float* dst_row = out + (row0 + j) * out_row_stride + len_max;
    for (int c = worker * WARP + lane; c < fill; c += workers * WARP) dst_row[c] = -__int_as_float(0x7f800000);
  }
}

template <int H, int D, int BS, int PREC, int NN>
__device__ __forceinline__ void paged_body(const u8* __restrict__ q, const u8* __restrict__ kv_cache,
                                           const float* __restrict__ weights, const int* __restrict__ context_lens,
                                           const int* __restrict__ block_table, float* __restrict__ out,
                                           i64 out_row_stride, int max_context_len, int max_blocks, int split_n,
                                           int num_warps, int flags) {
  static_assert(H == 32 || H == 64 || H == 128, "H: 32, 64 or 128");
  static_assert(D == 64 || D == 128, "D: 64 or 128");
  static_assert(PREC == 8 || PREC == 16, "PREC: 8 (fp8 wgmma) or 16 (f16 wgmma on the exactly converted values)");
  // DESIGN: all next_n rows in one wgmma (N = next_n x H) up to N = 256; beyond (H = 128, next_n > 2) chunks of
  // RPC rows, the last padded with zero rows of Q.
  constexpr int RPC = NN * H <= MAX_WGMMA_N ? NN : MAX_WGMMA_N / H;  // query rows per wgmma
  constexpr int CHUNKS = (NN + RPC - 1) / RPC;
  constexpr int QROWS = CHUNKS * RPC;  // rows of Q staged (= paged_kernels.sm90_q_rows)
  constexpr int NC = RPC * H;          // the wgmma's N
  constexpr int NACC = NC / 2;
  constexpr bool PIPE = PAGED_PIPELINE && CHUNKS == 1 && NC <= PAGED_PIPE_MAX_N;
  constexpr int QB = PREC / 8;       // bytes per Q element in shared memory
  constexpr int KS = D / (32 / QB);  // k-steps: k32 (fp8) or k16 (f16)
  constexpr uint32_t LBO = 128, SBO = 8 * D * QB;
  constexpr int NCH = D / 64;                  // 16-byte chunks of a lane's D/4 bytes of one key
  constexpr int K_STAGE = TILE * (D + K_PAD);  // bytes of K per stage
  constexpr int S_STAGE = TILE * 4;            // bytes of scales per stage

  extern __shared__ __align__(128) u8 smem[];
  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1), warp = tid / WARP;
  const int gid = lane >> 2, tig = lane & 3;
  const int b = blockIdx.x, split = blockIdx.y;
  const bool clean = flags & FLAG_CLEAN_LOGITS;

  const i64 limit = min((i64)max_context_len, (i64)max_blocks * BS);
  {
    // Small batches are latency-bound (lengths -> table -> keys: three dependent reads). Send Q and the table
    // line this split would start at if every row had the full length toward L2 first: neither waits on the
    // lengths.
    const u8* q_b = q + (i64)b * NN * H * D;
    for (int c = tid; c < NN * H * D / 128; c += THREADS) asm volatile("prefetch.global.L2 [%0];" ::"l"(q_b + 128 * c));
    if (tid == 0) {
      const int guess = (int)((((limit + TILE - 1) / TILE) * split / split_n) * TILE / BS);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(block_table + (i64)b * max_blocks + guess));
    }
  }
  int len[MAX_NEXT_N];
  const int len_max = row_lengths<NN>(len, context_lens, b, flags, limit);
  const int tiles = (len_max + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);
  const i64 row0 = (i64)b * NN;

  if (tile_begin < tile_end) {  // block-uniform
    u8* k_s = smem;                                  // STAGES x K_STAGE, key rows padded to D + K_PAD
    float* s_s = (float*)(smem + STAGES * K_STAGE);  // STAGES x TILE scales
    u8* q_s = smem + STAGES * (K_STAGE + S_STAGE);   // QROWS x H x D, permuted core-matrix layout
    float* w_s = (float*)(q_s + QROWS * H * D * QB);  // QROWS x H
    const uint32_t k_base = (uint32_t)__cvta_generic_to_shared(k_s);
    const uint32_t s_base = (uint32_t)__cvta_generic_to_shared(s_s);
    const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_s);
    const int* table_row = block_table + (i64)b * max_blocks;

    // Start the ring before staging Q, so the first tiles' gathers overlap it.
    TileBlocks<D> tb;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      const int tile = tile_begin + s;
      if (tile < tile_end) {
        table_entries<D, BS>(tb, table_row, tile, len_max, tid);
        issue_tile<D, BS>(k_base + s * K_STAGE, s_base + s * S_STAGE, tb, kv_cache, tile, len_max, tid);
      }
      cp_async_commit_group();
    }
    TileBlocks<D> tb_next;
    if (tile_begin + STAGES - 1 < tile_end)
      table_entries<D, BS>(tb_next, table_row, tile_begin + STAGES - 1, len_max, tid);

    for (int c = tid; c < QROWS * H * (D / 16); c += THREADS) {
      const int n = c / (D / 16), d0 = 16 * (c % (D / 16));  // n = row * H + head
      const uint4 v = n < NN * H ? __ldg(reinterpret_cast<const uint4*>(q + (row0 * H + n) * D + d0))
                                 : make_uint4(0, 0, 0, 0);
      const int owner = d0 / (D / 4);  // the tig whose A chunk holds these depths
      u8* dst = q_s + (n / 8) * SBO + (n % 8) * 16 + 4 * owner;
      if constexpr (PREC == 8) {
        const int s0 = (d0 % (D / 4)) / 8;  // even: this 16-byte piece is k32-steps s0 and s0 + 1
#pragma unroll
        for (int w = 0; w < 4; ++w) *reinterpret_cast<uint32_t*>(dst + (2 * (s0 + w / 2) + (w % 2)) * LBO) = word(v, w);
      } else {
        // f16: word w holds depths of k16-step s = (d0 % (D/4)) / 4 + w; its bytes 0-1 are logical k
        // 2tig, 2tig+1 (core matrix 2s), bytes 2-3 are k 8+2tig, 9+2tig (core matrix 2s+1).
        const int s0 = (d0 % (D / 4)) / 4;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const uint32_t x = word(v, w);
          *reinterpret_cast<uint32_t*>(dst + (2 * (s0 + w)) * LBO) = e4m3x2_to_f16x2(x);
          *reinterpret_cast<uint32_t*>(dst + (2 * (s0 + w) + 1) * LBO) = e4m3x2_to_f16x2(x >> 16);
        }
      }
    }
    for (int c = tid; c < QROWS * H; c += THREADS) w_s[c] = c < NN * H ? weights[row0 * H + c] : 0.0f;
    // Q's generic-proxy stores are read by wgmma through the async proxy (the loop's barrier follows).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

    // One barrier per tile: after it, tile k has landed (every thread's copies) and every warp is done with
    // the slot of tile k - 1 (its keys are in registers), which is refilled with tile k + STAGES - 1.
    auto next_tile = [&](int tile, int k, uint32_t (&a)[KS][4], TileOut& t) {
      cp_async_wait_groups<STAGES - 2>();
      __syncthreads();
      const int ahead = tile + STAGES - 1;
      if (ahead < tile_end) {
        const int slot = (k + STAGES - 1) % STAGES;
        issue_tile<D, BS>(k_base + slot * K_STAGE, s_base + slot * S_STAGE, tb_next, kv_cache, ahead, len_max, tid);
        if (ahead + 1 < tile_end) table_entries<D, BS>(tb_next, table_row, ahead + 1, len_max, tid);
      }
      cp_async_commit_group();

      const int slot = k % STAGES;
      t.tile = tile;
      t.sc0 = s_s[slot * TILE + 16 * warp + gid];
      t.sc1 = s_s[slot * TILE + 16 * warp + gid + 8];
      uint4 kf[2][NCH];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int c = 0; c < NCH; ++c)
          kf[hh][c] = *reinterpret_cast<const uint4*>(k_s + slot * K_STAGE + (16 * warp + 8 * hh + gid) * (D + K_PAD) +
                                                      tig * (D / 4) + 16 * c);
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        if constexpr (PREC == 8) {
          const int c = s / 2, s2 = s % 2;
          a[s][0] = word(kf[0][c], 2 * s2);
          a[s][1] = word(kf[1][c], 2 * s2);
          a[s][2] = word(kf[0][c], 2 * s2 + 1);
          a[s][3] = word(kf[1][c], 2 * s2 + 1);
        } else {
          // f16 (exact conversion): m16n8k16 A layout: a0 = (row gid, k 2tig..), a1 = (row gid+8, ..),
          // a2 = (gid, k 8+2tig..), a3 = (gid+8, ..)
          const uint32_t x0 = word(kf[0][s / 4], s % 4), x1 = word(kf[1][s / 4], s % 4);
          a[s][0] = e4m3x2_to_f16x2(x0);
          a[s][1] = e4m3x2_to_f16x2(x1);
          a[s][2] = e4m3x2_to_f16x2(x0 >> 16);
          a[s][3] = e4m3x2_to_f16x2(x1 >> 16);
        }
      }
    };
    auto issue_mma = [&](float (&acc)[NACC], const uint32_t (&a)[KS][4], int chunk) {
      fence_regs(acc);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        const uint64_t desc = smem_desc(q_base + chunk * RPC * H * D * QB + 256 * s, LBO, SBO);
        if constexpr (PREC == 8)
          wgmma_rs_k32<NC>(acc, a[s], desc, s > 0);
        else
          wgmma_rs_f16_k16<NC>(acc, a[s], desc, s > 0);
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    };
    auto reduce = [&](float (&acc)[NACC], int chunk, const TileOut& t) {
      fence_regs(acc);
      head_reduce_store<H, RPC, NN>(acc, chunk * RPC, w_s, out, row0, out_row_stride, t, len, len_max, warp, gid,
                                    tig, clean);
    };

    if constexpr (PIPE) {
      // DESIGN: tile k's wgmma runs while tile k - 1's head reduce does; two accumulator sets, picked at
      // compile time (the loop is unrolled by two).
      float acc0[NACC], acc1[NACC];
#pragma unroll
      for (int i = 0; i < NACC; ++i) acc0[i] = acc1[i] = 0.0f;
      // Every wait is unconditional, so ptxas sees which set is in flight at each read (no C7514 serialization).
      uint32_t a[KS][4];
      TileOut prev, cur;
      int tile = tile_begin, k = 0;
      next_tile(tile++, k++, a, prev);
      issue_mma(acc0, a, 0);
      while (true) {
        if (tile >= tile_end) {
          wgmma_wait<0>();
          reduce(acc0, 0, prev);
          break;
        }
        next_tile(tile++, k++, a, cur);
        issue_mma(acc1, a, 0);
        wgmma_wait<1>();
        reduce(acc0, 0, prev);
        prev = cur;
        if (tile >= tile_end) {
          wgmma_wait<0>();
          reduce(acc1, 0, prev);
          break;
        }
        next_tile(tile++, k++, a, cur);
        issue_mma(acc0, a, 0);
        wgmma_wait<1>();
        reduce(acc1, 0, prev);
        prev = cur;
      }
    } else {
      float acc[NACC];
#pragma unroll
      for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
      for (int tile = tile_begin, k = 0; tile < tile_end; ++tile, ++k) {
        uint32_t a[KS][4];
        TileOut cur;
        next_tile(tile, k, a, cur);
#pragma unroll
        for (int chunk = 0; chunk < CHUNKS; ++chunk) {
          issue_mma(acc, a, chunk);
          wgmma_wait<0>();
          reduce(acc, chunk, cur);
        }
      }
    }
    cp_async_wait_groups<0>();
  }

  if (clean) fill_row_tails<NN>(out, row0, out_row_stride, len_max, max_context_len, split * num_warps + warp,
                                split_n * num_warps, lane);
}

// One kernel per next_n (symbol suffix _n1.._n4): the wgmma's N is next_n x H, and each gets its own register
// allocation (one kernel switching on next_n would run every next_n at the largest one's occupancy). The
// next_n argument is kept (the argument list is the gfx950 kernel's) and not read.
// Symbols: fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs{BS}_{fp8|f16}_n{next_n} (fp8|f16: the score MMA's input precision).
#define PAGED_KERNEL_NN(H, D, BS, PREC, SUFFIX, NN)                                                          \
  extern "C" __global__ void __launch_bounds__(THREADS)                                                      \
      fp8_paged_mqa_logits_sm90_h##H##_d##D##_bs##BS##_##SUFFIX##_n##NN(                                     \
          const u8* q, const u8* kv_cache, const float* weights, const int* context_lens,                    \
          const int* block_table, float* out, i64 out_row_stride, int next_n, int max_context_len,           \
          int max_blocks, int split_n, int num_warps, int flags) {                                           \
    paged_body<H, D, BS, PREC, NN>(q, kv_cache, weights, context_lens, block_table, out, out_row_stride,     \
                                   max_context_len, max_blocks, split_n, num_warps, flags);                  \
  }
#define PAGED_KERNEL(H, D, BS, PREC, SUFFIX)                                                                 \
  PAGED_KERNEL_NN(H, D, BS, PREC, SUFFIX, 1) PAGED_KERNEL_NN(H, D, BS, PREC, SUFFIX, 2)                      \
  PAGED_KERNEL_NN(H, D, BS, PREC, SUFFIX, 3) PAGED_KERNEL_NN(H, D, BS, PREC, SUFFIX, 4)
#define INSTANTIATE_PAGED(H, D, BS) PAGED_KERNEL(H, D, BS, 8, fp8) PAGED_KERNEL(H, D, BS, 16, f16)

#ifndef PAGED_INSTANCES
#define PAGED_INSTANCES(X) X(64, 128, 64)
#endif
PAGED_INSTANCES(INSTANTIATE_PAGED)

// Design "tma" (block size 64 only): kernels/sm90/paged_tma.cuh. X(H, D) per instance.
#include "sm90/paged_tma.cuh"
#ifndef PAGED_TMA_INSTANCES
#define PAGED_TMA_INSTANCES(X) X(64, 128)
#endif
PAGED_TMA_INSTANCES(INSTANTIATE_PAGED_TMA)
// Design "tma4" (block size 64 only, opt-in): kernels/sm90/paged_tma_wg4.cuh. X(H, D) per instance.
#ifndef PAGED_TMA4_INSTANCES
#define PAGED_TMA4_INSTANCES(X) X(64, 128)
#endif
PAGED_TMA4_INSTANCES(INSTANTIATE_PAGED_TMA4)
