// fp8_paged_mqa_logits for gfx950 (CDNA4, wave64): the decode "lightning indexer" over a paged KV cache.
//
//   logits[b*next_n + j, t] = sum_h relu(<q[b,j,h,:], K_b[t,:]>) * scale_b[t] * weights[b*next_n + j, h]
//
// for t < len(b, j); -inf (FLAG_CLEAN_LOGITS) or untouched elsewhere in [0, max_context_len). Token t of
// sequence b is slot t % BS of physical block block_table[b, t / BS]; a block of the fused cache is BS*D
// fp8 key bytes followed by BS float32 scales (docs/PAGED.md has the layout and its public sources).
//
// Design (one paragraph per decision):
// * Grid (B, split_n), one workgroup of num_warps waves per (batch entry b, context split). All next_n rows
//   of b share the workgroup, so every K byte of the split is read from HBM once for all rows. The kernel
//   reads context_lens itself: split s walks the 32-token tiles [T*s/split_n, T*(s+1)/split_n) of
//   T = ceil(max_j len(b, j) / 32), so short sequences cost nothing and long ones are spread over
//   split_n workgroups. split_n comes from host-known numbers only (B, max_context_len, CU count): no
//   host-side schedule reads device memory and a call is capturable in a graph. Small batches fill 256
//   CUs through split_n (B = 1 at 32K tokens: 256 splits of 4 tiles).
// * Q [next_n, H, D] and weights [next_n, H] of b are staged once per workgroup in dynamic LDS (Q rows
//   padded to D + 16 bytes so the 32 lanes of a ds_read_b128 spread over the banks); registers hold only
//   the K tile (D/8 VGPRs per lane, double buffered) and one 32x32 accumulator, so occupancy stays high
//   at every (H, D, next_n) -- including H=128, next_n=4, whose Q (64 KB) could never live in VGPRs.
// * K and scales are gathered per lane through the block table: lane (i, g) of a 32-token tile owns token
//   i and the 32-byte half g of each 64-byte depth step, so each lane issues two 16-byte loads per step
//   from its token's row and one 4-byte scale load. The same code serves block sizes 1, 16 and 64
//   (BS is a template parameter: shifts, no divides): at BS 64 a tile is half a block and the 32 block
//   table loads are one broadcast address; at 16, two blocks; at 1, 32 blocks. Every key row (D bytes)
//   is read whole, every scale once per (b, split). Tokens past the row union's end fetch the last valid
//   token (clamped, no table entry past the context is read) and are masked at the store.
// * Scores: one v_mfma_f32_32x32x64 fp8 (unscaled encoding) chain per 32-head tile, Q from LDS, K from
//   registers. Head reduce in fp32 on the VALU: ReLU (one v_max_f32 under -fno-honor-nans) and the
//   weight FMA per accumulator register, head tiles summed per lane, and the two 16-head halves (lanes l
//   and l + 32) combined by one v_permlane32_swap that pairs rows 2p and 2p+1. No bf16 anywhere: the
//   per-logit error stays at fp32 rounding (the 1e-5 * T gate). kv-scale hoist: applied once per token
//   after the head sum (ReLU is positive-homogeneous, scales are >= 0). Decode is bandwidth-bound, so
//   the fp32 VALU reduce is not the limit at H <= 64, next_n <= 2.
// * Output: 64-bit offsets everywhere (row * out_row_stride, block * block bytes); any row stride >=
//   max_context_len. Inside the tile range a column < max_j len is written (value, or -inf / nothing
//   past the row's own length); with clean logits [max_j len, max_context_len) of every row is filled
//   with -inf by all (split, wave) workers of b, so nothing is written twice and no pre-fill pass exists.
//   Row lengths are clamped to [0, min(max_context_len, max_blocks * BS)]: no store leaves the row and
//   no block-table read leaves the table. Block-table ENTRIES are the caller's contract (0 <= entry <
//   num_blocks): an entry outside the cache is read as given (the emulator's memcheck reports it).
//
// Template parameters: H (32, 64, 128), D (64, 128), BS (1, 16, 64). Run-time: next_n (1..4), split_n
// (== gridDim.y), num_warps (== blockDim.x / 64), flags. Symbols: fp8_paged_mqa_logits_h{H}_d{D}_bs{BS}.
// Written against clang builtins only, built with the same flags as kernels/fp8_mqa_logits.hip.

typedef int v8i __attribute__((ext_vector_type(8)));
typedef unsigned int v4u __attribute__((ext_vector_type(4)));
typedef float v4f __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef unsigned int v2u __attribute__((ext_vector_type(2)));

#define GLOBAL __attribute__((address_space(1)))
#define LDS __attribute__((address_space(3)))
#define DEVICE static __attribute__((device)) __attribute__((always_inline)) inline
#define TARGET_DEVICE DEVICE
#include "target.h"  // gfx950 / gfx942 differences (MFMA shapes, half-wave swap, fp8 format), as the prefill kernel

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,     // write -inf at every column of [0, max_context_len) past the row's length
  FLAG_CONTEXT_LENS_2D = 2,  // context_lens is [B, next_n] (row length as given), else [B]
};

constexpr int TILE_N = 32;  // tokens per MFMA tile
constexpr int TILE_H = 32;  // heads per MFMA tile
constexpr int TILE_K = 64;  // contraction depth of one 32x32x64 fp8 MFMA
constexpr int WAVE = 64;
constexpr int MAX_NEXT_N = 4;
constexpr int Q_PAD = 16;   // bytes added to each Q row in LDS (bank spread for ds_read_b128)

extern __attribute__((shared)) v4u dynamic_lds[];

DEVICE void workgroup_barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

DEVICE v8i concat(v4u lo, v4u hi) {
  v8i r;
  r.s0 = (int)lo.x; r.s1 = (int)lo.y; r.s2 = (int)lo.z; r.s3 = (int)lo.w;
  r.s4 = (int)hi.x; r.s5 = (int)hi.y; r.s6 = (int)hi.z; r.s7 = (int)hi.w;
  return r;
}

// The 32x32x64 MFMA pairs byte n of lane (i + 32g) of A with byte n of lane (j + 32g) of B; lane half g
// carries the contiguous bytes [32g, 32g + 32) of each 64-deep step of its row, in A and B alike.
DEVICE v8i load_k_operand(const u8 GLOBAL* row, int kstep, int g) {
  const v4u GLOBAL* p = (const v4u GLOBAL*)(row + kstep * TILE_K + g * 32);
  return concat(p[0], p[1]);
}
DEVICE v8i load_q_operand(const u8 LDS* row, int kstep, int g) {
  const v4u LDS* p = (const v4u LDS*)(row + kstep * TILE_K + g * 32);
  return concat(p[0], p[1]);
}

// Register r of lane (i, g) of the 32x32 accumulator holds head 8*(r/4) + 4g + r%4 of token i.
template <int D>
DEVICE float head_tile_partial(const u8 LDS* q_rows, const float LDS* w_row, const v8i (&k)[D / TILE_K], int i,
                               int g, float acc) {
  constexpr int KSTEPS = D / TILE_K;
  const u8 LDS* q_row = q_rows + i * (D + Q_PAD);
  v16f c = {};
#pragma unroll
  for (int s = 0; s < KSTEPS; ++s)
    // DESIGN: scaled-MFMA builtin with constant-zero E8M0 scales -> the unscaled fp8 encoding.
    c = target::mfma_32x32x64_fp8(load_q_operand(q_row, s, g), k[s], c);
#pragma unroll
  for (int quad = 0; quad < 4; ++quad) {
    const v4f w = *(const v4f LDS*)(w_row + 8 * quad + 4 * g);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc = __builtin_fmaf(__builtin_fmaxf(c[4 * quad + e], 0.0f), w[e], acc);
  }
  return acc;
}

// Lanes l and l + 32 hold the two 16-head halves of the same token: one swap leaves row a's sum in lanes
// 0-31 and row b's in lanes 32-63.
DEVICE float paired_head_reduce(float part_a, float part_b) {
  v2u swapped = target::permlane32_swap(__builtin_bit_cast(unsigned, part_a), __builtin_bit_cast(unsigned, part_b));
  unsigned x = swapped.x;
  unsigned y = swapped.y;
  return __builtin_bit_cast(float, x) + __builtin_bit_cast(float, y);
}

template <int D>
struct KTile {
  v8i k[D / TILE_K];
  float scale;
};

// The physical block of this lane's token of a tile (tokens past the row union's end read the last valid
// token's entry: no table entry past the context is read).
template <int BS>
DEVICE int tile_block(const int GLOBAL* table_row, int tile, int len_max, int i) {
  const int token = __builtin_elementwise_min(tile * TILE_N + i, len_max - 1);
  return table_row[(unsigned)token / BS];  // token >= 0 here; BS a power of two: a shift
}

template <int D, int BS, bool FN_ON_FNUZ>
DEVICE KTile<D> load_k_tile(const u8 GLOBAL* kv_cache, int block, int tile, int len_max, int i, int g) {
  constexpr i64 BLOCK_BYTES = (i64)BS * (D + 4);
  const int token = __builtin_elementwise_min(tile * TILE_N + i, len_max - 1);
  const int slot = (unsigned)token % BS;
  const u8 GLOBAL* base = kv_cache + (i64)block * BLOCK_BYTES;
  KTile<D> t;
#pragma unroll
  for (int s = 0; s < D / TILE_K; ++s) t.k[s] = target::k_operand<FN_ON_FNUZ>(load_k_operand(base + slot * D, s, g));
  t.scale = *(const float GLOBAL*)(base + BS * D + slot * 4);
  return t;
}

// FN_ON_FNUZ: q and the cache hold e4m3fn bytes on a target whose MFMA reads e4m3fnuz (gfx942): Q and the
// weights are patched / scaled by 4 once when staged in LDS, K where it is loaded (kernels/target.h).
template <int H, int D, int BS, bool FN_ON_FNUZ = false>
DEVICE void fp8_paged_mqa_logits_body(const u8 GLOBAL* __restrict__ q, const u8 GLOBAL* __restrict__ kv_cache,
                                      const float GLOBAL* __restrict__ weights,
                                      const int GLOBAL* __restrict__ context_lens,
                                      const int GLOBAL* __restrict__ block_table, float GLOBAL* __restrict__ out,
                                      i64 out_row_stride, int next_n, int max_context_len, int max_blocks,
                                      int split_n, int num_warps, int flags) {
  static_assert(H % TILE_H == 0 && D % TILE_K == 0, "H a multiple of 32, D of 64");
  static_assert((BS & (BS - 1)) == 0, "block size a power of two");
  static_assert(!FN_ON_FNUZ || target::FNUZ, "FN_ON_FNUZ: e4m3fn bytes need patching only where the MFMA reads fnuz");
  constexpr int HEAD_TILES = H / TILE_H;
  constexpr int Q_ROW = D + Q_PAD;

  const int lane = __builtin_amdgcn_workitem_id_x() & (WAVE - 1);
  const int warp = __builtin_amdgcn_readfirstlane(__builtin_amdgcn_workitem_id_x() / WAVE);
  const int i = lane & 31;
  const int g = lane >> 5;
  const int b = __builtin_amdgcn_workgroup_id_x();
  const int split = __builtin_amdgcn_workgroup_id_y();
  const bool clean = flags & FLAG_CLEAN_LOGITS;

  // Row lengths, clamped so that no store leaves [0, max_context_len) and no table read leaves the row.
  const i64 limit = __builtin_elementwise_min((i64)max_context_len, (i64)max_blocks * BS);
  int len[MAX_NEXT_N];
  int len_max = 0;
#pragma unroll
  for (int j = 0; j < MAX_NEXT_N; ++j) {
    i64 l = 0;
    if (j < next_n)
      l = (flags & FLAG_CONTEXT_LENS_2D) ? (i64)context_lens[(i64)b * next_n + j]
                                         : (i64)context_lens[b] - next_n + j + 1;
    len[j] = (int)__builtin_elementwise_max(__builtin_elementwise_min(l, limit), (i64)0);
    len_max = __builtin_elementwise_max(len_max, len[j]);
  }

  const int tiles = (len_max + TILE_N - 1) / TILE_N;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);
  const i64 row0 = (i64)b * next_n;

  if (tile_begin < tile_end) {  // uniform over the workgroup: every wave reaches the barrier or none
    u8 LDS* q_lds = (u8 LDS*)dynamic_lds;
    float LDS* w_lds = (float LDS*)(q_lds + next_n * H * Q_ROW);
    const int threads = num_warps * WAVE;
    const int tid = __builtin_amdgcn_workitem_id_x();
    const v4u GLOBAL* q_src = (const v4u GLOBAL*)(q + row0 * H * D);
    for (int c = tid; c < next_n * H * D / 16; c += threads) {
      const int row = c / (D / 16), part = c % (D / 16);
      v4u v = q_src[c];
      if constexpr (FN_ON_FNUZ) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = target::fn_as_fnuz_q(v[e]);
      }
      *(v4u LDS*)(q_lds + row * Q_ROW + part * 16) = v;
    }
    for (int c = tid; c < next_n * H; c += threads) w_lds[c] = target::weight<FN_ON_FNUZ>(weights[row0 * H + c]);
    workgroup_barrier();

    const int GLOBAL* table_row = block_table + (i64)b * max_blocks;
    // Two-stage gather pipeline: while a tile's MFMAs run, the next tile's K and scales and the block-table
    // entries of the tile after it are in flight. Loads are unconditional (tile indices clamped to the
    // split's last tile, a cache hit) so the code is straight-line and every wait is exact.
    const int last = tile_end - 1;
    int tile = tile_begin + warp;
    KTile<D> cur = {};
    int next_block = 0;
    if (tile <= last) {
      cur = load_k_tile<D, BS, FN_ON_FNUZ>(kv_cache, tile_block<BS>(table_row, tile, len_max, i), tile, len_max, i, g);
      next_block = tile_block<BS>(table_row, __builtin_elementwise_min(tile + num_warps, last), len_max, i);
    }
    for (; tile <= last; tile += num_warps) {
      const int after_block =
          tile_block<BS>(table_row, __builtin_elementwise_min(tile + 2 * num_warps, last), len_max, i);
      const KTile<D> next =
          load_k_tile<D, BS, FN_ON_FNUZ>(kv_cache, next_block, __builtin_elementwise_min(tile + num_warps, last), len_max, i, g);
      const int col = tile * TILE_N + i;
#pragma unroll
      for (int p = 0; p < MAX_NEXT_N / 2; ++p) {
        if (2 * p >= next_n) break;
        const int ra = 2 * p, rb = 2 * p + 1;
        float part_a = 0.0f, part_b = 0.0f;
        // Not unrolled: one head tile's two accumulator chains live at a time (4 waves/SIMD at H=128).
#pragma unroll 1
        for (int ht = 0; ht < HEAD_TILES; ++ht) {
          part_a = head_tile_partial<D>(q_lds + (ra * H + ht * TILE_H) * Q_ROW, w_lds + ra * H + ht * TILE_H,
                                        cur.k, i, g, part_a);
          if (rb < next_n)
            part_b = head_tile_partial<D>(q_lds + (rb * H + ht * TILE_H) * Q_ROW, w_lds + rb * H + ht * TILE_H,
                                          cur.k, i, g, part_b);
        }
        const float logit = paired_head_reduce(part_a, part_b) * cur.scale;
        const int r = g ? rb : ra;  // lanes 0-31: row ra, lanes 32-63: row rb, both for token col
        int row_len = len[0];
#pragma unroll
        for (int rr = 1; rr < MAX_NEXT_N; ++rr)
          if (r == rr) row_len = len[rr];
        // Columns >= len_max belong to the -inf fill below, so nothing is written twice.
        if (r < next_n && col < len_max) {
          float GLOBAL* dst = out + (row0 + r) * out_row_stride + col;
          if (col < row_len)
            *dst = logit;
          else if (clean)
            *dst = -__builtin_inff();
        }
      }
      cur = next;
      next_block = after_block;
    }
  }

  // DESIGN: fused -inf fill of [len_max, max_context_len), spread over every (split, wave) of b.
  if (clean) {
    const int worker = split * num_warps + warp;
    const int workers = split_n * num_warps;
    const int fill = max_context_len - len_max;
    for (int j = 0; j < next_n; ++j) {
      float GLOBAL* dst_row = out + (row0 + j) * out_row_stride + len_max;
      for (int c = worker * WAVE + lane; c < fill; c += workers * WAVE) dst_row[c] = -__builtin_inff();
    }
  }
}

#define INSTANTIATE_PAGED_(H, D, BS, FN, SUFFIX)                                                             \
  extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(64, 512)))                     \
      __attribute__((amdgpu_waves_per_eu(4))) void                                                         \
      fp8_paged_mqa_logits_h##H##_d##D##_bs##BS##SUFFIX(const u8* q, const u8* kv_cache, const float* weights,  \
                                                const int* context_lens, const int* block_table, float* out,  \
                                                i64 out_row_stride, int next_n, int max_context_len,          \
                                                int max_blocks, int split_n, int num_warps, int flags) {      \
    fp8_paged_mqa_logits_body<H, D, BS, FN>((const u8 GLOBAL*)q, (const u8 GLOBAL*)kv_cache,                     \
                                        (const float GLOBAL*)weights, (const int GLOBAL*)context_lens,        \
                                        (const int GLOBAL*)block_table, (float GLOBAL*)out, out_row_stride,   \
                                        next_n, max_context_len, max_blocks, split_n, num_warps, flags);      \
  }

#define INSTANTIATE_PAGED(H, D, BS) INSTANTIATE_PAGED_(H, D, BS, false, )
// e4m3fn bytes on an e4m3fnuz target (gfx942): symbol suffix _fn
#define INSTANTIATE_PAGED_FN(H, D, BS) INSTANTIATE_PAGED_(H, D, BS, true, _fn)

// build.py passes the instance lists from rawindexer/paged_kernels.py (-DPAGED_INSTANCES=...).
#ifndef PAGED_INSTANCES
#define PAGED_INSTANCES(X) X(32, 128, 64)
#endif
#ifndef PAGED_FN_INSTANCES
#define PAGED_FN_INSTANCES(X)
#endif
PAGED_INSTANCES(INSTANTIATE_PAGED)
PAGED_FN_INSTANCES(INSTANTIATE_PAGED_FN)
