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
    funcs: dict[str, list[str]] = {}
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
        if tok and not tok[0].startswith((".", ";")):
            funcs[cur].append(tok[0])
    return funcs


def _same(decoded: str, listed: str) -> bool:
    # LLVM prints _e32/_e64 only for opcodes that have both encodings; compare without it otherwise
    return decoded == listed or re.sub(r"_e(32|64)$", "", decoded) == listed


def compare_with_listing(code: CodeObject, listing: str, kernels: list[str] | None = None) -> list[str]:
    """Mismatches (empty when the decoder agrees with the listing for every kernel)."""
    funcs = parse_listing(listing)
    problems = []
    for name in kernels or sorted(code.kernels):
        addr, text = code.code(name)
        got = [i.name for i in decode(text, addr)]
        exp = funcs.get(name)
        if exp is None:
            problems.append(f"{name}: not in the listing")
            continue
        for k, (g, e) in enumerate(zip(got, exp)):
            if not _same(g, e):
                inst = decode(text, addr)[k]
                problems.append(f"{name}: instruction {k} at 0x{inst.address:x} decoded {g!r}, listing says {e!r} "
                                f"[{inst.encoding}]")
                break
        else:
            if len(got) != len(exp):
                problems.append(f"{name}: decoded {len(got)} instructions, listing has {len(exp)}")
    return problems
