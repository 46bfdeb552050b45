"""OCP fp8 e4m3fn (the gfx950 / Hopper "fp8"): decode table and round-to-nearest-even encoder; the
e4m3fnuz decode table (gfx942's "fp8").

e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7F / 0xFF are NaN; max 448.
e4m3fnuz: the same fields with bias 8; no infinities, no -0: 0x80 is the only NaN; max 240.
Arrays of fp8 are carried as uint8 codes everywhere on the host side (numpy has no fp8 dtype).
"""
from __future__ import annotations

import numpy as np

E4M3FN_MAX = 448.0


def _decode_table() -> np.ndarray:
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    normal = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7.0)
    subnormal = sign * (man / 8.0) * 2.0**-6
    table = np.where(exp == 0, subnormal, normal)
    table[(codes & 0x7F) == 0x7F] = np.nan
    return table.astype(np.float32)


E4M3FN_TABLE: np.ndarray = _decode_table()
E4M3FN_TABLE.setflags(write=False)

# Non-negative finite codes 0x00..0x7E are monotonic in value, which the encoder relies on.
_POSITIVE = E4M3FN_TABLE[:0x7F].astype(np.float64)


def decode_e4m3fn(codes: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """uint8 codes (any shape) -> float values of ``dtype`` (exact: every e4m3fn value fits float32)."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise TypeError(f"codes: expected uint8 fp8 codes, got {codes.dtype}")
    return E4M3FN_TABLE.astype(dtype, copy=False)[codes]


def _decode_table_fnuz() -> np.ndarray:
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    table = np.where(exp == 0, sign * (man / 8.0) * 2.0**-7, sign * (1.0 + man / 8.0) * 2.0 ** (exp - 8.0))
    table[0x80] = np.nan
    return table.astype(np.float32)


E4M3FNUZ_TABLE: np.ndarray = _decode_table_fnuz()
E4M3FNUZ_TABLE.setflags(write=False)
#: fp8 format name -> decode table
TABLES = {"e4m3fn": E4M3FN_TABLE, "e4m3fnuz": E4M3FNUZ_TABLE}


def decode(codes: np.ndarray, fp8_format: str = "e4m3fn", dtype: type = np.float32) -> np.ndarray:
    """uint8 codes of ``fp8_format`` ("e4m3fn" or "e4m3fnuz") -> exact float values of ``dtype``."""
    if fp8_format not in TABLES:
        raise ValueError(f"fp8_format: expected one of {sorted(TABLES)}, got {fp8_format!r}")
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise TypeError(f"codes: expected uint8 fp8 codes, got {codes.dtype}")
    return TABLES[fp8_format].astype(dtype, copy=False)[codes]


def encode_e4m3fn(values: np.ndarray) -> np.ndarray:
    """float values -> uint8 e4m3fn codes, round to nearest even, saturating to +-448, NaN -> 0x7F."""
    x = np.asarray(values, dtype=np.float64)
    mag = np.minimum(np.abs(x), E4M3FN_MAX)
    hi = np.clip(np.searchsorted(_POSITIVE, mag, side="left"), 0, 0x7E)
    lo = np.maximum(hi - 1, 0)
    d_hi = _POSITIVE[hi] - mag
    d_lo = mag - _POSITIVE[lo]
    # Ties go to the even code (even mantissa LSB), as IEEE round-to-nearest-even does.
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code |= np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    code[np.isnan(x)] = 0x7F
    return code


def random_e4m3fn(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    """Fresh random fp8 codes of normally distributed values (std ``scale``), no NaN codes."""
    return encode_e4m3fn(rng.standard_normal(shape) * scale)
