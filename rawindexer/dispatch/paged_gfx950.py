"""Host side of kernels/fp8_paged_mqa_logits.hip on gfx950: instance choice, launch geometry, kernargs.

The heuristic reads only host-known numbers (B, next_n, max_context_len, the CU count): never
context_lens or the block table, which live on the device, so a call needs no synchronisation and can
be captured in a graph.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import paged_kernels as pk
from ..kernel_files import manifest_mtime
from ..validation import ValidationError
from .base import (KernelFamily, KernelNotBuiltError, LaunchPlan, LaunchTemplate, _load_manifest, pack_kernargs,
                   placeholder_pointers)

WAVE = 64
TILE_N = 32
MAX_WARPS = 8
MAX_SPLIT_N = 65535
LDS_PER_CU = 160 * 1024   # gfx950
WAVES_PER_CU_WANTED = 16  # 4 per SIMD


@dataclass(frozen=True)
class PagedProblem:
    """Shapes of one call (see rawindexer.paged.fp8_paged_mqa_logits)."""

    batch: int
    next_n: int
    heads: int
    head_dim: int
    block_size: int
    max_context_len: int
    max_blocks: int
    out_row_stride: int
    clean_logits: bool
    context_lens_2d: bool
    #: format of q's and the cache's fp8 bytes ("e4m3fn" or "e4m3fnuz")
    fp8_format: str = "e4m3fn"
    #: kv_cache's first dimension (the sm_90a "tma" design's tensor map bounds the cache by it; 0: not known)
    num_blocks: int = 0


@dataclass(frozen=True)
class PagedPointers:
    q: int
    kv_cache: int
    weights: int
    context_lens: int
    block_table: int
    out: int


#: Per-logit gate |out - ref| <= eps * T of each design (rawindexer.testing.grading.logit_gate; docs/NUMERICS.md): the
#: head reduce in fp32 on the VALU, fp32 products -- the default designs' 1e-5
LOGIT_EPS = {"": 1e-5}
#: the decode kernels' pointer arguments, in :class:`PagedPointers` order
PAGED_POINTER_ARGS = ("q", "kv_cache", "weights", "context_lens", "block_table", "out")
#: both kernels read q and the cache with 16-byte loads
OPERAND_ALIGNMENT = 16
#: the older name of a kernel's ``params["design"]`` in decode manifests written before the rename; a kernel
#: folder built then (RAWINDEXER_KERNEL_DIR) still loads (prefill's: dispatch/base.LEGACY_DESIGN_KEYS)
LEGACY_DESIGN_KEY = "variant"


@dataclass(frozen=True)
class PagedTunables:
    """Caller overrides of the decode launch; 0 / None = the host heuristic / the target's default design.
    ``variant`` carries the public ``variant=`` keyword, which names a design (as prefill's Tunables)."""

    split_n: int = 0
    num_warps: int = 0
    variant: str | None = None


def best_split(batch: int, tiles: int, slots: int, min_tiles: int, max_waves: int = 4) -> int:
    """split_n for ``batch`` sequences of ``tiles`` tiles on a device with ``slots`` resident workgroups.

    Workgroups run in waves of ``slots``; the last wave is partly empty, so the fraction of the machine
    kept busy is T / (slots * ceil(T / slots)) for T = batch * split_n workgroups. Pick the split with the
    highest fraction (the fewest splits on a tie), never cutting a sequence into splits of fewer than
    ``min_tiles`` tiles, nor into more than ``max_waves`` waves' worth. (B = 64 on 528 slots, long contexts: 33
    splits fill 4 waves exactly; ceil(528 / 64) = 9 splits would be 1.09 waves, 55% busy.)
    """
    batch = max(batch, 1)
    most = max(1, min(tiles // max(min_tiles, 1), MAX_SPLIT_N, max_waves * -(-slots // batch)))
    return best_wave_fill(batch, slots, range(1, most + 1))


def best_wave_fill(batch: int, slots: int, splits: range) -> int:
    """The split of ``splits`` whose batch x split workgroups fill their last wave of ``slots`` best (the first on a
    tie)."""
    best, best_busy = splits[0], 0.0
    for split in splits:
        total = batch * split
        busy = total / (slots * -(-total // slots))
        if busy > best_busy + 1e-9:
            best, best_busy = split, busy
    return best


class PagedGfx950Family(KernelFamily):
    """The decode kernels' section of the manifest (``ops.fp8_paged_mqa_logits.gfx950``); found and loaded as
    prefill's kernels are (:mod:`rawindexer.kernel_files`, :meth:`KernelFamily.code_object`)."""

    arch = "gfx950"
    pointer_args = PAGED_POINTER_ARGS
    #: LDS one workgroup may allocate and one CU holds (gfx950: 160 KB)
    lds_per_cu = LDS_PER_CU

    @property
    def target(self) -> dict:
        path, mtime = manifest_mtime(self.build_dir)
        target = _load_manifest(path, mtime).get("ops", {}).get(pk.OP, {}).get(self.arch)
        if target is None:
            raise KernelNotBuiltError(f"{path} has no {pk.OP} {self.arch} kernels: run `make`")
        for entry in target.get("kernels", {}).values():
            params = entry["params"]
            if "design" not in params and LEGACY_DESIGN_KEY in params:
                params["design"] = params[LEGACY_DESIGN_KEY]
        return target

    def design(self, design: str | None, fp8_format: str = "e4m3fn") -> str:
        """The design to run: ``design`` (the caller's ``variant=``) if given, one of the target's; else the one
        reading ``fp8_format`` where the target builds one per format, else the target's default."""
        spec = pk.TARGETS[self.arch]
        formats = spec.format_designs or {"e4m3fn": None}
        if fp8_format not in formats:
            raise ValueError(f"fp8_format: expected {' or '.join(formats)} for the {self.arch} decode kernel, got "
                             f"{fp8_format!r}")
        if design is None:
            return spec.default_design if formats[fp8_format] is None else formats[fp8_format]
        if design not in spec.designs:
            raise ValueError(f"variant: expected None or one of {[d for d in spec.designs if d]} for {self.arch}, "
                             f"got {design!r}")
        return design

    def entry(self, heads: int, head_dim: int, block_size: int, design: str | None = None,
              fp8_format: str = "e4m3fn") -> dict | None:
        spec = pk.TARGETS[self.arch]
        fmt = fp8_format if spec.format_designs is None or fp8_format in spec.format_designs else None
        fmt = fmt or next(iter(spec.format_designs))
        symbol = spec.symbol(pk.PagedInstance(heads, head_dim, block_size), self.design(design, fmt))
        entry = self.target["kernels"].get(symbol)
        return {**entry, "symbol": symbol} if entry else None

    def is_supported(self, heads: int, head_dim: int, block_size: int) -> bool:
        return self.entry(heads, head_dim, block_size) is not None

    def choose(self, p: PagedProblem, compute_units: int, split_n: int = 0, num_warps: int = 0) -> dict:
        """num_warps: 4, or more when the workgroup's LDS (Q of next_n rows) would otherwise cap a CU below 16
        waves. split_n: :func:`best_split` over the device's resident workgroups (registers and LDS), at
        least two tiles per wave of a split at the longest possible context (max_context_len)."""
        lds = pk.dynamic_lds_bytes(p.heads, p.head_dim, p.next_n)
        if lds > self.lds_per_cu:
            raise ValueError(f"(num_heads, head_dim, next_n): Q and weights of one sequence need {lds} bytes of LDS, "
                             f"more than {self.arch}'s {self.lds_per_cu}; got ({p.heads}, {p.head_dim}, {p.next_n})")
        if not num_warps:
            groups_per_cu = max(1, self.lds_per_cu // lds)
            num_warps = min(MAX_WARPS, max(4, -(-WAVES_PER_CU_WANTED // groups_per_cu)))
        if not split_n:
            # resident workgroups per CU: registers (waves/SIMD x 4 SIMDs) and LDS both limit them
            entry = self.entry(p.heads, p.head_dim, p.block_size)
            waves = 4 * (entry["resources"]["waves_per_simd"] if entry else 4)
            per_cu = max(1, min(waves // num_warps, self.lds_per_cu // lds))
            tiles = -(-p.max_context_len // TILE_N)
            split_n = best_split(p.batch, tiles, per_cu * compute_units, 2 * num_warps)
        return {"num_warps": num_warps, "split_n": split_n, "lds": lds}

    def plan(self, p: PagedProblem, ptrs: PagedPointers, compute_units: int, split_n: int = 0,
             num_warps: int = 0, design: str | None = None) -> LaunchPlan:
        self.design(design, p.fp8_format)  # refuses a format the target does not read
        entry = self.entry(p.heads, p.head_dim, p.block_size, design, p.fp8_format)
        if entry is None:
            raise ValueError(f"(num_heads, head_dim, block_size): expected one of the built {self.arch} instances "
                             f"{sorted(tuple(e['params'].values()) for e in self.target['kernels'].values())}, "
                             f"got ({p.heads}, {p.head_dim}, {p.block_size})")
        if not 0 <= num_warps <= MAX_WARPS:
            raise ValueError(f"num_warps: expected 0 (heuristic) or 1..{MAX_WARPS}, got {num_warps}")
        if not 0 <= split_n <= MAX_SPLIT_N:
            raise ValueError(f"split_n: expected 0 (heuristic) or 1..{MAX_SPLIT_N}, got {split_n}")
        cfg = self.choose(p, compute_units, split_n, num_warps)
        flags = (pk.FLAG_CLEAN_LOGITS if p.clean_logits else 0) | (pk.FLAG_CONTEXT_LENS_2D if p.context_lens_2d else 0)
        values = {
            "q": ptrs.q, "kv_cache": ptrs.kv_cache, "weights": ptrs.weights, "context_lens": ptrs.context_lens,
            "block_table": ptrs.block_table, "out": ptrs.out, "out_row_stride": p.out_row_stride,
            "next_n": p.next_n, "max_context_len": p.max_context_len, "max_blocks": p.max_blocks,
            "split_n": cfg["split_n"], "num_warps": cfg["num_warps"], "flags": flags,
        }
        return LaunchPlan(symbol=entry["symbol"], grid=(p.batch, cfg["split_n"], 1),
                          block=(WAVE * cfg["num_warps"], 1, 1),
                          kernargs=pack_kernargs(entry["args"], values, entry["kernarg_size"]),
                          shared_mem=cfg["lds"], config=cfg)

    def prepare(self, p: PagedProblem, tunables: PagedTunables, alignment: tuple[int, ...], compute_units: int,
                pointers: tuple[int, ...] | None = None) -> LaunchTemplate:
        """:meth:`plan` once for a call description with its pointers left as holes (see
        :meth:`KernelFamily.prepare`); ``alignment`` is each pointer's low bits (PagedPointers order), and a q
        or kv_cache that is not 16-byte aligned is refused here (``pointers``, if given, name the address)."""
        for i, name in ((0, "q"), (1, "kv_cache")):
            if alignment[i] % OPERAND_ALIGNMENT:
                got = f"data address 0x{pointers[i]:x}" if pointers is not None else \
                    f"an address ending in 0x{alignment[i]:02x}"
                raise ValidationError(f"{name}: expected a {OPERAND_ALIGNMENT}-byte aligned address, got {got}")
        plan = self.plan(p, PagedPointers(*placeholder_pointers(alignment)), compute_units, split_n=tunables.split_n,
                         num_warps=tunables.num_warps, design=tunables.variant)
        return self.template(plan)
