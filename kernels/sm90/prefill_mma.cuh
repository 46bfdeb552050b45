// Design "mma" (sm_90a): the seed's design translated to mma.sync.m16n8k32.e4m3 -- K streamed HBM -> registers
// once per block of BLOCK_M query rows, each warp an independent K stream over its share of the block's tile
// range; tokens on the MMA's M side, so the head reduce is in-thread FMAs plus a quad butterfly; Q and weights
// in shared memory in fragment order. Kept as the simple, independent baseline: on sm_90a ptxas emulates the
// fp8 mma.sync with f16 HMMA, so the heuristic never picks it (rawindexer/registry.py).
#pragma once
#include "common.cuh"

// D += A(16x32, tokens x depth) * B(32x8, depth x heads), fp8 e4m3 in, f32 accumulate.
// Fragment facts (PTX ISA, m16n8k32 8-bit types): with gid = lane / 4 and tig = lane % 4,
//   A reg0 = row gid, k 4tig..+3; reg1 = row gid+8, same k; reg2 = row gid, k 16+4tig..; reg3 = row gid+8, k 16+4tig..
//   B reg0 = k 4tig..+3, col gid; reg1 = k 16+4tig.., col gid
//   C c0,c1 = row gid, cols 2tig, 2tig+1; c2,c3 = row gid+8, same cols.
// Only the pairing of A's and B's k slots is observable, so we choose which physical depth index each
// logical k slot stands for: lane tig of kstep s takes bytes [8s, 8s+8) of ITS OWN contiguous D/4-byte
// chunk [tig*D/4, (tig+1)*D/4), the first 4 as reg0/reg1 (A) or reg0 (B), the next 4 as reg2/reg3 or reg1.
// A and B use the same rule, so the sum over all ksteps is the full dot product, and every lane fetches
// its operands with 16-byte loads and no shuffles.
__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int U, int NCH>
struct KTile {
  uint4 k[U][2][NCH];  // [fragment][token row gid / gid+8][16-byte chunk of this lane's D/4 bytes]
  float scale[U / 2];  // kv_scale of the tokens this lane stores (see reduce_scatter)
};

template <int D, int U, int NCH>
__device__ __forceinline__ void load_tile(KTile<U, NCH>& kt, const u8* __restrict__ k,
                                          const float* __restrict__ kv_scale, int base, int hi, int gid,
                                          int tig) {
#pragma unroll
  for (int f = 0; f < U; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Tokens past the block's union window fetch the last valid token and are masked at the store.
      const int tok = min(base + FRAG_TOKENS * f + 8 * h + gid, hi - 1);
      const u8* p = k + (i64)tok * D + (D / 4) * tig;
#pragma unroll
      for (int c = 0; c < NCH; ++c) kt.k[f][h][c] = ldg16(p + 16 * c);
    }
#pragma unroll
  for (int i = 0; i < U / 2; ++i) {
    const int v = (U / 2) * tig + i;  // value index held after the reduce-scatter
    const int tok = min(base + FRAG_TOKENS * (v >> 1) + 8 * (v & 1) + gid, hi - 1);
    kt.scale[i] = __ldg(kv_scale + tok);
  }
}

template <int H, int D, int BM, int U>
__device__ __forceinline__ void fp8_mqa_logits_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                    const float* __restrict__ kv_scale,
                                                    const float* __restrict__ weights,
                                                    const int* __restrict__ cu_seqlen_ks,
                                                    const int* __restrict__ cu_seqlen_ke, float* __restrict__ out,
                                                    i64 out_row_stride, int M, int N, int split_n, int num_warps,
                                                    int flags) {
  static_assert(H % FRAG_HEADS == 0 && D % 64 == 0, "H must be a multiple of 8 and D of 64");
  static_assert(U == 2, "U: 16-token MMA fragments per warp tile; 2 is the one built (32-token tiles)");
  constexpr int HT = H / FRAG_HEADS;  // head tiles (B fragments) per row
  constexpr int NCH = D / 64;         // 16-byte chunks per lane per row: D/4 bytes each
  constexpr int TILE = FRAG_TOKENS * U;
  constexpr int QFRAGS = BM * HT * NCH;  // uint4 per lane for the block's Q
  static_assert(QFRAGS * WARP * 16 + BM * H * 4 <= 48 * 1024, "Q + weights must fit static shared memory");

  // Q in fragment order: [row][head tile][chunk][lane] uint4, so each warp-wide 16-byte read is 512
  // contiguous bytes (conflict-free) and every warp reads the same words.
  __shared__ uint4 q_s[QFRAGS * WARP];
  __shared__ float w_s[BM * H];
  __shared__ int2 win_s[BM];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int gid = lane >> 2, tig = lane & 3;
  const int nthreads = num_warps * WARP;

  const RowBlock rb = start_row_block<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, M, N, flags, tid);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  for (int idx = tid; idx < QFRAGS * WARP; idx += nthreads) {
    const int l = idx & (WARP - 1);
    int rest = idx / WARP;
    const int c = rest % NCH;
    rest /= NCH;
    const int ht = rest % HT;
    const int r = rest / HT;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows) {
      const i64 head = (i64)(m0 + r) * H + ht * FRAG_HEADS + (l >> 2);
      v = ldg16(q + head * D + (D / 4) * (l & 3) + 16 * c);
    }
    q_s[idx] = v;
  }
  stage_weights<H>(w_s, weights, m0, nrows, BM * H, tid, nthreads);
  __syncthreads();

  // The block walks the union of its rows' windows; SplitN splits its tiles, warps take them round-robin
  // (independent streams).
  const int2 span = union_window<BM>(win_s, N);
  const int lo = span.x, hi = span.y;
  const TileRange tr = split_tile_range(hi - lo, TILE, split, split_n);
  const int tile_begin = tr.begin, tile_end = tr.end;

  // One tile in registers at a time: a register prefetch of the next cost 60 registers and spilled H >= 64 (ptxas -v).
  KTile<U, NCH> cur;
  int t = tile_begin + warp;

  for (; t < tile_end; t += num_warps) {
    const int base = lo + t * TILE;
    load_tile<D, U, NCH>(cur, k, kv_scale, base, hi, gid, tig);

#pragma unroll 1
    for (int r = 0; r < nrows; ++r) {
      const int2 w = win_s[r];
      // Warp-uniform: a row whose window misses this tile (a packed request's neighbour) skips the MMAs.
      const bool hit = window_meets(w, base, TILE);
      float res[U / 2];
      if (hit) {
        float part[2 * U];
#pragma unroll
        for (int i = 0; i < 2 * U; ++i) part[i] = 0.0f;
        const uint4* qr = q_s + r * (HT * NCH * WARP) + lane;
        const float* wr = w_s + r * H + 2 * tig;
#pragma unroll
        for (int ht = 0; ht < HT; ++ht) {
          float acc[U][4];
#pragma unroll
          for (int f = 0; f < U; ++f) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.0f;
#pragma unroll
          for (int c = 0; c < NCH; ++c) {
            const uint4 qv = qr[(ht * NCH + c) * WARP];
#pragma unroll
            for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
              for (int f = 0; f < U; ++f)
                mma_e4m3(acc[f], word(cur.k[f][0][c], 2 * s2), word(cur.k[f][1][c], 2 * s2),
                         word(cur.k[f][0][c], 2 * s2 + 1), word(cur.k[f][1][c], 2 * s2 + 1), word(qv, 2 * s2),
                         word(qv, 2 * s2 + 1));
          }
          // DESIGN: head reduction in registers. kv_scale is left out here (kv-scale hoist).
          const float2 wt = *reinterpret_cast<const float2*>(wr + ht * FRAG_HEADS);
#pragma unroll
          for (int f = 0; f < U; ++f) {
            part[2 * f] = fmaf(fmaxf(acc[f][0], 0.0f), wt.x, part[2 * f]);
            part[2 * f] = fmaf(fmaxf(acc[f][1], 0.0f), wt.y, part[2 * f]);
            part[2 * f + 1] = fmaf(fmaxf(acc[f][2], 0.0f), wt.x, part[2 * f + 1]);
            part[2 * f + 1] = fmaf(fmaxf(acc[f][3], 0.0f), wt.y, part[2 * f + 1]);
          }
        }
        reduce_scatter<U>(part, res, tig);
      }
      float* dst_row = out + (i64)(m0 + r) * out_row_stride;
#pragma unroll
      for (int i = 0; i < U / 2; ++i) {
        const int v = (U / 2) * tig + i;
        const int tok = base + FRAG_TOKENS * (v >> 1) + 8 * (v & 1) + gid;
        store_logit(dst_row, tok, hi, w, hit, clean, hit ? res[i] * cur.scale[i] : 0.0f);
      }
    }
  }

  // The fused -inf fill of [0, lo) and [hi, N), spread over all (split, warp) workers.
  if (clean)
    fill_outside_union(out, out_row_stride, m0, nrows, lo, hi, N, flags & FLAG_VEC4_FILL, split * num_warps + warp,
                       split_n * num_warps, lane);
}
