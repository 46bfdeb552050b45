"""The CPU backend: executes gfx950 code objects in :mod:`rawindexer.emulator`.

Device pointers are host pointers (numpy / torch-CPU / JAX-CPU buffers are used zero-copy); only the
spans a launch lists in ``buffers`` (plus its kernargs and memory from :meth:`alloc`) are accessible,
so an out-of-bounds access raises :class:`rawindexer.emulator.MemoryFault` instead of corrupting memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..emulator import Emulator, LaunchStats, Memory
from .base import Backend, BufferSpan, DeviceAllocation

MI355X_CUS = 256


@dataclass
class _Function:
    emulator: Emulator
    name: str


class EmulatorBackend(Backend):
    """gfx950 on the CPU: load_module -> get_function -> launch, exactly like the GPU backends."""

    name = "emulator"
    dlpack_device_type = 1  # kDLCPU
    arch = "gfx950"

    def __init__(self, *, strict_barrier: bool = True) -> None:
        self.memory = Memory()
        self.strict_barrier = strict_barrier
        self._allocations: dict[int, tuple[np.ndarray, Any]] = {}
        self.last_stats: LaunchStats | None = None

    def load_module(self, image: bytes) -> Emulator:
        return Emulator(bytes(image), self.memory, strict_barrier=self.strict_barrier)

    def get_function(self, module: Emulator, name: str) -> _Function:
        if name not in module.code.kernels:
            raise KeyError(f"kernel {name!r} not in module (has {', '.join(module.kernels)})")
        return _Function(module, name)

    def launch(self, function: _Function, grid: tuple[int, int, int], block: tuple[int, int, int],
               kernargs: bytes, stream: int = 0, buffers: Sequence[BufferSpan] = (), shared_mem: int = 0) -> None:
        # launches run synchronously: the stream only orders work, and there is one CPU
        self.last_stats = function.emulator.launch(function.name, grid, block, kernargs, buffers, shared_mem)

    def synchronize(self, stream: int = 0) -> None:
        return None

    def alloc(self, nbytes: int) -> DeviceAllocation:
        buf = np.zeros(max(int(nbytes), 1), np.uint8)
        span = self.memory.register(buf.ctypes.data, buf.nbytes, True, f"alloc({nbytes})")
        self._allocations[buf.ctypes.data] = (buf, span)
        return DeviceAllocation(buf.ctypes.data, int(nbytes), self)

    def free(self, allocation: DeviceAllocation) -> None:
        entry = self._allocations.pop(allocation.ptr, None)
        if entry is not None:
            buf, _ = entry
            for s in self.memory.spans:
                if s.ptr == buf.ctypes.data:
                    self.memory.unregister(s)

    def compute_units(self, device_id: int = 0) -> int:
        return MI355X_CUS

    def host_array(self, allocation: DeviceAllocation) -> np.ndarray:
        """The numpy array behind an allocation (the emulator's device memory is host memory)."""
        return self._allocations[allocation.ptr][0][: allocation.nbytes]
