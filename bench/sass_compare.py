"""Compare the SASS of two sm_90a cubins per kernel, up to register names and code addresses.

    python bench/sass_compare.py OLD.cubin NEW.cubin [--filter REGEX] [--context N]

Why: a source refactor of an H200-measured kernel (e.g. a shared device function replacing a duplicated loop) must
leave the shipped instruction stream alone when no device time is left to re-measure it. Two builds are taken as
equal when every kernel has the same sequence of instructions, opcode and operand shape, after normalising what a
harmless change may move: register numbers (R, UR, P, UP; a swap of registers is accepted), branch / call targets
and the address and encoding columns. Everything else (immediates, shared / constant offsets, modifiers, predicates'
polarity, instruction order and count) must match.

Prints one line per kernel the filter selects (identical / differs, with the first differing instruction of each
side) and exits 1 when any differs or a kernel is missing from one side. cuobjdump is the one shipped with Triton's
NVIDIA backend unless CUOBJDUMP names another.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_NORMALISE = (
    (re.compile(r"\bUR\d+\b"), "UR"),
    (re.compile(r"\bR\d+\b"), "R"),
    (re.compile(r"\bUP\d\b"), "UP"),
    (re.compile(r"\bP\d\b"), "P"),
    # code addresses: the targets of branches, calls, convergence barriers and the like
    (re.compile(r"^((?:@!?U?P[T\w]*\s+)?(?:BRA|BRX|JMP|JMX|CALL\.\w+|CALL|BSSY|BREAK|BSYNC|SSY|PBK|PCNT|WARPSYNC|"
                r"BMOV|RET\.\w+(?:\.\w+)*|RET|EXIT|BPT|CALL\.ABS\.NOINC)\b[^;]*?)0x[0-9a-f]+"), r"\1ADDR"),
)


def cuobjdump() -> str:
    """The cuobjdump to use: $CUOBJDUMP, Triton's bundled copy, or the one on PATH."""
    if os.environ.get("CUOBJDUMP"):
        return os.environ["CUOBJDUMP"]
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("cuobjdump")
    if not found:
        sys.exit("sass_compare: no cuobjdump (set CUOBJDUMP, install triton, or put the CUDA toolkit on PATH)")
    return found


def normalise(instr: str) -> str:
    """One instruction with register numbers and code addresses replaced by placeholders."""
    for pattern, repl in _NORMALISE:
        instr = pattern.sub(repl, instr)
    return re.sub(r"\s+", " ", instr)


def kernels(cubin: Path) -> dict[str, list[tuple[str, str]]]:
    """Kernel name -> [(raw instruction, normalised instruction)] in address order (NOP padding after the last EXIT
    / BRA kept: it is part of the count either way)."""
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    out: dict[str, list[tuple[str, str]]] = {}
    cur: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = _INSTR.match(line)
        if m and cur is not None:
            cur.append((m.group(1), normalise(m.group(1))))
    return out


def first_difference(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> int | None:
    """Index of the first instruction whose normalised form differs (len of the shorter on a pure prefix), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x[1] != y[1]:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--filter", default="", help="regex on kernel names (re.search); default: every kernel")
    p.add_argument("--context", type=int, default=2, help="instructions shown before the first difference")
    a = p.parse_args(argv)
    old, new = kernels(a.old), kernels(a.new)
    sel = re.compile(a.filter)
    names = sorted(n for n in set(old) | set(new) if sel.search(n))
    bad = 0
    for name in names:
        if name not in old or name not in new:
            print(f"MISSING   {name}: only in {'old' if name in old else 'new'}")
            bad += 1
            continue
        i = first_difference(old[name], new[name])
        if i is None:
            print(f"identical {name} ({len(old[name])} instructions)")
            continue
        bad += 1
        print(f"DIFFERS   {name} ({len(old[name])} -> {len(new[name])} instructions), first at #{i}:")
        for j in range(max(0, i - a.context), i):
            print(f"    same  {old[name][j][0]}")
        print(f"    old   {old[name][i][0] if i < len(old[name]) else '<end>'}")
        print(f"    new   {new[name][i][0] if i < len(new[name]) else '<end>'}")
    print(f"{len(names) - bad}/{len(names)} kernels identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
