// fp8_mqa_logits for gfx950 (CDNA4, wave64): the prefill "lightning indexer" of DeepSeek-V3.2 / GLM-5.
//
//   logits[m, n] = sum_h relu(<Q[m,h,:], K[n,:]>) * kv_scale[n] * weights[m,h]   for n in [ks[m], ke[m])
//
// clamped to [0, N); -inf elsewhere when CLEAN_LOGITS is set, untouched elsewhere when it is not.
//
// Written against clang builtins only (no HIP headers), so the same source builds with hipcc on a ROCm
// machine and with the clang of the `ziglang` PyPI package everywhere else. The design points of the
// seed (shared/seeds/000_*.txt) are marked "DESIGN:" below so they can be found by name.
//
// Template parameters (one extern "C" symbol per instantiation, see INSTANTIATE at the bottom):
//   H        heads per query row: 32, 64 or 128 (a multiple of the 32-row MFMA tile)
//   D        head dim: 64 or 128 (a multiple of the 64-deep MFMA tile)
//   BLOCK_M  query rows that share one K stream, 1..8
//   UNROLL   KV tiles per loop iteration per warp (1, or 2 for the seed's "unroll2")
// Run-time parameters: split_n (== gridDim.y), num_warps (== blockDim.x / 64), flags (clean, reverse rows).

typedef int v8i __attribute__((ext_vector_type(8)));
typedef unsigned int v4u __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef unsigned int v2u __attribute__((ext_vector_type(2)));

#define GLOBAL __attribute__((address_space(1)))
#define DEVICE static __attribute__((device)) __attribute__((always_inline)) inline

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
    c = __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(q[s], k[s], c, 0, 0, 0, 0, 0, 0);
  return c;
}

// DESIGN: kv-scale hoist. ReLU is positive-homogeneous and kv_scale >= 0, so the scale is left out of
// this per-head sum and applied once per column after the head reduce.
// relu() is fmaxf; the module is built with -fno-honor-nans so it is one v_max_f32 (no canonicalize).
DEVICE float relu_weighted_sum(v16f c, const float (&w)[16], float acc) {
#pragma unroll
  for (int r = 0; r < 16; ++r) acc = __builtin_fmaf(__builtin_fmaxf(c[r], 0.0f), w[r], acc);
  return acc;
}

// DESIGN: paired-row v_permlane32_swap_b32 head reduce. Lanes l and l+32 hold the partial sums of the
// two 16-head halves for the same token. Swapping a's upper half with b's lower half and adding leaves
// row a's reduction in lanes 0-31 and row b's in lanes 32-63: one swap, one add, and the store that
// follows uses all 64 lanes.
DEVICE float paired_head_reduce(float part_a, float part_b) {
  v2u swapped = __builtin_amdgcn_permlane32_swap(__builtin_bit_cast(unsigned, part_a),
                                                 __builtin_bit_cast(unsigned, part_b), false, false);
  unsigned x = swapped.x;  // copied to scalars first: clang 22 mis-reads .y through bit_cast
  unsigned y = swapped.y;
  return __builtin_bit_cast(float, x) + __builtin_bit_cast(float, y);
}

struct RowWindow {
  int start, end;  // clamped to [0, N); start == end for an empty window
  bool valid;      // m < M
};

template <int H, int D, int BLOCK_M, int UNROLL>
DEVICE void fp8_mqa_logits_body(const u8 GLOBAL* __restrict__ q, const u8 GLOBAL* __restrict__ k,
                                const float GLOBAL* __restrict__ kv_scale,
                                const float GLOBAL* __restrict__ weights,
                                const int GLOBAL* __restrict__ cu_seqlen_ks,
                                const int GLOBAL* __restrict__ cu_seqlen_ke, float GLOBAL* __restrict__ out,
                                i64 out_row_stride, int M, int N, int split_n, int num_warps, int flags) {
  static_assert(H % TILE_H == 0 && D % TILE_K == 0, "H must be a multiple of 32 and D of 64");
  static_assert(BLOCK_M >= 1 && BLOCK_M <= 8, "BLOCK_M is 1..8");
  constexpr int HEAD_TILES = H / TILE_H;
  constexpr int KSTEPS = D / TILE_K;
  constexpr int PAIRS = (BLOCK_M + 1) / 2;

  const int lane = lane_id();
  const int warp = __builtin_amdgcn_readfirstlane(__builtin_amdgcn_workitem_id_x() / WAVE);
  const int i = lane & 31;  // head row of A / token column of B and of the result
  const int g = lane >> 5;  // which 32-byte half of each 64-deep step this lane carries

  // DESIGN: grid is (ceil(M / BLOCK_M), SplitN); row groups dispatched high-m first when requested,
  // because under causal masking a row group's work grows with m and the longest blocks should not
  // become the tail.
  const int row_blocks = (M + BLOCK_M - 1) / BLOCK_M;
  const int bx = __builtin_amdgcn_workgroup_id_x();
  const int row_block = (flags & FLAG_REVERSE_ROWS) ? row_blocks - 1 - bx : bx;
  const int split = __builtin_amdgcn_workgroup_id_y();
  const int m0 = row_block * BLOCK_M;
  const bool clean = flags & FLAG_CLEAN_LOGITS;

  // Row windows, clamped to [0, N). The block walks the union of its rows' windows.
  RowWindow win[BLOCK_M];
  int union_lo = N, union_hi = 0;
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    const int m = m0 + r;
    win[r].valid = m < M;
    int s = 0, e = 0;
    if (win[r].valid) {
      s = __builtin_elementwise_max(__builtin_elementwise_min(cu_seqlen_ks[m], N), 0);
      e = __builtin_elementwise_max(__builtin_elementwise_min(cu_seqlen_ke[m], N), s);
    }
    win[r].start = s;
    win[r].end = e;
    if (e > s) {
      union_lo = __builtin_elementwise_min(union_lo, s);
      union_hi = __builtin_elementwise_max(union_hi, e);
    }
  }
  if (union_hi <= union_lo) union_lo = union_hi = 0;

  // DESIGN: SplitN splits each block's KV tile range so a small row grid still fills the device.
  // DESIGN: warps split the tile range, not the rows: each warp is an independent K stream.
  const int tiles = (union_hi - union_lo + TILE_N - 1) / TILE_N;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);

  // DESIGN: BLOCK_M query rows share one K stream. Their Q tiles and the weights each lane needs for
  // its accumulator rows stay in registers for the whole block.
  v8i q_tile[BLOCK_M][HEAD_TILES][KSTEPS];
  float w_tile[BLOCK_M][HEAD_TILES][16];
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    const i64 m = win[r].valid ? m0 + r : 0;  // rows past M read row 0 and never store
#pragma unroll
    for (int ht = 0; ht < HEAD_TILES; ++ht) {
      const u8 GLOBAL* q_row = q + (m * H + ht * TILE_H + i) * D;
#pragma unroll
      for (int s = 0; s < KSTEPS; ++s) q_tile[r][ht][s] = load_operand(q_row, s, g);
#pragma unroll
      for (int a = 0; a < 16; ++a) w_tile[r][ht][a] = weights[m * H + ht * TILE_H + acc_head(a, g)];
    }
  }

  // DESIGN: no LDS staging. K is streamed HBM -> registers, UNROLL tiles in flight per warp
  // (UNROLL = 2 is the seed's "unroll2").
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
      for (int s = 0; s < KSTEPS; ++s) k_tile[u][s] = load_operand(k_row, s, g);
      scale[u] = kv_scale[token];
      if (t0 + u >= tile_end) col[u] = union_hi;  // masks the whole tile
    }

#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int p = 0; p < PAIRS; ++p) {
        const int ra = 2 * p, rb = 2 * p + 1;
        float part_a = 0.0f, part_b = 0.0f;
#pragma unroll
        for (int ht = 0; ht < HEAD_TILES; ++ht) {
          part_a = relu_weighted_sum(mfma_tile<KSTEPS>(q_tile[ra][ht], k_tile[u]), w_tile[ra][ht], part_a);
          if (rb < BLOCK_M)
            part_b = relu_weighted_sum(mfma_tile<KSTEPS>(q_tile[rb][ht], k_tile[u]), w_tile[rb][ht], part_b);
        }
        const float logit = paired_head_reduce(part_a, part_b) * scale[u];

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

  // DESIGN: fused -inf fill. With clean logits the kernel itself writes -inf outside the block's tile
  // range, [0, union_lo) and [union_hi, N), spread over every (split, warp) of the row block, so no
  // separate O(M*N) pre-fill pass is needed.
  if (clean) {
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
}

// Kernel symbols: fp8_mqa_logits_h{H}_d{D}_bm{BLOCK_M}_u{UNROLL}. build.py's variant list decides which
// are compiled (-DVARIANTS=...); the manifest records each one's argument layout and resources.
#define KERNEL_ATTRS \
  extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(64, 512)))

#define INSTANTIATE(H, D, BM, U)                                                                       \
  KERNEL_ATTRS void fp8_mqa_logits_h##H##_d##D##_bm##BM##_u##U(                                        \
      const u8* q, const u8* k, const float* kv_scale, const float* weights, const int* cu_seqlen_ks,  \
      const int* cu_seqlen_ke, float* out, i64 out_row_stride, int M, int N, int split_n,              \
      int num_warps, int flags) {                                                                      \
    fp8_mqa_logits_body<H, D, BM, U>(                                                                  \
        (const u8 GLOBAL*)q, (const u8 GLOBAL*)k, (const float GLOBAL*)kv_scale,                       \
        (const float GLOBAL*)weights, (const int GLOBAL*)cu_seqlen_ks, (const int GLOBAL*)cu_seqlen_ke, \
        (float GLOBAL*)out, out_row_stride, M, N, split_n, num_warps, flags);                          \
  }

#ifndef VARIANTS
#define VARIANTS(X) X(32, 128, 4, 1)
#endif
VARIANTS(INSTANTIATE)
