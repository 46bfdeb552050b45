"""Operand access compiled once per instruction: readers and writers for scalar and vector operands.

Every reader is a closure ``r(w) -> value`` chosen when the instruction is compiled, so executing an
instruction never re-interprets operand codes. Scalar values are Python ints (raw bits, unsigned)
or, in a float context, Python floats (exact: they come from float32/float64 bits); vector values are
numpy views of the wave's register file. Inline constants are folded into constant readers.
"""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from .decoder import LITERAL, Instruction
from .errors import DecodeError
from .state import EXEC, VCC

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1

# float inline constants 240..248 as (f32 bits, f64 bits)
_FCONST = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
_INV2PI_F32, _INV2PI_F64 = 0x3E22F983, 0x3FC45F306DC9C882

# Aperture bases of the generic (flat) address space: high dwords returned by src_shared_base etc.
SHARED_BASE_HI, PRIVATE_BASE_HI = 0x10000, 0x20000


def f32_bits_to_float(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & M32))[0]


def f64_bits_to_float(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b & M64))[0]


def float_to_f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def inline_constant(code: int, bits: int, literal: int | None, inst: Instruction) -> int | None:
    """Raw bits of a constant operand (``bits`` = 32 or 64), or None if ``code`` is a register."""
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return (-(code - 192)) & (M32 if bits == 32 else M64)
    if code in _FCONST:
        if bits == 32:
            return float_to_f32_bits(_FCONST[code])
        return struct.unpack("<Q", struct.pack("<d", _FCONST[code]))[0]
    if code == 248:
        return _INV2PI_F32 if bits == 32 else _INV2PI_F64
    if code == LITERAL:
        if literal is None:
            raise DecodeError(f"{inst}: literal operand without literal")
        return literal  # 64-bit operands: the 32-bit literal is zero-extended (integer) -- see fp64 below
    if code == 235:
        return SHARED_BASE_HI << 32 if bits == 64 else 0
    if code == 236:
        return (SHARED_BASE_HI << 32 | M32) if bits == 64 else 0
    if code == 237:
        return PRIVATE_BASE_HI << 32 if bits == 64 else 0
    if code == 238:
        return (PRIVATE_BASE_HI << 32 | M32) if bits == 64 else 0
    return None


def sreader(code: int, inst: Instruction, bits: int = 32, fp64: bool = False) -> Callable:
    """Reader of a scalar source (SALU 8-bit code, or a VALU source < 256) -> int (raw bits)."""
    if code == LITERAL and bits == 64 and fp64:
        c = inst.literal << 32  # an fp64 literal supplies the high dword
        return lambda w: c
    c = inline_constant(code, bits, inst.literal, inst)
    if c is not None:
        return lambda w: c
    if code == 251:  # vccz
        return lambda w: int((w.s[VCC] | w.s[VCC + 1]) == 0)
    if code == 252:  # execz
        return lambda w: int(w.exec_bits == 0)
    if code == 253:  # scc
        return lambda w: w.scc
    if code == 125 or code > 127:
        raise DecodeError(f"{inst}: unsupported scalar operand code {code}")
    i = code
    if bits == 32:
        return lambda w: w.s[i]
    return lambda w: w.s[i] | (w.s[i + 1] << 32)


def swriter(code: int, inst: Instruction, bits: int = 32) -> Callable:
    """Writer ``wr(w, value)`` of a scalar destination; keeps the EXEC mask mirror in sync."""
    if code > 127 or code == 125:
        if code == 125 or code == 0x7D:  # null
            return lambda w, x: None
        raise DecodeError(f"{inst}: unsupported scalar destination {code}")
    i = code
    touches_exec = bool({i, i + bits // 32 - 1} & {EXEC, EXEC + 1})
    if bits == 32:
        if touches_exec:
            def wr(w, x):
                w.s[i] = x & M32
                w.sync_exec()
        else:
            def wr(w, x):
                w.s[i] = x & M32
        return wr
    if touches_exec:
        def wr(w, x):
            w.s[i] = x & M32
            w.s[i + 1] = (x >> 32) & M32
            w.sync_exec()
    else:
        def wr(w, x):
            w.s[i] = x & M32
            w.s[i + 1] = (x >> 32) & M32
    return wr


def signed32(x: int) -> int:
    return x - ((x & 0x80000000) << 1)


def signed64(x: int) -> int:
    return x - ((x & (1 << 63)) << 1)


# ---- vector operands ----
# types: "u32" "i32" "f32" "u64" "i64" "f64"
_NP = {"u32": np.uint32, "i32": np.int32, "f32": np.float32, "u64": np.uint64, "i64": np.int64, "f64": np.float64}


def vreg_index(code: int, inst: Instruction) -> int:
    if code < 256:
        raise DecodeError(f"{inst}: operand {code} must be a VGPR")
    return code - 256


def vreader(code: int, ty: str, inst: Instruction, accum_offset: int = 0, acc: bool = False) -> Callable:
    """Reader of a VALU source: VGPR -> numpy view (64,), scalar -> Python number of that type."""
    if code >= 256:
        r = code - 256 + (accum_offset if acc else 0)
        if ty == "u32":
            return lambda w: w.v[:, r]
        if ty == "f32":
            return lambda w: w.vf[:, r]
        if ty == "i32":
            return lambda w: w.vi[:, r]
        if ty in ("u64", "i64", "f64"):
            dt = _NP[ty]
            return lambda w: w.v[:, r:r + 2].view(dt)[:, 0]
        raise AssertionError(ty)
    bits = 64 if ty in ("u64", "i64", "f64") else 32
    rd = sreader(code, inst, bits, fp64=(ty == "f64"))
    const = inline_constant(code, bits, inst.literal, inst) if code != LITERAL or ty != "f64" else inst.literal << 32
    conv = {"u32": lambda x: np.uint32(x), "i32": lambda x: np.int32(signed32(x)),
            "f32": lambda x: np.float32(f32_bits_to_float(x)), "u64": lambda x: np.uint64(x),
            "i64": lambda x: np.int64(signed64(x)), "f64": lambda x: np.float64(f64_bits_to_float(x))}[ty]
    if const is not None:
        c = conv(const)
        return lambda w: c
    return lambda w: conv(rd(w))


def vwriter(vdst: int, ty: str, accum_offset: int = 0, acc: bool = False) -> Callable:
    """Writer ``wr(w, value)`` of a VGPR destination honouring EXEC."""
    r = vdst + (accum_offset if acc else 0)
    if ty in ("u64", "i64", "f64"):
        dt = _NP[ty]

        def wr(w, x):
            dst = w.v[:, r:r + 2].view(dt)[:, 0]
            if w.exec_full:
                dst[...] = x
            else:
                np.copyto(dst, x, where=w.exec_mask, casting="unsafe")
        return wr
    attr = {"u32": "v", "i32": "vi", "f32": "vf"}[ty]
    if attr == "v":
        def wr(w, x):
            if w.exec_full:
                w.v[:, r] = x
            else:
                np.copyto(w.v[:, r], x, where=w.exec_mask, casting="unsafe")
    elif attr == "vf":
        def wr(w, x):
            if w.exec_full:
                w.vf[:, r] = x
            else:
                np.copyto(w.vf[:, r], x, where=w.exec_mask, casting="unsafe")
    else:
        def wr(w, x):
            if w.exec_full:
                w.vi[:, r] = x
            else:
                np.copyto(w.vi[:, r], x, where=w.exec_mask, casting="unsafe")
    return wr


def mask_reader(code: int, inst: Instruction) -> Callable:
    """Reader of a 64-bit lane mask operand (VCC or an SGPR pair) -> bool (64,) array."""
    from .state import bits_to_mask
    rd = sreader(code, inst, 64)
    return lambda w: bits_to_mask(rd(w))
