"""The one small interface every runtime backend implements.

A backend knows how to turn a code object into a callable function and launch it with a packed
kernarg buffer on a stream. It knows nothing about fp8_mqa_logits: the dispatch layer chooses the
kernel symbol, grid, block and kernarg bytes; the backend only executes them.
"""
from __future__ import annotations

import ctypes
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence


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
    outside them is reported (memcheck). ``writable`` False marks inputs.
    """

    ptr: int
    nbytes: int
    writable: bool = False


class PackedKernargs:
    """The driver's ``extra`` array for a packed kernarg buffer: {BUFFER_POINTER (1), buffer,
    BUFFER_SIZE (2), &size, END}. HIP's END marker is 3 and CUDA's 0, so the caller names it.
    The driver copies the buffer during the launch call; this object only has to outlive that call."""

    def __init__(self, kernargs: bytes, end_marker: int) -> None:
        self._buffer = ctypes.create_string_buffer(bytes(kernargs), len(kernargs))
        self._size = ctypes.c_size_t(len(kernargs))
        self._extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self._buffer), 2, ctypes.addressof(self._size),
                                            end_marker)

    @property
    def address(self) -> int:
        return ctypes.addressof(self._extra)


class Backend(ABC):
    """load module -> get function -> launch; plus allocate and synchronize."""

    #: short name used in ``device=`` arguments and tables: "hip", "cuda", "emulator"
    name: str = ""
    #: DLPack device type this backend executes on (kDLCPU=1, kDLCUDA=2, kDLROCM=10)
    dlpack_device_type: int = 0
    #: target architecture of the code objects this backend loads, e.g. "gfx950", "sm_90a"
    arch: str = ""

    @abstractmethod
    def load_module(self, image: bytes) -> Any:
        """Load a code object (bytes) and return an opaque module handle."""

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

    @abstractmethod
    def synchronize(self, stream: int = 0) -> None:
        """Block until all work on ``stream`` is done."""

    @abstractmethod
    def alloc(self, nbytes: int) -> DeviceAllocation:
        """Allocate ``nbytes`` of device memory."""

    @abstractmethod
    def free(self, allocation: DeviceAllocation) -> None:
        """Release memory from :meth:`alloc`."""

    @abstractmethod
    def compute_units(self, device_id: int = 0) -> int:
        """Number of CUs / SMs of the device (drives the SplitN heuristic)."""

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
        blocking the host. Backends whose launches finish inside ``launch`` need nothing."""
        if self.dlpack_device_type != 1:
            raise NotImplementedError(f"{self.name}: stream ordering is not implemented for this backend")

    def device_count(self) -> int:
        """Devices this backend can run on (the emulator: one)."""
        return 1 if self.dlpack_device_type == 1 else 0

    def _require_host_memory(self) -> None:
        if self.dlpack_device_type != 1:
            raise NotImplementedError(f"{self.name}: host copies are not implemented for this backend")
