"""Host side of the sm_90a (Hopper) kernel family: design and instance choice, launch geometry, kernargs.

Instances come from the manifest's "sm_90a" target (``build.py --target sm_90a``). Designs:

* ``wg``  -- wgmma path: one 64-token K tile per warpgroup step, N = BLOCK_M * heads in {64, 128, 256}, head
  reduce as f32 FMNMX + FFMA on the CUDA cores
* ``wgr`` -- the same score MMA, head reduce on the tensor cores (mirror of the gfx950 MFMA head-reduce):
  relu + bf16 pack, then a bf16 mma.sync against block-diagonal weights
* ``wgp`` / ``wgrp`` / ``wgx`` -- experiments (ping-pong accumulators; no head reduce), built only by
  ``bench/exp_sm90.py``
* ``wf`` / ``wa`` / ``wfs`` / ``was`` -- v5 lean-epilogue experiments (exact f32; |x| FFMA with the linear term on
  the tensor cores; each with the split, wait_group-1 tile), built only by ``bench/exp_sm90.py --set v5``; H200 numbers
  in docs/PERFORMANCE.md (v5: within 4% of ``wg``, so not the default)
* ``ss`` -- v6 experiment: the SS wgmma form (K tiles through a cp.async ring in dynamic shared memory, both
  operands from shared memory descriptors), exact f32 epilogue; ``ssn`` (no proxy fence), ``ss4`` (4 stages),
  ``ssa`` (cp.async.ca); ``ssx`` / ``ssd`` / ``ssxn`` / ``ssx4`` / ``ssxa`` / ``wfx`` / ``wfd`` are timing-only
  diagnostics (wrong results). Built only by ``bench/exp_sm90.py --set v6``; H200: 1.5x slower than ``wg`` (v6 in
  docs/PERFORMANCE.md), so not the default
* ``ws`` -- warp-specialised wgmma path (docs/PERFORMANCE.md v7): one block per SM of 3 warpgroups, a producer
  warp filling a WS_STAGES-deep ring of K tiles with cp.async.bulk + mbarriers, two consumer warpgroups (each half
  of the block's rows, N = 128) taking turns on the tensor core, the -inf fill on the producer's spare warps;
  num_warps is always 12 and SplitN is picked for whole waves of one block per SM
* ``ws3`` / ``ws4`` -- the same with 3 / 4 consumer warpgroups (issue order kept); ``ws4n`` 4 consumers, no order;
  ``wss`` 4 unordered consumers with both wgmma operands in shared memory, the K ring built by two producer warps
  with 16-byte cp.async (core-matrix layout); these four are built only by ``bench/race_sm90.py --build``
* ``tmas`` -- (docs/PERFORMANCE.md v8) ``wss``'s structure with the K ring filled by one TMA tensor copy per 64-token
  tile (128-byte swizzle): one block per SM of 5 warpgroups, one producer lane, four consumer warpgroups (N = 128
  each) with both wgmma operands in shared memory, weights in shared memory; the kernel takes K's CUtensorMap after
  the common arguments, and Q's after K's (v19: Q's four boxes waited on by the consumers only;
  dispatch/sm90_tensor_map.py encodes both, the launch path per (K, Q) pointer pair); ``tma`` -- the same with the weights
  in registers (spills; experiment, ``bench/race_sm90.py --build``)
* ``tmasb2`` -- (docs/PERFORMANCE.md v10) ``tmas``'s loop on a balanced persistent schedule each block computes from
  the windows on the device (grid = one block per SM, equal shares of all row blocks' tiles;
  :meth:`Sm90Family._plan_balanced`, host model in dispatch/sm90_balanced.py); ``tmasb`` -- its first form
  (experiment, ``bench/race_sm90.py --build``). H200: 1.3-1.4x DeepGEMM on 671 x 131072 multi_req, +4-6.5% over
  ``tmas`` at H = 64 on long rows without clean_logits, slower elsewhere (1.007x ``tmas`` over the N >= 4096 cases)
* ``tmasb4`` -- (v11, v12) ``tmasb2`` with a second Q buffer per consumer, the next piece's staged by cp.async during
  the current one, the tile loop compiled once per buffer; the plan adds the second buffer's shared memory and caps
  the row blocks at BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS; ``tmasb3`` -- the same with one loop (experiment: 4% slower at
  H = 64). ``tmasb2`` is an experiment since session 6 (``bench/race_sm90.py --build``)
* ``wgpr`` -- (session 9, docs/PERFORMANCE.md v15) ``wg`` on row-block pairs: grid ceil(R / 2), 8 warps, no
  SplitN; block x computes row blocks R - 1 - x and x, its two warpgroups each a contiguous half of the pair's tiles,
  so a long causal row block and its short partner balance within the block and no warpgroup walks a long row alone
* ``tmaq`` -- (session 11, docs/PERFORMANCE.md v17) ``tmas``'s consumer loop with the four consumers sharing one row
  block of 128 / H rows and dealing its K tiles by ring position (DeepGEMM's decomposition): a persistent grid of
  min(SMs, row blocks) blocks walking row blocks in snake order, the next row block staged by two loader warps
  while the current one runs, its Q as one TMA box of Q's own tensor map (v19) (:meth:`Sm90Family._plan_q_shared`,
  host model in dispatch/sm90_qshared.py)
* ``auto`` (the default) -- AUTO_QSHARED = ``tmaq`` for short rows (:func:`qshared_wins`), else ``tmas`` for
  N >= AUTO_TMAS_MIN_N when the caller fixes no block_m / num_warps (AUTO_BALANCED = ``tmasb4`` where
  :func:`balanced_wins`), else ``wg`` (AUTO_PAIRED = ``wgpr`` where :func:`paired_wins`)
* ``mma`` -- mma.sync path, kept as an independent baseline (on sm_90a ptxas emulates its fp8 MMA with f16
  HMMA, so it is never chosen by the heuristic; ask for it with ``RAWINDEXER_SM90_DESIGN=mma`` or ``Sm90Family(design="mma")``)

``RAWINDEXER_SM90_DESIGN`` overrides the default design (``DEFAULT_DESIGN``). Deprecated older names, still
accepted with a DeprecationWarning: the variable ``RAWINDEXER_SM90_IMPL`` and the keyword ``Sm90Family(impl=...)``.
"""
from __future__ import annotations

import warnings
from math import ceil
from pathlib import Path

from .. import registry
from . import sm90_tensor_map
from ..validation import check_sizes
from .base import BUILD_DIR, KernelFamily, LaunchPlan, Pointers, Problem, Tunables, design_from_env, pack_kernargs

FLAG_CLEAN_LOGITS = 1
FLAG_REVERSE_ROWS = 2
FLAG_VEC4_FILL = 4     # out 16-byte aligned and row stride a multiple of 4: float4 -inf fill
FLAG_ZIGZAG_ROWS = 8   # row blocks from both ends: grid x < ceil(R/2) -> R-1-x, else x - ceil(R/2) (kernels/sm90/common.cuh)
MAX_WARPS = 8          # __launch_bounds__(256) in the source
MAX_GRID_Y = 65535
TILE_TOKENS = {name: d.params["tile_tokens"] for name, d in registry.SM90_DESIGNS.items()}
#: v6 SS-form designs: K tiles staged in dynamic shared memory, SS_STAGES per warpgroup
SS_DESIGNS = tuple(name for name, d in registry.SM90_DESIGNS.items() if d.params.get("shared_k_ring"))
SS_STAGES = 3  # ss_stages<KSRC>() in kernels/experimental/fp8_mqa_logits_sm90_experiments.cu (4 for the "ss4" / "ssx4" builds)
#: warp-specialised designs -> consumer warpgroups per block (block = 1 producer warpgroup + these; rows per
#: consumer = block_m / consumers); K ring depth (WS_STAGES in the kernel source)
WS_CONSUMERS = {name: d.params["consumers"] for name, d in registry.SM90_DESIGNS.items() if "consumers" in d.params}
#: designs whose block computes a pair of row blocks (R - 1 - x and x) with two warpgroups: grid ceil(R / 2), 8 warps
PAIRED_DESIGNS = tuple(name for name, d in registry.SM90_DESIGNS.items() if d.params.get("paired_rows"))
#: designs whose blocks walk the row blocks in an order of their own (pairs; tmaq's snake order): no reverse flag
OWN_ROW_ORDER_DESIGNS = PAIRED_DESIGNS + tuple(n for n, d in registry.SM90_DESIGNS.items() if d.params.get("q_shared"))
PAIRED_WARPS = 8
WS_STAGES = 6
#: "ws" SplitN: the cost of one block's prologue (Q staging, ring fill, drain) in 64-token tiles (estimate)
WS_SPLIT_OVERHEAD_TILES = 6
#: the design the public API uses (see docs/PERFORMANCE.md for the H200 numbers behind it): "auto" picks per
#: problem among AUTO_DESIGNS (registry default_rank order: "tmas", "wg", "tmasb4", "wgpr", "tmaq")
AUTO = "auto"
DEFAULT_DESIGN = AUTO
AUTO_DESIGNS = registry.default_designs(registry.PREFILL, registry.SM90)  # ("tmas", "wg", "tmasb4", "wgpr", "tmaq")
#: "auto" takes "tmas" from this N on, "wg" below it (v8, H200, docs/results/race_sm90_v8_h200.log: 1024 x 1024
#: wg 17.5 / tmas 28.5 us at H=32, 25.3 / 26.8 at H=64; from 4096 x 4096 on tmas wins 58 of the 64 race cases'
#: 56 at N >= 4096) and only when the caller fixed no block_m / num_warps (those are the wg heuristic's knobs)
AUTO_TMAS_MIN_N = 4096
#: where "auto" takes the balanced "tmasb2" instead of "tmas" (H200: docs/results/balance14_race_h200.log (tmasb, the
#: same schedule), balance14_race2_h200.log and qbuf14_race_h200.log, each with tmas and DeepGEMM in the same run;
#: docs/PERFORMANCE.md v10): at H = 32 from AUTO_BALANCED_MIN_N keys for AUTO_BALANCED_M32 = [lo, hi) rows (few row
#: blocks with uneven spans, the split grid's tail: 671 x 131072 +1-2.5% causal, +59-83% multi_req); at H = 64 from
#: AUTO_BALANCED_M64 rows and AUTO_TMAS_MIN_N keys, clean_logits or not: from 1024 rows without clean_logits +1-6.7% in
#: every measured case, with it causal +0.6-5.4% and multi_req -2-6%; at 671 rows multi_req +6-12% and causal -2.5-3.3%.
#: The host cannot tell causal from multi_req; every case where tmasb2 loses stays faster than DeepGEMM, while long
#: causal clean_logits and 671 multi_req cross over to faster. The rule is fitted to the benchmark's shapes: in the
#: two runs that timed tmas and tmasb2 together it leaves 4 fewer cases slower than DeepGEMM (14 -> 10, 11 -> 7) at a
#: 0.3-0.4% higher geomean. Elsewhere (H = 32 from 1024 rows, 128 rows, H = 128: not measured) tmas stays.
#: Session 6 (docs/results/session6/prefill_race.log, tmas / tmasb2 / tmasb4 beside DeepGEMM in one run): "tmasb4"
#: (tmasb2 with the next piece's Q staged during the current one, v12) is as fast as "tmasb2" (within 0.4%) or faster
#: in every case of the rule's region (+0-1% on long rows, +1-9% at 4096^2 / 8192^2, the most on multi_req with
#: clean_logits), so it replaced tmasb2 as the balanced design; the region itself was unchanged then (the bounds above
#: are session 5's; session 8 redrew them, next).
#: Session 8 (v14, docs/results/session8/ab/: s7 and v14 builds raced three times each beside DeepGEMM): with the interior
#: tiles peeled (TMA_PEEL_INTERIOR) "tmas" gained 7.4% at H = 64 and now beats "tmasb4" at H = 64 everywhere but the
#: longest rows (1024 x 131072: tmasb4 2.5-5% faster; 2048 x 65536: within 0.3%; 671 x 131072: tmas 5-16% faster;
#: N <= 32768: tmas 0-4% faster), while "tmasb4" gained 2.7% at H = 32 and beats "tmas" there from 32768 keys at
#: 1024 rows and more (2-4%) as well as at 671 rows. So: H = 32 from AUTO_BALANCED_MIN_N keys and AUTO_BALANCED_M32
#: rows; H = 64 from AUTO_BALANCED_MIN_N64 keys and AUTO_BALANCED_M64 rows; "tmas" elsewhere. Fitted to the
#: benchmark's shapes, in the run that measured them (public-call check: the final bench of session 8).
AUTO_BALANCED_MIN_N = 32768
AUTO_BALANCED_M32 = 512
AUTO_BALANCED_MIN_N64 = 65536
AUTO_BALANCED_M64 = 1024
AUTO_BALANCED = "tmasb4"
#: Per-logit gate |out - ref| <= eps * T of each design (rawindexer.testing.grading.logit_gate; docs/NUMERICS.md).
#: The fp8 wgmma forms ("wg", "ws") cannot reach the gfx950 designs' 1e-5: Hopper's fp8 tensor cores add
#: the products with a shorter accumulator than fp32 (about 14 bits, per DeepSeek-V3's report on H800), so
#: a score is off by ~2^-14 of sum_d |q_d k_d|. Measured worst eps on the H200: docs/results (sweep logs).
#: "mma" (mma.sync, fp8 widened to f16 with exact products and fp32 accumulation) and "wgr" (bf16 head
#: reduce, like gfx950's "mr") are the baselines.
LOGIT_EPS = registry.logit_eps(registry.PREFILL, registry.SM90)
LOGIT_EPS[AUTO] = max(LOGIT_EPS[name] for name in AUTO_DESIGNS)  # the gate of whichever "auto" picks
#: the default wgmma N (= BLOCK_M * heads); picked from the H200 sweep in docs/PERFORMANCE.md
DEFAULT_N = 128
#: Hopper blocks resident per SM we aim to fill with row blocks x splits before splitting further
TARGET_BLOCKS_PER_SM = 4
#: one warpgroup per block (num_warps 4) once row blocks >= this many per SM, else two (v4: was 2)
ROW_BLOCKS_PER_SM_FOR_4_WARPS = 3
#: SplitN never leaves a K stream fewer tiles than this (v4: was 8)
MIN_TILES_PER_STREAM = 16
#: seed rule: high-m-first dispatch pays once rows' windows are long
REVERSE_ROWS_MIN_N = 2048
#: designs whose heuristic row order below REVERSE_ROWS_MIN_N is the zigzag (FLAG_ZIGZAG_ROWS) instead of forward: there
#: the row grid is one pass of the card, and the scheduler gives blocks x, x + SMs, ... to one SM, so the zigzag pairs
#: long causal rows with short ones on every SM (v10-small in docs/PERFORMANCE.md; measured for "wg" only)
ZIGZAG_DESIGNS = ("wg",)
#: balanced designs ("tmasb", v10): the most row blocks whose spans and cost prefix a block keeps in shared memory
#: (TMAB_MAX_ROW_BLOCKS in kernels/sm90/prefill_tma_balanced.cuh); above it the plan is "tmas"'s split grid
BALANCED_MAX_ROW_BLOCKS = 4096
#: the same for the balanced designs with two Q buffers per consumer ("tmasb3", v11; TMAB3_MAX_ROW_BLOCKS): the second
#: buffer takes 66 KB at D = 128, leaving 24 KB for spans and prefix under the 227 KB a block may have
BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS = 2048
BALANCED_FALLBACK = "tmas"
#: where "auto" takes "wgpr" (row-block pairs) instead of "wg" (session 9, docs/PERFORMANCE.md v15; races beside
#: DeepGEMM in docs/results/session9/pair2): H = 64 when wg's grid would be one unsplit pass of one-warpgroup blocks
#: (3 to 4 row blocks per SM, fewer than 2 * MIN_TILES_PER_STREAM tiles per row). There a bottom row block walks its
#: causal tiles alone; the pairs halve that chain: 1024^2 causal 20.2-20.3 -> 17.1-17.2 us (c0) and 21.1-21.2 ->
#: 18.1-18.5 (c1), multi_req c0 9.4-9.5 -> 10.2-10.3 (the host cannot tell the two apart). H = 32 keeps wg (its
#: 1024-row grid already pairs two warpgroups per row block: wgpr 7-15% slower there); other shapes were not measured.
AUTO_PAIRED = "wgpr"
AUTO_PAIRED_HEADS = 64


#: where "auto" takes "tmaq" (session 11, docs/PERFORMANCE.md v17; races beside DeepGEMM, wg, wgpr and tmas in four
#: runs, docs/results/session11/): rows of up to 4096 keys from 1024 rows on (two row blocks per SM and more, so each
#: block's next Q is staged under its current one). 1024^2 H 32: every case faster than wg (causal c0 10.8-11.0 us
#: against 11.6-11.8, c1 10.8-11.1 against 12.4-12.6) but multi_req c0 (7.6-7.7 against 7.4; DeepGEMM 7.7-7.9);
#: 1024^2 H 64: causal 16.0-16.3 / 16.5-17.0 us against wgpr's 16.9-17.3 / 18.1-18.2 (DeepGEMM 15.9-16.5 / 20.0-20.6),
#: multi_req c0 10.5-10.8 against 10.1 (DeepGEMM 10.4-10.6); 4096^2 H 32 (tmas's region): multi_req c0 31.1-32.5 us
#: against 35.8-35.9 (DeepGEMM 32.4-33.0), the other three 3-8% slower than tmas and 4-35% faster than DeepGEMM. At
#: 4096^2 H 64 and from 8192 keys tmas's K sharing wins (tmaq reads each K tile once per row block of 128 / H rows).
AUTO_QSHARED = "tmaq"
AUTO_QSHARED_MIN_M = 1024
AUTO_QSHARED_MAX_N32 = 4096


def qshared_wins(p: Problem) -> bool:
    """Whether "auto" runs ``p`` with AUTO_QSHARED (see AUTO_QSHARED): H 32 or 64, from AUTO_QSHARED_MIN_M rows, below
    AUTO_TMAS_MIN_N keys (up to AUTO_QSHARED_MAX_N32 at H 32)."""
    if p.M < AUTO_QSHARED_MIN_M:
        return False
    if p.heads == 32:
        return p.N <= AUTO_QSHARED_MAX_N32
    return p.heads == 64 and p.N < AUTO_TMAS_MIN_N


def paired_wins(p: Problem, compute_units: int) -> bool:
    """Whether "auto" runs ``p`` with AUTO_PAIRED rather than "wg" (see AUTO_PAIRED; below AUTO_TMAS_MIN_N keys)."""
    if p.heads != AUTO_PAIRED_HEADS:
        return False
    row_blocks = ceil(p.M / (DEFAULT_N // p.heads))  # wg's BLOCK_M at the default N (2 rows at H = 64)
    sms = max(1, compute_units)
    return (ceil(p.N / TILE_TOKENS["wg"]) < 2 * MIN_TILES_PER_STREAM
            and ROW_BLOCKS_PER_SM_FOR_4_WARPS * sms <= row_blocks <= TARGET_BLOCKS_PER_SM * sms)


def balanced_wins(p: Problem) -> bool:
    """Whether "auto" runs ``p`` with the balanced AUTO_BALANCED rather than "tmas" (AUTO_BALANCED_* above)."""
    if p.heads == 32:
        return p.N >= AUTO_BALANCED_MIN_N and p.M >= AUTO_BALANCED_M32
    return p.heads == 64 and p.N >= AUTO_BALANCED_MIN_N64 and p.M >= AUTO_BALANCED_M64


class Sm90Family(KernelFamily):
    """fp8_mqa_logits on sm_90a. ``design`` picks one of the registry's sm_90a designs ("wg", "ws", "mma", ...);
    default: RAWINDEXER_SM90_DESIGN, else :data:`DEFAULT_DESIGN`. ``impl``: the keyword's deprecated older name."""

    arch = "sm_90a"
    design_env = "RAWINDEXER_SM90_DESIGN"
    deprecated_design_env = "RAWINDEXER_SM90_IMPL"  # the variable's older name, still read

    def __init__(self, build_dir: Path = BUILD_DIR, design: str | None = None, *, impl: str | None = None) -> None:
        super().__init__(build_dir)
        if impl is not None:
            warnings.warn("Sm90Family(impl=...) is deprecated: use design=", DeprecationWarning, stacklevel=2)
            design = design or impl
        if design is None:
            design = (design_from_env(self.design_env, (AUTO, *TILE_TOKENS), self.deprecated_design_env)
                      or DEFAULT_DESIGN)
        if design not in TILE_TOKENS and design != AUTO:
            raise ValueError(f"design: expected one of {sorted([AUTO, *TILE_TOKENS])}, got {design!r}")
        self.design = design
        self._members = {name: Sm90Family(build_dir, design=name) for name in AUTO_DESIGNS} if design == AUTO else {}
        self._balanced_fallback: Sm90Family | None = None  # a balanced design's "tmas" family, made on first need

    def _auto_member(self, problem: Problem, tunables: Tunables, compute_units: int) -> "Sm90Family":
        """The family "auto" plans ``problem`` with: AUTO_QSHARED for short rows (:func:`qshared_wins`), "tmas" for
        long rows at the default geometry (its balanced schedule AUTO_BALANCED where :func:`balanced_wins` says so),
        else "wg" (on row-block pairs, AUTO_PAIRED, where :func:`paired_wins` says so)."""
        tmas, wg = self._members.get("tmas"), self._members["wg"]
        qshared = self._members.get(AUTO_QSHARED)
        if (qshared is not None and not tunables.block_m and not tunables.num_warps and not tunables.split_n
                and tunables.reverse_rows is None and qshared_wins(problem)
                and qshared.is_supported(problem.heads, problem.head_dim)):
            return qshared
        if (tmas is not None and problem.N >= AUTO_TMAS_MIN_N and not tunables.block_m and not tunables.num_warps
                and tmas.is_supported(problem.heads, problem.head_dim)):
            balanced = self._members.get(AUTO_BALANCED)
            if (balanced is not None and not tunables.split_n and balanced_wins(problem)
                    and balanced.is_supported(problem.heads, problem.head_dim)):
                return balanced
            return tmas
        paired = self._members.get(AUTO_PAIRED)
        if (paired is not None and not tunables.block_m and not tunables.num_warps and not tunables.split_n
                and tunables.reverse_rows is None and paired_wins(problem, compute_units)
                and paired.is_supported(problem.heads, problem.head_dim)):
            return paired
        return wg

    def _instances(self, heads: int, head_dim: int) -> dict[int, str]:
        """BLOCK_M -> symbol for one (heads, head_dim) of this design."""
        found = {}
        for symbol, k in self.target["kernels"].items():
            p = k["params"]
            if p["heads"] == heads and p["head_dim"] == head_dim and p["design"] == self.design:
                found[p["block_m"]] = symbol
        return found

    def is_supported(self, heads: int, head_dim: int) -> bool:
        if self.design == AUTO:
            return any(f.is_supported(heads, head_dim) for f in self._members.values())
        return bool(self._instances(heads, head_dim))

    def plan(self, problem: Problem, tunables: Tunables, pointers: Pointers, compute_units: int) -> LaunchPlan:
        if self.design == AUTO:
            return self._auto_member(problem, tunables, compute_units).plan(problem, tunables, pointers, compute_units)
        p, t = problem, tunables
        instances = self._instances(p.heads, p.head_dim)
        if not instances:
            raise ValueError(f"sm_90a has no {self.design} kernel for heads={p.heads}, head_dim={p.head_dim} "
                             f"(built: {sorted({(k['params']['heads'], k['params']['head_dim']) for k in self.target['kernels'].values()})})")
        check_sizes(p.M, p.N, p.out_row_stride)
        for name in ("q", "k"):
            if getattr(pointers, name) % 16:
                raise ValueError(f"{name} must be 16-byte aligned (the kernel reads it with 16-byte loads)")
        if t.unroll2:
            raise ValueError("unroll2 is a gfx950 tunable; the sm_90a kernel has a single tile schedule")

        # BLOCK_M: wgmma N = BLOCK_M * heads; default N = DEFAULT_N (mma: the one built BLOCK_M).
        if t.block_m:
            if t.block_m not in instances:
                raise ValueError(f"block_m={t.block_m} not built for heads={p.heads}, head_dim={p.head_dim} "
                                 f"({self.design}); choose from {sorted(instances)}")
            block_m = t.block_m
        elif self.design in WS_CONSUMERS:
            block_m = min(instances, key=lambda bm: abs(bm // WS_CONSUMERS[self.design] * p.heads - DEFAULT_N))
        elif self.design != "mma":
            block_m = min(instances, key=lambda bm: abs(bm * p.heads - DEFAULT_N))
        else:
            block_m = max(instances)

        if self.design in WS_CONSUMERS:
            warps = 4 * (1 + WS_CONSUMERS[self.design])
            if t.num_warps not in (0, None, warps):
                raise ValueError(f"num_warps must be {warps} for design {self.design!r} (producer + "
                                 f"{WS_CONSUMERS[self.design]} consumer warpgroups), got {t.num_warps}")
            return self._plan_ws(p, t, pointers, compute_units, instances[block_m], block_m)
        paired = self.design in PAIRED_DESIGNS
        if paired and t.num_warps not in (0, None, PAIRED_WARPS):
            raise ValueError(f"num_warps must be {PAIRED_WARPS} for design {self.design!r} (two warpgroups share each "
                             f"pair of row blocks), got {t.num_warps}")
        if paired and t.split_n not in (0, None, 1):
            raise ValueError(f"split_n must be 1 for design {self.design!r} (its pairs are not split over grid.y), "
                             f"got {t.split_n}")
        if paired and t.reverse_rows is not None:
            raise ValueError(f"reverse_rows must be None for design {self.design!r}: its blocks take row blocks "
                             f"R - 1 - x and x, got {t.reverse_rows}")
        if t.num_warps:
            if not 1 <= t.num_warps <= MAX_WARPS or (self.design != "mma" and t.num_warps % 4):
                raise ValueError(f"num_warps must be in 1..{MAX_WARPS}"
                                 + (" and a multiple of 4 (whole warpgroups)" if self.design != "mma" else "")
                                 + f", got {t.num_warps}")
            num_warps = t.num_warps
        row_blocks = max(1, ceil(p.M / block_m))
        if not t.num_warps:
            # H200 sweeps (docs/PERFORMANCE.md): one warpgroup per block wins once the row grid alone fills
            # the card three times over (4096 x 32768: 1320 vs 1353 us); below that two warpgroups sharing one
            # staged Q win (128 x 32768: 64 vs 72 us; 671 x 131072 H=64, 336 row blocks: 1950 vs 2254 us).
            num_warps = 4 if self.design == "mma" or row_blocks >= ROW_BLOCKS_PER_SM_FOR_4_WARPS * max(1, compute_units) else 8
            if paired:
                num_warps = PAIRED_WARPS
        if paired:
            split_n = 1
        elif t.split_n:
            if not 1 <= t.split_n <= MAX_GRID_Y:
                raise ValueError(f"split_n must be in 1..{MAX_GRID_Y}, got {t.split_n}")
            split_n = t.split_n
        else:
            # Fill the card: enough (row block, split) pairs for TARGET_BLOCKS_PER_SM per SM, but keep at
            # least MIN_TILES_PER_STREAM tiles per stream: on short rows every split re-stages Q
            # (1024 x 1024 multi_req H=64: split 1 14.8 us, split 2 17.6 us).
            want = ceil(TARGET_BLOCKS_PER_SM * max(1, compute_units) / row_blocks)
            streams = num_warps // 4 if self.design != "mma" else num_warps
            cap = max(1, ceil(p.N / TILE_TOKENS[self.design]) // (MIN_TILES_PER_STREAM * streams))
            split_n = max(1, min(want, cap, MAX_GRID_Y))

        # SS form: each warpgroup's ring of SS_STAGES K tiles (64 tokens x head_dim bytes) in dynamic shared memory
        stages = 4 if self.design.endswith("4") else SS_STAGES
        shared_mem = (num_warps // 4) * stages * TILE_TOKENS[self.design] * p.head_dim if self.design in SS_DESIGNS else 0

        grid_rows = ceil(row_blocks / 2) if paired else row_blocks
        return self._launch_plan(instances[block_m], p, t, pointers, block_m, grid_rows, split_n, num_warps, shared_mem)

    def _launch_plan(self, symbol: str, p: Problem, t: Tunables, pointers: Pointers, block_m: int, row_blocks: int,
                     split_n: int, num_warps: int, shared_mem: int) -> LaunchPlan:
        """The plan of one resolved launch: grid (row blocks, split_n), 32 * num_warps threads, the flags (clean
        logits; high-m rows first past REVERSE_ROWS_MIN_N keys unless asked, the zigzag order below it for
        ZIGZAG_DESIGNS unless the caller fixed reverse_rows; the float4 -inf fill where every row of out starts
        16-byte aligned: every design's fill takes it), packed kernargs."""
        # (a paired design's blocks take row blocks R - 1 - x and x, tmaq's its snake order, whatever the flags say)
        reverse = (t.reverse_rows if t.reverse_rows is not None
                   else p.N > REVERSE_ROWS_MIN_N and self.design not in OWN_ROW_ORDER_DESIGNS)
        zigzag = t.reverse_rows is None and not reverse and self.design in ZIGZAG_DESIGNS
        flags = ((FLAG_CLEAN_LOGITS if p.clean_logits else 0) | (FLAG_REVERSE_ROWS if reverse else 0)
                 | (FLAG_ZIGZAG_ROWS if zigzag else 0))
        if pointers.out % 16 == 0 and p.out_row_stride % 4 == 0:
            flags |= FLAG_VEC4_FILL
        entry = self.target["kernels"][symbol]
        map_slot = sm90_tensor_map.k_map_slot(entry["args"])
        values = {
            "q": pointers.q, "k": pointers.k, "kv_scale": pointers.kv_scale, "weights": pointers.weights,
            "cu_seqlen_ks": pointers.cu_seqlen_ks, "cu_seqlen_ke": pointers.cu_seqlen_ke, "out": pointers.out,
            "out_row_stride": p.out_row_stride, "M": p.M, "N": p.N, "split_n": split_n,
            "num_warps": num_warps, "flags": flags,
        }
        config = {"design": self.design, "block_m": block_m, "split_n": split_n, "num_warps": num_warps,
                  "reverse_rows": reverse, "zigzag_rows": zigzag, "unroll2": False}
        if map_slot is None:
            kernargs = pack_kernargs(entry["args"], values, entry["kernarg_size"])
        else:  # K's tensor map (v8 "tmas"): encoded for pointers.k; launch_path re-encodes per K pointer
            maps = (sm90_tensor_map.K_MAP_ARG, sm90_tensor_map.Q_MAP_ARG)
            kernargs = pack_kernargs([a for a in entry["args"] if a["name"] not in maps], values,
                                     entry["kernarg_size"])
            kernargs = sm90_tensor_map.pack_tensor_map_kernargs(kernargs, map_slot, pointers.k, p.N, p.head_dim)
            config["k_tensor_map"] = {"slot": dict(map_slot), "n": p.N, "head_dim": p.head_dim}
        q_slot = sm90_tensor_map.k_map_slot(entry["args"], sm90_tensor_map.Q_MAP_ARG)
        if q_slot is not None:  # "tmas", "tmaq" (v19): Q's map too, for pointers.q; launch_path re-encodes per Q
            config["q_tensor_map"] = {"slot": dict(q_slot), "rows": p.M * p.heads, "head_dim": p.head_dim}
            kernargs = sm90_tensor_map.pack_q_map_kernargs(kernargs, config["q_tensor_map"], pointers.q)
        return LaunchPlan(
            symbol=symbol,
            grid=(row_blocks, split_n, 1),
            block=(32 * num_warps, 1, 1),
            kernargs=kernargs,
            shared_mem=shared_mem,
            config=config,
        )

    def _plan_ws(self, p: Problem, t: Tunables, pointers: Pointers, compute_units: int, symbol: str,
                 block_m: int) -> LaunchPlan:
        """Launch plan of the warp-specialised kernels: one block per SM; dynamic smem = Q + K ring + weights."""
        consumers = WS_CONSUMERS[self.design]
        warps = 4 * (1 + consumers)
        nq = block_m // consumers * p.heads  # wgmma N of one consumer
        row_blocks = max(1, ceil(p.M / block_m))
        cus = max(1, compute_units)
        if registry.SM90_DESIGNS[self.design].params.get("balanced"):
            return self._plan_balanced(p, t, pointers, cus, symbol, block_m, consumers, warps)
        if registry.SM90_DESIGNS[self.design].params.get("q_shared"):
            return self._plan_q_shared(p, t, pointers, cus, symbol, block_m, warps)
        if t.split_n:
            if not 1 <= t.split_n <= MAX_GRID_Y:
                raise ValueError(f"split_n must be in 1..{MAX_GRID_Y}, got {t.split_n}")
            split_n = t.split_n
        else:
            # One block per SM, so the grid runs in whole waves: minimise waves x (tiles per block + the block's
            # fixed cost), with N / 64 tiles per unsplit row block, never leaving a stream fewer than
            # MIN_TILES_PER_STREAM tiles.
            tiles = ceil(p.N / TILE_TOKENS[self.design])
            cap = max(1, min(MAX_GRID_Y, tiles // MIN_TILES_PER_STREAM))
            cost = {s: ceil(row_blocks * s / cus) * (tiles / s + WS_SPLIT_OVERHEAD_TILES)
                    for s in range(1, min(cap, 4 * cus) + 1)}
            split_n = min(cost, key=lambda s: (cost[s], s))
        shared_mem = (consumers * nq * p.head_dim + WS_STAGES * TILE_TOKENS[self.design] * p.head_dim
                      + consumers * nq * 4)
        params = registry.SM90_DESIGNS[self.design].params
        if params.get("k_tensor_map"):
            shared_mem = sm90_tensor_map.shared_mem(block_m, p.heads, p.head_dim, consumers,
                                                    q_map=bool(params.get("q_tensor_map")))
        return self._launch_plan(symbol, p, t, pointers, block_m, row_blocks, split_n, warps, shared_mem)

    def _plan_q_shared(self, p: Problem, t: Tunables, pointers: Pointers, cus: int, symbol: str, block_m: int,
                       warps: int) -> LaunchPlan:
        """Launch plan of "tmaq" (docs/PERFORMANCE.md v17): a persistent grid of min(SMs, row blocks) blocks, row
        blocks of block_m = 128 / heads rows, no SplitN (a block's consumers deal each row block's tiles between
        them); dynamic smem = two Q / weights / windows buffers + the K ring + mbarriers."""
        if t.split_n not in (0, None, 1):
            raise ValueError(f"split_n must be 1 for design {self.design!r} (its consumers split each row block's "
                             f"keys), got {t.split_n}")
        if t.reverse_rows is not None:
            raise ValueError(f"reverse_rows must be None for design {self.design!r}: its blocks walk the row blocks in "
                             f"their own snake order, got {t.reverse_rows}")
        row_blocks = max(1, ceil(p.M / block_m))
        blocks = min(cus, row_blocks)
        plan = self._launch_plan(symbol, p, t, pointers, block_m, blocks, 1, warps,
                                 sm90_tensor_map.q_shared_mem(block_m, p.heads, p.head_dim))
        plan.config["persistent_blocks"] = blocks
        return plan

    def _plan_balanced(self, p: Problem, t: Tunables, pointers: Pointers, cus: int, symbol: str, block_m: int,
                       consumers: int, warps: int) -> LaunchPlan:
        """Launch plan of a balanced design ("tmasb", docs/PERFORMANCE.md v10): grid = one block per SM (``cus``
        blocks, no SplitN: each block computes every row block's span from the windows on the device and takes
        1/cus of the total tiles); dynamic smem = "tmas"'s + the row blocks' spans (int2) and cost prefix (int).
        Above BALANCED_MAX_ROW_BLOCKS row blocks, or when the caller fixes split_n, it is "tmas"'s split plan."""
        row_blocks = max(1, ceil(p.M / block_m))
        q_prefetch = bool(registry.SM90_DESIGNS[self.design].params.get("q_prefetch"))
        cap = BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS if q_prefetch else BALANCED_MAX_ROW_BLOCKS
        if t.split_n or row_blocks > cap:
            if self._balanced_fallback is None:
                self._balanced_fallback = Sm90Family(self.build_dir, design=BALANCED_FALLBACK)
            return self._balanced_fallback.plan(p, t, pointers, cus)
        nq = block_m // consumers * p.heads
        # q_prefetch: a second copy of the Q rows, weights and windows (the kernel's NBUF = 2)
        second = consumers * nq * (p.head_dim + 4) + block_m * 8 if q_prefetch else 0
        shared_mem = (sm90_tensor_map.shared_mem(block_m, p.heads, p.head_dim, consumers) + second
                      + 8 * row_blocks + 4 * (row_blocks + 1))
        plan = self._launch_plan(symbol, p, t, pointers, block_m, cus, 1, warps, shared_mem)
        plan.config["balanced_blocks"] = cus
        return plan
