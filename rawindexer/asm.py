"""Reading the assembly listing that the build writes beside the code object (same compile).

Used by the static checks and by the profile: split the listing per kernel, find the steady-state
loop (the innermost loop that issues MFMAs), and classify its instructions.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_LABEL = re.compile(r"^(\.LBB\d+_\d+):")
_BRANCH = re.compile(r"^\s+s_(?:cbranch_\w+|branch)\s+(\.LBB\d+_\d+)")
_INSN = re.compile(r"^\s+([a-z][a-z0-9_]*)\b(.*)$")


def split_functions(asm: str) -> dict[str, list[str]]:
    """{kernel symbol: its lines, from its label to .Lfunc_end}."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_][\w]*):", line)
        if m and not line.startswith("."):
            current = out.setdefault(m.group(1), [])
            continue
        if current is not None:
            if line.startswith(".Lfunc_end"):
                current = None
                continue
            current.append(line)
    return out


@dataclass(frozen=True)
class Insn:
    mnemonic: str
    operands: str

    @property
    def klass(self) -> str:
        return classify(self.mnemonic)


def instructions(lines: list[str]) -> list[Insn]:
    out = []
    for line in lines:
        line = line.split(";")[0].rstrip()
        m = _INSN.match(line)
        if m and not m.group(1).startswith("."):
            out.append(Insn(m.group(1), m.group(2).strip()))
    return out


def classify(mnemonic: str) -> str:
    if "mfma" in mnemonic:
        return "MFMA"
    if mnemonic.startswith(("s_waitcnt", "s_nop")):
        return "wait"
    if mnemonic.startswith(("s_cbranch", "s_branch", "s_setpc", "s_swappc", "s_endpgm")):
        return "branch"
    if mnemonic.startswith(("s_load", "s_buffer_load", "s_store")):
        return "SMEM"
    if mnemonic.startswith("s_"):
        return "SALU"
    if mnemonic.startswith(("global_", "buffer_", "flat_", "scratch_")):
        return "VMEM"
    if mnemonic.startswith("ds_"):
        return "LDS"
    if mnemonic.startswith("v_"):
        return "VALU"
    return "other"


def steady_state_loop(lines: list[str]) -> list[str]:
    """Lines of the innermost loop (a label with a later branch back to it) that contains an MFMA."""
    labels: dict[str, int] = {}
    loops: list[tuple[int, int]] = []
    for idx, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = idx
        b = _BRANCH.match(line)
        if b and b.group(1) in labels:
            loops.append((labels[b.group(1)], idx))
    with_mfma = [(a, b) for a, b in loops if any("mfma" in ln for ln in lines[a : b + 1])]
    if not with_mfma:
        raise ValueError("no loop containing an MFMA")
    a, b = min(with_mfma, key=lambda ab: ab[1] - ab[0])
    return lines[a : b + 1]


def wait_states(insns: list[Insn]) -> int:
    """s_nop N stalls N+1 cycles: the hazard padding the compiler (or inline asm) inserted."""
    total = 0
    for insn in insns:
        if insn.mnemonic == "s_nop":
            total += int(insn.operands.split()[0], 0) + 1
    return total


def mix(insns: list[Insn]) -> Counter:
    return Counter(i.klass for i in insns)
