"""Static statistics of an sm_90a kernel's wgmma tile loop, from its SASS and each instruction's control bits.

    python bench/sass_loop_stats.py CUBIN KERNEL [--loop START:END] [--top N] [--list] [--skip START:END]... [--dump]

KERNEL is the kernel's (mangled) name or, when no kernel has exactly that name, a substring of it (the first kernel
that contains it is taken). Without --loop every
backward branch whose body holds a QGMMA / HGMMA is a candidate and the innermost ones are reported (with --list,
all candidates); --loop 0x1a30:0x2b40 gives the range by hand (both ends inclusive, hex code addresses).

Why: ncu's "wait" stall reason counts the cycles a warp spends on the fixed stall counts ptxas writes into each
instruction's control word (and, by our reading, on DEPBAR-style waits), so two kernels' "wait" per issued
instruction can be compared from their binaries without a GPU. Printed per loop: instructions by class, the sum of
the encoded stall counts (total, by class, and the excess over one cycle per instruction), how many instructions wait
on a dependency barrier (scoreboard; nonzero wait mask), and the instructions with the largest stalls, each with
the one before it.

Control word (sm_70 and later, sm_90 included; the layout CuAssembler uses, CuAsm/CuSMVersion.py: the 23 bits above
bit 105 of the 128-bit instruction, i.e. the high 64-bit word >> 41):
    bits 0-3 stall count, 4 yield, 5-7 write barrier (7 = none), 8-10 read barrier (7 = none),
    11-16 wait mask (one bit per scoreboard SB0..SB5), 17-20 operand reuse.
cuobjdump prints each instruction's two 64-bit words as hex comments; the second one is the high word.

Example (DeepGEMM's instance from bench/dg_mqa_instance.cu, then ours):
    I=/tmp/dgw/deep_gemm/include; nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 --expt-relaxed-constexpr \\
      --expt-extended-lambda --diag-suppress=39,161,174,177,186,940 --ptxas-options=--register-usage-level=10 \\
      -cubin -I$I -o /tmp/dg_mqa.cubin bench/dg_mqa_instance.cu
    python bench/sass_loop_stats.py /tmp/dg_mqa.cubin sm90_fp8_mqa_logits
    python bench/sass_loop_stats.py rawindexer/_kernels/fp8_mqa_logits.sm90a.cubin h64_d128_bm8_tmasb4
    # one steady-state (interior) tile of tmasb4's first copy: the edge-store branch it jumps over left out
    python bench/sass_loop_stats.py rawindexer/_kernels/fp8_mqa_logits.sm90a.cubin h64_d128_bm8_tmasb4 \
      --loop 0x3390:0x4300 --skip 0x40d0:0x4270
The figures and their reading: docs/PERFORMANCE.md, "v12 static: our tile loop beside DeepGEMM's".
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sass_compare import cuobjdump  # noqa: E402  (bench/ is not a package)

_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*0x([0-9a-f]{16})\s*\*/")
_HIGH = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
_BRANCH_TARGET = re.compile(r"\bBRA\b(?:\.\S+)*\s+(?:`?\(?\S*\s+)?0x([0-9a-f]+)")

# Instruction classes, first match wins (on the opcode without its predicate guard).
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GMMA", re.compile(r"^[QHI]GMMA\b")),
    ("WARPGROUP", re.compile(r"^WARPGROUP\.")),
    ("FP32", re.compile(r"^(FFMA|FMNMX|FADD|FMUL|FSEL|FSETP|FSWZADD)\b")),
    ("LDS", re.compile(r"^(LDS|LDSM)\b")),
    ("LDG", re.compile(r"^(LDG|LD)\b")),
    ("STG", re.compile(r"^(STG|ST|RED)\b")),
    ("STS", re.compile(r"^STS\b")),
    ("SHFL", re.compile(r"^SHFL\b")),
    ("SYNC", re.compile(r"^(SYNCS|BAR|MEMBAR|DEPBAR|ARRIVES|WARPSYNC|NANOSLEEP|ERRBAR|CCTL|FENCE)\b")),
    ("BRANCH", re.compile(r"^(BRA|BSSY|BSYNC|EXIT|RET|CALL|JMP|BREAK|YIELD)\b")),
    ("UNIFORM", re.compile(r"^(U\w+|R2UR|S2UR|VOTEU)\b")),
    ("INT/ADDR", re.compile(r"^\w+")),
)


@dataclass(frozen=True)
class Instr:
    """One SASS instruction with its decoded control word."""

    addr: int
    text: str  # as cuobjdump prints it, without the trailing ';'
    stall: int  # cycles before the warp may issue its next instruction
    yield_: bool
    write_bar: int  # scoreboard this instruction sets on completion of its write, 7 = none
    read_bar: int  # scoreboard released when its sources are read, 7 = none
    wait_mask: int  # scoreboards it waits on before issue (bit i = SB i)

    @property
    def opcode(self) -> str:
        """The opcode with modifiers, predicate guard dropped (e.g. "FFMA", "SYNCS.ARRIVE.TRANS64.RED.A1T0")."""
        parts = self.text.split()
        return parts[1] if parts[0].startswith("@") else parts[0]

    @property
    def klass(self) -> str:
        return next(name for name, pattern in _CLASSES if pattern.match(self.opcode))


def decode_control(high: int) -> tuple[int, bool, int, int, int]:
    """(stall, yield, write barrier, read barrier, wait mask) from the high 64-bit word of a 128-bit instruction."""
    ctrl = high >> 41
    return ctrl & 0xF, bool(ctrl >> 4 & 1), ctrl >> 5 & 7, ctrl >> 8 & 7, ctrl >> 11 & 0x3F


def kernel_sass(cubin: Path, kernel: str) -> tuple[str, list[Instr]]:
    """The mangled name and instructions of the first kernel in `cubin` whose name contains `kernel`."""
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    names = [m.group(1) for m in map(_FUNC.match, text.splitlines()) if m]
    wanted = kernel if kernel in names else next((n for n in names if kernel in n), None)
    name: str | None = None
    instrs: list[Instr] = []
    pending: tuple[int, str] | None = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            if name is not None:
                break
            if m.group(1) == wanted:
                name = m.group(1)
            continue
        if name is None:
            continue
        m = _INSTR.match(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2))
            continue
        m = _HIGH.match(line)
        if m and pending is not None:
            instrs.append(Instr(pending[0], pending[1], *decode_control(int(m.group(1), 16))))
            pending = None
    if name is None:
        sys.exit(f"sass_loop_stats: no kernel containing {kernel!r} in {cubin}")
    return name, instrs


def gmma_loops(instrs: list[Instr]) -> list[tuple[int, int]]:
    """(head, backward branch) address pairs of every loop whose body holds a wgmma, innermost first."""
    loops = []
    for ins in instrs:
        m = _BRANCH_TARGET.search(ins.text)
        if not m or int(m.group(1), 16) >= ins.addr:
            continue
        head = int(m.group(1), 16)
        if any(i.klass == "GMMA" for i in instrs if head <= i.addr <= ins.addr):
            loops.append((head, ins.addr))
    return sorted(set(loops), key=lambda hb: hb[1] - hb[0])


def innermost(loops: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The loops that contain no other loop of the list and do not jump into the middle of a smaller one.

    The second rule drops the out-of-line retry paths of mbarrier waits: ptxas places them after the kernel's
    EXIT and branches back into the loop that waits, so their "loop" starts inside a real one and ends outside it.
    """
    def nested_or_apart(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return a[1] < b[0] or b[1] < a[0] or (a[0] <= b[0] and b[1] <= a[1]) or (b[0] <= a[0] and a[1] <= b[1])

    size = lambda hb: hb[1] - hb[0]  # noqa: E731
    proper = [a for a in loops if all(nested_or_apart(a, b) or size(b) > size(a) for b in loops)]
    return [a for a in proper if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in proper)]


def loop_report(instrs: list[Instr], head: int, tail: int, top: int,
                skip: tuple[tuple[int, int], ...] = ()) -> str:
    """The table of one loop [head, tail] (both inclusive), without the instructions in the `skip` ranges."""
    body = [i for i in instrs if head <= i.addr <= tail and not any(a <= i.addr <= b for a, b in skip)]
    count: collections.Counter[str] = collections.Counter(i.klass for i in body)
    stall: collections.Counter[str] = collections.Counter()
    waits: collections.Counter[str] = collections.Counter()
    for i in body:
        stall[i.klass] += i.stall
        waits[i.klass] += i.wait_mask != 0
    total_stall = sum(i.stall for i in body)
    excess = sum(max(i.stall - 1, 0) for i in body)
    lines = [
        f"loop 0x{head:04x}..0x{tail:04x}: {len(body)} instructions, stall sum {total_stall} cycles "
        f"({total_stall / len(body):.2f} per instruction; over 1 cycle each: {excess}, {excess / len(body):.2f} per "
        f"instruction), {sum(1 for i in body if i.wait_mask)} wait on a scoreboard, "
        f"{sum(1 for i in body if i.yield_)} with the yield bit, "
        f"{sum(1 for i in body if i.write_bar != 7)} set a write scoreboard",
        f"  {'class':10s} {'count':>5s} {'stall':>6s} {'waits':>5s}",
    ]
    for name, _ in _CLASSES:
        if count[name]:
            lines.append(f"  {name:10s} {count[name]:5d} {stall[name]:6d} {waits[name]:5d}")
    fp = collections.Counter(i.opcode.split(".")[0] for i in body if i.klass == "FP32")
    lines.append("  FP32 by opcode: " + ", ".join(f"{op} {n}" for op, n in fp.most_common()))
    lines.append("  largest stalls (stall, wait mask SB bits; the instruction before):")
    ranked = sorted(range(len(body)), key=lambda k: (-body[k].stall, body[k].addr))[:top]
    for k in sorted(ranked, key=lambda k: body[k].addr):
        i = body[k]
        prev = body[k - 1].text if k else "-"
        mask = "".join(str(b) for b in range(6) if i.wait_mask >> b & 1) or "-"
        lines.append(f"    0x{i.addr:04x} S{i.stall:02d} W{mask:6s} {i.text[:58]:58s} | after: {prev[:40]}")
    return "\n".join(lines)


def loop_listing(instrs: list[Instr], head: int, tail: int) -> str:
    """Every instruction of the loop with its stall count, yield bit, scoreboards and wait mask."""
    out = []
    for i in instrs:
        if head <= i.addr <= tail:
            mask = "".join(str(b) for b in range(6) if i.wait_mask >> b & 1) or "-"
            wr = "-" if i.write_bar == 7 else str(i.write_bar)
            rd = "-" if i.read_bar == 7 else str(i.read_bar)
            out.append(f"0x{i.addr:04x} S{i.stall:02d} {'Y' if i.yield_ else '-'} W{mask:6s} wr{wr} rd{rd}  {i.text}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cubin", type=Path)
    parser.add_argument("kernel", help="a substring of the kernel's (mangled) name")
    parser.add_argument("--loop", help="START:END code addresses in hex, both inclusive (default: detected)")
    parser.add_argument("--top", type=int, default=12, help="how many of the largest stalls to list (default 12)")
    parser.add_argument("--list", action="store_true", help="report every wgmma loop, not only the innermost")
    parser.add_argument("--skip", action="append", default=[], metavar="START:END",
                        help="leave out these addresses (both inclusive; repeatable), e.g. the branch a steady-state "
                        "tile does not take, to count one path through the loop")
    parser.add_argument("--dump", action="store_true", help="also print each loop's instructions with control bits")
    args = parser.parse_args()
    name, instrs = kernel_sass(args.cubin, args.kernel)
    print(f"{name}: {len(instrs)} instructions")
    if args.loop:
        start, end = (int(x, 16) for x in args.loop.split(":"))
        ranges = [(start, end)]
    else:
        found = gmma_loops(instrs)
        ranges = found if args.list else innermost(found)
        if not ranges:
            sys.exit("sass_loop_stats: no backward branch around a wgmma; give --loop START:END")
    for head, tail in ranges:
        skip = tuple((int(a, 16), int(b, 16)) for a, b in (r.split(":") for r in args.skip))
        print(loop_report(instrs, head, tail, args.top, skip))
        if args.dump:
            print(loop_listing(instrs, head, tail))


if __name__ == "__main__":
    main()
