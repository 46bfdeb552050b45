"""The one small interface every runtime backend implements.

A backend knows how to turn a code object into a callable function and launch it with a packed
kernarg buffer on a stream. It knows nothing about fp8_mqa_logits: the dispatch layer chooses the
kernel symbol, grid, block and kernarg bytes; the backend only executes them.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence


@dataclass(frozen=True)
class DeviceAllocation:
    """Device memory owned by a backend; ``free()`` releases it (idempotent)."""

    ptr: int
    nbytes: int
    backend: "Backend"

    def free(self) -> None:
        self.backend.free(self)


@dataclass(frozen=True)
class BufferSpan:
    """A span of device memory a launch may touch: [ptr, ptr + nbytes).

    GPU backends ignore these; the emulator backend registers them so that every access
    outside them is reported (memcheck). ``writable`` False marks inputs. ``name`` is the argument
    the span belongs to, for error messages.
    """

    ptr: int
    nbytes: int
    writable: bool = False
    name: str = ""


class PackedKernargs:
    """A reusable packed kernarg buffer and the driver's ``extra`` array pointing at it: {BUFFER_POINTER (1),
    buffer, BUFFER_SIZE (2), &size, END}. HIP's END marker is 3 and CUDA's 0, so the caller names it.

    The driver copies the buffer during the launch call, so one buffer serves every launch of a prepared
    kernel: the caller rewrites ``buffer`` (a writable ctypes char array) and launches again; nothing is
    allocated per call. Not thread-safe by itself: the caller holds a lock from writing to launching."""

    __slots__ = ("buffer", "_size", "_extra", "address")

    def __init__(self, kernargs: bytes | int, end_marker: int) -> None:
        size = kernargs if isinstance(kernargs, int) else len(kernargs)
        self.buffer = ctypes.create_string_buffer(size)
        if not isinstance(kernargs, int):
            ctypes.memmove(self.buffer, bytes(kernargs), size)
        self._size = ctypes.c_size_t(size)
        self._extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self.buffer), 2, ctypes.addressof(self._size),
                                            end_marker)
        #: address of the ``extra`` array, what cuLaunchKernel / hipModuleLaunchKernel take
        self.address = ctypes.addressof(self._extra)

    def tobytes(self) -> bytes:
        return self.buffer.raw


def pointer_writer(pointer_offsets: tuple[int, ...], base: int = 0) -> tuple[Callable[..., None], int]:
    """(write, offset): ``write(buffer, offset, *pointers)`` stores 8-byte pointers at ``base + pointer_offsets``.
    One ``Struct.pack_into`` when the offsets are consecutive slots (the manifest puts all seven first), else a
    general writer."""
    offsets = tuple(pointer_offsets)
    if all(b == a + 8 for a, b in zip(offsets, offsets[1:])):
        return struct.Struct(f"<{len(offsets)}Q").pack_into, base + offsets[0]
    packers = [(struct.Struct("<Q").pack_into, base + off) for off in offsets]

    def write(buffer: Any, _offset: int, *pointers: int) -> None:
        for (pack, off), p in zip(packers, pointers, strict=True):
            pack(buffer, off, p)

    return write, 0


class Backend(ABC):
    """load module -> get function -> launch; plus allocate and synchronize."""

    #: short name used in ``device=`` arguments and tables: "hip", "cuda", "emulator"
    name: str = ""
    #: DLPack device type this backend executes on (kDLCPU=1, kDLCUDA=2, kDLROCM=10)
    dlpack_device_type: int = 0
    #: target architecture of the code objects this backend loads, e.g. "gfx950", "sm_90a"
    arch: str = ""
    #: END marker of the driver's ``extra`` array (CUDA 0, HIP 3); see PackedKernargs
    kernarg_end_marker: int = 0
    #: True where launches need the BufferSpans they may touch (the emulator's memcheck); GPU backends
    #: ignore them, so callers skip building them
    needs_buffer_spans: bool = False

    @abstractmethod
    def set_device(self, device_id: int) -> Any:
        """Make ``device_id`` the calling thread's current device (CUDA: its primary context; HIP:
        hipSetDevice), so launches, modules and streams of that device are valid. Returns what to hand
        to :meth:`restore_device` afterwards, or None when that device was current already."""

    @abstractmethod
    def restore_device(self, previous: Any) -> None:
        """Undo :meth:`set_device` (``previous`` is its non-None return value): a call never leaves the
        caller's thread on another device, as a framework's device guard would not."""

    @contextmanager
    def on_device(self, device_id: int) -> Iterator[None]:
        """Run the block with ``device_id`` current (:meth:`set_device`), then put the caller's device back
        (:meth:`restore_device`), also when the block raises. For the cold paths (loading, allocating); the
        launch hot path inlines the same two calls."""
        previous = self.set_device(device_id)
        try:
            yield
        finally:
            if previous is not None:
                self.restore_device(previous)

    @abstractmethod
    def load_module(self, image: bytes, device_id: int = 0) -> Any:
        """Load a code object (bytes) onto device ``device_id``; return an opaque module handle."""

    @abstractmethod
    def get_function(self, module: Any, name: str) -> Any:
        """Return an opaque function handle for kernel symbol ``name`` in ``module``."""

    @abstractmethod
    def launch(
        self,
        function: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        kernargs: bytes,
        stream: int = 0,
        buffers: Sequence[BufferSpan] = (),
        shared_mem: int = 0,
    ) -> None:
        """Enqueue one launch of ``function`` with an already packed kernarg buffer."""

    def kernarg_buffer(self, kernargs: bytes | int) -> PackedKernargs:
        """A reusable kernarg buffer for :meth:`launch_packed` (``kernargs``: initial bytes or a size)."""
        return PackedKernargs(kernargs, self.kernarg_end_marker)

    def launch_packed(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      kernargs: PackedKernargs, stream: int = 0, shared_mem: int = 0,
                      buffers: Sequence[BufferSpan] = ()) -> None:
        """:meth:`launch` from a :class:`PackedKernargs` the caller rewrites between launches (the hot path
        of a prepared launch: GPU backends hand the driver its address, no per-call allocation)."""
        self.launch(function, grid, block, kernargs.tobytes(), stream=stream, buffers=buffers, shared_mem=shared_mem)

    def bind_launch(self, function: Any, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                    shared_mem: int, kernargs: bytes, pointer_offsets: tuple[int, ...],
                    spans_of: Callable[[tuple[int, ...]], Sequence[BufferSpan]] | None = None) -> Callable[..., None]:
        """Bind everything of a prepared launch but its stream and pointers, once; return
        ``go(stream, q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out)`` which writes the seven pointers
        (ints) into ``kernargs`` at ``pointer_offsets`` and launches on ``stream`` in ``device_id``'s context,
        leaving the caller's device as it was. Thread-safe (a lock from writing to launching). This generic form
        goes through :meth:`set_device` / :meth:`launch_packed` / :meth:`restore_device`; GPU backends override
        it with cheaper routes (the hot path of a serving loop). ``spans_of(pointers)``: the memory a launch may touch,
        for backends with :attr:`needs_buffer_spans` (the emulator)."""
        packed = self.kernarg_buffer(kernargs)
        write, offset = pointer_writer(pointer_offsets)
        buffer, lock = packed.buffer, threading.Lock()

        def go(stream: int, *pointers: int) -> None:
            with lock:
                write(buffer, offset, *pointers)
                previous = self.set_device(device_id)
                try:
                    spans = spans_of(pointers) if spans_of is not None else ()
                    self.launch_packed(function, grid, block, packed, stream, shared_mem, spans)
                finally:
                    if previous is not None:
                        self.restore_device(previous)

        return go

    @abstractmethod
    def synchronize(self, stream: int = 0) -> None:
        """Block until all work on ``stream`` is done."""

    @abstractmethod
    def alloc(self, nbytes: int, device_id: int = 0) -> DeviceAllocation:
        """Allocate ``nbytes`` of device memory on ``device_id``."""

    @abstractmethod
    def free(self, allocation: DeviceAllocation) -> None:
        """Release memory from :meth:`alloc`."""

    @abstractmethod
    def compute_units(self, device_id: int = 0) -> int:
        """Number of CUs / SMs of the device (drives the SplitN heuristic)."""

    def arch_of(self, device_id: int) -> str:
        """The target of device ``device_id``: what a call on it runs unless ``arch=`` says otherwise. The
        backend's own ``arch`` where one backend is one target (CUDA: sm_90a; the emulator: gfx950); the hip
        backend asks the device (gfx950 on MI350X / MI355X, gfx942 on MI300X / MI325X)."""
        return self.arch

    def forget_devices(self) -> None:
        """Drop what this backend remembers about its devices (their targets): for hosts and tests that
        reconfigure a device under rawindexer (:func:`rawindexer.api.reset_caches`)."""

    def compute_units_for(self, device_id: int, arch: str) -> int:
        """CUs the heuristic plans ``arch``'s kernel for: the device's own count on a GPU; a backend that
        runs several targets without being one (the emulator) answers the modelled device's."""
        return self.compute_units(device_id)

    # Host <-> device copies for hosts without a framework (run.py, embedding). Backends whose device
    # memory is host memory (the emulator) inherit these; GPU backends override them.
    def copy_from_host(self, dst_ptr: int, src: "np.ndarray") -> None:
        """Copy the bytes of a contiguous host array to device address ``dst_ptr`` (synchronous)."""
        self._require_host_memory()
        ctypes.memmove(dst_ptr, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: "np.ndarray", src_ptr: int) -> None:
        """Copy ``dst.nbytes`` bytes from device address ``src_ptr`` into a contiguous host array."""
        self._require_host_memory()
        ctypes.memmove(dst.ctypes.data, src_ptr, dst.nbytes)

    def order_after(self, consumer_stream: int | None, producer_stream: int) -> None:
        """Make ``consumer_stream`` (a DLPack consumer's stream argument: None/1 legacy default, 2
        per-thread, else a handle) wait for the work queued so far on ``producer_stream``, without
        blocking the host. Runs on the current device (the caller made the streams' device current).
        Backends whose launches finish inside ``launch`` need nothing."""
        if self.dlpack_device_type != 1:
            raise NotImplementedError(f"{self.name}: stream ordering is not implemented for this backend")

    def device_count(self) -> int:
        """Devices this backend can run on (the emulator: one)."""
        return 1 if self.dlpack_device_type == 1 else 0

    def _require_host_memory(self) -> None:
        if self.dlpack_device_type != 1:
            raise NotImplementedError(f"{self.name}: host copies are not implemented for this backend")


class DriverBackend(Backend):
    """A GPU backend whose driver takes the packed kernarg buffer by address (HIP's and CUDA's launch
    ``extra``): :meth:`launch` is :meth:`launch_packed` on a buffer made for the one call, so one packer (the
    manifest's layout) serves every backend."""

    def launch(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], kernargs: bytes,
               stream: int = 0, buffers: Sequence[BufferSpan] = (), shared_mem: int = 0) -> None:
        self.launch_packed(function, grid, block, self.kernarg_buffer(kernargs), stream, shared_mem)

    @abstractmethod
    def launch_packed(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      kernargs: PackedKernargs, stream: int = 0, shared_mem: int = 0,
                      buffers: Sequence[BufferSpan] = ()) -> None:
        """Enqueue ``function`` with the driver reading ``kernargs`` at its address, on the current device."""
