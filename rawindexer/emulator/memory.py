"""Device memory of the emulator: registered host spans, accessed zero-copy, with memcheck.

Device addresses ARE host addresses. A launch registers the spans it may touch (its buffers, the
kernarg copy, memory from ``alloc``); every vector and scalar access is checked against them before
numpy touches a byte, so an out-of-bounds access raises :class:`MemoryFault` instead of corrupting
the Python process.
"""
from __future__ import annotations

import bisect
import ctypes
from dataclasses import dataclass, field

import numpy as np

from .errors import MemoryFault


@dataclass(eq=False)
class Span:
    """[ptr, ptr + nbytes) of host memory, viewed as bytes."""

    ptr: int
    nbytes: int
    writable: bool
    name: str = ""
    view: np.ndarray = field(repr=False, default=None)

    @property
    def end(self) -> int:
        return self.ptr + self.nbytes


def _byte_view(ptr: int, nbytes: int) -> np.ndarray:
    if nbytes == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(ptr))


class Memory:
    """The set of registered spans. Spans must not overlap (a second registration of the same
    range replaces the first's permissions with the more permissive of the two)."""

    def __init__(self) -> None:
        self._spans: list[Span] = []
        self._starts: list[int] = []
        self._arange = {n: np.arange(n, dtype=np.intp) for n in (1, 2, 4, 8, 12, 16)}

    # ---- registration ----
    def register(self, ptr: int, nbytes: int, writable: bool = False, name: str = "") -> Span:
        if ptr <= 0 and nbytes > 0:
            raise ValueError(f"cannot register span at address {ptr:#x}")
        for s in self._spans:
            if s.ptr == ptr and s.nbytes == nbytes:
                s.writable = s.writable or writable
                return s
            if ptr < s.end and s.ptr < ptr + nbytes:
                # overlapping views of one allocation: merge into the union
                lo, hi = min(ptr, s.ptr), max(ptr + nbytes, s.end)
                self.unregister(s)
                return self.register(lo, hi - lo, writable or s.writable, name or s.name)
        span = Span(ptr, nbytes, writable, name, _byte_view(ptr, nbytes))
        k = bisect.bisect(self._starts, ptr)
        self._starts.insert(k, ptr)
        self._spans.insert(k, span)
        return span

    def unregister(self, span: Span) -> None:
        k = self._spans.index(span)
        del self._spans[k]
        del self._starts[k]

    def clear(self) -> None:
        self._spans.clear()
        self._starts.clear()

    @property
    def spans(self) -> list[Span]:
        return list(self._spans)

    def find(self, addr: int) -> Span | None:
        k = bisect.bisect(self._starts, addr) - 1
        if k >= 0:
            s = self._spans[k]
            if addr < s.end:
                return s
        return None

    # ---- checks ----
    def _fault(self, where, lanes: np.ndarray, addrs: np.ndarray, size: int, write: bool) -> None:
        """Find the first offending lane and raise; ``where`` is (pc, mnemonic)."""
        pc, mnemonic = where
        for lane, a in zip(lanes.tolist(), addrs.tolist()):
            s = self.find(a)
            if s is None or a + size > s.end:
                near = self._describe_near(a)
                raise MemoryFault(
                    f"memcheck: {mnemonic} at pc 0x{pc:x}: lane {lane} {'stores' if write else 'loads'} "
                    f"{size} bytes at 0x{a:x}, outside every registered span ({near})",
                    address=a, lane=lane, pc=pc, mnemonic=mnemonic)
            if write and not s.writable:
                raise MemoryFault(
                    f"memcheck: {mnemonic} at pc 0x{pc:x}: lane {lane} stores {size} bytes at 0x{a:x} into "
                    f"read-only span {s.name or ''}[0x{s.ptr:x}, 0x{s.end:x})",
                    address=a, lane=lane, pc=pc, mnemonic=mnemonic)
        raise AssertionError("memcheck fault without an offending lane")

    def _describe_near(self, a: int) -> str:
        k = bisect.bisect(self._starts, a) - 1
        if k >= 0:
            s = self._spans[k]
            return f"{a - s.end} bytes past {s.name or 'span'}[0x{s.ptr:x}, 0x{s.end:x})"
        if self._spans:
            s = self._spans[0]
            return f"{s.ptr - a} bytes before {s.name or 'span'}[0x{s.ptr:x}, 0x{s.end:x})"
        return "no spans registered"

    def _index(self, addrs: np.ndarray, size: int, write: bool, lanes: np.ndarray, where) -> tuple:
        """(span view, byte index array (n, size)) for per-lane accesses of ``size`` bytes."""
        lo = int(addrs.min())
        hi = int(addrs.max()) + size
        s = self.find(lo)
        if s is not None and hi <= s.end and (s.writable or not write):
            offs = (addrs - np.uint64(s.ptr)).astype(np.intp)
            return s.view, offs[:, None] + self._arange[size]
        # slow path: lanes may hit different spans (legal) or none (fault)
        out = []
        for a in addrs.tolist():
            sp = self.find(a)
            if sp is None or a + size > sp.end or (write and not sp.writable):
                self._fault(where, lanes, addrs, size, write)
            out.append(sp)
        return None, out

    # ---- vector accesses ----
    def gather(self, addrs: np.ndarray, size: int, lanes: np.ndarray, where) -> np.ndarray:
        """Bytes ``(n, size)`` at each of the ``n`` addresses (uint64) of the active ``lanes``."""
        if addrs.size == 0:
            return np.zeros((0, size), np.uint8)
        view, idx = self._index(addrs, size, False, lanes, where)
        if view is not None:
            return view[idx]
        res = np.empty((addrs.size, size), np.uint8)
        for r, (a, sp) in enumerate(zip(addrs.tolist(), idx)):
            o = a - sp.ptr
            res[r] = sp.view[o:o + size]
        return res

    def scatter(self, addrs: np.ndarray, data: np.ndarray, lanes: np.ndarray, where) -> None:
        """Store ``data`` (n, size) bytes at the ``n`` addresses; later lanes win on overlap."""
        if addrs.size == 0:
            return
        size = data.shape[1]
        view, idx = self._index(addrs, size, True, lanes, where)
        if view is not None:
            view[idx] = data
            return
        for r, (a, sp) in enumerate(zip(addrs.tolist(), idx)):
            o = a - sp.ptr
            sp.view[o:o + size] = data[r]

    # ---- scalar accesses ----
    def read_dwords(self, addr: int, ndw: int, where) -> list[int]:
        size = 4 * ndw
        s = self.find(addr)
        if s is None or addr + size > s.end:
            self._fault(where, np.zeros(1, np.int64), np.array([addr], np.uint64), size, False)
        o = addr - s.ptr
        return s.view[o:o + size].view("<u4").tolist() if o % 4 == 0 else \
            np.frombuffer(s.view[o:o + size].tobytes(), "<u4").tolist()

    def write_dwords(self, addr: int, values: list[int], where) -> None:
        size = 4 * len(values)
        s = self.find(addr)
        if s is None or addr + size > s.end or not s.writable:
            self._fault(where, np.zeros(1, np.int64), np.array([addr], np.uint64), size, True)
        o = addr - s.ptr
        s.view[o:o + size] = np.array(values, "<u4").view(np.uint8)
