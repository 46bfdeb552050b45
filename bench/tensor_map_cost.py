"""What a new pointer costs the prepared launch of a tensor-map design ("tmas", "tmaq": K's and Q's maps in the
kernargs, docs/PERFORMANCE.md v19), on a GPU machine.

    python bench/tensor_map_cost.py [--calls 200]

Prints host microseconds per item, median over ``calls``:
* one ``cuTensorMapEncodeTiled`` through cuda-bindings (the uncached encoder; any 16-byte aligned address serves:
  encoding reads no memory), for K's map and for Q's;
* the public call at 1024^2 H 64 ("tmaq") made with the same tensors every time (the serving loop over persistent
  buffers), with the same K and a Q tensor it has not seen (one Q map encoded and one launch bound per call), and
  with a new K and a new Q every call (both maps), each call timed on the host with the GPU queue kept non-empty
  (a 20 ms busy-wait ahead of each group of calls, so the host never waits for the device).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=200)
    a = p.parse_args()
    import torch

    import rawindexer
    from rawindexer.dispatch import sm90_tensor_map as tm
    from rawindexer.testing.torch_reference import make_inputs
    from rawindexer.testing.windows import make_windows

    M = N = 1024
    H, D = 64, 128
    ks, ke = make_windows("causal", M, N)
    base = make_inputs(M, N, H, D, ks, ke, seed=1)
    out = torch.empty((M, N), device="cuda", dtype=torch.float32)
    n = a.calls
    qs = [base[0].clone() for _ in range(n)]
    kss = [base[1].clone() for _ in range(n)]
    rawindexer.fp8_mqa_logits(*base, out=out)  # plan and bind once
    torch.cuda.synchronize()  # (the driver is initialised from here on: the encoder needs it)

    encode = tm.encode_with_cuda_bindings.__wrapped__
    rows = []
    for label, args in (("encode K's map (1024 rows, box 64)", (1024, 128)),
                        ("encode Q's map (65536 rows, box 128)", (65536, 128, 0, 128))):
        times = []
        for i in range(a.calls):
            t0 = time.perf_counter()
            encode(0x7F0000000000 + 4096 * i, *args)
            times.append(time.perf_counter() - t0)
        rows.append((label, statistics.median(times) * 1e6))

    def timed(make_args) -> float:
        times = []
        for i in range(n):
            if i % 20 == 0:
                torch.cuda.synchronize()
                torch.cuda._sleep(20_000_000)
            args = make_args(i)
            t0 = time.perf_counter()
            rawindexer.fp8_mqa_logits(*args, out=out)
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        return statistics.median(times) * 1e6

    rest = base[2:]
    rows.append(("public call, out=, the same tensors", timed(lambda i: base)))
    rows.append(("public call, out=, a Q not seen before", timed(lambda i: (qs[i], base[1], *rest))))
    rows.append(("public call, out=, a K and a Q not seen before", timed(lambda i: (qs[i], kss[i], *rest))))
    print(f"tensor-map cost on {torch.cuda.get_device_name()} (median of {n}; host µs)")
    for label, us in rows:
        print(f"{label}\t{us:.2f}")


if __name__ == "__main__":
    main()
