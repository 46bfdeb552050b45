"""Compare the decoder with an assembly listing of the same compile (clang ``-save-temps``).

There is no gfx950 disassembler on the build machines; the listing clang writes next to the code
object is the ground truth for mnemonics, so the decoder is checked instruction by instruction.
"""
from __future__ import annotations

import re

from ..codeobject import CodeObject
from .decoder import decode

_LABEL = re.compile(r"^([A-Za-z_][\w.$]*):")


def parse_listing(text: str) -> dict[str, list[str]]:
    """function symbol -> mnemonics of its instructions, in order."""
    return {name: [m for m in items if isinstance(m, str)] for name, items in _parse(text).items()}


def _parse(text: str) -> dict[str, list]:
    """function symbol -> mnemonics, with ``.p2align N`` inside a function kept as the int ``N`` (the
    assembler pads to it with ``s_nop`` that the listing does not show; Triton aligns loop heads)."""
    funcs: dict[str, list] = {}
    cur = None
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        if line.startswith(".Lfunc_end"):
            cur = None
            continue
        if cur is None or not line.startswith("\t"):
            continue
        tok = line.split()
        if len(tok) >= 2 and tok[0] == ".p2align":
            funcs[cur].append(int(tok[1].rstrip(",")))
        elif tok and not tok[0].startswith((".", ";")):
            funcs[cur].append(tok[0])
    return funcs


def _same(decoded: str, listed: str) -> bool:
    # LLVM prints _e32/_e64 only for opcodes that have both encodings; compare without it otherwise
    return decoded == listed or re.sub(r"_e(32|64)$", "", decoded) == listed


def compare_with_listing(code: CodeObject, listing: str, kernels: list[str] | None = None) -> list[str]:
    """Mismatches (empty when the decoder agrees with the listing for every kernel)."""
    funcs = _parse(listing)
    problems = []
    for name in kernels or sorted(code.kernels):
        addr, text = code.code(name)
        insts = decode(text, addr)
        items = funcs.get(name)
        if items is None:
            problems.append(f"{name}: not in the listing")
            continue
        k = 0
        for e in items:
            if isinstance(e, int):  # alignment padding: s_nop fill up to the next 2**e boundary
                while k < len(insts) and insts[k].address % (1 << e) and insts[k].name == "s_nop":
                    k += 1
                continue
            if k >= len(insts):
                problems.append(f"{name}: decoded {len(insts)} instructions, the listing has more")
                break
            inst = insts[k]
            if not _same(inst.name, e):
                problems.append(f"{name}: instruction {k} at 0x{inst.address:x} decoded {inst.name!r}, listing says "
                                f"{e!r} [{inst.encoding}]")
                break
            k += 1
        else:
            if k != len(insts):
                problems.append(f"{name}: decoded {len(insts)} instructions, the listing has "
                                f"{sum(isinstance(e, str) for e in items)} (plus alignment padding)")
    return problems
