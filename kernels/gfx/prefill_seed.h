// Design "seed" (symbols fp8_mqa_logits_h{H}_d{D}_bm{BLOCK_M}_u{UNROLL}[_fn]): the seed's design
// (shared/seeds/000_*.txt). Each lane pair contracts 32 heads x 32 tokens per 32x32x64 fp8 MFMA; ReLU, the
// weight FMA and the head reduce run on the VALU (paired rows reduced by one v_permlane32_swap); BLOCK_M
// query rows share one K stream streamed HBM -> registers, UNROLL tiles in flight per warp. The accurate
// default on gfx942, where FN_ON_FNUZ patches e4m3fn bytes to the fnuz MFMA's format.
#pragma once
#include "common.h"

// ---------------------------------------------------------------------------------------------------
// Operand fetch. The 32x32x64 fp8 MFMA pairs byte n of lane (i + 32g) of A with byte n of lane
// (j + 32g) of B; which depth index d a (g, n) pair stands for is ours to choose as long as A and B
// agree. We give lane half g the contiguous bytes [32g, 32g + 32) of each 64-deep step, so every lane
// fetches 32 contiguous bytes per step: two 16-byte loads, no shuffles.
// ---------------------------------------------------------------------------------------------------
DEVICE v8i load_operand(const u8 GLOBAL* row, int kstep, int g) {
  const v4u GLOBAL* p = (const v4u GLOBAL*)(row + kstep * TILE_K + g * 32);
  v4u lo = p[0], hi = p[1];
  v8i r;
  r.s0 = (int)lo.x; r.s1 = (int)lo.y; r.s2 = (int)lo.z; r.s3 = (int)lo.w;
  r.s4 = (int)hi.x; r.s5 = (int)hi.y; r.s6 = (int)hi.z; r.s7 = (int)hi.w;
  return r;
}

// Accumulator layout of the 32x32 MFMA: register r of lane l holds D[head(r, l)][token l % 32].
DEVICE int acc_head(int r, int g) { return 8 * (r / 4) + 4 * g + (r % 4); }

// One 32-head x 32-token tile: D += Q_tile * K_tile^T over D/64 steps.
// DESIGN: contracted 32 heads x 32 tokens per mfma_scale_f32_32x32x64_f8f6f4 tile. Format code 0 is
// fp8 e4m3 for both operands; the E8M0 scales are constant zero, which the backend lowers to the
// unscaled v_mfma_f32_32x32x64_f8f6f4 encoding (no v_mfma_ld_scale_b32 prefix needed).
template <int KSTEPS>
DEVICE v16f mfma_tile(const v8i (&q)[KSTEPS], const v8i (&k)[KSTEPS]) {
  v16f c = {};
#pragma unroll
  for (int s = 0; s < KSTEPS; ++s)
    c = target::mfma_32x32x64_fp8(q[s], k[s], c);
  return c;
}

// The kv-scale hoist (marked in prefill_mfma_reduce.h). ReLU is positive-homogeneous and kv_scale >= 0,
// so the scale is left out of this per-head sum and applied once per column after the head reduce.
// -fno-honor-nans for the module (build.py; marked at relu_fma_unit): relu() is fmaxf, one v_max_f32.
// The weight FMA is packed (v_pk_fma_f32: two heads per instruction, one partial sum per register of the
// pair); ReLU has no packed fp32 form on gfx950, so it stays one v_max_f32 per value. 1.5 VALU per
// (head, key) value instead of 2; still an fp32 FMA of the exact fp32 ReLU'd score (issue 15: the design
// must meet the per-logit gate eps 1e-5).
typedef float v2f_ __attribute__((ext_vector_type(2)));
DEVICE v2f_ relu_weighted_sum(v16f c, const v2f_ (&w)[8], v2f_ acc) {
#pragma unroll
  for (int r = 0; r < 16; r += 2) {
    const v2f_ relu = {__builtin_fmaxf(c[r], 0.0f), __builtin_fmaxf(c[r + 1], 0.0f)};
    acc = __builtin_elementwise_fma(relu, w[r / 2], acc);
  }
  return acc;
}

// Paired-row v_permlane32_swap_b32 head reduce (marked at transpose_row_sums, which extends it).
// Lanes l and l+32 hold the partial sums of the two 16-head halves for the same token. Swapping a's upper
// half with b's lower half and adding leaves row a's reduction in lanes 0-31 and row b's in lanes 32-63:
// one swap, one add, and the store that follows uses all 64 lanes.
DEVICE float paired_head_reduce(float part_a, float part_b) {
  v2u swapped = target::permlane32_swap(__builtin_bit_cast(unsigned, part_a), __builtin_bit_cast(unsigned, part_b));
  unsigned x = swapped.x;  // copied to scalars first: clang 22 mis-reads .y through bit_cast
  unsigned y = swapped.y;
  return __builtin_bit_cast(float, x) + __builtin_bit_cast(float, y);
}

// FN_ON_FNUZ: q and k hold e4m3fn bytes on a target whose MFMA reads e4m3fnuz (gfx942): patched where they
// are loaded and the weights scaled by 4 (kernels/target.h); false where the bytes are the MFMA's format.
template <int H, int D, int BLOCK_M, int UNROLL, bool FN_ON_FNUZ = false>
DEVICE void fp8_mqa_logits_body(const u8 GLOBAL* __restrict__ q, const u8 GLOBAL* __restrict__ k,
                                const float GLOBAL* __restrict__ kv_scale,
                                const float GLOBAL* __restrict__ weights,
                                const int GLOBAL* __restrict__ cu_seqlen_ks,
                                const int GLOBAL* __restrict__ cu_seqlen_ke, float GLOBAL* __restrict__ out,
                                i64 out_row_stride, int M, int N, int split_n, int num_warps, int flags) {
  static_assert(H % TILE_H == 0 && D % TILE_K == 0, "H must be a multiple of 32 and D of 64");
  static_assert(BLOCK_M >= 1 && BLOCK_M <= 8, "BLOCK_M is 1..8");
  static_assert(!FN_ON_FNUZ || target::FNUZ, "FN_ON_FNUZ: e4m3fn bytes need patching only where the MFMA reads fnuz");
  constexpr int HEAD_TILES = H / TILE_H;
  constexpr int KSTEPS = D / TILE_K;
  constexpr int PAIRS = (BLOCK_M + 1) / 2;

  const int lane = lane_id();
  const int warp = __builtin_amdgcn_readfirstlane(__builtin_amdgcn_workitem_id_x() / WAVE);
  const int i = lane & 31;  // head row of A / token column of B and of the result
  const int g = lane >> 5;  // which 32-byte half of each 64-deep step this lane carries

  // Grid, row order, row windows and their union: common.h. The block walks the union of its rows' windows.
  const RowBlock rb = row_block_of<BLOCK_M>(M, flags);
  const int split = rb.split, m0 = rb.m0;
  const bool clean = rb.clean;
  RowWindow win[BLOCK_M];
  int union_lo, union_hi, inter_lo, inter_hi;
  block_windows<BLOCK_M>(cu_seqlen_ks, cu_seqlen_ke, m0, M, N, win, union_lo, union_hi, inter_lo, inter_hi);

  // SplitN splits each block's KV tile range (common.h); warps split the tile range, not the rows
  // (marked in the mfma-reduce body).
  int tile_begin, tile_end;
  split_tile_range(union_hi - union_lo, TILE_N, split, split_n, tile_begin, tile_end);

  // BLOCK_M query rows share one K stream (marked in the mfma-reduce body). Their Q tiles and the
  // weights each lane needs for its accumulator rows stay in registers for the whole block.
  v8i q_tile[BLOCK_M][HEAD_TILES][KSTEPS];
  v2f_ w_tile[BLOCK_M][HEAD_TILES][8];
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    const i64 m = win[r].valid ? m0 + r : 0;  // rows past M read row 0 and never store
#pragma unroll
    for (int ht = 0; ht < HEAD_TILES; ++ht) {
      const u8 GLOBAL* q_row = q + (m * H + ht * TILE_H + i) * D;
#pragma unroll
      for (int s = 0; s < KSTEPS; ++s) q_tile[r][ht][s] = target::q_operand<FN_ON_FNUZ>(load_operand(q_row, s, g));
#pragma unroll
      for (int a = 0; a < 16; a += 2)
        w_tile[r][ht][a / 2] = (v2f_){target::weight<FN_ON_FNUZ>(weights[m * H + ht * TILE_H + acc_head(a, g)]),
                                      target::weight<FN_ON_FNUZ>(weights[m * H + ht * TILE_H + acc_head(a + 1, g)])};
    }
  }

  // No LDS staging (marked in the mfma-reduce body). K is streamed HBM -> registers, UNROLL tiles in flight per warp
  // (DESIGN: unroll2 = UNROLL 2, two tiles in flight).
  for (int t0 = tile_begin + warp * UNROLL; t0 < tile_end; t0 += num_warps * UNROLL) {
    v8i k_tile[UNROLL][KSTEPS];
    float scale[UNROLL];
    int col[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      col[u] = union_lo + (t0 + u) * TILE_N + i;
      // Tokens past the window (or a tile past tile_end) fetch the last valid token and are masked at
      // the store; clamping keeps every load inside K.
      const int token = __builtin_elementwise_min(col[u], union_hi - 1);
      const u8 GLOBAL* k_row = k + (i64)token * D;
#pragma unroll
      for (int s = 0; s < KSTEPS; ++s) k_tile[u][s] = target::k_operand<FN_ON_FNUZ>(load_operand(k_row, s, g));
      scale[u] = kv_scale[token];
      if (t0 + u >= tile_end) col[u] = union_hi;  // masks the whole tile
    }

#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int p = 0; p < PAIRS; ++p) {
        const int ra = 2 * p, rb = 2 * p + 1;
        v2f_ part_a = {0.0f, 0.0f}, part_b = {0.0f, 0.0f};
#pragma unroll
        for (int ht = 0; ht < HEAD_TILES; ++ht) {
          part_a = relu_weighted_sum(mfma_tile<KSTEPS>(q_tile[ra][ht], k_tile[u]), w_tile[ra][ht], part_a);
          if (rb < BLOCK_M)
            part_b = relu_weighted_sum(mfma_tile<KSTEPS>(q_tile[rb][ht], k_tile[u]), w_tile[rb][ht], part_b);
        }
        const float sum_a = part_a.x, sum_a1 = part_a.y, sum_b = part_b.x, sum_b1 = part_b.y;
        const float logit = paired_head_reduce(sum_a + sum_a1, sum_b + sum_b1) * scale[u];

        // Lanes 0-31 now hold row ra, lanes 32-63 row rb, both for token col[u].
        const int r = g ? rb : ra;
        if (r < BLOCK_M) {
          RowWindow w = win[0];
#pragma unroll
          for (int rr = 1; rr < BLOCK_M; ++rr)
            if (r == rr) w = win[rr];
          const int c = col[u];
          // Columns >= union_hi belong to the -inf fill below, so nothing is written twice.
          if (w.valid && c < union_hi) {
            float GLOBAL* dst = out + (i64)(m0 + r) * out_row_stride + c;
            if (c >= w.start && c < w.end)
              *dst = logit;
            else if (clean)
              *dst = -__builtin_inff();
          }
        }
      }
    }
  }

  // Fused -inf fill (common.h).
  if (clean)
    fill_outside_union<BLOCK_M>(out, out_row_stride, m0, win, union_lo, union_hi, N, split, split_n, warp, num_warps,
                                lane);
}
