"""Where an ncu-profiled kernel's instructions and stall samples go, by code region: reads the CSV of
``ncu --import REP --page source --csv --print-source sass`` (SourceCounters collected, as docs/results/ncu_common.sh
writes sass_NAME.csv) and groups consecutive SASS instructions that executed the same number of times (a straight
run of code: a block prologue runs once per warp, a tile loop once per tile) into regions; prints every region
holding at least --min-share of the executed instructions or of the samples, then the opcodes of one address range.

    python bench/ncu_regions.py sass_NAME.csv [--min-share 0.004] [--range START:END]

Why: session 10 found from these sums that 21% of `wgpr`'s instructions at 1024^2 causal H 64 and 14% of `tmas`'s at
4096^2 multi_req H 32 were the block's Q staging (docs/PERFORMANCE.md v16), which the top-instruction view of
bench/ncu_sass_stalls.py does not show. Addresses are printed relative to the kernel's first instruction.
"""
from __future__ import annotations

import argparse
import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Instr:
    offset: int       # bytes from the kernel's first instruction
    source: str       # the SASS text
    executed: int     # warp-level executions
    samples: int      # warp-stall samples, all reasons


@dataclass
class Region:
    start: int
    end: int          # offset of the last instruction
    per_instruction: int
    count: int
    executed: int
    samples: int


def read_sass_csv(path: Path) -> list[Instr]:
    """The instructions of one kernel's source page (row 0 names the kernel, row 1 is the header)."""
    rows = list(csv.reader(Path(path).open()))
    hdr = rows[1]
    ia, isrc = hdr.index("Address"), hdr.index("Source")
    iexe, isamp = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
    data = [r for r in rows[2:] if len(r) > max(ia, isrc, iexe, isamp)]
    base = int(data[0][ia], 16)
    return [Instr(int(r[ia], 16) - base, r[isrc].strip(), int(r[iexe] or 0), int(r[isamp] or 0)) for r in data]


def regions(instrs: list[Instr]) -> list[Region]:
    """Runs of consecutive instructions with the same execution count."""
    out: list[Region] = []
    for ins in instrs:
        last = out[-1] if out else None
        if last is not None and last.per_instruction == ins.executed:
            last.end, last.count = ins.offset, last.count + 1
            last.executed += ins.executed
            last.samples += ins.samples
        else:
            out.append(Region(ins.offset, ins.offset, ins.executed, 1, ins.executed, ins.samples))
    return out


def opcodes(instrs: list[Instr], start: int, end: int) -> Counter:
    """Executed instructions per opcode (predicate and modifiers dropped) in offsets [start, end]."""
    counts: Counter = Counter()
    for ins in instrs:
        if start <= ins.offset <= end and ins.source:
            words = ins.source.split()
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            counts[op.split(".")[0]] += ins.executed
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", type=Path)
    p.add_argument("--min-share", type=float, default=0.004, help="smallest share of instructions or samples shown")
    p.add_argument("--range", default=None, help="START:END offsets in hex: the opcode mix of that range")
    args = p.parse_args()
    instrs = read_sass_csv(args.csv)
    total = sum(i.executed for i in instrs) or 1
    samples = sum(i.samples for i in instrs) or 1
    print(f"executed {total}, samples {samples}")
    for r in regions(instrs):
        if r.executed >= args.min_share * total or r.samples >= 2.5 * args.min_share * samples:
            print(f"{r.start:6x}-{r.end:6x}  x{r.per_instruction:<7d} {r.count:5d} instructions  "
                  f"{100 * r.executed / total:5.1f}% executed  {100 * r.samples / samples:5.1f}% samples")
    if args.range:
        lo, hi = (int(x, 16) for x in args.range.split(":"))
        print(", ".join(f"{op} {n}" for op, n in opcodes(instrs, lo, hi).most_common(20)))


if __name__ == "__main__":
    main()
