// LDS with s_barrier across the 4 waves of a workgroup, LDS atomics, and a barrier deadlock.
#include "common.h"

KERNEL void lds_exchange(const float* __restrict__ in, float* __restrict__ out, int* __restrict__ count) {
  static SHARED float buf[256];
  static SHARED int hits;
  const int t = tid();
  if (t == 0) hits = 0;
  buf[t] = in[bid() * 256 + t];
  sync();
  __atomic_fetch_add(&hits, t & 3, __ATOMIC_RELAXED);
  // read what other waves wrote: only correct if the barrier really waited for them
  out[bid() * 256 + t] = buf[255 - t] + 2.0f * buf[(t * 7 + 64) & 255];
  sync();
  if (t == 0) count[bid()] = hits;
}

KERNEL void early_exit_barrier(float* out) {
  static SHARED float buf[256];
  const int t = tid();
  if (t < 64) return;  // wave 0 ends; the others wait at a barrier it can never reach
  buf[t] = (float)t;
  sync();
  out[t] = buf[320 - t];
}
