"""Why the full decode bench (rawindexer.bench_paged) reads the tma design at N = 128 slower than bench/paged_ab.py
does (64 x 131072, H 64, next_n 2: 365-444 us there across sessions, 312-316 us in the A/B): one process, one cache,
the same CUDA-graph timing as both harnesses, with the tma design timed fresh, after the f16 and fp8 designs (the
bench's order), after DeepGEMM, and again; the SM clock is sampled after each timing.

    python bench/paged_order_check.py [--batch 64 --context 131072 --next-n 2 --heads 64] [--churn]

--churn first builds and frees the caches the full bench builds before this shape (its B x context order), as the
bench's process does, so that the allocation history is the bench's.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def sm_clock() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=131072)
    ap.add_argument("--next-n", type=int, default=2)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--churn", action="store_true", help="first build and free the bench's earlier caches")
    a = ap.parse_args()
    import torch

    import rawindexer
    from rawindexer import bench_paged as bp
    if a.churn:
        for B in bp.GRID_B:
            for ctx in bp.GRID_CONTEXT:
                if (B, ctx) == (a.batch, a.context):
                    break
                kv, table = bp.make_cache(torch, B, ctx, 64)
                del kv, table
                torch.cuda.empty_cache()
            else:
                continue
            break
    kv, table = bp.make_cache(torch, a.batch, a.context, 64)
    q, w, l1, l2 = bp.make_queries(torch, a.batch, a.context, a.next_n, a.heads)
    out = torch.empty((a.batch * a.next_n, a.context), dtype=torch.float32, device="cuda")

    def ours(design: str):
        return lambda: rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, l1, table, a.context,
                                                       clean_logits=False, out=out, variant=design)
    dg, why = bp.deepgemm_call(torch, q, kv, w, l2, table, a.context, 64)
    steps = [("tma", ours("tma")), ("tma", ours("tma")), ("f16", ours("f16")), ("fp8", ours("fp8")),
             ("tma", ours("tma")), ("tma", ours("tma"))]
    if dg is not None:
        steps += [("DeepGEMM", dg), ("tma", ours("tma"))]
    else:
        print(f"# DeepGEMM: {why}")
    for name, fn in steps:
        t = bp.graph_time(torch, fn) * 1e6
        print(f"{name:9s} {t:8.1f} us   (sm MHz, W, C: {sm_clock()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
