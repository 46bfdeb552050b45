"""The main job (``python -m rawindexer run``, ``python run.py``): run one realistic vLLM-style prefill chunk
through rawindexer and grade it.

Several requests are packed into one chunk (ks jumps at each request boundary, diagonal included, as vLLM
builds the windows). Device: a ROCm GPU through hip-python when there is one, else a CUDA GPU (the sm_90a
twin), else the gfx950 emulator on the CPU at a small shape -- it says which. The result is graded against
the numpy reference. No framework is used: buffers are allocated and copied through the backend, and the
kernel is launched through ``rawindexer.launch``.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

DEVICES = ("hip", "cuda", "emulator")


def usable_gpu_backend() -> str | None:
    """The first of "hip", "cuda" whose backend imports and sees a device; None otherwise (never raises)."""
    from .backends import get_backend

    for name in ("hip", "cuda"):
        try:
            if get_backend(name).device_count() > 0:
                return name
        except Exception:  # no driver / no bindings / no device: try the next one
            continue
    return None


@dataclass(frozen=True)
class ChunkResult:
    rows: list[tuple[str, str]]
    ok: bool


def run_chunk(device: str, M: int, N: int, H: int, D: int, requests: int, iters: int) -> ChunkResult:
    """Launch one packed chunk on ``device`` (NaN-poisoned output), grade it, return the table rows."""
    from . import launch
    from .backends import get_backend
    from .fp8 import random_e4m3fn
    from .testing.grading import grade
    from .testing.reference import fp8_mqa_logits_ref
    from .testing.windows import multi_req

    emulated = device == "emulator"
    backend = get_backend(device)
    rng = np.random.default_rng()
    host = {
        "q": random_e4m3fn(rng, (M, H, D)),
        "k": random_e4m3fn(rng, (N, D)),
        "kv_scale": rng.uniform(0.5, 1.5, N).astype(np.float32),
        "weights": (rng.standard_normal((M, H)) * H**-0.5).astype(np.float32),
    }
    host["ks"], host["ke"] = multi_req(M, N, requests=requests, diagonal=True)
    out_host = np.full((M, N), np.nan, dtype=np.float32)  # poisoned: unwritten positions show up

    buffers = {name: backend.alloc(a.nbytes) for name, a in host.items()}
    out_buf = backend.alloc(out_host.nbytes)
    try:
        for name, a in host.items():
            backend.copy_from_host(buffers[name].ptr, a)
        backend.copy_from_host(out_buf.ptr, out_host)

        def run_once():
            return launch(
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
            for _ in range(iters):
                run_once()
            backend.synchronize()
            timing = f"{(time.perf_counter() - start) / iters * 1e6:.1f} us (host timer, {iters} launches)"
    finally:
        for b in (*buffers.values(), out_buf):
            b.free()

    ref = fp8_mqa_logits_ref(host["q"], host["k"], host["kv_scale"], host["weights"], host["ks"], host["ke"])
    g = grade(out_host, ref, host["ks"], host["ke"], clean_logits=True)
    cfg = plan.config or {}
    rows = [
        ("shape (M, N, H, D)", f"({M}, {N}, {H}, {D}), {requests} requests packed, diagonal included"),
        ("backend", f"{device} ({backend.arch})"),
        ("kernel", f"{plan.symbol} grid={plan.grid} block={plan.block}"),
        ("config", ", ".join(f"{k}={v}" for k, v in cfg.items())),
        ("time", timing),
        ("calc_diff", f"{g.diff:.2e} (gate < 1e-3)"),
        ("-inf mask", "ok" if g.mask_ok else "MISMATCH"),
        ("unwritten", str(g.unwritten)),
        ("result", "PASS" if g.ok else "FAIL"),
    ]
    return ChunkResult(rows, g.ok)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, help="default: a GPU when one is usable, else the emulator")
    parser.add_argument("--M", type=int, help="query rows (default 2048 on a GPU, 64 on the emulator)")
    parser.add_argument("--N", type=int, help="keys (default 65536 on a GPU, 640 on the emulator)")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--iters", type=int, default=20)


def main(args: argparse.Namespace) -> int:
    """0 = graded PASS; 1 = FAIL. Expected conditions (no such backend here) are the caller's to report."""
    device = args.device or usable_gpu_backend() or "emulator"
    emulated = device == "emulator"
    M = args.M or (64 if emulated else 2048)
    N = args.N or (640 if emulated else 65536)
    if emulated and not args.device:
        print(f"no GPU found: running the gfx950 binary on the emulator (CPU) at a small shape ({M}, {N})",
              file=sys.stderr)
    result = run_chunk(device, M, N, args.heads, args.head_dim, args.requests, args.iters)
    width = max(len(k) for k, _ in result.rows)
    for k, v in result.rows:
        print(f"{k:<{width}}  {v}")
    return 0 if result.ok else 1
