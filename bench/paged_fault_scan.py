"""Find the smallest decode shape at which a design faults on the device: one (H, next_n, design) per process, the
shapes in increasing size, a synchronise after every call so a fault names its shape; optionally DeepGEMM's
metadata kernel alone first (``--dg-meta``), to tell its faults from ours. Prints one line per shape, ``ok`` or the
error, and exits 3 at the first fault (the CUDA context is gone after one).

    python3 bench/paged_fault_scan.py --heads 32 --next-n 4 --design tma [--shapes 64x32768,64x131072] [--dg-meta]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rawindexer.bench import shape_list  # noqa: E402  (the prefill bench's MxN list parser)

SHAPES = "8x131072,64x32768,64x65536,64x98304,64x131072,256x32768,1x262144"  # B x context


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--next-n", type=int, required=True)
    ap.add_argument("--design", default="tma")
    ap.add_argument("--shapes", type=shape_list, default=shape_list(SHAPES), help="comma list of BxCONTEXT")
    ap.add_argument("--dg-meta", action="store_true", help="run DeepGEMM's metadata kernel before each call")
    a = ap.parse_args()
    import torch

    import rawindexer
    from rawindexer import bench_paged as bp
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, context in a.shapes:
        tag = f"H {a.heads} next_n {a.next_n} {a.design} {batch}x{context}"
        try:
            kv, table = bp.make_cache(torch, batch, context, 64)
            q, w, l1, l2 = bp.make_queries(torch, batch, context, a.next_n, a.heads)
            if a.dg_meta:
                import deep_gemm
                deep_gemm.get_paged_mqa_logits_metadata(l2, 64, num_sms)
                torch.cuda.synchronize()
            out = torch.full((batch * a.next_n, context), float("nan"), device="cuda")
            rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, l1, table, context, out=out,
                                            variant=a.design)
            torch.cuda.synchronize()
            unwritten = int(torch.isnan(out).sum())
            print(f"ok    {tag} (NaN left: {unwritten})", flush=True)
            del kv, table, q, w, l1, l2, out
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - report and stop: the context is unusable after a fault
            print(f"FAULT {tag}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
