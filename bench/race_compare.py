"""Two builds' races side by side: the per-case rows of bench/race_sm90.py logs (each build raced one or more times,
DeepGEMM in every run), each design's best time per case on each side, and old / new per design and head count.

    python bench/race_compare.py OLD.log[,OLD2.log ...] NEW.log[,NEW2.log ...] [--designs wg,tmas]

Why: an A/B of two kernel builds on the H200 (docs/results/device_common.sh `race_ab`) leaves one race_sm90.log per
run; the geomeans quoted in docs/PERFORMANCE.md come from this comparison. Ratios are old time / new time (above 1:
the new build is faster); "deepgemm" is compared too, as the run-to-run drift of the same kernel.
"""
from __future__ import annotations

import argparse
import math
import re
from collections import defaultdict
from pathlib import Path

# " 1024x1024   causal    c=1 H=32 | wg     12.7 ( 23%) [1.26x] ... | deepgemm     16.1 ( 18%)"
_ROW = re.compile(r"\s*(\d+x\d+)\s+(\w+)\s+c=(\d) H=(\d+) \|(.*)")
_CELL = re.compile(r"(\w+)\s+([\d.]+) \(")

Case = tuple[str, str, str, str]  # shape, window, clean, heads


def parse_race_log(path: Path) -> dict[Case, dict[str, float]]:
    """us per design for every case row of one race_sm90.log (shape like '1024x1024', window, clean '0'/'1', heads)."""
    times: dict[Case, dict[str, float]] = {}
    for line in Path(path).read_text().splitlines():
        m = _ROW.match(line)
        if m:
            times[(m[1], m[2], m[3], m[4])] = {name: float(us) for name, us in _CELL.findall(m[5])}
    return times


def best_times(paths: list[Path]) -> dict[Case, dict[str, float]]:
    """The fastest time of each design per case over several logs of the same build."""
    best: dict[Case, dict[str, float]] = {}
    for path in paths:
        for case, row in parse_race_log(path).items():
            slot = best.setdefault(case, {})
            for name, us in row.items():
                slot[name] = min(us, slot.get(name, math.inf))
    return best


def compare(old: list[Path], new: list[Path], designs: list[str]) -> tuple[list[str], dict[tuple[str, str], list[float]]]:
    """Printable rows (cases in the first old log's order) and old / new ratios per (design, heads)."""
    before, after = best_times(old), best_times(new)
    lines, ratios = [], defaultdict(list)
    for case in before:
        if case not in after:
            continue
        cells = []
        for name in [*designs, "deepgemm"]:
            if name in before[case] and name in after[case]:
                o, n = before[case][name], after[case][name]
                ratios[(name, case[3])].append(o / n)
                cells.append(f"{name} {o:8.1f} -> {n:8.1f} ({o / n:5.3f})")
        lines.append(f"{case[0]:11s} {case[1]:9s} c{case[2]} H{case[3]:3s} | " + "  ".join(cells))
    return lines, dict(ratios)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", help="comma-separated race_sm90.log paths of the old build")
    p.add_argument("new", help="comma-separated race_sm90.log paths of the new build")
    p.add_argument("--designs", default="", help="designs to compare (default: every one in both)")
    args = p.parse_args()
    old = [Path(x) for x in args.old.split(",")]
    new = [Path(x) for x in args.new.split(",")]
    designs = [d for d in args.designs.split(",") if d]
    if not designs:
        first = best_times(old)
        designs = sorted({name for row in first.values() for name in row} - {"deepgemm"})
    lines, ratios = compare(old, new, designs)
    print("\n".join(lines))
    for (name, heads), values in sorted(ratios.items()):
        print(f"{name} H {heads}: old / new geomean {geomean(values):.4f} over {len(values)} cases "
              f"(min {min(values):.3f}, max {max(values):.3f})")


if __name__ == "__main__":
    main()
