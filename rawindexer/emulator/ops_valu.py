"""Vector ALU: VOP1, VOP2, VOPC and VOP3(A/B) plus the non-matrix VOP3P ops, 64 lanes at a time.

Every op is a numpy expression over the active wave's register columns. Inactive lanes are never
written (writers honour EXEC); VOPC writes 0 for inactive lanes, as the hardware does.
Integer arithmetic wraps (uint32/uint64 numpy arithmetic); float32 arithmetic is numpy's, which is
IEEE round-to-nearest-even with denormals (the kernels here run in denorm mode 3 = preserve).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import fp8
from . import numerics as fx
from .decoder import Instruction
from .errors import DecodeError, ExecMaskError
from .operands import (M32, mask_reader, sreader, swriter, vreader, vwriter)
from .state import VCC, bits_to_mask, mask_to_bits
from .targets import DEFAULT as DEFAULT_TARGET
from .targets import Target

U32, I32, F32, U64, I64, F64 = "u32", "i32", "f32", "u64", "i64", "f64"
LANE = np.arange(64, dtype=np.uint32)
_U = np.uint32
_LOWER = [np.uint64((1 << k) - 1) for k in range(65)]


def _u64(x):
    return np.asarray(x).astype(np.uint64)


def _i24(x):
    x = np.asarray(x).astype(np.int64) & 0xFFFFFF
    return x - ((x & 0x800000) << 1)


def _popcnt32(x):
    return np.bitwise_count(np.asarray(x, np.uint32)).astype(np.uint32)


def _bfe_u(a, b, c):
    off = np.asarray(b, np.uint32) & 31
    width = np.asarray(c, np.uint32) & 31
    return ((np.asarray(a, np.uint32) >> off) & ((np.uint32(1) << width) - np.uint32(1))).astype(np.uint32)


def _bfe_i(a, b, c):
    off = np.asarray(b, np.uint32) & 31
    width = (np.asarray(c, np.uint32) & 31).astype(np.int64)
    v = (np.asarray(a, np.uint32) >> off).astype(np.int64) & ((np.int64(1) << width) - 1)
    sign = (v >> np.maximum(width - 1, 0)) & 1
    v = np.where((width > 0) & (sign == 1), v - (np.int64(1) << width), v)
    return np.where(width == 0, 0, v).astype(np.int64).astype(np.uint32)


def _med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _med3_f(a, b, c):
    mx = lambda x, y: fx.maxmin_f32(x, y, True)  # noqa: E731
    mn = lambda x, y: fx.maxmin_f32(x, y, False)  # noqa: E731
    return mx(mn(a, b), mn(mx(a, b), c))


def _ffbh_u32(a):
    a = np.asarray(a, np.uint32)
    n = np.where(a == 0, -1, 31 - np.floor(np.log2(np.maximum(a, 1).astype(np.float64))).astype(np.int64))
    return n.astype(np.int64).astype(np.uint32)


def _ffbl(a):
    a = np.asarray(a, np.uint32).astype(np.int64)
    low = a & -a
    n = np.where(a == 0, -1, np.log2(np.maximum(low, 1).astype(np.float64)).astype(np.int64))
    return n.astype(np.uint32)


def _bfrev(a):
    b = np.asarray(a, np.uint32).astype("<u4").view(np.uint8).reshape(-1, 4)
    r = np.unpackbits(b, axis=1, bitorder="little")[:, ::-1]
    return np.packbits(r, axis=1, bitorder="little").view("<u4").reshape(np.shape(a))


def _perm(a, b, sel):
    """v_perm_b32: bytes of {S0, S1} (S1 is the low dword) chosen by each selector byte of S2."""
    a, b, sel = np.broadcast_arrays(np.asarray(a, np.uint32), np.asarray(b, np.uint32), np.asarray(sel, np.uint32))
    data = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    out = np.zeros(a.shape, np.uint32)
    for k in range(4):
        s = (sel >> _U(8 * k)) & _U(0xFF)
        byte = ((data >> (np.minimum(s, 7).astype(np.uint64) * np.uint64(8))) & np.uint64(0xFF)).astype(np.uint32)
        sign = lambda n: (((data >> np.uint64(8 * n + 7)) & np.uint64(1)).astype(np.uint32) * _U(0xFF))  # noqa: E731
        byte = np.where(s == 8, sign(1), byte)
        byte = np.where(s == 9, sign(3), byte)
        byte = np.where(s == 10, sign(5), byte)
        byte = np.where(s == 11, sign(7), byte)
        byte = np.where(s == 12, 0, byte)
        byte = np.where(s >= 13, 0xFF, byte)
        out |= byte.astype(np.uint32) << _U(8 * k)
    return out


def _cvt_f16(x):
    return np.asarray(x, np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)


def _f16(x):
    return (np.asarray(x, np.uint32) & _U(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float32)


def _bf16_rne(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint32)
    return np.where(nan, (b >> np.uint64(16)).astype(np.uint32) | _U(0x40), r).astype(np.uint32)


def _ldexp(a, b):
    return np.ldexp(np.asarray(a, np.float32), np.asarray(b, np.int32)).astype(np.float32)


def _frexp_mant(a):
    m, e = np.frexp(np.asarray(a, np.float32))
    return np.where(np.isfinite(a), m, a).astype(np.float32)


def _frexp_exp(a):
    m, e = np.frexp(np.asarray(a, np.float32))
    return np.where(np.isfinite(a), e, 0).astype(np.int32)


def _rcp(a):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (np.float32(1.0) / np.asarray(a, np.float32)).astype(np.float32)


def _rsq(a):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1.0 / np.sqrt(np.asarray(a, np.float64))).astype(np.float32)


def _sqrt(a):
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.asarray(a, np.float32))


def _exp2(a):
    with np.errstate(over="ignore"):
        return np.exp2(np.asarray(a, np.float64)).astype(np.float32)


def _log2(a):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(np.asarray(a, np.float64)).astype(np.float32)


def _shift_count(x, bits=32):
    return (np.asarray(x, np.uint32) & _U(bits - 1))


# name -> (source types, destination type, function)
SIMPLE: dict[str, tuple] = {
    # moves and bit ops
    "v_mov_b32": ((U32,), U32, lambda a: a),
    "v_mov_b64": ((U64,), U64, lambda a: a),
    "v_not_b32": ((U32,), U32, lambda a: ~np.asarray(a, np.uint32)),
    "v_bfrev_b32": ((U32,), U32, _bfrev),
    "v_ffbh_u32": ((U32,), U32, _ffbh_u32),
    "v_ffbl_b32": ((U32,), U32, _ffbl),
    "v_and_b32": ((U32, U32), U32, lambda a, b: a & b),
    "v_or_b32": ((U32, U32), U32, lambda a, b: a | b),
    "v_xor_b32": ((U32, U32), U32, lambda a, b: a ^ b),
    "v_xnor_b32": ((U32, U32), U32, lambda a, b: ~(a ^ b)),
    "v_lshlrev_b32": ((U32, U32), U32, lambda a, b: b << _shift_count(a)),
    "v_lshrrev_b32": ((U32, U32), U32, lambda a, b: b >> _shift_count(a)),
    "v_ashrrev_i32": ((U32, I32), I32, lambda a, b: b >> _shift_count(a).astype(np.int32)),
    "v_lshlrev_b64": ((U32, U64), U64, lambda a, b: b << (np.asarray(a, np.uint32) & _U(63)).astype(np.uint64)),
    "v_lshrrev_b64": ((U32, U64), U64, lambda a, b: b >> (np.asarray(a, np.uint32) & _U(63)).astype(np.uint64)),
    "v_ashrrev_i64": ((U32, I64), I64, lambda a, b: b >> (np.asarray(a, np.uint32) & _U(63)).astype(np.int64)),
    "v_lshl_add_u64": ((U64, U32, U64), U64,
                       lambda a, b, c: (a << (np.asarray(b, np.uint32) & _U(7)).astype(np.uint64)) + c),
    "v_bfe_u32": ((U32, U32, U32), U32, _bfe_u),
    "v_bfe_i32": ((U32, U32, U32), U32, _bfe_i),
    "v_bfi_b32": ((U32, U32, U32), U32, lambda a, b, c: (a & b) | (~np.asarray(a, np.uint32) & c)),
    "v_bfm_b32": ((U32, U32), U32, lambda a, b: (((np.uint64(1) << _u64(_shift_count(a))) - np.uint64(1))
                                               << _u64(_shift_count(b))).astype(np.uint32)),
    "v_alignbit_b32": ((U32, U32, U32), U32, lambda a, b, c: (((_u64(a) << np.uint64(32)) | _u64(b))
                                                            >> _u64(_shift_count(c))).astype(np.uint32)),
    "v_alignbyte_b32": ((U32, U32, U32), U32, lambda a, b, c: (((_u64(a) << np.uint64(32)) | _u64(b))
                                                             >> (_u64(np.asarray(c, np.uint32) & _U(3)) * np.uint64(8))
                                                             ).astype(np.uint32)),
    "v_perm_b32": ((U32, U32, U32), U32, _perm),
    "v_lshl_or_b32": ((U32, U32, U32), U32, lambda a, b, c: (a << _shift_count(b)) | c),
    "v_and_or_b32": ((U32, U32, U32), U32, lambda a, b, c: (a & b) | c),
    "v_or3_b32": ((U32, U32, U32), U32, lambda a, b, c: a | b | c),
    "v_xad_u32": ((U32, U32, U32), U32, lambda a, b, c: (a ^ b) + c),
    "v_bcnt_u32_b32": ((U32, U32), U32, lambda a, b: _popcnt32(a) + b),
    # integer arithmetic (wraps)
    "v_add_u32": ((U32, U32), U32, lambda a, b: a + b),
    "v_sub_u32": ((U32, U32), U32, lambda a, b: a - b),
    "v_subrev_u32": ((U32, U32), U32, lambda a, b: b - a),
    "v_add_i32": ((U32, U32), U32, lambda a, b: a + b),
    "v_sub_i32": ((U32, U32), U32, lambda a, b: a - b),
    "v_add3_u32": ((U32, U32, U32), U32, lambda a, b, c: a + b + c),
    "v_lshl_add_u32": ((U32, U32, U32), U32, lambda a, b, c: (a << _shift_count(b)) + c),
    "v_add_lshl_u32": ((U32, U32, U32), U32, lambda a, b, c: (a + b) << _shift_count(c)),
    "v_mul_lo_u32": ((U32, U32), U32, lambda a, b: a * b),
    "v_mul_hi_u32": ((U32, U32), U32, lambda a, b: ((_u64(a) * _u64(b)) >> np.uint64(32)).astype(np.uint32)),
    "v_mul_hi_i32": ((I32, I32), U32, lambda a, b: ((np.asarray(a, np.int64) * np.asarray(b, np.int64)) >> 32)
                     .astype(np.uint32)),
    "v_mul_u32_u24": ((U32, U32), U32, lambda a, b: (a & _U(0xFFFFFF)) * (b & _U(0xFFFFFF))),
    "v_mul_hi_u32_u24": ((U32, U32), U32, lambda a, b: ((_u64(a & _U(0xFFFFFF)) * _u64(b & _U(0xFFFFFF)))
                                                       >> np.uint64(32)).astype(np.uint32)),
    "v_mul_i32_i24": ((U32, U32), U32, lambda a, b: (_i24(a) * _i24(b)).astype(np.uint32)),
    "v_mul_hi_i32_i24": ((U32, U32), U32, lambda a, b: ((_i24(a) * _i24(b)) >> 32).astype(np.uint32)),
    "v_mad_u32_u24": ((U32, U32, U32), U32, lambda a, b, c: (a & _U(0xFFFFFF)) * (b & _U(0xFFFFFF)) + c),
    "v_mad_i32_i24": ((U32, U32, U32), U32, lambda a, b, c: (_i24(a) * _i24(b) + np.asarray(c, np.int64))
                      .astype(np.uint32)),
    "v_min_i32": ((I32, I32), I32, np.minimum), "v_max_i32": ((I32, I32), I32, np.maximum),
    "v_min_u32": ((U32, U32), U32, np.minimum), "v_max_u32": ((U32, U32), U32, np.maximum),
    "v_min3_i32": ((I32, I32, I32), I32, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_i32": ((I32, I32, I32), I32, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": ((U32, U32, U32), U32, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u32": ((U32, U32, U32), U32, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_med3_i32": ((I32, I32, I32), I32, _med3), "v_med3_u32": ((U32, U32, U32), U32, _med3),
    # float32
    "v_add_f32": ((F32, F32), F32, lambda a, b: a + b),
    "v_sub_f32": ((F32, F32), F32, lambda a, b: a - b),
    "v_subrev_f32": ((F32, F32), F32, lambda a, b: b - a),
    "v_mul_f32": ((F32, F32), F32, lambda a, b: a * b),
    "v_max_f32": ((F32, F32), F32, lambda a, b: fx.maxmin_f32(a, b, True)),
    "v_min_f32": ((F32, F32), F32, lambda a, b: fx.maxmin_f32(a, b, False)),
    "v_max3_f32": ((F32, F32, F32), F32, lambda a, b, c: fx.maxmin_f32(fx.maxmin_f32(a, b, True), c, True)),
    "v_min3_f32": ((F32, F32, F32), F32, lambda a, b, c: fx.maxmin_f32(fx.maxmin_f32(a, b, False), c, False)),
    "v_med3_f32": ((F32, F32, F32), F32, _med3_f),
    "v_fma_f32": ((F32, F32, F32), F32, fx.fma_f32),
    "v_ldexp_f32": ((F32, I32), F32, _ldexp),
    "v_rcp_f32": ((F32,), F32, _rcp), "v_rcp_iflag_f32": ((F32,), F32, _rcp),
    "v_rsq_f32": ((F32,), F32, _rsq), "v_sqrt_f32": ((F32,), F32, _sqrt),
    "v_exp_f32": ((F32,), F32, _exp2), "v_log_f32": ((F32,), F32, _log2),
    "v_trunc_f32": ((F32,), F32, np.trunc), "v_floor_f32": ((F32,), F32, np.floor),
    "v_ceil_f32": ((F32,), F32, np.ceil), "v_rndne_f32": ((F32,), F32, np.rint),
    "v_fract_f32": ((F32,), F32, lambda a: np.minimum(a - np.floor(a), np.float32(0.99999994))),
    "v_frexp_mant_f32": ((F32,), F32, _frexp_mant), "v_frexp_exp_i32_f32": ((F32,), I32, _frexp_exp),
    "v_cvt_f32_u32": ((U32,), F32, lambda a: np.asarray(a, np.uint32).astype(np.float32)),
    "v_cvt_f32_i32": ((I32,), F32, lambda a: np.asarray(a, np.int32).astype(np.float32)),
    "v_cvt_u32_f32": ((F32,), U32, fx.f32_to_u32),
    "v_cvt_i32_f32": ((F32,), I32, fx.f32_to_i32),
    "v_cvt_flr_i32_f32": ((F32,), I32, lambda a: fx.f32_to_i32(np.floor(a))),
    "v_cvt_rpi_i32_f32": ((F32,), I32, lambda a: fx.f32_to_i32(np.floor(np.asarray(a, np.float32) + np.float32(0.5)))),
    "v_cvt_f32_ubyte0": ((U32,), F32, lambda a: (a & _U(0xFF)).astype(np.float32)),
    "v_cvt_f32_ubyte1": ((U32,), F32, lambda a: ((a >> _U(8)) & _U(0xFF)).astype(np.float32)),
    "v_cvt_f32_ubyte2": ((U32,), F32, lambda a: ((a >> _U(16)) & _U(0xFF)).astype(np.float32)),
    "v_cvt_f32_ubyte3": ((U32,), F32, lambda a: ((a >> _U(24)) & _U(0xFF)).astype(np.float32)),
    "v_cvt_f16_f32": ((F32,), U32, _cvt_f16),
    "v_cvt_f32_f16": ((U32,), F32, _f16),
    "v_cvt_f32_bf16": ((U32,), F32, lambda a: (np.asarray(a, np.uint32) << _U(16)).view(np.float32)),
    "v_cvt_pkrtz_f16_f32": ((F32, F32), U32, None),  # set below (needs round-toward-zero)
    "v_cvt_pk_bf16_f32": ((F32, F32), U32, lambda a, b: (_bf16_rne(a) & _U(0xFFFF)) | (_bf16_rne(b) << _U(16))),
    "v_cvt_pk_f16_f32": ((F32, F32), U32, lambda a, b: _cvt_f16(a) | (_cvt_f16(b) << _U(16))),
    "v_cvt_f64_f32": ((F32,), F64, lambda a: np.asarray(a, np.float64)),
    "v_cvt_f32_f64": ((F64,), F32, lambda a: np.asarray(a, np.float64).astype(np.float32)),
    "v_cvt_f64_i32": ((I32,), F64, lambda a: np.asarray(a, np.float64)),
    "v_cvt_f64_u32": ((U32,), F64, lambda a: np.asarray(a, np.float64)),
    "v_cvt_i32_f64": ((F64,), I32, fx.f32_to_i32),
    "v_cvt_u32_f64": ((F64,), U32, fx.f32_to_u32),
    # float64
    "v_add_f64": ((F64, F64), F64, lambda a, b: a + b),
    "v_mul_f64": ((F64, F64), F64, lambda a, b: a * b),
    "v_fma_f64": ((F64, F64, F64), F64, fx.fma_f64),
    "v_max_f64": ((F64, F64), F64, np.fmax), "v_min_f64": ((F64, F64), F64, np.fmin),
    "v_ldexp_f64": ((F64, I32), F64, lambda a, b: np.ldexp(a, np.asarray(b, np.int32))),
    "v_rcp_f64": ((F64,), F64, lambda a: 1.0 / np.asarray(a, np.float64)),
    "v_sqrt_f64": ((F64,), F64, lambda a: np.sqrt(a)),
    "v_trunc_f64": ((F64,), F64, np.trunc), "v_floor_f64": ((F64,), F64, np.floor),
    "v_ceil_f64": ((F64,), F64, np.ceil), "v_rndne_f64": ((F64,), F64, np.rint),
}


def _pkrtz(a, b):
    def rtz(x):
        x = np.asarray(x, np.float32)
        h = x.astype(np.float16)
        # step toward zero when rounding went away from zero
        away = np.abs(h.astype(np.float32)) > np.abs(x)
        h = np.where(away & np.isfinite(x), np.nextafter(h, np.float16(0)), h)
        return h.view(np.uint16).astype(np.uint32)
    return rtz(a) | (rtz(b) << _U(16))


SIMPLE["v_cvt_pkrtz_f16_f32"] = ((F32, F32), U32, _pkrtz)


# fp8/bf8 -> f32 read the low byte (pair) of their source; the SDWA forms select which byte (word)
# through src0_sel, so they need nothing of their own. v_cvt_pk_f32_* write a VGPR pair: the result
# is the pair as one uint64 (low dword = first byte). The format is the target's (gfx950 OCP, gfx942
# fnuz): the spec is built per instruction from the context, see _f8_decode_spec.
def _pk_f8_to_f32(fmt: fp8.Format) -> Callable:
    def f(a):
        a = np.asarray(a, np.uint32)
        lo = fp8.to_f32(a, fmt).view(np.uint32).astype(np.uint64)
        hi = fp8.to_f32(a >> _U(8), fmt).view(np.uint32).astype(np.uint64)
        return lo | (hi << np.uint64(32))
    return f


def _target(ctx) -> Target:
    """The code object's target; builders called without a context (decoder unit tests) get gfx950's."""
    return ctx.target if ctx is not None else DEFAULT_TARGET


def _f8_decode_spec(name: str, ctx) -> tuple:
    """SIMPLE-style (source types, result type, function) of an fp8/bf8 -> f32 decode on ctx's target."""
    fmt = _target(ctx).f8_format("bf8" in name, name)
    if name.startswith("v_cvt_pk_"):
        return (U32,), U64, _pk_f8_to_f32(fmt)
    return (U32,), F32, lambda a: fp8.to_f32(a, fmt)


_F8_DECODES = ("v_cvt_f32_fp8", "v_cvt_f32_bf8", "v_cvt_pk_f32_fp8", "v_cvt_pk_f32_bf8")


# 16-bit integer VALU ops (AMD pseudocode: D0.u16 = S1.u16 << S0[3:0] etc.). On GFX9 (gfx950 included)
# these zero the high 16 bits of the destination (LLVM GCNSubtarget::zeroesHigh16BitsOfDest).
def _lo16(x):
    return np.asarray(x, np.uint32) & _U(0xFFFF)


def _s16(x):
    return _lo16(x).astype(np.uint16).view(np.int16).astype(np.int32)


def _z16(f):
    return lambda *a: (np.asarray(f(*a)).astype(np.int64) & 0xFFFF).astype(np.uint32)


SIMPLE.update({
    "v_lshlrev_b16": ((U32, U32), U32, _z16(lambda a, b: _lo16(b) << (_lo16(a) & _U(15)))),
    "v_lshrrev_b16": ((U32, U32), U32, _z16(lambda a, b: _lo16(b) >> (_lo16(a) & _U(15)))),
    "v_ashrrev_i16": ((U32, U32), U32, _z16(lambda a, b: _s16(b) >> (_lo16(a) & _U(15)).astype(np.int32))),
    "v_add_u16": ((U32, U32), U32, _z16(lambda a, b: _lo16(a) + _lo16(b))),
    "v_sub_u16": ((U32, U32), U32, _z16(lambda a, b: _lo16(a).astype(np.int64) - _lo16(b))),
    "v_subrev_u16": ((U32, U32), U32, _z16(lambda a, b: _lo16(b).astype(np.int64) - _lo16(a))),
    "v_mul_lo_u16": ((U32, U32), U32, _z16(lambda a, b: _lo16(a) * _lo16(b))),
    "v_max_u16": ((U32, U32), U32, _z16(lambda a, b: np.maximum(_lo16(a), _lo16(b)))),
    "v_min_u16": ((U32, U32), U32, _z16(lambda a, b: np.minimum(_lo16(a), _lo16(b)))),
    "v_max_i16": ((U32, U32), U32, _z16(lambda a, b: np.maximum(_s16(a), _s16(b)))),
    "v_min_i16": ((U32, U32), U32, _z16(lambda a, b: np.minimum(_s16(a), _s16(b)))),
})
_INT16_OPS = {k for k in SIMPLE if k.endswith(("_b16", "_u16", "_i16"))}

_FLOAT_TYPES = (F32, F64)


def base_name(inst: Instruction) -> str:
    n = inst.name
    for sfx in ("_e32", "_e64"):
        if n.endswith(sfx):
            return n[: -len(sfx)]
    return n


class _Srcs:
    """Source operand codes and modifiers of a VALU instruction, normalised across encodings."""

    def __init__(self, inst: Instruction) -> None:
        f = inst.fields
        self.inst = inst
        if inst.fmt in ("VOP1",):
            self.codes = [f["src0"]]
        elif inst.fmt in ("VOP2", "VOPC"):
            self.codes = [f["src0"], f["vsrc1"] + 256]
        else:
            self.codes = [f["src0"], f["src1"], f["src2"]]
        vop3 = inst.fmt in ("VOP3", "VOP3B", "VOP3C")
        self.neg = f.get("neg", 0) if vop3 else 0
        self.abs = f.get("abs", 0) if inst.fmt in ("VOP3", "VOP3C") else 0
        self.clamp = f.get("clamp", 0) if vop3 else 0
        self.omod = f.get("omod", 0) if vop3 else 0
        if f.get("ext"):
            raise DecodeError(f"unimplemented {f['ext'].upper()} form: {inst}")

    def reader(self, k: int, ty: str, ctx) -> Callable:
        rd = vreader(self.codes[k], ty, self.inst)
        if ty in _FLOAT_TYPES:
            if self.abs >> k & 1:
                rd0 = rd
                rd = lambda w: np.abs(rd0(w))  # noqa: E731
            if self.neg >> k & 1:
                rd1 = rd
                rd = lambda w: -rd1(w)  # noqa: E731
        elif (self.neg >> k & 1) or (self.abs >> k & 1):
            raise DecodeError(f"neg/abs modifier on an integer operand: {self.inst}")
        return rd


def _post(fn: Callable, ty: str, src: _Srcs) -> Callable:
    """Output modifiers (omod, clamp) of float results."""
    if not src.clamp and not src.omod:
        return fn
    if ty not in _FLOAT_TYPES:
        if src.omod:
            raise DecodeError(f"omod on integer op: {src.inst}")
        raise DecodeError(f"clamp on integer op is not implemented: {src.inst}")
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[src.omod]
    dt = np.float32 if ty == F32 else np.float64

    def post(*a):
        r = np.asarray(fn(*a), dt)
        if scale is not None:
            r = (r * dt(scale)).astype(dt)
        if src.clamp:
            r = np.clip(r, dt(0), dt(1))  # NaN stays NaN; dx10_clamp makes it 0
            r = np.where(np.isnan(r), dt(0), r)
        return r
    return post


_SEL = {0: (0, 8), 1: (8, 8), 2: (16, 8), 3: (24, 8), 4: (0, 16), 5: (16, 16), 6: (0, 32)}


def _sdwa_reader(code: int, is_sgpr: int, sel: int, sext: int, neg: int, absm: int, ty: str, inst) -> Callable:
    """SDWA source: a byte/word/dword field of a VGPR (or SGPR), zero- or sign-extended."""
    rd = vreader(code if is_sgpr else code + 256, U32, inst)
    shift, width = _SEL[sel]
    if width == 32:
        if ty == F32:
            base = vreader(code if is_sgpr else code + 256, F32, inst)
            r0 = base
            if absm:
                r0 = lambda w, b=base: np.abs(b(w))  # noqa: E731
            if neg:
                r1 = r0
                r0 = lambda w, b=r1: -b(w)  # noqa: E731
            return r0
        return rd if ty == U32 else (lambda w: np.asarray(rd(w), np.uint32).view(np.int32))
    if ty == F32:
        raise DecodeError(f"SDWA sub-dword float operand (16-bit op) not implemented: {inst}")
    m = np.uint32((1 << width) - 1)

    def r(w):
        v = (np.asarray(rd(w), np.uint32) >> np.uint32(shift)) & m
        if sext:
            v = ((v.astype(np.int64) ^ (1 << (width - 1))) - (1 << (width - 1))).astype(np.int32)
            return v if ty == I32 else v.view(np.uint32)
        return v if ty == U32 else v.view(np.int32)
    return r


def _build_sdwa(inst: Instruction, ctx, name: str) -> Callable:
    e = inst.fields  # the SDWA dword, split by encodings.SDWA_FIELDS
    sel0, sext0, neg0, abs0, s0 = e["src0_sel"], e["src0_sext"], e["src0_neg"], e["src0_abs"], e["src0_sgpr"]
    sel1, sext1, neg1, abs1 = e["src1_sel"], e["src1_sext"], e["src1_neg"], e["src1_abs"]
    src0 = e["sdwa_src0"]
    if name.startswith("v_cmp"):
        parts = name.split("_")
        cmpx, op, ty = parts[1] == "cmpx", parts[2], parts[3]
        vt = {"f32": F32, "i32": I32, "u32": U32}.get(ty)
        if vt is None or op == "class":
            raise DecodeError(f"unimplemented SDWA compare {inst}")
        f = (_FCMP if ty[0] == "f" else _ICMP)[op]
        r0 = _sdwa_reader(src0, s0, sel0, sext0, neg0, abs0, vt, inst)
        r1 = _sdwa_reader(inst.fields["vsrc1"], 0, sel1, sext1, neg1, abs1, vt, inst)
        dst = swriter(e["sdwa_sdst"] if e["sdwa_sd"] else VCC, inst, 64)
        return _compare_runner(f, r0, r1, dst, cmpx)
    spec = _f8_decode_spec(name, ctx) if name in _F8_DECODES else SIMPLE.get(name)
    if spec is None:
        raise DecodeError(f"unimplemented SDWA {inst}")
    tys, dty, f = spec
    if e["sdwa_clamp"] or e["sdwa_omod"]:
        raise DecodeError(f"SDWA clamp/omod not implemented: {inst}")
    rds = [_sdwa_reader(src0, s0, sel0, sext0, neg0, abs0, tys[0], inst)]
    if len(tys) > 1:
        rds.append(_sdwa_reader(inst.fields["vsrc1"], 0, sel1, sext1, neg1, abs1, tys[1], inst))
    d = inst.fields["vdst"]
    dsel, unused = e["dst_sel"], e["dst_unused"]
    shift, width = _SEL[dsel]
    if dty in (U64, F64):  # a VGPR-pair result (v_cvt_pk_f32_fp8_sdwa): dst_sel has no meaning there
        if width != 32:
            raise DecodeError(f"SDWA dst_sel {dsel} on a 64-bit result: {inst}")
        wr64, r0 = vwriter(d, dty), rds[0]
        return lambda w: wr64(w, f(r0(w)))
    wr = vwriter(d, U32)
    old = vreader(d + 256, U32, inst)

    def run(w):
        res = np.asarray(f(*[r(w) for r in rds]))
        bits = (res.view(np.uint32) if res.dtype.itemsize == 4 else res.astype(np.uint32)).astype(np.uint32)
        if width == 32:
            wr(w, bits)
            return
        m = np.uint32((1 << width) - 1)
        field = (bits & m) << np.uint32(shift)
        if unused == 2:  # preserve the other bits
            keep = np.uint32(M32 ^ (int(m) << shift))
            wr(w, (np.asarray(old(w), np.uint32) & keep) | field)
        elif unused == 1:  # sign-extend the field upwards
            top = (bits >> np.uint32(width - 1)) & np.uint32(1)
            ext = np.where(top == 1, np.uint32(M32 ^ ((1 << (shift + width)) - 1)), np.uint32(0))
            wr(w, field | ext.astype(np.uint32))
        else:
            wr(w, field)
    return run


def build_valu(inst: Instruction, ctx) -> Callable:
    name = base_name(inst)
    if name.endswith("_sdwa"):
        return _build_sdwa(inst, ctx, name[:-5])
    if name.endswith("_dpp"):
        return _build_dpp(inst, ctx, name[:-4])
    if name in _INT16_OPS and inst.fmt == "VOP3" and inst.fields["opsel"]:
        raise DecodeError(f"op_sel on a 16-bit op is not implemented: {inst}")
    special = SPECIAL.get(name)
    if special is not None:
        return special(inst, ctx)
    if name.startswith("v_cmp"):
        return build_vopc(inst, ctx)
    spec = SIMPLE.get(name)
    if spec is None:
        raise DecodeError(f"unimplemented {inst}")
    tys, dty, f = spec
    src = _Srcs(inst)
    if name == "v_max_f32" and 128 in src.codes[:2] and not (src.neg or src.abs or src.clamp or src.omod):
        # ReLU (max with +0), the kernel's hottest VALU op: a cheaper exact formulation
        x = src.reader(1 if src.codes[0] == 128 else 0, F32, ctx)
        wr = vwriter(inst.fields["vdst"], F32)
        return lambda w: wr(w, fx.relu_f32(x(w)))
    f = _post(f, dty, src)
    rds = [src.reader(k, t, ctx) for k, t in enumerate(tys)]
    wr = vwriter(inst.fields["vdst"], dty)
    if len(rds) == 1:
        r0, = rds
        return lambda w: wr(w, f(r0(w)))
    if len(rds) == 2:
        r0, r1 = rds
        return lambda w: wr(w, f(r0(w), r1(w)))
    r0, r1, r2 = rds
    return lambda w: wr(w, f(r0(w), r1(w), r2(w)))


# ---------------------------------------------------------------------------------------------------
# Ops with implicit operands or extra outputs
# ---------------------------------------------------------------------------------------------------
def _fmac(inst, ctx):
    """v_fmac_f32 (the kernel's second hottest op): D = S0 * S1 + D, correctly rounded, inlined."""
    src = _Srcs(inst)
    r0, r1 = src.reader(0, F32, ctx), src.reader(1, F32, ctx)
    d = inst.fields["vdst"]
    if src.clamp or src.omod:
        rd = vreader(d + 256, F32, inst)
        f = _post(fx.fma_f32, F32, src)
        wr = vwriter(d, F32)
        return lambda w: wr(w, f(r0(w), r1(w), rd(w)))
    mul, f64, needs_care, add_to_f32 = np.multiply, np.float64, fx._needs_care, fx.add_to_f32

    def run(w):
        dst = w.vf[:, d]
        p = mul(r0(w), r1(w), dtype=f64)
        s = p + dst
        if needs_care(s):
            s = add_to_f32(p, dst)
        if w.exec_full:
            dst[...] = s
        else:
            np.copyto(dst, s, where=w.exec_mask, casting="unsafe")
    return run


def _fmamk(inst, ctx):
    # D = S0 * K + S1 (fmamk) / D = S0 * S1 + K (fmaak); K is the literal
    src = _Srcs(inst)
    r0, r1 = src.reader(0, F32, ctx), src.reader(1, F32, ctx)
    k = np.float32(np.uint32(inst.literal).view(np.float32))
    wr = vwriter(inst.fields["vdst"], F32)
    if base_name(inst) == "v_fmamk_f32":
        return lambda w: wr(w, fx.fma_f32(r0(w), k, r1(w)))
    return lambda w: wr(w, fx.fma_f32(r0(w), r1(w), k))


def _cndmask(inst, ctx):
    src = _Srcs(inst)
    r0, r1 = src.reader(0, U32, ctx), src.reader(1, U32, ctx)
    if inst.fmt == "VOP2":
        m = mask_reader(VCC, inst)
    else:
        m = mask_reader(inst.fields["src2"], inst)
        if src.neg or src.abs:
            r0, r1 = src.reader(0, F32, ctx), src.reader(1, F32, ctx)
    wr = vwriter(inst.fields["vdst"], U32)
    if src.neg or src.abs:
        wrf = vwriter(inst.fields["vdst"], F32)
        return lambda w: wrf(w, np.where(m(w), r1(w), r0(w)))
    return lambda w: wr(w, np.where(m(w), r1(w), r0(w)))


def _carry_dst(inst):
    """(writer of the carry-out mask) VCC for VOP2, sdst for VOP3B."""
    code = VCC if inst.fmt == "VOP2" else inst.fields["sdst"]
    wr = swriter(code, inst, 64)

    def put(w, mask):
        wr(w, mask_to_bits(mask & w.exec_mask))
    return put


def _carry_src(inst):
    return mask_reader(VCC if inst.fmt == "VOP2" else inst.fields["src2"], inst)


def _addsub_co(inst, ctx):
    name = base_name(inst)
    src = _Srcs(inst)
    r0, r1 = src.reader(0, U32, ctx), src.reader(1, U32, ctx)
    wr = vwriter(inst.fields["vdst"], U32)
    cout = _carry_dst(inst)
    cin = _carry_src(inst) if name in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32") else None
    rev = "rev" in name
    sub = "sub" in name

    def run(w):
        a, b = _u64(r0(w)), _u64(r1(w))
        if rev:
            a, b = b, a
        c = cin(w).astype(np.uint64) if cin is not None else np.uint64(0)
        if sub:
            d = a - b - c
            carry = b + c > a
        else:
            d = a + b + c
            carry = d > np.uint64(M32)
        wr(w, (d & np.uint64(M32)).astype(np.uint32))
        cout(w, np.broadcast_to(carry, (64,)))
    return run


def _mad64(inst, ctx):
    signed = base_name(inst) == "v_mad_i64_i32"
    src = _Srcs(inst)
    r0, r1 = src.reader(0, I32 if signed else U32, ctx), src.reader(1, I32 if signed else U32, ctx)
    r2 = src.reader(2, I64 if signed else U64, ctx)
    wr = vwriter(inst.fields["vdst"], U64)
    cout = _carry_dst(inst)

    def run(w):
        if signed:
            p = np.asarray(r0(w), np.int64) * np.asarray(r1(w), np.int64)
            c = np.asarray(r2(w), np.int64)
            d = (p + c).astype(np.uint64)
            # signed overflow of the 64-bit add
            carry = ((p >= 0) == (c >= 0)) & ((d.astype(np.int64) >= 0) != (p >= 0))
        else:
            p = _u64(r0(w)) * _u64(r1(w))
            c = _u64(r2(w))
            d = p + c
            carry = d < c
        wr(w, d)
        cout(w, np.broadcast_to(carry, (64,)))
    return run


def _readfirstlane(inst, ctx):
    code = inst.fields["src0"]
    rd = vreader(code, U32, inst)
    wr = swriter(inst.fields["vdst"], inst)

    def run(w):
        v = rd(w)
        if np.ndim(v) == 0:
            wr(w, int(v))
            return
        lane = (w.exec_bits & -w.exec_bits).bit_length() - 1 if w.exec_bits else 0
        wr(w, int(v[lane]))
    return run


def _readlane(inst, ctx):
    rd = vreader(inst.fields["src0"], U32, inst)
    lane = sreader(inst.fields["src1"], inst)
    wr = swriter(inst.fields["vdst"], inst)

    def run(w):
        v = rd(w)
        wr(w, int(v if np.ndim(v) == 0 else v[lane(w) & 63]))
    return run


def _writelane(inst, ctx):
    rd = sreader(inst.fields["src0"], inst)
    lane = sreader(inst.fields["src1"], inst)
    d = inst.fields["vdst"]

    def run(w):
        w.v[lane(w) & 63, d] = rd(w)
    return run


def _mbcnt(inst, ctx):
    hi = base_name(inst) == "v_mbcnt_hi_u32_b32"
    src = _Srcs(inst)
    r0, r1 = src.reader(0, U32, ctx), src.reader(1, U32, ctx)
    wr = vwriter(inst.fields["vdst"], U32)
    # ThreadMask = (1 << lane) - 1; mbcnt_lo counts bits [31:0] of it, mbcnt_hi bits [63:32]
    tm = [(1 << lane) - 1 for lane in range(64)]
    below = np.array([(t >> 32) if hi else (t & M32) for t in tm], np.uint64)

    def run(w):
        m = _u64(r0(w)) & below
        wr(w, (np.bitwise_count(m).astype(np.uint32) + r1(w)).astype(np.uint32))
    return run


def _permlane32_swap(inst, ctx):
    # lanes 32-63 of vdst trade places with lanes 0-31 of src0 (AMD pseudocode)
    s0 = inst.fields["src0"] - 256
    d = inst.fields["vdst"]
    if s0 < 0:
        raise DecodeError(f"{inst}: src0 must be a VGPR")
    pc = inst.address

    def run(w):
        if not w.exec_full:
            raise ExecMaskError(f"v_permlane32_swap_b32 at pc 0x{pc:x} needs EXEC all ones, got 0x{w.exec_bits:016x}")
        tmp = w.v[0:32, s0].copy()
        w.v[0:32, s0] = w.v[32:64, d]
        w.v[32:64, d] = tmp
    return run


def _permlane16_swap(inst, ctx):
    s0 = inst.fields["src0"] - 256
    d = inst.fields["vdst"]
    pc = inst.address

    def run(w):
        if not w.exec_full:
            raise ExecMaskError(f"v_permlane16_swap_b32 at pc 0x{pc:x} needs EXEC all ones")
        for base in (0, 32):
            tmp = w.v[base:base + 16, s0].copy()
            w.v[base:base + 16, s0] = w.v[base + 16:base + 32, d]
            w.v[base + 16:base + 32, d] = tmp
    return run


def _swap(inst, ctx):
    s0 = inst.fields["src0"] - 256
    d = inst.fields["vdst"]

    def run(w):
        m = slice(None) if w.exec_full else w.exec_mask
        tmp = w.v[m, s0].copy()
        w.v[m, s0] = w.v[m, d]
        w.v[m, d] = tmp
    return run


def _accvgpr(inst, ctx):
    """v_accvgpr_read_b32 (AGPR -> VGPR), v_accvgpr_write_b32 (-> AGPR), v_accvgpr_mov_b32 (AGPR -> AGPR)."""
    name = base_name(inst)
    ao = ctx.accum_offset
    code = inst.fields["src0"]
    d = inst.fields["vdst"]
    if name == "v_accvgpr_read_b32":
        rd = vreader(code, U32, inst, ao, acc=True)
        wr = vwriter(d, U32)
    elif name == "v_accvgpr_write_b32":
        rd = vreader(code, U32, inst)
        wr = vwriter(d, U32, ao, acc=True)
    else:
        rd = vreader(code, U32, inst, ao, acc=True)
        wr = vwriter(d, U32, ao, acc=True)
    return lambda w: wr(w, rd(w))


_PK16 = {
    # name: (signed operands, function of two int64 arrays) -- results wrap to 16 bits
    "v_pk_max_i16": (True, np.maximum), "v_pk_min_i16": (True, np.minimum),
    "v_pk_max_u16": (False, np.maximum), "v_pk_min_u16": (False, np.minimum),
    "v_pk_add_u16": (False, np.add), "v_pk_sub_u16": (False, np.subtract),
    "v_pk_add_i16": (True, np.add), "v_pk_sub_i16": (True, np.subtract),
    "v_pk_mul_lo_u16": (False, np.multiply),
    "v_pk_lshlrev_b16": (False, lambda a, b: b << (a & 15)),
    "v_pk_lshrrev_b16": (False, lambda a, b: b >> (a & 15)),
    "v_pk_ashrrev_i16": (True, lambda a, b: b >> (a & 15)),
}


def _pk_i16(inst, ctx):
    """Packed 16-bit integer VOP3P ops (AMD pseudocode: tmp[15:0] = op(S0[15:0], S1[15:0]),
    tmp[31:16] = op(S0[31:16], S1[31:16])). op_sel bit k picks which half of source k feeds the low
    result, op_sel_hi bit k the half feeding the high result. Integer ops take no neg modifiers; clamp
    (saturation) is not modelled and refused."""
    name = inst.name
    f = inst.fields
    if f["neg"] or f["neg_hi"] or f["clamp"]:
        raise DecodeError(f"unimplemented modifiers (neg/neg_hi/clamp) on {inst}")
    signed, fn = _PK16[name]
    opsel = f["opsel"]
    opsel_hi = f["opsel_hi"] | (f["opsel_hi2"] << 2)
    readers = [vreader(f["src0"], U32, inst), vreader(f["src1"], U32, inst)]
    wr = vwriter(f["vdst"], U32)

    def half(x, hi: int) -> np.ndarray:
        h = (np.asarray(x, np.uint32) >> np.uint32(16 * hi)) & np.uint32(0xFFFF)
        return h.astype(np.int16).astype(np.int64) if signed else h.astype(np.int64)

    def run(w):
        a, b = (r(w) for r in readers)
        lo = fn(half(a, opsel & 1), half(b, opsel >> 1 & 1)) & 0xFFFF
        hi = fn(half(a, opsel_hi & 1), half(b, opsel_hi >> 1 & 1)) & 0xFFFF
        res = np.broadcast_to((lo | (hi << 16)).astype(np.uint32), (64,))
        wr(w, res)
    return run


def _pk_f32(inst, ctx):
    """v_pk_{fma,mul,add}_f32 / v_pk_mov_b32: two float32 lanes per 64-bit register pair; op_sel picks
    the dword of each source feeding the low result, op_sel_hi the one feeding the high result."""
    name = inst.name
    f = inst.fields
    n = {"v_pk_fma_f32": 3, "v_pk_mul_f32": 2, "v_pk_add_f32": 2, "v_pk_mov_b32": 2}[name]
    codes = [f["src0"], f["src1"], f["src2"]][:n]
    opsel = f["opsel"]
    opsel_hi = f["opsel_hi"] | (f["opsel_hi2"] << 2)
    neg, neg_hi = f["neg"], f["neg_hi"]
    d = f["vdst"]

    def half_reader(k, hi_sel):
        code = codes[k]
        if code >= 256:
            r = code - 256 + hi_sel
            return lambda w: w.vf[:, r]
        rd = sreader(code, inst, 32) if not hi_sel else sreader(code + 1 if code < 128 else code, inst, 32)
        return lambda w: np.float32(np.uint32(rd(w)).view(np.float32))

    lo = [half_reader(k, opsel >> k & 1) for k in range(n)]
    hi = [half_reader(k, opsel_hi >> k & 1) for k in range(n)]

    def op(vals, negm):
        vals = [(-v if (negm >> k & 1) and name != "v_pk_mov_b32" else v) for k, v in enumerate(vals)]
        if name == "v_pk_fma_f32":
            return fx.fma_f32(*vals)
        if name == "v_pk_mul_f32":
            return vals[0] * vals[1]
        if name == "v_pk_add_f32":
            return vals[0] + vals[1]
        return vals  # mov: (low from src0, high from src1)

    def run(w):
        if name == "v_pk_mov_b32":
            a = lo[0](w)
            b = hi[1](w)
        else:
            a = op([r(w) for r in lo], neg)
            b = op([r(w) for r in hi], neg_hi)
        a = np.broadcast_to(np.asarray(a, np.float32), (64,))
        b = np.broadcast_to(np.asarray(b, np.float32), (64,))
        res = np.stack([a, b], axis=1)
        if w.exec_full:
            w.vf[:, d:d + 2] = res
        else:
            w.vf[w.exec_mask, d:d + 2] = res[w.exec_mask]
    return run


# ---- VOPC ----
_FCMP = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal,
    "gt": np.greater, "lg": lambda a, b: np.less(a, b) | np.greater(a, b), "ge": np.greater_equal,
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~np.greater_equal(a, b), "nlg": lambda a, b: ~(np.less(a, b) | np.greater(a, b)),
    "ngt": lambda a, b: ~np.greater(a, b), "nle": lambda a, b: ~np.less_equal(a, b),
    "neq": lambda a, b: ~np.equal(a, b), "nlt": lambda a, b: ~np.less(a, b),
    "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}
_ICMP = {"f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
         "ne": np.not_equal, "ge": np.greater_equal, "t": _FCMP["tru"]}


def _class_mask(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """v_cmp_class: bit k of S1 selects class k of S0 (0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denorm,
    5 -0, 6 +0, 7 +denorm, 8 +normal, 9 +inf)."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        b = x.view(np.uint32).astype(np.uint64)
        expm, manm, quiet, sign = 0x7F800000, 0x7FFFFF, 0x400000, 0x80000000
    else:
        b = x.view(np.uint64)
        expm, manm, quiet, sign = 0x7FF0000000000000, 0xFFFFFFFFFFFFF, 0x8000000000000, 1 << 63
    e, man, neg = b & np.uint64(expm), b & np.uint64(manm), (b & np.uint64(sign)) != 0
    nan = (e == expm) & (man != 0)
    cls = np.select(
        [nan & ((b & np.uint64(quiet)) == 0), nan, (e == expm) & neg, (e == expm),
         (e == 0) & (man == 0) & neg, (e == 0) & (man == 0), (e == 0) & neg, (e == 0), neg],
        [0, 1, 2, 9, 5, 6, 4, 7, 3], default=8)
    return ((np.asarray(m, np.uint32) >> cls.astype(np.uint32)) & 1).astype(bool)


def build_vopc(inst: Instruction, ctx) -> Callable:
    name = base_name(inst)
    parts = name.split("_")  # v_cmp[x]_<op>_<type>
    cmpx = parts[1] == "cmpx"
    op, ty = parts[2], parts[3]
    src = _Srcs(inst)
    if op == "class":
        vt = F32 if ty == "f32" else F64
        r0, r1 = src.reader(0, vt, ctx), src.reader(1, U32, ctx)
        f = _class_mask
    else:
        vt = {"f32": F32, "f64": F64, "i32": I32, "u32": U32, "i64": I64, "u64": U64}.get(ty)
        if vt is None:
            raise DecodeError(f"unimplemented {inst}")
        f = (_FCMP if ty[0] == "f" else _ICMP)[op]
        r0, r1 = src.reader(0, vt, ctx), src.reader(1, vt, ctx)
    dst = swriter(VCC if inst.fmt == "VOPC" else inst.fields["vdst"], inst, 64)
    return _compare_runner(f, r0, r1, dst, cmpx)


def _compare_runner(f, r0, r1, dst, cmpx: bool):
    """A compare writes its lane mask (active lanes only) to an SGPR pair or VCC; v_cmpx also to EXEC."""
    def run(w):
        with np.errstate(invalid="ignore"):
            m = np.broadcast_to(f(r0(w), r1(w)), (64,)) & w.exec_mask
        bits = mask_to_bits(m)
        dst(w, bits)
        if cmpx:
            w.set_exec(bits)
    return run


def _bitop3(inst, ctx):
    """v_bitop3_b32: arbitrary 3-input bitwise function; its 8-entry truth table (index S0<<2|S1<<1|S2)
    is stored in the OMOD:ABS:NEG fields."""
    f = inst.fields
    table = (f["omod"] << 6) | (f["abs"] << 3) | f["neg"]
    codes = [f["src0"], f["src1"], f["src2"]]
    rds = [vreader(c, U32, inst) for c in codes]
    wr = vwriter(f["vdst"], U32)
    full = np.uint32(M32)

    def run(w):
        a, b, c = (np.asarray(r(w), np.uint32) for r in rds)
        na, nb, nc = ~a, ~b, ~c
        out = np.zeros(np.broadcast(a, b, c).shape, np.uint32)
        for t in range(8):
            if table >> t & 1:
                out |= (a if t & 4 else na) & (b if t & 2 else nb) & (c if t & 1 else nc)
        wr(w, out & full)
    return run


# ---- DPP (VOP1/VOP2 with src0 = 0xFA; GFX9 encoding of the second dword) ----
def _dpp_source_lanes(ctrl: int) -> np.ndarray | None:
    """Source lane of each lane for a DPP_CTRL value (-1: no source lane), or None if unknown.

    GFX9 DPP_CTRL: 0x000-0x0FF quad_perm, 0x101-0x10F row_shl, 0x111-0x11F row_shr, 0x121-0x12F row_ror,
    0x130 wave_shl1, 0x134 wave_rol1, 0x138 wave_shr1, 0x13C wave_ror1, 0x140 row_mirror,
    0x141 row_half_mirror, 0x142 row_bcast15 (lane 15 of each row to the next row), 0x143 row_bcast31
    (lane 31 to rows 2 and 3). Rows are 16 lanes."""
    lane = np.arange(64)
    row, pos = lane // 16, lane % 16
    if ctrl <= 0xFF:
        sel = np.array([(ctrl >> (2 * k)) & 3 for k in range(4)])
        return lane - lane % 4 + sel[lane % 4]
    if 0x101 <= ctrl <= 0x10F:
        n = ctrl & 0xF
        return np.where(pos + n < 16, lane + n, -1)
    if 0x111 <= ctrl <= 0x11F:
        n = ctrl & 0xF
        return np.where(pos - n >= 0, lane - n, -1)
    if 0x121 <= ctrl <= 0x12F:
        n = ctrl & 0xF
        return row * 16 + (pos + n) % 16
    if ctrl == 0x130:
        return np.where(lane + 1 < 64, lane + 1, -1)
    if ctrl == 0x134:
        return (lane + 1) % 64
    if ctrl == 0x138:
        return np.where(lane >= 1, lane - 1, -1)
    if ctrl == 0x13C:
        return (lane - 1) % 64
    if ctrl == 0x140:
        return row * 16 + 15 - pos
    if ctrl == 0x141:
        return lane - lane % 8 + 7 - lane % 8
    if ctrl == 0x142:
        return np.where(row >= 1, row * 16 - 1, -1)
    if ctrl == 0x143:
        return np.where(row >= 2, 31, -1)
    return None


def _build_dpp(inst: Instruction, ctx, name: str) -> Callable:
    """VOP1/VOP2 DPP: src0 is read from another lane of the VGPR named in the DPP dword. A lane whose
    source lane does not exist or is inactive reads 0 when BOUND_CTRL is set, otherwise is not written.
    ROW_MASK / BANK_MASK disable the write of whole rows (16 lanes) / banks (lanes 4k..4k+3 of each row)."""
    e = inst.fields  # the DPP dword, split by encodings.DPP_FIELDS
    src0, ctrl, bound = e["dpp_src0"], e["dpp_ctrl"], e["bound_ctrl"]
    neg0, abs0, neg1, abs1 = e["dpp_src0_neg"], e["dpp_src0_abs"], e["dpp_src1_neg"], e["dpp_src1_abs"]
    bank_mask, row_mask = e["bank_mask"], e["row_mask"]
    srcl = _dpp_source_lanes(ctrl)
    spec = _f8_decode_spec(name, ctx) if name in _F8_DECODES else SIMPLE.get(name)
    if srcl is None or spec is None or name.startswith("v_cmp"):
        raise DecodeError(f"unimplemented DPP {inst} (dpp_ctrl 0x{ctrl:x})")
    tys, dty, f = spec
    lane = np.arange(64)
    enabled = np.array([(row_mask >> (l // 16) & 1) and (bank_mask >> ((l % 16) // 4) & 1) for l in lane], bool)
    has_src = srcl >= 0
    srcc = np.where(has_src, srcl, 0)

    def modded(rd, ty, neg, absm):
        if ty != F32 or not (neg or absm):
            if neg or absm:
                raise DecodeError(f"DPP neg/abs on a non-float operand: {inst}")
            return rd
        r0 = (lambda w: np.abs(rd(w))) if absm else rd
        return (lambda w: -r0(w)) if neg else r0

    np_ty = {U32: np.uint32, I32: np.int32, F32: np.float32}
    if tys[0] not in np_ty or dty not in np_ty or len(tys) > 2:
        raise DecodeError(f"unimplemented DPP {inst}")
    view = {U32: "v", I32: "vi", F32: "vf"}[tys[0]]

    def read0(w):
        col = getattr(w, view)[:, src0]
        valid = has_src & w.exec_mask[srcc]
        return np.where(valid, col[srcc], np_ty[tys[0]](0)), valid

    r1 = modded(vreader(inst.fields["vsrc1"] + 256, tys[1], inst), tys[1], neg1, abs1) if len(tys) == 2 else None
    d = inst.fields["vdst"]
    dview = {U32: "v", I32: "vi", F32: "vf"}[dty]

    def run(w):
        a, valid = read0(w)
        if tys[0] == F32 and (abs0 or neg0):
            a = np.abs(a) if abs0 else a
            a = -a if neg0 else a
        with np.errstate(all="ignore"):
            res = f(a) if r1 is None else f(a, r1(w))
        write = w.exec_mask & enabled & (valid | bool(bound))
        np.copyto(getattr(w, dview)[:, d], np.broadcast_to(np.asarray(res), (64,)), where=write, casting="unsafe")
    return run


# ---- division helpers (AMD pseudocode, CDNA4) ----
def _exponent_f32(x):
    return ((np.asarray(x, np.float32).view(np.uint32) >> _U(23)) & _U(0xFF)).astype(np.int32)


def _is_denorm_f32(x):
    x = np.asarray(x, np.float32)
    return (_exponent_f32(x) == 0) & (x != 0)


def _div_scale(inst, ctx):
    """v_div_scale_f32 D, VCC-like sdst, S0, S1, S2: scales S0 by 2^+-64 where N/D (S2/S1) would lose
    precision; sdst flags lanes whose quotient v_div_fmas must scale back by 2^32. Default: D = S0."""
    src = _Srcs(inst)
    r0, r1, r2 = (src.reader(k, F32, ctx) for k in range(3))
    wr = vwriter(inst.fields["vdst"], F32)
    cout = _carry_dst(inst)

    def run(w):
        s0, s1, s2 = (np.broadcast_to(np.asarray(r(w), np.float32), (64,)) for r in (r0, r1, r2))
        e1, e2 = _exponent_f32(s1), _exponent_f32(s2)
        undef = (s2 == 0) | (s1 == 0)
        with np.errstate(all="ignore"):
            q = (s2 / s1).astype(np.float32)
            up = (s0 * np.float32(2.0 ** 64)).astype(np.float32)
        big = ~undef & (e2 - e1 >= 96)
        den1 = ~undef & ~big & _is_denorm_f32(s1)
        # (1.0 / f64(S1)) is never an f64 denormal for a float32 S1: those two branches cannot fire
        qden = ~undef & ~big & ~den1 & _is_denorm_f32(q)
        tiny = ~undef & ~big & ~den1 & ~qden & (e2 <= 23)
        scale = (big & (s0 == s1)) | den1 | (qden & (s0 == s2)) | tiny
        d = np.where(undef, np.float32(np.nan), np.where(scale, up, s0))
        wr(w, d.astype(np.float32))
        cout(w, big | qden)
    return run


def _div_fmas(inst, ctx):
    """v_div_fmas_f32: fma(S0, S1, S2), times 2^32 in lanes whose VCC bit is set."""
    src = _Srcs(inst)
    r0, r1, r2 = (src.reader(k, F32, ctx) for k in range(3))
    f = _post(lambda a, b, c: a, F32, src)
    wr = vwriter(inst.fields["vdst"], F32)

    def run(w):
        r = np.asarray(fx.fma_f32(r0(w), r1(w), r2(w)), np.float32)
        vcc = bits_to_mask(w.vcc)
        with np.errstate(over="ignore"):
            r = np.where(vcc, r * np.float32(2.0 ** 32), r).astype(np.float32)
        wr(w, f(r, None, None))
    return run


def _div_fixup(inst, ctx):
    """v_div_fixup_f32 D, S0 (quotient), S1 (denominator), S2 (numerator): special cases of S2/S1."""
    src = _Srcs(inst)
    r0, r1, r2 = (src.reader(k, F32, ctx) for k in range(3))
    f = _post(lambda a: a, F32, src)
    wr = vwriter(inst.fields["vdst"], F32)
    f32 = np.float32

    def run(w):
        s0, s1, s2 = (np.broadcast_to(np.asarray(r(w), f32), (64,)) for r in (r0, r1, r2))
        neg = (np.signbit(s1) ^ np.signbit(s2))
        inf = np.where(neg, f32(-np.inf), f32(np.inf))
        zero = np.where(neg, f32(-0.0), f32(0.0))
        qnan = np.uint32(0xFFC00000).view(f32)
        quiet = lambda x: (x.view(np.uint32) | _U(0x400000)).view(f32)  # noqa: E731
        e1, e2 = _exponent_f32(s1), _exponent_f32(s2)
        conds = [np.isnan(s2), np.isnan(s1), (s1 == 0) & (s2 == 0), np.isinf(s1) & np.isinf(s2),
                 (s1 == 0) | np.isinf(s2), np.isinf(s1) | (s2 == 0),
                 e2 - e1 < -150,          # UNDERFLOW_F32: |N/D| < 2^-150 rounds to zero
                 e1 == 255]
        outs = [quiet(s2), quiet(s1), np.broadcast_to(qnan, (64,)), np.broadcast_to(qnan, (64,)), inf, zero,
                zero, inf]
        d = np.select(conds, outs, default=np.where(neg, -np.abs(s0), np.abs(s0)))
        wr(w, f(d.astype(f32)))
    return run


# ---------------------------------------------------------------------------------------------------
# fp8 / bf8 conversions (OCP e4m3fn / e5m2 on gfx950, e4m3fnuz / e5m2fnuz on gfx942; numerics in fp8.py)
# ---------------------------------------------------------------------------------------------------
def _f8_decode(inst, ctx):
    """e32 and VOP3 forms of v_cvt_f32_fp8/bf8 and v_cvt_pk_f32_fp8/bf8: byte (word) 0 of the source.

    AMD's CDNA4 pseudocode selects the byte only through SDWA src0_sel (VOP3: byte 0 implied); newer
    LLVM puts a gfx950 byte select into op_sel that this toolchain cannot assemble, so its bit order is
    unverified here and a non-zero op_sel raises instead of guessing."""
    if inst.fmt == "VOP3" and inst.fields["opsel"]:
        raise DecodeError(f"op_sel byte/word select on {base_name(inst)} is not emulated (unverified encoding): {inst}")
    tys, dty, f = _f8_decode_spec(base_name(inst), ctx)
    src = _Srcs(inst)
    if dty != F32 and (src.clamp or src.omod):
        raise DecodeError(f"clamp/omod on a packed fp8 decode is not emulated: {inst}")
    f = _post(f, dty, src)
    rd = src.reader(0, U32, ctx)
    wr = vwriter(inst.fields["vdst"], dty)
    return lambda w: wr(w, f(rd(w)))


def _f8_encode_pk(inst, ctx):
    """v_cvt_pk_fp8_f32 / v_cvt_pk_bf8_f32 (VOP3): D.word[op_sel[3]] = {f8(S1), f8(S0)}, round to
    nearest even, no saturation; the other word of D is kept."""
    fmt = _target(ctx).f8_format(base_name(inst) == "v_cvt_pk_bf8_f32", inst)
    src = _Srcs(inst)
    if src.clamp or src.omod:
        # what gfx950's clamp bit does on these converts (saturate?) is described nowhere we can check
        raise DecodeError(f"clamp/omod on {base_name(inst)} is not emulated: {inst}")
    opsel = inst.fields["opsel"]
    if opsel & 0b0111:
        raise DecodeError(f"op_sel {opsel:#x} on {base_name(inst)}: only op_sel[3] (word select) is defined: {inst}")
    shift = _U(16) if opsel & 0b1000 else _U(0)
    keep = _U(0x0000FFFF) if opsel & 0b1000 else _U(0xFFFF0000)
    r0, r1 = src.reader(0, F32, ctx), src.reader(1, F32, ctx)
    d = inst.fields["vdst"]
    old = vreader(d + 256, U32, inst)
    wr = vwriter(d, U32)

    def run(w):
        pair = fp8.from_f32(r0(w), fmt) | (fp8.from_f32(r1(w), fmt) << _U(8))
        wr(w, (np.asarray(old(w), np.uint32) & keep) | (pair << shift))
    return run


def _f8_encode_sr(inst, ctx):
    raise DecodeError(
        f"{base_name(inst)} (stochastic rounding) is not emulated: AMD's pseudocode adds S1's high bits to the "
        f"mantissa with wrap-around and then rounds to nearest even, which no hardware here can confirm: {inst}")


SPECIAL: dict[str, Callable] = {
    **{name: _f8_decode for name in _F8_DECODES},
    "v_cvt_pk_fp8_f32": _f8_encode_pk, "v_cvt_pk_bf8_f32": _f8_encode_pk,
    "v_cvt_sr_fp8_f32": _f8_encode_sr, "v_cvt_sr_bf8_f32": _f8_encode_sr,
    "v_div_scale_f32": _div_scale, "v_div_fmas_f32": _div_fmas, "v_div_fixup_f32": _div_fixup,
    "v_bitop3_b32": _bitop3,
    "v_fmac_f32": _fmac, "v_fmamk_f32": _fmamk, "v_fmaak_f32": _fmamk, "v_cndmask_b32": _cndmask,
    "v_add_co_u32": _addsub_co, "v_sub_co_u32": _addsub_co, "v_subrev_co_u32": _addsub_co,
    "v_addc_co_u32": _addsub_co, "v_subb_co_u32": _addsub_co, "v_subbrev_co_u32": _addsub_co,
    "v_mad_u64_u32": _mad64, "v_mad_i64_i32": _mad64,
    "v_readfirstlane_b32": _readfirstlane, "v_readlane_b32": _readlane, "v_writelane_b32": _writelane,
    "v_mbcnt_lo_u32_b32": _mbcnt, "v_mbcnt_hi_u32_b32": _mbcnt,
    "v_permlane32_swap_b32": _permlane32_swap, "v_permlane16_swap_b32": _permlane16_swap, "v_swap_b32": _swap,
    "v_accvgpr_read_b32": _accvgpr, "v_accvgpr_write_b32": _accvgpr, "v_accvgpr_mov_b32": _accvgpr,
    "v_pk_fma_f32": _pk_f32, "v_pk_mul_f32": _pk_f32, "v_pk_add_f32": _pk_f32, "v_pk_mov_b32": _pk_f32,
    **{name: _pk_i16 for name in _PK16},
    "v_nop": lambda inst, ctx: (lambda w: None),
}
