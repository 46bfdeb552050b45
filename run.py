#!/usr/bin/env python3
"""The main job: run one realistic vLLM-style prefill chunk through rawindexer and check it.

    make && python run.py [--device hip|cuda|emulator] [--M 2048 --N 65536] [--heads 32]

Several requests are packed into one chunk (ks jumps at each request boundary, diagonal included, as
vLLM builds the windows). Device: a ROCm GPU through hip-python when there is one, else a CUDA GPU
(the sm_90a twin), else the gfx950 emulator on the CPU at a small shape -- it says which. The result
is graded against the numpy reference; one table is printed. No framework is used: buffers are
allocated and copied through the backend, and the kernel is launched through ``rawindexer.launch``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent


def ensure_built() -> None:
    if not (ROOT / "build" / "manifest.json").exists():
        print("build/ is missing: running make", file=sys.stderr)
        subprocess.check_call(["make", "-C", str(ROOT)])


def pick_device(requested: str | None) -> str:
    from rawindexer.backends import get_backend

    if requested:
        return requested
    for name in ("hip", "cuda"):
        try:
            backend = get_backend(name)
            if backend.device_count() > 0:
                return name
        except Exception:  # no driver / no bindings / no device: try the next one
            continue
    return "emulator"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["hip", "cuda", "emulator"])
    parser.add_argument("--M", type=int)
    parser.add_argument("--N", type=int)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()

    ensure_built()
    sys.path.insert(0, str(ROOT))
    import rawindexer
    from rawindexer.backends import get_backend
    from rawindexer.fp8 import random_e4m3fn
    from rawindexer.grading import grade
    from rawindexer.reference import fp8_mqa_logits_ref
    from rawindexer.windows import multi_req

    device = pick_device(args.device)
    emulated = device == "emulator"
    M = args.M or (64 if emulated else 2048)
    N = args.N or (640 if emulated else 65536)
    H, D = args.heads, args.head_dim
    if emulated:
        print(f"no GPU found: running the gfx950 binary on the emulator (CPU) at a small shape ({M}, {N})",
              file=sys.stderr)
    backend = get_backend(device)

    rng = np.random.default_rng()
    host = {
        "q": random_e4m3fn(rng, (M, H, D)),
        "k": random_e4m3fn(rng, (N, D)),
        "kv_scale": rng.uniform(0.5, 1.5, N).astype(np.float32),
        "weights": (rng.standard_normal((M, H)) * H**-0.5).astype(np.float32),
    }
    host["ks"], host["ke"] = multi_req(M, N, requests=args.requests, diagonal=True)
    out_host = np.full((M, N), np.nan, dtype=np.float32)  # poisoned: unwritten positions show up

    buffers = {name: backend.alloc(a.nbytes) for name, a in host.items()}
    out_buf = backend.alloc(out_host.nbytes)
    try:
        for name, a in host.items():
            backend.copy_from_host(buffers[name].ptr, a)
        backend.copy_from_host(out_buf.ptr, out_host)

        def run_once():
            return rawindexer.launch(
                buffers["q"].ptr, buffers["k"].ptr, buffers["kv_scale"].ptr, buffers["weights"].ptr,
                buffers["ks"].ptr, buffers["ke"].ptr, out_buf.ptr, M=M, N=N, num_heads=H, head_dim=D,
                clean_logits=True, device=device)

        start = time.perf_counter()
        plan = run_once()
        backend.synchronize()
        first = time.perf_counter() - start
        backend.copy_to_host(out_host, out_buf.ptr)
        if emulated:
            timing = f"emulated ({first:.1f} s on the CPU)"
        else:
            start = time.perf_counter()
            for _ in range(args.iters):
                run_once()
            backend.synchronize()
            timing = f"{(time.perf_counter() - start) / args.iters * 1e6:.1f} us (host timer, {args.iters} launches)"
    finally:
        for b in (*buffers.values(), out_buf):
            b.free()

    ref = fp8_mqa_logits_ref(host["q"], host["k"], host["kv_scale"], host["weights"], host["ks"], host["ke"])
    g = grade(out_host, ref, host["ks"], host["ke"], clean_logits=True)
    cfg = plan.config or {}
    rows = [
        ("shape (M, N, H, D)", f"({M}, {N}, {H}, {D}), {args.requests} requests packed, diagonal included"),
        ("backend", f"{device} ({backend.arch})"),
        ("kernel", f"{plan.symbol} grid={plan.grid} block={plan.block}"),
        ("config", ", ".join(f"{k}={v}" for k, v in cfg.items())),
        ("time", timing),
        ("calc_diff", f"{g.diff:.2e} (gate < 1e-3)"),
        ("-inf mask", "ok" if g.mask_ok else "MISMATCH"),
        ("unwritten", str(g.unwritten)),
        ("result", "PASS" if g.ok else "FAIL"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if g.ok else 1


if __name__ == "__main__":
    sys.exit(main())
