"""Decode gfx950 machine code into :class:`Instruction` records (one per PC).

One generic decoder reads the encoding tables of :mod:`.encodings` (which bits identify a format,
its bit fields, its opcode map, literals, SDWA/DPP extensions, fused pairs); it knows no format by
name. What an instruction does lives in the ``ops_*`` modules. Words that match no encoding decode to
an ``Instruction`` whose ``fmt`` is ``"UNKNOWN"``: the executor raises on it, naming address and
encoding, so a code object with data or unsupported encodings after the last reachable instruction
still loads.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .encodings import DPP, ENCODINGS, LITERAL, SDWA, Encoding, Field, opcode_field

__all__ = ["DPP", "LITERAL", "SDWA", "Instruction", "decode", "decode_one"]


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


class _Compiled:
    """An :class:`Encoding` row prepared for decoding: field extractors as tuples and the opcode map
    expanded to every opcode value, ``op -> (fmt, mnemonic without suffix or None, suffix)``."""

    def __init__(self, enc: Encoding) -> None:
        self.enc = enc
        self.mask, self.value = enc.where
        self.size = 4 * enc.words
        self.fields = _extractors(enc.fields)
        opf = opcode_field(enc)
        self.op_word, self.op_lo, self.op_mask = opf.word, opf.lo, (1 << opf.width) - 1
        self.opmap: dict[int, tuple[str, str | None, str]] = {}
        for op in range(1 << opf.width):
            for r in enc.opcodes:
                if r.first <= op <= r.last:
                    self.opmap[op] = (r.fmt, r.table.get(op - r.offset), r.suffix)
                    break
            else:
                raise ValueError(f"{enc.name}: opcode {op} is in no opcode range")
        self.literal_sources = enc.literal_sources
        self.extensions = {code: (ext.suffix, _extractors(ext.fields)) for code, ext in enc.extensions.items()}
        self.fusions = {fu.op: fu for fu in enc.fusions}


def _extractors(fields: tuple[Field, ...]) -> tuple[tuple, ...]:
    return tuple((f.name, f.word, f.lo, (1 << f.width) - 1, f.scale, (1 << (f.width - 1)) if f.signed else 0)
                 for f in fields)


def _split(extractors: tuple[tuple, ...], words: tuple[int, ...]) -> dict:
    out = {}
    for name, word, lo, mask, scale, sign in extractors:
        v = (words[word] >> lo) & mask
        if sign and v & sign:
            v -= sign << 1
        out[name] = v * scale
    return out


_ROWS = tuple(_Compiled(e) for e in ENCODINGS)
_TOP9 = 0x1FF << 23


def _fits_top9(row: _Compiled, top9: int) -> bool:
    """Whether a first dword whose bits 31:23 are ``top9`` can match ``row`` (its other bits decide)."""
    pinned = row.mask & _TOP9
    return (top9 << 23) & pinned == row.value & pinned


# candidate rows (in table order) per value of bits 31:23, so a lookup tries one or a few rows
_BY_TOP9 = tuple(tuple(r for r in _ROWS if _fits_top9(r, top9)) for top9 in range(512))


def _row(w0: int) -> _Compiled | None:
    for r in _BY_TOP9[w0 >> 23]:
        if w0 & r.mask == r.value:
            return r
    return None


def decode_one(buf: bytes, off: int, address: int) -> Instruction:
    """Decode the instruction at ``buf[off:]`` (which sits at virtual ``address``)."""
    w0 = struct.unpack_from("<I", buf, off)[0]
    row = _row(w0)
    if row is None:
        return Instruction(address, 4, (w0,), "UNKNOWN", -1, "<unknown>", {})
    w1 = struct.unpack_from("<I", buf, off + 4)[0] if off + 8 <= len(buf) else 0
    pair = (w0, w1)
    f = _split(row.fields, pair)
    op = (pair[row.op_word] >> row.op_lo) & row.op_mask
    fmt, base, suffix = row.opmap[op]
    size, literal = row.size, None

    ext = row.extensions.get(f.get("src0")) if row.extensions else None
    if ext is not None:
        suffix, ext_fields = ext
        f["ext"], f["ext_word"] = suffix[1:], w1
        f.update(_split(ext_fields, pair))
        size = 8
    elif op in row.enc.always_literal:
        literal, size = struct.unpack_from("<I", buf, off + size)[0], size + 4
    elif any(f[s] == LITERAL for s in row.literal_sources) and off + size + 4 <= len(buf):
        literal, size = struct.unpack_from("<I", buf, off + size)[0], size + 4

    fusion = row.fusions.get(op) if row.fusions else None
    if fusion is not None and off + 2 * size <= len(buf):
        fused = _fuse(row, fusion, f, buf, off + size)
        if fused is not None:
            op, f = fused
            fmt, base, suffix, size = fusion.fmt, fusion.table[op], "", 2 * size

    name = base + suffix if base else f"{fmt.lower()}_op{op}"
    words = struct.unpack_from(f"<{size // 4}I", buf, off)
    return Instruction(address, size, words, fmt, op, name, f, literal)


def _fuse(row: _Compiled, fusion, lead: dict, buf: bytes, off: int) -> tuple[int, dict] | None:
    """(opcode, fields) of the fused instruction when the next one (at ``off``) completes it."""
    nxt = struct.unpack_from("<II", buf, off)
    if nxt[0] & row.mask != row.value:
        return None
    op2 = (nxt[row.op_word] >> row.op_lo) & row.op_mask
    if op2 not in fusion.table:
        return None
    f2 = _split(row.fields, nxt)
    f = {k: f2[k] for k in fusion.keep}
    f["op"] = op2
    f.update({new: lead[old] for old, new in fusion.rename.items()})
    return op2, f


def decode(code: bytes, base_address: int) -> list[Instruction]:
    """Linear sweep of ``code`` (loaded at ``base_address``) into instructions."""
    out: list[Instruction] = []
    off = 0
    while off + 4 <= len(code):
        inst = decode_one(code, off, base_address + off)
        out.append(inst)
        off += inst.size
    return out
