"""The CPU backend: executes gfx950 (default) or gfx942 code objects in :mod:`rawindexer.emulator`.

Device pointers are host pointers (numpy / torch-CPU / JAX-CPU buffers are used zero-copy); only the
spans a launch lists in ``buffers`` (plus its kernargs and memory from :meth:`alloc`) are accessible,
so an out-of-bounds access raises :class:`rawindexer.emulator.MemoryFault` instead of corrupting memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..emulator import Emulator, LaunchStats, Memory
from .base import Backend, BufferSpan, DeviceAllocation

MI355X_CUS = 256
MI300X_CUS = 304
#: the device each target's launches are planned for when emulated (MI355X; MI300X / MI325X)
MODELLED_CUS = {"gfx950": MI355X_CUS, "gfx942": MI300X_CUS}
_MAPS = Path("/proc/self/maps")


def _mapped_ranges() -> list[tuple[int, int, bool, bool]]:
    """(start, end, readable, writable) of every mapping of this process, from /proc/self/maps."""
    ranges = []
    for line in _MAPS.read_text().splitlines():
        addresses, perms = line.split(None, 2)[:2]
        lo, hi = addresses.split("-")
        ranges.append((int(lo, 16), int(hi, 16), perms[0] == "r", perms[1] == "w"))
    return ranges


def require_mapped(span: BufferSpan) -> None:
    """Refuse a span the process cannot prove is mapped readable (and writable where the launch writes):
    the emulator reads and writes host memory at these addresses, and a bad pointer would otherwise kill
    the interpreter with a segfault. Where /proc/self/maps does not exist the check cannot be made and is
    skipped (spans from DLPack arrays are the arrays' own memory)."""
    if span.nbytes <= 0 or not _MAPS.exists():
        return
    what = span.name or f"buffer@0x{span.ptr:x}"
    need = "readable and writable" if span.writable else "readable"
    if span.ptr <= 0:
        raise ValueError(f"{what}: expected a {need} host address for {span.nbytes} bytes, got {span.ptr:#x}")
    pos, end = span.ptr, span.ptr + span.nbytes
    for lo, hi, readable, writable in sorted(_mapped_ranges()):
        if hi <= pos or lo > pos:
            continue
        if not readable or (span.writable and not writable):
            break
        pos = hi
        if pos >= end:
            return
    raise ValueError(f"{what}: expected {span.nbytes} {need} bytes at {span.ptr:#x}, but "
                     f"[{pos:#x}, {end:#x}) is not mapped {need} in this process (a bad or too-small pointer)")


@dataclass
class _Function:
    emulator: Emulator
    name: str


class EmulatorBackend(Backend):
    """gfx950 or gfx942 on the CPU: load_module -> get_function -> launch, exactly like the GPU backends.
    The code object names its target; ``arch`` is the one used when the caller names none."""

    name = "emulator"
    dlpack_device_type = 1  # kDLCPU
    arch = "gfx950"
    needs_buffer_spans = True

    def __init__(self, *, strict_barrier: bool = True) -> None:
        self.memory = Memory()
        self.strict_barrier = strict_barrier
        self._allocations: dict[int, tuple[np.ndarray, Any]] = {}
        self.last_stats: LaunchStats | None = None

    def set_device(self, device_id: int) -> None:
        if device_id != 0:
            raise ValueError(f"device_id: the emulator is one device, 0; got {device_id}")
        return None

    def restore_device(self, previous: Any) -> None:
        return None

    def load_module(self, image: bytes, device_id: int = 0) -> Emulator:
        return Emulator(bytes(image), self.memory, strict_barrier=self.strict_barrier)

    def get_function(self, module: Emulator, name: str) -> _Function:
        if name not in module.code.kernels:
            raise KeyError(f"kernel {name!r} not in module (has {', '.join(module.kernels)})")
        return _Function(module, name)

    def launch(self, function: _Function, grid: tuple[int, int, int], block: tuple[int, int, int],
               kernargs: bytes, stream: int = 0, buffers: Sequence[BufferSpan] = (), shared_mem: int = 0) -> None:
        # launches run synchronously: the stream only orders work, and there is one CPU
        for span in buffers:
            require_mapped(span)
        self.last_stats = function.emulator.launch(function.name, grid, block, kernargs, buffers, shared_mem)

    def synchronize(self, stream: int = 0) -> None:
        return None

    def alloc(self, nbytes: int, device_id: int = 0) -> DeviceAllocation:
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

    def compute_units_for(self, device_id: int, arch: str) -> int:
        return MODELLED_CUS.get(arch, MI355X_CUS)

    def host_array(self, allocation: DeviceAllocation) -> np.ndarray:
        """The numpy array behind an allocation (the emulator's device memory is host memory)."""
        return self._allocations[allocation.ptr][0][: allocation.nbytes]
