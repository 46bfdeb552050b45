"""The per-call machinery every op's prepared launch object shares (``api.Indexer`` for prefill,
``paged.PagedIndexer`` for decode): reading arrays, the caller's stream, outputs from the caller's
framework, the per-device module and context, the cache of validated call descriptions and their launch
templates, and the launch itself.

An op is a subclass of :class:`PreparedOp` that names its input arrays and says, per distinct call
description, how to validate it (:meth:`PreparedOp._describe`), which kernel family serves a target
(:meth:`PreparedOp._family`), how to plan a launch with its pointers left as holes
(:meth:`PreparedOp._template`) and what memory a launch may touch (:meth:`PreparedOp._spans`). Everything
else -- one mechanism for every op -- lives here:

- arrays are read through a framework's own attributes where we know them (torch, CuPy), DLPack otherwise;
  the description (shapes, strides, dtypes, devices, the op's scalars, out's description) is the cache key;
- the inputs' device decides where the call runs: its context is made current only if it is not
  (``Backend.set_device``) and the caller's is restored after (``Backend.restore_device``);
- the stream is the caller framework's current stream of that device (or the caller's ``stream=``);
- an output not given is allocated by the caller's framework (torch / CuPy allocators: graph-capture safe);
- a launch hands the call's stream and pointers to the backend's bound launch of that plan
  (``Backend.bind_launch``: kernarg buffer, function, geometry and device bound once; the C launcher on CUDA);
- the all-torch call whose description was seen before takes a hot path: one key read off the tensors, one
  lookup, an OR of the pointers (allocator-aligned pointers reach the prepared launch without a tuple key).

Nothing synchronises, nothing reads device memory on the host, so a call made while the caller's stream
is captured into a CUDA graph is captured like any framework op.
"""
from __future__ import annotations

import functools
import struct
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import dlpack
from .backends import Backend, BufferSpan, backend_for_device_type
from .dispatch.base import ALIGNMENT_BITS, LaunchTemplate
from .validation import Operand, ValidationError

#: distinct call descriptions kept per prepared object before the cache starts over (a serving loop sees a
#: handful)
MAX_CACHED_SHAPES = 512
#: the targets a backend runs besides its own (an op's ``arch=``): ROCm GPUs and the emulator run gfx950 or gfx942
RUNS_ON: dict[str, tuple[str, ...]] = {"hip": ("gfx950", "gfx942"), "emulator": ("gfx950", "gfx942")}


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


def torch_key(tensors: tuple, scalars: tuple, out: Any) -> tuple:
    """The cache key of an all-torch call: everything validation and the plan depend on, read off the tensors
    (api.Indexer.__call__ builds the same tuple inline for its six arrays; a test checks they agree). Inputs enter
    with is_contiguous() rather than their strides: validation asks exactly that of them (torch's contiguity ignores
    size-1 dims and empty tensors, as validation's is_compact does: a test checks they agree) and no plan reads an
    input stride; a miss reads the strides. get_device() is -1 on the CPU and the ordinal on a GPU; which kind of
    GPU was settled when the key was first validated (a process does not mix CUDA tensors with another GPU kind's).
    Then the op's scalars (clean_logits, ...), then out's description with its requires_grad, so a hit never skips
    that check."""
    key: list = []
    for t in tensors:
        key += (t.shape, t.is_contiguous(), t.dtype, t.get_device())
    key += scalars
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


def _operand(read: _Read) -> Operand:
    return Operand(read[0], tuple(read[1][0]), tuple(read[1][1]), read[1][2], read[1][3], read[2])


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


#: framework -> its current stream of a device (the stream a call launches on unless ``stream=`` is given)
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


def check_out_writable(out: Any, framework: str) -> None:
    """What an ``out=`` must be before it is read: not a JAX array (immutable), not a tensor requiring grad."""
    if framework == "jax":
        raise ValidationError("out: expected a writable array (torch, CuPy, numpy); got a JAX array, which "
                              "is immutable -- leave out=None to get a new JAX array")
    if framework == "torch" and out.requires_grad:
        raise ValidationError("out: expected a tensor that does not require grad (the kernel writes it in "
                              "place, outside autograd), got requires_grad=True")




# ---------------------------------------------------------------------------------------------------
# What is resolved once
# ---------------------------------------------------------------------------------------------------
class _Device:
    """One (backend, device) of one op: the loaded module of the op's kernel family, functions by symbol,
    compute units."""

    def __init__(self, backend: Backend, device_id: int, family: Any) -> None:
        self.backend = backend
        self.device_id = device_id
        self.family = family
        self.gpu = backend.dlpack_device_type != dlpack.DL_CPU
        self.compute_units = backend.compute_units_for(device_id, family.arch)
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
    backend's bound launch ``go(stream, *pointers)`` (kernarg buffer, function, geometry and device bound
    once; see Backend.bind_launch)."""

    __slots__ = ("template", "go")

    def __init__(self, template: LaunchTemplate, go: Callable[..., None]) -> None:
        self.template = template
        self.go = go


class _Shape:
    """One validated call description: the op's dimensions, the problem to plan (None when there is nothing to
    launch), and its prepared launches by pointer alignment.

    ``aligned`` is the launch for pointers whose low ALIGNMENT_BITS are all zero (what allocators hand out): the
    hot path reaches it with one OR of the pointers instead of a tuple key. ``stream_now()`` gives the caller
    framework's current stream of this device (torch route), ``out_size`` / ``torch_device`` what an all-torch
    call allocates its output with, ``out_like`` a tensor whose empty_like is a new output (torch route),
    ``host_checks`` whether the op's checks of values run per call (emulator: operands in host memory)."""

    __slots__ = ("dims", "problem", "device", "prepared", "aligned", "torch_device", "out_size", "out_like",
                 "stream_now", "host_checks")

    def __init__(self, dims: Any, problem: Any, device: _Device, out_size: tuple[int, int]) -> None:
        self.dims = dims
        self.problem = problem
        self.device = device
        self.prepared: dict[tuple[int, ...], _Prepared] = {}
        self.aligned: _Prepared | None = None
        self.torch_device: Any = None
        self.out_size = out_size
        self.out_like: Any = None
        self.host_checks = not device.gpu
        self.stream_now: Callable[[], int] = _no_stream


def _no_stream() -> int:
    return 0


class _OtherAlignment(Exception):
    """Control flow of a hot path: pointers off the allocators' alignment take the general launch."""


class BoundLaunch:
    """One call resolved onto fixed buffers: calling it launches again on the same device addresses with no
    reading, validation, lookup or allocation (the serving loop's form, where the inputs and the output
    are persistent buffers rewritten in place each step). Keeps the arrays it was made from alive.
    Returns what the call returned (the output).

    Stream: a ``stream=`` given when binding is used by every launch; else each launch reads the caller
    framework's current stream of the buffers' device again, as a call would (so a bound launch made
    outside a CUDA graph capture is captured when called inside one)."""

    def __init__(self, op: "PreparedOp", shape: _Shape, ptrs: tuple[int, ...], stream: int,
                 current_stream: Callable[[], int] | None, result: Callable[[], Any], keep: tuple) -> None:
        self._op, self._shape, self.pointers, self.stream = op, shape, ptrs, stream
        self._current_stream = current_stream
        self._result, self._keep = result, keep
        # the prepared launch of these pointers, found by the first call (the addresses never change, so the
        # alignment lookup and the pointer checks are done once; later calls are go(stream, *pointers) alone)
        self._go: Callable[..., None] | None = None

    @property
    def template(self) -> LaunchTemplate | None:
        """The launch template these buffers run (``.symbol``, ``.grid``, ``.config``), None when nothing
        is launched."""
        shape = self._shape
        if shape.problem is None:
            return None
        alignment = tuple(p & ALIGNMENT_BITS for p in self.pointers)
        prepared = shape.prepared.get(alignment) or self._op._prepared(shape, alignment, self.pointers)
        return prepared.template

    def __call__(self, stream: int | None = None) -> Any:
        """Launch on ``stream`` (None: the binding's ``stream=``, else the caller's current stream)."""
        if self._shape.problem is not None:
            if stream is None:
                stream = self._current_stream() if self._current_stream is not None else self.stream
            go = self._go
            if go is None:
                self._go = self._op._launch(self._shape, self.pointers, stream).go
            else:
                try:
                    go(stream, *self.pointers)
                except (TypeError, OverflowError, struct.error):
                    self._op._launch(self._shape, self.pointers, stream)  # names the bad stream
        return self._result()


def _current_stream_of(framework: str, device: _Device) -> Callable[[], int] | None:
    """A function giving ``framework``'s current stream of ``device``, None where there is none (the CPU, a
    framework whose streams we do not read: the stream resolved once stands)."""
    get = _STREAM_OF_FRAMEWORK.get(framework)
    if get is None or not device.gpu:
        return None
    return functools.partial(get, device.device_id)


# ---------------------------------------------------------------------------------------------------
# The prepared launch object of one op
# ---------------------------------------------------------------------------------------------------
class PreparedOp:
    """Resolve once, then each call costs microseconds of host time. Subclasses are the ops; see the module
    docstring for the hooks. Thread-safe: several threads (one per GPU, say) may share one object."""

    #: the op's input arrays in call order; the first one's device decides where a call runs
    ARG_NAMES: tuple[str, ...] = ()
    #: the target to run where a backend runs several (RUNS_ON); None = the backend's own. Subclasses set it
    #: before calling ``PreparedOp.__init__``
    arch: str | None = None

    def __init__(self, backend: Backend | None) -> None:
        self._backend = backend  # the backend insisted on (``device=``), None = follow the arrays
        if backend is not None:
            self._check_backend(backend)
        self._devices: dict[tuple[int, int], _Device] = {}
        self._shapes: dict[tuple, _Shape] = {}
        self._lock = threading.Lock()

    # -- the op's hooks ---------------------------------------------------------------------------------
    def _family(self, arch: str) -> Any:
        """The op's kernel family for ``arch`` (code_object(), and what _template plans with)."""
        raise NotImplementedError

    def _check_backend(self, backend: Backend, device_id: int | None = None) -> None:
        """Refuse a backend this object's settings cannot run on (raise), once per backend."""

    def _arch(self, backend: Backend, device_id: int | None = None) -> str:
        """The target this object runs on ``backend`` (on device ``device_id`` once known): its ``arch`` where
        the backend runs it, else the device's own (a ROCm GPU's gfx target). A GPU runs only its own target."""
        if self.arch is None:
            return backend.arch if device_id is None else backend.arch_of(device_id)
        allowed = RUNS_ON.get(backend.name, (backend.arch,))
        if self.arch not in allowed:
            raise ValueError(f"arch: expected one of {allowed} for arrays on the {backend.name} backend, got "
                             f"{self.arch!r}")
        if device_id is not None and backend.dlpack_device_type != dlpack.DL_CPU:
            own = backend.arch_of(device_id)
            if own != self.arch:
                raise ValueError(f"arch: expected {own!r} (or None) for arrays on {backend.name} device {device_id}, "
                                 f"which is {own}; got {self.arch!r}")
        return self.arch

    def _describe(self, ops: list[Operand], out: Operand | None, scalars: tuple, device: _Device) -> _Shape:
        """Validate one call description (every error names its argument); its :class:`_Shape`."""
        raise NotImplementedError

    def _template(self, shape: _Shape, alignment: tuple[int, ...], ptrs: tuple[int, ...]) -> LaunchTemplate:
        """Plan ``shape`` for pointers with these low bits (``alignment``); ``ptrs`` only for error messages."""
        raise NotImplementedError

    def _spans(self, shape: _Shape, ptrs: tuple[int, ...]) -> list[BufferSpan]:
        """The memory one launch may touch (the emulator's memcheck)."""
        raise NotImplementedError

    def _check_host_values(self, shape: _Shape, ptrs: list[int]) -> None:
        """Emulator only (operands in host memory): checks of values a GPU call cannot afford to read."""

    # -- resolution (once per device / shape) ------------------------------------------------------------
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

    def _device(self, device: tuple[int, int]) -> _Device:
        state = self._devices.get(device)
        if state is None:
            if self._backend is None:
                backend = backend_for_device_type(device[0])
            elif device[0] == self._backend.dlpack_device_type:
                backend = self._backend
            else:
                raise ValueError(f"arrays: expected arrays on a {self._backend.name} device (this "
                                 f"{type(self).__name__}'s device=), got arrays on DLPack device {device}")
            self._check_backend(backend, device[1])
            family = self._family(self._arch(backend, device[1]))
            with self._lock:
                state = self._devices.get(device)
                if state is None:
                    state = self._devices[device] = _Device(backend, device[1], family)
        return state

    def _raw_device(self, device_id: int) -> _Device:
        """The device of a raw-pointer launch on this object's ``device=`` backend."""
        if self._backend is None:
            raise ValueError(f"device: launch_pointers needs a {type(self).__name__} made with device= "
                             "(a backend name)")
        device = (self._backend.dlpack_device_type, device_id)
        return self._devices.get(device) or self._device(device)

    def _remember(self, key: tuple, shape: _Shape) -> _Shape:
        with self._lock:
            if len(self._shapes) >= MAX_CACHED_SHAPES:
                self._shapes.clear()
            self._shapes[key] = shape
        return shape

    def _prepared(self, shape: _Shape, alignment: tuple[int, ...], ptrs: tuple[int, ...]) -> _Prepared:
        device = shape.device
        template = self._template(shape, alignment, ptrs)
        backend = device.backend
        spans_of = None
        if backend.needs_buffer_spans:
            spans_of = functools.partial(self._spans, shape)
        bind = functools.partial(backend.bind_launch, device.function(template.symbol), device.device_id,
                                 template.grid, template.block, template.shared_mem)
        tensor_map = (template.config or {}).get("k_tensor_map")
        if tensor_map is None:
            go = bind(template.kernargs, template.pointer_offsets, spans_of)
        else:  # K's tensor map is in the kernargs (sm_90a "tmas", decode "tma"): one bound launch per K pointer
            from .dispatch.sm90_tensor_map import PerKPointerLaunch
            go = PerKPointerLaunch(lambda kernargs: bind(kernargs, template.pointer_offsets, spans_of),
                                   template.kernargs, tensor_map["slot"], tensor_map["n"], tensor_map["head_dim"],
                                   tensor_map.get("block_size", 0), template.config.get("q_tensor_map"))
        prepared = _Prepared(template, go)
        with self._lock:
            shape.prepared[alignment] = prepared
            if not any(alignment):
                shape.aligned = prepared
        return prepared

    # -- a call -------------------------------------------------------------------------------------------
    def _call(self, arrays: tuple, out: Any, scalars: tuple, stream: int | None) -> Any:
        """Read, look up (or validate and plan), allocate ``out`` if None, launch; the caller's result. The hot
        path: torch tensors whose description (with ``scalars`` and out's) was validated before; everything it
        reads is in the key (:func:`torch_key`'s tuple, built inline here), so a hit is a call validated before;
        allocator-aligned pointers go straight to the bound launch. Anything else takes :meth:`_call_slow`."""
        T = _TorchTensor
        if T is not None and (out is None or type(out) is T):
            key: list = []
            for t in arrays:
                if type(t) is not T:
                    break
                key += (t.shape, t.is_contiguous(), t.dtype, t.get_device())
            else:
                key += scalars
                key.append(None if out is None else
                           (out.shape, out.stride(), out.dtype, out.get_device(), out.requires_grad))
                shape = self._shapes.get(tuple(key))
                if shape is not None and not shape.host_checks:
                    if stream is None:
                        stream = shape.stream_now()
                    if out is None:
                        out = _torch_empty_like(shape.out_like)
                    if shape.problem is not None:
                        ptrs = [t.data_ptr() for t in arrays]
                        ptrs.append(out.data_ptr())
                        bits = 0
                        for p in ptrs:
                            bits |= p
                        prepared = shape.aligned
                        try:
                            if bits & ALIGNMENT_BITS or prepared is None:
                                raise _OtherAlignment
                            prepared.go(stream, *ptrs)
                        except (_OtherAlignment, TypeError, OverflowError, struct.error):
                            # other alignments, a first launch, or a stream= the launch cannot take
                            self._launch(shape, tuple(ptrs), stream)
                    return out
        return self._call_slow(arrays, out, scalars, stream)

    def _call_slow(self, arrays: tuple, out: Any, scalars: tuple, stream: int | None, bind: bool = False) -> Any:
        """Everything but a torch cache hit: validation of a new description, other frameworks, emulator checks.
        With ``bind``, everything but the launch: a :class:`BoundLaunch`."""
        T = _TorchTensor
        if T is not None and all(type(a) is T for a in arrays) and (out is None or type(out) is T):
            if out is not None and out.requires_grad:
                check_out_writable(out, "torch")
            key = torch_key(arrays, scalars, out)
            shape = self._shapes.get(key) or self._torch_shape(key, arrays, out, scalars)
            if shape is not None:
                current = None
                if stream is None:
                    stream = shape.stream_now()
                    current = shape.stream_now if shape.device.gpu else None
                ptrs = [a.data_ptr() for a in arrays]
                if shape.host_checks:
                    self._check_host_values(shape, ptrs)
                if out is None:
                    out = _torch_empty(shape.out_size, dtype=_torch_float32, device=shape.torch_device)
                ptrs = (*ptrs, out.data_ptr())
                if bind:
                    return BoundLaunch(self, shape, ptrs, stream, current, lambda: out, (arrays, out))
                if shape.problem is not None:
                    self._launch(shape, ptrs, stream)
                return out
            # a device the torch route does not describe: DLPack decides
        return self._call_any(arrays, out, scalars, stream, bind)

    def _torch_shape(self, key: tuple, tensors: tuple, out: Any, scalars: tuple) -> _Shape | None:
        reads = [_read_torch(t, name, None) for t, name in zip(tensors, self.ARG_NAMES)]
        out_read = None if out is None else _read_torch(out, "out", None)
        if any(r is None for r in reads) or (out is not None and out_read is None):
            return None
        ops = [_operand(r) for r in reads]
        device = self._device(ops[0].device)
        shape = self._describe(ops, None if out_read is None else _operand(out_read), scalars, device)
        shape.torch_device = tensors[0].device
        # What the hot path allocates new outputs from: empty_like of a broadcast 0-d float32 tensor gives a fresh
        # contiguous [M, N] tensor on that device through the same allocator as torch.empty (graph capture
        # included), with no keyword parsing (about 1 us cheaper per call)
        M, N = shape.out_size
        proto = _torch_empty((), dtype=_torch_float32, device=shape.torch_device)
        shape.out_like = proto.expand(M, N) if M and N else _torch_empty((M, N), dtype=_torch_float32,
                                                                         device=shape.torch_device)
        if device.gpu:
            shape.stream_now = functools.partial(_torch_raw_stream_fn(), device.device_id)
        return self._remember(key, shape)

    def _call_any(self, arrays: tuple, out: Any, scalars: tuple, stream: int | None, bind: bool) -> Any:
        """Any mix of frameworks: torch / CuPy arrays through their attributes, anything else through DLPack."""
        names = self.ARG_NAMES
        first_array = arrays[0]
        framework, reader = _TYPES.get(type(first_array)) or _classify(type(first_array), first_array)
        # The device comes from the first array (its own attributes where we read them); every other array
        # must match (the op's validation says which do not).
        first = reader(first_array, names[0], None) if reader is not None else None
        device = first[1][3] if first is not None else _device_of(first_array, names[0])
        state = self._devices.get(device) or self._device(device)
        backend = state.backend
        current = None
        if stream is None:
            current = _current_stream_of(framework, state) if bind else None
            get_stream = _STREAM_OF_FRAMEWORK.get(framework)
            stream = get_stream(device[1]) if get_stream is not None and device[0] != dlpack.DL_CPU else 0
        dl_stream = None  # the DLPack route's stream argument, worked out when first needed

        reads = []
        for i, obj in enumerate(arrays):
            if i == 0 and first is not None:
                reads.append(first)
                continue
            fw, rd = _TYPES.get(type(obj)) or _classify(type(obj), obj)
            got = rd(obj, names[i], None) if rd is not None else None
            if got is None:
                if dl_stream is None:
                    dl_stream = _dlpack_stream(backend, stream)
                got = _read_dlpack(obj, names[i], dl_stream)
            reads.append(got)
        out_read = None
        if out is not None:
            out_framework, rd = _TYPES.get(type(out)) or _classify(type(out), out)
            check_out_writable(out, out_framework)
            out_read = rd(out, "out", None) if rd is not None else None
            if out_read is None:
                if dl_stream is None:
                    dl_stream = _dlpack_stream(backend, stream)
                out_read = _read_dlpack(out, "out", dl_stream)

        key = (*[r[1] for r in reads], *scalars, None if out_read is None else (out_read[1], out_read[2]))
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._remember(key, self._describe([_operand(r) for r in reads],
                                                       None if out_read is None else _operand(out_read), scalars,
                                                       state))
        ptrs = [r[0] for r in reads]
        if shape.host_checks:
            self._check_host_values(shape, ptrs)
        result = None
        if out is None:
            out, out_ptr, result = _allocate_out(framework, first_array, backend, device, *shape.out_size, stream)
        else:
            out_ptr = out_read[0]
        ptrs = (*ptrs, out_ptr)
        if bind:
            return BoundLaunch(self, shape, ptrs, stream, current, (lambda: out) if result is None else result,
                               (arrays, reads, out, out_read))
        if shape.problem is not None:
            self._launch(shape, ptrs, stream)
        return out if result is None else result()

    def _launch(self, shape: _Shape, ptrs: tuple[int, ...], stream: int) -> _Prepared:
        """Launch ``shape`` with these pointers (ARG_NAMES then out) on ``stream``; bad pointers or streams raise
        naming them."""
        try:
            bits = 0
            for p in ptrs:
                bits |= p
            if bits & ALIGNMENT_BITS:
                alignment = tuple([p & ALIGNMENT_BITS for p in ptrs])
                prepared = shape.prepared.get(alignment) or self._prepared(shape, alignment, ptrs)
            else:
                prepared = shape.aligned or self._prepared(shape, (0,) * len(ptrs), ptrs)
            prepared.go(stream, *ptrs)  # a wrong pointer count fails here (TypeError / struct.error)
        except (TypeError, ValueError, OverflowError, struct.error) as exc:
            if isinstance(exc, ValidationError):
                raise  # the op's own check of these pointers (alignment it cannot take), already named
            count = len(self.ARG_NAMES) + 1
            if len(ptrs) != count:
                raise ValueError(f"pointers: expected {count} device addresses, got {len(ptrs)}") from None
            self._raise_bad_pointer(ptrs)
            if isinstance(stream, bool) or not isinstance(stream, (int, np.integer)) or not 0 <= stream < 2**64:
                raise TypeError(f"stream: expected an int stream handle in [0, 2**64), got "
                                f"{type(stream).__name__} {stream!r}") from None
            if not all(type(p) is int for p in ptrs) or type(stream) is not int:  # numpy ints: as Python ints
                return self._launch(shape, tuple(int(p) for p in ptrs), int(stream))
            raise
        return prepared

    def _raise_bad_pointer(self, ptrs: tuple[int, ...]) -> None:
        for name, p in zip((*self.ARG_NAMES, "out"), ptrs):
            if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
                raise TypeError(f"{name}: expected an int device address, got {type(p).__name__} {p!r}")
            if not 0 <= int(p) < 2**64:
                raise ValueError(f"{name}: expected a device address in [0, 2**64), got {p}")
