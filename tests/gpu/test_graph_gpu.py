"""The launch path's bound state on a real GPU (marked ``gpu``: never runs in CI): CUDA graph capture, and the
tensor maps bound per pointer.

A call made while the caller's stream is being captured is captured like a framework op: torch.cuda.graph (whose
default capture mode errors on any synchronisation, any cudaMalloc and any host read of device memory made during
capture, from any thread) and CuPy's stream capture. Each graph is then replayed on fresh inputs copied into the
captured buffers, with the output poisoned with NaN before every replay, and graded against the torch reference
of those inputs. torch's capture runs at two shapes: one of "wgpr" and one where the default is "tmaq", whose
kernargs hold tensor maps of K and Q.

The maps hold addresses, so the launch path binds one launch per K pointer (per (K, Q) pair for "tmaq"):
:func:`maps_per_pointer` calls the default at a "tmaq" shape on several live input sets with distinct contents, in an
order that changes only Q, only K, and goes back to an earlier pair; a launch with another call's map would read
that call's data and fail its grade.

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
TMAQ_SHAPE = (1024, 1024, 64, 128)  # the default's "tmaq" (Q and K tensor maps in the kernargs)


def _fresh(seed: int, shape: tuple[int, int, int, int] = SHAPE):
    from rawindexer.testing.torch_reference import make_inputs

    M, N, H, D = shape
    ks, ke = _windows("multi_req", M, N, seed)
    return make_inputs(M, N, H, D, ks, ke, seed)


def _reference(args, clean: bool):
    from rawindexer.testing.torch_reference import torch_fp8_mqa_logits

    return torch_fp8_mqa_logits(*args, clean_logits=clean)


def graph_torch() -> list[tuple[bool, str]]:
    """torch.cuda.graph around fp8_mqa_logits (new output from the graph's pool), the prepared Indexer with out=,
    its bound launch (Indexer.bind) and clean_logits=False; three replays each on new inputs; at SHAPE and at
    TMAQ_SHAPE."""
    return [r for shape in (SHAPE, TMAQ_SHAPE) for r in _graph_torch(shape)]


def _graph_torch(shape: tuple[int, int, int, int]) -> list[tuple[bool, str]]:
    import torch

    import rawindexer

    results = []
    static = _fresh(100, shape)
    indexer = rawindexer.Indexer(shape[2], shape[3])
    out_buf = torch.empty((shape[0], shape[1]), device="cuda", dtype=torch.float32)
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
            results.append((False, f"torch graph {shape} [{label}]: capture failed: {type(exc).__name__}: {exc}"))
            continue
        for seed in (201, 202, 203):
            fresh = _fresh(seed, shape)
            for dst, src in zip(static, fresh):
                dst.copy_(src)
            captured.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = grade_gpu(captured, _reference(fresh, clean), fresh[4], fresh[5], clean)
            results.append((ok, f"torch graph {shape} [{label}] replay on new inputs (seed {seed}): {msg}"))
    return results


def maps_per_pointer() -> list[tuple[bool, str]]:
    """The default at TMAQ_SHAPE (H 64 and H 32) on three live input sets A, B, C of distinct contents, called as A,
    (A's K, B's Q), (B's K, A's Q), B, A, C, A: each launch must carry the maps of its own K and Q. The kernel is
    checked to be "tmaq" (the plan names it); each output NaN-poisoned and graded against its own inputs."""
    import torch

    import rawindexer

    results = []
    for heads in (64, 32):
        shape = (TMAQ_SHAPE[0], TMAQ_SHAPE[1], heads, TMAQ_SHAPE[3])
        sets = {name: _fresh(500 + 10 * heads + i, shape) for i, name in enumerate("ABC")}
        ks, ke = sets["A"][4:]
        out = torch.full((shape[0], shape[1]), float("nan"), device="cuda", dtype=torch.float32)
        template = rawindexer.launch(*(t.data_ptr() for t in (*sets["A"], out)), M=shape[0], N=shape[1],
                                     num_heads=heads, head_dim=shape[3], stream=torch.cuda.current_stream().cuda_stream,
                                     device="cuda")
        torch.cuda.synchronize()
        ok, msg = grade_gpu(out, _reference(sets["A"], True), ks, ke, True)
        results.append((ok and template.symbol.endswith("_tmaq"),
                        f"maps per pointer H {heads}, raw launch of A ran {template.symbol}: {msg}"))
        order = [("A", "A"), ("A", "B"), ("B", "A"), ("B", "B"), ("A", "A"), ("C", "C"), ("A", "A")]  # (K, Q)
        for k_of, q_of in order:
            q, _, _, weights, ks, ke = sets[q_of]
            _, k, kv_scale, _, _, _ = sets[k_of]
            args = (q, k, kv_scale, weights, ks, ke)
            out.fill_(float("nan"))
            rawindexer.fp8_mqa_logits(*args, out=out)
            torch.cuda.synchronize()
            ok, msg = grade_gpu(out, _reference(args, True), ks, ke, True)
            results.append((ok, f"maps per pointer H {heads}, K of {k_of}, Q of {q_of}: {msg}"))
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


@pytest.mark.gpu
def test_tensor_maps_follow_each_calls_pointers():
    _need_gpu()
    res = maps_per_pointer()
    assert res and all(ok for ok, _ in res), "\n".join(m for _, m in res)


def main() -> int:
    return run_checks((graph_torch, graph_cupy, maps_per_pointer), "graph capture and tensor maps")


if __name__ == "__main__":
    sys.exit(main())
