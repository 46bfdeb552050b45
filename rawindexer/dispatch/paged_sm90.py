"""Host side of kernels/fp8_paged_mqa_logits_sm90.cu: instance choice, launch geometry, kernargs.

One consumer warpgroup per block (128 threads, + a producer warp in "tma"), four in "tma4"'s N = 96 / 128 kernels (640
threads, one block per SM); the heuristic and the design choice read host numbers only (B, max_context_len, the SM
count and the block's shared memory), never device memory, so a call is capturable in a CUDA graph.
"""
from __future__ import annotations

import dataclasses

from .. import paged_kernels as pk
from . import sm90_tensor_map
from .base import LaunchPlan, LaunchTemplate, pack_kernargs
from .paged_gfx950 import PagedGfx950Family, PagedPointers, PagedProblem, best_split, best_wave_fill

MAX_SPLIT_N = 65535
SHARED_PER_SM = 227 * 1024  # H100 / H200: usable shared memory per SM
REGISTERS_PER_SM = 65536
#: Per-logit gate of each design (rawindexer.testing.grading.logit_gate; docs/NUMERICS.md): "f16" converts the fp8 keys
#: exactly and accumulates f16 products in fp32 (prefill's "mma" class, 1e-5); "fp8" runs the e4m3 wgmma, whose
#: accumulator is shorter than fp32 (prefill's "wg" class, 2e-3)
LOGIT_EPS = {"f16": 1e-5, "fp8": 2e-3, "tma": 2e-3, "tma4": 2e-3}
#: the default design: the first of AUTO_ORDER built for the call's (heads, head_dim, block_size), or AUTO_TMA4 below
#: where four_warpgroups_win. "tma" (block size 64) was faster than "f16" and "fp8" in every case of the H200 bench
#: (docs/PAGED.md "Call 3") and reproduces DeepGEMM's logits to calc_diff ~4e-15; its numerics are fp8-wgmma class
#: (docs/NUMERICS.md, decode)
AUTO = "auto"
AUTO_ORDER = ("tma", "f16")
#: where "auto" takes the four-warpgroup "tma4" instead of "tma" (its kernels/sm90/paged_tma_wg4.cuh body, at next_n x
#: H = 96 / 128, AUTO_FOUR_N): when the batch holds at least AUTO_TMA4_MIN_TILES 64-token tiles at max_context_len
#: (B x ceil(max_context_len / 64); a host number, the lengths themselves are in device memory). One block per SM
#: needs every SM's share of tiles to be long; small batches stay on "tma"'s grid of many short blocks (measured,
#: docs/PAGED.md "Session 19")
AUTO_TMA4 = "tma4"
AUTO_FOUR_N = (96, 128)
AUTO_TMA4_MIN_TILES = 16384
LOGIT_EPS[AUTO] = max(LOGIT_EPS[name] for name in AUTO_ORDER + (AUTO_TMA4,))  # the gate of whichever "auto" picks
#: a split gets at least this many 64-token tiles (the ring's prologue and the Q staging amortised)
MIN_TILES_PER_SPLIT = 4
#: resident blocks per SM we aim for before splitting further (limited by shared memory)
MAX_BLOCKS_PER_SM = 8
#: at most this many blocks in a persistent grid (0: one per resident slot); tests set it to give each block several
#: (b, split) units (tests/gpu/test_paged_gpu.py --persistent-grid)
PERSISTENT_MAX_GRID = 0
#: a persistent grid's split rule: best_split up to this many slots' worth of (b, split) units, so that the units
#: divide evenly over the blocks where a whole number of units per block exists (B = 256 x 32768 on 528 slots: 33
#: splits, 16 units per block, where the one-unit grid's rule stops at 2 splits, 512 blocks)
PERSISTENT_MAX_WAVES = 16
#: serving batches have ragged context lengths, which the host cannot see (they are in device memory). best_split fills
#: waves of equal blocks; with ragged lengths a block lasts as long as its sequence's share, and one wave of blocks as
#: long as its longest one (B = 256 x 32768 on 528 slots: 2 splits, one wave, 1.77x DeepGEMM's time). So the split is
#: raised to give no split more than MAX_TILES_PER_SPLIT tiles, and toward BALANCE_WAVES waves of blocks while splits
#: keep BALANCE_MIN_TILES tiles (more, shorter blocks cost their prologue). Measured on the H200 (docs/PAGED.md
#: "Session 15"): ragged 1.66 -> 1.14x DeepGEMM at 256 x 131072 H 64 next_n 2, 1.77 -> 1.18x at 256 x 32768; full
#: lengths within 1.3%.
MAX_TILES_PER_SPLIT = 64
BALANCE_WAVES = 8
BALANCE_MIN_TILES = 32


def min_tiles_per_split(batch: int, tiles: int, slots: int) -> int:
    """Fewest 64-token tiles a split may get: MIN_TILES_PER_SPLIT, or 1 where splits of that size would not
    fill the machine's ``slots`` resident blocks (small batches: latency-bound, one tile per block shortens the
    critical path). Measured on the H200 (docs/PAGED.md, call 1): B = 1, context 4096: 4.1 -> 3.0 us (fp8),
    5.0 -> 3.3 us (f16); B = 8 neutral; B = 64 x 4096 (which fills the machine at 4 tiles) 1.17x slower at 1."""
    return 1 if max(batch, 1) * -(-tiles // MIN_TILES_PER_SPLIT) < slots else MIN_TILES_PER_SPLIT


def balanced_split(batch: int, tiles: int, slots: int, split: int) -> int:
    """``split`` (best_split's), raised for ragged lengths to at least ceil(tiles / MAX_TILES_PER_SPLIT) and
    min(BALANCE_WAVES waves of ``slots``, tiles // BALANCE_MIN_TILES); from that floor, the split of the best
    wave fill within one wave's worth of splits (the fewest on a tie)."""
    batch = max(batch, 1)
    floor = max(-(-tiles // MAX_TILES_PER_SPLIT), min(-(-BALANCE_WAVES * slots // batch), tiles // BALANCE_MIN_TILES))
    floor = min(floor, MAX_SPLIT_N)
    if floor <= split:
        return split
    return best_wave_fill(batch, slots, range(floor, min(floor + -(-slots // batch), tiles + 1, MAX_SPLIT_N + 1)))


def four_warpgroups_win(p: PagedProblem) -> bool:
    """Whether "auto" runs ``p`` on AUTO_TMA4: next_n x H in AUTO_FOUR_N and at least AUTO_TMA4_MIN_TILES tiles."""
    tiles = -(-p.max_context_len // pk.SM90_TILE)
    return p.next_n * p.heads in AUTO_FOUR_N and max(p.batch, 1) * tiles >= AUTO_TMA4_MIN_TILES


def is_persistent(entry: dict | None) -> bool:
    """Whether a manifest entry's kernels run a persistent grid: their argument list carries ``batch`` (the grid no
    longer does)."""
    return bool(entry) and any(a["name"] == "batch" for a in entry.get("args", ()))


class PagedSm90Family(PagedGfx950Family):
    """Same manifest section and instance names as the gfx950 family, different geometry."""

    arch = "sm_90a"

    def resolve(self, heads: int, head_dim: int, block_size: int, design: str | None = None,
                problem: PagedProblem | None = None) -> str:
        """The built design that runs: ``design`` if it names one, else (None or "auto") AUTO_TMA4 for a
        ``problem`` that :func:`four_warpgroups_win` and where it is built, else the first of AUTO_ORDER built for
        this shape."""
        design = self.design(design)
        if design != AUTO:
            return design
        built = super().entry  # (super() does not reach into a generator's scope)
        if problem is not None and four_warpgroups_win(problem) and built(heads, head_dim, block_size, AUTO_TMA4):
            return AUTO_TMA4
        return next((d for d in AUTO_ORDER if built(heads, head_dim, block_size, d)), AUTO_ORDER[-1])

    def entry(self, heads: int, head_dim: int, block_size: int, design: str | None = None,
              fp8_format: str = "e4m3fn") -> dict | None:
        return super().entry(heads, head_dim, block_size, self.resolve(heads, head_dim, block_size, design),
                             fp8_format)

    def choose(self, p: PagedProblem, compute_units: int, split_n: int = 0, num_warps: int = 0,
               design: str | None = None) -> dict:
        """split_n: :func:`best_split` over the resident blocks (shared memory, registers of the next_n's kernel,
        at most MAX_BLOCKS_PER_SM per SM), never fewer than :func:`min_tiles_per_split` tiles per split at
        max_context_len, then raised for ragged lengths by :func:`balanced_split` (not in a persistent grid)."""
        design = self.resolve(p.heads, p.head_dim, p.block_size, design, p)
        if num_warps not in (0, 4):
            raise ValueError(f"num_warps: the sm_90a decode kernel runs one warpgroup, expected 0 or 4, got {num_warps}")
        threads = pk.TARGETS[self.arch].threads(design)
        entry = self.entry(p.heads, p.head_dim, p.block_size, design)
        res = entry.get("resources_by_next_n", {}).get(str(p.next_n), entry["resources"]) if entry else {}
        # the next_n kernel's own block size where the manifest records it (four consumer warpgroups: 640 threads,
        # kernels/sm90/paged_tma_wg4.cuh -- "tma4" at next_n x H = 96 / 128, "tma" built with PAGED_TMA_WG4)
        threads = res.get("max_threads", threads)
        groups = threads // pk.SM90_TMA_THREADS if design in pk.SM90_TMA_DESIGNS else 1
        shared = pk.sm90_shared_bytes(p.heads, p.head_dim, p.next_n, design, groups)
        regs = res.get("registers", 128)
        by_regs = REGISTERS_PER_SM // (-(-regs // 8) * 8 * threads)
        per_sm = max(1, min(MAX_BLOCKS_PER_SM, SHARED_PER_SM // shared, by_regs))
        slots = per_sm * compute_units
        persistent = is_persistent(entry)
        if not split_n:
            tiles = -(-p.max_context_len // pk.SM90_TILE)
            split_n = best_split(p.batch, tiles, slots, min_tiles_per_split(p.batch, tiles, slots),
                                 PERSISTENT_MAX_WAVES if persistent else 4)
            if not persistent:
                split_n = balanced_split(p.batch, tiles, slots, split_n)
        cfg = {"num_warps": 4, "split_n": split_n, "lds": shared, "design": design, "threads": threads,
               "slots": slots}
        # a persistent kernel (an experiment build of "tma": kernels/sm90/paged_tma.cuh, PAGED_TMA_PERSISTENT; its
        # argument list ends in `batch`) runs one block per resident slot over the batch x split_n (b, split) units
        cfg["grid"] = ((min(max(p.batch, 1) * split_n, slots, PERSISTENT_MAX_GRID or slots), 1, 1)
                       if persistent else (p.batch, split_n, 1))
        return cfg

    def plan(self, p: PagedProblem, ptrs: PagedPointers, compute_units: int, split_n: int = 0,
             num_warps: int = 0, design: str | None = None) -> LaunchPlan:
        self.design(design, p.fp8_format)  # refuses e4m3fnuz: Hopper's fp8 is e4m3fn
        design = self.resolve(p.heads, p.head_dim, p.block_size, design, p)
        entry = self.entry(p.heads, p.head_dim, p.block_size, design)
        if entry is None:
            raise ValueError(f"(num_heads, head_dim, block_size): no sm_90a decode kernel for "
                             f"({p.heads}, {p.head_dim}, {p.block_size})")
        if not 0 <= split_n <= MAX_SPLIT_N:
            raise ValueError(f"split_n: expected 0 (heuristic) or 1..{MAX_SPLIT_N}, got {split_n}")
        cfg = self.choose(p, compute_units, split_n, num_warps, design)
        flags = (pk.FLAG_CLEAN_LOGITS if p.clean_logits else 0) | (pk.FLAG_CONTEXT_LENS_2D if p.context_lens_2d else 0)
        values = {
            "q": ptrs.q, "kv_cache": ptrs.kv_cache, "weights": ptrs.weights, "context_lens": ptrs.context_lens,
            "block_table": ptrs.block_table, "out": ptrs.out, "out_row_stride": p.out_row_stride,
            "next_n": p.next_n, "max_context_len": p.max_context_len, "max_blocks": p.max_blocks,
            "split_n": cfg["split_n"], "num_warps": 4, "flags": flags, "batch": p.batch,
        }
        cfg["entry"] = entry["symbol"]
        map_slot = sm90_tensor_map.k_map_slot(entry["args"], pk.TENSOR_MAP_ARG[0])
        if map_slot is None:
            kernargs = pack_kernargs(entry["args"], values, entry["kernarg_size"])
        else:  # "tma": the cache's tensor map, encoded for ptrs.kv_cache; launch_path re-encodes per cache pointer
            if p.num_blocks <= 0:
                raise ValueError(f"kv_cache: the tma design needs the cache's num_blocks, got {p.num_blocks}")
            kernargs = pack_kernargs([a for a in entry["args"] if a is not map_slot], values, entry["kernarg_size"])
            kernargs = sm90_tensor_map.pack_tensor_map_kernargs(kernargs, map_slot, ptrs.kv_cache, p.num_blocks,
                                                                p.head_dim, p.block_size)
            cfg["k_tensor_map"] = {"slot": dict(map_slot), "n": p.num_blocks, "head_dim": p.head_dim,
                                   "block_size": p.block_size}
        return LaunchPlan(symbol=pk.TARGETS[self.arch].launch_symbol(entry["symbol"], p.next_n),
                          grid=cfg["grid"], block=(cfg["threads"], 1, 1),
                          kernargs=kernargs, shared_mem=cfg["lds"], config=cfg)

    def template(self, plan: LaunchPlan) -> LaunchTemplate:
        """The manifest has one entry per design (``plan.config["entry"]``); the plan launches that design's
        kernel for its next_n, whose argument layout is the entry's."""
        template = super().template(dataclasses.replace(plan, symbol=plan.config["entry"]))
        template.symbol = plan.symbol
        return template
