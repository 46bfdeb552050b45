"""The emulator runs gfx950 code we did not write: kernels compiled by Triton (its own LLVM, its own
layouts and instruction selection), checked against numpy on fresh random inputs.

Each kernel is compiled once per session (``tests/emulator/triton_kernels.py``); every test also checks that
the decoder agrees with Triton's own assembly listing of the same compile.
"""
import re

import numpy as np
import pytest

triton = pytest.importorskip("triton", reason="Triton (pyproject extra 'interop') is not installed: these tests "
                                               "compile independent gfx950 kernels with it")

import triton_kernels as TK  # noqa: E402

from rawindexer.emulator import MemoryFault  # noqa: E402
from rawindexer.emulator.listing import compare_with_listing  # noqa: E402
from rawindexer.emulator.numerics import E4M3FN, E5M2  # noqa: E402

EPS32 = 2.0 ** -24


@pytest.fixture(scope="module")
def kernels():
    """All kernels, compiled once for the module (triton_kernels caches them per process)."""
    return {name: TK.compile_kernel(name) for name in TK.KERNELS}


def _check_listing(c):
    assert compare_with_listing(c.emulator.code, c.amdgcn, [c.symbol]) == []


def _report(c, stats):
    print(f"[{c.name}] {stats.instructions} instructions executed in {stats.waves} waves, "
          f"{len(stats.per_opcode)} distinct opcodes, compile {c.compile_seconds:.2f} s, emulate {stats.seconds:.2f} s")


def _poisoned(shape, dtype=np.float32):
    out = np.empty(shape, dtype)
    if np.dtype(dtype).kind == "f":
        out.fill(np.nan)
    else:
        out.fill(-0x5A5A5A5A)
    return out


# ---------------------------------------------------------------------------------------------------
# fp8 / bf16 tl.dot -> MFMA
# ---------------------------------------------------------------------------------------------------
def _random_fp8(rng, shape, table):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    b[~np.isfinite(table[b])] = 0x38  # NaN encodings -> 1.0 (e4m3fn: 0x38; e5m2 has inf/nan: also fine)
    return b


def _random_bf16(rng, shape):
    f = (rng.standard_normal(shape) * 4).astype(np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _run_dot(c, rng, M, N, K, a_bits, b_bits, a_val, b_val, k_per_mfma):
    C = _poisoned((M, N))
    BM, BN = TK.KERNELS[c.name][2]["BM"], TK.KERNELS[c.name][2]["BN"]
    stats = TK.run(c, [a_bits, b_bits, C, M, N, K], (M // BM, N // BN), writable=[C], readonly=[a_bits, b_bits])
    _report(c, stats)
    ref = a_val @ b_val                                # float64: every fp8/bf16 product is exact
    assert not np.isnan(C).any()
    # float32 accumulation: one rounding per MFMA (at most K / k_per_mfma of them) plus the final one
    bound = (K // k_per_mfma + 1) * EPS32 * (np.abs(a_val) @ np.abs(b_val))
    err = np.abs(C.astype(np.float64) - ref)
    assert (err <= bound).all(), f"max err {err.max()} (bound there {bound.flat[err.argmax()]})"
    _check_listing(c)
    return stats, C, ref


@pytest.mark.parametrize("name,M,N,K", [("dot_e4m3_32", 32, 32, 64),            # one MFMA per output
                                        ("dot_e4m3_32", 64, 32, 256),           # K-loop, 4 steps, 2 programs
                                        ("dot_e4m3_32_pipelined", 32, 64, 320),  # num_stages=2, 5 steps
                                        ("dot_e4m3_64_4warps", 64, 128, 192)])  # 64x64 tile, 4 waves
def test_fp8_e4m3_dot(kernels, rng, name, M, N, K):
    c = kernels[name]
    assert "v_mfma_f32_32x32x64_f8f6f4" in c.amdgcn
    A = _random_fp8(rng, (M, K), E4M3FN)
    B = _random_fp8(rng, (K, N), E4M3FN)
    stats, C, ref = _run_dot(c, rng, M, N, K, A, B, E4M3FN[A].astype(np.float64), E4M3FN[B].astype(np.float64), 64)
    assert stats.per_opcode["v_mfma_f32_32x32x64_f8f6f4"] == (M // 32) * (N // 32) * (K // 64)
    if K == 64:  # a single MFMA from a zero accumulator: the float32 rounding of the exact sum
        np.testing.assert_array_max_ulp(C, ref.astype(np.float32), maxulp=1)


def test_fp8_e5m2_dot(kernels, rng):
    c = kernels["dot_e5m2_32"]
    assert "v_mfma_f32_32x32x64_f8f6f4" in c.amdgcn
    assert re.search(r"v_mfma_f32_32x32x64_f8f6f4 .*cbsz:1 .*blgp:1", c.amdgcn), "e5m2 operands select cbsz/blgp 1"
    M, N, K = 32, 32, 192
    A = _random_fp8(rng, (M, K), E5M2)
    B = _random_fp8(rng, (K, N), E5M2)
    _run_dot(c, rng, M, N, K, A, B, E5M2[A].astype(np.float64), E5M2[B].astype(np.float64), 64)


def test_bf16_dot(kernels, rng):
    c = kernels["dot_bf16_32"]
    assert "v_mfma_f32_32x32x16_bf16" in c.amdgcn
    M, N, K = 32, 64, 96
    A = _random_bf16(rng, (M, K))
    B = _random_bf16(rng, (K, N))
    stats, _, _ = _run_dot(c, rng, M, N, K, A, B, _bf16_values(A), _bf16_values(B), 16)
    assert stats.per_opcode["v_mfma_f32_32x32x16_bf16"] == (N // 32) * (K // 16)


# ---------------------------------------------------------------------------------------------------
# masked row reductions (cross-lane: DPP; across waves: LDS + s_barrier)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,M,N", [("row_reduce", 5, 300), ("row_reduce_4warps", 3, 777)])
def test_masked_row_reduction(kernels, rng, name, M, N):
    c = kernels[name]
    stride = N + 13
    x = (rng.standard_normal((M, stride)) * 10).astype(np.float32)
    x[:, N:] = 1e30  # the padding between rows must be masked out
    s, mx = _poisoned(M), _poisoned(M)
    cnt = _poisoned(M, np.int32)
    stats = TK.run(c, [x, s, mx, cnt, N, stride], (M,), writable=[s, mx, cnt], readonly=[x])
    _report(c, stats)
    v = x[:, :N]
    np.testing.assert_array_equal(mx, v.max(axis=1))
    np.testing.assert_array_equal(cnt, (v > 0).sum(axis=1))
    exact = v.astype(np.float64).sum(axis=1)
    assert (np.abs(s - exact) <= N * EPS32 * 2 * np.abs(v).astype(np.float64).sum(axis=1)).all()
    assert any(k.endswith("_dpp") for k in stats.per_opcode), sorted(stats.per_opcode)
    if name == "row_reduce_4warps":
        assert "s_barrier" in c.amdgcn and re.search(r"\bds_write_b32\b", c.amdgcn)
        assert stats.per_class["BARRIER"] > 0
    _check_listing(c)


# ---------------------------------------------------------------------------------------------------
# tl.trans: a layout conversion through LDS
# ---------------------------------------------------------------------------------------------------
def test_transpose_through_lds(kernels, rng):
    c = kernels["transpose"]
    assert re.search(r"^\s+ds_(write|read)", c.amdgcn, re.M) and "s_barrier" in c.amdgcn
    M, N = 70, 101
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = _poisoned((N, M))
    stats = TK.run(c, [x, y, M, N], (-(-M // 32), -(-N // 64)), writable=[y], readonly=[x])
    _report(c, stats)
    np.testing.assert_array_equal(y, x.T)
    assert stats.lds_bytes_written > 0 and stats.lds_bytes_read > 0
    _check_listing(c)


# ---------------------------------------------------------------------------------------------------
# elementwise float math, comparisons, conversions, masked tail
# ---------------------------------------------------------------------------------------------------
def _elementwise_inputs(rng, n):
    x = (rng.standard_normal(n) * 20).astype(np.float32)
    y = (rng.standard_normal(n) * 20).astype(np.float32)
    iv = rng.integers(-1000, 1000, size=n).astype(np.int32)
    x[:4] = [0.0, -0.0, 3.0, -7.5]
    y[:4] = [0.0, 2.0, 3.0, 1e-3]
    return x, y, iv


def test_elementwise_math_and_conversions(kernels, rng):
    c = kernels["elementwise"]
    n = 1000  # not a multiple of BLOCK=256: the last program runs a masked tail
    x, y, iv = _elementwise_inputs(rng, n)
    scale = np.float32(rng.uniform(0.5, 3.0))
    shift = np.float32(rng.standard_normal())
    of = _poisoned(4 * n + 7)
    oi = _poisoned(2 * n + 7, np.int32)
    stats = TK.run(c, [x, y, iv, of, oi, n, float(scale), float(shift)], (-(-n // 256),),
                   writable=[of, oi], readonly=[x, y, iv])
    _report(c, stats)
    f32 = np.float32
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    e_got, d_got = of[3 * n:4 * n], of[2 * n:3 * n]
    d = (x / scale).astype(f32)                                  # IEEE division, correctly rounded
    np.testing.assert_array_equal(d_got, d)
    np.testing.assert_allclose(e_got, np.exp2(x64 * 0.25), rtol=2 * EPS32 * 2)   # v_exp_f32: ~1 ulp
    f = (x64 * y64 + np.float64(shift)).astype(f32)             # fma: one rounding (double rounding here: 1 ulp)
    gt = x > y
    np.testing.assert_array_equal(of[:n][gt], (e_got - d)[gt])
    fi = (f + iv.astype(f32)).astype(f32)
    err = np.abs(of[:n][~gt].astype(np.float64) - fi[~gt])
    assert (err <= np.spacing(np.abs(f[~gt])) + np.spacing(np.abs(fi[~gt]))).all()
    np.testing.assert_array_equal(of[n:2 * n], np.abs(y) + np.minimum(x, y) * f32(0.5))
    trunc_div = np.where((iv < 0), -((-iv) // 3), iv // 3)                # C semantics: toward zero
    np.testing.assert_array_equal(oi[:n], (x * f32(8)).astype(np.int32) + trunc_div)
    c_mod = np.fmod(iv, 2)                                                # C remainder: sign of iv
    np.testing.assert_array_equal(oi[n:2 * n], ((x >= 0) & (c_mod == 1)).astype(np.int32) + 2 * (y < x))
    assert np.isnan(of[4 * n:]).all() and (oi[2 * n:] == -0x5A5A5A5A).all()   # the tail stored nothing
    _check_listing(c)


def test_memcheck_catches_triton_store_past_a_too_small_buffer(kernels, rng):
    c = kernels["elementwise"]
    n = 1000
    x, y, iv = _elementwise_inputs(rng, n)
    of = _poisoned(4 * n)
    oi = _poisoned(2 * n, np.int32)
    short = 4 * n - 10   # floats of `of` registered: the last 10 stores of the 4th output fall outside
    spans = [(of.ctypes.data, 4 * short, True), (oi.ctypes.data, oi.nbytes, True),
             (x.ctypes.data, x.nbytes, False), (y.ctypes.data, y.nbytes, False), (iv.ctypes.data, iv.nbytes, False)]
    with pytest.raises(MemoryFault) as err:
        TK.run(c, [x, y, iv, of, oi, n, 1.5, 0.25], (-(-n // 256),), spans=spans)
    e = err.value
    print(e)
    # first offending element: index `short` of `of`, i.e. element n - 10 of the 4th store, in the last
    # program (768..999): work-item 222 = wave 3, lane 30
    assert e.address == of.ctypes.data + 4 * short
    assert e.lane == (n - 10 - 768) % 64
    assert f"lane {e.lane}" in str(e) and f"0x{e.address:x}" in str(e) and "store" in str(e)
