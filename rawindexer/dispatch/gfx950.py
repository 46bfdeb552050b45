"""Host side of kernels/fp8_mqa_logits.hip on gfx950: design and instance choice, launch geometry, kernargs.

Four kernel designs are built (rawindexer/registry.py declares them):

* ``"mrf"``  -- the default: the MFMA-reduce design's pipeline (16x16 score MFMAs, buffer loads, rotated unit
  pipeline, register double buffering) with the head reduce in fp32 on the VALU: ReLU (v_max_f32) and the
  weight FMA (v_pk_fma_f32), lane groups summed by permlane swaps. fp32-class logits (per-logit gate eps
  1e-5, rawindexer.testing.grading.logit_gate), <= 8 wait states per tile, 3 waves/SIMD (2 at H=128, D=128).
* ``"seed"`` -- the seed's design: ReLU and weight FMA in fp32 on the VALU, paired-row permlane head
  reduce. fp32-class logits too; no software pipeline (40-80 wait states per tile).
* ``"mr"``   -- "MFMA reduce": the weighted head sum runs on a bf16 MFMA (3 waves/SIMD at H=32, D=128,
  ~0.55 VALU per (row, token) instead of ~1.15), but every relu(score) x weight term is rounded to
  bf16: per-logit eps up to ~6e-3 measured (:data:`LOGIT_EPS`). Selectable by name, never the default.
* ``"mrp"``  -- the MFMA-reduce design with a packed-int16 ReLU (v_pk_max_i16): one reduce MFMA instead of
  two; same bf16 rounding as "mr".

Which one runs: the caller's ``variant=`` tunable, else the environment variable
``RAWINDEXER_GFX950_DESIGN``, else the first of :data:`DEFAULT_DESIGNS` built for the (heads, head_dim).
``RAWINDEXER_GFX950_PATH`` is that variable's deprecated older name (read, with a DeprecationWarning, when the
new one is unset).
"""
from __future__ import annotations

from .. import registry
from .base import KernelFamily, LaunchPlan, Pointers, Problem, Tunables, design_from_env, pack_kernargs

TILE_N = 32          # tokens per MFMA tile
WAVE = 64
MAX_WARPS = 8        # amdgpu_flat_work_group_size(64, 512)
MAX_SPLIT_N = 1024
MAX_GRID_Y = 65535
FLAG_CLEAN_LOGITS = 1
FLAG_REVERSE_ROWS = 2
#: Waves per SIMD the default BLOCK_M aims at (the register file decides; see default_block_m).
TARGET_WAVES = 3
SIMDS_PER_CU = 4
#: the designs (rawindexer/registry.py declares them)
DESIGNS = registry.designs(registry.PREFILL, registry.GFX950)
#: The designs the heuristic uses unless RAWINDEXER_GFX950_DESIGN says otherwise, in order of preference.
#: Accuracy decides first (issue 15): only designs meeting the per-logit gate at eps 1e-5 qualify; of those,
#: "mrf" has the better static levers at every (H, D) (docs/PROFILE.md).
DEFAULT_DESIGNS = registry.default_designs(registry.PREFILL, registry.GFX950)  # ("mrf", "seed")
#: Per-logit gate of each design (|out - ref| <= eps * T, rawindexer.testing.grading.logit_gate): the bound the
#: tests hold each design to. fp32 FMA accumulation: 1e-5 with room (measured worst ~1e-7). bf16 terms:
#: the score and the weight each rounded to bf16 (2^-9 relative each), ~2^-8 per term (the fuzz measured up
#: to 5.5e-3 with the fp32 accumulations); measured
#: worst values are in docs/PROFILE.md.
LOGIT_EPS = registry.logit_eps(registry.PREFILL, registry.GFX950)


class Gfx950Family(KernelFamily):
    arch = "gfx950"
    #: the designs this target builds, and which the heuristic uses (in order of preference)
    designs: tuple[str, ...] = DESIGNS
    default_designs: tuple[str, ...] = DEFAULT_DESIGNS
    design_env = "RAWINDEXER_GFX950_DESIGN"
    deprecated_design_env = "RAWINDEXER_GFX950_PATH"  # the variable's older name, still read

    # ---- what is built ----
    def instances(self, heads: int, head_dim: int, design: str | None = None,
                 fp8_format: str | None = None) -> dict[tuple[int, int], dict]:
        """{(block_m, unroll): manifest entry} of the built instances of one design serving (heads, head_dim)
        for q / k bytes in ``fp8_format`` (default: the target's own, ``fp8_formats[0]``)."""
        design = design or self.design(heads=heads, head_dim=head_dim)
        fmt = fp8_format or self.fp8_formats[0]
        out = {}
        for symbol, entry in self.target["kernels"].items():
            p = entry["params"]
            if (p["heads"] == heads and p["head_dim"] == head_dim and p["design"] == design
                    and p.get("fp8_format", "e4m3fn") == fmt):
                out[(p["block_m"], p["unroll"])] = {**entry, "symbol": symbol}
        return out

    def is_supported(self, heads: int, head_dim: int) -> bool:
        return any(self.instances(heads, head_dim, design) for design in self.designs)

    def design(self, tunables: Tunables | None = None, heads: int = 32, head_dim: int = 128) -> str:
        """The design in use: ``tunables.variant``, else RAWINDEXER_GFX950_DESIGN, else the first of
        :data:`DEFAULT_DESIGNS` that has a built instance for (heads, head_dim)."""
        if tunables is not None and tunables.variant:
            if tunables.variant not in self.designs:
                raise ValueError(f"variant: expected None or one of {self.designs} ({self.arch}), got {tunables.variant!r}")
            return tunables.variant
        if self.design_env:
            design = design_from_env(self.design_env, self.designs, self.deprecated_design_env)
            if design:
                return design
        for design in self.default_designs:
            if self.instances(heads, head_dim, design):
                return design
        return self.default_designs[-1]

    # ---- the host heuristic ----
    def default_block_m(self, instances: dict, design: str = "seed") -> int:
        """The largest BLOCK_M whose kernels (every unroll built for it) reach :data:`TARGET_WAVES`
        waves/SIMD without spilling; where none does, the one with the most waves (then the largest).

        BLOCK_M rows amortise one K read, but their Q tiles (and weights) live in registers, so the
        register file decides. mrf at 3 waves: H=32, D=128 -> BLOCK_M 4 (168 VGPRs, compiled with
        amdgpu_waves_per_eu(3); 170 without),
        H=32, D=64 -> 4, H=64, D=64 -> 3, H=64, D=128 -> 2, H=128 -> 1 (2 waves at D=128: 176 VGPRs).
        Seed design: H=32, D=128 -> 3, H=32, D=64 -> 4, H >= 64 -> 1 or 2; H=128, D=128 reaches 2 waves only.
        bf16 MFMA-reduce designs (built at power-of-two BLOCK_M): H=32 -> 4, H=64, D=128 -> 2, H=128, D=128 -> 1.
        """
        by_bm: dict[int, list[dict]] = {}
        for (bm, _u), e in instances.items():
            by_bm.setdefault(bm, []).append(e["resources"])

        def waves(bm: int) -> int:
            rs = by_bm[bm]
            if any(r["vgpr_spill"] or r["scratch"] for r in rs):
                return 0
            return min(r["waves_per_simd"] for r in rs)

        ok = [bm for bm in by_bm if waves(bm) >= TARGET_WAVES]
        if ok:
            return max(ok)
        return max(by_bm, key=lambda bm: (waves(bm), bm))

    def choose(self, problem: Problem, tunables: Tunables, compute_units: int) -> dict:
        """Resolve every tunable the caller left at 0 / None. The rules:

        * block_m: :meth:`default_block_m` of the design in use.
        * num_warps (warps split the tile range, each an independent K stream): 1 below 1024 keys,
          2 below 4096, else 4 -- enough tiles per warp to keep its loads ahead of its MFMAs.
        * split_n: enough waves to fill every SIMD to the kernel's own occupancy (waves/SIMD from the
          register file, :meth:`resident_waves`) when the row grid alone cannot (small M, long N:
          (128, 32768) is the seed's biggest win; and the seed's large chunks, whose row grid gives 2
          waves per SIMD or fewer), but never so many that a split has fewer than two tiles per warp.
        * unroll2 (seed design only): when each warp walks at least 8 tiles, two tiles in flight hide more
          latency. The MFMA-reduce designs always keep the next tile in flight (register ping-pong), so
          it reports False.
        * reverse_rows: for N > 2048, where causal rows grow long enough that dispatching the
          high-m blocks first shortens the tail (+6% at 4096^2 in the seed, neutral elsewhere).

        The square short-KV shapes the seed lost on -- (1024, 1024), (4096, 4096), (8192, 8192) -- get
        an explicit choice, because there the tile loop is short relative to the per-block prologue:
        (1024, 1024): 1 warp and reverse off (32 tiles per block at most, 256 blocks of rows: the row
        grid fills 256 CUs; more warps would split a short loop further); (4096, 4096), (8192, 8192):
        2 warps (the seed's rule gives 4 at N >= 4096, i.e. only ~8-16 tiles per warp on a causal
        triangle's average row block), reverse on. split_n follows the rule above on them too.
        Unmeasured: no gfx950 here.
        """
        design = self.design(tunables, problem.heads, problem.head_dim)
        instances = self.instances(problem.heads, problem.head_dim, design, problem.fp8_format)
        block_m = tunables.block_m or self.default_block_m(instances, design)
        square_short = problem.M == problem.N and problem.N in (1024, 4096, 8192)
        if tunables.num_warps:
            num_warps = tunables.num_warps
        elif square_short:
            num_warps = 1 if problem.N == 1024 else 2
        else:
            num_warps = 1 if problem.N < 1024 else 2 if problem.N < 4096 else 4
        row_blocks = -(-problem.M // block_m)
        tiles = -(-problem.N // TILE_N)
        occupancy = min((e["resources"]["waves_per_simd"] for (bm, _), e in instances.items() if bm == block_m),
                        default=2)
        if tunables.split_n:
            split_n = tunables.split_n
        else:
            want_waves = compute_units * SIMDS_PER_CU * occupancy
            want = -(-want_waves // (row_blocks * num_warps))
            split_n = max(1, min(want, tiles // (2 * num_warps), MAX_SPLIT_N, MAX_GRID_Y))
        tiles_per_warp = tiles / (split_n * num_warps)
        if tunables.unroll2 is not None:
            unroll2 = tunables.unroll2
        else:
            unroll2 = design == "seed" and tiles_per_warp >= 8 and (block_m, 2) in instances
        reverse = tunables.reverse_rows if tunables.reverse_rows is not None else problem.N > 2048
        return {"block_m": block_m, "num_warps": num_warps, "split_n": split_n,
                "unroll2": bool(unroll2), "reverse_rows": bool(reverse)}

    @staticmethod
    def resident_waves(grid: tuple[int, int, int], block: tuple[int, int, int], waves_per_simd: int,
                       compute_units: int) -> float:
        """Waves resident per SIMD while the launch's first wave of blocks runs: the launch's waves spread
        over compute_units x 4 SIMDs, capped by the kernel's occupancy (registers). A launch geometry
        figure, not a timing: causal rows finish at different times."""
        waves = grid[0] * grid[1] * grid[2] * (-(-block[0] // WAVE))
        return min(float(waves_per_simd), waves / (compute_units * SIMDS_PER_CU))

    def plan(self, problem: Problem, tunables: Tunables, pointers: Pointers, compute_units: int) -> LaunchPlan:
        design = self.design(tunables, problem.heads, problem.head_dim)
        if problem.fp8_format not in self.fp8_formats:
            raise ValueError(f"fp8_format: expected {' or '.join(self.fp8_formats)} for the {self.arch} kernel, got "
                             f"{problem.fp8_format!r} ({self.fp8_format_note})")
        instances = self.instances(problem.heads, problem.head_dim, design, problem.fp8_format)
        if not instances:
            raise ValueError(f"(num_heads, head_dim): no {self.arch} {design!r} kernel for ({problem.heads}, "
                             f"{problem.head_dim}); built: {sorted(self.supported_shapes(design))}")
        if tunables.block_m and (tunables.block_m, 1) not in instances:
            raise ValueError(f"block_m: expected 0 (heuristic) or one of {sorted({bm for bm, _ in instances})} for "
                             f"heads={problem.heads}, head_dim={problem.head_dim}, got {tunables.block_m}")
        if not 0 <= tunables.num_warps <= MAX_WARPS:
            raise ValueError(f"num_warps: expected 0 (heuristic) or 1..{MAX_WARPS}, got {tunables.num_warps}")
        if not 0 <= tunables.split_n <= MAX_SPLIT_N:
            raise ValueError(f"split_n: expected 0 (heuristic) or 1..{MAX_SPLIT_N}, got {tunables.split_n}")
        if tunables.unroll2 and design != "seed":
            raise ValueError(f"unroll2: expected None or False for design {design!r}, whose loop always keeps the "
                             f"next tile in flight (unroll2 selects the seed design's two-tile loop), got True")
        cfg = self.choose(problem, tunables, compute_units)
        # The MFMA-reduce designs have one instance per BLOCK_M (their loop always walks two tiles).
        key = (cfg["block_m"], 2 if cfg["unroll2"] and design == "seed" else 1)
        if key not in instances:
            raise ValueError(f"unroll2: expected None or False at block_m={cfg['block_m']}, heads={problem.heads}, "
                             f"head_dim={problem.head_dim} (that instantiation is not built: it spills), got True")
        entry = instances[key]
        cfg = {**cfg, "design": design, "fp8_format": problem.fp8_format}
        flags = (FLAG_CLEAN_LOGITS if problem.clean_logits else 0) | (FLAG_REVERSE_ROWS if cfg["reverse_rows"] else 0)
        values = {
            "q": pointers.q, "k": pointers.k, "kv_scale": pointers.kv_scale, "weights": pointers.weights,
            "cu_seqlen_ks": pointers.cu_seqlen_ks, "cu_seqlen_ke": pointers.cu_seqlen_ke, "out": pointers.out,
            "out_row_stride": problem.out_row_stride, "M": problem.M, "N": problem.N,
            "split_n": cfg["split_n"], "num_warps": cfg["num_warps"], "flags": flags,
        }
        return LaunchPlan(
            symbol=entry["symbol"],
            grid=(-(-problem.M // cfg["block_m"]), cfg["split_n"], 1),
            block=(WAVE * cfg["num_warps"], 1, 1),
            kernargs=pack_kernargs(entry["args"], values, entry["kernarg_size"]),
            config=cfg,
        )

    def supported_shapes(self, design: str = "mr") -> set[tuple[int, int]]:
        return {(e["params"]["heads"], e["params"]["head_dim"]) for e in self.target["kernels"].values()
                if e["params"]["design"] == design}
