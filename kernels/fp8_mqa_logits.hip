// fp8_mqa_logits for gfx950 (CDNA4, wave64): the prefill "lightning indexer" of DeepSeek-V3.2 / GLM-5.
//
//   logits[m, n] = sum_h relu(<Q[m,h,:], K[n,:]>) * kv_scale[n] * weights[m,h]   for n in [ks[m], ke[m])
//
// clamped to [0, N); -inf elsewhere when CLEAN_LOGITS is set, untouched elsewhere when it is not.
//
// Written against clang builtins only (no HIP headers), so the same source builds with hipcc on a ROCm
// machine and with the clang of the `ziglang` PyPI package everywhere else. One file per design on a
// shared header: kernels/gfx/common.h (types, flags, row windows), prefill_seed.h (design seed),
// prefill_mfma_reduce.h (designs mr, mrp, mrf); this file holds the kernel symbols. The design points of
// the seed (shared/seeds/000_*.txt) are marked "DESIGN:" so they can be found by name: in the default
// design's code (mrf) where they apply to it, in prefill_seed.h where they apply to the seed only.
//
// Template parameters (one extern "C" symbol per instantiation, see INSTANTIATE at the bottom):
//   H        heads per query row: 32, 64 or 128 (a multiple of the 32-row MFMA tile)
//   D        head dim: 64 or 128 (a multiple of the 64-deep MFMA tile)
//   BLOCK_M  query rows that share one K stream, 1..8
//   UNROLL   KV tiles per loop iteration per warp (1, or 2 for the seed's "unroll2")
// Run-time parameters: split_n (== gridDim.y), num_warps (== blockDim.x / 64), flags (clean, reverse rows).

#include "gfx/common.h"        // types, flags, target operations, row windows
#include "gfx/prefill_seed.h"  // design seed
#include "gfx/prefill_mfma_reduce.h"  // designs mr, mrp, mrf

// Kernel symbols: fp8_mqa_logits_h{H}_d{D}_bm{BLOCK_M}_u{UNROLL}. The registry's instances decide which are
// compiled (build.py passes -DSEED_INSTANCES=... and the other *_INSTANCES lists); the manifest records each
// one's argument layout and resources.
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

// e4m3fn inputs on an e4m3fnuz target (gfx942): fp8_mqa_logits_h{H}_d{D}_bm{BLOCK_M}_u{UNROLL}_fn
#define INSTANTIATE_FN(H, D, BM, U)                                                                    \
  KERNEL_ATTRS void fp8_mqa_logits_h##H##_d##D##_bm##BM##_u##U##_fn(                                   \
      const u8* q, const u8* k, const float* kv_scale, const float* weights, const int* cu_seqlen_ks,  \
      const int* cu_seqlen_ke, float* out, i64 out_row_stride, int M, int N, int split_n,              \
      int num_warps, int flags) {                                                                      \
    fp8_mqa_logits_body<H, D, BM, U, true>(                                                            \
        (const u8 GLOBAL*)q, (const u8 GLOBAL*)k, (const float GLOBAL*)kv_scale,                       \
        (const float GLOBAL*)weights, (const int GLOBAL*)cu_seqlen_ks, (const int GLOBAL*)cu_seqlen_ke, \
        (float GLOBAL*)out, out_row_stride, M, N, split_n, num_warps, flags);                          \
  }

#define INSTANTIATE_MR_(H, D, BM, RELU, SUFFIX) INSTANTIATE_MR_ATTRS(H, D, BM, RELU, SUFFIX, )
#define INSTANTIATE_MR_ATTRS(H, D, BM, RELU, SUFFIX, ATTRS)                                            \
  KERNEL_ATTRS ATTRS void fp8_mqa_logits_h##H##_d##D##_bm##BM##_##SUFFIX(                                    \
      const u8* q, const u8* k, const float* kv_scale, const float* weights, const int* cu_seqlen_ks,  \
      const int* cu_seqlen_ke, float* out, i64 out_row_stride, int M, int N, int split_n,              \
      int num_warps, int flags) {                                                                      \
    fp8_mqa_logits_mr_body<H, D, BM, RELU>(                                                                  \
        (const u8 GLOBAL*)q, (const u8 GLOBAL*)k, (const float GLOBAL*)kv_scale,                       \
        (const float GLOBAL*)weights, (const int GLOBAL*)cu_seqlen_ks, (const int GLOBAL*)cu_seqlen_ke, \
        (float GLOBAL*)out, out_row_stride, M, N, split_n, num_warps, flags);                          \
  }

#define INSTANTIATE_MR(H, D, BM) INSTANTIATE_MR_(H, D, BM, RELU_ABS_SPLIT, mr)
#define INSTANTIATE_MRP(H, D, BM) INSTANTIATE_MR_(H, D, BM, RELU_PK_MAX, mrp)
#define INSTANTIATE_MRF(H, D, BM) INSTANTIATE_MR_(H, D, BM, RELU_F32, mrf)
// Instantiations told to fit 3 waves/SIMD (<= 168 VGPRs): build.py lists those that then still need no spill
// (H=32, D=128, BLOCK_M 4: 170 -> 168 VGPRs, same instruction counts).
#define INSTANTIATE_MRF3(H, D, BM) \
  INSTANTIATE_MR_ATTRS(H, D, BM, RELU_F32, mrf, __attribute__((amdgpu_waves_per_eu(3))))

// The instance lists come from rawindexer/registry.py, passed by build.py (the registry is the only list).
#if !defined(SEED_INSTANCES) || !defined(SEED_FN_INSTANCES) || !defined(MR_INSTANCES) || !defined(MRP_INSTANCES) || \
    !defined(MRF_INSTANCES) || !defined(MRF3_INSTANCES)
#error "build.py defines the instance lists SEED_INSTANCES, SEED_FN_INSTANCES, MR_INSTANCES, MRP_INSTANCES, MRF_INSTANCES, MRF3_INSTANCES"
#endif
SEED_INSTANCES(INSTANTIATE)
SEED_FN_INSTANCES(INSTANTIATE_FN)
MR_INSTANCES(INSTANTIATE_MR)
MRP_INSTANCES(INSTANTIATE_MRP)
MRF_INSTANCES(INSTANTIATE_MRF)
MRF3_INSTANCES(INSTANTIATE_MRF3)
