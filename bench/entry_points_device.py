"""Device time of one prefill case through each entry point, side by side (diagnostic, H200).

The public benchmark's (b) column (rawindexer.bench, the public call with a new output) read ~1 us more than the race
(bench/race_sm90.py, CudaBackend launches of the same plan) at 1024^2 H 64 in session 11 and 12, DeepGEMM ~0.5 us
more. This times, in alternating rounds on the same input sets with rawindexer.bench.time_fn (the (b) method):
the public call with a new output, with ``out=``, a bound launch, the race's direct launch, and DeepGEMM; then lists
the GPU activities one public call makes (torch.profiler), so any device work beside the kernel shows.

    python bench/entry_points_device.py [--shape 1024x1024] [--heads 64] [--window multi_req] [--clean 0] [--rounds 4]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="1024x1024", help="MxN")
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--window", default="multi_req", choices=("causal", "multi_req"))
    p.add_argument("--clean", type=int, default=0)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--design", default="tmaq", help="the design the race launch runs (auto's pick at the shape)")
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    import torch

    import rawindexer
    from race_sm90 import Launcher
    from rawindexer.bench import deepgemm_fn, input_sets, shape_list, time_fn, windows_for

    shapes = shape_list(a.shape)
    if len(shapes) != 1:
        p.error(f"--shape: one MxN, got {a.shape!r}")
    ((M, N),) = shapes
    H, clean = a.heads, bool(a.clean)
    ks_np, ke_np = windows_for(a.window, M, N)
    sets = input_sets(M, N, H, ks_np, ke_np)
    nsets = len(sets)
    outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
    design = a.design
    race = Launcher([design])
    direct = [race(design, sets[i], outs[i], clean)[0] for i in range(nsets)]
    indexer = rawindexer.Indexer(H, 128)
    bound = [indexer.bind(*sets[i], clean_logits=clean, out=outs[i]) for i in range(nsets)]
    dg = deepgemm_fn()
    entries = {
        "public, new output": lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean),
        "public, out=": lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean, out=outs[i]),
        "bound": lambda i: bound[i](),
        f"race launch ({design})": lambda i: direct[i](),
    }
    if dg is not None:
        entries["DeepGEMM"] = lambda i: dg(*sets[i], clean)
    times: dict[str, list[float]] = {name: [] for name in entries}
    for _ in range(a.rounds):
        for name, fn in entries.items():
            times[name].append(time_fn(fn, nsets, a.reps))
    print(f"{M}x{N} {a.window} clean={int(clean)} H={H}: device us per call ((b) method), {a.rounds} alternating rounds")
    for name, ts in times.items():
        print(f"  {name:28s} median {statistics.median(ts):7.2f}  rounds {' '.join(f'{t:.2f}' for t in ts)}")

    from torch.profiler import ProfilerActivity, profile
    rawindexer.fp8_mqa_logits(*sets[0], clean_logits=clean)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(3):
            rawindexer.fp8_mqa_logits(*sets[i % nsets], clean_logits=clean)
        torch.cuda.synchronize()
    print("GPU activities of 3 public calls (torch.profiler):")
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            print(f"  {ev.name[:90]:90s} {ev.device_time:8.2f} us")


if __name__ == "__main__":
    main()
