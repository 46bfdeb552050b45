"""Decode gfx950 machine code into :class:`Instruction` records (one per PC).

The decoder only splits words into fields and names the opcode; what an instruction does lives in
the ``ops_*`` modules. Words that match no known encoding decode to an ``Instruction`` whose
``fmt`` is ``"UNKNOWN"``: the executor raises on it, naming address and encoding, so a code object
with data or unsupported encodings after the last reachable instruction still loads.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import opcodes as T

LITERAL = 255  # source operand code: a 32-bit literal follows the instruction
SDWA, DPP = 0xF9, 0xFA  # VOP1/VOP2/VOPC src0 codes announcing the 8-byte SDWA/DPP forms


@dataclass
class Instruction:
    """One decoded instruction. ``fields`` holds the raw bit fields of its encoding."""

    address: int
    size: int
    words: tuple[int, ...]
    fmt: str
    op: int
    name: str
    fields: dict = field(default_factory=dict)
    literal: int | None = None

    @property
    def encoding(self) -> str:
        return " ".join(f"{w:08x}" for w in self.words)

    def __str__(self) -> str:
        return f"0x{self.address:x}: {self.name} [{self.encoding}]"


def _bits(w: int, lo: int, n: int) -> int:
    return (w >> lo) & ((1 << n) - 1)


def _literal(buf: bytes, off: int, nbytes: int, *srcs: int) -> tuple[int | None, int]:
    """Read the trailing 32-bit literal when any source uses it."""
    if LITERAL in srcs and off + nbytes + 4 <= len(buf):
        return struct.unpack_from("<I", buf, off + nbytes)[0], nbytes + 4
    return None, nbytes


def decode_one(buf: bytes, off: int, address: int) -> Instruction:
    """Decode the instruction at ``buf[off:]`` (which sits at virtual ``address``)."""
    w0 = struct.unpack_from("<I", buf, off)[0]
    w1 = struct.unpack_from("<I", buf, off + 4)[0] if off + 8 <= len(buf) else 0

    def make(fmt, op, table, size, fields, literal=None, name=None):
        nm = name or table.get(op) or f"{fmt.lower()}_op{op}"
        words = struct.unpack_from(f"<{size // 4}I", buf, off)
        return Instruction(address, size, words, fmt, op, nm, fields, literal)

    top9 = w0 >> 23
    # --- scalar ALU: 10xx...; SOP1/SOPC/SOPP are carved out of the SOP2/SOPK space
    if w0 >> 30 == 0b10:
        if top9 == 0b101111101:
            f = dict(ssrc0=_bits(w0, 0, 8), op=_bits(w0, 8, 8), sdst=_bits(w0, 16, 7))
            lit, size = _literal(buf, off, 4, f["ssrc0"])
            return make("SOP1", f["op"], T.SOP1, size, f, lit)
        if top9 == 0b101111110:
            f = dict(ssrc0=_bits(w0, 0, 8), ssrc1=_bits(w0, 8, 8), op=_bits(w0, 16, 7))
            lit, size = _literal(buf, off, 4, f["ssrc0"], f["ssrc1"])
            return make("SOPC", f["op"], T.SOPC, size, f, lit)
        if top9 == 0b101111111:
            f = dict(simm16=_bits(w0, 0, 16), op=_bits(w0, 16, 7))
            return make("SOPP", f["op"], T.SOPP, 4, f)
        if w0 >> 28 == 0b1011:
            f = dict(simm16=_bits(w0, 0, 16), sdst=_bits(w0, 16, 7), op=_bits(w0, 23, 5))
            size, lit = 4, None
            if f["op"] == 20:  # s_setreg_imm32_b32 carries a literal
                lit, size = struct.unpack_from("<I", buf, off + 4)[0], 8
            return make("SOPK", f["op"], T.SOPK, size, f, lit)
        f = dict(ssrc0=_bits(w0, 0, 8), ssrc1=_bits(w0, 8, 8), sdst=_bits(w0, 16, 7), op=_bits(w0, 23, 7))
        lit, size = _literal(buf, off, 4, f["ssrc0"], f["ssrc1"])
        return make("SOP2", f["op"], T.SOP2, size, f, lit)

    # --- vector ALU, 32-bit encodings (bit 31 clear)
    if w0 >> 31 == 0:
        if w0 >> 25 == 0b0111111:
            f = dict(src0=_bits(w0, 0, 9), op=_bits(w0, 9, 8), vdst=_bits(w0, 17, 8))
            fmt, table, op = "VOP1", T.VOP1, f["op"]
        elif w0 >> 25 == 0b0111110:
            f = dict(src0=_bits(w0, 0, 9), vsrc1=_bits(w0, 9, 8), op=_bits(w0, 17, 8))
            fmt, table, op = "VOPC", T.VOPC, f["op"]
        else:
            f = dict(src0=_bits(w0, 0, 9), vsrc1=_bits(w0, 9, 8), vdst=_bits(w0, 17, 8), op=_bits(w0, 25, 6))
            fmt, table, op = "VOP2", T.VOP2, f["op"]
        base = table.get(op)
        if f["src0"] in (SDWA, DPP):
            f["ext"] = "sdwa" if f["src0"] == SDWA else "dpp"
            f["ext_word"] = w1
            return make(fmt, op, table, 8, f, name=f"{base}_{f['ext']}" if base else None)
        lit, size = _literal(buf, off, 4, f["src0"])
        if fmt == "VOP2" and op in (23, 24, 36, 37):  # fmamk/fmaak/madmk/madak: K literal always present
            lit, size = struct.unpack_from("<I", buf, off + 4)[0], 8
        return make(fmt, op, table, size, f, lit, name=f"{base}_e32" if base else None)

    enc6 = w0 >> 26
    # --- VOP3P (incl. MAI) 110100111, VOP3A/B 110100xxx
    if top9 == 0b110100111:
        op = _bits(w0, 16, 7)
        f = dict(vdst=_bits(w0, 0, 8), neg_hi=_bits(w0, 8, 3), opsel=_bits(w0, 11, 3), opsel_hi2=_bits(w0, 14, 1),
                 clamp=_bits(w0, 15, 1), op=op, src0=_bits(w1, 0, 9), src1=_bits(w1, 9, 9), src2=_bits(w1, 18, 9),
                 opsel_hi=_bits(w1, 27, 2), neg=_bits(w1, 29, 3),
                 # MAI view of the same bits
                 cbsz=_bits(w0, 8, 3), abid=_bits(w0, 11, 4), acc_cd=_bits(w0, 15, 1), acc=_bits(w1, 27, 2),
                 blgp=_bits(w1, 29, 3))
        name = T.VOP3P.get(op)
        if op == 44 and off + 16 <= len(buf):
            # v_mfma_ld_scale_b32 followed by a scaled MFMA makes one 16-byte instruction. Only when the
            # next word really is a VOP3P MFMA with a scaled form (high half 0xd3ac.. is the ld_scale
            # itself, so check the next word's own high half).
            w2, w3 = struct.unpack_from("<II", buf, off + 8)
            op2 = _bits(w2, 16, 7)
            if w2 >> 23 == 0b110100111 and op2 in T.VOP3PX2:
                f2 = dict(vdst=_bits(w2, 0, 8), cbsz=_bits(w2, 8, 3), abid=_bits(w2, 11, 4),
                          acc_cd=_bits(w2, 15, 1), src0=_bits(w3, 0, 9), src1=_bits(w3, 9, 9),
                          src2=_bits(w3, 18, 9), acc=_bits(w3, 27, 2), blgp=_bits(w3, 29, 3))
                f = dict(f2, op=op2, scale_src0=f["src0"], scale_src1=f["src1"],
                         scale_opsel=f["opsel"], scale_opsel_hi=f["opsel_hi"])
                return make("VOP3PX2", op2, T.VOP3PX2, 16, f)
        lit, size = _literal(buf, off, 8, f["src0"], f["src1"], f["src2"])
        return make("VOP3P", op, T.VOP3P, size, f, lit, name=name)
    if enc6 == 0b110100:
        op = _bits(w0, 16, 10)
        f = dict(vdst=_bits(w0, 0, 8), abs=_bits(w0, 8, 3), opsel=_bits(w0, 11, 4), sdst=_bits(w0, 8, 7),
                 clamp=_bits(w0, 15, 1), op=op, src0=_bits(w1, 0, 9), src1=_bits(w1, 9, 9), src2=_bits(w1, 18, 9),
                 omod=_bits(w1, 27, 2), neg=_bits(w1, 29, 3))
        if op < 256:
            base, fmt = T.VOPC.get(op), "VOP3C"
        elif op < 320:
            base, fmt = T.VOP2.get(op - 256), "VOP3"
        elif op < 448:
            base, fmt = T.VOP1.get(op - 320), "VOP3"
        else:
            base, fmt = T.VOP3_ONLY.get(op), "VOP3"
        if op in T.VOP3B_OPS:
            fmt = "VOP3B"
        name = None
        if base:
            name = base + "_e64" if op < 448 else base
        lit, size = _literal(buf, off, 8, f["src0"], f["src1"], f["src2"])
        return make(fmt, op, {}, size, f, lit, name=name)

    # --- scalar memory (GFX9 SMEM: 110000)
    if enc6 == 0b110000:
        f = dict(sbase=_bits(w0, 0, 6) * 2, sdata=_bits(w0, 6, 7), soffset_en=_bits(w0, 14, 1), nv=_bits(w0, 15, 1),
                 glc=_bits(w0, 16, 1), imm=_bits(w0, 17, 1), op=_bits(w0, 18, 8),
                 offset=_bits(w1, 0, 21), soffset=_bits(w1, 25, 7))
        return make("SMEM", f["op"], T.SMEM, 8, f)
    # --- LDS (110110)
    if enc6 == 0b110110:
        f = dict(offset0=_bits(w0, 0, 8), offset1=_bits(w0, 8, 8), gds=_bits(w0, 16, 1), op=_bits(w0, 17, 8),
                 acc=_bits(w0, 25, 1), addr=_bits(w1, 0, 8), data0=_bits(w1, 8, 8), data1=_bits(w1, 16, 8),
                 vdst=_bits(w1, 24, 8))
        return make("DS", f["op"], T.DS, 8, f)
    # --- FLAT / GLOBAL / SCRATCH (110111)
    if enc6 == 0b110111:
        seg = _bits(w0, 14, 2)
        off13 = _bits(w0, 0, 13)
        f = dict(offset=off13 - (1 << 13) if (seg and off13 >> 12) else off13, lds=_bits(w0, 13, 1), seg=seg,
                 sc0=_bits(w0, 16, 1), nt=_bits(w0, 17, 1), op=_bits(w0, 18, 7), sc1=_bits(w0, 25, 1),
                 addr=_bits(w1, 0, 8), data=_bits(w1, 8, 8), saddr=_bits(w1, 16, 7), acc=_bits(w1, 23, 1),
                 vdst=_bits(w1, 24, 8))
        fmt, table = {0: ("FLAT", T.FLAT), 1: ("SCRATCH", T.SCRATCH), 2: ("GLOBAL", T.GLOBAL)}.get(seg, ("FLAT", {}))
        return make(fmt, f["op"], table, 8, f)
    # --- MUBUF (111000)
    if enc6 == 0b111000:
        f = dict(offset=_bits(w0, 0, 12), offen=_bits(w0, 12, 1), idxen=_bits(w0, 13, 1), sc0=_bits(w0, 14, 1),
                 sc1=_bits(w0, 15, 1), lds=_bits(w0, 16, 1), nt=_bits(w0, 17, 1), op=_bits(w0, 18, 7),
                 vaddr=_bits(w1, 0, 8), vdata=_bits(w1, 8, 8), srsrc=_bits(w1, 16, 5) * 4, acc=_bits(w1, 23, 1),
                 soffset=_bits(w1, 24, 8))
        return make("MUBUF", f["op"], T.MUBUF, 8, f)
    return Instruction(address, 4, (w0,), "UNKNOWN", -1, "<unknown>", {})


def decode(code: bytes, base_address: int) -> list[Instruction]:
    """Linear sweep of ``code`` (loaded at ``base_address``) into instructions."""
    out: list[Instruction] = []
    off = 0
    while off + 4 <= len(code):
        inst = decode_one(code, off, base_address + off)
        out.append(inst)
        off += inst.size
    return out
