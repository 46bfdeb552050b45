"""Compile the emulator's micro-kernels (once per test session) and launch them on the emulator."""
from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

import build
from rawindexer.emulator import Emulator, pack_kernargs

KDIR = Path(__file__).resolve().parent
_TMP = Path(tempfile.mkdtemp(prefix="rawindexer-emu-kernels-"))


@functools.cache
def compiled(source: str, arch: str = "gfx950") -> tuple[bytes, str]:
    """(code object bytes, assembly listing) of tests/emulator/emulator_kernels/<source>.hip for ``arch``."""
    out, asm = _TMP / f"{source}.{arch}.hsaco", _TMP / f"{source}.{arch}.s"
    build.compile_hip(KDIR / f"{source}.hip", out, asm=asm, extra_flags=[f"-I{KDIR}"], arch=arch)
    return out.read_bytes(), asm.read_text()


@functools.cache
def emulator(source: str, arch: str = "gfx950") -> Emulator:
    return Emulator(compiled(source, arch)[0])


def launch(source: str, kernel: str, grid, block, args: Sequence, writable: Sequence[np.ndarray] = (),
           readonly: Sequence[np.ndarray] = (), emu: Emulator | None = None, shared_mem: int = 0,
           arch: str = "gfx950"):
    """Pack ``args`` from the kernel's metadata, register the arrays and run; returns the stats."""
    emu = emu or emulator(source, arch)
    kernargs = pack_kernargs(emu.code.kernels[kernel], list(args), grid, block)
    spans = [(a.ctypes.data, a.nbytes, True) for a in writable] + [(a.ctypes.data, a.nbytes, False) for a in readonly]
    return emu.launch(kernel, grid, block, kernargs, spans, shared_mem)
