"""Timeline of the sm_90a "tmaq" design from a TMAQ_TRACE build (diagnostic, H200; docs/PERFORMANCE.md v18).

A build with -DTMAQ_TRACE=1 (kernels/sm90/prefill_tma_qshared.cuh) stamps, per block, its SM cycle counter at each
role's steps of its first row blocks (producer: span read, last K tile issued; loaders: Q buffer free, Q full;
consumers: past Q full, done with the row block) and %globaltimer at entry and exit. This launches it the way the
benchmark's (b) column does (input sets rotated past L2, ~1 ms of GPU busy-wait before each call), reads the stamps
back through cuModuleGetGlobal and prints where the blocks' time goes.

    python bench/tmaq_trace.py --build                       # here (nvcc): .v/tr (RAWINDEXER_RACE_BUILD)
    RAWINDEXER_RACE_BUILD=.v/tr python bench/tmaq_trace.py [--shape 1024x1024] [--heads 64] [--window multi_req]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

BLOCKS, ROW_BLOCKS, SLOTS = 132, 6, 27 + 12 * 4 + 3  # TMAQ_TRACE_BLOCKS, _ROW_BLOCKS, _SLOTS of the kernel
PRODUCER, LOADERS, CONSUMERS = 3, 15, 27       # first slot of each role (2 per row block; consumers 12 apart)
PROLOGUE = {75: "loader past the barrier set-up", 76: "loader past setmaxnreg.dec", 77: "consumer 0 past setmaxnreg.inc"}


def summarize(tr: np.ndarray, sm_ghz: float) -> list[str]:
    us = lambda cycles: cycles / sm_ghz / 1e3  # noqa: E731
    entry_ns = tr[:, 0] - tr[:, 0].min()
    exit_ns = tr[:, 1] - tr[:, 0].min()
    lines = [f"block entry skew (globaltimer): median {np.median(entry_ns) / 1e3:.2f} us, max {entry_ns.max() / 1e3:.2f}"
             f"; exits: median {np.median(exit_ns) / 1e3:.2f} us, max {exit_ns.max() / 1e3:.2f}",
             f"block busy time (cycles at {sm_ghz} GHz): median {us(np.median(tr[:, 2])):.2f} us, max "
             f"{us(tr[:, 2].max()):.2f}"]
    lines.append("prologue, us after the stamping warp's start, median (max): " + "; ".join(
        f"{what} {us(np.median(tr[:, slot])):.2f} ({us(tr[:, slot].max()):.2f})" for slot, what in PROLOGUE.items()))
    names = ["producer: span read", "producer: last K tile issued", "loaders: Q buffer free", "loaders: Q full"]
    names += [f"consumer {c}: {what}" for c in range(4) for what in ("past Q full", "row block done")]
    bases = [PRODUCER, PRODUCER, LOADERS, LOADERS] + [CONSUMERS + 12 * c for c in range(4) for _ in range(2)]
    ks = [0, 1, 0, 1] + [k for _ in range(4) for k in (0, 1)]
    lines.append("us after the stamping warp's start, median over blocks (max), per row block i of the block:")
    lines.append(f"{'':32s}" + "".join(f"{'i=' + str(i):>16s}" for i in range(ROW_BLOCKS)))
    for name, base, k in zip(names, bases, ks):
        cells = []
        for i in range(ROW_BLOCKS):
            v = tr[:, base + 2 * i + k]
            v = v[v > 0]
            cells.append(f"{us(np.median(v)):7.2f} ({us(v.max()):5.2f})" if len(v) else f"{'-':>16s}")
        lines.append(f"{name:32s}" + "".join(f"{c:>16s}" for c in cells))
    last = int(np.argmax(tr[:, 2]))
    lines.append(f"the busiest block ({last}), us after each warp's start:")
    for name, base, k in zip(names, bases, ks):
        vals = [tr[last, base + 2 * i + k] for i in range(ROW_BLOCKS)]
        lines.append(f"  {name:30s} " + " ".join(f"{us(v):6.2f}" if v > 0 else "     -" for v in vals))
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="store_true", help="compile the trace build into .v/tr (nvcc) and stop")
    p.add_argument("--shape", default="1024x1024", help="MxN")
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--window", default="multi_req", choices=("causal", "multi_req"))
    p.add_argument("--clean", type=int, default=0)
    p.add_argument("--calls", type=int, default=5, help="traced calls; the median call's trace is printed")
    p.add_argument("--sm-ghz", type=float, default=1.98, help="cycles -> us (the H200's boost clock)")
    a = p.parse_args()
    if a.build:
        os.environ.setdefault("RAWINDEXER_RACE_BUILD", str(ROOT / ".v" / "tr"))
        import race_sm90
        race_sm90.RACE_BUILD = Path(os.environ["RAWINDEXER_RACE_BUILD"])
        race_sm90.build_race(("tmaq",), ("TMAQ_TRACE=1",))
        return
    import torch

    from race_sm90 import Launcher
    from trace_capture import median_call, stamp_buffer, traced_calls
    from rawindexer.bench import input_sets, shape_list, windows_for

    shapes = shape_list(a.shape)
    if len(shapes) != 1:
        p.error(f"--shape: one MxN, got {a.shape!r}")
    ((M, N),) = shapes
    ks_np, ke_np = windows_for(a.window, M, N)
    sets = input_sets(M, N, a.heads, ks_np, ke_np)
    nsets = len(sets)
    outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
    launcher = Launcher(["tmaq"])
    gos = [launcher("tmaq", sets[i], outs[i], bool(a.clean))[0] for i in range(nsets)]
    be = launcher.be
    trace_ptr = stamp_buffer(be, [launcher.module], b"tmaq_trace", BLOCKS * SLOTS * 8)
    for i in range(3):
        gos[i % nsets]()
    torch.cuda.synchronize()
    traces, events = traced_calls(be, trace_ptr, (BLOCKS, SLOTS), lambda call: gos[(3 + call) % nsets](), a.calls)
    mid = median_call(events)
    print(f"{M}x{N} {a.window} clean={a.clean} H={a.heads}, tmaq trace build: event times "
          f"{' '.join(f'{e:.2f}' for e in events)} us; the median call ({events[mid]:.2f} us):")
    print("\n".join(summarize(traces[mid], a.sm_ghz)))


if __name__ == "__main__":
    main()
