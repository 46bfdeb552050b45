"""The 8-bit float formats of AMD's fp8 instructions ("fp8" and "bf8" operands), to and from float32.

Which formats an instruction reads depends on the code object's target (:mod:`.targets`):

* gfx950: OCP e4m3fn (bias 7, max 448, no infinity, NaN at 0x7F/0xFF) and OCP e5m2 (bias 15,
  max 57344, infinities 0x7C/0xFC and NaNs above them);
* gfx940/941/942: e4m3fnuz (bias 8, max 240) and e5m2fnuz (bias 16, max 57344): no infinity and no
  negative zero, 0x80 is the only NaN.

Decoding is exact (every fp8/bf8 value is a float32). Encoding rounds to nearest even (AMD's
pseudocode sets ROUND_NEAREST_EVEN around f32_to_fp8) and does not saturate: a value that rounds past
the largest finite one becomes NaN (fp8) or infinity (bf8) -- so in fp8 464 -> 448 (a tie, to even)
but 465 -> NaN --, infinities become NaN (fp8) or infinity (bf8), NaN stays NaN. Signs are kept,
zeros included. This is also what ml_dtypes' float8_e4m3fn / float8_e5m2 casts do.

The fnuz encoders follow the same rounding; having no infinity, an overflow, an infinity or a NaN
becomes 0x80 (NaN), and a result that is zero is +0 (0x00) whatever its sign, as ml_dtypes'
float8_e4m3fnuz / float8_e5m2fnuz casts do. Unverified on hardware (none here): that the gfx942
converts without clamp do not saturate is also what AMD's libraries assume when they clamp to
+-240 in software before converting.
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
    nan: int  # the NaN code produced (sign bit added separately, except for fnuz)
    fnuz: bool = False  # no -0; 0x80 is the only NaN

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


FP8 = Format("fp8 e4m3fn", 3, 7, 448.0, False, 0x7F)
BF8 = Format("bf8 e5m2", 2, 15, 57344.0, True, 0x7E)
FP8_FNUZ = Format("fp8 e4m3fnuz", 3, 8, 240.0, False, 0x80, fnuz=True)
BF8_FNUZ = Format("bf8 e5m2fnuz", 2, 16, 57344.0, False, 0x80, fnuz=True)

# byte -> value tables (float64, exact); the MFMA model reads them too
TABLES64 = {FP8.name: fx.E4M3FN, BF8.name: fx.E5M2, FP8_FNUZ.name: fx.E4M3FNUZ, BF8_FNUZ.name: fx.E5M2FNUZ}
_TABLES = {name: t.astype(np.float32) for name, t in TABLES64.items()}


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
    if fmt.fnuz:  # one zero (+0) and one NaN (0x80): the sign survives only on non-zero numbers
        sign = np.where(code == 0, np.uint32(0), sign)
    return (code | sign).astype(np.uint32)
