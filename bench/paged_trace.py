"""Timeline of the sm_90a decode design "tma" from a PAGED_TMA_TRACE build (diagnostic, H200; docs/PAGED.md
"Session 13").

A build with -DPAGED_TMA_TRACE=1 (kernels/sm90/paged_tma.cuh) stamps, per block (b * split_n + split), %globaltimer
at entry and exit, its SM, its tile count and SM clock64 at entry, Q staged, the producer's start and last tile issued,
each of its first tiles' full-barrier wait and head reduce, and exit. This runs one case through the public call
(variant "tma", ~1 ms of GPU busy-wait before each call), reads the stamps back through cuModuleGetGlobal and prints
where the blocks' time goes: life, prologue, per-tile consumer time, waits for data, the drain after the last copy,
and how many blocks each SM kept resident on average.

    python bench/paged_tma_variant.py .v/ptr -DPAGED_TMA_TRACE=1      # here (nvcc)
    RAWINDEXER_KERNEL_DIR=.v/ptr python bench/paged_trace.py [--batch 64] [--context 32768] [--next-n 2] [--heads 64]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

BLOCKS, TILES = 8192, 20  # PT_TRACE_BLOCKS, PT_TRACE_TILES of the kernel
# the kernel's slot enum (PT_TRACE_ENTRY_NS, ...): nine single stamps, then per tile full and reduced
(ENTRY_NS, EXIT_NS, SMID, N_TILES, ENTRY, Q_STAGED, PRODUCER_START, PRODUCER_LAST, EXIT) = range(9)
FULL = 9
REDUCED = FULL + TILES
SLOTS = REDUCED + TILES


def summarize(tr: np.ndarray, blocks: int, sm_ghz: float, event_us: float) -> list[str]:
    tr = tr[:blocks]
    us = lambda cycles: np.asarray(cycles) / sm_ghz / 1e3  # noqa: E731
    pct = lambda v: f"median {np.median(v):.2f}, p90 {np.percentile(v, 90):.2f}, max {np.max(v):.2f}"  # noqa: E731
    n = tr[:, N_TILES]
    life = us(tr[:, EXIT] - tr[:, ENTRY])
    lines = [f"{blocks} blocks, tiles per block {n.min()}-{n.max()}; kernel (event) {event_us:.1f} us, first entry to "
             f"last exit (globaltimer) {(tr[:, EXIT_NS].max() - tr[:, ENTRY_NS].min()) / 1e3:.1f} us",
             f"block life (us): {pct(life)}",
             f"Q staged after entry (us): {pct(us(tr[:, Q_STAGED] - tr[:, ENTRY]))}",
             f"producer start after entry (us): {pct(us(tr[:, PRODUCER_START] - tr[:, ENTRY]))}",
             f"tile 0 full after entry (us): {pct(us(tr[:, FULL] - tr[:, ENTRY]))}",
             f"drain: exit after the producer's last copy issued (us): {pct(us(tr[:, EXIT] - tr[:, PRODUCER_LAST]))}"]
    k = int(min(n.min(), TILES))
    if k >= 2:
        reduced = tr[:, REDUCED:REDUCED + k]
        full = tr[:, FULL:FULL + k]
        step = us(np.diff(reduced, axis=1))  # tile i reduced -> tile i + 1 reduced
        wait = us(full[:, 1:] - reduced[:, :-1])  # tile i reduced -> tile i + 1 full: the consumers waited for data
        work = us(reduced - full)  # tile full -> reduced: wgmma, wait, head reduce
        lines += [f"per tile, tiles 1..{k - 1} (us): reduced-to-reduced {pct(step)}",
                  f"  waiting for the tile after the previous reduce: {pct(np.maximum(wait, 0))}; "
                  f"share of blocks' tile time waiting {np.maximum(wait, 0).sum() / step.sum():.1%}",
                  f"  full -> reduced (wgmma + head reduce): {pct(work[:, 1:])}",
                  "  median per tile index: " + " ".join(f"{np.median(step[:, i]):.2f}" for i in range(k - 1))]
    # blocks resident per SM over its busy span (clock64 is one counter per SM)
    sms = np.unique(tr[:, SMID])
    resident, spans, gaps, clocks = [], [], [], []
    for sm in sms:
        rows = tr[tr[:, SMID] == sm]
        span = rows[:, EXIT].max() - rows[:, ENTRY].min()
        spans.append(us(span))
        span_ns = rows[:, EXIT_NS].max() - rows[:, ENTRY_NS].min()
        if span_ns > 0:
            clocks.append(span / span_ns)  # the SM's clock over its busy span: cycles per globaltimer ns
        resident.append((rows[:, EXIT] - rows[:, ENTRY]).sum() / max(span, 1))
        # a slot's hand-over: each entry after the SM's first wave against the latest exit before it
        entries = np.sort(rows[:, ENTRY])
        exits = np.sort(rows[:, EXIT])
        for e in entries[4:]:
            before = exits[exits <= e]
            if len(before):
                gaps.append(us(e - before.max()))
    lines += [f"SMs {len(sms)}: busy span (us) {pct(np.array(spans))}; blocks resident on average {pct(np.array(resident))}",
              f"SM clock over the busy span (GHz, clock64 against globaltimer): "
              f"{pct(np.array(clocks)) if clocks else '-'} (the us above assume {sm_ghz})",
              f"entry after the latest exit on its SM, past the first wave (us): {pct(np.array(gaps)) if gaps else '-'}"]
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--context", type=int, default=32768)
    p.add_argument("--next-n", type=int, default=2)
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--split", type=int, default=0, help="split_n forced (0: the heuristic)")
    p.add_argument("--calls", type=int, default=5, help="traced calls; the median call's trace is printed")
    p.add_argument("--sm-ghz", type=float, default=1.98, help="cycles -> us (the H200's boost clock)")
    a = p.parse_args()
    import torch

    import rawindexer
    from rawindexer import bench_paged as bp
    from rawindexer.backends import get_backend
    from trace_capture import median_call, stamp_buffer, traced_calls

    torch.manual_seed(1)
    kv, table = bp.make_cache(torch, a.batch, a.context, 64)
    q, w, lens, _ = bp.make_queries(torch, a.batch, a.context, a.next_n, a.heads)
    out = torch.empty((a.batch * a.next_n, a.context), dtype=torch.float32, device="cuda")
    extra = {"split_n": a.split} if a.split else {}

    def call():
        rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, lens, table, a.context, out=out, variant="tma",
                                        **extra)
    call()
    torch.cuda.synchronize()
    be = get_backend("cuda")
    ptr = stamp_buffer(be, be._modules, b"pt_trace", BLOCKS * SLOTS * 8)  # whichever module the call loaded
    traces, events = traced_calls(be, ptr, (BLOCKS, SLOTS), lambda _: call(), a.calls)
    mid = median_call(events)
    blocks = int((traces[mid][:, ENTRY] != 0).sum())
    print(f"B {a.batch} x {a.context}, next_n {a.next_n}, H {a.heads}: event times "
          f"{' '.join(f'{e:.1f}' for e in events)} us; the median call:")
    print("\n".join(summarize(traces[mid], blocks, a.sm_ghz, events[mid])))


if __name__ == "__main__":
    main()
