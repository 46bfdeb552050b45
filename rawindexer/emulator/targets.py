"""Which AMD GPU a code object was built for, and what that changes in the emulator.

The decoder and the instruction semantics are shared by the GFX9 targets the emulator runs (gfx942,
gfx950): the encodings agree and an opcode a target lacks is never emitted for it. What differs in
meaning is the 8-bit float formats of the fp8 MFMAs and conversions: OCP e4m3fn / e5m2 on gfx950,
e4m3fnuz / e5m2fnuz on gfx940-942 (CDNA3). :func:`target_of` reads the target from the code object
(its metadata's ``amdhsa.target`` and the ELF header's ``e_flags``, which must agree) so that the
same ops build the right tables for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import fp8
from .errors import DecodeError

# EF_AMDGPU_MACH values (low byte of e_flags) of the targets the emulator knows (LLVM's ELF.h)
_MACH = {0x040: "gfx940", 0x04B: "gfx941", 0x04C: "gfx942", 0x04F: "gfx950"}
_MACH_MASK = 0xFF


@dataclass(frozen=True)
class Target:
    """A GPU target as the emulator sees it. ``fp8`` / ``bf8``: the formats its fp8 instructions read
    and write (None: the target has no fp8 instructions, and executing one is an error)."""

    name: str
    fp8: fp8.Format | None
    bf8: fp8.Format | None

    def f8_format(self, bf8: bool, inst=None) -> fp8.Format:
        fmt = self.bf8 if bf8 else self.fp8
        if fmt is None:
            raise DecodeError(f"{self.name} has no fp8/bf8 instructions, yet the code object holds {inst}")
        return fmt


_FNUZ = (fp8.FP8_FNUZ, fp8.BF8_FNUZ)
_OCP = (fp8.FP8, fp8.BF8)
TARGETS = {name: Target(name, *fmts) for name, fmts in
           (("gfx940", _FNUZ), ("gfx941", _FNUZ), ("gfx942", _FNUZ), ("gfx950", _OCP))}
DEFAULT = TARGETS["gfx950"]


def processor_of(target_id: str) -> str:
    """'amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-' -> 'gfx942' ('' when there is none)."""
    return target_id.rsplit("-", 1)[-1].split(":", 1)[0] if target_id else ""


def target_of(code) -> Target:
    """The :class:`Target` of a parsed :class:`~rawindexer.codeobject.CodeObject`.

    An unknown processor falls back to gfx950 (the emulator's reference target) only when the code
    object names none at all; a named processor the emulator does not know is an error."""
    from_meta = processor_of(code.target)
    from_flags = _MACH.get(code.e_flags & _MACH_MASK, "")
    if from_meta and from_flags and from_meta != from_flags:
        raise DecodeError(f"code object names target {from_meta!r} in its metadata but e_flags "
                          f"0x{code.e_flags:x} say {from_flags!r}")
    name = from_meta or from_flags
    if not name:
        if code.e_flags & _MACH_MASK:
            raise DecodeError(f"code object is for an unknown processor (e_flags 0x{code.e_flags:x}); the emulator "
                              f"runs {', '.join(sorted(TARGETS))}")
        return DEFAULT
    if name not in TARGETS:
        raise DecodeError(f"code object is for {name}; the emulator runs {', '.join(sorted(TARGETS))}")
    return TARGETS[name]
