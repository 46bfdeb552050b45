"""Triton kernels compiled for gfx950 or gfx942 by Triton itself (not by us), for the emulator's independence tests.

``compile_kernel(name, arch="gfx950")`` compiles one of the kernels below with ``triton.compile`` for
``GPUTarget("hip", arch, 64)`` (works on a CPU-only machine: Triton ships its own LLVM) and caches
the result for the process. ``run(compiled, args, grid, writable, readonly)`` launches it on the
emulator: it appends the trailing pointer arguments Triton's AMD backend adds (global scratch,
profile scratch; both zero-sized for these kernels, so null is valid) and passes the kernel's
dynamic LDS (``metadata.shared``).

Imported only by tests that have already done ``pytest.importorskip("triton")``.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from rawindexer.emulator import Emulator, pack_kernargs

TARGET = GPUTarget("hip", "gfx950", 64)


# ---------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N], row-major, one BM x BN tile per program, K-loop of BK steps."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def row_reduce_kernel(x_ptr, sum_ptr, max_ptr, cnt_ptr, N, stride, BLOCK: tl.constexpr):
    """Per row of x[M, N]: sum, max, and count of positive entries, over N (masked tail)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float32)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    c = tl.zeros((BLOCK,), tl.int32)
    for start in range(0, N, BLOCK):
        idx = start + cols
        mask = idx < N
        x = tl.load(x_ptr + row * stride + idx, mask=mask, other=0.0)
        s += x
        m = tl.maximum(m, tl.where(mask, x, float("-inf")))
        c += (mask & (x > 0)).to(tl.int32)
    tl.store(sum_ptr + row, tl.sum(s, axis=0))
    tl.store(max_ptr + row, tl.max(m, axis=0))
    tl.store(cnt_ptr + row, tl.sum(c, axis=0))


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """y[N, M] = x[M, N].T, tiles of BM x BN with masked edges (layout change goes through LDS)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    xt = tl.trans(x)
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], xt, mask=tl.trans(mask))


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, i_ptr, out_f_ptr, out_i_ptr, n, scale, shift, BLOCK: tl.constexpr):
    """Float math, comparisons and int<->float conversions on a masked 1D range."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0)
    iv = tl.load(i_ptr + offs, mask=mask, other=0)
    e = tl.exp2(x * 0.25)
    f = tl.math.fma(x, y, shift)
    d = x / scale                                   # division by a runtime value
    q = tl.where(x > y, e - d, f + iv.to(tl.float32))
    r = tl.abs(y) + tl.minimum(x, y) * 0.5
    tl.store(out_f_ptr + offs, q, mask=mask)
    tl.store(out_f_ptr + n + offs, r, mask=mask)
    tl.store(out_f_ptr + 2 * n + offs, d, mask=mask)
    tl.store(out_f_ptr + 3 * n + offs, e, mask=mask)
    tl.store(out_i_ptr + offs, (x * 8.0).to(tl.int32) + iv // 3, mask=mask)
    tl.store(out_i_ptr + n + offs, ((x >= 0) & (iv % 2 == 1)).to(tl.int32) + 2 * (y < x).to(tl.int32), mask=mask)


# name -> (fn, signature, constexprs, options)
KERNELS = {
    "dot_e4m3_32": (dot_kernel, {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                 "K": "i32"}, {"BM": 32, "BN": 32, "BK": 64}, {"num_warps": 1, "num_stages": 1}),
    "dot_e4m3_32_pipelined": (dot_kernel, {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "M": "i32",
                                           "N": "i32", "K": "i32"}, {"BM": 32, "BN": 32, "BK": 64},
                              {"num_warps": 1, "num_stages": 2}),
    "dot_e4m3_64_4warps": (dot_kernel, {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "M": "i32",
                                        "N": "i32", "K": "i32"}, {"BM": 64, "BN": 64, "BK": 64},
                           {"num_warps": 4, "num_stages": 2}),
    "dot_e5m2_32": (dot_kernel, {"a_ptr": "*fp8e5", "b_ptr": "*fp8e5", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                 "K": "i32"}, {"BM": 32, "BN": 32, "BK": 64}, {"num_warps": 1, "num_stages": 2}),
    "dot_bf16_32": (dot_kernel, {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                 "K": "i32"}, {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 1, "num_stages": 2}),
    "row_reduce": (row_reduce_kernel, {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32", "cnt_ptr": "*i32",
                                       "N": "i32", "stride": "i32"}, {"BLOCK": 128}, {"num_warps": 1}),
    "row_reduce_4warps": (row_reduce_kernel, {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32",
                                              "cnt_ptr": "*i32", "N": "i32", "stride": "i32"}, {"BLOCK": 512},
                          {"num_warps": 4}),
    "transpose": (transpose_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32"},
                  {"BM": 32, "BN": 64}, {"num_warps": 4}),
    "elementwise": (elementwise_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "i_ptr": "*i32", "out_f_ptr": "*fp32",
                                         "out_i_ptr": "*i32", "n": "i32", "scale": "fp32", "shift": "fp32"},
                    {"BLOCK": 256}, {"num_warps": 2}),
}


# gfx942's fp8 types, e4m3fnuz ("fp8e4b8") and e5m2fnuz ("fp8e5b16"): compiled for gfx942 only
FNUZ_KERNELS = {
    "dot_e4m3fnuz_32": (dot_kernel, {"a_ptr": "*fp8e4b8", "b_ptr": "*fp8e4b8", "c_ptr": "*fp32", "M": "i32",
                                     "N": "i32", "K": "i32"}, {"BM": 32, "BN": 32, "BK": 64},
                        {"num_warps": 1, "num_stages": 2}),
    "dot_e4m3fnuz_64_4warps": (dot_kernel, {"a_ptr": "*fp8e4b8", "b_ptr": "*fp8e4b8", "c_ptr": "*fp32", "M": "i32",
                                            "N": "i32", "K": "i32"}, {"BM": 64, "BN": 64, "BK": 64},
                               {"num_warps": 4, "num_stages": 2}),
    "dot_e5m2fnuz_32": (dot_kernel, {"a_ptr": "*fp8e5b16", "b_ptr": "*fp8e5b16", "c_ptr": "*fp32", "M": "i32",
                                     "N": "i32", "K": "i32"}, {"BM": 32, "BN": 32, "BK": 64},
                        {"num_warps": 1, "num_stages": 2}),
}
ALL_KERNELS = {**KERNELS, **FNUZ_KERNELS}


@dataclass
class Compiled:
    name: str
    symbol: str
    hsaco: bytes
    amdgcn: str
    metadata: object
    emulator: Emulator
    compile_seconds: float


@functools.cache
def compile_kernel(name: str, arch: str = "gfx950") -> Compiled:
    fn, sig, consts, opts = ALL_KERNELS[name]
    sig = dict(sig, **{k: "constexpr" for k in consts})
    t0 = time.perf_counter()
    target = TARGET if arch == TARGET.arch else GPUTarget("hip", arch, 64)
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target, options=opts)
    dt = time.perf_counter() - t0
    return Compiled(name, k.metadata.name, k.asm["hsaco"], k.asm["amdgcn"], k.metadata, Emulator(k.asm["hsaco"]), dt)


def block_of(c: Compiled) -> tuple[int, int, int]:
    return (c.metadata.num_warps * c.metadata.warp_size, 1, 1)


def full_args(c: Compiled, args: Sequence) -> list:
    """The kernel's explicit arguments: ours, then null for each trailing pointer Triton appended
    (global scratch and profile scratch: these kernels declare zero bytes of either)."""
    explicit = [a for a in c.emulator.code.kernels[c.symbol].args
                if not a.get(".value_kind", "").startswith("hidden_")]
    extra = explicit[len(args):]
    assert all(a[".value_kind"] == "global_buffer" for a in extra), extra
    assert getattr(c.metadata, "global_scratch_size", 0) in (0, None)
    assert getattr(c.metadata, "profile_scratch_size", 0) in (0, None)
    return list(args) + [0] * len(extra)


def run(c: Compiled, args: Sequence, grid, writable: Sequence[np.ndarray] = (), readonly: Sequence[np.ndarray] = (),
        spans: Sequence | None = None):
    """Launch on the emulator; ``spans`` overrides the registered buffers (for memcheck tests)."""
    grid = (tuple(grid) + (1, 1))[:3]
    block = block_of(c)
    kernargs = pack_kernargs(c.emulator.code.kernels[c.symbol], full_args(c, args), grid, block)
    if spans is None:
        spans = [(a.ctypes.data, a.nbytes, True) for a in writable] + \
                [(a.ctypes.data, a.nbytes, False) for a in readonly]
    return c.emulator.launch(c.symbol, grid, block, kernargs, spans, shared_mem=c.metadata.shared)
