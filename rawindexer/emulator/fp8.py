"""gfx950's 8-bit float formats: OCP FP8 e4m3fn ("fp8") and OCP BF8 e5m2 ("bf8"), to and from float32.

gfx950 uses the OCP formats (gfx942 used the fnuz variants): e4m3fn has bias 7, max 448, no infinity
and NaN at 0x7F/0xFF; e5m2 has bias 15, max 57344, infinities 0x7C/0xFC and NaNs above them.

Decoding is exact (every fp8/bf8 value is a float32). Encoding rounds to nearest even (AMD's
pseudocode sets ROUND_NEAREST_EVEN around f32_to_fp8) and does not saturate: a value that rounds past
the largest finite one becomes NaN (fp8) or infinity (bf8) -- so in fp8 464 -> 448 (a tie, to even)
but 465 -> NaN --, infinities become NaN (fp8) or infinity (bf8), NaN stays NaN. Signs are kept,
zeros included. This is also what ml_dtypes' float8_e4m3fn / float8_e5m2 casts do.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import numerics as fx


@dataclass(frozen=True)
class Format:
    name: str
    mantissa_bits: int
    bias: int
    max_finite: float
    has_inf: bool
    nan: int  # the NaN code produced (sign bit added separately)

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


FP8 = Format("fp8 e4m3fn", 3, 7, 448.0, False, 0x7F)
BF8 = Format("bf8 e5m2", 2, 15, 57344.0, True, 0x7E)


# the byte -> value tables the MFMA model uses too (float64, exact), as float32
_TABLES = {FP8.name: fx.E4M3FN.astype(np.float32), BF8.name: fx.E5M2.astype(np.float32)}


def to_f32(byte: np.ndarray, fmt: Format) -> np.ndarray:
    """float32 values of the low byte of each uint32 in ``byte``."""
    return _TABLES[fmt.name][np.asarray(byte, np.uint32) & np.uint32(0xFF)]


def from_f32(x: np.ndarray, fmt: Format) -> np.ndarray:
    """uint32 codes (0..255) of float32 ``x`` rounded to nearest even, without saturation."""
    with np.errstate(invalid="ignore"):  # signalling NaNs quieten silently on the way to float64
        x = np.asarray(x, np.float32).astype(np.float64)
    sign = np.where(np.signbit(x), np.uint32(0x80), np.uint32(0))
    a = np.abs(x)
    finite = np.isfinite(a)
    a = np.where(finite, a, 0.0)
    m = fmt.mantissa_bits
    # quantum of the binade (subnormals share the smallest normal binade's)
    _, p = np.frexp(a)
    e = np.maximum(p - 1, fmt.min_normal_exponent)
    r = np.rint(a / np.ldexp(1.0, e - m)) * np.ldexp(1.0, e - m)  # a / quantum is exact in float64
    _, p2 = np.frexp(r)
    e2 = np.maximum(p2 - 1, fmt.min_normal_exponent)
    normal = r >= 2.0 ** fmt.min_normal_exponent
    exp_field = np.where(normal, e2 + fmt.bias, 0)
    mant = np.where(normal, r / np.ldexp(1.0, e2 - m) - (1 << m), r / 2.0 ** (fmt.min_normal_exponent - m))
    code = ((exp_field.astype(np.int64) << m) | mant.astype(np.int64)).astype(np.uint32)
    overflow = (r > fmt.max_finite) | ~finite
    inf_code = np.uint32(0x7C) if fmt.has_inf else np.uint32(fmt.nan)
    code = np.where(overflow, inf_code, code)
    code = np.where(np.isnan(x), np.uint32(fmt.nan), code)
    return (code | sign).astype(np.uint32)
