"""Every exception rawindexer raises on purpose, in one hierarchy: ``except RawindexerError`` catches them all.

    RawindexerError
    +-- ValidationError (also ValueError)      an argument is wrong: the message names it, what it got, what it expected
    +-- DLPackError (also ValueError)          an array cannot be exchanged through DLPack
    +-- KernelNotBuiltError (also RuntimeError) no built or shipped kernels where the package looks
    +-- CodeObjectError (also ValueError)      a code object (ELF) the package cannot read
    +-- BackendError (also RuntimeError)       a runtime failed a call
        +-- HipError -- HipUnavailable         HIP: a call failed / no usable ROCm runtime here
        +-- CudaError                          a CUDA driver call failed
        +-- EmulatorError                      the gfx950 emulator (its subclasses live in rawindexer.emulator.errors)

Each class also derives from the builtin it was before (ValueError, RuntimeError), so ``except ValueError``
written against earlier versions keeps working. The modules that raise them re-export their names
(``rawindexer.validation.ValidationError``, ``rawindexer.backends.hip.HipError``, ...).
"""
from __future__ import annotations


class RawindexerError(Exception):
    """Base of every exception the package raises on purpose."""


class ValidationError(RawindexerError, ValueError):
    """An argument failed a check before anything was written or launched."""


class DLPackError(RawindexerError, ValueError):
    """Raised for anything that cannot be exchanged; the message starts with the argument's name."""


class KernelNotBuiltError(RawindexerError, RuntimeError):
    """No kernels where the package looks: neither built (source checkout) nor shipped (wheel)."""


class CodeObjectError(RawindexerError, ValueError):
    """A code object the ELF / AMDGPU-metadata reader cannot parse."""


class BackendError(RawindexerError, RuntimeError):
    """A runtime (HIP, CUDA, the emulator) failed a call."""


class HipError(BackendError):
    """A HIP call failed (the message names the call, HIP's error string and the hipError_t)."""


class HipUnavailable(HipError):
    """The hip backend cannot run on this machine: hip-python is missing or the ROCm runtime it loads
    (libamdhip64.so) is not installed."""


class CudaError(BackendError):
    """A CUDA driver call returned something other than CUDA_SUCCESS."""


class EmulatorError(BackendError):
    """Base of the emulator's errors: anything the emulated program did that a GPU would not survive or we
    cannot model."""


__all__ = ["RawindexerError", "ValidationError", "DLPackError", "KernelNotBuiltError", "CodeObjectError",
           "BackendError", "HipError", "HipUnavailable", "CudaError", "EmulatorError"]
