"""The public entry points: ``fp8_mqa_logits`` (any DLPack framework), ``launch`` (raw pointers),
``is_supported``.

Flow of one call: borrow every array zero-copy through DLPack -> validate -> pick the backend from the
arrays' device (CPU -> gfx950 emulator, ROCm -> hip, CUDA -> sm_90a twin) -> the kernel family plans
the launch (variant, grid, block, kernargs) -> the backend launches on the caller's stream. No
synchronize: the result is ready when the caller's stream says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dlpack
from .backends import Backend, BufferSpan, backend_for_device_type, get_backend
from .dispatch import family_for
from .dispatch.base import LaunchPlan, Pointers, Problem, Tunables
from .validation import Dims, validate

_modules: dict[tuple[str, int, str], Any] = {}
_functions: dict[tuple[str, int, str, str], Any] = {}


def is_supported(num_heads: int, head_dim: int, arch: str = "gfx950") -> bool:
    """True when a built kernel for ``arch`` ("gfx950" or "sm_90a") serves this (num_heads, head_dim);
    callers route other shapes elsewhere instead of tripping an error."""
    return family_for(arch).is_supported(int(num_heads), int(head_dim))


def _function(backend: Backend, device_id: int, symbol: str) -> Any:
    key = (backend.name, device_id, backend.arch)
    if key not in _modules:
        _modules[key] = backend.load_module(family_for(backend.arch).code_object())
    fkey = (*key, symbol)
    if fkey not in _functions:
        _functions[fkey] = backend.get_function(_modules[key], symbol)
    return _functions[fkey]


def _spans(dims: Dims, ptrs: Pointers, out_row_stride: int) -> list[BufferSpan]:
    """The memory one launch may touch, for the emulator's memcheck (GPU backends ignore it)."""
    M, N, H, D = dims.M, dims.N, dims.heads, dims.head_dim
    out_bytes = ((M - 1) * out_row_stride + N) * 4 if M and N else 0
    return [
        BufferSpan(ptrs.q, M * H * D), BufferSpan(ptrs.k, N * D), BufferSpan(ptrs.kv_scale, 4 * N),
        BufferSpan(ptrs.weights, 4 * M * H), BufferSpan(ptrs.cu_seqlen_ks, 4 * M),
        BufferSpan(ptrs.cu_seqlen_ke, 4 * M), BufferSpan(ptrs.out, out_bytes, writable=True),
    ]


def _plan_and_launch(backend: Backend, device_id: int, dims: Dims, ptrs: Pointers, out_row_stride: int,
                     clean_logits: bool, tunables: Tunables, stream: int) -> LaunchPlan | None:
    family = family_for(backend.arch)
    if tunables.variant is not None and backend.arch != "gfx950":
        raise ValueError(f"variant: only the gfx950 kernel has variants; got {tunables.variant!r} for {backend.arch}")
    if not family.is_supported(dims.heads, dims.head_dim):
        raise ValueError(f"(num_heads, head_dim): expected a shape with a built {backend.arch} kernel "
                         f"(is_supported() says which), got ({dims.heads}, {dims.head_dim})")
    if dims.M == 0 or dims.N == 0:
        return None  # nothing to compute, nothing to write
    problem = Problem(dims.M, dims.N, dims.heads, dims.head_dim, out_row_stride, bool(clean_logits))
    plan = family.plan(problem, tunables, ptrs, backend.compute_units(device_id))
    if hasattr(backend, "set_device"):
        backend.set_device(device_id)
    backend.launch(_function(backend, device_id, plan.symbol), plan.grid, plan.block, plan.kernargs,
                   stream=stream, buffers=_spans(dims, ptrs, out_row_stride), shared_mem=plan.shared_mem)
    return plan


def launch(q_ptr: int, k_ptr: int, kv_scale_ptr: int, weights_ptr: int, cu_seqlen_ks_ptr: int,
           cu_seqlen_ke_ptr: int, out_ptr: int, *, M: int, N: int, num_heads: int, head_dim: int,
           out_row_stride: int | None = None, clean_logits: bool = True, stream: int = 0,
           device: str = "hip", device_id: int = 0, block_m: int = 0, split_n: int = 0, num_warps: int = 0,
           unroll2: bool | None = None, reverse_rows: bool | None = None,
           variant: str | None = None) -> LaunchPlan | None:
    """Raw entry for hosts without a DLPack framework: device pointers as integers.

    q [M, num_heads, head_dim] and k [N, head_dim] are contiguous fp8 e4m3fn bytes; kv_scale [N],
    weights [M, num_heads] contiguous float32; cu_seqlen_ks / cu_seqlen_ke [M] int32; out [M, N]
    float32 with rows ``out_row_stride`` (>= N, default N) elements apart. ``device`` is a backend name
    ("hip", "cuda" or "emulator", whose pointers are host addresses). Returns the plan it launched
    (None when M or N is 0: nothing is launched).
    """
    out_row_stride = N if out_row_stride is None else int(out_row_stride)
    if out_row_stride < N:
        raise ValueError(f"out_row_stride: expected >= N={N}, got {out_row_stride}")
    for name, value in [("M", M), ("N", N), ("num_heads", num_heads), ("head_dim", head_dim)]:
        if int(value) < 0:
            raise ValueError(f"{name}: expected >= 0, got {value}")
    ptrs = Pointers(q_ptr, k_ptr, kv_scale_ptr, weights_ptr, cu_seqlen_ks_ptr, cu_seqlen_ke_ptr, out_ptr)
    tunables = Tunables(block_m, split_n, num_warps, unroll2, reverse_rows, variant)
    return _plan_and_launch(get_backend(device), device_id, Dims(M, N, num_heads, head_dim), ptrs,
                            out_row_stride, clean_logits, tunables, stream)


# ---------------------------------------------------------------------------------------------------
# Streams and output allocation in the caller's framework
# ---------------------------------------------------------------------------------------------------
def _current_stream(framework: str, backend: Backend, device_id: int) -> int:
    """The caller's current stream, so we launch where the caller's own work is queued."""
    if backend.name == "emulator":
        return 0
    if framework == "torch":
        import torch

        return int(torch.cuda.current_stream(device_id).cuda_stream)
    if framework == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0  # JAX and raw producers: the default stream, synchronised through the DLPack handshake


def _dlpack_stream(backend: Backend, stream: int) -> int | None:
    """The stream argument the DLPack producer expects from a consumer on ``stream``."""
    if backend.name == "emulator":
        return None
    if backend.name == "cuda":
        return stream or 1  # 1 = the legacy default stream (0 is not allowed for CUDA)
    return stream or 0


@dataclass
class _DeviceBuffer:
    """Owns backend memory handed to a framework through DLPack; freed when the framework drops it."""

    allocation: Any

    def __del__(self) -> None:
        self.allocation.free()


def _allocate_out(framework: str, like: Any, backend: Backend, device: tuple[int, int], M: int, N: int,
                  stream: int) -> tuple[Any, Any]:
    """(buffer the kernel writes, function giving the caller's result once the launch is queued)."""
    if framework == "torch":
        import torch

        out = torch.empty((M, N), dtype=torch.float32, device=like.device)
        return out, lambda: out
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(device[1]):
            out = cupy.empty((M, N), dtype=cupy.float32)
        return out, lambda: out
    if backend.name == "emulator":
        # The emulator finishes inside the launch call, so frameworks whose arrays are immutable (JAX)
        # import the result afterwards; an earlier import could copy the still-empty buffer.
        out = np.empty((M, N), dtype=np.float32)
        if framework in ("numpy", "unknown"):
            return out, lambda: out
        return out, lambda: dlpack.import_into(framework, dlpack.DLPackArray.from_numpy(out))
    allocation = backend.alloc(4 * M * N)
    array = dlpack.DLPackArray(allocation.ptr, (M, N), "float32", device, owner=_DeviceBuffer(allocation))

    def result() -> Any:
        # Imported after the launch is queued; the framework's stream then waits for ours (the DLPack
        # handshake), since a framework may copy or read the buffer on its own stream right away.
        array.ready = lambda consumer: backend.order_after(consumer, stream)
        return dlpack.import_into(framework, array)

    return array, result


def fp8_mqa_logits(q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                   clean_logits: bool = True, out: Any = None, *, block_m: int = 0, split_n: int = 0,
                   num_warps: int = 0, unroll2: bool | None = None, reverse_rows: bool | None = None,
                   variant: str | None = None, stream: int | None = None) -> Any:
    """logits[m, n] = sum_h relu(<q[m,h], k[n]>) * kv_scale[n] * weights[m,h] for n in [ks[m], ke[m]).

    Args (any objects with ``__dlpack__``: torch, CuPy, JAX, numpy arrays):
        q_fp8: [M, H, D] float8_e4m3fn (or its uint8 bytes), contiguous.
        k_fp8: [N, D] float8_e4m3fn (or uint8), contiguous.
        kv_scale: [N] float32, >= 0 (the kernel applies it after the ReLU).
        weights: [M, H] float32.
        cu_seqlen_ks, cu_seqlen_ke: [M] int32, each row's key window [ks, ke), clamped to [0, N); any
            int32 is legal (empty when ke <= ks after clamping).
        clean_logits: write -inf outside each row's window; when False those positions are not written.
        out: optional [M, N] float32 destination whose row stride may be any value >= N.
        block_m, split_n, num_warps, unroll2, reverse_rows: tunables; 0 / None = host heuristic.
        variant: gfx950 kernel design, "seed" (the seed's permlane head reduce, the baseline), "mr"
            (weighted head sum on a bf16 MFMA) or "mrp" (the same with a packed-int16 ReLU); None = default.
        stream: the stream to launch on; None = the caller framework's current stream.
    Returns:
        logits [M, N] float32 in the caller's framework (``out`` itself when given).
    Arrays on the CPU run on the gfx950 emulator (slow; for tests and small shapes), ROCm arrays on the
    gfx950 kernel through hip-python, CUDA arrays on the sm_90a twin.
    """
    named = {"q_fp8": q_fp8, "k_fp8": k_fp8, "kv_scale": kv_scale, "weights": weights,
             "cu_seqlen_ks": cu_seqlen_ks, "cu_seqlen_ke": cu_seqlen_ke}
    for name, obj in named.items():
        if not hasattr(obj, "__dlpack_device__"):
            raise dlpack.DLPackError(f"{name}: expected an array with __dlpack__ (torch, CuPy, JAX, numpy), "
                                     f"got {type(obj).__name__}")
    device = tuple(int(x) for x in q_fp8.__dlpack_device__())
    backend = backend_for_device_type(device[0])
    framework = dlpack.framework_of(q_fp8)
    if stream is None:
        stream = _current_stream(framework, backend, device[1])
    dl_stream = _dlpack_stream(backend, stream)
    views = {name: dlpack.from_dlpack(obj, name=name, stream=dl_stream) for name, obj in named.items()}
    out_view = dlpack.from_dlpack(out, name="out", stream=dl_stream) if out is not None else None
    dims = validate(*views.values(), out_view)
    if backend.name == "emulator":
        scale = views["kv_scale"].numpy()
        if (scale < 0).any():
            raise ValueError(f"kv_scale: expected values >= 0 (the scale is applied after the ReLU), "
                             f"got min {float(scale.min())}")
    result = lambda: out  # noqa: E731
    if out is None:
        out, result = _allocate_out(framework, q_fp8, backend, device, dims.M, dims.N, stream)
        out_view = dlpack.from_dlpack(out, name="out", stream=dl_stream)
    ptrs = Pointers(*(views[n].ptr for n in named), out_view.ptr)
    out_row_stride = out_view.strides[0] if dims.M > 1 else dims.N
    tunables = Tunables(int(block_m), int(split_n), int(num_warps), unroll2, reverse_rows, variant)
    _plan_and_launch(backend, device[1], dims, ptrs, out_row_stride, clean_logits, tunables, stream)
    return result()
