"""CUDA graph capture of the launch path on a real GPU (marked ``gpu``: never runs in CI).

A call made while the caller's stream is being captured is captured like a framework op: torch.cuda.graph (whose
default capture mode errors on any synchronisation, any cudaMalloc and any host read of device memory made during
capture, from any thread) and CuPy's stream capture. Each graph is then replayed on fresh inputs copied into the
captured buffers, with the output poisoned with NaN before every replay, and graded against the torch reference
of those inputs.

Also a script: ``python tests/gpu/test_graph_gpu.py`` prints PASS/FAIL lines (what the device run calls).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from test_cuda_gpu import _need_gpu, _windows, grade_gpu, run_checks  # noqa: E402

SHAPE = (512, 4096, 64, 128)  # M, N, H, D


def _fresh(seed: int):
    from rawindexer.testing.torch_reference import make_inputs

    M, N, H, D = SHAPE
    ks, ke = _windows("multi_req", M, N, seed)
    return make_inputs(M, N, H, D, ks, ke, seed)


def _reference(args, clean: bool):
    from rawindexer.testing.torch_reference import torch_fp8_mqa_logits

    return torch_fp8_mqa_logits(*args, clean_logits=clean)


def graph_torch() -> list[tuple[bool, str]]:
    """torch.cuda.graph around fp8_mqa_logits (new output from the graph's pool), the prepared Indexer with out=,
    its bound launch (Indexer.bind) and clean_logits=False; three replays each on new inputs."""
    import torch

    import rawindexer

    results = []
    static = _fresh(100)
    indexer = rawindexer.Indexer(SHAPE[2], SHAPE[3])
    out_buf = torch.empty((SHAPE[0], SHAPE[1]), device="cuda", dtype=torch.float32)
    bound = indexer.bind(*static, out=out_buf)  # bound outside the capture: each call reads the current stream
    variants = {
        "fp8_mqa_logits, output allocated in the graph": lambda: rawindexer.fp8_mqa_logits(*static),
        "Indexer, out=": lambda: indexer(*static, out=out_buf),
        "Indexer.bind(..., out=)(), bound before the capture": bound,
        "fp8_mqa_logits clean_logits=False, out=": lambda: rawindexer.fp8_mqa_logits(*static, clean_logits=False,
                                                                                       out=out_buf),
    }
    for label, call in variants.items():
        clean = "False" not in label
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside capture, as torch recommends
            call()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                captured = call()
        except Exception as exc:  # noqa: BLE001 -- report which variant broke capture
            results.append((False, f"torch graph [{label}]: capture failed: {type(exc).__name__}: {exc}"))
            continue
        for seed in (201, 202, 203):
            fresh = _fresh(seed)
            for dst, src in zip(static, fresh):
                dst.copy_(src)
            captured.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = grade_gpu(captured, _reference(fresh, clean), fresh[4], fresh[5], clean)
            results.append((ok, f"torch graph [{label}] replay on new inputs (seed {seed}): {msg}"))
    return results


def graph_cupy() -> list[tuple[bool, str]]:
    """CuPy stream capture (Stream.begin_capture / end_capture) of fp8_mqa_logits on CuPy arrays, out=; replays."""
    import cupy
    import torch

    import rawindexer

    results = []
    static_t = _fresh(300)
    static = [cupy.from_dlpack(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x) for x in static_t]
    out = cupy.empty((SHAPE[0], SHAPE[1]), dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        rawindexer.fp8_mqa_logits(*static, out=out)  # warm-up: module load and plan outside capture
        stream.synchronize()
        stream.begin_capture()
        try:
            rawindexer.fp8_mqa_logits(*static, out=out)
        finally:
            graph = stream.end_capture()
    for seed in (401, 402):
        fresh = _fresh(seed)
        torch.cuda.synchronize()
        for dst, src in zip(static_t, fresh):
            dst.copy_(src)
        torch.cuda.synchronize()
        out.fill(cupy.nan)
        stream.synchronize()
        graph.launch(stream)
        stream.synchronize()
        ok, msg = grade_gpu(torch.from_dlpack(out), _reference(fresh, True), fresh[4], fresh[5], True)
        results.append((ok, f"CuPy graph replay on new inputs (seed {seed}): {msg}"))
    return results


@pytest.mark.gpu
def test_torch_graph_capture_and_replay():
    _need_gpu()
    res = graph_torch()
    assert res and all(ok for ok, _ in res), "\n".join(m for _, m in res)


@pytest.mark.gpu
def test_cupy_graph_capture_and_replay():
    _need_gpu()
    pytest.importorskip("cupy")
    res = graph_cupy()
    assert res and all(ok for ok, _ in res), "\n".join(m for _, m in res)


def main() -> int:
    return run_checks((graph_torch, graph_cupy), "graph capture")


if __name__ == "__main__":
    sys.exit(main())
