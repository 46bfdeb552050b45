"""What every kernel family (one per target: gfx950, sm_90a, ...) gives the host side.

A family reads its part of the shipped ``manifest.json`` (``rawindexer/_kernels``, or an override: see
:mod:`rawindexer.kernel_files`), says which (heads, head_dim) it serves, and turns
a problem plus the caller's tunables into a :class:`LaunchPlan`: kernel symbol, grid, block and packed
kernarg bytes. Backends execute plans; they never look inside them.
"""
from __future__ import annotations

import json
import os
import struct
import warnings
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
    """Shapes of one call. Q [M, heads, head_dim] fp8, K [N, head_dim] fp8 (both in ``fp8_format``,
    "e4m3fn" or "e4m3fnuz"), out [M, N] f32 rows ``out_row_stride`` elements apart."""

    M: int
    N: int
    heads: int
    head_dim: int
    out_row_stride: int
    clean_logits: bool
    fp8_format: str = "e4m3fn"


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


@dataclass(slots=True)
class LaunchPlan:
    """What one launch runs: kernel symbol, grid, block, packed kernargs (bytes laid out per the manifest)."""

    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    kernargs: bytes
    shared_mem: int = 0
    #: the tunables actually used, for tables and for "why" in error messages
    config: dict | None = None


#: the kernel's pointer arguments, in :class:`Pointers` order
POINTER_ARGS = ("q", "k", "kv_scale", "weights", "cu_seqlen_ks", "cu_seqlen_ke", "out")
#: pointer bits a plan may depend on (alignment checks, vectorised fills); see KernelFamily.prepare
ALIGNMENT_BITS = 0xFF
#: placeholder pointers a template is planned with: nonzero, carrying the caller's low ALIGNMENT_BITS
_PLACEHOLDER_BASE = 1 << 40


class LaunchTemplate:
    """A plan for one (problem, tunables, pointer alignment) with its pointers left as holes.

    Planning (heuristic, checks, kernarg packing) runs once per shape; each call then only writes the
    pointers (seven for prefill, six for decode) into a copy of ``kernargs`` at ``pointer_offsets``
    (:meth:`write_pointers`).
    """

    __slots__ = ("symbol", "grid", "block", "shared_mem", "config", "kernargs", "pointer_offsets", "_writers")

    def __init__(self, plan: LaunchPlan, pointer_offsets: tuple[int, ...]) -> None:
        self.symbol, self.grid, self.block = plan.symbol, plan.grid, plan.block
        self.shared_mem, self.config, self.kernargs = plan.shared_mem, plan.config, plan.kernargs
        self.pointer_offsets = pointer_offsets
        # One struct per run of consecutive 8-byte slots: the manifests' layouts put all pointers first, so the
        # common case is one pack_into.
        runs: list[list[int]] = []
        for i, off in enumerate(pointer_offsets):
            if runs and pointer_offsets[runs[-1][-1]] + 8 == off:
                runs[-1].append(i)
            else:
                runs.append([i])
        self._writers = tuple((struct.Struct(f"<{len(r)}Q"), pointer_offsets[r[0]], r[0], r[-1] + 1) for r in runs)

    def write_pointers(self, buffer, pointers: tuple[int, ...]) -> None:
        """Write the device addresses (the family's pointer_args order) into ``buffer`` (a writable copy of ``kernargs``)."""
        for packer, offset, lo, hi in self._writers:
            packer.pack_into(buffer, offset, *pointers[lo:hi])

    def pointer_writer(self) -> tuple:
        """(write, offset) with ``write(buffer, offset, *pointers)`` writing the pointers: a bound
        ``Struct.pack_into`` when they occupy one run of consecutive slots (the manifest's layout), else a
        general writer (``offset`` unused)."""
        if len(self._writers) == 1:
            packer, offset, _, _ = self._writers[0]
            return packer.pack_into, offset
        return (lambda buffer, _offset, *pointers: self.write_pointers(buffer, pointers)), 0

    def plan(self, pointers: tuple[int, ...]) -> LaunchPlan:
        """The full plan for these pointers (for callers that want to see what was launched)."""
        buf = bytearray(self.kernargs)
        self.write_pointers(buf, pointers)
        return LaunchPlan(self.symbol, self.grid, self.block, bytes(buf), self.shared_mem, self.config)


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


#: the older names of a kernel's ``params["design"]`` in manifests written before the registry named it
#: (gfx: "path", sm_90a: "impl"); a kernel directory built then (RAWINDEXER_KERNEL_DIR) still loads
LEGACY_DESIGN_KEYS = ("path", "impl")


def load_target(arch: str, build_dir: Path | None = BUILD_DIR) -> dict:
    """The manifest entry of one target from ``build_dir`` (None: the shipped kernels or the
    override); a :class:`KernelNotBuiltError` saying what to do when it is missing."""
    path, mtime = manifest_mtime(build_dir)
    manifest = _load_manifest(path, mtime)
    target = manifest.get("targets", {}).get(arch)
    if target is None:
        raise KernelNotBuiltError(f"{path} has no {arch!r} target (it has: {sorted(manifest.get('targets', {}))}): "
                                  "run `make`, which builds every target")
    for entry in target.get("kernels", {}).values():
        params = entry["params"]
        if "design" not in params:
            params["design"] = next((params[k] for k in LEGACY_DESIGN_KEYS if k in params), "seed")
    return target


def design_from_env(name: str, designs: tuple[str, ...], deprecated_name: str = "") -> str:
    """The design environment variable ``name`` asks for ("" when unset), checked against ``designs``.
    ``deprecated_name``: the variable's older name, read with a DeprecationWarning when ``name`` is unset."""
    source, value = name, os.environ.get(name, "")
    if not value and deprecated_name and os.environ.get(deprecated_name):
        source, value = deprecated_name, os.environ[deprecated_name]
        warnings.warn(f"{deprecated_name} is deprecated: set {name}", DeprecationWarning, stacklevel=3)
    if value and value not in designs:
        raise ValueError(f"{source}: expected one of {tuple(designs)}, got {value!r}")
    return value


class KernelFamily(ABC):
    """Host side of one kernel source for one target."""

    arch: str = ""
    #: the fp8 formats of q / k this target's kernels read (natively or by a documented in-kernel route)
    fp8_formats: tuple[str, ...] = ("e4m3fn",)
    #: why other formats are not served (for the error message)
    fp8_format_note: str = "the kernel's MFMA reads e4m3fn; e4m3fnuz is served by the gfx942 kernel"

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

    #: the kernel's pointer arguments, in the order callers pass pointers (a template's holes)
    pointer_args: tuple[str, ...] = POINTER_ARGS

    def prepare(self, problem: Problem, tunables: Tunables, alignment: tuple[int, ...],
                compute_units: int) -> LaunchTemplate:
        """:meth:`plan` once for a shape, with placeholder pointers that carry the callers' low address bits
        (``alignment``: each pointer's ``& ALIGNMENT_BITS``, Pointers order), so alignment checks and
        alignment-dependent flags come out as they would for the real pointers. Callers cache the result
        keyed by (problem, tunables, alignment)."""
        plan = self.plan(problem, tunables, Pointers(*placeholder_pointers(alignment)), compute_units)
        return self.template(plan)

    def template(self, plan: LaunchPlan) -> LaunchTemplate:
        """``plan`` with its pointer arguments (:attr:`pointer_args`) turned into holes, at the offsets the
        manifest gives for the plan's kernel."""
        layout = {a["name"]: a for a in self.target["kernels"][plan.symbol]["args"]}
        offsets = []
        for name in self.pointer_args:
            arg = layout.get(name)
            if arg is None or arg["size"] != 8:
                raise KernelNotBuiltError(f"{plan.symbol}: the manifest has no 8-byte kernel argument {name!r}")
            offsets.append(arg["offset"])
        return LaunchTemplate(plan, tuple(offsets))


def placeholder_pointers(alignment: tuple[int, ...]) -> tuple[int, ...]:
    """Nonzero, distinct addresses with the low bits ``alignment`` (one per pointer): what a template is
    planned with, so that alignment-dependent choices match the callers' real pointers."""
    return tuple(_PLACEHOLDER_BASE + (i << 12) + (a & ALIGNMENT_BITS) for i, a in enumerate(alignment))
