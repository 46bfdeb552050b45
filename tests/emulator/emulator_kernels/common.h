// Shared helpers of the emulator's micro-kernels: clang builtins only (no HIP headers).
#pragma once
#define KERNEL extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 1024)))
#define GLOBAL __attribute__((address_space(1)))
#define SHARED __attribute__((shared))
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned char u8;
typedef int v8i __attribute__((ext_vector_type(8)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef unsigned int v2u __attribute__((ext_vector_type(2)));
typedef unsigned int v3u __attribute__((ext_vector_type(3)));
typedef unsigned int v4u __attribute__((ext_vector_type(4)));

static __attribute__((device)) inline int tid() { return __builtin_amdgcn_workitem_id_x(); }
static __attribute__((device)) inline int bid() { return __builtin_amdgcn_workgroup_id_x(); }
static __attribute__((device)) inline void sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
