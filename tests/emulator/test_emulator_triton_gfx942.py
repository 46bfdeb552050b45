"""The emulator runs gfx942 code we did not write: Triton kernels compiled by Triton for
``GPUTarget("hip", "gfx942", 64)`` (its own LLVM and instruction selection), against numpy.

This is the independent check of the emulator's gfx942 paths: the fnuz fp8 dot (Triton's ``fp8e4b8`` /
``fp8e5b16`` become ``v_mfma_f32_32x32x16_{fp8,bf8}_*``, which read e4m3fnuz / e5m2fnuz), the bf16 dot
(``v_mfma_f32_32x32x8_bf16``), and the cross-lane reductions Triton emits for gfx942. Every test also
checks the decoder against Triton's own listing of the same compile.
"""
import re

import numpy as np
import pytest

triton = pytest.importorskip("triton", reason="Triton (pyproject extra 'interop') is not installed: these tests "
                                               "compile independent gfx942 kernels with it")

import triton_kernels as TK  # noqa: E402

from rawindexer.emulator.listing import compare_with_listing  # noqa: E402
from rawindexer.emulator.numerics import E4M3FN, E4M3FNUZ, E5M2FNUZ  # noqa: E402

ARCH = "gfx942"
EPS32 = 2.0 ** -24


def _compiled(name):
    c = TK.compile_kernel(name, ARCH)
    assert c.emulator.target.name == ARCH
    return c


def _check_listing(c):
    assert compare_with_listing(c.emulator.code, c.amdgcn, [c.symbol]) == []


def _fnuz_bytes(rng, shape):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    b[b == 0x80] = 0x00   # 0x80 is the fnuz NaN
    return b


def _run_dot(c, M, N, K, a_bits, b_bits, a_val, b_val, k_per_mfma):
    C = np.full((M, N), np.nan, np.float32)
    consts = TK.ALL_KERNELS[c.name][2]
    stats = TK.run(c, [a_bits, b_bits, C, M, N, K], (M // consts["BM"], N // consts["BN"]), writable=[C],
                   readonly=[a_bits, b_bits])
    print(f"[{c.name} {ARCH}] {stats.instructions} instructions, emulate {stats.seconds:.2f} s")
    ref = a_val @ b_val                    # float64: every fp8/bf16 product is exact
    assert not np.isnan(C).any()
    bound = (K // k_per_mfma + 1) * EPS32 * (np.abs(a_val) @ np.abs(b_val))
    err = np.abs(C.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max err {err.max()} (bound there {bound.flat[err.argmax()]})"
    _check_listing(c)
    return stats, C, ref


@pytest.mark.parametrize("name,M,N,K", [("dot_e4m3fnuz_32", 32, 32, 16 * 4),      # one K step, 4 MFMAs
                                        ("dot_e4m3fnuz_32", 64, 32, 192),         # K-loop, 2 programs
                                        ("dot_e4m3fnuz_64_4warps", 64, 128, 128)])  # 4 waves
def test_fnuz_fp8_dot(rng, name, M, N, K):
    c = _compiled(name)
    assert "v_mfma_f32_32x32x16_fp8_fp8" in c.amdgcn
    A, B = _fnuz_bytes(rng, (M, K)), _fnuz_bytes(rng, (K, N))
    stats, C, ref = _run_dot(c, M, N, K, A, B, E4M3FNUZ[A], E4M3FNUZ[B], 16)
    assert stats.per_opcode["v_mfma_f32_32x32x16_fp8_fp8"] == (M // 32) * (N // 32) * (K // 16)
    # read as OCP e4m3fn the same bytes give a product 4x larger almost everywhere: the formats are told apart
    ocp = E4M3FN[A] @ E4M3FN[B]
    assert np.nanmedian(np.abs(ocp) / np.maximum(np.abs(ref), 1e-30)) > 3


def test_fnuz_bf8_dot(rng):
    c = _compiled("dot_e5m2fnuz_32")
    assert "v_mfma_f32_32x32x16_bf8_bf8" in c.amdgcn
    M, N, K = 32, 32, 128
    A, B = _fnuz_bytes(rng, (M, K)), _fnuz_bytes(rng, (K, N))
    _run_dot(c, M, N, K, A, B, E5M2FNUZ[A], E5M2FNUZ[B], 16)


def test_bf16_dot(rng):
    c = _compiled("dot_bf16_32")
    assert "v_mfma_f32_32x32x8_bf16" in c.amdgcn
    M, N, K = 32, 64, 96
    A = ((rng.standard_normal((M, K)) * 4).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    B = ((rng.standard_normal((K, N)) * 4).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    val = lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    stats, _, _ = _run_dot(c, M, N, K, A, B, val(A), val(B), 8)
    assert stats.per_opcode["v_mfma_f32_32x32x8_bf16"] == (N // 32) * (K // 8)


@pytest.mark.parametrize("name,M,N", [("row_reduce", 5, 300), ("row_reduce_4warps", 3, 777)])
def test_masked_row_reduction(rng, name, M, N):
    """Sum, max and a count per row: the cross-lane steps Triton emits for gfx942 (DPP row ops,
    row_bcast / permlane-free swizzles) and, with 4 waves, LDS + s_barrier."""
    c = _compiled(name)
    stride = N + 13
    x = (rng.standard_normal((M, stride)) * 10).astype(np.float32)
    x[:, N:] = 1e30
    s, mx = np.full(M, np.nan, np.float32), np.full(M, np.nan, np.float32)
    cnt = np.full(M, -0x5A5A5A5A, np.int32)
    stats = TK.run(c, [x, s, mx, cnt, N, stride], (M,), writable=[s, mx, cnt], readonly=[x])
    v = x[:, :N]
    np.testing.assert_array_equal(mx, v.max(axis=1))
    np.testing.assert_array_equal(cnt, (v > 0).sum(axis=1))
    exact = v.astype(np.float64).sum(axis=1)
    assert (np.abs(s - exact) <= N * EPS32 * 2 * np.abs(v).astype(np.float64).sum(axis=1)).all()
    cross_lane = [k for k in stats.per_opcode if k.endswith("_dpp") or "permute" in k or "swizzle" in k
                  or "readlane" in k]
    assert cross_lane, sorted(stats.per_opcode)
    print(f"[{name} {ARCH}] cross-lane ops: {sorted(cross_lane)}")
    if name == "row_reduce_4warps":
        assert re.search(r"\bs_barrier\b", c.amdgcn) and stats.per_class["BARRIER"] > 0
    _check_listing(c)
