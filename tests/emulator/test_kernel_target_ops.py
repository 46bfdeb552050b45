"""kernels/target.h, the one place the gfx kernels differ by target, on both targets (micro-kernels in
tests/emulator/emulator_kernels/target_ops.hip, emulated): each operation against numpy with the target's own fp8
table, the e4m3fn -> e4m3fnuz byte patch against its definition on every byte value."""
import numpy as np
import pytest

from rawindexer.emulator.listing import compare_with_listing
from rawindexer.emulator.numerics import E4M3FN, E4M3FNUZ

from emulator_kernels.harness import compiled, emulator, launch

TARGETS = {"gfx950": E4M3FN, "gfx942": E4M3FNUZ}
MFMA = {"gfx950": {"t_mfma32": "v_mfma_f32_32x32x64_f8f6f4", "t_mfma16": "v_mfma_f32_16x16x128_f8f6f4",
                   "t_mfma16_bf16": "v_mfma_f32_16x16x32_bf16", "t_swap": "v_permlane32_swap_b32_e32"},
        "gfx942": {"t_mfma32": "v_mfma_f32_32x32x16_fp8_fp8", "t_mfma16": "v_mfma_f32_16x16x32_fp8_fp8",
                   "t_mfma16_bf16": "v_mfma_f32_16x16x16_bf16", "t_swap": "ds_bpermute_b32"}}
COUNT = {"t_mfma32": (1, 4), "t_mfma16": (1, 4), "t_mfma16_bf16": (1, 2), "t_swap": (1, 1)}


def _lanes(mat, rows):
    per = mat.shape[1] * rows // 64
    return np.ascontiguousarray(np.stack([mat[l % rows, per * (l // rows): per * (l // rows + 1)] for l in range(64)]))


def _acc(d):
    m = d.shape[0]
    lanes = np.arange(64)[:, None]
    if m == 32:
        r = np.arange(16)[None, :]
        return np.ascontiguousarray(d[8 * (r // 4) + 4 * (lanes // 32) + r % 4, lanes % 32])
    r = np.arange(4)[None, :]
    return np.ascontiguousarray(d[4 * (lanes // 16) + r, lanes % 16])


def _finite_bytes(rng, shape, table):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    b[~np.isfinite(table[b])] = 0x01
    return b


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_listing(arch):
    image, asm = compiled("target_ops", arch)
    emu = emulator("target_ops", arch)
    assert emu.target.name == arch
    assert compare_with_listing(emu.code, asm, emu.kernels) == []


@pytest.mark.parametrize("arch", sorted(TARGETS))
@pytest.mark.parametrize("kernel,m,k", [("t_mfma32", 32, 64), ("t_mfma16", 16, 128)])
def test_fp8_mfma(rng, arch, kernel, m, k):
    table = TARGETS[arch]
    A, Bt = _finite_bytes(rng, (m, k), table), _finite_bytes(rng, (m, k), table)
    C = rng.standard_normal((m, m)).astype(np.float32)
    out = np.full((64, 16 if m == 32 else 4), np.nan, np.float32)
    a_l, b_l, c_l = _lanes(A, m), _lanes(Bt, m), _acc(C)
    stats = launch("target_ops", kernel, (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
                   readonly=[a_l, b_l, c_l], arch=arch)
    exact = table[A] @ table[Bt].T + C.astype(np.float64)
    # one float32 rounding per instruction: 1 on gfx950, 4 chained on gfx942
    n = COUNT[kernel][arch == "gfx942"]
    assert stats.per_opcode[MFMA[arch][kernel]] == n
    bound = n * 2.0 ** -24 * (np.abs(table[A]) @ np.abs(table[Bt]).T + np.abs(C))
    assert (np.abs(out - _acc(exact)) <= _acc(bound)).all()
    if arch == "gfx950":
        np.testing.assert_array_equal(out, _acc(exact.astype(np.float32)))


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_bf16_mfma(rng, arch):
    bits = lambda s: ((rng.standard_normal(s) * 3).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # noqa
    val = lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    A, Bt = bits((16, 32)), bits((16, 32))
    C = rng.standard_normal((16, 16)).astype(np.float32)
    out = np.full((64, 4), np.nan, np.float32)
    a_l, b_l, c_l = _lanes(A, 16), _lanes(Bt, 16), _acc(C)
    stats = launch("target_ops", "t_mfma16_bf16", (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
                   readonly=[a_l, b_l, c_l], arch=arch)
    n = COUNT["t_mfma16_bf16"][arch == "gfx942"]
    assert stats.per_opcode[MFMA[arch]["t_mfma16_bf16"]] == n
    exact = val(A) @ val(Bt).T + C
    bound = n * 2.0 ** -24 * (np.abs(val(A)) @ np.abs(val(Bt)).T + np.abs(C))
    assert (np.abs(out - _acc(exact)) <= _acc(bound)).all()


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_permlane16_swap(rng, arch):
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128, np.uint32)
    stats = launch("target_ops", "t_swap16", (1, 1, 1), (64, 1, 1), [a, b, out], writable=[out], readonly=[a, b],
                   arch=arch)
    assert stats.per_opcode["v_permlane16_swap_b32_e32" if arch == "gfx950" else "ds_bpermute_b32"] == 1
    odd = (np.arange(64) & 16) != 0
    np.testing.assert_array_equal(out[:64], np.where(odd, np.roll(b, 16), a))    # new vdst: odd rows from src
    np.testing.assert_array_equal(out[64:], np.where(odd, b, np.roll(a, -16)))   # new vsrc: even rows from old


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_permlane32_swap(rng, arch):
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128, np.uint32)
    stats = launch("target_ops", "t_swap", (1, 1, 1), (64, 1, 1), [a, b, out], writable=[out], readonly=[a, b],
                   arch=arch)
    assert stats.per_opcode[MFMA[arch]["t_swap"]] == 1
    np.testing.assert_array_equal(out[:64], np.concatenate([a[:32], b[:32]]))    # new vdst
    np.testing.assert_array_equal(out[64:], np.concatenate([a[32:], b[32:]]))    # new vsrc


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_fn_bytes_patched_for_fnuz(rng, arch):
    """Every byte value in every byte position: K's patch maps 0x80 -> 0x00 only; Q's also maps fn's NaNs
    0x7F / 0xFF -> 0x80. Read as e4m3fnuz, a patched byte is half its e4m3fn value (NaN for fn NaNs in Q)."""
    cols = [rng.permutation(256).astype(np.uint32) for _ in range(4)]
    a = cols[0] | (cols[1] << 8) | (cols[2] << 16) | (cols[3] << 24)
    out = np.zeros(2 * a.size, np.uint32)
    launch("target_ops", "t_fn_fix", (4, 1, 1), (64, 1, 1), [a, out, a.size], writable=[out], readonly=[a], arch=arch)
    for byte in range(4):
        src = (a >> (8 * byte)) & 0xFF
        k, q = (out[:a.size] >> (8 * byte)) & 0xFF, (out[a.size:] >> (8 * byte)) & 0xFF
        np.testing.assert_array_equal(k, np.where(src == 0x80, 0, src))
        np.testing.assert_array_equal(q, np.where(src == 0x80, 0, np.where((src & 0x7F) == 0x7F, 0x80, src)))
        fn = E4M3FN[src]
        ok = ~np.isnan(fn)
        np.testing.assert_array_equal(E4M3FNUZ[q[ok]], fn[ok] / 2)   # -0 -> +0 / 2: equal as numbers
        assert np.isnan(E4M3FNUZ[q[~ok]]).all()
