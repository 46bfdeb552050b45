"""Benchmark: instructions per second of the emulator on the shipped fp8_mqa_logits kernel.

    python -m rawindexer.emulator.bench [--M 128] [--N 2048] [--heads 32] [--dim 128] [--block-m 4]
                                        [--warps 4] [--split 1] [--table]

Runs the causal-window case (ks = 0, ke = row + N - M) once and prints time, instructions/s and,
with --table, the per-class / per-opcode statistics.
"""
from __future__ import annotations

import argparse
import json
import struct
import time
from pathlib import Path

import numpy as np

from ..kernel_files import manifest_path
from .launcher import Emulator

def run(M: int, N: int, H: int, D: int, bm: int, warps: int, split: int, unroll: int = 1,
        build_dir: Path | None = None):
    """Launch once on random inputs; returns (LaunchStats, wall seconds including setup). ``build_dir``:
    the kernel folder (None: the shipped kernels, see rawindexer.kernel_files)."""
    t0 = time.perf_counter()
    manifest = manifest_path(build_dir)
    image = (manifest.parent / "fp8_mqa_logits.gfx950.hsaco").read_bytes()
    sym = f"fp8_mqa_logits_h{H}_d{D}_bm{bm}_u{unroll}"
    entry = json.loads(manifest.read_text())["targets"]["gfx950"]["kernels"][sym]
    rng = np.random.default_rng(0)
    q = rng.integers(0, 0x7F, size=(M, H, D), dtype=np.uint8)
    k = rng.integers(0, 0x7F, size=(N, D), dtype=np.uint8)
    kv = rng.random(N).astype(np.float32)
    w = rng.standard_normal((M, H)).astype(np.float32)
    ks = np.zeros(M, np.int32)
    ke = (np.arange(M) + (N - M)).astype(np.int32)
    out = np.empty((M, N), np.float32)
    vals = [q.ctypes.data, k.ctypes.data, kv.ctypes.data, w.ctypes.data, ks.ctypes.data, ke.ctypes.data,
            out.ctypes.data, N, M, N, split, warps, 1]
    buf = bytearray(entry["kernarg_size"])
    for a, v in zip(entry["args"], vals):
        struct.pack_into("<q" if a["size"] == 8 else "<i", buf, a["offset"], v)
    spans = [(x.ctypes.data, x.nbytes, False) for x in (q, k, kv, w, ks, ke)] + [(out.ctypes.data, out.nbytes, True)]
    stats = Emulator(image).launch(sym, (-(-M // bm), split, 1), (64 * warps, 1, 1), bytes(buf), spans)
    return stats, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--M", type=int, default=128)
    p.add_argument("--N", type=int, default=2048)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--block-m", type=int, default=4)
    p.add_argument("--warps", type=int, default=4)
    p.add_argument("--split", type=int, default=1)
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    stats, wall = run(a.M, a.N, a.heads, a.dim, a.block_m, a.warps, a.split)
    print(f"fp8_mqa_logits M={a.M} N={a.N} H={a.heads} D={a.dim} BLOCK_M={a.block_m} warps={a.warps} "
          f"split_n={a.split}: {stats.instructions} instructions, {stats.waves} waves, "
          f"{stats.seconds:.2f} s launch ({stats.cpu_seconds:.2f} s CPU, {wall:.2f} s with setup), "
          f"{stats.instructions_per_second:,.0f} instructions/s")
    if a.table:
        print(stats.table())


if __name__ == "__main__":
    main()
