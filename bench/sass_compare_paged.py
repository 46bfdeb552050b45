"""Compare the SASS of two cubins function by function (a refactor's check that the shipped kernels did not change).

    python bench/sass_compare_paged.py REF.cubin NEW.cubin [--show N]

Per function of either cubin: `identical` (the cuobjdump -sass text byte for byte), `renumbered` (the same opcode
sequence and operands once registers R/UR/P/UP are renumbered in order of first use), or `DIFFERENT` (count or order
of instructions), or missing on one side. Exit status 0 only if every function is identical or renumbered.
cuobjdump comes from Triton's bundled NVIDIA tools (the toolkit from PyPI ships none).
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys

_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?\s*/\*")
_REG = re.compile(r"\b(UR|R|UP|P)(\d+)\b")


def cuobjdump() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def sass_by_function(cubin: str) -> dict[str, list[str]]:
    """{function name: its SASS text lines as cuobjdump -sass prints them}."""
    text = subprocess.run([cuobjdump(), "-sass", cubin], check=True, capture_output=True, text=True).stdout
    out: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def instructions(lines: list[str]) -> list[str]:
    """The instructions (no addresses, no encodings), registers renumbered by first use per register class."""
    maps: dict[str, dict[str, int]] = {}

    def renumber(m: re.Match) -> str:
        cls = maps.setdefault(m.group(1), {})
        return f"{m.group(1)}{cls.setdefault(m.group(2), len(cls))}"

    res = []
    for line in lines:
        m = _INSTR.search(line)
        if m:
            # RZ/URZ/PT are not matched (no digits); SR_ special registers are kept as they are
            res.append(_REG.sub(renumber, m.group(1)))
    return res


def main(argv: list[str]) -> int:
    show = int(argv[argv.index("--show") + 1]) if "--show" in argv else 0
    paths = [a for a in argv if not a.startswith("--") and not a.isdigit()]
    if len(paths) != 2:
        print(__doc__)
        return 2
    ref, new = sass_by_function(paths[0]), sass_by_function(paths[1])
    counts = {"identical": 0, "renumbered": 0, "DIFFERENT": 0, "missing": 0}
    for name in sorted(set(ref) | set(new)):
        if name not in ref or name not in new:
            counts["missing"] += 1
            print(f"missing in {'REF' if name not in ref else 'NEW'}: {name}")
            continue
        if ref[name] == new[name]:
            counts["identical"] += 1
            continue
        a, b = instructions(ref[name]), instructions(new[name])
        if a == b:
            counts["renumbered"] += 1
            print(f"renumbered: {name}")
            continue
        counts["DIFFERENT"] += 1
        print(f"DIFFERENT: {name} ({len(a)} -> {len(b)} instructions)")
        if show:
            diff = list(difflib.unified_diff(a, b, lineterm="", n=1))
            print("\n".join(diff[:show]))
    print(f"{len(set(ref) | set(new))} functions: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0 if counts["DIFFERENT"] == 0 and counts["missing"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
