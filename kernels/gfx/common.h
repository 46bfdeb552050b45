// Shared by the gfx prefill designs (kernels/fp8_mqa_logits.hip, gfx950 and gfx942): vector types, the
// address-space and inlining macros, the per-target operations of kernels/target.h, the kernel flags, the
// MFMA tile constants, the per-row window record, and the parts every design shares: the row-block dispatch,
// the row windows with their union (and intersection), the split of a block's tile range and the fused -inf
// fill. Written against clang builtins only (no HIP headers).
#pragma once


typedef int v8i __attribute__((ext_vector_type(8)));
typedef unsigned int v4u __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef unsigned int v2u __attribute__((ext_vector_type(2)));

#define GLOBAL __attribute__((address_space(1)))
#define DEVICE static __attribute__((device)) __attribute__((always_inline)) inline
#define TARGET_DEVICE DEVICE
#include "../target.h"  // what differs between gfx950 and gfx942 (MFMA shapes, the half-wave swap, fp8 format)

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,  // write -inf outside each row's window (the fused -inf fill)
  FLAG_REVERSE_ROWS = 2,  // dispatch high-m row blocks first
};

constexpr int TILE_N = 32;   // tokens per MFMA tile (the B operand's 32 columns)
constexpr int TILE_H = 32;   // heads per MFMA tile (the A operand's 32 rows)
constexpr int TILE_K = 64;   // contraction depth of one 32x32x64 fp8 MFMA
constexpr int WAVE = 64;

DEVICE int lane_id() { return __builtin_amdgcn_workitem_id_x() & (WAVE - 1); }

struct RowWindow {
  int start, end;  // clamped to [0, N); start == end for an empty window
  bool valid;      // m < M
};

typedef float v4f __attribute__((ext_vector_type(4)));
typedef float v2f __attribute__((ext_vector_type(2)));
typedef __bf16 v2bf __attribute__((ext_vector_type(2)));
typedef __bf16 v8bf __attribute__((ext_vector_type(8)));
typedef short v2s __attribute__((ext_vector_type(2)));
typedef short v8s __attribute__((ext_vector_type(8)));
typedef int v4i __attribute__((ext_vector_type(4)));
typedef long v1l;

// DESIGN: grid is (ceil(M / BLOCK_M), SplitN); row groups dispatched high-m first when requested,
// because under causal masking a row group's work grows with m and the longest blocks should not
// become the tail.
struct RowBlock {
  int m0;     // first query row of the block
  int split;  // which of the split_n tile-range parts this block walks
  bool clean; // FLAG_CLEAN_LOGITS
};
template <int BLOCK_M>
DEVICE RowBlock row_block_of(int M, int flags) {
  const int row_blocks = (M + BLOCK_M - 1) / BLOCK_M;
  const int bx = __builtin_amdgcn_workgroup_id_x();
  const int row_block = (flags & FLAG_REVERSE_ROWS) ? row_blocks - 1 - bx : bx;
  return {row_block * BLOCK_M, (int)__builtin_amdgcn_workgroup_id_y(), (flags & FLAG_CLEAN_LOGITS) != 0};
}

// The block's row windows, clamped to [0, N) (empty, and not valid, for rows past M); the union
// [union_lo, union_hi) of the non-empty ones, which the block walks ([0, 0) when all are empty); and the
// intersection [inter_lo, inter_hi) over the valid rows (the mfma-reduce designs: tiles inside it need no
// masking at the store; the seed leaves it unused).
template <int BLOCK_M>
DEVICE void block_windows(const int GLOBAL* __restrict__ cu_seqlen_ks, const int GLOBAL* __restrict__ cu_seqlen_ke,
                          int m0, int M, int N, RowWindow (&win)[BLOCK_M], int& union_lo, int& union_hi,
                          int& inter_lo, int& inter_hi) {
  union_lo = N, union_hi = 0, inter_lo = 0, inter_hi = N;
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    const int m = m0 + r;
    win[r].valid = m < M;
    int s = 0, e = 0;
    if (win[r].valid) {
      s = __builtin_elementwise_max(__builtin_elementwise_min(cu_seqlen_ks[m], N), 0);
      e = __builtin_elementwise_max(__builtin_elementwise_min(cu_seqlen_ke[m], N), s);
      inter_lo = __builtin_elementwise_max(inter_lo, s);
      inter_hi = __builtin_elementwise_min(inter_hi, e);
    }
    win[r].start = s;
    win[r].end = e;
    if (e > s) {
      union_lo = __builtin_elementwise_min(union_lo, s);
      union_hi = __builtin_elementwise_max(union_hi, e);
    }
  }
  if (union_hi <= union_lo) union_lo = union_hi = 0;
}

// DESIGN: SplitN splits each block's KV tile range so a small row grid still fills the device.
// [begin, end) of the ceil(span / tile) tiles of a block's union for split `split` of `split_n`.
DEVICE void split_tile_range(int span, int tile, int split, int split_n, int& tile_begin, int& tile_end) {
  const int tiles = (span + tile - 1) / tile;
  tile_begin = (int)((i64)tiles * split / split_n);
  tile_end = (int)((i64)tiles * (split + 1) / split_n);
}

// DESIGN: fused -inf fill. With clean logits the kernel itself writes -inf outside the block's tile
// range, [0, union_lo) and [union_hi, N), spread over every (split, warp) of the row block, so no
// separate O(M*N) pre-fill pass is needed.
template <int BLOCK_M>
DEVICE void fill_outside_union(float GLOBAL* __restrict__ out, i64 out_row_stride, int m0,
                               const RowWindow (&win)[BLOCK_M], int union_lo, int union_hi, int N, int split,
                               int split_n, int warp, int num_warps, int lane) {
  const int worker = split * num_warps + warp;
  const int workers = split_n * num_warps;
  const int fill = union_lo + (N - union_hi);
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    if (!win[r].valid) continue;
    float GLOBAL* dst_row = out + (i64)(m0 + r) * out_row_stride;
    for (int idx = worker * WAVE + lane; idx < fill; idx += workers * WAVE) {
      const int c = idx < union_lo ? idx : union_hi + (idx - union_lo);
      dst_row[c] = -__builtin_inff();
    }
  }
}
