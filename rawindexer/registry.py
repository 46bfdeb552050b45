"""The one declaration of every kernel: op x target x design x instance, each instance with its symbol.

Two words, used everywhere:

* a **design** is one kernel body -- an algorithm with its own source code path (gfx950 "mrf", sm_90a "ws",
  paged "f16"). The public ``variant=`` argument names a design.
* an **instance** is one compiled kernel of a design: its template values (heads, head_dim, block_m, unroll;
  block_size for paged decode) and the symbol the build gives it.

``build.py`` compiles the instances listed here (and only those, except experiments it is asked for), the
manifest records them, the dispatch families choose among them, ``is_supported`` answers from the manifest
they produce, and the profile and the tests enumerate them from here. Adding a design is its kernel body
plus one :class:`Design` entry and its instances; adding a target is a kernel source, a dispatch family and
its entries here. The paged-decode op keeps its declaration in :mod:`rawindexer.paged_kernels` (already one
entry per target), re-exported through :data:`OPS`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from . import paged_kernels

PREFILL = "fp8_mqa_logits"
PAGED = paged_kernels.OP


@dataclass(frozen=True)
class Design:
    """One kernel body of one op on one target.

    ``logit_eps``: the per-logit gate the tests hold it to (|out - ref| <= eps * T, docs/NUMERICS.md);
    ``default_rank``: its place in the default order (0 first; None: only when asked for by name);
    ``experiment``: built only on request (bench/exp_sm90.py, bench/race_sm90.py), never shipped;
    ``params``: target-specific constants the dispatch needs (sm_90a: tokens per K tile, consumer warpgroups).
    """

    op: str
    target: str
    name: str
    summary: str
    logit_eps: float | None = None
    default_rank: int | None = None
    experiment: bool = False
    params: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class GfxInstance:
    """One compiled prefill kernel of kernels/fp8_mqa_logits.hip (gfx950, gfx942): ``design`` at (heads,
    head_dim, block_m, unroll) for one input format.

    ``unroll`` = K tiles per loop iteration of the seed design (1 or 2); the MFMA-score designs always walk
    two tiles per iteration (register ping-pong), so their unroll is 1. ``fp8_format``: the format of the q / k
    bytes it reads -- the target's own MFMA format, or (gfx942 only, ``fn_on_fnuz``) e4m3fn bytes read in place
    on the fnuz MFMA (kernels/target.h; symbol suffix _fn).
    """

    heads: int
    head_dim: int
    block_m: int
    unroll: int
    design: str = "seed"
    fp8_format: str = "e4m3fn"
    fn_on_fnuz: bool = False

    @property
    def symbol(self) -> str:
        if self.design != "seed":
            return f"fp8_mqa_logits_h{self.heads}_d{self.head_dim}_bm{self.block_m}_{self.design}"
        suffix = "_fn" if self.fn_on_fnuz else ""
        return f"fp8_mqa_logits_h{self.heads}_d{self.head_dim}_bm{self.block_m}_u{self.unroll}{suffix}"


Gfx950Instance = GfxInstance  # the name before gfx942 shared the source


@dataclass(frozen=True)
class Sm90Instance:
    """One compiled sm_90a prefill kernel: ``design`` at (heads, head_dim, block_m); wgmma N = block_m * heads."""

    heads: int
    head_dim: int
    block_m: int
    design: str

    @property
    def symbol(self) -> str:
        return f"fp8_mqa_logits_sm90_h{self.heads}_d{self.head_dim}_bm{self.block_m}_{self.design}"


# ---------------------------------------------------------------------------------------------------
# fp8_mqa_logits on gfx950 (kernels/fp8_mqa_logits.hip)
# ---------------------------------------------------------------------------------------------------
GFX950 = "gfx950"
GFX950_DESIGNS: dict[str, Design] = {d.name: d for d in [
    Design(PREFILL, GFX950, "seed", "the seed's design: ReLU and weight FMA in fp32 on the VALU, paired-row "
           "permlane head reduce; no software pipeline", logit_eps=1e-5, default_rank=1),
    Design(PREFILL, GFX950, "mr", "MFMA reduce: the weighted head sum on a bf16 MFMA (every term rounded to "
           "bf16)", logit_eps=1e-2),
    Design(PREFILL, GFX950, "mrp", "MFMA reduce with a packed-int16 ReLU (v_pk_max_i16) and one reduce MFMA",
           logit_eps=1e-2),
    Design(PREFILL, GFX950, "mrf", "the MFMA-reduce pipeline (16x16 score MFMAs, buffer loads, register double "
           "buffering) with the head reduce in fp32 on the VALU", logit_eps=1e-5, default_rank=0),
]}

# Which BLOCK_M fit without spilling: Q (H*D/256 VGPRs per row) and the per-lane weights (H/2 per row)
# stay in registers for the whole block, so the largest BLOCK_M shrinks as H*D grows.
SEED_MAX_BLOCK_M = {(32, 64): 7, (32, 128): 4, (64, 64): 3, (64, 128): 2, (128, 64): 2, (128, 128): 1}
# Seed instances that spill and are left out: H=128, D=64, BLOCK_M 2 with two tiles in flight needs
# more than 256 VGPRs since the weights are held as fp32 pairs for v_pk_fma_f32 (issue 15).
SEED_SPILLS = {(128, 64, 2, 2)}
# "mr": BLOCK_M <= 4 (the reduce accumulator's register 0 holds 4 rows). Shipped where it stays at
# <= 168 VGPRs (3 waves/SIMD) without spilling; odd BLOCK_M left out to keep the build short.
# Q per row is H*D/256 VGPRs, the block-diagonal weights H/8, so H=128, D=128 fits only BLOCK_M=1.
MR_BLOCK_M = {(32, 64): (1, 2, 4), (32, 128): (1, 2, 4), (64, 64): (1, 2, 4), (64, 128): (1, 2),
              (128, 64): (1, 2), (128, 128): (1,)}
# "mrp" at each shape's default BLOCK_M only (one reduce MFMA: fewer passes than "mr", same occupancy).
MRP_BLOCK_M = {(32, 64): 4, (32, 128): 4, (64, 64): 4, (64, 128): 2, (128, 64): 2, (128, 128): 1}
# "mrf" at BLOCK_M 1..4 (per-logit eps 1e-5 class, issue 15); H=128, D=128 at BLOCK_M 1 only: 2 spills.
MRF_BLOCK_M = {(32, 64): (1, 2, 3, 4), (32, 128): (1, 2, 3, 4), (64, 64): (1, 2, 3, 4), (64, 128): (1, 2, 3),
               (128, 64): (1, 2), (128, 128): (1,)}
# mrf instances compiled with amdgpu_waves_per_eu(3) (the register allocator then fits 168 VGPRs): only
# where that costs no spill. Tried on every mrf instance: H=32, D=128, BLOCK_M 4 fits (170 -> 168 VGPRs, same
# loop); H=64, D=64 BM 4, H=64, D=128 BM 3, H=128, D=64 BM 2 and H=128, D=128 BM 1 spill (3-186 VGPRs).
MRF_3_WAVES = {(32, 128, 4)}

GFX950_INSTANCES: tuple[GfxInstance, ...] = tuple(
    [GfxInstance(h, d, bm, u) for (h, d), max_bm in SEED_MAX_BLOCK_M.items() for bm in range(1, max_bm + 1)
     for u in (1, 2) if (h, d, bm, u) not in SEED_SPILLS]
    + [GfxInstance(h, d, bm, 1, "mr") for (h, d), bms in MR_BLOCK_M.items() for bm in bms]
    + [GfxInstance(h, d, bm, 1, "mrp") for (h, d), bm in MRP_BLOCK_M.items()]
    + [GfxInstance(h, d, bm, 1, "mrf") for (h, d), bms in MRF_BLOCK_M.items() for bm in bms])

# ---------------------------------------------------------------------------------------------------
# fp8_mqa_logits on gfx942 (MI300X / MI325X): the same source through kernels/target.h
# ---------------------------------------------------------------------------------------------------
GFX942 = "gfx942"
GFX942_DESIGNS: dict[str, Design] = {d.name: d for d in [
    Design(PREFILL, GFX942, "seed", "the seed's design through kernels/target.h (the accurate default; "
           "docs/GFX942.md)", logit_eps=1e-5, default_rank=0),
]}
# The seed design at BLOCK_M <= 4, each instance for e4m3fnuz inputs (the MFMA's own format) and for e4m3fn
# inputs read in place (_fn). Left out: the instances that spill on gfx942 (clang 22, checked with this
# build's metadata): H=128, D=64, BLOCK_M 2 with two tiles in flight (both formats) -- the one gfx950 drops.
GFX942_SPILLS = {(128, 64, 2, 2)}
GFX942_INSTANCES: tuple[GfxInstance, ...] = tuple(
    GfxInstance(h, d, bm, u, "seed", fmt, fmt == "e4m3fn")
    for (h, d), max_bm in SEED_MAX_BLOCK_M.items()
    for bm in range(1, min(max_bm, 4) + 1)
    for u in (1, 2)
    for fmt in ("e4m3fnuz", "e4m3fn")
    if (h, d, bm, u) not in GFX942_SPILLS)

# ---------------------------------------------------------------------------------------------------
# fp8_mqa_logits on sm_90a (kernels/fp8_mqa_logits_sm90.cu; experiments in kernels/experimental/)
# ---------------------------------------------------------------------------------------------------
SM90 = "sm_90a"


def _sm90(name: str, summary: str, *, tile_tokens: int = 64, consumers: int | None = None, ss_stages: bool = False,
          experiment: bool = False, logit_eps: float | None = None, default_rank: int | None = None,
          k_tensor_map: bool = False, balanced: bool = False, q_prefetch: bool = False,
          paired_rows: bool = False, q_shared: bool = False, q_tensor_map: bool = False) -> Design:
    params = {"tile_tokens": tile_tokens}
    if q_tensor_map:  # a CUtensorMap of Q ([M * H, D] rows, box 128 rows) after K's ("tmas", "tmaq", v19)
        if not k_tensor_map:
            raise ValueError(f"design {name!r}: Q's tensor map follows K's (q_tensor_map needs k_tensor_map)")
        params["q_tensor_map"] = True
    if q_shared:  # persistent: one block per SM, its consumers share one row block's Q and deal its tiles (v17)
        params["q_shared"] = True
    if paired_rows:  # grid = ceil(row blocks / 2), 8 warps: block x computes row blocks R - 1 - x and x (session 9)
        params["paired_rows"] = True
    if k_tensor_map:  # the kernel takes a CUtensorMap of K after the common arguments (build.py, v8)
        params["k_tensor_map"] = True
    if balanced:  # grid = one block per SM; each block computes its share of all row blocks' tiles (v10)
        params["balanced"] = True
    if q_prefetch:  # balanced with two Q buffers per consumer (v11): more shared memory, fewer row blocks
        params["q_prefetch"] = True
    if consumers:
        params["consumers"] = consumers
    if ss_stages:
        params["shared_k_ring"] = True
    return Design(PREFILL, SM90, name, summary, logit_eps=logit_eps, default_rank=default_rank,
                  experiment=experiment, params=MappingProxyType(params))


SM90_DESIGNS: dict[str, Design] = {d.name: d for d in [
    _sm90("wg", "wgmma: one 64-token K tile per warpgroup step, N = BLOCK_M * heads, f32 head reduce on the "
          "CUDA cores", logit_eps=2e-3, default_rank=1),
    _sm90("tmas", "warp-specialised SS wgmma: one producer lane fills an 8-stage K ring with TMA tensor copies "
          "(128B swizzle; K's tensor map is a kernel argument), four consumer warpgroups (N = 128 each), weights "
          "in shared memory (v8; at H >= 64 six of eight float4s kept in registers, v9); uniform wgmma descriptors, "
          "unmasked stores on interior tiles (v9); the block's Q as four TMA boxes of Q's own tensor map, which only "
          "the consumers wait for (v19)", consumers=4, k_tensor_map=True, q_tensor_map=True, logit_eps=2e-3,
          default_rank=0),
    _sm90("wgr", "the wg score MMA with the head reduce on the tensor cores (relu + bf16 pack, bf16 mma.sync "
          "against block-diagonal weights)", logit_eps=1e-2),
    _sm90("ws", "warp-specialised wgmma: a producer warp fills a K ring with cp.async.bulk + mbarriers, two "
          "consumer warpgroups (N = 128 each) take turns on the tensor core", consumers=2, logit_eps=2e-3),
    _sm90("mma", "mma.sync baseline (fp8 widened to f16 by ptxas; never chosen by the heuristic)", tile_tokens=32,
          logit_eps=1e-5),
    _sm90("wgpr", "wg with each block's two warpgroups on a pair of row blocks (R - 1 - x and x), each a contiguous "
          "half of the pair's tiles: balanced causal chains where wg's grid is one unsplit pass of one-warpgroup "
          "blocks (session 9)", logit_eps=2e-3,
          default_rank=3, paired_rows=True),
    # experiments (docs/PERFORMANCE.md v3-v7): built by bench/exp_sm90.py or bench/race_sm90.py only
    *[_sm90(n, "ping-pong accumulator experiment (v3)", experiment=True) for n in ("wgp", "wgrp", "wgx")],
    *[_sm90(n, "lean-epilogue experiment (v5)", experiment=True) for n in ("wf", "wa", "wfs", "was")],
    *[_sm90(n, "SS wgmma form, K ring in shared memory (v6)", ss_stages=True, experiment=True)
      for n in ("ss", "ssx", "ssd", "ssn", "ssxn", "ss4", "ssx4", "ssa", "ssxa")],
    *[_sm90(n, "timing-only diagnostic (v6, wrong results)", experiment=True) for n in ("wfx", "wfd")],
    *[_sm90(n, f"warp-specialised with {c} consumer warpgroups (v7)", consumers=c, experiment=True)
      for n, c in (("ws3", 3), ("ws4", 4), ("ws4n", 4), ("wss", 4))],
    _sm90("tma", "tmas with the weights in registers (v8; spills at 112 registers, slower)", consumers=4,
          k_tensor_map=True, experiment=True, logit_eps=2e-3),
    _sm90("tmas8", "tmas's consumer loop as v8 shipped it (descriptors rebuilt per k-step, every store masked, "
          "weights by LDS.64): the A/B baseline of v9", consumers=4, k_tensor_map=True, experiment=True,
          logit_eps=2e-3),
    _sm90("tmas9", "tmas (v9) with every weight read from shared memory per tile (no weight float4s kept in "
          "registers)", consumers=4, k_tensor_map=True, experiment=True, logit_eps=2e-3),
    _sm90("tmasb", "tmas (v9 loop) on a balanced persistent schedule: one block per SM, each computes every row "
          "block's span and tile count from the windows and takes an equal share of the concatenated tile ranges "
          "(v10)", consumers=4, k_tensor_map=True, balanced=True, experiment=True, logit_eps=2e-3),
    _sm90("tmasb2", "tmasb with the piece cost fitted to its H200 times (4 tiles), each piece's Q prefetched into L2 "
          "by the producer, the -inf fill by contiguous row ranges (v10; auto's balanced choice until session 6)",
          consumers=4, k_tensor_map=True, balanced=True, experiment=True, logit_eps=2e-3),
    _sm90("tmasb3", "tmasb2 with a second Q / weights / windows buffer per consumer, the next piece's filled by "
          "cp.async while the current piece's tiles run (v11)", consumers=4, k_tensor_map=True, balanced=True,
          q_prefetch=True, experiment=True, logit_eps=2e-3),
    _sm90("tmasb4", "tmasb3 with its tile loop compiled once per Q buffer (the buffer a compile-time constant: "
          "tmasb2's loop length at H = 64, where tmasb3's buffer-dependent descriptors cost 4%) (v12): auto's choice "
          "where the host sees the balanced schedule win", consumers=4, k_tensor_map=True, balanced=True,
          q_prefetch=True, logit_eps=2e-3, default_rank=2),
    _sm90("tmaq", "tmas's consumer loop with the four consumers sharing one row block of 128 / H rows and dealing its "
          "K tiles by ring position, on a persistent grid (row blocks b, 2G - 1 - b, ... per block) whose loader "
          "warps stage the next row block while the current one runs, its Q as one TMA box of Q's own tensor map "
          "(v17, v19): auto's choice for short rows where the H200 measured it faster", consumers=4,
          k_tensor_map=True, q_shared=True, q_tensor_map=True, logit_eps=2e-3,
          default_rank=4),
]}

# wgmma N = BLOCK_M * heads must be 64, 128 or 256; the mma.sync design keeps Q in 48 KB of static shared
# memory and uses BLOCK_M * heads = 256; "ws" splits BLOCK_M rows over two consumer warpgroups, each N = 128.
SM90_INSTANCES: tuple[Sm90Instance, ...] = tuple(
    [Sm90Instance(h, d, bm, design) for design in ("wg", "wgr") for h in (32, 64, 128) for d in (64, 128)
     for bm in (1, 2, 4, 8) if bm * h in (64, 128, 256)]
    # "wgpr": two row blocks' Q in 32 KB of static shared memory, N = 128
    + [Sm90Instance(h, d, 128 // h, "wgpr") for h in (32, 64, 128) for d in (64, 128)]
    + [Sm90Instance(h, d, 256 // h, "mma") for h in (32, 64, 128) for d in (64, 128)]
    + [Sm90Instance(h, d, 256 // h, "ws") for h in (32, 64, 128) for d in (64, 128)]
    # "tmas" and its balanced schedule "tmasb4": four consumers of N = 128, BLOCK_M = 4 * 128 / H
    + [Sm90Instance(h, d, 512 // h, design) for design in ("tmas", "tmasb4") for h in (32, 64, 128) for d in (64, 128)]
    # "tmaq": one row block of 128 / H rows shared by its four consumers
    + [Sm90Instance(h, d, 128 // h, "tmaq") for h in (32, 64, 128) for d in (64, 128)])

# ---------------------------------------------------------------------------------------------------
# the whole table
# ---------------------------------------------------------------------------------------------------
#: op -> target -> design name -> Design
DESIGNS: dict[str, dict[str, dict[str, Design]]] = {
    PREFILL: {GFX950: GFX950_DESIGNS, GFX942: GFX942_DESIGNS, SM90: SM90_DESIGNS},
    PAGED: {t.arch: {name or t.summary: Design(PAGED, t.arch, name or t.summary, t.summary,
                                              default_rank=0 if i == 0 else None)
                     for i, name in enumerate(t.designs)}
            for t in paged_kernels.TARGETS.values()},
}
#: op -> target -> the instances the build ships (experiments excluded)
INSTANCES: dict[str, dict[str, tuple]] = {
    PREFILL: {GFX950: GFX950_INSTANCES, GFX942: GFX942_INSTANCES, SM90: SM90_INSTANCES},
    PAGED: {t.arch: tuple((inst, d) for inst in t.instances for d in t.designs if inst in t.instances_of(d))
            for t in paged_kernels.TARGETS.values()},
}
OPS = tuple(DESIGNS)


def designs(op: str, target: str, *, experiments: bool = False) -> tuple[str, ...]:
    """The design names of ``op`` on ``target`` in declaration order (experiments only when asked)."""
    return tuple(n for n, d in DESIGNS[op][target].items() if experiments or not d.experiment)


def default_designs(op: str, target: str) -> tuple[str, ...]:
    """The designs the heuristic may pick, best first."""
    ranked = [d for d in DESIGNS[op][target].values() if d.default_rank is not None]
    return tuple(d.name for d in sorted(ranked, key=lambda d: d.default_rank))


def logit_eps(op: str, target: str) -> dict[str, float]:
    """{design: per-logit gate eps} of the designs that declare one."""
    return {n: d.logit_eps for n, d in DESIGNS[op][target].items() if d.logit_eps is not None}


__all__ = ["Design", "GfxInstance", "Gfx950Instance", "GFX942", "GFX942_DESIGNS", "GFX942_INSTANCES", "Sm90Instance", "DESIGNS", "INSTANCES", "OPS", "PREFILL", "PAGED", "GFX950",
           "SM90", "GFX950_DESIGNS", "SM90_DESIGNS", "GFX950_INSTANCES", "SM90_INSTANCES", "MRF_3_WAVES",
           "designs", "default_designs", "logit_eps"]
