"""The gfx950 (CDNA4, GFX9 family) instruction encodings as data, read by the generic decoder.

One :class:`Encoding` row per format: which bits of the first dword identify it, how many dwords it
has, its bit fields (written like AMD's ISA manual, ``name=w<dword>[hi:lo]``) and its opcode map (an
opcode range -> mnemonic table, Instruction.fmt and mnemonic suffix). Rows are matched in order, so a
format carved out of another's space (SOP1/SOPC/SOPP inside SOP2/SOPK, VOP1/VOPC inside VOP2) comes
first. What the decoder does beyond splitting fields is also described here, per row:

* ``literal_sources``: source fields whose code 255 means "a 32-bit literal follows";
* ``always_literal``: opcodes whose literal is unconditional (s_setreg_imm32_b32, v_fmamk/fmaak...);
* ``extensions``: src0 codes announcing an 8-byte form whose second dword has its own layout
  (VOP1/VOP2/VOPC with SDWA or DPP); the mnemonic then ends in ``_sdwa`` / ``_dpp``;
* ``fusions``: an instruction that with the next one forms a single longer instruction
  (v_mfma_ld_scale_b32 + a scaled MFMA = the 16-byte VOP3PX2 form).

Opcode numbers -> mnemonics live in :mod:`.opcodes`; what an instruction does lives in ``ops_*``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from . import opcodes as T

LITERAL = 255  # source operand code: a 32-bit literal follows the instruction
SDWA, DPP = 0xF9, 0xFA  # VOP1/VOP2/VOPC src0 codes announcing the 8-byte SDWA/DPP forms


@dataclass(frozen=True)
class Field:
    """Bits ``[lo, lo + width)`` of dword ``word``; the value is multiplied by ``scale`` (register
    pairs/quads counted in SGPRs) and sign-extended when ``signed``."""

    name: str
    word: int
    lo: int
    width: int
    scale: int = 1
    signed: bool = False

    def extract(self, words: tuple[int, ...]) -> int:
        v = (words[self.word] >> self.lo) & ((1 << self.width) - 1)
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v * self.scale


_FIELD = re.compile(r"(\w+)=w(\d)\[(\d+):(\d+)\](\*\d+)?(:signed)?$")


def layout(spec: str) -> tuple[Field, ...]:
    """``"src0=w0[8:0] op=w0[16:9] sbase=w0[5:0]*2 offset=w0[12:0]:signed"`` -> fields."""
    out = []
    for tok in spec.split():
        m = _FIELD.match(tok)
        if m is None:
            raise ValueError(f"bad field spec {tok!r}: expected name=w<dword>[hi:lo] with optional *scale, :signed")
        name, word, hi, lo, scale, signed = m.groups()
        out.append(Field(name, int(word), int(lo), int(hi) - int(lo) + 1, int(scale[1:]) if scale else 1,
                         bool(signed)))
    return tuple(out)


def bits(hi: int, lo: int, value: int) -> tuple[int, int]:
    """(mask, value) that pins bits ``[hi:lo]`` of the first dword to ``value``."""
    width = hi - lo + 1
    if value >> width:
        raise ValueError(f"value {value:#x} does not fit bits [{hi}:{lo}]")
    return ((1 << width) - 1) << lo, value << lo


def _pin(*pins: tuple[int, int]) -> tuple[int, int]:
    mask = value = 0
    for m, v in pins:
        mask, value = mask | m, value | v
    return mask, value


@dataclass(frozen=True)
class OpRange:
    """Opcodes ``first..last`` of an encoding name ``table[op - offset]`` + ``suffix``, with
    Instruction.fmt ``fmt``. Unnamed opcodes decode as ``<fmt>_op<op>`` (they fail when executed)."""

    first: int
    last: int
    table: Mapping[int, str]
    fmt: str
    suffix: str = ""
    offset: int = 0


@dataclass(frozen=True)
class Extension:
    """An 8-byte form announced by a src0 code: the second dword is ``ext_word``, split by ``fields``."""

    suffix: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Fusion:
    """Opcode ``op`` followed by an instruction of the same encoding whose opcode is in ``table`` is one
    instruction of format ``fmt``: the follower's ``keep`` fields, the leader's fields renamed by
    ``rename``, and ``op`` = the follower's opcode."""

    op: int
    table: Mapping[int, str]
    fmt: str
    keep: tuple[str, ...]
    rename: Mapping[str, str]


@dataclass(frozen=True)
class Encoding:
    name: str
    where: tuple[int, int]  # (mask, value) on the first dword
    words: int
    fields: tuple[Field, ...]
    opcodes: tuple[OpRange, ...]
    literal_sources: tuple[str, ...] = ()
    always_literal: frozenset[int] = frozenset()
    extensions: Mapping[int, Extension] = field(default_factory=dict)
    fusions: tuple[Fusion, ...] = ()


def _plain(table: Mapping[int, str], fmt: str, suffix: str = "") -> tuple[OpRange, ...]:
    return (OpRange(0, (1 << 10) - 1, table, fmt, suffix),)


# SDWA second dword (GFX9). For VOPC the destination bits name an SGPR pair instead (sd=1: sdst, else VCC).
SDWA_FIELDS = layout("sdwa_src0=w1[7:0] dst_sel=w1[10:8] dst_unused=w1[12:11] sdwa_clamp=w1[13:13] "
                     "sdwa_omod=w1[15:14] sdwa_sdst=w1[14:8] sdwa_sd=w1[15:15] src0_sel=w1[18:16] "
                     "src0_sext=w1[19:19] src0_neg=w1[20:20] src0_abs=w1[21:21] src0_sgpr=w1[23:23] "
                     "src1_sel=w1[26:24] src1_sext=w1[27:27] src1_neg=w1[28:28] src1_abs=w1[29:29] "
                     "src1_sgpr=w1[31:31]")
DPP_FIELDS = layout("dpp_src0=w1[7:0] dpp_ctrl=w1[16:8] bound_ctrl=w1[19:19] dpp_src0_neg=w1[20:20] "
                    "dpp_src0_abs=w1[21:21] dpp_src1_neg=w1[22:22] dpp_src1_abs=w1[23:23] bank_mask=w1[27:24] "
                    "row_mask=w1[31:28]")
_VOP_EXT = {SDWA: Extension("_sdwa", SDWA_FIELDS), DPP: Extension("_dpp", DPP_FIELDS)}

_VOP3_SRCS = "src0=w1[8:0] src1=w1[17:9] src2=w1[26:18]"
_VOP3P_FIELDS = layout(
    "vdst=w0[7:0] neg_hi=w0[10:8] opsel=w0[13:11] opsel_hi2=w0[14:14] clamp=w0[15:15] op=w0[22:16] "
    f"{_VOP3_SRCS} opsel_hi=w1[28:27] neg=w1[31:29] "
    # the MAI (MFMA) view of the same bits
    "cbsz=w0[10:8] abid=w0[14:11] acc_cd=w0[15:15] acc=w1[28:27] blgp=w1[31:29]")
_FLAT_FIELDS = ("lds=w0[13:13] seg=w0[15:14] sc0=w0[16:16] nt=w0[17:17] op=w0[24:18] sc1=w0[25:25] "
                "addr=w1[7:0] data=w1[15:8] saddr=w1[22:16] acc=w1[23:23] vdst=w1[31:24]")
# segment 0 (flat) has an unsigned 12-bit offset; scratch/global (and the reserved 3) a signed 13-bit one
_FLAT_UNSIGNED = layout("offset=w0[12:0] " + _FLAT_FIELDS)
_FLAT_SIGNED = layout("offset=w0[12:0]:signed " + _FLAT_FIELDS)

# VOP3 (64-bit VALU) carries VOPC at 0-255, VOP2 at 256-319, VOP1 at 320-447 and its own ops from 448;
# the VOP3B rows (a carry/condition SGPR destination in bits 14:8) come first.
_VOP3_OPS = (
    OpRange(256 + 25, 256 + 30, T.VOP2, "VOP3B", "_e64", 256),  # v_add_co_u32 ... v_subbrev_co_u32
    OpRange(480, 481, T.VOP3_ONLY, "VOP3B"),  # v_div_scale_f32/f64
    OpRange(488, 489, T.VOP3_ONLY, "VOP3B"),  # v_mad_u64_u32, v_mad_i64_i32
    OpRange(0, 255, T.VOPC, "VOP3C", "_e64"),
    OpRange(256, 319, T.VOP2, "VOP3", "_e64", 256),
    OpRange(320, 447, T.VOP1, "VOP3", "_e64", 320),
    OpRange(448, 1023, T.VOP3_ONLY, "VOP3"),
)

ENCODINGS: tuple[Encoding, ...] = (
    # --- scalar ALU (10...): SOP1/SOPC/SOPP are carved out of SOPK/SOP2
    Encoding("SOP1", bits(31, 23, 0b101111101), 1, layout("ssrc0=w0[7:0] op=w0[15:8] sdst=w0[22:16]"),
             _plain(T.SOP1, "SOP1"), literal_sources=("ssrc0",)),
    Encoding("SOPC", bits(31, 23, 0b101111110), 1, layout("ssrc0=w0[7:0] ssrc1=w0[15:8] op=w0[22:16]"),
             _plain(T.SOPC, "SOPC"), literal_sources=("ssrc0", "ssrc1")),
    Encoding("SOPP", bits(31, 23, 0b101111111), 1, layout("simm16=w0[15:0] op=w0[22:16]"), _plain(T.SOPP, "SOPP")),
    Encoding("SOPK", bits(31, 28, 0b1011), 1, layout("simm16=w0[15:0] sdst=w0[22:16] op=w0[27:23]"),
             _plain(T.SOPK, "SOPK"), always_literal=frozenset({20})),  # s_setreg_imm32_b32
    Encoding("SOP2", bits(31, 30, 0b10), 1, layout("ssrc0=w0[7:0] ssrc1=w0[15:8] sdst=w0[22:16] op=w0[29:23]"),
             _plain(T.SOP2, "SOP2"), literal_sources=("ssrc0", "ssrc1")),
    # --- vector ALU, 32-bit (bit 31 clear): VOP1/VOPC are carved out of VOP2
    Encoding("VOP1", bits(31, 25, 0b0111111), 1, layout("src0=w0[8:0] op=w0[16:9] vdst=w0[24:17]"),
             _plain(T.VOP1, "VOP1", "_e32"), literal_sources=("src0",), extensions=_VOP_EXT),
    Encoding("VOPC", bits(31, 25, 0b0111110), 1, layout("src0=w0[8:0] vsrc1=w0[16:9] op=w0[24:17]"),
             _plain(T.VOPC, "VOPC", "_e32"), literal_sources=("src0",), extensions=_VOP_EXT),
    Encoding("VOP2", bits(31, 31, 0), 1, layout("src0=w0[8:0] vsrc1=w0[16:9] vdst=w0[24:17] op=w0[30:25]"),
             _plain(T.VOP2, "VOP2", "_e32"), literal_sources=("src0",), extensions=_VOP_EXT,
             # v_fmamk_f32, v_fmaak_f32, v_madmk_f16, v_madak_f16: the K constant always follows
             always_literal=frozenset({23, 24, 36, 37})),
    # --- vector ALU, 64-bit: VOP3P (incl. MAI) is carved out of VOP3
    Encoding("VOP3P", bits(31, 23, 0b110100111), 2, _VOP3P_FIELDS, _plain(T.VOP3P, "VOP3P"),
             literal_sources=("src0", "src1", "src2"),
             fusions=(Fusion(44, T.VOP3PX2, "VOP3PX2",  # v_mfma_ld_scale_b32 + v_mfma_scale_*
                             keep=("vdst", "cbsz", "abid", "acc_cd", "src0", "src1", "src2", "acc", "blgp"),
                             rename={"src0": "scale_src0", "src1": "scale_src1", "opsel": "scale_opsel",
                                     "opsel_hi": "scale_opsel_hi"}),)),
    Encoding("VOP3", bits(31, 26, 0b110100), 2,
             layout("vdst=w0[7:0] abs=w0[10:8] opsel=w0[14:11] sdst=w0[14:8] clamp=w0[15:15] op=w0[25:16] "
                    f"{_VOP3_SRCS} omod=w1[28:27] neg=w1[31:29]"),
             _VOP3_OPS, literal_sources=("src0", "src1", "src2")),
    # --- memory
    Encoding("SMEM", bits(31, 26, 0b110000), 2,
             layout("sbase=w0[5:0]*2 sdata=w0[12:6] soffset_en=w0[14:14] nv=w0[15:15] glc=w0[16:16] imm=w0[17:17] "
                    "op=w0[25:18] offset=w1[20:0] soffset=w1[31:25]"), _plain(T.SMEM, "SMEM")),
    Encoding("DS", bits(31, 26, 0b110110), 2,
             layout("offset0=w0[7:0] offset1=w0[15:8] gds=w0[16:16] op=w0[24:17] acc=w0[25:25] addr=w1[7:0] "
                    "data0=w1[15:8] data1=w1[23:16] vdst=w1[31:24]"), _plain(T.DS, "DS")),
    Encoding("FLAT", _pin(bits(31, 26, 0b110111), bits(15, 14, 0)), 2, _FLAT_UNSIGNED, _plain(T.FLAT, "FLAT")),
    Encoding("SCRATCH", _pin(bits(31, 26, 0b110111), bits(15, 14, 1)), 2, _FLAT_SIGNED, _plain(T.SCRATCH, "SCRATCH")),
    Encoding("GLOBAL", _pin(bits(31, 26, 0b110111), bits(15, 14, 2)), 2, _FLAT_SIGNED, _plain(T.GLOBAL, "GLOBAL")),
    Encoding("FLAT_SEG3", _pin(bits(31, 26, 0b110111), bits(15, 14, 3)), 2, _FLAT_SIGNED, _plain({}, "FLAT")),
    Encoding("MUBUF", bits(31, 26, 0b111000), 2,
             layout("offset=w0[11:0] offen=w0[12:12] idxen=w0[13:13] sc0=w0[14:14] sc1=w0[15:15] lds=w0[16:16] "
                    "nt=w0[17:17] op=w0[24:18] vaddr=w1[7:0] vdata=w1[15:8] srsrc=w1[20:16]*4 acc=w1[23:23] "
                    "soffset=w1[31:24]"), _plain(T.MUBUF, "MUBUF")),
)


def opcode_field(enc: Encoding) -> Field:
    """The ``op`` field of an encoding (every row has one)."""
    return next(f for f in enc.fields if f.name == "op")
