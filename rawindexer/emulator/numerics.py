"""Bit-exact float helpers shared by the VALU and MFMA ops.

numpy's float32 add/mul/div/sqrt are IEEE round-to-nearest-even already. What numpy lacks is a fused
multiply-add and AMD's min/max rules; fp8 decoding is a 256-entry table.
"""
from __future__ import annotations

import numpy as np

_INF = np.float64(np.inf)


def round_f64_to_f32_exact(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """float32 of the exact value ``s + err`` (s = its float64 rounding, err = the rounding error).

    Rounding float64 -> float32 a second time can land on the wrong side of a float32 tie. Moving an
    inexact ``s`` to the neighbouring *odd* float64 in the direction of ``err`` ("round to odd") makes
    the second rounding correct, because float64 carries more than 24 + 2 bits.
    """
    s = np.array(s, dtype=np.float64, copy=True)
    fix = (err != 0) & np.isfinite(err)
    if fix.any():
        even = (s.view(np.int64) & 1) == 0
        fix &= even
        if fix.any():
            s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, _INF, -_INF))
    return s.astype(np.float32)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


_MID_MASK = np.uint64(0x1FFFFFFF)   # float64 mantissa bits below float32 precision
_MID = np.uint64(0x10000000)         # ... exactly half a float32 ulp: a float32 tie
_TINY = np.float64(2.0 ** -126)


_TINY2 = np.uint64(0x3810000000000000 << 1)  # 2^-126 as float64 bits, shifted past the sign bit
_ONE = np.uint64(1)
_nz = np.count_nonzero  # much cheaper than ndarray.any() on 64 elements


def _needs_care(s: np.ndarray) -> bool:
    """True if rounding float64 ``s`` to float32 might differ from rounding the exact value: ``s`` sits
    on a float32 tie (normal range), or is a float32 subnormal (whose ties sit elsewhere)."""
    if _nz((s.view(np.int64) & 0x1FFFFFFF) == 0x10000000):  # Python-int constants: cheaper than np scalars
        return True
    a = np.abs(s)
    tiny = a < _TINY
    return bool(_nz(tiny)) and bool(_nz(tiny & (a > 0)))


def add_to_f32(x: np.ndarray, y) -> np.ndarray:
    """float32 of the exact sum of float64 ``x`` (exact values) and ``y`` (float32/64), rounded once."""
    s = x + y
    if s.ndim and _needs_care(s):
        with np.errstate(invalid="ignore"):
            s2, e = two_sum(x, np.asarray(y, np.float64))
            return round_f64_to_f32_exact(s2, np.broadcast_to(e, s2.shape))
    return s.astype(np.float32)


def fma_f32(a, b, c) -> np.ndarray:
    """Correctly rounded float32 a*b + c (the product of two float32 is exact in float64)."""
    p = np.multiply(a, b, dtype=np.float64)
    if p.ndim == 0:
        p = p.reshape(1)
        return add_to_f32(p, c)
    return add_to_f32(p, c)


def fma_f64(a, b, c) -> np.ndarray:
    """float64 fma. Exact product via Dekker splitting, then a compensated sum (faithful; exact except
    in double-rounding corner cases that a hand-written kernel of this package never reaches)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    p = a * b
    split = 134217729.0
    ah = a * split
    ah = ah - (ah - a)
    al = a - ah
    bh = b * split
    bh = bh - (bh - b)
    bl = b - bh
    pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s, e = two_sum(p, np.asarray(c, np.float64))
    with np.errstate(invalid="ignore"):
        out = s + (e + pe)
    return np.where(np.isfinite(out), out, p + c)


def _is_snan32(x: np.ndarray) -> np.ndarray:
    b = x.view(np.uint32)
    return ((b & 0x7F800000) == 0x7F800000) & ((b & 0x7FFFFF) != 0) & ((b & 0x400000) == 0)


def maxmin_f32(a, b, is_max: bool, ieee: bool = True) -> np.ndarray:
    """v_max_f32 / v_min_f32 per AMD pseudocode: a quiet NaN operand yields the other operand; in IEEE
    mode a signalling NaN yields itself quietened; max(+0, -0) = +0 and min(+0, -0) = -0."""
    r = np.fmax(a, b) if is_max else np.fmin(a, b)
    if np.ndim(r) == 0:
        r = np.asarray(r, np.float32).reshape(1)
    # rare cases, detected cheaply: two zeros (numpy picks the sign by argument order), NaNs
    if _nz(r == 0) or _nz(np.isnan(np.add(a, b, dtype=np.float32))):
        return _maxmin_slow(np.asarray(a, np.float32), np.asarray(b, np.float32), r, is_max, ieee)
    return r


def relu_f32(x) -> np.ndarray:
    """v_max_f32 with one operand the constant +0: max(+0, -0) = +0, quiet NaN -> +0, sNaN -> quietened."""
    r = np.fmax(x, np.float32(0)) + np.float32(0)  # + 0 turns a -0 result into +0
    if _nz(np.isnan(x)):
        return _maxmin_slow(np.asarray(x, np.float32), np.float32(0), r, True, True)
    return r


def _maxmin_slow(a, b, r, is_max, ieee):
    r = np.array(r, np.float32, copy=True, ndmin=1)
    a1, b1 = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
    both_zero = (a1 == 0) & (b1 == 0)
    if both_zero.any():
        ab, bb = a1.view(np.uint32), b1.view(np.uint32)
        bits = (ab & bb) if is_max else (ab | bb)
        r.view(np.uint32)[both_zero] = bits[both_zero]
    if ieee:
        sa, sb = _is_snan32(np.ascontiguousarray(a1)), _is_snan32(np.ascontiguousarray(b1))
        sel = sa | sb
        if sel.any():
            q = np.where(sa, a1.view(np.uint32) | 0x400000, b1.view(np.uint32) | 0x400000).astype(np.uint32)
            r.view(np.uint32)[sel] = q[sel]
    return r


def f32_to_u32(x: np.ndarray) -> np.ndarray:
    """AMD f32_to_u32: truncate; NaN -> 0; saturate to [0, 2^32 - 1]."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        y = np.trunc(np.nan_to_num(x, nan=0.0, posinf=4294967295.0, neginf=0.0))
    return np.clip(y, 0, 4294967295.0).astype(np.uint32)


def f32_to_i32(x: np.ndarray) -> np.ndarray:
    """AMD f32_to_i32: truncate; NaN -> 0; saturate to the int32 range."""
    x = np.asarray(x, np.float64)
    y = np.trunc(np.nan_to_num(x, nan=0.0, posinf=2147483647.0, neginf=-2147483648.0))
    return np.clip(y, -2147483648.0, 2147483647.0).astype(np.int32)


# ---- fp8 ----
def _fp8_table(exp_bits: int, man_bits: int, bias: int, specials: str) -> np.ndarray:
    """float64 value of every byte. ``specials``: "ocp_e4m3" (no inf, NaN only at S.1111.111),
    "ieee" (e5m2: all-ones exponent is inf/NaN) or "fnuz" (no inf, no -0: 0x80 is the only NaN and
    every other code is finite, the all-ones exponent included)."""
    out = np.empty(256, np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        e = (byte >> man_bits) & ((1 << exp_bits) - 1)
        m = byte & ((1 << man_bits) - 1)
        emax = (1 << exp_bits) - 1
        if specials == "fnuz" and byte == 0x80:
            out[byte] = np.nan
        elif specials == "ocp_e4m3" and e == emax and m == (1 << man_bits) - 1:
            out[byte] = np.nan
        elif specials == "ieee" and e == emax:
            out[byte] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            out[byte] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[byte] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


E4M3FN = _fp8_table(4, 3, 7, "ocp_e4m3")   # OCP e4m3fn (gfx950): bias 7, max 448
E5M2 = _fp8_table(5, 2, 15, "ieee")        # OCP e5m2 (gfx950): bias 15, max 57344, inf/NaN like IEEE
E4M3FNUZ = _fp8_table(4, 3, 8, "fnuz")     # e4m3fnuz (gfx940-942): bias 8, max 240, NaN 0x80 only
E5M2FNUZ = _fp8_table(5, 2, 16, "fnuz")    # e5m2fnuz (gfx940-942): bias 16, max 57344, NaN 0x80 only
