"""The public entry points: :class:`Indexer` (the prepared launch), ``fp8_mqa_logits`` (any DLPack framework),
``launch`` (raw pointers), ``is_supported``.

A serving loop calls the indexer once per layer per step, so a call must cost microseconds of host time.
Everything that does not depend on the call is resolved once: the backend, the per-device module and
function, the device's compute units (:class:`_Device`), and per distinct call description -- shapes,
strides, dtypes, devices, clean_logits, pointer alignment -- the validation and the launch plan with its
pointers left as holes (:class:`_Shape`, :class:`_Prepared`). A call then reads pointers and descriptions
(torch and CuPy arrays through their own attributes, anything else through DLPack), looks its description
up, writes seven pointers into a reused kernarg buffer and launches on the caller's current stream of the
inputs' device. Nothing synchronises, nothing reads device memory on the host, and outputs are allocated
through the caller's framework, so a call made while the caller's stream is captured into a CUDA graph
(torch.cuda.graph, CuPy graphs) is captured like any framework op.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import dlpack
from .backends import Backend, BufferSpan, backend_for_device_type, get_backend
from .backends.base import PackedKernargs
from .dispatch import family_for
from .dispatch.base import ALIGNMENT_BITS, LaunchTemplate, Problem, Tunables
from .validation import Dims, Operand, ValidationError, as_bool, as_int, check_fp8_format, check_sizes, validate

_ARG_NAMES = ("q_fp8", "k_fp8", "kv_scale", "weights", "cu_seqlen_ks", "cu_seqlen_ke")
#: distinct call descriptions kept per Indexer before the cache starts over (a serving loop sees a handful)
MAX_CACHED_SHAPES = 512
#: the targets a backend runs besides its own (``arch=``): ROCm GPUs and the emulator run gfx950 or gfx942
RUNS_ON: dict[str, tuple[str, ...]] = {"hip": ("gfx950", "gfx942"), "emulator": ("gfx950", "gfx942")}


def is_supported(num_heads: int, head_dim: int, arch: str = "gfx950") -> bool:
    """True when a built kernel for ``arch`` ("gfx950", "gfx942" or "sm_90a") serves this (num_heads, head_dim);
    callers route other shapes elsewhere instead of tripping an error. Ints (or bools) only."""
    return family_for(arch).is_supported(as_int("num_heads", num_heads), as_int("head_dim", head_dim))


# ---------------------------------------------------------------------------------------------------
# Reading arrays: a framework's own attributes where we know them (torch, CuPy), DLPack otherwise.
# Each reader returns (ptr, description, readonly, keepalive); description = (shape, strides, dtype, device)
# is what validation and the plan depend on, so it is the cache key.
# ---------------------------------------------------------------------------------------------------
_Read = tuple  # (ptr, (shape, strides, dtype name, (device_type, device_id)), readonly, keepalive)

_TORCH_DTYPES: dict[Any, str] = {}
_TORCH_GPU_TYPE = dlpack.DL_CUDA


def _torch_dtype_name(dtype: Any) -> str:
    name = _TORCH_DTYPES.get(dtype)
    if name is None:
        text = str(dtype).removeprefix("torch.")
        try:
            name = dlpack.dtype_from_name(text).name
        except dlpack.DLPackError:
            name = text  # not a DLPack type; validation names it
        _TORCH_DTYPES[dtype] = name
    return name


def _read_torch(t: Any, name: str, dl_stream: Any) -> _Read | None:
    """torch.Tensor through its attributes: the same pointer, shape, strides, dtype and device that
    ``t.__dlpack__()`` exports (tests/runtime/test_launch_path.py checks both routes agree), without a capsule.
    None for tensors this route does not describe (devices other than CPU / CUDA / ROCm)."""
    if t.is_cuda:
        device = (_TORCH_GPU_TYPE, t.get_device())
    elif t.is_cpu:
        device = (dlpack.DL_CPU, 0)
    else:
        return None
    return t.data_ptr(), (t.shape, t.stride(), _torch_dtype_name(t.dtype), device), False, None


def _read_cupy(a: Any, name: str, dl_stream: Any) -> _Read | None:
    """cupy.ndarray through its attributes (byte strides turned into elements)."""
    itemsize = a.itemsize
    strides = a.strides
    if any(s % itemsize for s in strides):
        return None  # not expressible in elements: DLPack refuses it with its own message
    memptr = a.data
    return (memptr.ptr, (a.shape, tuple(s // itemsize for s in strides), a.dtype.name,
                         (_CUPY_GPU_TYPE, memptr.device_id)), False, None)


_CUPY_GPU_TYPE = dlpack.DL_CUDA


def _read_dlpack(obj: Any, name: str, dl_stream: Any) -> _Read:
    """Any ``__dlpack__`` producer: borrow it zero-copy (the view is kept alive until the launch is queued)."""
    view = dlpack.from_dlpack(obj, name=name, stream=dl_stream)
    return view.ptr, (view.shape, view.strides, view.dtype.name, view.device), view.readonly, view


#: exact array type -> (framework name, fast reader or None); filled on first sight of a type
_TYPES: dict[type, tuple[str, Callable | None]] = {}
#: torch.Tensor once torch arrays have been seen (the all-torch call takes a shorter path), and what that path
#: allocates outputs with
_TorchTensor: type | None = None
_torch_empty: Callable[..., Any] | None = None
_torch_empty_like: Callable[..., Any] | None = None
_torch_float32: Any = None
#: the seven alignments of pointers whose low ALIGNMENT_BITS are zero
_ALIGNED = (0,) * 7


def _torch_key(tensors: tuple, clean: bool, out: Any) -> tuple:
    """The cache key of an all-torch call: everything validation and the plan depend on, read off the tensors
    (Indexer.__call__ builds the same tuple inline; a test checks they agree). Inputs enter with is_contiguous()
    rather than their strides: validation asks exactly that of them (torch's contiguity ignores size-1 dims and
    empty tensors, as validation's is_compact does: a test checks they agree) and the plan reads no input stride; a
    miss reads the strides. get_device() is -1 on the CPU and the ordinal on a GPU; which kind of GPU was settled when
    the key was first validated (a process does not mix CUDA tensors with another GPU kind's). out's requires_grad is
    in it so a hit never skips that check."""
    key: list = []
    for t in tensors:
        key += (t.shape, t.is_contiguous(), t.dtype, t.get_device())
    key.append(clean)
    key.append(None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.requires_grad))
    return tuple(key)


def _classify(cls: type, obj: Any) -> tuple[str, Callable | None]:
    entry = _TYPES.get(cls)
    if entry is None:
        framework = dlpack.framework_of(obj)
        reader = None
        if framework == "torch":
            import torch

            global _TORCH_GPU_TYPE
            _TORCH_GPU_TYPE = dlpack.DL_ROCM if getattr(torch.version, "hip", None) else dlpack.DL_CUDA
            reader = _read_torch if isinstance(obj, torch.Tensor) else None
            global _TorchTensor, _torch_empty, _torch_empty_like, _torch_float32
            _torch_empty, _torch_empty_like, _torch_float32 = torch.empty, torch.empty_like, torch.float32
            _TorchTensor = torch.Tensor
        elif framework == "cupy":
            import cupy

            global _CUPY_GPU_TYPE
            _CUPY_GPU_TYPE = dlpack.DL_ROCM if getattr(cupy.cuda.runtime, "is_hip", False) else dlpack.DL_CUDA
            reader = _read_cupy if isinstance(obj, cupy.ndarray) else None
        entry = _TYPES[cls] = (framework, reader)
    return entry


def _device_of(obj: Any, name: str) -> tuple[int, int]:
    get = getattr(obj, "__dlpack_device__", None)
    if get is None:
        raise dlpack.DLPackError(f"{name}: expected an array with __dlpack__ (torch, CuPy, JAX, numpy), "
                                 f"got {type(obj).__name__}")
    dev = get()
    return int(dev[0]), int(dev[1])


# ---------------------------------------------------------------------------------------------------
# Streams and outputs in the caller's framework
# ---------------------------------------------------------------------------------------------------
_torch_raw_stream: Callable[[int], int] | None = None


def _torch_raw_stream_fn() -> Callable[[int], int]:
    """f(device_id) -> torch's current stream of that device as a raw handle (what torch's own Triton launcher
    reads: no Stream object is built), falling back to the public API."""
    global _torch_raw_stream
    if _torch_raw_stream is None:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else (
            lambda d: int(torch.cuda.current_stream(d).cuda_stream))
    return _torch_raw_stream


def _torch_stream(device_id: int) -> int:
    """torch's current stream of ``device_id`` as a raw handle."""
    return _torch_raw_stream_fn()(device_id)


def _cupy_stream(device_id: int) -> int:
    import cupy

    try:
        return int(cupy.cuda.get_current_stream(device_id).ptr)
    except TypeError:  # older CuPy: the current device's stream only
        with cupy.cuda.Device(device_id):
            return int(cupy.cuda.get_current_stream().ptr)


_STREAM_OF_FRAMEWORK: dict[str, Callable[[int], int]] = {"torch": _torch_stream, "cupy": _cupy_stream}


@dataclass
class _DeviceBuffer:
    """Owns backend memory handed to a framework through DLPack; freed when the framework drops it."""

    allocation: Any

    def __del__(self) -> None:
        self.allocation.free()


def _allocate_out(framework: str, like: Any, backend: Backend, device: tuple[int, int], M: int, N: int,
                  stream: int) -> tuple[Any, int, Callable[[], Any]]:
    """(output the caller gets, its device pointer, function giving the caller's result once the launch is
    queued). torch and CuPy allocate through their own allocators (graph-capture safe), and their result is
    the array itself: nothing is re-imported."""
    if framework == "torch":
        import torch

        out = torch.empty((M, N), dtype=torch.float32, device=like.device)
        return out, out.data_ptr(), lambda: out
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(device[1]):
            out = cupy.empty((M, N), dtype=cupy.float32)
        return out, out.data.ptr, lambda: out
    if backend.dlpack_device_type == dlpack.DL_CPU:
        # The emulator finishes inside the launch call, so frameworks whose arrays are immutable (JAX)
        # import the result afterwards; an earlier import could copy the still-empty buffer.
        out = np.empty((M, N), dtype=np.float32)
        if framework in ("numpy", "unknown"):
            return out, out.ctypes.data, lambda: out
        return out, out.ctypes.data, lambda: dlpack.import_into(framework, dlpack.DLPackArray.from_numpy(out))
    allocation = backend.alloc(4 * M * N, device[1])
    array = dlpack.DLPackArray(allocation.ptr, (M, N), "float32", device, owner=_DeviceBuffer(allocation))

    def ready(consumer_stream: int | None) -> None:
        # The DLPack handshake: the consumer's stream waits for our launch (nothing when it is our stream).
        # A consumer may export from another thread or device, so the launch's device is made current.
        previous = backend.set_device(device[1])
        try:
            backend.order_after(consumer_stream, stream)
        finally:
            if previous is not None:
                backend.restore_device(previous)

    def result() -> Any:
        # Set once the launch is queued: an export before that has no work to wait for.
        array.ready = ready
        if framework in ("numpy", "unknown"):
            # numpy holds host memory only; a producer we do not know gets the device buffer itself as a
            # DLPack exporter, which frees it once the caller and every capsule taken from it are gone.
            return array
        return dlpack.import_into(framework, array)

    return array, allocation.ptr, result


def _dlpack_stream(backend: Backend, stream: int) -> int | None:
    """The stream argument a DLPack producer expects from a consumer on ``stream``."""
    if backend.dlpack_device_type == dlpack.DL_CPU:
        return None
    if backend.dlpack_device_type == dlpack.DL_CUDA:
        return stream or 1  # 1 = the legacy default stream (0 is not allowed for CUDA)
    return stream or 0


# ---------------------------------------------------------------------------------------------------
# What is resolved once
# ---------------------------------------------------------------------------------------------------
class _Device:
    """One (backend, device): the loaded module, functions by symbol, compute units."""

    def __init__(self, backend: Backend, device_id: int, arch: str) -> None:
        self.backend = backend
        self.device_id = device_id
        self.family = family_for(arch)
        self.compute_units = backend.compute_units_for(device_id, arch)
        self._module: Any = None
        self._functions: dict[str, Any] = {}
        self._lock = threading.Lock()

    def function(self, symbol: str) -> Any:
        fn = self._functions.get(symbol)
        if fn is None:
            with self._lock:
                if self._module is None:
                    self._module = self.backend.load_module(self.family.code_object(), self.device_id)
                fn = self._functions[symbol] = self.backend.get_function(self._module, symbol)
        return fn


class _Prepared:
    """A launch ready to go but for its stream and pointers: the template (for callers who ask what ran) and the
    backend's bound launch ``go(stream, *seven pointers)`` (kernarg buffer, function, geometry and device bound
    once; see Backend.bind_launch)."""

    __slots__ = ("template", "go")

    def __init__(self, template: LaunchTemplate, go: Callable[..., None]) -> None:
        self.template = template
        self.go = go


class _Shape:
    """One validated call description: dims, problem, and its prepared launches by pointer alignment.

    ``aligned`` is the launch for pointers whose low ALIGNMENT_BITS are all zero (what allocators hand out): the
    hot path reaches it with one OR of the seven pointers instead of a 7-tuple key. ``stream_now()`` gives the
    caller framework's current stream of this device (torch route), ``out_size`` / ``torch_device`` what an
    all-torch call allocates its output with, ``host_scales`` whether kv_scale's values are checked per call
    (emulator: host memory), ``out_like`` a tensor whose empty_like is a new output (torch route)."""

    __slots__ = ("dims", "problem", "device", "prepared", "aligned", "torch_device", "out_size", "out_like",
                 "stream_now", "host_scales")

    def __init__(self, dims: Dims, problem: Problem | None, device: _Device) -> None:
        self.dims = dims
        self.problem = problem  # None when M or N is 0: nothing to launch
        self.device = device
        self.prepared: dict[tuple[int, ...], _Prepared] = {}
        self.aligned: _Prepared | None = None
        self.torch_device: Any = None
        self.out_size = (dims.M, dims.N)
        self.out_like: Any = None
        self.host_scales = device.backend.dlpack_device_type == dlpack.DL_CPU
        self.stream_now: Callable[[], int] = _no_stream


def _no_stream() -> int:
    return 0


class _OtherAlignment(Exception):
    """Control flow of the torch hot path: pointers off the allocators' alignment take the general launch."""


# ---------------------------------------------------------------------------------------------------
# The prepared launch object
# ---------------------------------------------------------------------------------------------------
class Indexer:
    """A prepared ``fp8_mqa_logits``: resolve once, then each call costs microseconds of host time.

        indexer = rawindexer.Indexer(num_heads=64, head_dim=128)          # e.g. one per model
        logits = indexer(q_fp8, k_fp8, kv_scale, weights, ks, ke, clean_logits=False, out=buf)

    ``num_heads`` / ``head_dim``: the shape this object serves (checked once per new call shape; None =
    whatever q_fp8 has). ``device``: a backend name ("cuda", "hip", "emulator") to insist on, or None to
    follow the arrays' DLPack device (CPU -> emulator, CUDA -> sm_90a, ROCm -> gfx950). ``arch``: the
    target whose kernel runs, "gfx950" or "gfx942" on ROCm and on the emulator (None: gfx950 there,
    sm_90a on CUDA). ``fp8_format``: the format of uint8 q / k bytes, "e4m3fn" (None) or "e4m3fnuz".
    Tunables as in :func:`fp8_mqa_logits`. The device of the inputs decides where the call runs (its context is made
    current for the launch and the caller's is restored), on the caller's current stream of that device.
    Thread-safe: several threads (one per GPU, say) may share one object.
    """

    def __init__(self, num_heads: int | None = None, head_dim: int | None = None, *, device: str | None = None,
                 block_m: int = 0, split_n: int = 0, num_warps: int = 0, unroll2: bool | None = None,
                 reverse_rows: bool | None = None, variant: str | None = None, arch: str | None = None,
                 fp8_format: str | None = None) -> None:
        if arch is not None:
            family_for(arch)  # names the targets when arch is unknown
        self.arch = arch
        self.fp8_format = check_fp8_format(fp8_format)
        self.num_heads = None if num_heads is None else as_int("num_heads", num_heads)
        self.head_dim = None if head_dim is None else as_int("head_dim", head_dim)
        self.tunables = Tunables(as_int("block_m", block_m), as_int("split_n", split_n),
                                 as_int("num_warps", num_warps),
                                 None if unroll2 is None else as_bool("unroll2", unroll2),
                                 None if reverse_rows is None else as_bool("reverse_rows", reverse_rows), variant)
        self._backend = get_backend(device) if device is not None else None
        if self._backend is not None:
            self._check_backend(self._backend)
        self._devices: dict[tuple[int, int], _Device] = {}
        self._shapes: dict[tuple, _Shape] = {}
        self._lock = threading.Lock()

    def reset(self, backend: str | None = None) -> None:
        """Forget what was resolved per device (loaded module, functions, compute units) and the call shapes
        prepared on it, for backend ``backend`` ("hip", "cuda", "emulator") or all; the next call loads the
        module again. For a host that reset or reconfigured a device under this object."""
        with self._lock:
            gone = [d for d, state in self._devices.items() if backend is None or state.backend.name == backend]
            for d in gone:
                del self._devices[d]
            for key in [k for k, shape in self._shapes.items()
                        if backend is None or shape.device.backend.name == backend]:
                del self._shapes[key]

    # -- resolution (once per device / shape) ------------------------------------------------------------
    def _arch(self, backend: Backend) -> str:
        """The target this Indexer runs on ``backend``: its ``arch=`` where the backend runs it."""
        if self.arch is None:
            return backend.arch
        if self.arch not in RUNS_ON.get(backend.name, (backend.arch,)):
            raise ValueError(f"arch: expected one of {RUNS_ON.get(backend.name, (backend.arch,))} for arrays on the "
                             f"{backend.name} backend, got {self.arch!r}")
        return self.arch

    def _check_backend(self, backend: Backend) -> None:
        arch = self._arch(backend)
        if self.tunables.variant is not None and arch not in ("gfx950", "gfx942"):
            raise ValueError(f"variant: only the gfx950 / gfx942 kernels have variants; got {self.tunables.variant!r} "
                             f"for {arch}")
        if self.num_heads is not None and self.head_dim is not None:
            self._check_supported(arch, self.num_heads, self.head_dim)

    @staticmethod
    def _check_supported(arch: str, heads: int, head_dim: int) -> None:
        if not family_for(arch).is_supported(heads, head_dim):
            raise ValueError(f"(num_heads, head_dim): expected a shape with a built {arch} kernel "
                             f"(is_supported() says which), got ({heads}, {head_dim})")

    def _device(self, device: tuple[int, int]) -> _Device:
        state = self._devices.get(device)
        if state is None:
            if self._backend is None:
                backend = backend_for_device_type(device[0])
            elif device[0] == self._backend.dlpack_device_type:
                backend = self._backend
            else:
                raise ValueError(f"arrays: expected arrays on a {self._backend.name} device (this Indexer's "
                                 f"device=), got arrays on DLPack device {device}")
            self._check_backend(backend)
            with self._lock:
                state = self._devices.get(device)
                if state is None:
                    state = self._devices[device] = _Device(backend, device[1], self._arch(backend))
        return state

    def _checked(self, ops: list[Operand], out: Operand | None, clean: bool,
                 device: _Device) -> tuple[Dims, Problem | None]:
        """The full validation of a new call description (named errors); its dims and problem."""
        dims = validate(*ops, out, self.fp8_format)
        if self.num_heads is not None and dims.heads != self.num_heads:
            raise ValidationError(f"q_fp8: expected num_heads={self.num_heads} (this Indexer's), got "
                                  f"shape {tuple(ops[0].shape)}")
        if self.head_dim is not None and dims.head_dim != self.head_dim:
            raise ValidationError(f"q_fp8: expected head_dim={self.head_dim} (this Indexer's), got "
                                  f"shape {tuple(ops[0].shape)}")
        family = device.family
        self._check_supported(family.arch, dims.heads, dims.head_dim)
        if dims.fp8_format not in family.fp8_formats:
            raise ValidationError(f"q_fp8, k_fp8: expected {' or '.join(family.fp8_formats)} inputs for the "
                                  f"{family.arch} kernel, got {dims.fp8_format} ({family.fp8_format_note})")
        problem = None
        if dims.M and dims.N:
            stride = out.strides[0] if out is not None and dims.M > 1 else dims.N
            problem = Problem(dims.M, dims.N, dims.heads, dims.head_dim, stride, clean, dims.fp8_format)
        return dims, problem

    def _remember(self, key: tuple, shape: _Shape) -> _Shape:
        with self._lock:
            if len(self._shapes) >= MAX_CACHED_SHAPES:
                self._shapes.clear()
            self._shapes[key] = shape
        return shape

    def _prepared(self, shape: _Shape, alignment: tuple[int, ...]) -> _Prepared:
        device = shape.device
        template = device.family.prepare(shape.problem, self.tunables, alignment, device.compute_units)
        backend = device.backend
        spans_of = None
        if backend.needs_buffer_spans:
            dims, stride = shape.dims, shape.problem.out_row_stride
            spans_of = lambda pointers: _spans(dims, stride, pointers)  # noqa: E731
        go = backend.bind_launch(device.function(template.symbol), device.device_id, template.grid, template.block,
                                 template.shared_mem, template.kernargs, template.pointer_offsets, spans_of)
        prepared = _Prepared(template, go)
        with self._lock:
            shape.prepared[alignment] = prepared
            if not any(alignment):
                shape.aligned = prepared
        return prepared

    # -- the call -------------------------------------------------------------------------------------
    def __call__(self, q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                 clean_logits: bool = True, out: Any = None, *, stream: int | None = None) -> Any:
        """logits[m, n] = sum_h relu(<q[m,h], k[n]>) * kv_scale[n] * weights[m,h] for n in [ks[m], ke[m]).

        Arguments as :func:`fp8_mqa_logits`. Returns ``out`` (written in place) or a new [M, N] float32
        array of the caller's framework.
        """
        # The hot path: torch tensors whose description (shapes, strides, dtypes, devices, clean_logits, out's) was
        # validated before. Everything it reads is in the key, so a hit is a call validated before; anything new
        # (or any other framework) takes _call_slow, which validates, caches under the same key, and launches.
        T = _TorchTensor
        if (type(q_fp8) is T and type(k_fp8) is T and type(kv_scale) is T and type(weights) is T
                and type(cu_seqlen_ks) is T and type(cu_seqlen_ke) is T
                and (clean_logits is True or clean_logits is False)):
            if out is None:
                out_key = None
            elif type(out) is T:
                out_key = (out.shape, out.stride(), out.dtype, out.get_device(), out.requires_grad)
            else:
                out_key = False  # never a key of the torch route: falls through
            shape = self._shapes.get((
                q_fp8.shape, q_fp8.is_contiguous(), q_fp8.dtype, q_fp8.get_device(),
                k_fp8.shape, k_fp8.is_contiguous(), k_fp8.dtype, k_fp8.get_device(),
                kv_scale.shape, kv_scale.is_contiguous(), kv_scale.dtype, kv_scale.get_device(),
                weights.shape, weights.is_contiguous(), weights.dtype, weights.get_device(),
                cu_seqlen_ks.shape, cu_seqlen_ks.is_contiguous(), cu_seqlen_ks.dtype, cu_seqlen_ks.get_device(),
                cu_seqlen_ke.shape, cu_seqlen_ke.is_contiguous(), cu_seqlen_ke.dtype, cu_seqlen_ke.get_device(),
                clean_logits, out_key))
            if shape is not None and not shape.host_scales:
                if stream is None:
                    stream = shape.stream_now()
                if out is None:
                    out = _torch_empty_like(shape.out_like)
                if shape.problem is not None:
                    p0, p1, p2, p3 = q_fp8.data_ptr(), k_fp8.data_ptr(), kv_scale.data_ptr(), weights.data_ptr()
                    p4, p5, p6 = cu_seqlen_ks.data_ptr(), cu_seqlen_ke.data_ptr(), out.data_ptr()
                    try:
                        if (p0 | p1 | p2 | p3 | p4 | p5 | p6) & ALIGNMENT_BITS:
                            raise _OtherAlignment
                        (shape.aligned or self._prepared(shape, _ALIGNED)).go(stream, p0, p1, p2, p3, p4, p5, p6)
                    except (_OtherAlignment, TypeError, OverflowError, struct.error):
                        # other alignments, or a stream= the launch cannot take: _launch plans / names it
                        self._launch(shape, (p0, p1, p2, p3, p4, p5, p6), stream)
                return out
        return self._call_slow(q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, stream)

    def _call_slow(self, q: Any, k: Any, kv: Any, w: Any, ks: Any, ke: Any, clean: Any, out: Any,
                   stream: int | None) -> Any:
        """Everything but a torch cache hit: argument checks, validation of a new description, other frameworks."""
        if clean is not True and clean is not False:
            clean = as_bool("clean_logits", clean)
        T = _TorchTensor
        arrays = (q, k, kv, w, ks, ke)
        if T is not None and all(type(a) is T for a in arrays) and (out is None or type(out) is T):
            if out is not None and out.requires_grad:
                raise ValidationError("out: expected a tensor that does not require grad (the kernel writes it in "
                                      "place, outside autograd), got requires_grad=True")
            key = _torch_key(arrays, clean, out)
            shape = self._shapes.get(key) or self._torch_shape(key, arrays, out, clean)
            if shape is not None:
                if stream is None:
                    stream = shape.stream_now()
                if shape.host_scales:
                    self._check_host_scales(kv.data_ptr(), shape.dims.N)
                if out is None:
                    out = _torch_empty(shape.out_size, dtype=_torch_float32, device=shape.torch_device)
                if shape.problem is not None:
                    self._launch(shape, tuple(a.data_ptr() for a in (*arrays, out)), stream)
                return out
            # a device the torch route does not describe: DLPack decides
        return self._call_any(q, k, kv, w, ks, ke, clean, out, stream)

    def _torch_shape(self, key: tuple, tensors: tuple, out: Any, clean: bool) -> _Shape | None:
        reads = [_read_torch(t, name, None) for t, name in zip(tensors, _ARG_NAMES)]
        out_read = None if out is None else _read_torch(out, "out", None)
        if any(r is None for r in reads) or (out is not None and out_read is None):
            return None
        ops = [Operand(r[0], tuple(r[1][0]), tuple(r[1][1]), r[1][2], r[1][3], r[2]) for r in reads]
        out_op = None if out_read is None else Operand(out_read[0], tuple(out_read[1][0]), tuple(out_read[1][1]),
                                                        out_read[1][2], out_read[1][3], out_read[2])
        device = self._device(ops[0].device)
        shape = _Shape(*self._checked(ops, out_op, clean, device), device)
        shape.torch_device = tensors[0].device
        # What the hot path allocates new outputs from: empty_like of a broadcast 0-d float32 tensor gives a fresh
        # contiguous [M, N] tensor on that device through the same allocator as torch.empty (graph capture
        # included), with no keyword parsing (about 1 us cheaper per call)
        M, N = shape.out_size
        proto = _torch_empty((), dtype=_torch_float32, device=shape.torch_device)
        shape.out_like = proto.expand(M, N) if M and N else _torch_empty((M, N), dtype=_torch_float32,
                                                                         device=shape.torch_device)
        if device.backend.dlpack_device_type != dlpack.DL_CPU:
            shape.stream_now = functools.partial(_torch_raw_stream_fn(), device.device_id)
        return self._remember(key, shape)

    def _call_any(self, q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                  clean_logits: bool, out: Any, stream: int | None) -> Any:
        """Any mix of frameworks: torch / CuPy arrays through their attributes, anything else through DLPack."""
        arrays = (q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)
        framework, reader = _TYPES.get(type(q_fp8)) or _classify(type(q_fp8), q_fp8)
        # The device comes from q_fp8 (its own attributes where we read them); every other array must match.
        first = reader(q_fp8, "q_fp8", None) if reader is not None else None
        device = first[1][3] if first is not None else _device_of(q_fp8, "q_fp8")
        state = self._devices.get(device) or self._device(device)
        backend = state.backend
        if stream is None:
            get_stream = _STREAM_OF_FRAMEWORK.get(framework)
            stream = get_stream(device[1]) if get_stream is not None and device[0] != dlpack.DL_CPU else 0
        dl_stream = None  # the DLPack route's stream argument, worked out when first needed

        reads = []
        for i, obj in enumerate(arrays):
            if i == 0 and first is not None:
                reads.append(first)
                continue
            fw, rd = _TYPES.get(type(obj)) or _classify(type(obj), obj)
            got = rd(obj, _ARG_NAMES[i], None) if rd is not None else None
            if got is None:
                if dl_stream is None:
                    dl_stream = _dlpack_stream(backend, stream)
                got = _read_dlpack(obj, _ARG_NAMES[i], dl_stream)
            reads.append(got)
        out_read = None
        if out is not None:
            out_framework, rd = _TYPES.get(type(out)) or _classify(type(out), out)
            if out_framework == "jax":
                raise ValidationError("out: expected a writable array (torch, CuPy, numpy); got a JAX array, which "
                                      "is immutable -- leave out=None to get a new JAX array")
            if out_framework == "torch" and out.requires_grad:
                raise ValidationError("out: expected a tensor that does not require grad (the kernel writes it in "
                                      "place, outside autograd), got requires_grad=True")
            out_read = rd(out, "out", None) if rd is not None else None
            if out_read is None:
                if dl_stream is None:
                    dl_stream = _dlpack_stream(backend, stream)
                out_read = _read_dlpack(out, "out", dl_stream)

        key = (reads[0][1], reads[1][1], reads[2][1], reads[3][1], reads[4][1], reads[5][1],
               None if out_read is None else (out_read[1], out_read[2]), clean_logits)
        shape = self._shapes.get(key)
        if shape is None:
            ops = [Operand(r[0], tuple(r[1][0]), tuple(r[1][1]), r[1][2], r[1][3], r[2]) for r in reads]
            out_op = None if out_read is None else Operand(out_read[0], tuple(out_read[1][0]), tuple(out_read[1][1]),
                                                            out_read[1][2], out_read[1][3], out_read[2])
            shape = self._remember(key, _Shape(*self._checked(ops, out_op, clean_logits, state), state))

        if shape.host_scales:
            self._check_host_scales(reads[2][0], shape.dims.N)
        dims = shape.dims
        result = None
        if out is None:
            out, out_ptr, result = _allocate_out(framework, q_fp8, backend, device, dims.M, dims.N, stream)
        else:
            out_ptr = out_read[0]
        if shape.problem is not None:
            ptrs = (reads[0][0], reads[1][0], reads[2][0], reads[3][0], reads[4][0], reads[5][0], out_ptr)
            self._launch(shape, ptrs, stream)
        return out if result is None else result()

    def _launch(self, shape: _Shape, ptrs: tuple[int, ...], stream: int) -> _Prepared:
        """Launch ``shape`` with these seven pointers on ``stream``; bad pointers or streams raise naming them."""
        try:
            p0, p1, p2, p3, p4, p5, p6 = ptrs
            a = ALIGNMENT_BITS
            if (p0 | p1 | p2 | p3 | p4 | p5 | p6) & a:
                alignment = (p0 & a, p1 & a, p2 & a, p3 & a, p4 & a, p5 & a, p6 & a)
                prepared = shape.prepared.get(alignment) or self._prepared(shape, alignment)
            else:
                prepared = shape.aligned or self._prepared(shape, _ALIGNED)
            prepared.go(stream, p0, p1, p2, p3, p4, p5, p6)
        except (TypeError, ValueError, OverflowError, struct.error):
            if len(ptrs) != 7:
                raise ValueError(f"pointers: expected 7 device addresses, got {len(ptrs)}") from None
            _raise_bad_pointer(ptrs)
            if isinstance(stream, bool) or not isinstance(stream, (int, np.integer)) or not 0 <= stream < 2**64:
                raise TypeError(f"stream: expected an int stream handle in [0, 2**64), got "
                                f"{type(stream).__name__} {stream!r}") from None
            if not all(type(p) is int for p in ptrs) or type(stream) is not int:  # numpy ints: as Python ints
                return self._launch(shape, tuple(int(p) for p in ptrs), int(stream))
            raise
        return prepared

    @staticmethod
    def _check_host_scales(ptr: int, N: int) -> None:
        """Emulator only (host memory): kv_scale must be >= 0 since the kernel applies it after the ReLU."""
        if not N:
            return
        scale = np.ctypeslib.as_array((ctypes.c_float * N).from_address(ptr))
        if (scale < 0).any():
            raise ValidationError(f"kv_scale: expected values >= 0 (the scale is applied after the ReLU), "
                                  f"got min {float(scale.min())}")

    # -- raw pointers -------------------------------------------------------------------------------------
    def launch_pointers(self, pointers: tuple[int, ...], M: int, N: int, out_row_stride: int | None = None,
                        clean_logits: bool = True, stream: int = 0, device_id: int = 0) -> LaunchTemplate | None:
        """The prepared launch from device addresses (q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out),
        as :func:`launch` describes them, on this Indexer's ``device=`` backend. Returns the launch template
        used (its ``plan(pointers)`` gives the exact kernarg bytes), None when M or N is 0."""
        if self._backend is None:
            raise ValueError("device: launch_pointers needs an Indexer made with device= (a backend name)")
        if clean_logits is not True and clean_logits is not False:
            clean_logits = as_bool("clean_logits", clean_logits)
        key = ("raw", M, N, out_row_stride, clean_logits, device_id)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._raw_shape(key, M, N, out_row_stride, clean_logits, device_id)
        if shape.problem is None:
            return None
        if len(pointers) != 7:
            raise ValueError(f"pointers: expected 7 device addresses, got {len(pointers)}")
        return self._launch(shape, pointers, stream).template

    def _raw_shape(self, key: tuple, M: Any, N: Any, out_row_stride: Any, clean: bool, device_id: Any) -> _Shape:
        if self.num_heads is None or self.head_dim is None:
            raise ValueError("num_heads, head_dim: launch_pointers needs an Indexer made with both")
        M, N = as_int("M", M), as_int("N", N)
        device_id = as_int("device_id", device_id)
        out_row_stride = N if out_row_stride is None else as_int("out_row_stride", out_row_stride)
        check_sizes(M, N, out_row_stride)
        device = self._devices.get((self._backend.dlpack_device_type, device_id))
        if device is None:
            device = self._device((self._backend.dlpack_device_type, device_id))
        fmt = self.fp8_format or "e4m3fn"
        if fmt not in device.family.fp8_formats:
            raise ValueError(f"fp8_format: expected {' or '.join(device.family.fp8_formats)} for the "
                             f"{device.family.arch} kernel, got {fmt!r} ({device.family.fp8_format_note})")
        problem = Problem(M, N, self.num_heads, self.head_dim, out_row_stride, clean, fmt) if M and N else None
        return self._remember(key, _Shape(Dims(M, N, self.num_heads, self.head_dim, fmt), problem, device))


def _raise_bad_pointer(ptrs: tuple[int, ...]) -> None:
    for name, p in zip((*_ARG_NAMES, "out"), ptrs):
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"{name}: expected an int device address, got {type(p).__name__} {p!r}")
        if not 0 <= int(p) < 2**64:
            raise ValueError(f"{name}: expected a device address in [0, 2**64), got {p}")


def _spans(dims: Dims, out_row_stride: int, ptrs: tuple[int, ...]) -> list[BufferSpan]:
    """The memory one launch may touch, for the emulator's memcheck and its mapped-memory check."""
    M, N, H, D = dims.M, dims.N, dims.heads, dims.head_dim
    out_bytes = ((M - 1) * out_row_stride + N) * 4 if M and N else 0
    sizes = (M * H * D, N * D, 4 * N, 4 * M * H, 4 * M, 4 * M, out_bytes)
    return [BufferSpan(p, n, name == "out", name) for name, p, n in zip((*_ARG_NAMES, "out"), ptrs, sizes)]


# ---------------------------------------------------------------------------------------------------
# Functions over cached Indexers
# ---------------------------------------------------------------------------------------------------
_DEFAULT = Indexer()
_BY_TUNABLES: dict[tuple, Indexer] = {}
_RAW: dict[tuple, Indexer] = {}


def _indexer_for(tunables: tuple) -> Indexer:
    ind = _BY_TUNABLES.get(tunables)
    if ind is None:
        ind = _BY_TUNABLES[tunables] = Indexer(None, None, block_m=tunables[0], split_n=tunables[1],
                                               num_warps=tunables[2], unroll2=tunables[3],
                                               reverse_rows=tunables[4], variant=tunables[5], arch=tunables[6],
                                               fp8_format=tunables[7])
    return ind


def reset_caches(backend: str | None = None) -> None:
    """Forget the per-device state (modules, functions, compute units, prepared launches) that
    :func:`fp8_mqa_logits` and :func:`launch` cached, for backend ``backend`` or all, and the ``launch``
    Indexers bound to it (they hold the backend instance). Indexers the caller made are the caller's:
    :meth:`Indexer.reset`. For hosts (and tests) that reset or reconfigure a device under rawindexer."""
    for indexer in (_DEFAULT, *_BY_TUNABLES.values()):
        indexer.reset(backend)
    for key in [k for k, ind in _RAW.items() if backend is None or ind._backend.name == backend]:
        _RAW.pop(key, None)


def fp8_mqa_logits(q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                   clean_logits: bool = True, out: Any = None, *, block_m: int = 0, split_n: int = 0,
                   num_warps: int = 0, unroll2: bool | None = None, reverse_rows: bool | None = None,
                   variant: str | None = None, stream: int | None = None, arch: str | None = None,
                   fp8_format: str | None = None) -> Any:
    """logits[m, n] = sum_h relu(<q[m,h], k[n]>) * kv_scale[n] * weights[m,h] for n in [ks[m], ke[m]).

    Args (any objects with ``__dlpack__``: torch, CuPy, JAX, numpy arrays):
        q_fp8: [M, H, D] float8_e4m3fn or float8_e4m3fnuz (or their uint8 bytes), contiguous.
        k_fp8: [N, D] in q_fp8's format, contiguous.
        kv_scale: [N] float32, >= 0 (the kernel applies it after the ReLU).
        weights: [M, H] float32.
        cu_seqlen_ks, cu_seqlen_ke: [M] int32, each row's key window [ks, ke), clamped to [0, N); any
            int32 is legal (empty when ke <= ks after clamping).
        clean_logits: write -inf outside each row's window; when False those positions are not written.
            A bool or an int.
        out: optional [M, N] float32 destination whose row stride may be any value >= N (not a JAX array:
            those are immutable).
        block_m, split_n, num_warps, unroll2, reverse_rows: tunables; 0 / None = host heuristic.
        variant: gfx950 kernel design, "seed" (the seed's permlane head reduce, the baseline), "mr"
            (weighted head sum on a bf16 MFMA) or "mrp" (the same with a packed-int16 ReLU); None = default.
        stream: the stream to launch on; None = the caller framework's current stream of the arrays' device.
        arch: the target whose kernel runs on ROCm arrays and on the emulator: "gfx950" (None) or "gfx942"
            (MI300X / MI325X).
        fp8_format: the format of uint8 q / k bytes: "e4m3fn" (None) or "e4m3fnuz". gfx942 serves both
            (e4m3fn read in place, see kernels/target.h); gfx950 and sm_90a serve e4m3fn.
    Returns:
        logits [M, N] float32 in the caller's framework (``out`` itself when given). GPU arrays of a framework
        rawindexer does not import into (neither torch, CuPy nor JAX) give a ``dlpack.DLPackArray`` over the
        device buffer it allocated: ``__dlpack__`` (with the stream handshake) and ``__dlpack_device__``, the
        buffer freed once that object and every capsule taken from it are dropped.
    Arrays on the CPU run on the gfx950 emulator (slow; for tests and small shapes), ROCm arrays on the
    gfx950 kernel through hip-python, CUDA arrays on the sm_90a twin. A thin wrapper over a cached
    :class:`Indexer` (one per set of tunables); serving loops can hold their own.
    """
    if (block_m or split_n or num_warps or unroll2 is not None or reverse_rows is not None or variant is not None
            or arch is not None or fp8_format is not None):
        indexer = _indexer_for((block_m, split_n, num_warps, unroll2, reverse_rows, variant, arch, fp8_format))
    else:
        indexer = _DEFAULT
    return indexer(q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, stream=stream)


def launch(q_ptr: int, k_ptr: int, kv_scale_ptr: int, weights_ptr: int, cu_seqlen_ks_ptr: int,
           cu_seqlen_ke_ptr: int, out_ptr: int, *, M: int, N: int, num_heads: int, head_dim: int,
           out_row_stride: int | None = None, clean_logits: bool = True, stream: int = 0,
           device: str = "hip", device_id: int = 0, block_m: int = 0, split_n: int = 0, num_warps: int = 0,
           unroll2: bool | None = None, reverse_rows: bool | None = None,
           variant: str | None = None, arch: str | None = None,
           fp8_format: str | None = None) -> LaunchTemplate | None:
    """Raw entry for hosts without a DLPack framework: device pointers as integers.

    q [M, num_heads, head_dim] and k [N, head_dim] are contiguous fp8 bytes (``fp8_format``, e4m3fn by default); kv_scale [N],
    weights [M, num_heads] contiguous float32; cu_seqlen_ks / cu_seqlen_ke [M] int32; out [M, N]
    float32 with rows ``out_row_stride`` (>= N, default N) elements apart. ``device`` is a backend name
    ("hip", "cuda" or "emulator", whose pointers are host addresses: it refuses ranges that are not mapped)
    and ``device_id`` the device the pointers live on; ``stream`` a stream handle of that device. Goes
    through a cached :class:`Indexer`. Returns the launch template used (``.symbol``, ``.grid``,
    ``.block``, ``.config``; ``.plan(pointers).kernargs`` the bytes), None when M or N is 0.
    """
    key = (num_heads, head_dim, device, block_m, split_n, num_warps, unroll2, reverse_rows, variant, arch, fp8_format)
    indexer = _RAW.get(key)
    if indexer is None:
        indexer = Indexer(as_int("num_heads", num_heads), as_int("head_dim", head_dim), device=device,
                          block_m=block_m, split_n=split_n, num_warps=num_warps, unroll2=unroll2,
                          reverse_rows=reverse_rows, variant=variant, arch=arch, fp8_format=fp8_format)
        _RAW[key] = indexer
    # The hot path: a description launch_pointers validated before, pointers of the allocators' alignment. Anything
    # else (a new description, other alignments, a bad pointer or stream) goes through launch_pointers, which
    # validates, plans and names what is wrong.
    shape = indexer._shapes.get(("raw", M, N, out_row_stride, clean_logits, device_id))
    if shape is not None and shape.aligned is not None and (clean_logits is True or clean_logits is False):
        try:
            if not (q_ptr | k_ptr | kv_scale_ptr | weights_ptr | cu_seqlen_ks_ptr | cu_seqlen_ke_ptr
                    | out_ptr) & ALIGNMENT_BITS:
                shape.aligned.go(stream, q_ptr, k_ptr, kv_scale_ptr, weights_ptr, cu_seqlen_ks_ptr, cu_seqlen_ke_ptr,
                                 out_ptr)
                return shape.aligned.template
        except (TypeError, OverflowError, struct.error):
            pass  # launch_pointers below raises the error that names the argument
    return indexer.launch_pointers((q_ptr, k_ptr, kv_scale_ptr, weights_ptr, cu_seqlen_ks_ptr, cu_seqlen_ke_ptr,
                                    out_ptr), M, N, out_row_stride, clean_logits, stream, device_id)
