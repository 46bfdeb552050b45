// Performance experiments of the sm_90a kernel (docs/PERFORMANCE.md v4-v6), apart from the production source.
//
// Built only by bench/exp_sm90.py (--set v4 | v5 | v6); never by build.py's default build, so nothing here is
// shipped. The shared pieces (K tile loads, wgmma wrappers and descriptors, the epilogue helpers, the -inf
// fill, fp8_mqa_logits_wg_body and the kernel macros) come from the production file, included below.
//
//   v4: WgPingPongLoop<true> (the _wgp / _wgrp tile loop) and WgEpilogueExt<EPI_NONE> (_wgx), the two hooks
//       that fp8_mqa_logits_wg_body declares;
//   v5: fp8_mqa_logits_wf_body, lean epilogues (_wf, _wa, _wfs, _was) with wgmma N = 72 / 136 for EPI_ABS;
//   v6: the SS wgmma form through a cp.async ring (_ss and its variants) and the diagnostics (_wfx, _wfd, ...).

#define FP8_MQA_LOGITS_SM90_NO_INSTANTIATE
#include "../fp8_mqa_logits_sm90.cu"
#undef FP8_MQA_LOGITS_SM90_NO_INSTANTIATE

// ===================================================================================================
// v4: ping-pong tile loop and the no-reduce diagnostic, plugged into fp8_mqa_logits_wg_body.
// ===================================================================================================
enum : int {
  EPI_NONE = 2,  // diagnostic only (wrong results): store one accumulator, to time the MMA + K stream alone
};

template <>
struct WgEpilogueExt<EPI_NONE> {
  template <int NACC, class Put>
  static __device__ __forceinline__ void run(float (&acc)[NACC], float sc0, float sc1, int tok0, bool hit, Put& put) {
    put(0, tok0, hit, acc[0] * sc0);
    put(0, tok0 + 8, hit, acc[2] * sc1);
  }
};

template <>
struct WgPingPongLoop<true> {
  template <int D, int NCH, int TILE, int NACC, class TileHit, class Issue, class Commit, class Epilogue>
  static __device__ __forceinline__ void run(float (&accA)[NACC], const u8* __restrict__ k,
                                             const float* __restrict__ kv_scale, int lo, int hi, int tile_begin,
                                             int tile_end, int wg, int nwg, int wq, int gid, int tig,
                                             TileHit& tile_hit, Issue& issue, Commit& commit, Epilogue& epilogue) {
    // Ping-pong: two accumulator sets. Tile t+nwg's wgmma is issued before tile t's epilogue, so each
    // warpgroup overlaps its own CUDA-core epilogue with its own tensor work. A commit group is made
    // for every tile, and every tile's wgmma is issued even when no row's window meets it: a wgmma under
    // a branch makes ptxas serialize all of them (C7520, "WG.AR in divergent path"). hA/hB only gate the
    // epilogue's stores.
    float accB[NACC];
#pragma unroll
    for (int i = 0; i < NACC; ++i) accB[i] = 0.0f;
    WgTile<NCH> ka, kb;
    int t = tile_begin + wg;
    if (t < tile_end) {
      // Loads past the range are clamped to token hi - 1 (harmless); their wgmma is wasted work, at most
      // one tile per warpgroup per block, and their epilogue is never run.
      load_wg_tile<D, NCH>(ka, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
      bool hA = tile_hit(lo + t * TILE), hB = false;
      issue(accA, ka);
      commit();
      load_wg_tile<D, NCH>(kb, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
      for (;;) {
        const int t1 = t + nwg;
        hB = t1 < tile_end && tile_hit(lo + t1 * TILE);
        issue(accB, kb);
        commit();
        wgmma_wait<1>();
        fence_regs(accA);
        const float a0 = ka.scale[0], a1 = ka.scale[1];
        load_wg_tile<D, NCH>(ka, k, kv_scale, lo + (t1 + nwg) * TILE + 16 * wq, hi, gid, tig);
        epilogue(accA, a0, a1, lo + t * TILE, hA);
        if (t1 >= tile_end) break;
        const int t2 = t1 + nwg;
        hA = t2 < tile_end && tile_hit(lo + t2 * TILE);
        issue(accA, ka);
        commit();
        wgmma_wait<1>();
        fence_regs(accB);
        const float b0 = kb.scale[0], b1 = kb.scale[1];
        load_wg_tile<D, NCH>(kb, k, kv_scale, lo + (t2 + nwg) * TILE + 16 * wq, hi, gid, tig);
        epilogue(accB, b0, b1, lo + t1 * TILE, hB);
        if (t2 >= tile_end) break;
        t = t2;
      }
      wgmma_wait<0>();
    }
  }
};

// wgmma N = 72 and 136: a block's head columns plus 8 columns of the linear term (EPI_ABS, v5 below).
__device__ __forceinline__ void wgmma_m64n72k32(float (&d)[36], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n72k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, "
      "{%36, %37, %38, %39}, %40, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_m64n136k32(float (&d)[68], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67}, "
      "{%68, %69, %70, %71}, %72, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_k32x(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int acc) {
  if constexpr (N == 72) wgmma_m64n72k32(d, a, desc, acc);
  else if constexpr (N == 136) wgmma_m64n136k32(d, a, desc, acc);
  else wgmma_k32<N>(d, a, desc, acc);
}

// (the SS wgmma wrappers wgmma_ss_k32 of v6 live in the production file, which the ws "wss" form uses too)

// ===================================================================================================
// v5: lean epilogue (symbols _wf, _wa, _wfs, _was). Same score wgmma and K stream as _wg; what changes is
// the CUDA-core work per 64-token tile, which v4 showed to be the whole gap to the no-reduce diagnostic:
//   * every lane's output rows are fixed by its tig (the quad reduce-scatter), so the row pointer, the row's
//     window and the -inf choice are hoisted out of the tile loop: one compare + select + STG per value;
//   * weights read as float4 (LDS.128: one per two column blocks) from a lane-ordered copy in shared memory;
//   * EPI_ABS (the "a" symbols): relu(x) = (x + |x|) / 2, so
//         sum_h w_h relu(x_h) = sum_h (w_h/2) |x_h|  +  (sum_h (w_h/2) q_h) . k
//     The first sum is ONE FFMA per accumulator (|x| is a free operand modifier) instead of FMNMX + FFMA; the
//     second is linear in k, so it runs on the tensor cores as 8 extra wgmma columns (N = NQ + 8): per row the
//     f32 vector q_lin = sum_h (w_h/2) q_h, scaled by a power of two s_r, as two e4m3 terms hi + lo
//     (|error| <= 2^-8 relative per element; exact f32 for everything else). Staged once per block.
//   * SPLIT ("s" symbols): the tile's columns in two commit groups (rows [0, BM/2) then the rest); the first
//     half's FFMAs run while the second half's wgmma is still in flight (wait_group 1).
// ===================================================================================================
__device__ __forceinline__ uint32_t f32x2_to_e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float2 e4m3x2_to_f32x2(uint32_t v) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"((uint16_t)v));
  float lo, hi;
  asm("{\n.reg .f16 l, u;\nmov.b32 {l, u}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, u;\n}" : "=f"(lo), "=f"(hi) : "r"(h));
  return make_float2(lo, hi);
}
// Byte offset in the permuted, K-major core-matrix layout of q_s (see the wgmma notes) of the 4-byte word
// holding depths d .. d+3 (d % 4 == 0) of wgmma column n.
template <int D>
__device__ __forceinline__ int q_word_offset(int n, int d) {
  const int owner = d / (D / 4), o = d % (D / 4);
  const int kc = 2 * (o / 8) + (o % 8) / 4;
  return (n / 8) * (8 * D) + (n % 8) * 16 + 4 * owner + kc * 128;
}

// One commit group of the v5 tile: the KS k32 steps of wgmma N = NG over columns from q_addr (shared address).
template <int NG, int KS, int NCH>
__device__ __forceinline__ void wf_issue(float (&acc)[NG / 2], const WgTile<NCH>& kt, uint32_t q_addr, uint32_t sbo) {
  fence_regs(acc);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int s = 0; s < KS; ++s) {
    const int c = s / 2, s2 = s % 2;
    const uint32_t a[4] = {word(kt.k[0][c], 2 * s2), word(kt.k[1][c], 2 * s2), word(kt.k[0][c], 2 * s2 + 1),
                           word(kt.k[1][c], 2 * s2 + 1)};
    wgmma_k32x<NG>(acc, a, smem_desc(q_addr + 256 * s, 128, sbo), s > 0);
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// v6 (KSRC = 1): the K tile in shared memory, same no-swizzle K-major core-matrix layout as Q (token t, depth
// chunk kc at (t / 8) * 8D + kc * 128 + (t % 8) * 16), natural depth order in both operands.
struct SmemTile {
  uint32_t addr;  // shared address of the tile's first core matrix
};
template <int NG, int KS, int NCH>
__device__ __forceinline__ void wf_issue(float (&acc)[NG / 2], SmemTile kt, uint32_t q_addr, uint32_t sbo) {
  fence_regs(acc);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int s = 0; s < KS; ++s)
    wgmma_ss_k32<NG>(acc, smem_desc(kt.addr + 256 * s, 128, sbo), smem_desc(q_addr + 256 * s, 128, sbo), s > 0);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// .cg bypasses L1 (every co-resident block then fetches the K tiles it shares with its neighbours from L2);
// .ca allocates in L1 as the RS form's __ldg does (KSRC 4)
template <bool L1>
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  if constexpr (L1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// K tiles per warpgroup ring (dynamic shared memory: nwg * stages * 64 * D bytes); KSRC 3 = 4 stages
template <int KSRC>
__host__ __device__ constexpr int ss_stages() { return KSRC == 3 ? 4 : 3; }

// Head columns of column blocks [J0, J1) (acc holds blocks from JA on): part[2r] / part[2r+1] (tokens gid /
// gid + 8) += w * relu(x), or w * |x| under ABS. Weights from the lane-ordered copy, 16 bytes per 2 blocks.
template <int H, int V, int J0, int J1, int JA, bool ABS, int NACC>
__device__ __forceinline__ void wf_heads(const float (&acc)[NACC], const float* wl_s, int tig, float (&part)[V]) {
  static_assert(J0 % 2 == 0 && J1 % 2 == 0 && 4 * (J1 - JA) <= NACC, "column block range");
#pragma unroll
  for (int jp = J0 / 2; jp < J1 / 2; ++jp) {
    const float4 w = *reinterpret_cast<const float4*>(wl_s + 16 * jp + 4 * tig);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * jp + h, r = j / (H / 8);
      const float w0 = h ? w.z : w.x, w1 = h ? w.w : w.y;
      const float* a = &acc[4 * (j - JA)];
      if constexpr (ABS) {
        part[2 * r] = fmaf(fabsf(a[0]), w0, part[2 * r]);
        part[2 * r] = fmaf(fabsf(a[1]), w1, part[2 * r]);
        part[2 * r + 1] = fmaf(fabsf(a[2]), w0, part[2 * r + 1]);
        part[2 * r + 1] = fmaf(fabsf(a[3]), w1, part[2 * r + 1]);
      } else {
        part[2 * r] = fmaf(fmaxf(a[0], 0.0f), w0, part[2 * r]);
        part[2 * r] = fmaf(fmaxf(a[1], 0.0f), w1, part[2 * r]);
        part[2 * r + 1] = fmaf(fmaxf(a[2], 0.0f), w0, part[2 * r + 1]);
        part[2 * r + 1] = fmaf(fmaxf(a[3], 0.0f), w1, part[2 * r + 1]);
      }
    }
  }
}

// KSRC: 0 = K tile in registers (RS wgmma, v5), 1 = K tile in shared memory through a cp.async ring (SS, v6).
// EPX: 0 = exact epilogue; diagnostics with WRONG results, timing only: 1 = no head reduce (each lane stores
// its first VPL accumulators, every output written), 2 = the epilogue's FMNMX + FFMA count on registers that
// are not the accumulators (weights and kv_scale), same LDS, reduce-scatter and stores.
template <int H, int D, int BM, bool ABS, bool SPLIT, int KSRC = 0, int EPX = 0>
__device__ __forceinline__ void fp8_mqa_logits_wf_body(const u8* __restrict__ q, const u8* __restrict__ k,
                                                       const float* __restrict__ kv_scale,
                                                       const float* __restrict__ weights,
                                                       const int* __restrict__ cu_seqlen_ks,
                                                       const int* __restrict__ cu_seqlen_ke,
                                                       float* __restrict__ out, i64 out_row_stride, int M, int N,
                                                       int split_n, int num_warps, int flags) {
  constexpr int NQ = BM * H;
  constexpr int NX = ABS ? 8 : 0;  // linear-term columns (pair p = lanes tig == p: hi, lo)
  constexpr int NT = NQ + NX;
  static_assert(NQ == 64 || NQ == 128 || NQ == 256, "BLOCK_M * H must be 64, 128 or 256");
  static_assert(!ABS || (NQ <= 128 && (BM == 2 || BM == 4)), "EPI_ABS: BLOCK_M 2 or 4, N <= 128");
  static_assert(!SPLIT || BM >= 2, "SPLIT halves the block's rows");
  static_assert(D % 64 == 0, "D must be a multiple of 64");
  static_assert(KSRC == 0 || !ABS, "SS: natural depth order in q_s; EPI_ABS writes the permuted one");
  constexpr int KS = D / 32, NCH = D / 64, TILE = 64;
  constexpr int NA = SPLIT ? NQ / 2 : NT;  // group A: columns [0, NA)
  constexpr int NB = SPLIT ? NT - NQ / 2 : 8;  // group B: columns [NQ / 2, NT) (unused unless SPLIT)
  constexpr int V = 2 * BM;                    // per-lane partial sums (row, token gid / gid + 8)
  constexpr int VPL = V >= 4 ? V / 4 : 1;      // values per lane after the reduce-scatter
  constexpr uint32_t LBO = 128, SBO = 8 * D;
  const float NINF = -__int_as_float(0x7f800000);

  __shared__ __align__(128) u8 q_s[NT * D];
  __shared__ __align__(16) float w_s[NQ];   // weights (halved for ABS), natural order
  __shared__ __align__(16) float wl_s[NQ];  // the same, lane order: [j / 2][tig][4] (see below)
  __shared__ int2 win_s[BM];
  __shared__ int rmax_s[BM];
  __shared__ float rscale_s[BM];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP - 1);
  const int warp = tid / WARP;
  const int wg = warp / 4, wq = warp % 4;
  const int nwg = num_warps / 4;
  const int gid = lane >> 2, tig = lane & 3;
  const int nthreads = num_warps * WARP;

  const RowBlock rb = start_row_block<BM>(win_s, cu_seqlen_ks, cu_seqlen_ke, M, N, flags, tid);
  const int split = rb.split, m0 = rb.m0, nrows = rb.nrows;
  const bool clean = rb.clean;
  if (tid < BM) rmax_s[tid] = 0;
  for (int idx = tid; idx < NQ * (D / 16); idx += nthreads) {
    const int n = idx / (D / 16);
    const int d0 = 16 * (idx % (D / 16));
    const int r = n / H;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows) v = ldg16(q + ((i64)(m0 + r) * H + (n % H)) * D + d0);
    if constexpr (KSRC >= 1) {
      *reinterpret_cast<uint4*>(q_s + (n / 8) * SBO + (n % 8) * 16 + (d0 / 16) * LBO) = v;  // natural order
    } else {
      store_q_chunk_permuted<D>(q_s, n, d0, v);
    }
  }
  // Lane order: lane tig's weights of column blocks j = 2jp, 2jp + 1 are
  //   wl_s[16 jp + 4 tig + {0, 1, 2, 3}] = w[16 jp + 2 tig + {0, 1, 8, 9}]   (one 16-byte read)
  for (int idx = tid; idx < NQ; idx += nthreads) {
    const int r = idx / H;
    const float w = r < nrows ? weights[(i64)(m0 + r) * H + (idx % H)] * (ABS ? 0.5f : 1.0f) : 0.0f;
    w_s[idx] = w;
    const int jp = idx / 16, c = idx % 16, tg = (c % 8) / 2, e = (c % 2) + 2 * (c / 8);
    wl_s[16 * jp + 4 * tg + e] = w;
  }
  __syncthreads();

  if constexpr (ABS) {
    // q_lin[r][d] = sum_h (w_h / 2) q[r][h][d] (f32), then s_r = 2^ceil(log2(max_d |q_lin| / 224)) and
    // q_lin / s_r = hi + lo in e4m3, written as wgmma columns NQ + 2p (hi) and NQ + 2p + 1 (lo) for every pair
    // p whose lanes (tig == p) hold row r after the reduce-scatter: r = p * BM / 4.
    constexpr int ITEMS = BM * (D / 4);
    float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int r = tid / (D / 4), d4 = 4 * (tid % (D / 4));
    if (tid < ITEMS && r < nrows) {
      const u8* qr = q + (i64)(m0 + r) * H * D + d4;
#pragma unroll 8
      for (int h = 0; h < H; ++h) {
        const uint32_t word4 = __ldg(reinterpret_cast<const unsigned int*>(qr + (i64)h * D));
        const float w = w_s[r * H + h];
        const float2 a = e4m3x2_to_f32x2(word4 & 0xffffu), b = e4m3x2_to_f32x2(word4 >> 16);
        x[0] = fmaf(w, a.x, x[0]);
        x[1] = fmaf(w, a.y, x[1]);
        x[2] = fmaf(w, b.x, x[2]);
        x[3] = fmaf(w, b.y, x[3]);
      }
      const float m = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
      atomicMax(&rmax_s[r], __float_as_int(m));
    }
    __syncthreads();
    if (tid < ITEMS) {
      const float mx = __int_as_float(rmax_s[r]);
      const float s = mx > 0.0f ? exp2f(ceilf(log2f(mx / 224.0f))) : 1.0f;
      const float inv = 1.0f / s;  // exact: a power of two
      uint32_t hi = 0, lo = 0;
      if (r < nrows) {
#pragma unroll
        for (int i = 0; i < 4; ++i) x[i] *= inv;
        hi = f32x2_to_e4m3x2(x[0], x[1]) | (f32x2_to_e4m3x2(x[2], x[3]) << 16);
        const float2 h0 = e4m3x2_to_f32x2(hi & 0xffffu), h1 = e4m3x2_to_f32x2(hi >> 16);
        lo = f32x2_to_e4m3x2(x[0] - h0.x, x[1] - h0.y) | (f32x2_to_e4m3x2(x[2] - h1.x, x[3] - h1.y) << 16);
      }
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        if (p * BM / 4 == r) {
          *reinterpret_cast<uint32_t*>(q_s + q_word_offset<D>(NQ + 2 * p, d4)) = hi;
          *reinterpret_cast<uint32_t*>(q_s + q_word_offset<D>(NQ + 2 * p + 1, d4)) = lo;
        }
      }
      if (d4 == 0) rscale_s[r] = s;
    }
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const BlockSpan bs = uniform_block_span<BM, TILE>(win_s, N, split, split_n);
  const int lo = bs.lo, hi = bs.hi, tile_begin = bs.tile_begin, tile_end = bs.tile_end;
  const uint32_t q_base = (uint32_t)__cvta_generic_to_shared(q_s);

  // This lane's outputs after the reduce-scatter: value i is (row r_i, token tok0 + 8 hh_i); V >= 4:
  // v = VPL tig + i, r = v / 2, hh = v % 2; one row (V = 2): row 0, token hh = tig / 2, stored by even tig.
  float* rowp[VPL];
  int ws[VPL], we[VPL];
  bool rowok[VPL];
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int v = V >= 4 ? VPL * tig + i : 0;
    const int r = v >> 1;
    rowok[i] = r < nrows && (V >= 4 || (tig & 1) == 0);
    rowp[i] = out + (i64)(m0 + min(r, nrows - 1)) * out_row_stride;
    ws[i] = win_s[r].x;
    we[i] = win_s[r].y;
  }
  float lscale = 1.0f;  // ABS: s_r of this lane's linear-term row
  if constexpr (ABS) lscale = rscale_s[tig * BM / 4];

  // The union of the rows' windows has no gap inside [lo, hi) (causal, sliding windows): every tile hits, and
  // the per-tile window test is skipped. Otherwise (packed requests) tiles in a gap skip their wgmma.
  bool dense = true;
#pragma unroll
  for (int r = 0; r < BM; ++r) {
    const int2 w = win_s[r];
    if (w.y > w.x && w.y < hi) {
      bool covered = false;
#pragma unroll
      for (int r2 = 0; r2 < BM; ++r2) {
        const int2 w2 = win_s[r2];
        covered |= w2.y > w2.x && w2.x <= w.y && w.y < w2.y;
      }
      dense &= covered;
    }
  }
  auto tile_hit = [&](int base) {
    if (dense) return true;
    bool h = false;
#pragma unroll
    for (int r = 0; r < BM; ++r) {
      const int2 w = win_s[r];  // shared memory: registers here would cost the 4th warpgroup per SM
      h |= w.x < w.y && base < w.y && base + TILE > w.x;
    }
    return h;
  };
  float accA[NA / 2];
  float accB[SPLIT ? NB / 2 : 4];
#pragma unroll
  for (int i = 0; i < NA / 2; ++i) accA[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < (SPLIT ? NB / 2 : 4); ++i) accB[i] = 0.0f;

  // One tile: wgmma into accA (and accB), head sums, quad reduce-scatter, linear term, stores.
  auto process = [&](const auto& cur, int base, float sc0, float sc1) {
    const bool hit = tile_hit(base);
    float res[VPL];
#pragma unroll
    for (int i = 0; i < VPL; ++i) res[i] = 0.0f;
    if (hit) {
      float part[V];
#pragma unroll
      for (int i = 0; i < V; ++i) part[i] = 0.0f;
      wf_issue<NA, KS, NCH>(accA, cur, q_base, SBO);
      if constexpr (EPX != 0) {
        static_assert(!SPLIT && !ABS, "diagnostics: plain tile only");
        wgmma_wait<0>();
        fence_regs(accA);
        if constexpr (EPX == 2) {
          // Same FMNMX + FFMA count and weight LDS as wf_heads, on operands that are not the accumulators.
          const float x0 = sc0, x1 = sc1, x2 = -sc0, x3 = 0.5f * sc1;
#pragma unroll
          for (int jp = 0; jp < NQ / 16; ++jp) {
            const float4 w = *reinterpret_cast<const float4*>(wl_s + 16 * jp + 4 * tig);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = (2 * jp + h) / (H / 8);
              const float w0 = h ? w.z : w.x, w1 = h ? w.w : w.y;
              part[2 * r] = fmaf(fmaxf(x0, w0), w1, part[2 * r]);
              part[2 * r] = fmaf(fmaxf(x1, w1), w0, part[2 * r]);
              part[2 * r + 1] = fmaf(fmaxf(x2, w0), w1, part[2 * r + 1]);
              part[2 * r + 1] = fmaf(fmaxf(x3, w1), w0, part[2 * r + 1]);
            }
          }
          quad_sums<V>(part, res, tig);
        }
#pragma unroll
        for (int i = 0; i < VPL; ++i) res[i] += accA[i];
      } else if constexpr (SPLIT) {
        wf_issue<NB, KS, NCH>(accB, cur, q_base + (NQ / 16) * SBO, SBO);
        wgmma_wait<1>();
        fence_regs(accA);
        wf_heads<H, V, 0, NQ / 16, 0, ABS>(accA, wl_s, tig, part);
        wgmma_wait<0>();
        fence_regs(accB);
        wf_heads<H, V, NQ / 16, NQ / 8, NQ / 16, ABS>(accB, wl_s, tig, part);
      } else {
        wgmma_wait<0>();
        fence_regs(accA);
        wf_heads<H, V, 0, NQ / 8, 0, ABS>(accA, wl_s, tig, part);
      }
      if constexpr (EPX == 0) {
        quad_sums<V>(part, res, tig);
      }
      if constexpr (ABS) {
        // Linear term: lane tig holds pair p = tig at column block NQ / 8: (token gid: hi, lo), (gid + 8: hi, lo)
        const float* a = SPLIT ? &accB[4 * (NQ / 8 - NQ / 16)] : &accA[4 * (NQ / 8)];
        if constexpr (VPL == 2) {
          res[0] = fmaf(a[0] + a[1], lscale, res[0]);
          res[1] = fmaf(a[2] + a[3], lscale, res[1]);
        } else {
          res[0] = fmaf((tig & 1) ? a[2] + a[3] : a[0] + a[1], lscale, res[0]);
        }
      }
    }
    const int tok0 = base + 16 * wq + gid;
#pragma unroll
    for (int i = 0; i < VPL; ++i) {
      const int hh = V >= 4 ? ((VPL * tig + i) & 1) : (tig >> 1);
      const int tok = tok0 + 8 * hh;
      if (rowok[i] && tok < hi) {
        const bool in = tok >= ws[i] && tok < we[i];
        if (in || clean) rowp[i][tok] = in ? res[i] * (hh ? sc1 : sc0) : NINF;
      }
    }
  };

  if constexpr (KSRC >= 1) {
    // v6: per warpgroup a ring of SS_STAGES K tiles in dynamic shared memory, filled with 16-byte cp.async
    // (each thread 64 * D / 16 / 128 of them per tile: 8 consecutive threads write one 128-byte core-matrix
    // row, conflict-free); SS_STAGES - 1 tiles in flight ahead of the wgmma. The warpgroup's named barrier
    // after the wait makes every thread's copies visible (and, after the previous tile's wait_group 0, frees
    // the slot that the next load overwrites).
    extern __shared__ __align__(128) u8 ring_s[];
    constexpr int SS_STAGES = ss_stages<KSRC>();
    constexpr int SLOT = TILE * D;
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(ring_s) + wg * (SS_STAGES * SLOT);
    const int wt = tid - 128 * wg;
    const int first = tile_begin + wg;
    const int n = first < tile_end ? (tile_end - first + nwg - 1) / nwg : 0;
    auto load = [&](int i, int slot) {
      const int base = lo + (first + i * nwg) * TILE;
      const uint32_t dst0 = ring + slot * SLOT;
#pragma unroll
      for (int j = 0; j < D / 32; ++j) {
        const int c = wt + 128 * j;             // 16-byte chunk of the tile: 8 tokens x D/16 chunks per group
        const int t8 = c % 8, kc = (c / 8) % (D / 16), th = c / (8 * (D / 16));
        const int tok = min(base + 8 * th + t8, hi - 1);
        cp_async16<KSRC == 4>(dst0 + th * SBO + kc * 128 + t8 * 16, k + (i64)tok * D + 16 * kc);
      }
    };
#pragma unroll
    for (int i = 0; i < SS_STAGES - 1; ++i) {
      if (i < n) load(i, i);
      cp_async_commit();
    }
    // kv_scale of this lane's two tokens, one tile ahead in registers (loaded in the same iteration, its L2 latency
    // was exposed on every tile: ncu long_scoreboard 7-9 stalls per issue in the first H200 run of v6)
    auto scales = [&](int i, float& a, float& b) {
      const int tok0 = lo + (first + i * nwg) * TILE + 16 * wq + gid;
      a = __ldg(kv_scale + min(tok0, hi - 1));
      b = __ldg(kv_scale + min(tok0 + 8, hi - 1));
    };
    float nsc0 = 0.0f, nsc1 = 0.0f;
    if (n > 0) scales(0, nsc0, nsc1);
    int slot = 0;
    for (int i = 0; i < n; ++i) {
      const int base = lo + (first + i * nwg) * TILE;
      const float sc0 = nsc0, sc1 = nsc1;
      if (i + 1 < n) scales(i + 1, nsc0, nsc1);
      cp_async_wait<SS_STAGES - 2>();
      // ptxas emits MEMBAR.ALL.CTA for this fence: it also waits for the tile loads still in flight and the
      // previous tile's stores. KSRC == 2 leaves it out (experiment: the fence's cost; correctness unproven).
      if constexpr (KSRC != 2) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      if (wg == 0)  // immediate ids: a register id makes ptxas reserve all 16 barriers
        asm volatile("bar.sync 1, 128;" ::: "memory");
      else
        asm volatile("bar.sync 2, 128;" ::: "memory");
      const int ahead = slot == 0 ? SS_STAGES - 1 : slot - 1;  // (i + SS_STAGES - 1) % SS_STAGES
      if (i + SS_STAGES - 1 < n) load(i + SS_STAGES - 1, ahead);
      cp_async_commit();
      process(SmemTile{ring + slot * SLOT}, base, sc0, sc1);
      slot = slot == SS_STAGES - 1 ? 0 : slot + 1;
    }
    cp_async_wait<0>();
  } else {
#ifndef WF_UNROLL2
  // The next tile's K is prefetched into registers while this one is multiplied (a 2x unrolled loop with two
  // alternating buffers saves the 16-register copy but spilled at the 128-register cap: measured slower here).
  WgTile<NCH> cur, nxt;
  int t = tile_begin + wg;
  if (t < tile_end) load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
  for (; t < tile_end; t += nwg) {
    cur = nxt;
    if (t + nwg < tile_end) load_wg_tile<D, NCH>(nxt, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
    process(cur, lo + t * TILE, cur.scale[0], cur.scale[1]);
  }
#else
  WgTile<NCH> ka, kb;
  int t = tile_begin + wg;
  if (t < tile_end) load_wg_tile<D, NCH>(ka, k, kv_scale, lo + t * TILE + 16 * wq, hi, gid, tig);
  while (t < tile_end) {
    if (t + nwg < tile_end) load_wg_tile<D, NCH>(kb, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
    process(ka, lo + t * TILE, ka.scale[0], ka.scale[1]);
    t += nwg;
    if (t >= tile_end) break;
    if (t + nwg < tile_end) load_wg_tile<D, NCH>(ka, k, kv_scale, lo + (t + nwg) * TILE + 16 * wq, hi, gid, tig);
    process(kb, lo + t * TILE, kb.scale[0], kb.scale[1]);
    t += nwg;
  }
#endif
  }

  if (clean)
    fill_outside_union(out, out_row_stride, m0, nrows, lo, hi, N, flags & FLAG_VEC4_FILL, split * num_warps + warp,
                       split_n * num_warps, lane);
}

// Kernel symbols of the experiments (bench/exp_sm90.py passes the list as INSTANCES(X) = X(H, D, BM, DESIGN) ...;
// the production ones, _wg, _wgr and _mma, can be listed too):
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wgp   _wg with two accumulator sets (ping-pong)
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wgrp  _wgr with ping-pong
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wgx   diagnostic, WRONG results: no head reduce (timing only)
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wf    v5 lean epilogue, exact f32 head reduce
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wa    v5 lean epilogue, |x| FFMA + linear term on the tensor cores
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wfs / _was   the same two with the split (wait_group 1) tile
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_ss    v6 SS form: K tile via cp.async into shared memory, exact f32
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_ssx / _ssd / _wfx / _wfd   v6 diagnostics (WRONG results, timing only)
#define INSTANTIATE_wgp(H, D, BM) WG_KERNEL(H, D, BM, wgp, EPI_FP32, true)
#define INSTANTIATE_wgrp(H, D, BM) WG_KERNEL(H, D, BM, wgrp, EPI_MMA, true)
#define INSTANTIATE_wgx(H, D, BM) WG_KERNEL(H, D, BM, wgx, EPI_NONE, false)
// v5: at most 128 registers (2 blocks of 256 threads, 4 of 128 per SM): 4 warpgroups per SM, as for _wg.
#define WF_KERNEL(H, D, BM, SUFFIX, ABS, SPLIT) WF_KERNEL_X(H, D, BM, SUFFIX, ABS, SPLIT, 0, 0)
#define WF_KERNEL_X(H, D, BM, SUFFIX, ABS, SPLIT, KSRC, EPX)                                              \
  extern "C" __global__ void __launch_bounds__(MAX_THREADS, 2) fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_##SUFFIX( \
      KERNEL_PARAMS) {                                                                                     \
    fp8_mqa_logits_wf_body<H, D, BM, ABS, SPLIT, KSRC, EPX>(KERNEL_ARGS);                                  \
  }
#define INSTANTIATE_wf(H, D, BM) WF_KERNEL(H, D, BM, wf, false, false)
#define INSTANTIATE_wa(H, D, BM) WF_KERNEL(H, D, BM, wa, true, false)
#define INSTANTIATE_wfs(H, D, BM) WF_KERNEL(H, D, BM, wfs, false, true)
#define INSTANTIATE_was(H, D, BM) WF_KERNEL(H, D, BM, was, true, true)
// v6: SS form (K through a cp.async ring in shared memory; launch with nwg * SS_STAGES * 64 * D bytes of dynamic
// shared memory), and the diagnostics (WRONG results): x = no head reduce, d = FMNMX + FFMA not reading accumulators
#define INSTANTIATE_ss(H, D, BM) WF_KERNEL_X(H, D, BM, ss, false, false, 1, 0)
#define INSTANTIATE_ssx(H, D, BM) WF_KERNEL_X(H, D, BM, ssx, false, false, 1, 1)
#define INSTANTIATE_ssd(H, D, BM) WF_KERNEL_X(H, D, BM, ssd, false, false, 1, 2)
#define INSTANTIATE_ssn(H, D, BM) WF_KERNEL_X(H, D, BM, ssn, false, false, 2, 0)
#define INSTANTIATE_ssxn(H, D, BM) WF_KERNEL_X(H, D, BM, ssxn, false, false, 2, 1)
#define INSTANTIATE_ss4(H, D, BM) WF_KERNEL_X(H, D, BM, ss4, false, false, 3, 0)
#define INSTANTIATE_ssx4(H, D, BM) WF_KERNEL_X(H, D, BM, ssx4, false, false, 3, 1)
#define INSTANTIATE_ssa(H, D, BM) WF_KERNEL_X(H, D, BM, ssa, false, false, 4, 0)
#define INSTANTIATE_ssxa(H, D, BM) WF_KERNEL_X(H, D, BM, ssxa, false, false, 4, 1)
#define INSTANTIATE_wfx(H, D, BM) WF_KERNEL_X(H, D, BM, wfx, false, false, 0, 1)
#define INSTANTIATE_wfd(H, D, BM) WF_KERNEL_X(H, D, BM, wfd, false, false, 0, 2)

#ifndef INSTANCES  // the instance list comes from bench/exp_sm90.py (its designs: rawindexer/registry.py)
#error "bench/exp_sm90.py defines INSTANCES(X), the instance list"
#endif
INSTANCES(INSTANTIATE)
