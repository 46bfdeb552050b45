// sm_90a's asynchronous copy machinery, shared by the designs that stream K (or the paged cache) through a ring in
// shared memory: mbarriers, the bulk copy engine, TMA tensor maps and the 128B / 64B swizzle that TMA and wgmma
// share. Users: prefill_ws.cuh ("ws" family), prefill_tma.cuh ("tmas"), paged_tma.cuh (decode "tma").
#pragma once
#include <stdint.h>

// CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned (cuda.h not needed on the device side).
struct __align__(64) TmaMap {
  unsigned long long opaque[16];
};

// Where byte `a` of an unswizzled row-major [rows, D] buffer lands under the swizzle TMA and wgmma share.
template <int D>
__device__ __forceinline__ uint32_t swizzled(uint32_t a) {
  static_assert(D == 64 || D == 128, "TMA design: D = 64 (64B swizzle) or 128 (128B swizzle)");
  return a ^ (((a >> 7) & (D / 16 - 1)) << 4);
}

template <int D>
__device__ __forceinline__ uint64_t swizzled_desc(uint32_t addr) {
  constexpr uint64_t layout = D == 128 ? 1 : 2;  // sm_90 descriptor: 1 = 128B swizzle, 2 = 64B swizzle
  return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)(((8 * D) >> 4) & 0x3FFF) << 32) | (layout << 62);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The K ring's barriers, before any use: per stage a "full" barrier of `full_arrivals` (the producers) and an
// "empty" one of `empty_arrivals` (the consumers), 8 bytes apart from full0 / empty0; thread 0 initialises them
// and makes the init visible to the async proxy (the copy engine completes transactions on them). Then the block's
// generic stores to shared memory so far (Q, staged by every thread) are made visible to wgmma's async proxy, and
// the block meets.
template <int STAGES>
__device__ __forceinline__ void init_ring_barriers(uint32_t full0, uint32_t empty0, uint32_t full_arrivals,
                                                   uint32_t empty_arrivals, int tid) {
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full0 + 8 * s, full_arrivals);
      mbar_init(empty0 + 8 * s, empty_arrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Raise the transaction count of the barrier's current phase without arriving (the thread arrives later).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
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

// Per-thread cp.async (LDGSTS): many copies in flight with no data registers held, completed by commit / wait groups.
// 16-byte cp.async that bypasses L1 (.cg); src_bytes = 0 writes zeros (a token past the window).
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 4-byte cp.async (.ca: .cg takes 16 bytes only); src_bytes = 0 writes zeros.
__device__ __forceinline__ void cp_async4_zfill(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// DESIGN: Q staging of the swizzled prefill designs ("tmas", "tmasb4"; session 10; the decode "tma" kernel spells the
// same loop inline, where this helper changed ptxas's code for two kernels). A block's (or a consumer's)
// Q rows are one contiguous span of q, stored in the same byte order, swizzled: copy i moves bytes [16 i, 16 i + 16)
// to offset 16 i of the layout, on unsigned offsets, copies first, first + stride, ... Bytes from valid_bytes on are
// zeros (src_bytes 0, read from `fallback`, a valid address: rows past M or past next_n). ROLLED keeps the loop rolled
// (cp.async holds no data registers, so a trip costs only issue slots, where registers are scarce).
template <int D, bool ROLLED = false>
__device__ __forceinline__ void cp_async_span_swizzled(uint32_t dst, const uint8_t* span, uint32_t total_bytes,
                                                       uint32_t valid_bytes, const uint8_t* fallback, uint32_t first,
                                                       uint32_t stride) {
  if constexpr (ROLLED) {
#pragma unroll 1
    for (uint32_t off = 16 * first; off < total_bytes; off += 16 * stride) {
      const bool ok = off < valid_bytes;
      cp_async16_zfill(dst + swizzled<D>(off), ok ? span + off : fallback, ok ? 16u : 0u);
    }
  } else {
    for (uint32_t off = 16 * first; off < total_bytes; off += 16 * stride) {
      const bool ok = off < valid_bytes;
      cp_async16_zfill(dst + swizzled<D>(off), ok ? span + off : fallback, ok ? 16u : 0u);
    }
  }
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_groups() {  // at most N of this thread's groups still in flight
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
