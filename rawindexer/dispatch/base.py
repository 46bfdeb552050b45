"""What every kernel family (one per target: gfx950, sm_90a, ...) gives the host side.

A family reads its part of the shipped ``manifest.json`` (``rawindexer/_kernels``, or an override: see
:mod:`rawindexer.kernel_files`), says which (heads, head_dim) it serves, and turns
a problem plus the caller's tunables into a :class:`LaunchPlan`: kernel symbol, grid, block and packed
kernarg bytes. Backends execute plans; they never look inside them.
"""
from __future__ import annotations

import json
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..kernel_files import KernelNotBuiltError, kernel_dir, manifest_mtime

#: None = resolve at each use (argument > $RAWINDEXER_KERNEL_DIR > the package's _kernels); the name
#: is kept because families import it as their default
BUILD_DIR: Path | None = None


@dataclass(frozen=True)
class Problem:
    """Shapes of one call. Q [M, heads, head_dim] fp8, K [N, head_dim] fp8, out [M, N] f32 rows
    ``out_row_stride`` elements apart."""

    M: int
    N: int
    heads: int
    head_dim: int
    out_row_stride: int
    clean_logits: bool


@dataclass(frozen=True)
class Tunables:
    """Caller overrides; 0 / None means 'let the host heuristic choose'."""

    block_m: int = 0
    split_n: int = 0
    num_warps: int = 0
    unroll2: bool | None = None
    reverse_rows: bool | None = None
    #: kernel design where a target builds several (gfx950: "seed" | "mr" | "mrp"); None = default
    variant: str | None = None


@dataclass(frozen=True)
class Pointers:
    """Device addresses of the operands (ints)."""

    q: int
    k: int
    kv_scale: int
    weights: int
    cu_seqlen_ks: int
    cu_seqlen_ke: int
    out: int


@dataclass(frozen=True)
class LaunchPlan:
    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    kernargs: bytes
    shared_mem: int = 0
    #: the tunables actually used, for tables and for "why" in error messages
    config: dict | None = None


def pack_kernargs(layout: list[dict], values: dict[str, int], size: int) -> bytes:
    """Pack ``values`` by the manifest's argument layout [{name, offset, size}] (little endian).
    Integer args are packed signed (pointers as unsigned 64-bit)."""
    buf = bytearray(size)
    for arg in layout:
        name, off, nbytes = arg["name"], arg["offset"], arg["size"]
        if name not in values:
            raise KeyError(f"kernel argument {name!r} has no value")
        v = int(values[name])
        fmt = {4: "<i", 8: "<q"}[nbytes] if v < 0 else {4: "<I", 8: "<Q"}[nbytes]
        struct.pack_into(fmt, buf, off, v)
    return bytes(buf)


@lru_cache(maxsize=None)
def _load_manifest(path: str, mtime: float) -> dict:
    return json.loads(Path(path).read_text())


def load_target(arch: str, build_dir: Path | None = BUILD_DIR) -> dict:
    """The manifest entry of one target from ``build_dir`` (None: the shipped kernels or the
    override); a :class:`KernelNotBuiltError` saying what to do when it is missing."""
    path, mtime = manifest_mtime(build_dir)
    manifest = _load_manifest(path, mtime)
    target = manifest.get("targets", {}).get(arch)
    if target is None:
        raise KernelNotBuiltError(f"{path} has no {arch!r} target (it has: {sorted(manifest.get('targets', {}))}): "
                                  "run `make`, which builds every target")
    return target


class KernelFamily(ABC):
    """Host side of one kernel source for one target."""

    arch: str = ""

    def __init__(self, build_dir: Path | None = BUILD_DIR) -> None:
        #: where the kernels come from; None = resolved at each use (see rawindexer.kernel_files)
        self.build_dir = build_dir

    @property
    def target(self) -> dict:
        return load_target(self.arch, self.build_dir)

    def code_object(self) -> bytes:
        return (kernel_dir(self.build_dir) / self.target["code_object"]).read_bytes()

    @abstractmethod
    def is_supported(self, heads: int, head_dim: int) -> bool:
        """True when a built variant serves this (heads, head_dim)."""

    @abstractmethod
    def plan(self, problem: Problem, tunables: Tunables, pointers: Pointers, compute_units: int) -> LaunchPlan:
        """Choose the variant and launch geometry, validate the tunables, pack the kernargs."""
