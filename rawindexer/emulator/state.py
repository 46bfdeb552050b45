"""Architectural state of one wave64: unified VGPR/AGPR file, SGPRs, EXEC/VCC/SCC/M0, PC.

Layout choices (for speed of the numpy-vectorised ops):

* VGPRs are a ``(64 lanes, 512 registers)`` uint32 array. One lane's consecutive registers are
  contiguous, so a 64-bit operand ``v[r:r+1]`` is a zero-copy ``uint64`` view, a dwordx4 load is one
  assignment and an MFMA operand ``v[r:r+7]`` is a ``(64, 32)`` byte view. AGPR ``a[n]`` lives at
  column ``accum_offset + n`` (gfx90a+ unified register file).
* SGPRs are a Python list indexed by the *operand encoding* (0-101 SGPRs, 106/107 VCC, 124 M0,
  126/127 EXEC): scalar ops are cheapest on Python ints, and special registers need no translation.
* EXEC is mirrored as a boolean lane mask (``exec_mask``) plus ``exec_full``; every write to
  s[126]/s[127] must call :meth:`Wave.sync_exec`.
"""
from __future__ import annotations

import numpy as np

N_LANES = 64
N_REGS = 512
VCC, M0, EXEC = 106, 124, 126
FULL = (1 << 64) - 1

_mask_cache: dict[int, np.ndarray] = {}


def bits_to_mask(bits: int) -> np.ndarray:
    """64-bit lane mask -> read-only bool array of 64 (cached; masks repeat a lot)."""
    m = _mask_cache.get(bits)
    if m is None:
        m = np.unpackbits(np.frombuffer(bits.to_bytes(8, "little"), np.uint8), bitorder="little").view(bool)
        m.flags.writeable = False
        if len(_mask_cache) > 8192:
            _mask_cache.clear()
        _mask_cache[bits] = m
    return m


def mask_to_bits(mask: np.ndarray) -> int:
    """bool array of 64 -> 64-bit lane mask."""
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


class Wave:
    """One wavefront's registers. Created by the launcher from the kernel descriptor."""

    __slots__ = ("v", "vf", "vi", "s", "scc", "exec_mask", "exec_full", "exec_bits", "lds", "wave_id",
                 "workgroup", "pc", "state", "executed", "counters", "scale")

    def __init__(self, wave_id: int, lds: np.ndarray, counters: list, workgroup: tuple[int, int, int]) -> None:
        self.v = np.zeros((N_LANES, N_REGS), np.uint32)
        self.vf = self.v.view(np.float32)
        self.vi = self.v.view(np.int32)
        self.s = [0] * 256
        self.scc = 0
        self.lds = lds
        self.wave_id = wave_id
        self.workgroup = workgroup
        self.pc = 0
        self.state = 0
        self.executed = 0
        self.counters = counters  # shared per-launch byte counters, see stats.py
        self.scale = None  # pending v_mfma_ld_scale_b32 operands (unused: the pair is decoded as one)
        self.set_exec(FULL)

    def set_exec(self, bits: int) -> None:
        self.s[EXEC] = bits & 0xFFFFFFFF
        self.s[EXEC + 1] = bits >> 32
        self.sync_exec()

    def sync_exec(self) -> None:
        bits = self.s[EXEC] | (self.s[EXEC + 1] << 32)
        self.exec_bits = bits
        self.exec_full = bits == FULL
        self.exec_mask = bits_to_mask(bits)

    @property
    def vcc(self) -> int:
        return self.s[VCC] | (self.s[VCC + 1] << 32)
