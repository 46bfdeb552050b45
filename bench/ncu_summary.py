"""One table from ncu raw pages: the headline metrics of each profiled kernel side by side.

    ncu --import REP --page raw --csv > NAME_raw.csv      (once per report; sections as docs/results/session6_*.sh)
    python3 bench/ncu_summary.py A_raw.csv B_raw.csv ... [--all-stalls]

One column per kernel row of each file (labelled by the file name less "_raw.csv"), one row per metric below, then
the warp-state stalls per issued instruction (smsp__average_warps_issue_stalled_*_per_issue_active.ratio; those
under 0.05 in every column are left out unless --all-stalls). A metric a report lacks reads "-".
"""
from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

#: (label, raw metric name) of the headline rows
HEADLINE = [
    ("duration [us]", "gpu__time_duration.sum"),
    ("SM clock [GHz]", "sm__cycles_elapsed.avg.per_second"),
    ("DRAM throughput [%]", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe active [%]", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("tensor hmma pipe active [%]", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("gmma inst executed [% peak]", "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"),
    ("issue slots busy [%]", "sm__inst_issued.avg.pct_of_peak_sustained_active"),
    ("warp instructions executed", "smsp__inst_executed.sum"),
    ("achieved occupancy [%]", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("L1/shared throughput [%]", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("L2 throughput [%]", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("warp cycles per issued inst", "smsp__average_warp_latency_per_inst_issued.ratio"),
]
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
_SCALE = {("us", "duration"): 1.0, ("ns", "duration"): 1e-3, ("ms", "duration"): 1e3,
          ("hz", "clock"): 1e-9, ("Mhz", "clock"): 1e-3, ("Ghz", "clock"): 1.0}


def read_raw(path: Path) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """(column label, {metric: (unit, value)}) per kernel row of one `--page raw --csv` file (header, units, rows)."""
    lines = [line for line in path.read_text().splitlines() if line.startswith('"')]  # drop ==PROF== chatter
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        return []
    names, units = rows[0], rows[1]
    label = path.name.removesuffix("_raw.csv").removeprefix("ncu_")
    kernels = rows[2:]
    return [(label if len(kernels) == 1 else f"{label}#{i}", {n: (u, v) for n, u, v in zip(names, units, row)})
            for i, row in enumerate(kernels)]


def value(metrics: dict[str, tuple[str, str]], name: str, label: str) -> float | None:
    """The metric as a float, durations in us and clocks in GHz; None when absent or not a number."""
    unit, raw = metrics.get(name, ("", ""))
    try:
        x = float(raw.replace(",", ""))
    except ValueError:
        return None
    kind = "duration" if "duration" in label else "clock" if "clock" in label else ""
    return x * _SCALE.get((unit, kind), 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--all-stalls", action="store_true")
    a = ap.parse_args()
    cols = [col for f in a.files if f.is_file() for col in read_raw(f)]
    if not cols:
        print("no ncu raw data in", " ".join(map(str, a.files)))
        return
    stalls = sorted({m.group(1) for _, ms in cols for n in ms if (m := _STALL.match(n))})
    rows = [(label, name) for label, name in HEADLINE]
    rows += [(f"stall {s} [per issue]", f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") for s in stalls]
    width = max(14, *(len(c) for c, _ in cols))
    print(f"{'metric':38s}" + "".join(f"{c:>{width + 2}s}" for c, _ in cols))
    for label, name in rows:
        vals = [value(ms, name, label) for _, ms in cols]
        if label.startswith("stall") and not a.all_stalls and all(v is None or v < 0.05 for v in vals):
            continue
        cells = ["-" if v is None else f"{v:,.0f}" if v >= 1e5 else f"{v:.2f}" for v in vals]
        print(f"{label:38s}" + "".join(f"{c:>{width + 2}s}" for c in cells))


if __name__ == "__main__":
    main()
