"""The per-call host path of the CUDA route, priced on a machine without a GPU.

torch CPU tensors are routed to the CUDA backend (DLPack CPU -> "cuda") whose driver is the fake of
tests/runtime/fake_cuda.py for set-up (contexts, modules, functions) and, for the per-call driver entry points
(cuCtxGetCurrent / cuCtxSetCurrent / cuLaunchKernel), a no-op C library compiled here: everything a call does
in Python and ctypes is measured, nothing of the driver. torch.empty allocates on the CPU here (the CUDA
caching allocator costs about the same order on the H200's host: see the "torch.empty" row there).

    [RAWINDEXER_CUDA_LAUNCH=shim|ctypes|bindings] python bench/host_path_cpu.py [--calls 100000] [--rounds 5]

Prints ns per call (best and median of ``rounds`` rounds of ``calls`` calls, rounds interleaved across entry
points so a loaded machine hits them alike). Dev-machine numbers: read relative to the "for scale" rows.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "runtime")]  # fake_cuda

NOOP_DRIVER_C = r"""
static void *current;
int cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
int cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) { return 0; }
"""


def noop_libcuda(workdir: Path) -> Path:
    """A libcuda stand-in whose three per-call entry points do nothing (so only our side is timed)."""
    src, lib = workdir / "noop_cuda.c", workdir / "libnoop_cuda.so"
    src.write_text(NOOP_DRIVER_C)
    for cc in (["cc"], [sys.executable, "-m", "ziglang", "cc"]):
        try:
            subprocess.run([*cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True,
                           capture_output=True)
            return lib
        except (OSError, subprocess.CalledProcessError):
            continue
    raise RuntimeError("no C compiler (cc or python -m ziglang cc) for the no-op driver")


def setup(lib: Path):
    import pytest
    import torch

    import fake_cuda
    import rawindexer
    from rawindexer import backends, launch_path
    from rawindexer.backends import cuda as cuda_backend
    from rawindexer.testing.paged_cases import make_case

    mp = pytest.MonkeyPatch()
    fake_cuda.install(mp, count=1)
    mp.setattr(backends, "_instances", {})
    mp.setitem(backends.BACKEND_FOR_DEVICE_TYPE, 1, "cuda")  # torch CPU tensors take the CUDA route
    route = os.environ.get("RAWINDEXER_CUDA_LAUNCH", "")
    if route != "bindings":  # the no-op library behind the C launcher (or plain ctypes with =ctypes)
        shim = None if route == "ctypes" else cuda_backend._load_shim()
        extension = None if route in ("ctypes", "shim") else cuda_backend._load_launch_extension()
        mp.setattr(cuda_backend, "_raw_driver", lambda driver: cuda_backend._RawDriver(str(lib), shim, extension))
    mp.setattr(launch_path, "_torch_raw_stream", lambda device_id: 0x50001)
    # the TMA designs encode a CUtensorMap on the host (a driver call): 128 bytes naming the inputs stand in
    from rawindexer.dispatch import sm90_tensor_map
    mp.setattr(sm90_tensor_map, "encoder", lambda ptr, n, head_dim, *layout: (
        b"".join(v.to_bytes(8, "little") for v in (ptr, n, head_dim, *layout)).ljust(128, b"\0")))
    M, N, H, D = 1024, 1024, 64, 128

    def aligned(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """A tensor at a 256-byte aligned address, as the CUDA caching allocator hands out (torch's CPU allocator
        aligns to 64 only, which would send every call down the other-alignment branch)."""
        n = 1
        for d in shape:
            n *= d
        size = torch.empty(0, dtype=dtype).element_size()
        raw = torch.zeros(n * size + 256, dtype=torch.uint8)
        skip = -raw.data_ptr() % 256
        return raw[skip:skip + n * size].view(dtype).view(shape)

    q, k = aligned((M, H, D), torch.float8_e4m3fn), aligned((N, D), torch.float8_e4m3fn)
    kv, w = aligned((N,), torch.float32).fill_(1), aligned((M, H), torch.float32).fill_(1)
    ks = aligned((M,), torch.int32).zero_()
    ke = aligned((M,), torch.int32).copy_(torch.arange(1, M + 1, dtype=torch.int32))
    out = aligned((M, N), torch.float32)
    args = (q, k, kv, w, ks, ke)
    ind = rawindexer.Indexer(H, D)
    raw = rawindexer.Indexer(H, D, device="cuda")
    ptrs = tuple(x.data_ptr() for x in (*args, out))
    f32 = torch.float32
    # decode: B=64 sequences of 4096 keys, next_n 1, H=64, D=128, block size 64 (a serving step's shape)
    case = make_case(np.random.default_rng(0), [4096] * 64, next_n=1, heads=H, head_dim=D, block_size=64,
                     extra_columns=0, spare_blocks=0)

    def aligned_copy(a: np.ndarray) -> torch.Tensor:
        t = aligned(a.shape, torch.from_numpy(a[:0].reshape(-1)).dtype)
        t.copy_(torch.from_numpy(np.ascontiguousarray(a)))
        return t

    pargs = tuple(aligned_copy(getattr(case, n)) for n in ("q", "kv_cache", "weights", "context_lens", "block_table"))
    width = case.max_context_len
    pout = aligned((64, width), f32)
    decode = rawindexer.PagedIndexer(H, D)
    bound = rawindexer.prepare_paged_mqa_logits(*pargs, width, out=pout)
    pptrs = tuple(x.data_ptr() for x in (*pargs, pout))
    pkw = dict(batch=64, next_n=1, num_heads=H, head_dim=D, block_size=64, num_blocks=case.kv_cache.shape[0],
               max_blocks=case.block_table.shape[1], max_context_len=width, stream=0x50001, device="cuda")
    entries = {
        "fp8_mqa_logits(torch) -> new output": lambda: rawindexer.fp8_mqa_logits(*args),
        "fp8_mqa_logits(torch, out=)": lambda: rawindexer.fp8_mqa_logits(*args, out=out),
        "Indexer(torch) -> new output": lambda: ind(*args),
        "Indexer(torch, out=)": lambda: ind(*args, out=out),
        "launch(int pointers, stream=)": lambda: rawindexer.launch(*ptrs, M=M, N=N, num_heads=H, head_dim=D,
                                                                   stream=0x50001, device="cuda"),
        "Indexer.launch_pointers(int pointers)": lambda: raw.launch_pointers(ptrs, M, N, stream=0x50001),
        "decode: fp8_paged_mqa_logits(torch, out=)": lambda: rawindexer.fp8_paged_mqa_logits(*pargs, width, out=pout),
        "decode: PagedIndexer(torch, out=)": lambda: decode(*pargs, width, out=pout),
        "decode: PagedIndexer(torch) -> new output": lambda: decode(*pargs, width),
        "decode: prepare_paged_mqa_logits(...)()": bound,
        "decode: launch_paged(int pointers, stream=)": lambda: rawindexer.launch_paged(*pptrs, **pkw),
        "for scale: torch.empty((M, N)) (CPU)": lambda: torch.empty((M, N), dtype=f32),
        "for scale: a Python call of a lambda": lambda: None,
    }
    for fn in entries.values():  # plan, load, warm
        fn()
    return entries, mp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        entries, mp = setup(noop_libcuda(Path(tmp)))
        try:
            times: dict[str, list[float]] = {name: [] for name in entries}
            clock = time.perf_counter_ns
            for _ in range(args.rounds):
                for name, fn in entries.items():
                    t0 = clock()
                    for _ in range(args.calls):
                        fn()
                    times[name].append((clock() - t0) / args.calls)
        finally:
            mp.undo()
    route = os.environ.get("RAWINDEXER_CUDA_LAUNCH", "") or "default (the C launcher's extension, else the C launcher, if built)"
    print(f"host ns per call, CUDA route ({route}) with a no-op driver, (1024, 1024) H=64 ({args.rounds} rounds of "
          f"{args.calls} calls; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    print("entry point\tbest ns\tmedian ns")
    for name, ts in times.items():
        ts.sort()
        print(f"{name}\t{ts[0]:.0f}\t{ts[len(ts) // 2]:.0f}")


if __name__ == "__main__":
    main()
