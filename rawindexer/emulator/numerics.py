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


def fma_f32(a, b, c) -> np.ndarray:
    """Correctly rounded float32 a*b + c (the product of two float32 is exact in float64)."""
    a64 = np.asarray(a, dtype=np.float64)
    p = a64 * np.asarray(b, dtype=np.float64)
    s, e = two_sum(p, np.asarray(c, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        return np.asarray(round_f64_to_f32_exact(np.atleast_1d(s), np.atleast_1d(e))).reshape(np.shape(s))


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
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    r = np.fmax(a, b) if is_max else np.fmin(a, b)
    r = np.array(r, np.float32, copy=True, ndmin=1)
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        ab, bb = np.broadcast_arrays(a.view(np.uint32), b.view(np.uint32))
        bits = (ab & bb) if is_max else (ab | bb)
        r.view(np.uint32)[both_zero] = np.broadcast_to(bits, r.shape)[both_zero]
    if ieee:
        an, bn = np.isnan(a), np.isnan(b)
        if an.any() or bn.any():
            sa, sb = np.broadcast_arrays(_is_snan32(np.atleast_1d(a)), _is_snan32(np.atleast_1d(b)))
            aa, bb2 = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
            q = np.where(sa, aa.view(np.uint32) | 0x400000, np.where(sb, bb2.view(np.uint32) | 0x400000, 0))
            sel = sa | sb
            r.view(np.uint32)[sel] = q[sel].astype(np.uint32)
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
def _fp8_table(exp_bits: int, man_bits: int, bias: int, ocp_e4m3: bool) -> np.ndarray:
    """float64 value of every byte. e4m3fn (OCP): no inf, NaN only at S.1111.111. e5m2: IEEE-like."""
    out = np.empty(256, np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        e = (byte >> man_bits) & ((1 << exp_bits) - 1)
        m = byte & ((1 << man_bits) - 1)
        emax = (1 << exp_bits) - 1
        if ocp_e4m3 and e == emax and m == (1 << man_bits) - 1:
            out[byte] = np.nan
        elif not ocp_e4m3 and e == emax:
            out[byte] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            out[byte] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[byte] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


E4M3FN = _fp8_table(4, 3, 7, True)    # OCP e4m3fn: bias 7, max 448
E5M2 = _fp8_table(5, 2, 15, False)    # OCP e5m2: bias 15, max 57344, inf/NaN like IEEE
