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
// * K and scales stream through a STAGES-deep cp.async ring in dynamic shared memory, gathered through the
//   block table: 16-byte copies (cp.async.cg; 4-byte ones at block size 1, whose 132-byte blocks are only
//   4-byte aligned), eight consecutive threads per 128-byte key row (coalesced reads, conflict-free shared
//   writes into rows padded to D + 16 bytes). The table entries a stage needs are loaded one stage
//   earlier, so no table latency is exposed. With STAGES = 4, three 64-key tiles (27 KB at D = 128) are in
//   flight per block and several blocks share an SM: decode is bandwidth-bound, this keeps HBM's queue full.
// * Scores: wgmma.m64n{H}k32 e4m3 (or k16 f16) in the RS form of the prefill twin's "wg" path: A = the
//   64-key tile from registers (each lane ld.shared's the D/4 contiguous bytes of its two keys; the k order
//   is permuted, and Q, staged once per block, is stored in the same permuted core-matrix order), B = one
//   query row's H heads of Q from a shared-memory descriptor. One row at a time, so next_n stays a run-time
//   argument and the accumulator is H/2 registers. Keeping the ring out of the tensor cores' async proxy
//   (cp.async writes, ld.shared reads) means no proxy fence per tile; Q gets one fence before the loop.
//   Head reduce in fp32 on the CUDA cores (FMNMX + FFMA per accumulator, a 4-lane butterfly): no bf16
//   step, so the per-logit error stays at fp32 rounding. kv-scale applied once per key after the sum.
// * Output: 64-bit offsets, any row stride >= max_context_len, fused -inf fill of [max_j len, max_context_len)
//   spread over every (split, warp); inside the tile range a column past the row's own length is -inf (or
//   not written). Row lengths clamped to [0, min(max_context_len, max_blocks * BS)].
//
// * Two designs of the score MMA (PREC, the symbol suffix). "f16" (the default): each key's fp8 bytes are
//   converted to f16 in registers (cvt.rn.f16x2.e4m3x2: exact) and Q is staged as f16, so the wgmma's
//   products are exact and its accumulation fp32-accurate -- the 1e-5 * T per-logit gate holds by design.
//   "fp8": the e4m3 wgmma directly, twice the tensor rate, but Hopper accumulates fp8 products with fewer
//   bits (DeepSeek-V3's report: ~14), so it is held to the anchors' calc_diff gate only. Decode is
//   bandwidth-bound at small next_n * H, where the two should tie; the GPU sweep and bench say where not.
//
// Template parameters: H (32, 64, 128), D (64, 128), BS (1, 16, 64), PREC (8, 16). Symbols:
// fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs{BS}_{fp8|f16}; build.py takes the list from rawindexer/paged_kernels.py.

#include <stdint.h>

typedef unsigned char u8;
typedef long long i64;

enum : int {
  FLAG_CLEAN_LOGITS = 1,
  FLAG_CONTEXT_LENS_2D = 2,
};

constexpr int WARP = 32;
constexpr int THREADS = 128;  // one warpgroup
constexpr int TILE = 64;      // tokens per tile (the wgmma's M)
constexpr int STAGES = 4;
constexpr int MAX_NEXT_N = 4;

// ---- wgmma, RS form (A from registers, B from a shared-memory descriptor), fp8 e4m3, f32 accumulate ----
__device__ __forceinline__ void wgmma_rs_m64n32k32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_m64n64k32(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_m64n128k32(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int acc) {
  if constexpr (N == 32) wgmma_rs_m64n32k32(d, a, desc_b, acc);
  else if constexpr (N == 64) wgmma_rs_m64n64k32(d, a, desc_b, acc);
  else {
    static_assert(N == 128, "wgmma N here: 32, 64 or 128 (the head count)");
    wgmma_rs_m64n128k32(d, a, desc_b, acc);
  }
}

__device__ __forceinline__ void wgmma_rs_f16_m64n32k16(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_f16_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_rs_f16_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_rs_f16(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int acc) {
  if constexpr (N == 32) wgmma_rs_f16_m64n32k16(d, a, desc_b, acc);
  else if constexpr (N == 64) wgmma_rs_f16_m64n64k16(d, a, desc_b, acc);
  else {
    static_assert(N == 128, "wgmma N here: 32, 64 or 128 (the head count)");
    wgmma_rs_f16_m64n128k16(d, a, desc_b, acc);
  }
}

// Two e4m3 values (low 16 bits of w: byte 0 -> low half) to f16x2: exact, every e4m3 value is an f16.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
  uint32_t r;
  asm("{\n.reg .b16 t;\ncvt.u16.u32 t, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;\n}" : "=r"(r) : "r"(w));
  return r;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Matrix descriptor of B (Q), no swizzle: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45.
// K-major core matrices of 8 rows x 16 bytes: chunk kc of head n at (n / 8) * SBO + kc * LBO + (n % 8) * 16,
// LBO = 128 (adjacent in K), SBO = 8 * D (adjacent in N); k32 step s starts at kc = 2s (+256 s).
//
// The A fragment (PTX ISA, wgmma RS with 8-bit types, as m16n8k32): lane (gid, tig) of warp w holds rows
// (keys) 16w + gid and 16w + gid + 8; reg0/reg1 = k 4tig..+3 of those rows, reg2/reg3 = k 16+4tig..+3. Only
// the pairing of A's and B's k slots matters, so lane tig of k-step s takes bytes [8s, 8s + 8) of ITS OWN
// contiguous chunk [tig*D/4, (tig+1)*D/4) of each key (16-byte shared loads, no shuffles), and Q's depth
// index tig*D/4 + 8s + 4hh + j is stored where wgmma expects logical k = 16hh + 4tig + j of step s.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
}
constexpr int K_PAD = 16;  // bytes added to each key row of the ring (conflict-free 16-byte reads/writes)

template <int N>
__device__ __forceinline__ void fence_regs(float (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(a[i])::"memory");
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
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
  constexpr int CPR = D / 16;  // chunks per key row
#pragma unroll
  for (int i = 0; i < TileBlocks<D>::K_CHUNKS; ++i) {
    const int tok = min(tile * TILE + (i * THREADS + tid) / CPR, len_max - 1);
    tb.k[i] = __ldg(table_row + (unsigned)tok / BS);
  }
  const int tok = min(tile * TILE + (tid & (TILE - 1)), len_max - 1);
  tb.scale = __ldg(table_row + (unsigned)tok / BS);
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

template <int H, int D, int BS, int PREC>
__device__ __forceinline__ void fp8_paged_mqa_logits_sm90_body(
    const u8* __restrict__ q, const u8* __restrict__ kv_cache, const float* __restrict__ weights,
    const int* __restrict__ context_lens, const int* __restrict__ block_table, float* __restrict__ out,
    i64 out_row_stride, int next_n, int max_context_len, int max_blocks, int split_n, int num_warps, int flags) {
  static_assert(H == 32 || H == 64 || H == 128, "H: 32, 64 or 128");
  static_assert(D == 64 || D == 128, "D: 64 or 128");
  static_assert(PREC == 8 || PREC == 16, "PREC: 8 (fp8 wgmma) or 16 (f16 wgmma on the exactly converted values)");
  constexpr int QB = PREC / 8;              // bytes per Q element in shared memory
  constexpr int KS = D / (32 / QB);         // k-steps: k32 (fp8) or k16 (f16)
  constexpr int NACC = H / 2;
  constexpr uint32_t LBO = 128, SBO = 8 * D * QB;
  constexpr int NCH = D / 64;             // 16-byte chunks of a lane's D/4 bytes of one key
  constexpr int K_STAGE = TILE * (D + K_PAD);  // bytes of K per stage
  constexpr int S_STAGE = TILE * 4;       // bytes of scales per stage

  extern __shared__ __align__(128) u8 smem[];
  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1), warp = tid / WARP;
  const int gid = lane >> 2, tig = lane & 3;
  const int b = blockIdx.x, split = blockIdx.y;
  const bool clean = flags & FLAG_CLEAN_LOGITS;

  const i64 limit = min((i64)max_context_len, (i64)max_blocks * BS);
  int len[MAX_NEXT_N];
  int len_max = 0;
#pragma unroll
  for (int j = 0; j < MAX_NEXT_N; ++j) {
    i64 l = 0;
    if (j < next_n)
      l = (flags & FLAG_CONTEXT_LENS_2D) ? (i64)context_lens[(i64)b * next_n + j]
                                         : (i64)context_lens[b] - next_n + j + 1;
    len[j] = (int)max(min(l, limit), (i64)0);
    len_max = max(len_max, len[j]);
  }
  const int tiles = (len_max + TILE - 1) / TILE;
  const int tile_begin = (int)((i64)tiles * split / split_n);
  const int tile_end = (int)((i64)tiles * (split + 1) / split_n);
  const i64 row0 = (i64)b * next_n;

  if (tile_begin < tile_end) {  // block-uniform
    u8* k_s = smem;                                   // STAGES x K_STAGE, key rows padded to D + K_PAD
    float* s_s = (float*)(smem + STAGES * K_STAGE);   // STAGES x TILE scales
    u8* q_s = smem + STAGES * (K_STAGE + S_STAGE);    // next_n x H x D, permuted core-matrix layout per row
    float* w_s = (float*)(q_s + next_n * H * D * QB); // next_n x H
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
      cp_async_commit();
    }
    TileBlocks<D> tb_next;
    if (tile_begin + STAGES - 1 < tile_end)
      table_entries<D, BS>(tb_next, table_row, tile_begin + STAGES - 1, len_max, tid);

    for (int c = tid; c < next_n * H * (D / 16); c += THREADS) {
      const int n = c / (D / 16), d0 = 16 * (c % (D / 16));  // n = row * H + head
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(q + (row0 * H + n) * D + d0));
      const int owner = d0 / (D / 4);     // the tig whose A chunk holds these depths
      const int h = n % H;
      u8* dst = q_s + (n / H) * H * D * QB + (h / 8) * SBO + (h % 8) * 16 + 4 * owner;
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
    for (int c = tid; c < next_n * H; c += THREADS) w_s[c] = weights[row0 * H + c];
    // Q's generic-proxy stores are read by wgmma through the async proxy (the loop's barrier follows).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

    for (int tile = tile_begin, k = 0; tile < tile_end; ++tile, ++k) {
      // Refill the slot consumed last iteration with the tile STAGES - 1 ahead (empty group past the end).
      const int ahead = tile + STAGES - 1;
      if (ahead < tile_end) {
        const int slot = (k + STAGES - 1) % STAGES;
        issue_tile<D, BS>(k_base + slot * K_STAGE, s_base + slot * S_STAGE, tb_next, kv_cache, ahead, len_max, tid);
        if (ahead + 1 < tile_end) table_entries<D, BS>(tb_next, table_row, ahead + 1, len_max, tid);
      }
      cp_async_commit();
      cp_async_wait<STAGES - 1>();
      __syncthreads();

      const int slot = k % STAGES;
      const int tok0 = tile * TILE + 16 * warp + gid;  // this lane's keys: tok0 and tok0 + 8
      const float sc0 = s_s[slot * TILE + 16 * warp + gid];
      const float sc1 = s_s[slot * TILE + 16 * warp + gid + 8];
      uint4 kf[2][NCH];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int c = 0; c < NCH; ++c)
          kf[hh][c] = *reinterpret_cast<const uint4*>(k_s + slot * K_STAGE + (16 * warp + 8 * hh + gid) * (D + K_PAD) +
                                                      tig * (D / 4) + 16 * c);
      // f16: the lane's keys converted once per tile (exact), reused by every query row.
      uint32_t kh[PREC == 16 ? 2 : 1][PREC == 16 ? D / 16 : 1][2];
      if constexpr (PREC == 16) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int s = 0; s < D / 16; ++s) {
            const uint32_t x = word(kf[hh][s / 4], s % 4);
            kh[hh][s][0] = e4m3x2_to_f16x2(x);
            kh[hh][s][1] = e4m3x2_to_f16x2(x >> 16);
          }
      }
      for (int r = 0; r < next_n; ++r) {
        float acc[NACC];
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
        fence_regs(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          const uint64_t desc = smem_desc(q_base + r * H * D * QB + 256 * s, LBO, SBO);
          if constexpr (PREC == 8) {
            const int c = s / 2, s2 = s % 2;
            const uint32_t a[4] = {word(kf[0][c], 2 * s2), word(kf[1][c], 2 * s2), word(kf[0][c], 2 * s2 + 1),
                                   word(kf[1][c], 2 * s2 + 1)};
            wgmma_rs<H>(acc, a, desc, s > 0);
          } else {
            // m16n8k16 A layout: a0 = (row gid, k 2tig..), a1 = (row gid+8, ..), a2 = (gid, k 8+2tig..), a3 = (gid+8, ..)
            const uint32_t a[4] = {kh[0][s][0], kh[1][s][0], kh[0][s][1], kh[1][s][1]};
            wgmma_rs_f16<H>(acc, a, desc, s > 0);
          }
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        fence_regs(acc);
        // DESIGN: fp32 head reduce. Accumulator d[4j + 0/1] = (token gid, heads 8j + 2tig + 0/1),
        // d[4j + 2/3] = (token gid + 8, same heads).
        float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
        for (int j = 0; j < H / 8; ++j) {
          const float2 w = *reinterpret_cast<const float2*>(w_s + r * H + 8 * j + 2 * tig);
          p0 = fmaf(fmaxf(acc[4 * j + 0], 0.0f), w.x, p0);
          p0 = fmaf(fmaxf(acc[4 * j + 1], 0.0f), w.y, p0);
          p1 = fmaf(fmaxf(acc[4 * j + 2], 0.0f), w.x, p1);
          p1 = fmaf(fmaxf(acc[4 * j + 3], 0.0f), w.y, p1);
        }
        p0 += __shfl_xor_sync(0xffffffffu, p0, 1);
        p1 += __shfl_xor_sync(0xffffffffu, p1, 1);
        p0 += __shfl_xor_sync(0xffffffffu, p0, 2);
        p1 += __shfl_xor_sync(0xffffffffu, p1, 2);
        if (tig < 2) {
          const int tok = tok0 + 8 * tig;
          int row_len = len[0];
#pragma unroll
          for (int rr = 1; rr < MAX_NEXT_N; ++rr)
            if (r == rr) row_len = len[rr];
          // Columns >= len_max belong to the -inf fill below.
          if (tok < len_max) {
            float* dst = out + (row0 + r) * out_row_stride + tok;
            if (tok < row_len)
              *dst = (tig ? p1 * sc1 : p0 * sc0);
            else if (clean)
              *dst = -__int_as_float(0x7f800000);
          }
        }
      }
      __syncthreads();  // every warp is done with this slot before it is refilled
    }
    cp_async_wait<0>();
  }

  // DESIGN: fused -inf fill of [len_max, max_context_len), spread over every (split, warp) of b.
  if (clean) {
    const int worker = split * num_warps + warp;
    const int workers = split_n * num_warps;
    const int fill = max_context_len - len_max;
    for (int j = 0; j < next_n; ++j) {
      float* dst_row = out + (row0 + j) * out_row_stride + len_max;
      for (int c = worker * WARP + lane; c < fill; c += workers * WARP) dst_row[c] = -__int_as_float(0x7f800000);
    }
  }
}

// Symbols: fp8_paged_mqa_logits_sm90_h{H}_d{D}_bs{BS}_{fp8|f16} (the score MMA's input precision).
#define PAGED_KERNEL(H, D, BS, PREC, SUFFIX)                                                                 \
  extern "C" __global__ void __launch_bounds__(THREADS)                                                      \
      fp8_paged_mqa_logits_sm90_h##H##_d##D##_bs##BS##_##SUFFIX(                                             \
          const u8* q, const u8* kv_cache, const float* weights, const int* context_lens,                    \
          const int* block_table, float* out, i64 out_row_stride, int next_n, int max_context_len,           \
          int max_blocks, int split_n, int num_warps, int flags) {                                           \
    fp8_paged_mqa_logits_sm90_body<H, D, BS, PREC>(q, kv_cache, weights, context_lens, block_table, out,     \
                                                   out_row_stride, next_n, max_context_len, max_blocks,      \
                                                   split_n, num_warps, flags);                               \
  }
#define INSTANTIATE_PAGED(H, D, BS) PAGED_KERNEL(H, D, BS, 8, fp8) PAGED_KERNEL(H, D, BS, 16, f16)

#ifndef PAGED_INSTANCES
#define PAGED_INSTANCES(X) X(64, 128, 64)
#endif
PAGED_INSTANCES(INSTANTIATE_PAGED)
