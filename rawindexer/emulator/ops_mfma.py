"""Matrix cores: dense MFMA (32x32 and 16x16 single-block shapes), fp8/bf8 f8f6f4 and its scaled form.

Operand layout (wave64, CDNA3/CDNA4, single-block shapes): lane ``l`` holds row ``l % R`` of A (column
``l % R`` of B) for the k-group ``l // R`` (R = 32 or 16); its bytes are that group's k values. Which
depth index a (group, byte) pair stands for does not change a dense product as long as A and B agree,
so the emulator pairs "item n of lane i + R*g of A" with "item n of lane j + R*g of B" and sums over
all (g, n). The result layout: for 32x32, VGPR r of lane l holds D[8*(r//4) + 4*(l//32) + r%4][l%32];
for 16x16, VGPR r of lane l holds D[4*(l//16) + r][l%16].

Numerics (documented choice): inputs are decoded exactly to float64 (fp8/bf8 via 256-entry tables of
the code object's target: OCP e4m3fn/e5m2 on gfx950, e4m3fnuz/e5m2fnuz on gfx942 -- see .targets;
f16/bf16 exactly); all products of one instruction are summed in float64 (exact for e4m3: every
product is a multiple of 2^-18 below 2^18, and 64 of them fit in 53 bits), C is added and the result
is rounded ONCE to float32 (round-to-nearest-even, via round-to-odd so the float64 step cannot
double-round). e5m2 sums are exact unless the product exponents span more than 53 bits.

Scaled form (``v_mfma_scale_f32_32x32x64_f8f6f4`` = ``v_mfma_ld_scale_b32`` + MFMA, one 16-byte
instruction): scale operands are E8M0 bytes (value 2^(e - 127), 127 = 1.0, 255 = NaN), selected per
lane from the scale register by ``op_sel[k] | op_sel_hi[k] << 1``. The emulator applies lane l's
scale byte to the 32 operand values lane l holds (= one 32-wide K block of one row/column when the
bytes of a lane form a contiguous block). Scale operands that are SGPRs or inline constants are
read from bits [30:23] (the float exponent field): LLVM restricts scale operands to VGPRs because the
hardware does this (llvm/llvm-project PR 158117). clang lowers the scaled builtin with both scale
operands the constant 0 (and opsel 0) to the plain ``v_mfma_f32_32x32x64_f8f6f4`` (NOTES section 3; the
shipped kernel relies on it): the plain opcode multiplies unscaled, and so does the emulator.
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np

from . import numerics as fx
from . import fp8
from .decoder import Instruction
from .errors import DecodeError, ExecMaskError
from .operands import sreader

# f8f6f4 format codes (cbsz for A, blgp for B); only gfx950 has f8f6f4, and reads OCP formats there
_F8_TABLES = {0: fx.E4M3FN, 1: fx.E5M2}
_F8_NAMES = {0: "fp8 e4m3", 1: "bf8 e5m2", 2: "fp6 e2m3", 3: "bf6 e3m2", 4: "fp4 e2m1"}


def _out_index(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of D held by (lane, result register) for an m x m single-block MFMA."""
    lanes = np.arange(64)[:, None]
    if m == 32:
        r = np.arange(16)[None, :]
        return 8 * (r // 4) + 4 * (lanes // 32) + r % 4, np.broadcast_to(lanes % 32, (64, 16))
    r = np.arange(4)[None, :]
    return 4 * (lanes // 16) + r, np.broadcast_to(lanes % 16, (64, 4))


_OUT = {32: _out_index(32), 16: _out_index(16)}


def _decode_items(raw: np.ndarray, kind: str, f8: np.ndarray | None = None) -> np.ndarray:
    """(64, nbytes) uint8 operand bytes -> (64, items) float64/int64 values (``f8``: the byte table)."""
    if kind == "f8":
        return f8[raw]
    if kind == "f16":
        return raw.view("<f2").astype(np.float64)
    if kind == "bf16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "f32":
        return raw.view("<f4").astype(np.float64)
    if kind == "i8":
        return raw.view(np.int8).astype(np.int64)
    raise AssertionError(kind)


# name pattern -> (m, k, operand kind, output kind, registers per operand)
def _shape(name: str):
    m = re.fullmatch(r"v_mfma(_scale)?_(f32|i32)_(\d+)x(\d+)x(\d+)_(\w+)", name)
    if not m:
        return None
    scaled, out, mm, nn, kk, ty = m.groups()
    mm, kk = int(mm), int(kk)
    if mm not in (16, 32) or "b" in ty.split("_")[0][:1] and ty[0].isdigit():
        return None
    if ty in ("f8f6f4",):
        kind = "f8"
    elif ty in ("fp8_fp8", "fp8_bf8", "bf8_fp8", "bf8_bf8"):
        kind = "f8"
    elif ty in ("f16", "bf16", "f32", "i8"):
        kind = ty
    else:
        return None
    return bool(scaled), out, mm, kk, kind, ty


def build_mfma(inst: Instruction, ctx) -> Callable:
    sh = _shape(inst.name)
    if sh is None:
        raise DecodeError(f"unimplemented MFMA {inst}")
    scaled, out, m, k, kind, ty = sh
    f = inst.fields
    ao = ctx.accum_offset
    groups = 64 // m
    items = k // groups  # values per lane
    bytes_per = {"f8": 1, "f16": 2, "bf16": 2, "f32": 4, "i8": 1}[kind]
    nregs = max(1, items * bytes_per // 4)
    fa = fb = None
    if ty == "f8f6f4":
        for code in (f["cbsz"], f["blgp"]):
            if code not in _F8_TABLES:
                raise DecodeError(f"unimplemented MFMA operand format {_F8_NAMES.get(code, code)}: {inst}")
        if ctx.target.fp8 is not fp8.FP8:
            raise DecodeError(f"{inst.name} is a gfx950 instruction; the code object is for {ctx.target.name}")
        fa, fb = _F8_TABLES[f["cbsz"]], _F8_TABLES[f["blgp"]]
    elif kind == "f8":
        # the fp8/bf8 operand formats of the target: OCP on gfx950, fnuz on gfx940-942
        fa = fp8.TABLES64[ctx.target.f8_format(ty.startswith("bf8"), inst).name]
        fb = fp8.TABLES64[ctx.target.f8_format(ty.endswith("bf8"), inst).name]
        if f["cbsz"] or f["abid"] or f["blgp"]:
            raise DecodeError(f"unimplemented MFMA broadcast controls (cbsz/abid/blgp): {inst}")
    elif f["cbsz"] or f["abid"] or f["blgp"]:
        raise DecodeError(f"unimplemented MFMA broadcast controls (cbsz/abid/blgp): {inst}")
    acc_a, acc_b = f["acc"] & 1, f["acc"] >> 1 & 1
    if f["src0"] < 256 or f["src1"] < 256:
        raise DecodeError(f"MFMA A/B must be registers: {inst}")
    ra = f["src0"] - 256 + (ao if acc_a else 0)
    rb = f["src1"] - 256 + (ao if acc_b else 0)
    nout = 16 if m == 32 else 4
    rd = f["vdst"] + (ao if f["acc_cd"] else 0)
    c_code = f["src2"]
    if c_code >= 256:
        rc = c_code - 256 + (ao if f["acc_cd"] else 0)
        c_const = None
    else:
        rc = None
        c_bits = sreader(c_code, inst)(None) if c_code != 253 and c_code >= 128 else None
        if c_bits is None:
            raise DecodeError(f"MFMA C operand must be a register or an inline constant: {inst}")
        c_const = np.uint32(c_bits).view(np.int32 if out == "i32" else np.float32)
    rows, cols = _OUT[m]
    # flat indices into the (64 x 64) lane-pair product for each k-group: row i + m*g, column j + m*g
    flat = [((rows + m * g) * 64 + (cols + m * g)) for g in range(groups)]
    pc = inst.address
    int_out = out == "i32"
    if scaled:
        sa = _scale_reader(f["scale_src0"], f["scale_opsel"] & 1 | (f["scale_opsel_hi"] & 1) << 1, inst)
        sb = _scale_reader(f["scale_src1"], (f["scale_opsel"] >> 1) & 1 | ((f["scale_opsel_hi"] >> 1) & 1) << 1, inst)
    if f.get("neg"):
        pass  # neg bits on MFMA are only meaningful for f64 shapes, which are not implemented

    def run(w):
        if not w.exec_full:
            raise ExecMaskError(f"{inst.name} at pc 0x{pc:x} needs EXEC all ones, got 0x{w.exec_bits:016x}")
        a = _decode_items(w.v[:, ra:ra + nregs].copy().view(np.uint8)[:, :items * bytes_per], kind, fa)
        b = _decode_items(w.v[:, rb:rb + nregs].copy().view(np.uint8)[:, :items * bytes_per], kind, fb)
        if scaled:
            a = a * sa(w)[:, None]
            b = b * sb(w)[:, None]
        # one (64 x items) @ (items x 64) product pairs every lane of A with every lane of B; the
        # MFMA sums, over the k-groups g, the blocks pairing lane i + m*g of A with lane j + m*g of B
        p = a @ b.T
        s = p.take(flat[0])
        for fl in flat[1:]:
            s += p.take(fl)
        if int_out:
            c = w.vi[:, rc:rc + nout].astype(np.int64) if rc is not None else np.int64(c_const)
            w.vi[:, rd:rd + nout] = (s + c).astype(np.int64).astype(np.int32)
            return
        c = w.vf[:, rc:rc + nout] if rc is not None else np.float32(c_const)
        with np.errstate(invalid="ignore", over="ignore"):
            w.vf[:, rd:rd + nout] = fx.add_to_f32(s, c)
    return run


def _scale_reader(code: int, byte: int, inst: Instruction) -> Callable:
    """Per-lane E8M0 scale factors (float64) from a VGPR or scalar operand."""
    shift = 8 * byte
    table = np.array([np.ldexp(1.0, e - 127) if e != 255 else np.nan for e in range(256)], np.float64)
    if code >= 256:
        r = code - 256
        return lambda w: table[(w.v[:, r] >> np.uint32(shift)) & np.uint32(0xFF)]
    rd = sreader(code, inst)
    # hardware reads bits [30:23] of a scalar/inline-constant scale operand, whatever opsel says
    return lambda w: np.full(64, table[(rd(w) >> 23) & 0xFF])
