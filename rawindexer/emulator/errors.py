"""Exceptions raised by the emulator. All derive from :class:`EmulatorError` (rawindexer.errors)."""
from __future__ import annotations

from ..errors import EmulatorError  # the base sits in rawindexer.errors, under BackendError

__all__ = ["EmulatorError", "DecodeError", "MemoryFault", "ExecMaskError", "BarrierDeadlock", "InstructionLimit"]


class DecodeError(EmulatorError):
    """An instruction the emulator cannot decode or does not implement (names address and encoding)."""


class MemoryFault(EmulatorError):
    """memcheck: a load/store outside the registered spans, or a store into a read-only span."""

    def __init__(self, message: str, *, address: int | None = None, lane: int | None = None,
                 pc: int | None = None, mnemonic: str | None = None) -> None:
        super().__init__(message)
        self.address, self.lane, self.pc, self.mnemonic = address, lane, pc, mnemonic


class ExecMaskError(EmulatorError):
    """An instruction that needs all 64 lanes active (MFMA, v_permlane32_swap) ran with a partial EXEC."""


class BarrierDeadlock(EmulatorError):
    """s_barrier that can never complete (some waves ended or the program never reaches it)."""


class InstructionLimit(EmulatorError):
    """A wave executed more instructions than the watchdog allows (likely an endless loop)."""
