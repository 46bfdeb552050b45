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
//
// The designs live in kernels/sm90/, one file each, on kernels/sm90/common.cuh (windows, tile ranges, fill):
//   prefill_wg.cuh   "wg" (the default) and "wgr"    prefill_ws.cuh  "ws" (and its experiment forms)
//   prefill_wg_pair.cuh  "wgpr": wg on row-block pairs (two blocks of 256 threads per SM: 128 registers at H <= 64)
//   prefill_mma.cuh  "mma" (the baseline)            wgmma.cuh       wgmma wrappers shared by wg and ws
// rawindexer/registry.py declares every design and the instances build.py compiles (passed as INSTANCES(X)).
// The performance experiments of docs/PERFORMANCE.md v4-v6 live in
// kernels/experimental/fp8_mqa_logits_sm90_experiments.cu, which #includes this file; bench/exp_sm90.py builds them.

#include "sm90/common.cuh"
#include "sm90/prefill_mma.cuh"
#include "sm90/wgmma.cuh"
#include "sm90/prefill_wg.cuh"
#include "sm90/prefill_wg_pair.cuh"  // "wgpr": wg with each block's two warpgroups on a pair of row blocks
#include "sm90/prefill_ws.cuh"
#include "sm90/prefill_tma.cuh"  // "tma" / "tmas" (experiment, v8): K through a TMA tensor map argument
#include "sm90/prefill_tma_balanced.cuh"  // "tmasb2" (v10, auto where faster) / "tmasb": tmas on a device-computed balanced schedule
#include "sm90/prefill_tma_qshared.cuh"   // "tmaq" (v17): tmas's consumers on one shared row block, persistent grid

// Kernel symbols (build.py passes the registry's list as INSTANCES(X) = X(H, D, BM, DESIGN) ...):
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wg    wgmma design, f32 FMNMX+FFMA head reduce on the CUDA cores
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_wgr   wgmma design, bf16 MMA head reduce (mirror of gfx950's _mr)
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_ws    warp-specialised wgmma design (producer + 2 ping-pong consumers)
//   ..._ws3 / _ws4 / _ws4n                      the same with 3 / 4 consumers in issue order / 4 unordered
//   ..._wss                                     4 unordered consumers, SS wgmma, K ring built with cp.async
//   fp8_mqa_logits_sm90_h{H}_d{D}_bm{BM}_mma   mma.sync design (kept as the simple, independent baseline)
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
#define INSTANTIATE_wgpr(H, D, BM)                                                                       \
  extern "C" __global__ void __launch_bounds__(MAX_THREADS, H <= 64 ? 2 : 1)                                 \
      fp8_mqa_logits_sm90_h##H##_d##D##_bm##BM##_wgpr(                                                     \
      KERNEL_PARAMS) {                                                                                     \
    fp8_mqa_logits_wg_pair_body<H, D, BM>(KERNEL_ARGS);                                                    \
  }
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
#define INSTANTIATE(H, D, BM, DESIGN) INSTANTIATE_##DESIGN(H, D, BM)

// kernels/experimental/ includes this file for its pieces and instantiates its own INSTANCES after its macros.
#ifndef FP8_MQA_LOGITS_SM90_NO_INSTANTIATE
#ifndef INSTANCES  // the instance list comes from rawindexer/registry.py, passed by build.py
#error "build.py defines INSTANCES(X), the instance list"
#endif
INSTANCES(INSTANTIATE)
#endif
