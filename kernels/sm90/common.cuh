// sm_90a kernels of fp8_mqa_logits: what every design shares -- types, flags, constants, 16-byte loads, the
// quad reduce-scatter, row-block dispatch, per-row windows clamped to [0, N), the block's union window and
// tile range, weight staging, the masked logit store and the fused -inf fill. The design bodies
// (prefill_mma.cuh, prefill_wg.cuh, prefill_ws.cuh) use these, so the window, tile-range, store and fill rules
// are written once for the target.
#pragma once

#include <stdint.h>

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,  // write -inf outside each row's window (the fused -inf fill)
  FLAG_REVERSE_ROWS = 2,  // dispatch high-m row blocks first
  FLAG_VEC4_FILL = 4,     // out and out_row_stride keep every row 16-byte aligned: float4 -inf fill (sm_90a)
  FLAG_ZIGZAG_ROWS = 8,   // the first half of the row grid walks the row blocks down from the top, the second half up
};

constexpr int WARP = 32;
constexpr int FRAG_TOKENS = 16;   // the MMA's M: tokens per A fragment
constexpr int FRAG_HEADS = 8;     // the MMA's N: heads per B fragment
constexpr int MAX_THREADS = 256;  // __launch_bounds__: num_warps <= 8 keeps the full 255-register budget

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  // i is a compile-time constant after unrolling; a switch keeps the uint4 in registers.
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The diagnostic trace builds' clocks (TMAQ_TRACE, PAGED_TMA_TRACE): %globaltimer (ns, one clock for the whole GPU)
// lines blocks of different SMs up; %smid names the SM whose clock64 a block's stamps count.
__device__ __forceinline__ long long globaltimer_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int sm_id() {
  int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
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

// The quad's partial sums of V values -> the full sums this lane stores. V >= 4: reduce_scatter (lane tig keeps
// values [tig V/4, (tig+1) V/4)). V == 2 (one row; tokens gid and gid + 8): the two tokens scattered over lane
// pairs (lanes tig / 2 = hh hold token hh), then the sum finished within each pair.
template <int V>
__device__ __forceinline__ void quad_sums(const float (&part)[V], float (&res)[V >= 4 ? V / 4 : 1], int tig) {
  if constexpr (V >= 4) {
    reduce_scatter<V / 2>(part, res, tig);
  } else {
    const bool up2 = tig & 2;
    float x = up2 ? part[1] : part[0];
    x += __shfl_xor_sync(0xffffffffu, up2 ? part[0] : part[1], 2);
    res[0] = x + __shfl_xor_sync(0xffffffffu, x, 1);
  }
}

// DESIGN: grid is (ceil(M / BM), SplitN); high-m row blocks first when asked, since under causal
// masking a block's work grows with m and the longest blocks should not be the tail.
// FLAG_ZIGZAG_ROWS (v10-small), for row grids the card holds in one pass: blocks x < ceil(R / 2) take row blocks
// R-1, R-2, ... and the rest 0, 1, ...; the scheduler hands blocks x, x + SMs, x + 2 SMs, ... to the same SM, so each
// SM gets long and short causal rows in equal measure (1024 x 1024 causal: per-SM tiles ~17 everywhere instead of
// 9-26 in either straight order).
struct RowBlock {
  int m0, nrows, split;
  bool clean;
};

template <int BM>
__device__ __forceinline__ RowBlock row_block_of(int M, int flags) {
  const int row_blocks = (M + BM - 1) / BM;
  const int x = (int)blockIdx.x, half = (row_blocks + 1) / 2;
  const int row_block = (flags & FLAG_REVERSE_ROWS) ? row_blocks - 1 - x
                        : (flags & FLAG_ZIGZAG_ROWS) ? (x < half ? row_blocks - 1 - x : x - half)
                                                     : x;
  const int m0 = row_block * BM;
  return {m0, min(BM, M - m0), (int)blockIdx.y, (flags & FLAG_CLEAN_LOGITS) != 0};
}

// Row m's window [ks[m], ke[m]) clamped to [0, N); empty (y == x) when ke <= ks.
__device__ __forceinline__ int2 clipped_window(const int* __restrict__ ks, const int* __restrict__ ke, int m, int N) {
  const int s = max(min(ks[m], N), 0);
  return make_int2(s, max(min(ke[m], N), s));
}

// The windows of row block rb's rows, clamped to [0, N) (empty when ke <= ks), staged once in win_s for every warp
// (threads tid < BM write it; the caller's barrier publishes it).
template <int BM>
__device__ __forceinline__ void stage_row_windows(int2* win_s, const int* __restrict__ ks, const int* __restrict__ ke,
                                                  const RowBlock& rb, int N, int tid) {
  if (tid < BM) win_s[tid] = tid < rb.nrows ? clipped_window(ks, ke, rb.m0 + tid, N) : make_int2(0, 0);
}

// The union [lo, hi) of rows [m0, m0 + nrows)'s clamped non-empty windows (nrows <= R), read from global memory:
// what union_window gives on the same rows staged; [0, 0) when every window is empty. ("tmasb4"'s schedule prologue
// spells the same loop inline: routed through this helper its measured SASS changes, so it stays as measured.)
template <int R>
__device__ __forceinline__ int2 rows_union_window(const int* __restrict__ ks, const int* __restrict__ ke, int m0,
                                                  int nrows, int N) {
  int lo = N, hi = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < nrows) {
      const int2 w = clipped_window(ks, ke, m0 + r, N);
      if (w.y > w.x) {
        lo = min(lo, w.x);
        hi = max(hi, w.y);
      }
    }
  }
  if (hi <= lo) lo = hi = 0;
  return make_int2(lo, hi);
}

// This block's row block, its windows staged (stage_row_windows).
template <int BM>
__device__ __forceinline__ RowBlock start_row_block(int2* win_s, const int* __restrict__ ks, const int* __restrict__ ke,
                                                    int M, int N, int flags, int tid) {
  const RowBlock rb = row_block_of<BM>(M, flags);
  stage_row_windows<BM>(win_s, ks, ke, rb, N, tid);
  return rb;
}

// A row's window w = [w.x, w.y) meets the tile [base, base + tile): rows a tile misses (a packed request's
// neighbours) skip the tensor work.
__device__ __forceinline__ bool window_meets(int2 w, int base, int tile) {
  return w.x < w.y && base < w.y && base + tile > w.x;
}

// Whether any of R consecutive row windows meets the tile (uniform over the warps that read the same rows).
template <int R>
__device__ __forceinline__ bool any_window_meets(const int2* win_s, int base, int tile) {
  bool h = false;
#pragma unroll
  for (int r = 0; r < R; ++r) h |= window_meets(win_s[r], base, tile);
  return h;
}

// The block walks the union [lo, hi) of its rows' non-empty windows; [0, 0) when every window is empty.
template <int BM>
__device__ __forceinline__ int2 union_window(const int2* win_s, int N) {
  int lo = N, hi = 0;
#pragma unroll
  for (int r = 0; r < BM; ++r) {
    const int2 w = win_s[r];
    if (w.y > w.x) {
      lo = min(lo, w.x);
      hi = max(hi, w.y);
    }
  }
  if (hi <= lo) lo = hi = 0;
  return make_int2(lo, hi);
}

// DESIGN: SplitN splits each block's tile range: [begin, end) of the ceil(span / tile) tiles of the union for
// split `split` of `split_n`, so a small row grid still fills the device.
struct TileRange {
  int begin, end;
};
__device__ __forceinline__ TileRange split_tile_range(int span, int tile, int split, int split_n) {
  const int tiles = (span + tile - 1) / tile;
  return {(int)((i64)tiles * split / split_n), (int)((i64)tiles * (split + 1) / split_n)};
}

// The tiles [lo + t TILE, lo + (t + 1) TILE) that lie inside [in_lo, in_hi) (the intersection of a block's or
// consumer's row windows): t in [begin, end), empty when end <= begin; the callers' peeled interior loops.
__device__ __forceinline__ TileRange interior_tile_range(int lo, int in_lo, int in_hi, int tile) {
  const int d = in_lo - lo, e = in_hi - lo;
  return {d <= 0 ? 0 : (d + tile - 1) / tile, e <= 0 ? 0 : e / tile};
}

// interior_tile_range of the intersection of R row windows (empty unless all R rows exist: nrows == R, the
// intersection starting from [0, N)): the tiles of [lo, ...) every one of those rows' windows covers.
template <int R>
__device__ __forceinline__ TileRange rows_interior_tile_range(const int2* win, int nrows, int lo, int N, int tile) {
  int in_lo = 0, in_hi = nrows == R ? N : 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    in_lo = max(in_lo, win[r].x);
    in_hi = min(in_hi, win[r].y);
  }
  return interior_tile_range(lo, in_lo, in_hi, tile);
}

// The columns a block walks and this split's share of them, for bodies whose warps all read them: the union
// [lo, hi) of the rows' windows, passed through a shuffle (the same value in every lane already; the shuffle
// makes that visible to ptxas's uniformity analysis), and [tile_begin, tile_end) of its TILE-token tiles.
struct BlockSpan {
  int lo, hi, tile_begin, tile_end;
};
template <int BM, int TILE>
__device__ __forceinline__ BlockSpan uniform_block_span(const int2* win_s, int N, int split, int split_n) {
  const int2 span = union_window<BM>(win_s, N);
  const int lo = __shfl_sync(0xffffffffu, span.x, 0);
  const int hi = __shfl_sync(0xffffffffu, span.y, 0);
  const TileRange tr = split_tile_range(hi - lo, TILE, split, split_n);
  return {lo, hi, tr.begin, tr.end};
}

// The weights of rows [m0, m0 + nrows) in shared memory, zero for the block's rows past M; `count` floats
// (rows x H), written by threads first, first + stride, ...
template <int H>
__device__ __forceinline__ void stage_weights(float* w_s, const float* __restrict__ weights, int m0, int nrows,
                                              int count, int first, int stride) {
  for (int idx = first; idx < count; idx += stride) {
    const int r = idx / H;
    w_s[idx] = r < nrows ? weights[(i64)(m0 + r) * H + (idx % H)] : 0.0f;
  }
}

// One logit of a row whose window is w, at column tok of a tile: the value inside the window, -inf outside it
// under clean logits. Columns >= hi belong to fill_outside_union, so nothing is written twice (nor past N).
__device__ __forceinline__ void store_logit(float* __restrict__ dst_row, int tok, int hi, const int2& w, bool hit,
                                            bool clean, float v) {
  if (tok < hi) {
    if (hit && tok >= w.x && tok < w.y)
      dst_row[tok] = v;
    else if (clean)
      dst_row[tok] = -__int_as_float(0x7f800000);
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

// DESIGN: fused -inf fill: [0, lo) and [hi, N) of every row of the block, spread over all `workers` warps of
// the row block's splits, so no separate O(M*N) pre-fill pass is needed.
__device__ __forceinline__ void fill_outside_union(float* __restrict__ out, i64 out_row_stride, int m0, int nrows,
                                                   int lo, int hi, int N, bool vec4, int worker, int workers,
                                                   int lane) {
  for (int r = 0; r < nrows; ++r) {
    float* dst_row = out + (i64)(m0 + r) * out_row_stride;
    fill_neg_inf(dst_row, 0, lo, vec4, worker, workers, lane);
    fill_neg_inf(dst_row, hi, N, vec4, worker, workers, lane);
  }
}
