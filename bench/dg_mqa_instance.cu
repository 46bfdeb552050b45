// DeepGEMM's prefill MQA-logits kernel, instantiated exactly as ncu named the instance the H200 ran at H = 64,
// D = 128 (docs/PERFORMANCE.md, v12), so its SASS can be read offline beside ours (bench/sass_loop_stats.py).
// Nothing of DeepGEMM is copied: the header comes from its wheel (see the build line in bench/sass_loop_stats.py).
// Template order: kNumHeads, kHeadDim, kIsCompressedLogits, BLOCK_Q, BLOCK_KV, kNumQStages, kNumKVStages, kNumSMs,
// kNumTMAThreads, kNumMathThreads, logits_dtype_t.
#include <deep_gemm/impls/sm90_fp8_mqa_logits.cuh>

template __global__ void deep_gemm::sm90_fp8_mqa_logits<64, 128, false, 2, 256, 3, 3, 132, 128, 512, float>(
    uint32_t, uint32_t, uint32_t, uint32_t, uint32_t*, uint32_t*, float*,
    const __grid_constant__ cute::TmaDescriptor, const __grid_constant__ cute::TmaDescriptor,
    const __grid_constant__ cute::TmaDescriptor, const __grid_constant__ cute::TmaDescriptor);
