"""rawindexer on the second GPU of a node, and on two GPUs at once (markers ``gpu`` and ``two_gpus``; run on the
nvidia-h200-x2 machine kind; skipped with fewer than two GPUs).

Tensor-parallel serving runs one rank per GPU, so every rank but the first calls with tensors on a device other
than 0 while torch's current device may still be 0. Checked here:
* torch tensors on cuda:1 (current device 0): the result equals the reference computed on cuda:1, through
  fp8_mqa_logits and the prepared Indexer; the launch lands on device 1's current stream (a busy-wait and a NaN
  fill queued before our call on that stream finish first, or the result would be NaN); device 0 gets no work
  (our call completes while device 0's queue is still busy) and no allocation (its allocated bytes unchanged),
  and the current device is still 0 afterwards;
* the same with CuPy arrays under ``cupy.cuda.Device(1)`` on a non-blocking CuPy stream of device 1;
* two threads, one per GPU, each calling in a loop for a few seconds with fresh inputs: every result right, on
  its own device, no error;
* inputs on mixed devices: one error naming the arguments, nothing launched (the output keeps its poison).

Also a script: ``python tests/gpu/test_two_gpus.py`` prints PASS/FAIL lines.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from test_cuda_gpu import _windows, grade_gpu, run_checks  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]
SHAPE = (1024, 4096, 64, 128)  # M, N, H, D: ~tens of us, long enough that a misordered launch shows


def _need_two_gpus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA GPUs (found {torch.cuda.device_count() if torch.cuda.is_available() else 0})")


def _inputs(device: str, seed: int, shape=SHAPE, mode: str = "causal"):
    from rawindexer.testing.torch_reference import make_inputs, torch_fp8_mqa_logits

    M, N, H, D = shape
    ks, ke = _windows(mode, M, N, seed)
    args = make_inputs(M, N, H, D, ks, ke, seed, device=device)
    return args, torch_fp8_mqa_logits(*args, clean_logits=True)


def torch_on_device_1() -> list[tuple[bool, str]]:
    import torch

    import rawindexer

    torch.cuda.set_device(0)
    results = []
    args, ref = _inputs("cuda:1", 11)
    M, N = ref.shape
    indexer = rawindexer.Indexer(SHAPE[2], SHAPE[3])
    for label, call in (("fp8_mqa_logits", lambda **kw: rawindexer.fp8_mqa_logits(*args, **kw)),
                        ("Indexer", lambda **kw: indexer(*args, **kw))):
        # a new output: on cuda:1, right
        got = call()
        torch.cuda.synchronize(1)
        ok, msg = grade_gpu(got, ref, args[4], args[5], True)
        results.append((ok and got.device == torch.device("cuda:1"), f"{label} cuda:1 -> new output on "
                                                                      f"{got.device}: {msg}"))
        # stream ordering on device 1's current stream; device 0 kept busy and watched
        out = torch.empty((M, N), device="cuda:1", dtype=torch.float32)
        torch.cuda.synchronize(1)
        allocated0 = torch.cuda.memory_allocated(0)
        with torch.cuda.device(0):
            torch.cuda._sleep(400_000_000)  # ~0.2-0.3 s of busy-wait on device 0
            busy0 = torch.cuda.Event()
            busy0.record()
        with torch.cuda.device(1):
            torch.cuda._sleep(40_000_000)  # device 1's current stream: busy-wait, then the poison, then our call
            out.fill_(float("nan"))
        got = call(out=out)
        same_device = torch.cuda.current_device() == 0
        torch.cuda.synchronize(1)
        device0_still_busy = not busy0.query()
        ok, msg = grade_gpu(out, ref, args[4], args[5], True)
        untouched0 = torch.cuda.memory_allocated(0) == allocated0
        results.append((ok and got is out and same_device and device0_still_busy and untouched0,
                        f"{label} cuda:1 out= behind a busy-wait and NaN fill on device 1's current stream: {msg}; "
                        f"current device still 0: {same_device}; done while device 0 still busy: "
                        f"{device0_still_busy}; device 0 allocations unchanged: {untouched0}"))
        torch.cuda.synchronize(0)
    # the persistent-buffer form: bound once, each launch on device 1's current stream of that moment
    out = torch.empty((M, N), device="cuda:1", dtype=torch.float32)
    bound = indexer.bind(*args, out=out)
    with torch.cuda.device(1):
        torch.cuda._sleep(40_000_000)
        out.fill_(float("nan"))
    got = bound()
    same_device = torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    ok, msg = grade_gpu(out, ref, args[4], args[5], True)
    results.append((ok and got is out and same_device, f"Indexer.bind cuda:1 behind a busy-wait and NaN fill on "
                                                       f"device 1's current stream: {msg}; current device still 0: "
                                                       f"{same_device}"))
    return results


def cupy_on_device_1() -> list[tuple[bool, str]]:
    import cupy
    import torch

    import rawindexer

    results = []
    args, ref = _inputs("cuda:1", 12)
    M, N = ref.shape
    with cupy.cuda.Device(1):
        c = [cupy.from_dlpack(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x) for x in args]
        got = rawindexer.fp8_mqa_logits(*c)
        cupy.cuda.Device(1).synchronize()
        ok, msg = grade_gpu(torch.from_dlpack(got), ref, args[4], args[5], True)
        results.append((ok and got.device.id == 1, f"CuPy under Device(1) -> new output on device "
                                                   f"{got.device.id}: {msg}"))
        s = cupy.cuda.Stream(non_blocking=True)
        out = cupy.empty((M, N), dtype=cupy.float32)
        with s:
            with torch.cuda.device(1), torch.cuda.stream(torch.cuda.ExternalStream(s.ptr, device="cuda:1")):
                torch.cuda._sleep(40_000_000)
            out.fill(cupy.nan)
            got = rawindexer.fp8_mqa_logits(*c, out=out)
        s.synchronize()
        ok, msg = grade_gpu(torch.from_dlpack(out), ref, args[4], args[5], True)
        results.append((ok and got is out, f"CuPy under Device(1), out= on a non-blocking stream behind a busy-wait "
                                           f"and NaN fill: {msg}"))
    return results


def two_threads(seconds: float = 4.0) -> list[tuple[bool, str]]:
    import torch

    import rawindexer

    indexer = rawindexer.Indexer(SHAPE[2], SHAPE[3])  # one object shared by both threads
    report: dict[int, list] = {0: [], 1: []}

    def worker(device_id: int) -> None:
        torch.cuda.set_device(device_id)
        deadline = time.time() + seconds
        seed = 1000 * (device_id + 1)
        while time.time() < deadline:
            seed += 1
            shape = (256 + 128 * (seed % 3), 2048, SHAPE[2], SHAPE[3])
            try:
                args, ref = _inputs(f"cuda:{device_id}", seed, shape, "multi_req")
                out = torch.full(ref.shape, float("nan"), device=f"cuda:{device_id}")
                use = indexer if seed % 2 else rawindexer.fp8_mqa_logits
                got = use(*args, out=out)
                torch.cuda.synchronize(device_id)
                ok, msg = grade_gpu(got, ref, args[4], args[5], True)
                report[device_id].append((ok and got.device.index == device_id, msg))
            except Exception as exc:  # noqa: BLE001 -- reported below
                report[device_id].append((False, f"{type(exc).__name__}: {exc}"))

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = []
    for d in (0, 1):
        bad = [m for ok, m in report[d] if not ok]
        results.append((bool(report[d]) and not bad, f"thread on cuda:{d}: {len(report[d])} calls, "
                                                     f"{len(bad)} wrong{': ' + bad[0] if bad else ''}"))
    return results


def mixed_devices() -> list[tuple[bool, str]]:
    import torch

    import rawindexer

    args0, _ = _inputs("cuda:0", 13)
    args1, _ = _inputs("cuda:1", 13)
    mixed = list(args0)
    mixed[3] = args1[3]  # weights on cuda:1
    out = torch.full((SHAPE[0], SHAPE[1]), float("nan"), device="cuda:0")
    torch.cuda.synchronize(0)
    try:
        rawindexer.fp8_mqa_logits(*mixed, out=out)
        message = ""
    except ValueError as exc:
        message = str(exc)
    torch.cuda.synchronize(0)
    nothing_written = bool(torch.isnan(out).all())
    named = message.startswith("weights:") and "mixed devices" in message
    return [(named and nothing_written, f"mixed devices: error {message!r}; nothing written: {nothing_written}")]


def test_torch_on_cuda_1():
    _need_two_gpus()
    res = torch_on_device_1()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


def test_cupy_on_device_1():
    _need_two_gpus()
    pytest.importorskip("cupy")
    res = cupy_on_device_1()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


def test_two_threads_one_per_gpu():
    _need_two_gpus()
    res = two_threads()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


def test_mixed_devices_one_error_nothing_launched():
    _need_two_gpus()
    res = mixed_devices()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


def main() -> int:
    import torch

    if torch.cuda.device_count() < 2:
        print(f"SKIP: {torch.cuda.device_count()} GPU(s); needs two")
        return 0
    return run_checks((torch_on_device_1, cupy_on_device_1, two_threads, mixed_devices), "two GPUs")


if __name__ == "__main__":
    sys.exit(main())
