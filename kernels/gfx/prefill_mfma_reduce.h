// Designs "mr", "mrp" and "mrf" (symbol suffixes _mr, _mrp, _mrf; mrf is the gfx950 default): one
// "MFMA reduce" pipeline on 16-head x 16-token score tiles, K through buffer resources, register double
// buffered and software pipelined across tiles. They differ only in how ReLU and the weighted head sum are
// done (template parameter RELU): mr and mrp reduce bf16 scores with a second MFMA, mrf in fp32 on the VALU.
#pragma once
#include "common.h"

// NaN contract (docs/NUMERICS.md), MFMA-reduce designs: an e4m3fn NaN byte of Q (0x7F / 0xFF) is read as +0.
// Without this a NaN score leaks into every row of the block (0 x NaN in the block-diagonal weights of the
// reduce MFMA). Q is loaded once per block, so this costs ~5 VALU per Q dword in the prologue and nothing per
// tile. (The seed design needs none: its ReLU, v_max_f32 under -fno-honor-nans, turns a NaN score into 0.)
// Per byte: (b & 0x7F) + 1 carries into bit 7 exactly when b & 0x7F == 0x7F (no carry crosses bytes).
DEVICE unsigned zero_fp8_nans(unsigned x) {
  const unsigned nan_bit = ((x & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
  return x & ~(nan_bit - (nan_bit >> 7) + nan_bit);  // nan_bit * 0xFF / 0x80 per byte: 0xFF where NaN
}

template <int N>
DEVICE void zero_fp8_nans(int (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = (int)zero_fp8_nans((unsigned)v[i]);
}

// ===================================================================================================
// Second path: "MFMA reduce" (symbol suffixes _mr, _mrp; and _mrf, the default, which keeps everything below
// except the bf16 reduce: its head sum is fp32 on the VALU, see RELU_F32). Same op, same grid/warp/split
// scheme, same fused -inf fill; different steady state. Why: the seed is latency bound at 2 waves/SIMD with ~1.2 VALU per
// (row, token), because ReLU, the weight FMA and the head reduce all run on the VALU. Here:
//
//   * Score tiles are 16 heads x 16 tokens (v_mfma_f32_16x16x128_f8f6f4 at D=128: 8 passes;
//     2 x v_mfma_f32_16x16x32_fp8_fp8 at D=64: 4 passes each). Result: register r of lane l holds
//     S[head 4*(l/16) + r][token l%16].
//   * Two score tiles (32 heads) are packed to bf16 (v_cvt_pk_bf16_f32: 2 values per VALU) and ReLU'd
//     on the packed pair (v_pk_max_i16 against 0: a bf16's sign test orders like int16, -0 -> +0).
//   * The weighted head sum is a v_mfma_f32_16x16x32_bf16 (4 passes) whose B operand is those packed
//     scores as they lie (lane l: token l%16, k-group l/16) and whose A operand holds the weights in
//     block-diagonal form: A row 4m = weights of query row m, every other row zero. Only the pairing of
//     k between A and B matters, so no shuffle is needed; the BLOCK_M (<= 4) rows accumulate into ONE
//     16x16 accumulator whose register 0 holds row m in lanes 16m..16m+15: no permlane, no per-row
//     reduce, and kv_scale is ONE multiply per 16 tokens for all rows.
//   * K, kv_scale and out go through buffer resources whose base moves per tile in SGPRs; lanes keep a
//     fixed offset, so the tile loop spends no VALU on addresses. Tokens at or past the block's window
//     end read 0 through the resource's range check (no clamp), rows past M are dropped by it.
//   * K is register double buffered: the ping-pong loop issues tile t+1's loads before tile t's MFMAs.
//   * The unit pipeline of a tile (compute_tile) is rotated across tiles: the last stage of tile t issues
//     the first score MFMAs of tile t+1, so no tile pays a pipeline fill in s_nop.
//
// Pass counts (LLVM SISchedule.td, SIDPGFX950FullSpeedModel): 16x16x128_f8f6f4 with fp8 operands 8,
// 32x32x64_f8f6f4 with fp8 operands 16, 16x16x32 (bf16, fp8) 4. Per (row, token) at H=32, D=128:
// score 2 x 8 / 16 = 1.0 (as the seed), reduce 4 / 16 = 0.25.
// ===================================================================================================
// Stage fences of the tile pipeline are full fences: letting SALU cross (mask 0x4) was tried and lost
// the in-stage order (74 wait states per tile instead of 24; docs/PROFILE.md, "Path taken").
#define SCHED_FENCE 0
constexpr int OUT_OF_RANGE = 0x7ffffff0;  // a buffer offset past any resource's num_records: store dropped
constexpr unsigned BUFFER_RSRC_WORD3 = 0x00020000;  // raw untyped buffer, as CK uses on gfx9 (DATA_FORMAT 32)

// Score operand of one 16-head x 16-token tile for one lane: D=128 -> 32 bytes for one 16x16x128 MFMA;
// D=64 -> 16 bytes, two 8-byte halves for two 16x16x32 fp8 MFMAs. Lane group g4 = l/16 carries the
// contiguous bytes [g4*D/4, (g4+1)*D/4) of the row: one pairing A and B agree on, so no shuffles.
template <int D> struct ScoreOp;
template <> struct ScoreOp<128> {
  v8i v;
  static constexpr int BYTES = 32;
};
template <> struct ScoreOp<64> {
  v4i v;
  static constexpr int BYTES = 16;
};

template <int D>
DEVICE ScoreOp<D> load_score_op_global(const u8 GLOBAL* p) {
  ScoreOp<D> r;
  const v4u GLOBAL* q = (const v4u GLOBAL*)p;
  if constexpr (D == 128) {
    v4u lo = q[0], hi = q[1];
    r.v.s0 = (int)lo.x; r.v.s1 = (int)lo.y; r.v.s2 = (int)lo.z; r.v.s3 = (int)lo.w;
    r.v.s4 = (int)hi.x; r.v.s5 = (int)hi.y; r.v.s6 = (int)hi.z; r.v.s7 = (int)hi.w;
  } else {
    v4u lo = q[0];
    r.v.s0 = (int)lo.x; r.v.s1 = (int)lo.y; r.v.s2 = (int)lo.z; r.v.s3 = (int)lo.w;
  }
  return r;
}

template <int D>
DEVICE ScoreOp<D> zero_fp8_nans(ScoreOp<D> op) {
  constexpr int W = D == 128 ? 8 : 4;
  int a[W];
#pragma unroll
  for (int i = 0; i < W; ++i) a[i] = op.v[i];
  zero_fp8_nans(a);
#pragma unroll
  for (int i = 0; i < W; ++i) op.v[i] = a[i];
  return op;
}

template <int D>
DEVICE ScoreOp<D> load_score_op_buffer(__amdgpu_buffer_rsrc_t rsrc, int voff, int imm) {
  ScoreOp<D> r;
  v4i lo = __builtin_bit_cast(v4i, __builtin_amdgcn_raw_buffer_load_b128(rsrc, voff + imm, 0, 0));
  if constexpr (D == 128) {
    v4i hi = __builtin_bit_cast(v4i, __builtin_amdgcn_raw_buffer_load_b128(rsrc, voff + imm + 16, 0, 0));
    r.v = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
  } else {
    r.v = lo;
  }
  return r;
}

DEVICE v4f score_mfma(const ScoreOp<128>& q, const ScoreOp<128>& k) {
  // DESIGN: scaled-MFMA builtin with constant-zero E8M0 scales -> the unscaled encoding (fp8 e4m3 = 0).
  return target::mfma_16x16x128_fp8(q.v, k.v, (v4f){0, 0, 0, 0});
}
DEVICE v4f score_mfma(const ScoreOp<64>& q, const ScoreOp<64>& k) {
  typedef long v2l __attribute__((ext_vector_type(2)));
  v2l a = __builtin_bit_cast(v2l, q.v), b = __builtin_bit_cast(v2l, k.v);
  long a0 = a.x, a1 = a.y, b0 = b.x, b1 = b.y;  // scalars first (clang 22 ext-vector bit_cast issue)
  v4f c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a0, b0, (v4f){0, 0, 0, 0}, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a1, b1, c, 0, 0, 0);
}

// ReLU before the reduce MFMA, two ways (template parameter RELU of the body):
//   RELU_PK_MAX (symbols _mrp): 2 f32 -> packed bf16 (v_cvt_pk_bf16_f32, round to nearest even), then
//     ReLU on the pair with one v_pk_max_i16: a bf16 with the sign bit set is a negative int16, so
//     max(x, 0) zeroes it (and -0). One reduce MFMA per unit.
//   RELU_ABS_SPLIT (symbols _mr): relu(s) = (s + |s|) / 2, and the reduce is linear in B, so
//     sum_h w_h relu(s_h) = W/2 . bf16(s) + W/2 . |bf16(s)|: the same v_cvt_pk_bf16_f32, then one
//     v_and_b32 (clear both sign bits) per pair instead of v_pk_max_i16, and two reduce MFMAs per unit,
//     each into its own accumulator chain (W/2 . s and W/2 . |s|, summed by one v_add_f32 per 16 tokens:
//     chaining both through one accumulator put a 4-pass MFMA result register in front of the next VALU,
//     7 wait states each time). 4 more MFMA passes per unit; |bf16(s)| == bf16(|s|) (RNE is symmetric),
//     so the negative parts cancel exactly in the sum (the only extra error: f32 roundings of the two
//     accumulators). Written when the emulator lacked v_pk_max_i16; kept as the alternative design.
//   RELU_F32 (symbols _mrf): no reduce MFMA. ReLU (v_max_f32) and the weight FMA (v_pk_fma_f32, two heads
//     per instruction) in fp32 on the VALU, as the seed design, so the logits meet the per-logit gate eps 1e-5
//     (issue 15); each lane then holds a partial sum over its 8 of every 32 heads for each row, and the 4 lane
//     groups are summed and transposed to "lane group g4 holds one row" by one v_permlane32_swap and one
//     v_permlane16_swap per pair of rows (rows land in lane groups 0, 2, 1, 3: rows 0, 1, 2, 3 at g4 = 0, 2,
//     1, 3). Every lane holds fp32 weights (8 per 32 heads per row) instead of one bf16 row per 4 lanes.
enum : int { RELU_PK_MAX = 0, RELU_ABS_SPLIT = 1, RELU_F32 = 2 };

template <int RELU> struct Packed {
  static constexpr int NB = RELU == RELU_ABS_SPLIT ? 2 : 1;  // reduce MFMAs per unit
  v8bf b[NB];
};

// RELU_F32: one unit's ReLU'd scores times this lane's 8 weights of the unit's 32 heads, into acc.
// Item n of lane group g4 is head 16*(n/4) + 4*g4 + n%4, as pack_scores lays out the bf16 designs.
// DESIGN: -fno-honor-nans for the module (build.py): relu() is fmaxf, one v_max_f32, no canonicalize.
DEVICE v2f relu_fma_unit(v4f s0, v4f s1, const v2f (&w)[4], v2f acc) {
  const float a0 = s0.x, a1 = s0.y, a2 = s0.z, a3 = s0.w, b0 = s1.x, b1 = s1.y, b2 = s1.z, b3 = s1.w;
  acc = __builtin_elementwise_fma((v2f){__builtin_fmaxf(a0, 0.0f), __builtin_fmaxf(a1, 0.0f)}, w[0], acc);
  acc = __builtin_elementwise_fma((v2f){__builtin_fmaxf(a2, 0.0f), __builtin_fmaxf(a3, 0.0f)}, w[1], acc);
  acc = __builtin_elementwise_fma((v2f){__builtin_fmaxf(b0, 0.0f), __builtin_fmaxf(b1, 0.0f)}, w[2], acc);
  acc = __builtin_elementwise_fma((v2f){__builtin_fmaxf(b2, 0.0f), __builtin_fmaxf(b3, 0.0f)}, w[3], acc);
  return acc;
}

// RELU_F32: per-lane partial sums of up to 4 rows (each over this lane's heads) -> lane group g4 holds the
// whole sum of row ROW_OF_GROUP[g4]. Swap 32 pairs rows (0, 1) and (2, 3) across the lane halves, swap 16
// pairs the results across neighbouring lane groups.
DEVICE int row_of_group(int g4) { return ((g4 & 1) << 1) | (g4 >> 1); }
DEVICE float swap32_sum(float a, float b) {
  v2u s = target::permlane32_swap(__builtin_bit_cast(unsigned, a), __builtin_bit_cast(unsigned, b));
  unsigned x = s.x, y = s.y;  // scalars first (clang 22 ext-vector bit_cast issue, NOTES section 3)
  return __builtin_bit_cast(float, x) + __builtin_bit_cast(float, y);
}
DEVICE float swap16_sum(float a, float b) {
  v2u s = target::permlane16_swap(__builtin_bit_cast(unsigned, a), __builtin_bit_cast(unsigned, b));
  unsigned x = s.x, y = s.y;
  return __builtin_bit_cast(float, x) + __builtin_bit_cast(float, y);
}
// DESIGN: paired-row v_permlane32_swap_b32 head reduce (the seed's), here followed by one v_permlane16_swap
// so one swap pair reduces and transposes up to 4 rows.
template <int BM>
DEVICE float transpose_row_sums(const float (&part)[BM]) {
  const float x01 = swap32_sum(part[0], BM > 1 ? part[1] : 0.0f);
  const float x23 = BM > 2 ? swap32_sum(part[2], BM > 3 ? part[3] : 0.0f) : 0.0f;
  return swap16_sum(x01, x23);
}

DEVICE v2s pack_bf16(float a, float b) {
  return __builtin_bit_cast(v2s, __builtin_convertvector((v2f){a, b}, v2bf));
}

// B operand(s) of the reduce MFMA from two score tiles (32 heads): item n of lane group g4 is head
// 16*(n/4) + 4*g4 + n%4 of the 32-head group. A (the weights) is laid out with the same mapping.
template <int RELU>
DEVICE Packed<RELU> pack_scores(v4f s0, v4f s1) {
  typedef short v4s __attribute__((ext_vector_type(4)));
  v2s p[4] = {pack_bf16(s0.x, s0.y), pack_bf16(s0.z, s0.w), pack_bf16(s1.x, s1.y), pack_bf16(s1.z, s1.w)};
  Packed<RELU> out;
  if constexpr (RELU == RELU_PK_MAX) {
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = __builtin_elementwise_max(p[i], (v2s){0, 0});
  } else if constexpr (RELU == RELU_ABS_SPLIT) {  // RELU_F32 packs nothing here (its ReLU runs in f32)
    v2s a[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a[i] = __builtin_bit_cast(v2s, __builtin_bit_cast(unsigned, p[i]) & 0x7fff7fffu);
    v4s lo = __builtin_shufflevector(a[0], a[1], 0, 1, 2, 3), hi = __builtin_shufflevector(a[2], a[3], 0, 1, 2, 3);
    out.b[1] = __builtin_bit_cast(v8bf, __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7));
  }
  v4s lo = __builtin_shufflevector(p[0], p[1], 0, 1, 2, 3), hi = __builtin_shufflevector(p[2], p[3], 0, 1, 2, 3);
  out.b[0] = __builtin_bit_cast(v8bf, __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7));
  return out;
}

DEVICE __amdgpu_buffer_rsrc_t make_rsrc(const void GLOBAL* base, i64 byte_offset, int num_bytes) {
  return __builtin_amdgcn_make_buffer_rsrc((void*)((const char GLOBAL*)base + byte_offset), 0,
                                           num_bytes > 0 ? num_bytes : 0, BUFFER_RSRC_WORD3);
}

template <int H, int D, int BLOCK_M, int RELU>
DEVICE void fp8_mqa_logits_mr_body(const u8 GLOBAL* __restrict__ q, const u8 GLOBAL* __restrict__ k,
                                   const float GLOBAL* __restrict__ kv_scale,
                                   const float GLOBAL* __restrict__ weights,
                                   const int GLOBAL* __restrict__ cu_seqlen_ks,
                                   const int GLOBAL* __restrict__ cu_seqlen_ke, float GLOBAL* __restrict__ out,
                                   i64 out_row_stride, int M, int N, int split_n, int num_warps, int flags) {
  static_assert(H % 32 == 0 && (D == 64 || D == 128), "H a multiple of 32, D 64 or 128");
  static_assert(BLOCK_M >= 1 && BLOCK_M <= 4, "the reduce accumulator's register 0 holds 4 rows");
  constexpr int T = 16;               // tokens per score / reduce tile
  constexpr int TILE = 2 * T;         // tokens per loop tile (kept at the seed's 32: same K stream)
  constexpr int HT = H / 16;          // score tiles per row
  constexpr int RT = H / 32;          // reduce MFMAs per row per 16 tokens
  constexpr int OPB = ScoreOp<D>::BYTES;

  const int lane = lane_id();
  const int warp = __builtin_amdgcn_readfirstlane(__builtin_amdgcn_workitem_id_x() / WAVE);
  const int j = lane & 15;   // A row / B and C column (token)
  const int g4 = lane >> 4;  // k group; in C register 0: the query row

  // Grid, row order (common.h). Windows: the union (walked, as in the seed) and the intersection over
  // valid rows (tiles inside it need no masking at the store: the steady state).
  const RowBlock rb = row_block_of<BLOCK_M>(M, flags);
  const int split = rb.split, m0 = rb.m0;
  const bool clean = rb.clean;
  const int valid_rows = __builtin_elementwise_min(BLOCK_M, M - m0);
  RowWindow win[BLOCK_M];
  int union_lo, union_hi, inter_lo, inter_hi;
  block_windows<BLOCK_M>(cu_seqlen_ks, cu_seqlen_ke, m0, M, N, win, union_lo, union_hi, inter_lo, inter_hi);

  // This lane's row in C register 0 (rows >= valid_rows never store: the out resource drops them).
  const int my_row = RELU == RELU_F32 ? row_of_group(g4) : g4;
  RowWindow my = win[0];
#pragma unroll
  for (int r = 1; r < BLOCK_M; ++r)
    if (my_row == r) my = win[r];
  const unsigned my_len = (unsigned)(my.end - my.start);

  // DESIGN: warps split the tile range, not the rows: each warp is an independent K stream.
  int tile_begin, tile_end;
  split_tile_range(union_hi - union_lo, TILE, split, split_n, tile_begin, tile_end);

  // DESIGN: BLOCK_M query rows share one K stream. Q (A of the score MFMAs) and the weights (block-diagonal
  // bf16 A of the reduce MFMAs; mrf: this lane's fp32 weights) stay in registers for the whole block.
  ScoreOp<D> q_op[BLOCK_M][HT];
  v8bf w_op[BLOCK_M][RT];
  v2f w_f[RELU == RELU_F32 ? BLOCK_M : 1][RELU == RELU_F32 ? RT : 1][4];  // RELU_F32: this lane's fp32 weights
#pragma unroll
  for (int r = 0; r < BLOCK_M; ++r) {
    const i64 m = win[r].valid ? m0 + r : 0;
#pragma unroll
    for (int ht = 0; ht < HT; ++ht)
    {
      // RELU_F32 needs no NaN fix: its ReLU maps a NaN score to 0 and its rows never share an MFMA.
      const ScoreOp<D> op = load_score_op_global<D>(q + (m * H + ht * 16 + j) * D + g4 * OPB);
      q_op[r][ht] = RELU == RELU_F32 ? op : zero_fp8_nans(op);
    }
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
      if constexpr (RELU == RELU_F32) {
#pragma unroll
        for (int n = 0; n < 8; n += 2) {
          const float w0 = weights[m * H + 32 * rt + 16 * (n / 4) + 4 * g4 + n % 4];
          const float w1 = weights[m * H + 32 * rt + 16 * (n / 4) + 4 * g4 + n % 4 + 1];
          w_f[r][rt][n / 2] = (v2f){w0, w1};
        }
        continue;
      }
      v8s w = {};
      if (j == 4 * r) {
        float f[8];
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          f[n] = weights[m * H + 32 * rt + 16 * (n / 4) + 4 * g4 + n % 4];
          if (RELU == RELU_ABS_SPLIT) f[n] *= 0.5f;  // (s + |s|) / 2: exact in bf16 barring underflow
        }
#pragma unroll
        for (int n = 0; n < 8; n += 2) {
          v2s p = __builtin_bit_cast(v2s, __builtin_convertvector((v2f){f[n], f[n + 1]}, v2bf));
          w[n] = p.x;
          w[n + 1] = p.y;
        }
      }
      w_op[r][rt] = __builtin_bit_cast(v8bf, w);
    }
  }

  // Fixed per-lane offsets into the per-tile resources (bytes).
  const int k_voff = j * D + g4 * OPB;
  const int s_voff = j * 4;
  const int o_voff = (int)((i64)my_row * out_row_stride * 4) + j * 4;
  const int step = num_warps;  // tiles between consecutive tiles of one warp

  struct KTile {
    ScoreOp<D> k[2];
    float scale[2];
  };
  // DESIGN: no LDS staging. K is streamed HBM -> registers through per-tile buffer resources.
  // Tiles at or past tile_end get an empty range: their loads return 0 without touching memory.
  auto load_tile = [&](int t) {
    KTile kt;
    const int tok0 = union_lo + t * TILE;
    const int live = t < tile_end ? __builtin_elementwise_min(union_hi - tok0, TILE) : 0;
    __amdgpu_buffer_rsrc_t kr = make_rsrc(k, (i64)tok0 * D, live * D);
    __amdgpu_buffer_rsrc_t sr = make_rsrc(kv_scale, (i64)tok0 * 4, live * 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      kt.k[h] = load_score_op_buffer<D>(kr, k_voff, h * T * D);
      kt.scale[h] = __builtin_bit_cast(float, __builtin_amdgcn_raw_buffer_load_b32(sr, s_voff + h * T * 4, 0, 0));
    }
    return kt;
  };

  // Score MFMAs of one unit (see compute_tile) of a tile.
  constexpr int U = 2 * BLOCK_M * RT;   // units per tile
  constexpr int SM = D == 128 ? 2 : 4;  // score MFMAs per unit
  constexpr int NB = Packed<RELU>::NB;  // reduce MFMAs per unit
  auto unit_h = [](int u) { return u / (BLOCK_M * RT); };
  auto unit_r = [](int u) { return (u / RT) % BLOCK_M; };
  auto unit_rt = [](int u) { return u % RT; };
  struct Scores {
    v4f s[2];  // the two 16-head score tiles of one unit (32 heads)
  };
  auto score_unit = [&](const KTile& kt, int u) {
    Scores sc;
    sc.s[0] = score_mfma(q_op[unit_r(u)][2 * unit_rt(u)], kt.k[unit_h(u)]);
    sc.s[1] = score_mfma(q_op[unit_r(u)][2 * unit_rt(u) + 1], kt.k[unit_h(u)]);
    return sc;
  };

  // One tile. One "unit" = (token half h, row r, 32-head group rt): its score MFMAs S(u), 8 VALU V(u)
  // (4 cvt_pk + 4 ReLU) and its reduce MFMA(s) R(u). Software pipeline, one stage per unit, pinned with
  // sched_group_barrier and fenced by sched_barrier: stage k = { S(k+1), R(k-1), V(k) }, so every
  // MFMA-result read by the VALU has a whole stage of independent work in front of it (>= 12
  // instructions: the 8-pass XDL -> VALU distance on gfx950), and every VALU -> reduce-MFMA operand
  // read has the next stage's score MFMAs in front of it (the 2 wait states of VALU write -> MFMA read).
  // The pipeline is rotated across tiles: S(0) of this tile arrives in `first` (issued by the previous
  // tile, or by the prologue before the loop), and the last stage issues S(0) of the NEXT tile (on
  // `nk`, whose loads were issued a whole tile earlier) in place of S(U), into `first`. So a tile has
  // no pipeline fill (V(0) reads a result issued before the previous tile's stores and this tile's
  // loads) and its drain R(U-1) is covered by the store's scalar address work.
  auto compute_tile = [&](const KTile& kt, int t, Scores& first, const KTile& nk) {
    // The loads of the next tile (issued just before this call) stay ahead of every MFMA of this tile.
    __builtin_amdgcn_sched_barrier(SCHED_FENCE);
    Scores sc[U];
    Packed<RELU> b[U];
    v4f c[2][NB] = {};  // [token half][reduce MFMA of the unit]: one accumulator chain each
    // RELU_F32: [token half][row] partial sums, two heads' chains per pair. (clang splits the first FMA of
    // each chain into two scalar FMAs, from zero or not: 2 VALU per chain per tile more than the ideal.)
    v2f facc[2][BLOCK_M] = {};
    sc[0] = first;
#pragma unroll
    for (int k = 0; k < U; ++k) {
      if (k + 1 < U)
        sc[k + 1] = score_unit(kt, k + 1);
      else
        first = score_unit(nk, 0);
      if constexpr (RELU == RELU_F32) {
        // Stage k = { S(k+1), V(k) }: V(k) reads S(k), issued a whole stage earlier.
        facc[unit_h(k)][unit_r(k)] =
            relu_fma_unit(sc[k].s[0], sc[k].s[1], w_f[unit_r(k)][unit_rt(k)], facc[unit_h(k)][unit_r(k)]);
        __builtin_amdgcn_sched_group_barrier(0x008, SM, 0);
        __builtin_amdgcn_sched_group_barrier(0x002, 12, 0);
        __builtin_amdgcn_sched_barrier(SCHED_FENCE);
        continue;
      }
      if (k >= 1) {
        const int u = k - 1;
#pragma unroll
        for (int i = 0; i < NB; ++i)
          c[unit_h(u)][i] = target::mfma_16x16x32_bf16(w_op[unit_r(u)][unit_rt(u)], b[u].b[i], c[unit_h(u)][i]);
      }
      b[k] = pack_scores<RELU>(sc[k].s[0], sc[k].s[1]);
      // Inside the stage: the MFMAs first (S(k+1), then R(k-1)), then V(k)'s 8 VALU.
      __builtin_amdgcn_sched_group_barrier(0x008, SM, 0);
      if (k >= 1) __builtin_amdgcn_sched_group_barrier(0x008, NB, 0);
      __builtin_amdgcn_sched_group_barrier(0x002, 8, 0);
      __builtin_amdgcn_sched_barrier(SCHED_FENCE);
    }
    // Drain: R(U-1), then the kv-scale multiply. The store's scalar address work is computed here so
    // that it can sit between V(U-1) and R(U-1) (VALU write -> MFMA read) and between R(U-1) and the
    // multiply that reads its result (XDL write -> VALU read).
    const int tok0 = union_lo + t * TILE;
    const i64 row_off = (i64)m0 * out_row_stride + tok0;
    const i64 out_span = ((i64)(valid_rows - 1) * out_row_stride + (N - tok0)) * 4;
    const int out_bytes = t < tile_end ? (int)__builtin_elementwise_min(out_span, (i64)OUT_OF_RANGE) : 0;
    __amdgpu_buffer_rsrc_t orr = make_rsrc(out, row_off * 4, out_bytes);
    const bool steady = tok0 >= inter_lo && tok0 + TILE <= inter_hi;
    float logit[2];
    if constexpr (RELU == RELU_F32) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float part[BLOCK_M];
#pragma unroll
        for (int r = 0; r < BLOCK_M; ++r) {
          const v2f a = facc[h][r];
          const float lo = a.x, hi = a.y;
          part[r] = lo + hi;
        }
        logit[h] = transpose_row_sums<BLOCK_M>(part) * kt.scale[h];  // DESIGN: kv-scale hoist
        // (ReLU is positive-homogeneous and kv_scale >= 0: the scale is applied once per column after the head sum.)
      }
    } else {
      {
        const int u = U - 1;
#pragma unroll
        for (int i = 0; i < NB; ++i)
          c[unit_h(u)][i] = target::mfma_16x16x32_bf16(w_op[unit_r(u)][unit_rt(u)], b[u].b[i], c[unit_h(u)][i]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float acc = c[h][0].x;
        if constexpr (NB == 2) acc += c[h][1].x;
        logit[h] = acc * kt.scale[h];
      }  // kv-scale hoist, 1 mul / 16 tokens
      __builtin_amdgcn_sched_group_barrier(0x004, 4, 0);
      __builtin_amdgcn_sched_group_barrier(0x008, NB, 0);
      __builtin_amdgcn_sched_group_barrier(0x004, 16, 0);
    }
    if (__builtin_expect(steady, 1)) {
      // Every row's window covers the whole tile: plain stores, no masking (the steady state).
#pragma unroll
      for (int h = 0; h < 2; ++h)
        __builtin_amdgcn_raw_buffer_store_b32(__builtin_bit_cast(unsigned, logit[h]), orr, o_voff + h * T * 4, 0, 0);
    } else {
      // Edge tile: one straight-line block (no EXEC masking, so no extra blocks in the loop). Lanes that
      // must not write get an offset past the resource's range, which drops the store. With clean
      // logits every lane left of N writes (logit inside its row's window, -inf outside; past union_hi
      // that is the same -inf the fill writes); without, only lanes inside their row's window write.
      // The marker tells the static profile (rawindexer/asm.py) this block is not the steady state.
      asm volatile("; rawindexer: edge tile" ::);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tok = tok0 + h * T + j;
        const bool in = (unsigned)(tok - my.start) < my_len;
        const bool ok = clean ? tok < N : in;
        const float val = in ? logit[h] : -__builtin_inff();
        __builtin_amdgcn_raw_buffer_store_b32(__builtin_bit_cast(unsigned, val), orr,
                                              ok ? o_voff + h * T * 4 : OUT_OF_RANGE, 0, 0);
      }
    }
  };

  // DESIGN: register double buffering. Tile t+step's K is in flight while tile t's MFMAs run; the loop
  // is written as a ping-pong so the two buffers never need a register copy. The prologue issues S(0)
  // of the warp's first tile (see compute_tile: the pipeline is rotated across tiles).
  int t = tile_begin + warp;
  KTile cur = load_tile(t);
  Scores first = score_unit(cur, 0);
  for (; t < tile_end; t += 2 * step) {
    KTile nxt = load_tile(t + step);
    compute_tile(cur, t, first, nxt);
    cur = load_tile(t + 2 * step);
    if (t + step < tile_end) compute_tile(nxt, t + step, first, cur);
  }

  // Fused -inf fill (DESIGN: marker in common.h, where it is written once).
  if (clean)
    fill_outside_union<BLOCK_M>(out, out_row_stride, m0, win, union_lo, union_hi, N, split, split_n, warp, num_warps,
                                lane);
}
