"""The emulator on gfx942 (CDNA3, MI300X/MI325X) code objects: the target is read from the ELF, and the
fp8/bf8 MFMAs and conversions read e4m3fnuz / e5m2fnuz there (gfx950: OCP e4m3fn / e5m2).

Micro-kernels compiled here with ``--offload-arch=gfx942`` (tests/emulator/emulator_kernels/mfma_gfx942.hip,
and fp8cvt.hip recompiled for gfx942) against numpy and ml_dtypes' fnuz casts; every compile's listing
is checked against the decoder.
"""
import struct

import numpy as np
import pytest

from rawindexer.emulator import DecodeError, Emulator
from rawindexer.emulator.listing import compare_with_listing
from rawindexer.emulator.numerics import E4M3FN, E4M3FNUZ, E5M2FNUZ

from emulator_kernels.harness import compiled, emulator, launch
from test_emulator_ops import NAN_POISON, _assert_same_floats, _bytes_in_every_position, _f32_to_f8_cases

ARCH = "gfx942"
ml = pytest.importorskip("ml_dtypes")
FNUZ = {"fp8": ml.float8_e4m3fnuz, "bf8": ml.float8_e5m2fnuz}
TABLE = {"fp8": E4M3FNUZ, "bf8": E5M2FNUZ}


def _values(b, dt):
    return (np.asarray(b) & 0xFF).astype(np.uint8).view(dt).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# the target comes from the code object
# ---------------------------------------------------------------------------------------------------
def test_target_read_from_code_object():
    assert emulator("mfma_gfx942", ARCH).target.name == "gfx942"
    assert emulator("fp8cvt", "gfx950").target.name == "gfx950"
    assert emulator("fp8cvt", ARCH).target.fp8.name == "fp8 e4m3fnuz"


def test_metadata_and_e_flags_that_disagree_are_refused():
    image = bytearray(compiled("mfma_gfx942", ARCH)[0])
    (flags,) = struct.unpack_from("<I", image, 48)
    assert flags & 0xFF == 0x4C                              # EF_AMDGPU_MACH_AMDGCN_GFX942
    struct.pack_into("<I", image, 48, (flags & ~0xFF) | 0x4F)  # claim gfx950 in the header only
    with pytest.raises(DecodeError, match="gfx942.*gfx950"):
        Emulator(bytes(image))


@pytest.mark.parametrize("source", ["mfma_gfx942", "fp8cvt"])
def test_decoder_matches_gfx942_listing(source):
    image, asm = compiled(source, ARCH)
    emu = Emulator(image)
    assert compare_with_listing(emu.code, asm, emu.kernels) == []


def test_fn_byte_read_as_fnuz_is_half_its_value():
    """The fact the gfx942 kernel's e4m3fn path rests on: every e4m3fn byte read as e4m3fnuz is exactly
    half its value, except 0x80 (fn's -0, fnuz's NaN) and fn's NaNs 0x7F / 0xFF (fnuz: 240, -240)."""
    b = np.arange(256)
    special = np.isin(b, [0x7F, 0x80, 0xFF])
    np.testing.assert_array_equal(E4M3FNUZ[~special], E4M3FN[~special] / 2)
    assert np.isnan(E4M3FNUZ[0x80]) and E4M3FN[0x80] == 0 and np.signbit(E4M3FN[0x80])
    assert (E4M3FNUZ[0x7F], E4M3FNUZ[0xFF]) == (240.0, -240.0) and np.isnan(E4M3FN[[0x7F, 0xFF]]).all()


# ---------------------------------------------------------------------------------------------------
# conversions: fp8cvt.hip compiled for gfx942
# ---------------------------------------------------------------------------------------------------
def test_cvt_f32_fnuz_every_byte_every_byte_select(rng):
    a = _bytes_in_every_position(rng)
    n = a.size
    out = np.full(8 * n, NAN_POISON, np.uint32).view(np.float32)
    stats = launch("fp8cvt", "cvt_f32_f8", (n // 64, 1, 1), (64, 1, 1), [a, out, n], writable=[out], readonly=[a],
                   arch=ARCH)
    got = out.reshape(8, n)
    for kind, dt in enumerate(FNUZ.values()):
        for byte in range(4):
            _assert_same_floats(got[4 * kind + byte], _values(a >> (8 * byte), dt))
    assert stats.per_opcode["v_cvt_f32_fp8_sdwa"] > 0 and stats.per_opcode["v_cvt_f32_bf8_sdwa"] > 0


def test_cvt_pk_f32_fnuz_both_words(rng):
    a = _bytes_in_every_position(rng)
    n = a.size
    out = np.full(8 * n, NAN_POISON, np.uint32).view(np.float32)
    launch("fp8cvt", "cvt_pk_f32_f8", (n // 64, 1, 1), (64, 1, 1), [a, out, n], writable=[out], readonly=[a],
           arch=ARCH)
    got = out.reshape(8, n)
    for kind, dt in enumerate(FNUZ.values()):
        for word in range(2):
            for half in range(2):
                _assert_same_floats(got[4 * kind + 2 * word + half], _values(a >> (16 * word + 8 * half), dt))


@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_cvt_pk_fnuz_f32_rounding_overflow_and_zero(rng, kind):
    """v_cvt_pk_{fp8,bf8}_f32 on gfx942: round to nearest even; overflow, infinities and NaN -> 0x80 (the
    only NaN); -0 and negative values that round to zero -> 0x00 (fnuz has no -0); word select kept."""
    dt = FNUZ[kind]
    x = _f32_to_f8_cases(rng, dt)
    y = rng.permutation(x)
    n = x.size
    old = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = np.full(4 * n, NAN_POISON, np.uint32)
    launch("fp8cvt", "cvt_pk_f8_f32", (n // 64, 1, 1), (64, 1, 1), [x, y, old, out, n], writable=[out],
           readonly=[x, y, old], arch=ARCH)
    first = 0 if kind == "fp8" else 2
    got = out.reshape(4, n)[first:first + 2]
    with np.errstate(invalid="ignore", over="ignore"):
        pair = x.astype(dt).view(np.uint8).astype(np.uint32) | (y.astype(dt).view(np.uint8).astype(np.uint32) << 8)
    np.testing.assert_array_equal(got[0], (old & 0xFFFF0000) | pair)     # fnuz has one NaN code: bit-exact
    np.testing.assert_array_equal(got[1], (old & 0xFFFF) | (pair << 16))
    lo = got[0] & 0xFF
    assert (lo[np.isinf(x) | np.isnan(x)] == 0x80).all()
    assert (lo[(x == 0) & np.signbit(x)] == 0).all() and ((x == 0) & np.signbit(x)).any()
    # the overflow edge: the largest value plus half an ulp (240 + 16 / 2, 57344 + 8192 / 2); round to nearest even
    # takes everything from there past the largest value (57344 * 1.07 still rounds down to it: 1.0714 is the edge)
    overflow = 248.0 if kind == "fp8" else 61440.0
    assert (lo[np.isfinite(x) & (np.abs(x) >= overflow)] == 0x80).all()
    assert (lo[np.isfinite(x) & (np.abs(x) < overflow)] != 0x80).all()


# ---------------------------------------------------------------------------------------------------
# MFMA: fp8/bf8 (fnuz) and bf16 on gfx942
# ---------------------------------------------------------------------------------------------------
def _lanes(mat: np.ndarray, rows: int) -> np.ndarray:
    """(rows x K) operand -> (64 lanes x K*rows/64): lane i + rows*g holds row i, k-group g."""
    per = mat.shape[1] * rows // 64
    return np.stack([mat[l % rows, per * (l // rows): per * (l // rows + 1)] for l in range(64)])


def _acc(d: np.ndarray) -> np.ndarray:
    """m x m result -> (64 lanes, registers) as the MFMA holds it."""
    m = d.shape[0]
    lanes = np.arange(64)[:, None]
    if m == 32:
        r = np.arange(16)[None, :]
        return d[8 * (r // 4) + 4 * (lanes // 32) + r % 4, lanes % 32]
    r = np.arange(4)[None, :]
    return d[4 * (lanes // 16) + r, lanes % 16]


def _fnuz_bytes(rng, shape, kind):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    b[b == 0x80] = 0x00 if kind == "fp8" else 0x01
    return b


@pytest.mark.parametrize("kernel,m,k,ka,kb", [
    ("mfma32_fp8_fp8", 32, 16, "fp8", "fp8"), ("mfma32_fp8_bf8", 32, 16, "fp8", "bf8"),
    ("mfma32_bf8_fp8", 32, 16, "bf8", "fp8"), ("mfma32_bf8_bf8", 32, 16, "bf8", "bf8"),
    ("mfma16_fp8_fp8", 16, 32, "fp8", "fp8"), ("mfma16_bf8_bf8", 16, 32, "bf8", "bf8")])
def test_mfma_fnuz(rng, kernel, m, k, ka, kb):
    A = _fnuz_bytes(rng, (m, k), ka)
    Bt = _fnuz_bytes(rng, (m, k), kb)
    C = rng.standard_normal((m, m)).astype(np.float32)
    out = np.full((64, 16 if m == 32 else 4), np.nan, np.float32)
    a_l, b_l, c_l = _lanes(A, m), _lanes(Bt, m), np.ascontiguousarray(_acc(C))
    stats = launch("mfma_gfx942", kernel, (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
                   readonly=[a_l, b_l, c_l], arch=ARCH)
    D = TABLE[ka][A] @ TABLE[kb][Bt].T + C.astype(np.float64)   # exact in float64
    np.testing.assert_array_equal(out, _acc(D.astype(np.float32)))  # one rounding of the exact sum
    name = f"v_mfma_f32_{m}x{m}x{k}_{ka}_{kb}"
    assert stats.per_opcode[name] == 1


def test_mfma_fnuz_nan_byte_poisons_its_row_and_column(rng):
    A = _fnuz_bytes(rng, (32, 16), "fp8")
    Bt = _fnuz_bytes(rng, (32, 16), "fp8")
    A[5, 3] = 0x80   # fnuz NaN (an e4m3fn -0 read on gfx942)
    Bt[7, 11] = 0x80
    C = np.zeros((32, 32), np.float32)
    out = np.zeros((64, 16), np.float32)
    a_l, b_l, c_l = _lanes(A, 32), _lanes(Bt, 32), np.ascontiguousarray(_acc(C))
    launch("mfma_gfx942", "mfma32_fp8_fp8", (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
           readonly=[a_l, b_l, c_l], arch=ARCH)
    nan = np.zeros((32, 32), bool)
    nan[5, :] = nan[:, 7] = True
    np.testing.assert_array_equal(np.isnan(out), _acc(nan))


def _bf16(rng, shape):
    return ((rng.standard_normal(shape) * 4).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("kernel,m,k", [("mfma16_bf16", 16, 16), ("mfma32_bf16", 32, 8)])
def test_mfma_bf16(rng, kernel, m, k):
    A, Bt = _bf16(rng, (m, k)), _bf16(rng, (m, k))
    C = rng.standard_normal((m, m)).astype(np.float32)
    out = np.full((64, 16 if m == 32 else 4), np.nan, np.float32)
    a_l, b_l, c_l = _lanes(A, m), _lanes(Bt, m), np.ascontiguousarray(_acc(C))
    stats = launch("mfma_gfx942", kernel, (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
                   readonly=[a_l, b_l, c_l], arch=ARCH)
    val = lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    D = val(A) @ val(Bt).T + C.astype(np.float64)
    np.testing.assert_array_equal(out, _acc(D.astype(np.float32)))
    assert stats.per_opcode[f"v_mfma_f32_{m}x{m}x{k}_bf16"] == 1


def test_half_wave_swap_by_bpermute(rng):
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    out = np.full(64, 0xDEADBEEF, np.uint32)
    launch("mfma_gfx942", "half_swap", (1, 1, 1), (64, 1, 1), [a, out], writable=[out], readonly=[a], arch=ARCH)
    np.testing.assert_array_equal(out, np.concatenate([a[32:], a[:32]]))
