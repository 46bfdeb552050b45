// fp8_mqa_logits for sm_90a (Hopper, H100/H200): the CUDA twin of kernels/fp8_mqa_logits.hip.
//
//   logits[m, n] = sum_h relu(<Q[m,h,:], K[n,:]>) * kv_scale[n] * weights[m,h]   for n in [ks[m], ke[m])
//
// clamped to [0, N); -inf elsewhere when FLAG_CLEAN_LOGITS is set, untouched elsewhere when it is not.
//
// Same extern "C" argument list as the gfx950 kernel, so one kernarg packer serves both targets:
//   (q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, out_row_stride, M, N, split_n, num_warps, flags)
//   q [M, H, D] fp8 e4m3fn, k [N, D] fp8 e4m3fn (both 16-byte aligned, rows contiguous), kv_scale [N] f32,
//   weights [M, H] f32, cu_seqlen_ks / cu_seqlen_ke [M] int32, out [M, N] f32 rows out_row_stride apart.
//
// Design (the seed's, translated; "DESIGN:" marks each point):
//   * K streamed HBM -> registers, once per block of BLOCK_M query rows; each warp is an independent K stream
//     over its share of the block's tile range (warps split tiles, not rows), SplitN = gridDim.y.
//   * fp8 tensor cores through mma.sync.m16n8k32.e4m3: A = 16 tokens of K, B = 8 heads of one query row.
//     Putting tokens on the MMA's M side leaves each accumulator holding (token, head pair), so the head
//     reduction is in-thread FMAs plus a 4-lane butterfly, and the result lands one value per lane.
//   * Q (and weights) of the block's rows live in shared memory in MMA-fragment order: Hopper has far more
//     shared memory than the register file can spare, so BLOCK_M can grow to H * BLOCK_M = 256 (the seed
//     had to keep Q in VGPRs and stopped at BLOCK_M = 4 for 32 heads).
//   * kv_scale applied once per column after the head reduce (kv_scale >= 0, ReLU positive-homogeneous).
//   * fused -inf fill under clean_logits, high-m-first dispatch under FLAG_REVERSE_ROWS.
//
// Template parameters (one extern "C" symbol per instantiation; build.py picks the list):
//   H  heads: 32, 64, 128 (a multiple of the MMA's 8 columns)
//   D  head dim: 64, 128 (a multiple of 64: each lane carries D/4 contiguous bytes, 16-byte loads)
//   BM query rows per block (BLOCK_M), sized so Q fits in 48 KB of static shared memory
//   U  16-token MMA fragments per warp tile: 2 (32 tokens, next tile prefetched into registers) or
//      4 (64 tokens, no prefetch: each Q fragment read from shared memory feeds 4 MMAs). Symbol suffix u1/u2.
//
// This file holds what the shipped instantiations use (build.py: _wg, _wgr, _mma). The performance experiments
// of docs/PERFORMANCE.md v4-v6 (ping-pong, diagnostics, v5 lean epilogues, v6 SS form) live apart, in
// kernels/experimental/fp8_mqa_logits_sm90_experiments.cu, which #includes this file; bench/exp_sm90.py builds them.

#include <stdint.h>

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,  // write -inf outside each row's window (the fused -inf fill)
  FLAG_REVERSE_ROWS = 2,  // dispatch high-m row blocks first
  FLAG_VEC4_FILL = 4,     // out and out_row_stride keep every row 16-byte aligned: float4 -inf fill (sm_90a)
};

constexpr int WARP = 32;
constexpr int FRAG_TOKENS = 16;   // the MMA's M: tokens per A fragment
constexpr int FRAG_HEADS = 8;     // the MMA's N: heads per B fragment
constexpr int MAX_THREADS = 256;  // __launch_bounds__: num_warps <= 8 keeps the full 255-register budget

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

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  // i is a compile-time constant after unrolling; a switch keeps the uint4 in registers.
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ uint4 ldg16(const u8* p) {
  // K and Q are read-only for the whole launch: the non-coherent path is safe.
  return __ldg(reinterpret_cast<const uint4*>(p));
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

// DESIGN: grid is (ceil(M / BM), SplitN); high-m row blocks first when asked, since under causal
// masking a block's work grows with m and the longest blocks should not be the tail.
struct RowBlock {
  int m0, nrows, split;
  bool clean;
};

template <int BM>
__device__ __forceinline__ RowBlock row_block_of(int M, int flags) {
  const int row_blocks = (M + BM - 1) / BM;
  const int row_block = (flags & FLAG_REVERSE_ROWS) ? row_blocks - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int m0 = row_block * BM;
  return {m0, min(BM, M - m0), (int)blockIdx.y, (flags & FLAG_CLEAN_LOGITS) != 0};
}

// Each row's window clamped to [0, N) (empty when ke <= ks), staged once per block for every warp.
template <int BM>
__device__ __forceinline__ void stage_windows(int2* win_s, const int* __restrict__ ks, const int* __restrict__ ke,
                                              const RowBlock& rb, int N, int tid) {
  if (tid < BM) {
    int s = 0, e = 0;
    if (tid < rb.nrows) {
      s = max(min(ks[rb.m0 + tid], N), 0);
      e = max(min(ke[rb.m0 + tid], N), s);
    }
    win_s[tid] = make_int2(s, e);
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
  static_assert(U == 2 || U == 4, "U is 2 or 4 fragments");
  constexpr int HT = H / FRAG_HEADS;  // head tiles (B fragments) per row
  constexpr int NCH = D / 64;         // 16-byte chunks per lane per row: D/4 bytes each
  constexpr int TILE = FRAG_TOKENS * U;
  constexpr int QFRAGS = BM * HT * NCH;  // uint4 per lane for the block's Q
  constexpr bool PREFETCH = false;  // a register prefetch cost 60 registers and spilled H >= 64 (ptxas -v)
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

  const RowBlock rb = row_block_of<BM>(M, flags);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  stage_windows<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, rb, N, tid);
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
  for (int idx = tid; idx < BM * H; idx += nthreads) {
    const int r = idx / H;
    w_s[idx] = r < nrows ? weights[(i64)(m0 + r) * H + (idx % H)] : 0.0f;
  }
  __syncthreads();

  // The block walks the union of its rows' windows.
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

  // DESIGN: SplitN splits each block's tile range; warps take tiles round-robin (independent streams).
  const int tiles = (hi - lo + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);

  KTile<U, NCH> cur, nxt;
  int t = tile_begin + warp;
  if (PREFETCH && t < tile_end) load_tile<D, U, NCH>(nxt, k, kv_scale, lo + t * TILE, hi, gid, tig);

  for (; t < tile_end; t += num_warps) {
    const int base = lo + t * TILE;
    if (PREFETCH) {
      cur = nxt;
      const int tn = t + num_warps;
      if (tn < tile_end) load_tile<D, U, NCH>(nxt, k, kv_scale, lo + tn * TILE, hi, gid, tig);
    } else {
      load_tile<D, U, NCH>(cur, k, kv_scale, base, hi, gid, tig);
    }

#pragma unroll 1
    for (int r = 0; r < nrows; ++r) {
      const int2 w = win_s[r];
      // Warp-uniform: a row whose window misses this tile (a packed request's neighbour) skips the MMAs.
      const bool hit = w.x < w.y && base < w.y && base + TILE > w.x;
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
        // Columns >= hi belong to the fill below, so nothing is written twice (and nothing past N).
        if (tok < hi) {
          if (hit && tok >= w.x && tok < w.y)
            dst_row[tok] = res[i] * cur.scale[i];
          else if (clean)
            dst_row[tok] = -__int_as_float(0x7f800000);
        }
      }
    }
  }

  // DESIGN: fused -inf fill: [0, lo) and [hi, N) of every row of the block, spread over all
  // (split, warp) workers, so no separate O(M*N) pre-fill pass is needed.
  if (clean) {
    const int worker = split * num_warps + warp;
    const int workers = split_n * num_warps;
    const int fill = lo + (N - hi);
    for (int r = 0; r < nrows; ++r) {
      float* dst_row = out + (i64)(m0 + r) * out_row_stride;
      for (int idx = worker * WARP + lane; idx < fill; idx += workers * WARP) {
        const int c = idx < lo ? idx : hi + (idx - lo);
        dst_row[c] = -__int_as_float(0x7f800000);
      }
    }
  }
}

// ===================================================================================================
// wgmma path (the default): fp8 on Hopper's warpgroup tensor cores.
//
// Measured while building this file: on sm_90a, ptxas lowers mma.sync...e4m3 (the path above) to F2FP
// conversions plus two f16 HMMA.16816 and FADDs per MMA -- there is no native fp8 mma.sync on Hopper, only
// wgmma (QGMMA). So the warpgroup instruction is not an optional refinement here; it is the fp8 path.
//
// Shape: wgmma.m64nNk32, A = 64 tokens of K from REGISTERS (each warp of the warpgroup holds 16 tokens in
// exactly the m16n8k32 A-fragment layout, loaded with the same 16-byte-per-lane scheme as the mma path),
// B = the block's Q (N = BLOCK_M * H columns: query row r's heads are columns [r*H, (r+1)*H)) from shared
// memory through a matrix descriptor. K never touches shared memory: it is streamed HBM -> registers per
// warpgroup (the seed's "no LDS staging"), and warpgroups split the block's tile range.
//
// The A-register k-permutation (lane tig carries ITS OWN contiguous D/4 bytes, see mma_e4m3) is undone by
// writing Q into shared memory with the same permutation: logical k slot (s, 16*hh + 4*tig + j) of the
// wgmma holds Q[n, tig*D/4 + 8s + 4hh + j]. Q is staged once per block, so the permutation is free.
//
// Shared-memory layout of B: no swizzle, K-major "core matrices" of 8 columns (n) x 16 bytes (k), 128
// contiguous bytes each; core matrix (n/8, kc) at (n/8) * SBO + kc * LBO with LBO = 128 (adjacent in K)
// and SBO = 8 * D (adjacent in N). k-step s starts at kc = 2s, i.e. base + 256 s.
//
// Accumulator layout (PTX ISA, wgmma D fragment): warp w of the warpgroup owns rows 16w..16w+15; lane
// (gid, tig) holds d[4j + 0/1] = (row gid, cols 8j + 2tig + 0/1) and d[4j + 2/3] = (row gid + 8, same cols).
// Rows are tokens, so query row r's head sum is an in-thread FMA chain over j in [r*H/8, (r+1)*H/8) plus
// the same quad butterfly as the mma path.
// ===================================================================================================

// Operand lists are written out: inline asm needs them literal. One wgmma = one k32 step.
__device__ __forceinline__ void wgmma_m64n64k32(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n256k32(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_k32(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int acc) {
  if constexpr (N == 64) wgmma_m64n64k32(d, a, desc, acc);
  else if constexpr (N == 128) wgmma_m64n128k32(d, a, desc, acc);
  else {
    static_assert(N == 256, "wgmma N: 64, 128 or 256");
    wgmma_m64n256k32(d, a, desc, acc);
  }
}

__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  // Matrix descriptor: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, swizzle 0 (none).
  return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
}

template <int NCH>
struct WgTile {
  uint4 k[2][NCH];  // this lane's D/4 bytes of tokens gid and gid + 8 of its warp's 16
  float scale[2];   // kv_scale of those two tokens
};

template <int D, int NCH>
__device__ __forceinline__ void load_wg_tile(WgTile<NCH>& kt, const u8* __restrict__ k,
                                             const float* __restrict__ kv_scale, int base, int hi, int gid,
                                             int tig) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Tokens past the union window fetch the last valid token; the store masks them.
    const int tok = min(base + 8 * h + gid, hi - 1);
    const u8* p = k + (i64)tok * D + (D / 4) * tig;
#pragma unroll
    for (int c = 0; c < NCH; ++c) kt.k[h][c] = ldg16(p + 16 * c);
    kt.scale[h] = __ldg(kv_scale + tok);
  }
}

// ---- helpers of the epilogues ---------------------------------------------------------------------
// relu + round to bf16, two at a time: `lo` lands in the low half (the lower k index of an MMA fragment).
__device__ __forceinline__ uint32_t relu_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// D += A(16x16 bf16) * B(16x8 bf16), f32 accumulate: native HMMA.16816.F32.BF16 on sm_90.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Keeps the compiler from moving reads of wgmma accumulators above the wait (CUTLASS's fence_operand).
template <int N>
__device__ __forceinline__ void fence_regs(float (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(a[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
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

// Epilogues of the wgmma path (template parameter EPI):
enum : int {
  EPI_FP32 = 0,  // v1-v3: per accumulator FMNMX + FFMA on the CUDA cores, quad butterfly
  EPI_MMA = 1,   // mirror of the gfx950 MFMA head-reduce: cvt.rn.relu.bf16x2 then a bf16 mma.sync against
                 // block-diagonal weights, so the head sum runs on the tensor cores
};

// Hooks for kernels/experimental/fp8_mqa_logits_sm90_experiments.cu, which alone defines them (the shipped
// instantiations, PP = false with EPI_FP32 / EPI_MMA, never instantiate either):
//   WgPingPongLoop<true>::run  the tile loop of PP = true (two accumulator sets, ping-pong);
//   WgEpilogueExt<EPI>::run    the epilogue of any EPI other than EPI_FP32 / EPI_MMA (diagnostics).
template <bool PP>
struct WgPingPongLoop;
template <int EPI>
struct WgEpilogueExt;

template <int H, int D, int BM, int EPI, bool PP>
__device__ __forceinline__ void fp8_mqa_logits_wg_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                       const float* __restrict__ kv_scale,
                                                       const float* __restrict__ weights,
                                                       const int* __restrict__ cu_seqlen_ks,
                                                       const int* __restrict__ cu_seqlen_ke,
                                                       float* __restrict__ out, i64 out_row_stride, int M, int N,
                                                       int split_n, int num_warps, int flags) {
  constexpr int NQ = BM * H;  // wgmma N: every head of every row of the block
  static_assert(NQ == 64 || NQ == 128 || NQ == 256, "BLOCK_M * H must be 64, 128 or 256");
  static_assert(D % 64 == 0, "D must be a multiple of 64");
  static_assert(BM <= 8, "the MMA head-reduce puts the block's rows on an n8 MMA");
  constexpr int KS = D / 32;     // k32 steps
  constexpr int NCH = D / 64;    // 16-byte chunks per lane per token
  constexpr int TILE = 64;       // tokens per warpgroup tile (the wgmma's M)
  constexpr int NACC = NQ / 2;   // accumulator floats per thread
  constexpr int V = 2 * BM;      // fp32 epilogue: per-lane partial sums (row, token gid / gid + 8)
  constexpr int VPL = V >= 4 ? V / 4 : 1;
  constexpr int SLABS = NQ / 16; // k16 slabs of the head-reduce MMA
  constexpr uint32_t LBO = 128, SBO = 8 * D;

  __shared__ __align__(128) u8 q_s[NQ * D];
  __shared__ float w_s[NQ];
  __shared__ int2 win_s[BM];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup, and this warp's 16-row slice of the wgmma's 64
  const int nwg = num_warps / 4;
  const int gid = lane >> 2, tig = lane & 3;
  const int nthreads = num_warps * WARP;

  const RowBlock rb = row_block_of<BM>(M, flags);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  stage_windows<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, rb, N, tid);
  // Stage Q: 16-byte global reads, scattered as 4-byte words into the permuted core-matrix layout.
  for (int idx = tid; idx < NQ * (D / 16); idx += nthreads) {
    const int n = idx / (D / 16);
    const int d0 = 16 * (idx % (D / 16));
    const int r = n / H;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows) v = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + d0);
    const int owner = d0 / (D / 4);       // the tig whose A chunk holds these depths
    const int s0 = (d0 % (D / 4)) / 8;    // even: this chunk is k-steps s0 and s0 + 1
    u8* row = q_s + (n / 8) * SBO + (n % 8) * 16 + 4 * owner;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int kc = 2 * (s0 + w / 2) + (w % 2);  // core matrix along k: step s, half hh = w % 2
      *reinterpret_cast<uint32_t*>(row + kc * LBO) = word(v, w);
    }
  }
  for (int idx = tid; idx < NQ; idx += nthreads) {
    const int r = idx / H;
    w_s[idx] = r < nrows ? weights[(i64)(m0 + r) * H + (idx % H)] : 0.0f;
  }
  // Generic-proxy stores read by the async proxy (wgmma) need this fence before the barrier.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

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
  // Same value in every lane already; the shuffle makes that visible to ptxas's uniformity analysis.
  lo = __shfl_sync(0xffffffffu, lo, 0);
  hi = __shfl_sync(0xffffffffu, hi, 0);

  const int tiles = (hi - lo + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);
  const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_s);

  // EPI_MMA: B operand of the head-reduce MMA, the block-diagonal weights, staged once per block in
  // shared memory in fragment order (one 8-byte read per lane per slab; registers would cost 2 per slab and
  // a resident warpgroup). Slab i covers columns [16i, 16i + 16) = row 16i / H (H >= 16), so lane
  // (gid, tig) holds weights[row][16i%H + 2tig + {0, 1, 8, 9}] when gid == that row, zero otherwise.
  __shared__ uint2 wb_s[EPI == EPI_MMA ? SLABS * WARP : 1];
  if constexpr (EPI == EPI_MMA) {
    for (int idx = tid; idx < SLABS * WARP; idx += nthreads) {
      const int i = idx / WARP, l = idx % WARP, g = l >> 2, tg = l & 3;
      const bool mine = g == (16 * i) / H;
      wb_s[idx] = mine ? make_uint2(bf16x2(w_s[16 * i + 2 * tg], w_s[16 * i + 2 * tg + 1]),
                                    bf16x2(w_s[16 * i + 8 + 2 * tg], w_s[16 * i + 9 + 2 * tg]))
                       : make_uint2(0u, 0u);
    }
    __syncthreads();
  }

  auto tile_hit = [&](int base) {
    // Warpgroup-uniform: skip the tensor work when no row's window meets this tile (packed requests).
    bool h = false;
#pragma unroll
    for (int r = 0; r < BM; ++r) {
      const int2 w = win_s[r];
      h |= w.x < w.y && base < w.y && base + TILE > w.x;
    }
    return h;
  };
  auto issue = [&](float (&acc)[NACC], const WgTile<NCH>& kt) {
    fence_regs(acc);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int c = s / 2, s2 = s % 2;
      const uint32_t a[4] = {word(kt.k[0][c], 2 * s2), word(kt.k[1][c], 2 * s2),
                             word(kt.k[0][c], 2 * s2 + 1), word(kt.k[1][c], 2 * s2 + 1)};
      wgmma_k32<NQ>(acc, a, smem_desc(q_base + 256 * s, LBO, SBO), s > 0);
    }
    fence_regs(acc);
  };
  auto commit = [] { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); };
  // One value (row r, token tok) of the tile: the logit inside the row's window, -inf outside it.
  auto put = [&](int r, int tok, bool hit, float v) {
    if (r < nrows && tok < hi) {
      const int2 w = win_s[r];
      float* dst = out + (i64)(m0 + r) * out_row_stride + tok;
      if (hit && tok >= w.x && tok < w.y)
        *dst = v;
      else if (clean)
        *dst = -__int_as_float(0x7f800000);
    }
  };
  auto epilogue = [&](float (&acc)[NACC], float sc0, float sc1, int base, bool hit) {
    const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
    if constexpr (EPI == EPI_MMA) {
      // Accumulator (row gid / gid+8, cols 8j + 2tig + {0,1}) is exactly the m16n8k16 A fragment of slab
      // i = columns 16i..16i+15: a0 = (gid, 2tig..) = d[8i+0,1], a1 = (gid+8, ..) = d[8i+2,3],
      // a2 = (gid, 8+2tig..) = d[8i+4,5], a3 = (gid+8, 8+2tig..) = d[8i+6,7]. No shuffles.
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (PP || hit) {  // PP: no accumulator read under a branch (ptxas would serialize the wgmmas)
#pragma unroll
        for (int i = 0; i < SLABS; ++i) {
          const uint2 b = wb_s[i * WARP + lane];
          mma_bf16(c, relu_bf16x2(acc[8 * i + 0], acc[8 * i + 1]), relu_bf16x2(acc[8 * i + 2], acc[8 * i + 3]),
                   relu_bf16x2(acc[8 * i + 4], acc[8 * i + 5]), relu_bf16x2(acc[8 * i + 6], acc[8 * i + 7]),
                   b.x, b.y);
        }
      }
      // C fragment: c0/c1 = (token gid, rows 2tig, 2tig+1), c2/c3 = (token gid+8, same rows).
      if (2 * tig < BM) {
        put(2 * tig, tok0, hit, c[0] * sc0);
        put(2 * tig, tok0 + 8, hit, c[2] * sc1);
        if (2 * tig + 1 < BM) {
          put(2 * tig + 1, tok0, hit, c[1] * sc0);
          put(2 * tig + 1, tok0 + 8, hit, c[3] * sc1);
        }
      }
    } else if constexpr (EPI != EPI_FP32) {
      WgEpilogueExt<EPI>::run(acc, sc0, sc1, tok0, hit, put);  // experiments only
    } else {
      // DESIGN: head reduction in registers; kv_scale hoisted past it.
      float res[VPL];
      if (PP || hit) {
        float part[V];
#pragma unroll
        for (int i = 0; i < V; ++i) part[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < NQ / 8; ++j) {
          const int r = j / (H / 8);
          const float2 w = *reinterpret_cast<const float2*>(w_s + 8 * j + 2 * tig);
          part[2 * r] = fmaf(fmaxf(acc[4 * j + 0], 0.0f), w.x, part[2 * r]);
          part[2 * r] = fmaf(fmaxf(acc[4 * j + 1], 0.0f), w.y, part[2 * r]);
          part[2 * r + 1] = fmaf(fmaxf(acc[4 * j + 2], 0.0f), w.x, part[2 * r + 1]);
          part[2 * r + 1] = fmaf(fmaxf(acc[4 * j + 3], 0.0f), w.y, part[2 * r + 1]);
        }
        if constexpr (V >= 4) {
          reduce_scatter<V / 2>(part, res, tig);
        } else {
          // One row: scatter the two tokens over lane pairs, then finish the sum within each pair.
          const bool up2 = tig & 2;
          float x = up2 ? part[1] : part[0];
          x += __shfl_xor_sync(0xffffffffu, up2 ? part[0] : part[1], 2);
          res[0] = x + __shfl_xor_sync(0xffffffffu, x, 1);
        }
      }
#pragma unroll
      for (int i = 0; i < VPL; ++i) {
        const int v = V >= 4 ? VPL * tig + i : (tig >> 1);
        const int r = v >> 1, hh = v & 1;
        if (V >= 4 || (tig & 1) == 0) put(r, tok0 + 8 * hh, hit, hit ? res[i] * (hh ? sc1 : sc0) : 0.0f);
      }
    }
  };

  float accA[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) accA[i] = 0.0f;

  if constexpr (!PP) {
    // DESIGN: warpgroups split the tile range; the next tile's K is prefetched into registers while
    // this one is multiplied, so each warpgroup keeps a K stream in flight.
    WgTile<NCH> cur, nxt;
    int t = tile_begin + wg;
    if (t < tile_end) load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
    for (; t < tile_end; t += nwg) {
      const int base = lo + t * TILE;
      cur = nxt;
      if (t + nwg < tile_end)
        load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
      const bool hit = tile_hit(base);
      if (hit) {
        issue(accA, cur);
        commit();
        wgmma_wait<0>();
        fence_regs(accA);
      }
      epilogue(accA, cur.scale[0], cur.scale[1], base, hit);
    }
  } else {  // PP: the ping-pong loop (kernels/experimental/ only)
    WgPingPongLoop<PP>::template run<D, NCH, TILE>(accA, k, kv_scale, lo, hi, tile_begin, tile_end, wg, nwg, wq, gid,
                                                  tig, tile_hit, issue, commit, epilogue);
  }

  // DESIGN: fused -inf fill of [0, lo) and [hi, N), spread over every (split, warp) worker.
  if (clean) {
    const int worker = split * num_warps + warp;
    const int workers = split_n * num_warps;
    const bool vec4 = flags & FLAG_VEC4_FILL;
    for (int r = 0; r < nrows; ++r) {
      float* dst_row = out + (i64)(m0 + r) * out_row_stride;
      fill_neg_inf(dst_row, 0, lo, vec4, worker, workers, lane);
      fill_neg_inf(dst_row, hi, N, vec4, worker, workers, lane);
    }
  }
}

// SS form (v6 experiments, ws "wss"): A (the K tile) from shared memory too, both operands through matrix descriptors.
__device__ __forceinline__ void wgmma_ss_m64n64k32(float (&d)[32], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_ss_m64n128k32(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_ss_m64n256k32(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(accumulate));
}
template <int N>
__device__ __forceinline__ void wgmma_ss_k32(float (&d)[N / 2], uint64_t da, uint64_t db, int acc) {
  if constexpr (N == 64) wgmma_ss_m64n64k32(d, da, db, acc);
  else if constexpr (N == 128) wgmma_ss_m64n128k32(d, da, db, acc);
  else {
    static_assert(N == 256, "SS wgmma N: 64, 128 or 256");
    wgmma_ss_m64n256k32(d, da, db, acc);
  }
}

// ===================================================================================================
// Warp-specialised wgmma path (impl "ws", docs/PERFORMANCE.md v7).
//
// Block = 3 warpgroups, one block per SM (__launch_bounds__(384, 1)):
//   * warpgroup 0, warp 0: the PRODUCER. It keeps a WS_STAGES-deep ring of K tiles (64 tokens each) in dynamic
//     shared memory full with cp.async.bulk (the bulk copy engine without a tensor map: a tile of K is
//     64 * D contiguous bytes, so one copy per tile, no descriptor, and the kernel keeps the plain argument
//     list), completed on a "full" mbarrier per stage with complete_tx; it waits on the stage's "empty"
//     mbarrier before refilling. (Per-row copies into padded rows were tried first: ptxas turns a per-lane
//     cp.async.bulk into a ~10-instruction waterfall per copy, 640 producer issue slots per tile.)
//   * warpgroup 0, warps 1-3: the fused -inf fill of [0, lo) and [hi, N), while the consumers compute.
//   * warpgroups 1 and 2: CONSUMERS. Each owns half of the block's rows (BMW = BM / 2 rows, wgmma N = BMW * H)
//     and its own copy of their Q in shared memory; both read every K tile of the ring (the tile is fetched
//     once for 2 * N query columns). A = the K tile from registers (the same k-permuted fragments as "wg",
//     read from the ring with LDS.128), B = Q from shared memory. Exact f32 epilogue as "wg", weights held in
//     registers. The two consumers take turns issuing their wgmmas (named barriers 1 and 2, CUTLASS's
//     "ping-pong"), so the tensor core runs one warpgroup's tile while the other does its epilogue.
//   * setmaxnreg moves registers from the producer warpgroup (40) to the consumers (232).
//   The same body, templated on NC consumers (ORDER: the turn-taking above; SS: both operands from shared memory,
//   see fp8_mqa_logits_ws_body), gives the experiment forms ws3 / ws4 / ws4n / wss (bench/race_sm90.py --build).
// ===================================================================================================
constexpr int WS_STAGES = 6;          // K tiles in flight; mirrored by WS_STAGES in rawindexer/dispatch/sm90.py
constexpr int WS_ORDER_BAR = 1;       // named barriers 1..NC: the consumers' wgmma issue order (0 = __syncthreads)
// NC consumer warpgroups: 128 * (1 + NC) threads. setmaxnreg.inc draws on the CTA's own pool (SASS:
// USETMAXREG.TRY_ALLOC.CTAPOOL), which holds only what the producer warpgroup gave back with setmaxnreg.dec, so
//   NC * (consumer - entry) <= entry - producer,   entry = the registers per thread the block launched with
// (65536 / threads rounded down to 8, as ptxas allocates under __launch_bounds__(threads, 1)). An increase past
// that waits forever: the first 4-consumer build asked for 120 with entry 96 and producer 32 and hung on the H200.
template <int NC>
__host__ __device__ constexpr int ws_threads() { return 128 * (1 + NC); }
template <int NC>
__host__ __device__ constexpr int ws_entry_regs() { return 65536 / ws_threads<NC>() / 8 * 8; }
template <int NC>
__host__ __device__ constexpr int ws_producer_regs() { return NC >= 4 ? 32 : 40; }  // NC = 4: 96 + 64 / 4 = 112
template <int NC>
__host__ __device__ constexpr int ws_consumer_regs() {
  return (ws_entry_regs<NC>() + (ws_entry_regs<NC>() - ws_producer_regs<NC>()) / NC) / 8 * 8 > 240
             ? 240
             : (ws_entry_regs<NC>() + (ws_entry_regs<NC>() - ws_producer_regs<NC>()) / NC) / 8 * 8;
}
// Dynamic shared memory of one block (the host computes the same sum, rawindexer/dispatch/sm90.py):
//   Q of every consumer (NC * NQ * D) | the K ring (WS_STAGES * 64 * D) | the weights (NC * NQ floats)

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Global -> shared bulk copy (no tensor map), completion counted in bytes on mbarrier `bar`.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// 16-byte cp.async that bypasses L1 (.cg); src_bytes = 0 writes zeros (a token past the window).
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_groups() {  // at most N of this thread's groups still in flight
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// SS = false: the K tile is read into registers (RS wgmma), filled by one cp.async.bulk per tile (row-major).
// SS = true ("wss", experiment): both wgmma operands from shared memory, so the consumers hold no K registers
// (4 consumers fit in 112 registers); the K tile must then be in core-matrix layout, which a one-dimensional
// bulk copy cannot produce, so warps 0-1 of the producer warpgroup build it with 16-byte cp.async.cg (8 lanes
// per 128-byte core-matrix row: conflict-free); warps 2-3 do the fill. A stage is signalled WS_SS_LAG tiles
// later, after cp.async.wait_group + fence.proxy.async in the writing threads (generic-proxy writes read by
// wgmma's async proxy), so the consumers need no fence of their own (on them it would be a MEMBAR.ALL.CTA
// waiting for their own previous stores every tile).
constexpr int WS_SS_LAG = 3;  // tiles of copies in flight per producer thread, < WS_STAGES
template <int H, int D, int BM, int NC, bool ORDER, bool SS>
__device__ __forceinline__ void fp8_mqa_logits_ws_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                       const float* __restrict__ kv_scale,
                                                       const float* __restrict__ weights,
                                                       const int* __restrict__ cu_seqlen_ks,
                                                       const int* __restrict__ cu_seqlen_ke,
                                                       float* __restrict__ out, i64 out_row_stride, int M, int N,
                                                       int split_n, int flags) {
  constexpr int BMW = BM / NC;  // rows per consumer warpgroup
  constexpr int NQ = BMW * H;   // wgmma N of one consumer
  constexpr int THREADS = ws_threads<NC>();
  constexpr bool WREG = NC <= 3;  // weights in registers (32 at N = 128) while the register budget allows it
  static_assert(BM % NC == 0, "BLOCK_M splits evenly over the consumers");
  static_assert(NC * (ws_consumer_regs<NC>() - ws_entry_regs<NC>()) <= ws_entry_regs<NC>() - ws_producer_regs<NC>(),
                "setmaxnreg: the consumers may take only what the producer warpgroup gives back");
  static_assert(NQ == 64 || NQ == 128 || NQ == 256, "BLOCK_M / NC * H must be 64, 128 or 256");
  static_assert(D % 64 == 0, "D must be a multiple of 64");
  constexpr int KS = D / 32, NCH = D / 64, TILE = 64, NACC = NQ / 2;
  constexpr int V = 2 * BMW, VPL = V >= 4 ? V / 4 : 1;
  constexpr int ROW = D;  // ring row pitch: the tile as it lies in global memory
  constexpr int STAGE_BYTES = TILE * ROW;
  constexpr uint32_t LBO = 128, SBO = 8 * D;

  __shared__ int2 win_s[BM];
  __shared__ __align__(8) uint64_t full_bar[WS_STAGES];
  __shared__ __align__(8) uint64_t empty_bar[WS_STAGES];
  extern __shared__ __align__(128) u8 dyn_s[];
  u8* const q_all = dyn_s;                                   // [NC][NQ * D]
  u8* const ring_s = dyn_s + NC * NQ * D;                    // [WS_STAGES][STAGE_BYTES]
  float* const w_all = reinterpret_cast<float*>(ring_s + WS_STAGES * STAGE_BYTES);  // [NC][NQ]

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wgi = warp / 4, wq = warp % 4;
  const int gid = lane >> 2, tig = lane & 3;

  const RowBlock rb = row_block_of<BM>(M, flags);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  stage_windows<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, rb, N, tid);
  // Q of consumer c = rows [c * BMW, (c + 1) * BMW): RS in the permuted core-matrix layout of the "wg" path (the
  // A fragments carry the same permutation), SS in natural depth order (the K tile is in natural order too).
  for (int idx = tid; idx < NC * NQ * (D / 16); idx += THREADS) {
    const int c = idx / (NQ * (D / 16));
    const int rest = idx % (NQ * (D / 16));
    const int n = rest / (D / 16);
    const int d0 = 16 * (rest % (D / 16));
    const int r = c * BMW + n / H;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows) v = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + d0);
    if constexpr (SS) {
      *reinterpret_cast<uint4*>(q_all + c * (NQ * D) + (n / 8) * SBO + (n % 8) * 16 + (d0 / 16) * LBO) = v;
    } else {
      const int owner = d0 / (D / 4);
      const int s0 = (d0 % (D / 4)) / 8;
      u8* row = q_all + c * (NQ * D) + (n / 8) * SBO + (n % 8) * 16 + 4 * owner;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int kc = 2 * (s0 + w / 2) + (w % 2);
        *reinterpret_cast<uint32_t*>(row + kc * LBO) = word(v, w);
      }
    }
  }
  constexpr int PRODUCERS = SS ? 64 : 1;  // threads that fill the ring (SS: warps 0-1; RS: one lane)
  constexpr int FILL_WARP0 = SS ? 2 : 1;  // the producer warpgroup's warps from here on do the -inf fill
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(full_bar);
  const uint32_t empty0 = (uint32_t)__cvta_generic_to_shared(empty_bar);
  const uint32_t ring0 = (uint32_t)__cvta_generic_to_shared(ring_s);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < WS_STAGES; ++s) {
      mbar_init(full0 + 8 * s, PRODUCERS);  // RS: the arrive.expect_tx; SS: each producer thread, once its copies landed
      mbar_init(empty0 + 8 * s, 128 * NC);   // every consumer thread, once its fragments are read
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // Q (generic stores) is read by wgmma
  __syncthreads();

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
  lo = __shfl_sync(0xffffffffu, lo, 0);
  hi = __shfl_sync(0xffffffffu, hi, 0);
  const int tiles = (hi - lo + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);

  if (wgi == 0) {
    setmaxnreg_dec<ws_producer_regs<NC>()>();
    if (SS && warp < FILL_WARP0) {
      if constexpr (SS) {
        // PRODUCER (SS): chunk c of a tile = token 8 * (c / (8 * D/16)) + c % 8, depth chunk (c / 8) % (D/16),
        // stored at its core-matrix place; tokens past hi are zero-filled.
        static_assert(PRODUCERS % (8 * (D / 16)) == 0, "each producer thread keeps one (token % 8, chunk) place");
        constexpr int TH_STEP = PRODUCERS / (8 * (D / 16));  // 8-token groups advanced per copy of one thread
        const int t8 = tid % 8, kc = (tid / 8) % (D / 16), th0 = tid / (8 * (D / 16));
        const uint32_t dst_lane = th0 * SBO + kc * LBO + t8 * 16;
        const u8* src_lane = k + 16 * kc;
        static_assert(WS_SS_LAG < WS_STAGES, "a stage is signalled before the producer waits to refill it");
        int stage = 0, signal = 0, issued = 0;
        uint32_t phase = 0;
        auto signal_next = [&] {
          mbar_arrive(full0 + 8 * signal);
          signal = signal == WS_STAGES - 1 ? 0 : signal + 1;
        };
        for (int t = tile_begin, i = 0; t < tile_end; ++t, ++i) {
          if (i >= WS_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
          const int tok0 = lo + t * TILE + 8 * th0 + t8;
          const uint32_t dst0 = ring0 + stage * STAGE_BYTES + dst_lane;
#pragma unroll
          for (int j = 0; j < TILE / 8 / TH_STEP; ++j) {
            const int tok = tok0 + 8 * TH_STEP * j;
            const bool in = tok < hi;
            cp_async16_zfill(dst0 + j * TH_STEP * SBO, src_lane + (i64)(in ? tok : lo) * D, in ? 16u : 0u);
          }
          cp_async_commit_group();
          if (i >= WS_SS_LAG) {  // tile i - WS_SS_LAG has landed: make it visible to wgmma, then signal it
            cp_async_wait_groups<WS_SS_LAG>();
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            signal_next();
          }
          issued = i + 1;
          if (++stage == WS_STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        cp_async_wait_groups<0>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int r = 0; r < min(issued, WS_SS_LAG); ++r) signal_next();
      }
    } else if (!SS && warp == 0) {
      // PRODUCER (one lane): one copy per tile; tokens past hi are not fetched (their logits are never stored).
      int stage = 0;
      uint32_t phase = 0;
      for (int t = tile_begin, i = 0; lane == 0 && t < tile_end; ++t, ++i) {
        if (i >= WS_STAGES) mbar_wait(empty0 + 8 * stage, phase ^ 1);
        const int base = lo + t * TILE;
        const uint32_t bytes = (uint32_t)(min(TILE, hi - base) * D);
        mbar_arrive_expect_tx(full0 + 8 * stage, bytes);
        bulk_copy_g2s(ring0 + stage * STAGE_BYTES, k + (i64)base * D, bytes, full0 + 8 * stage);
        if (++stage == WS_STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    } else if (clean) {
      // DESIGN: fused -inf fill, here overlapped with the consumers' tiles (disjoint columns).
      const int worker = split * (4 - FILL_WARP0) + (warp - FILL_WARP0);  // the producer warpgroup's other warps
      const int workers = split_n * (4 - FILL_WARP0);
      const bool vec4 = flags & FLAG_VEC4_FILL;
      for (int r = 0; r < nrows; ++r) {
        float* dst_row = out + (i64)(m0 + r) * out_row_stride;
        fill_neg_inf(dst_row, 0, lo, vec4, worker, workers, lane);
        fill_neg_inf(dst_row, hi, N, vec4, worker, workers, lane);
      }
    }
  } else {
    setmaxnreg_inc<ws_consumer_regs<NC>()>();
    const int wg = wgi - 1;   // consumer index: rows [wg * BMW, (wg + 1) * BMW) of the block
    const int r0 = wg * BMW;
    // This lane's weights: accumulator column group j holds columns 8j + 2tig + {0, 1} = (row 8j / H, heads).
    // WREG: in registers; else in this consumer's slice of shared memory (written and read by its own warps).
    float2 wr[WREG ? NQ / 8 : 1];
    float* const w_s = w_all + wg * NQ;
    if constexpr (WREG) {
#pragma unroll
      for (int j = 0; j < NQ / 8; ++j) {
        const int r = r0 + (8 * j) / H, h = (8 * j) % H + 2 * tig;
        const float* wp = weights + (i64)(m0 + r) * H + h;  // 4-byte aligned only: two scalar loads
        wr[j] = r < nrows ? make_float2(wp[0], wp[1]) : make_float2(0.f, 0.f);
      }
    } else {
      for (int idx = tid - 128 * wgi; idx < NQ; idx += 128) {
        const int r = r0 + idx / H;
        w_s[idx] = r < nrows ? weights[(i64)(m0 + r) * H + idx % H] : 0.0f;
      }
      named_bar_sync(WS_ORDER_BAR + NC + wg, 128);  // this consumer's warps only
    }
    auto weight = [&](int j) {
      if constexpr (WREG) return wr[j];
      else return *reinterpret_cast<const float2*>(w_s + 8 * j + 2 * tig);
    };
    const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_all + wg * (NQ * D));
    const u8* frag0 = ring_s + (16 * wq + gid) * ROW + (D / 4) * tig;

    auto tile_hit = [&](int base) {
      bool h = false;
#pragma unroll
      for (int r = 0; r < BMW; ++r) {
        const int2 w = win_s[r0 + r];
        h |= w.x < w.y && base < w.y && base + TILE > w.x;
      }
      return h;
    };
    auto put = [&](int r, int tok, bool hit, float v) {  // r: row of this consumer
      if (r0 + r < nrows && tok < hi) {
        const int2 w = win_s[r0 + r];
        float* dst = out + (i64)(m0 + r0 + r) * out_row_stride + tok;
        if (hit && tok >= w.x && tok < w.y)
          *dst = v;
        else if (clean)
          *dst = -__int_as_float(0x7f800000);
      }
    };

    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
    int stage = 0;
    uint32_t phase = 0;
    for (int t = tile_begin, i = 0; t < tile_end; ++t, ++i) {
      const int base = lo + t * TILE;
      const int tok0 = base + 16 * wq + gid;  // this lane's tokens: tok0 and tok0 + 8
      const float sc0 = __ldg(kv_scale + min(tok0, hi - 1));
      const float sc1 = __ldg(kv_scale + min(tok0 + 8, hi - 1));
      const bool hit = tile_hit(base);
      mbar_wait(full0 + 8 * stage, phase);
      WgTile<SS ? 1 : NCH> kt;
      if constexpr (!SS) {
        // Rows are D bytes apart, so at D = 128 the 8 gids of one LDS.128 would hit the same banks: odd gids read
        // their two chunks in the other order (8 distinct 16-byte bank groups per instruction), then swap back.
        const u8* fr = frag0 + stage * STAGE_BYTES;
        constexpr bool FLIP = NCH == 2 && NC < 4;  // NC = 4: no registers to spare for the swap (2-way conflicts)
        const int flip = FLIP ? (gid & 1) : 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int c = 0; c < NCH; ++c)
            kt.k[h][c] = *reinterpret_cast<const uint4*>(fr + h * 8 * ROW + 16 * (c ^ flip));
          if constexpr (FLIP) {
            const uint4 a = kt.k[h][0], b = kt.k[h][1];
            kt.k[h][0] = flip ? b : a;
            kt.k[h][1] = flip ? a : b;
          }
        }
        // Materialise the swapped fragments before the first wgmma: built lazily, they shared 4 registers and
        // ptxas then waited for each wgmma before building the next one's A (DEPBAR after every QGMMA).
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < NCH; ++c)
            asm volatile("" : "+r"(kt.k[h][c].x), "+r"(kt.k[h][c].y), "+r"(kt.k[h][c].z), "+r"(kt.k[h][c].w));
      }
      // ORDER (ping-pong): consumer 0 issues tile t, then consumer 1 tile t, ..., then consumer 0 tile t + 1.
      // Consumer c waits on barrier 1 + c and passes the turn on barrier 1 + (c + 1) % NC; consumer 0 skips its
      // first wait and the last consumer its last pass, so every arrive meets a sync.
      if (ORDER && (wg > 0 || i > 0)) named_bar_sync(WS_ORDER_BAR + wg, 256);
      const bool pass_turn = ORDER && !(wg == NC - 1 && t + 1 == tile_end);
      const int next_bar = WS_ORDER_BAR + (wg + 1) % NC;
      if (hit) {
        fence_regs(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          if constexpr (SS) {
            wgmma_ss_k32<NQ>(acc, smem_desc(ring0 + stage * STAGE_BYTES + 256 * s, LBO, SBO),
                             smem_desc(q_base + 256 * s, LBO, SBO), s > 0);
          } else {
            const int c = s / 2, s2 = s % 2;
            const uint32_t a[4] = {word(kt.k[0][c], 2 * s2), word(kt.k[1][c], 2 * s2), word(kt.k[0][c], 2 * s2 + 1),
                                   word(kt.k[1][c], 2 * s2 + 1)};
            wgmma_k32<NQ>(acc, a, smem_desc(q_base + 256 * s, LBO, SBO), s > 0);
          }
        }
        fence_regs(acc);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        if (pass_turn) named_bar_arrive(next_bar, 256);
        if (!SS) mbar_arrive(empty0 + 8 * stage);  // RS: the fragments are in registers (the wgmma has read them)
        wgmma_wait<0>();
        fence_regs(acc);
        if (SS) mbar_arrive(empty0 + 8 * stage);  // SS: the wgmma has finished reading the tile
      } else {
        if (pass_turn) named_bar_arrive(next_bar, 256);
        mbar_arrive(empty0 + 8 * stage);
      }
      if (++stage == WS_STAGES) {
        stage = 0;
        phase ^= 1;
      }
      // Exact f32 head reduction (as "wg"), weights from registers (WREG) or shared memory, kv_scale after it.
      float res[VPL];
      if (hit) {
        float part[V];
#pragma unroll
        for (int v = 0; v < V; ++v) part[v] = 0.0f;
#pragma unroll
        for (int j = 0; j < NQ / 8; ++j) {
          const int r = j / (H / 8);
          const float2 w = weight(j);
          part[2 * r] = fmaf(fmaxf(acc[4 * j + 0], 0.0f), w.x, part[2 * r]);
          part[2 * r] = fmaf(fmaxf(acc[4 * j + 1], 0.0f), w.y, part[2 * r]);
          part[2 * r + 1] = fmaf(fmaxf(acc[4 * j + 2], 0.0f), w.x, part[2 * r + 1]);
          part[2 * r + 1] = fmaf(fmaxf(acc[4 * j + 3], 0.0f), w.y, part[2 * r + 1]);
        }
        if constexpr (V >= 4) {
          reduce_scatter<V / 2>(part, res, tig);
        } else {
          const bool up2 = tig & 2;
          float x = up2 ? part[1] : part[0];
          x += __shfl_xor_sync(0xffffffffu, up2 ? part[0] : part[1], 2);
          res[0] = x + __shfl_xor_sync(0xffffffffu, x, 1);
        }
      }
#pragma unroll
      for (int i2 = 0; i2 < VPL; ++i2) {
        const int v = V >= 4 ? VPL * tig + i2 : (tig >> 1);
        const int r = v >> 1, hh = v & 1;
        if (V >= 4 || (tig & 1) == 0) put(r, tok0 + 8 * hh, hit, hit ? res[i2] * (hh ? sc1 : sc0) : 0.0f);
      }
    }
  }
}

// Kernel symbols (build.py picks the list and passes it as VARIANTS(X) = X(H, D, BM, IMPL) ...):
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wg    wgmma path, f32 FMNMX+FFMA head reduce on the CUDA cores
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wgr   wgmma path, bf16 MMA head reduce (mirror of gfx950's _mr)
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_ws    warp-specialised wgmma path (producer + 2 ping-pong consumers)
//   ..._ws3 / _ws4 / _ws4n                      the same with 3 / 4 consumers in issue order / 4 unordered
//   ..._wss                                     4 unordered consumers, SS wgmma, K ring built with cp.async
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_mma   mma.sync path (kept as the simple, independent baseline)
//   (the experimental symbols: kernels/experimental/fp8_mqa_logits_sm90_experiments.cu)
#define KERNEL_PARAMS                                                                                      \
  const u8 *q, const u8 *k, const float *kv_scale, const float *weights, const int *cu_seqlen_ks,          \
      const int *cu_seqlen_ke, float *out, i64 out_row_stride, int M, int N, int split_n, int num_warps,  \
      int flags
#define KERNEL_ARGS \
  q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, out_row_stride, M, N, split_n, num_warps, flags

#define WG_KERNEL(H, D, BM, SUFFIX, EPI, PP)                                                              \
  extern "C" __global__ void __launch_bounds__(MAX_THREADS) fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_##SUFFIX( \
      KERNEL_PARAMS) {                                                                                     \
    fp8_mqa_logits_wg_body<H, D, BM, EPI, PP>(KERNEL_ARGS);                                                \
  }
#define INSTANTIATE_wg(H, D, BM) WG_KERNEL(H, D, BM, wg, EPI_FP32, false)
#define INSTANTIATE_wgr(H, D, BM) WG_KERNEL(H, D, BM, wgr, EPI_MMA, false)
#define INSTANTIATE_mma(H, D, BM)                                                                     \
  extern "C" __global__ void __launch_bounds__(MAX_THREADS) fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_mma( \
      KERNEL_PARAMS) {                                                                                \
    fp8_mqa_logits_body<H, D, BM, 2>(KERNEL_ARGS);                                                    \
  }
#define WS_KERNEL(H, D, BM, SUFFIX, NC, ORDER, SS)                                                          \
  extern "C" __global__ void __launch_bounds__(ws_threads<NC>(), 1)                                      \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_##SUFFIX(KERNEL_PARAMS) {                               \
    fp8_mqa_logits_ws_body<H, D, BM, NC, ORDER, SS>(q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out, \
                                                out_row_stride, M, N, split_n, flags);                   \
  }
#define INSTANTIATE_ws(H, D, BM) WS_KERNEL(H, D, BM, ws, 2, true, false)
#define INSTANTIATE_ws3(H, D, BM) WS_KERNEL(H, D, BM, ws3, 3, true, false)
#define INSTANTIATE_ws4(H, D, BM) WS_KERNEL(H, D, BM, ws4, 4, true, false)
#define INSTANTIATE_ws4n(H, D, BM) WS_KERNEL(H, D, BM, ws4n, 4, false, false)
#define INSTANTIATE_wss(H, D, BM) WS_KERNEL(H, D, BM, wss, 4, false, true)   // SS, 4 consumers, no issue order
#define INSTANTIATE(H, D, BM, IMPL) INSTANTIATE_##IMPL(H, D, BM)

// kernels/experimental/ includes this file for its pieces and instantiates its own VARIANTS after its macros.
#ifndef FP8_MQA_LOGITS_SM90_NO_INSTANTIATE
#ifndef VARIANTS
#define VARIANTS(X) X(32, 128, 4, wg)
#endif
VARIANTS(INSTANTIATE)
#endif
