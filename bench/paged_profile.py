"""One decode case for ncu: builds the inputs, calls the kernel ``--calls`` times (the first warms up: profile with
--launch-skip 1), synchronises. ``--impl tma`` (rawindexer, RAWINDEXER_KERNEL_DIR may name a build) or ``dg``
(DeepGEMM's fp8_paged_mqa_logits; its metadata kernel runs first).

    ncu --clock-control none -k regex:<kernel> --launch-skip 1 --launch-count 1 ... \\
        python3 bench/paged_profile.py --impl tma --batch 64 --context 32768 --next-n 2 --heads 64
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("tma", "dg"), default="tma")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--next-n", type=int, default=2)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--calls", type=int, default=2)
    a = ap.parse_args()
    import torch

    import rawindexer
    from rawindexer import bench_paged as bp
    torch.manual_seed(1)
    kv, table = bp.make_cache(torch, a.batch, a.context, 64)
    q, w, l1, l2 = bp.make_queries(torch, a.batch, a.context, a.next_n, a.heads)
    if a.impl == "dg":
        call, why = bp.deepgemm_call(torch, q, kv, w, l2, table, a.context, 64)
        if call is None:
            print(why)
            return 1
    else:
        out = torch.empty((a.batch * a.next_n, a.context), dtype=torch.float32, device="cuda")

        def call():
            return rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, l1, table, a.context, out=out,
                                                   variant="tma")
    torch.cuda.synchronize()
    for _ in range(a.calls):
        call()
    torch.cuda.synchronize()
    print("profiled", a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
