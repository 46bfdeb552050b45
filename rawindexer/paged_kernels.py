"""The one declaration of the fp8_paged_mqa_logits (decode) kernels: per target, its source, code object,
kernel-argument layout and the instances built. build.py, the manifest, the dispatch and the tests import
this module; nothing else names a paged symbol. (Shaped as an entry of the registry issue 13 asks for:
op x target x design x instance.)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

OP = "fp8_paged_mqa_logits"
ROOT = Path(__file__).resolve().parents[1]

HEADS = (32, 64, 128)
HEAD_DIMS = (64, 128)
BLOCK_SIZES = (1, 16, 64)
MAX_NEXT_N = 4
#: bytes of one token in the fused cache beyond its D key bytes: its float32 scale
SCALE_BYTES = 4

# Kernel flags (must match the enum in the kernel sources)
FLAG_CLEAN_LOGITS = 1
FLAG_CONTEXT_LENS_2D = 2

#: Explicit kernel arguments in order, (name, bytes); the build checks the code object against it.
KERNEL_ARGS: list[tuple[str, int]] = [
    ("q", 8), ("kv_cache", 8), ("weights", 8), ("context_lens", 8), ("block_table", 8), ("out", 8),
    ("out_row_stride", 8), ("next_n", 4), ("max_context_len", 4), ("max_blocks", 4), ("split_n", 4),
    ("num_warps", 4), ("flags", 4),
]


@dataclass(frozen=True)
class PagedInstance:
    """One compiled kernel: a (heads, head_dim, block_size) instantiation of a target's design."""

    heads: int
    head_dim: int
    block_size: int

    @property
    def params(self) -> dict:
        return {"heads": self.heads, "head_dim": self.head_dim, "block_size": self.block_size}


@dataclass(frozen=True)
class PagedTarget:
    """One target's kernel source and the instances built from it."""

    arch: str
    #: the kernel body in a few words (the manifest's target-level "design"; the registry's name of the design
    #: whose symbols carry no suffix, and every design's summary)
    summary: str
    source: Path
    code_object: str
    instances: tuple[PagedInstance, ...]
    #: kernel symbols are f"{symbol_prefix}_h{heads}_d{head_dim}_bs{block_size}" + f"_{design}" (if any)
    symbol_prefix: str = OP
    #: designs built from this source for every instance (symbol suffixes); the first is the default
    designs: tuple[str, ...] = ("",)
    #: the macro the source expands over the instance list
    instance_macro: str = "PAGED_INSTANCES"
    #: bytes of shared memory per workgroup beyond Q and weights (sm_90a: the cp.async ring), by head_dim
    ring_bytes: dict | None = None
    #: fp8 format of q / the cache -> the design that reads it (None: e4m3fn only, any design)
    format_designs: dict | None = None
    #: the macro the source expands over the instance list of the e4m3fn-on-fnuz design ("fn")
    fn_instance_macro: str = "PAGED_FN_INSTANCES"
    #: one kernel per next_n in the code object (symbol + f"_n{next_n}"), each with its own register
    #: allocation; the manifest keeps one entry per symbol, with per-next_n resources
    per_next_n: bool = False
    #: design -> the block sizes it is built for (absent: every instance's)
    design_block_sizes: dict | None = None
    #: design -> the macro X(H, D) its instances expand (absent: instance_macro, X(H, D, BS))
    design_instance_macros: dict | None = None
    #: design -> kernel arguments after KERNEL_ARGS, (name, bytes) (absent: none)
    design_extra_args: dict | None = None
    #: design -> threads per block (absent: SM90_THREADS)
    design_threads: dict | None = None

    def instances_of(self, design: str) -> tuple[PagedInstance, ...]:
        """The instances ``design`` is built for."""
        sizes = (self.design_block_sizes or {}).get(design)
        return self.instances if sizes is None else tuple(i for i in self.instances if i.block_size in sizes)

    def kernel_args(self, design: str) -> list[tuple[str, int]]:
        return KERNEL_ARGS + list((self.design_extra_args or {}).get(design, ()))

    def threads(self, design: str) -> int:
        return (self.design_threads or {}).get(design, SM90_THREADS)

    def symbol(self, inst: PagedInstance, design: str = "") -> str:
        base = f"{self.symbol_prefix}_h{inst.heads}_d{inst.head_dim}_bs{inst.block_size}"
        return f"{base}_{design}" if design else base

    def launch_symbol(self, symbol: str, next_n: int) -> str:
        """The code object's kernel for a manifest ``symbol`` at ``next_n``."""
        return f"{symbol}_n{next_n}" if self.per_next_n else symbol

    @property
    def default_design(self) -> str:
        return self.designs[0]


#: sm_90a kernel constants (STAGES, TILE in kernels/fp8_paged_mqa_logits_sm90.cu)
SM90_STAGES = 4
SM90_TILE = 64
SM90_THREADS = 128
SM90_K_PAD = 16  # bytes of padding per key row of the ring
#: design "tma" (kernels/sm90/paged_tma.cuh): PAGED_TMA_STAGES, one consumer warpgroup + one producer warp, the
#: kernel aligns its shared memory to 1024 bytes itself, the cache's tensor map is one extra 128-byte argument
SM90_TMA_STAGES = 4
SM90_TMA_THREADS = 160
#: the four-warpgroup block (design "tma4" at next_n x H = 96 / 128, and the PAGED_TMA_WG4 experiment form of "tma";
#: kernels/sm90/paged_tma_wg4.cuh): 640 threads, four rings of PAGED_TMA_WG4_STAGES slots, two Q / weight buffers
SM90_TMA_WG4_STAGES = 4
#: the designs whose block is SM90_TMA_THREADS per consumer warpgroup (a producer warp each) and whose shared memory
#: follows sm90_shared_bytes's TMA layout
SM90_TMA_DESIGNS = ("tma", "tma4")
SM90_TMA_ALIGN = 1024
SM90_TMA_BLOCK_SIZE = 64
TENSOR_MAP_ARG = ("kv_map", 128)

ALL_INSTANCES = tuple(PagedInstance(h, d, bs) for h in HEADS for d in HEAD_DIMS for bs in BLOCK_SIZES)

TARGETS: dict[str, PagedTarget] = {
    "gfx950": PagedTarget(
        arch="gfx950", summary="lds_q_valu_reduce", source=ROOT / "kernels" / "fp8_paged_mqa_logits.hip",
        code_object=f"{OP}.gfx950.hsaco", instances=ALL_INSTANCES),
    # gfx942 (MI300X / MI325X): the same source through kernels/target.h; "" reads e4m3fnuz (the MFMA's
    # format), "fn" reads e4m3fn bytes in place (patched where staged / loaded, weights x 4)
    "gfx942": PagedTarget(
        arch="gfx942", summary="lds_q_valu_reduce", source=ROOT / "kernels" / "fp8_paged_mqa_logits.hip",
        code_object=f"{OP}.gfx942.hsaco", instances=ALL_INSTANCES, designs=("", "fn"),
        format_designs={"e4m3fnuz": "", "e4m3fn": "fn"}),
    "sm_90a": PagedTarget(
        arch="sm_90a", summary="cp_async_ring_wgmma_ss", source=ROOT / "kernels" / "fp8_paged_mqa_logits_sm90.cu",
        code_object=f"{OP}.sm90a.cubin", instances=ALL_INSTANCES, symbol_prefix=f"{OP}_sm90",
        # f16: the score wgmma on exactly converted fp8 values (fp32-accurate accumulation: the 1e-5 gate);
        # fp8: the e4m3 wgmma (twice the tensor rate; Hopper's fp8 accumulation keeps fewer bits)
        # tma: block size 64 only, a producer warp streaming whole cache blocks by TMA, SS-form e4m3 wgmma
        # (the fp8 design's numerics)
        # auto (the default, no kernels of its own): tma where it is built (block size 64), tma4 instead at next_n x H
        # = 96 / 128 on batches of >= 16 K tiles, else f16 (dispatch/paged_sm90.py; measured, docs/PAGED.md "Call 3",
        # "Session 19"; numerics, docs/NUMERICS.md)
        # tma4 (session 18): at next_n x H = 96 / 128 one 640-thread block per SM, four consumer warpgroups on a
        # balanced persistent schedule (kernels/sm90/paged_tma_wg4.cuh); `batch` after the map
        designs=("auto", "f16", "fp8", "tma", "tma4"), per_next_n=True,
        ring_bytes={d: SM90_STAGES * SM90_TILE * (d + SM90_K_PAD + SCALE_BYTES) for d in HEAD_DIMS},
        design_block_sizes={"auto": (), "tma": (SM90_TMA_BLOCK_SIZE,), "tma4": (SM90_TMA_BLOCK_SIZE,)},
        design_instance_macros={"tma": "PAGED_TMA_INSTANCES", "tma4": "PAGED_TMA4_INSTANCES"},
        design_extra_args={"tma": (TENSOR_MAP_ARG,), "tma4": (TENSOR_MAP_ARG, ("batch", 4))},
        design_threads={"tma": SM90_TMA_THREADS, "tma4": SM90_TMA_THREADS}),
}


def dynamic_lds_bytes(heads: int, head_dim: int, next_n: int) -> int:
    """gfx950: LDS one workgroup needs: Q rows padded to head_dim + 16 bytes, then float32 weights."""
    return next_n * heads * (head_dim + 16) + next_n * heads * 4


#: the widest wgmma (its N = query rows x heads)
SM90_MAX_WGMMA_N = 256


def sm90_q_rows(heads: int, next_n: int) -> int:
    """sm_90a: query rows of Q staged: next_n, rounded up to whole wgmmas of at most SM90_MAX_WGMMA_N columns
    (H = 128, next_n = 3: two wgmmas of two rows, the fourth row zero)."""
    per_mma = next_n if next_n * heads <= SM90_MAX_WGMMA_N else SM90_MAX_WGMMA_N // heads
    return -(-next_n // per_mma) * per_mma


def sm90_shared_bytes(heads: int, head_dim: int, next_n: int, design: str = "f16", groups: int = 1) -> int:
    """sm_90a: dynamic shared memory of one block: the K/scale ring, then Q (fp8 or f16) and weights ("tma": the
    swizzled key ring, Q, scales, weights, 2 mbarriers per stage and the alignment slack; ``groups`` = 4: the
    four-warpgroup block, kernels/sm90/paged_tma_wg4.cuh, four rings and two Q / weight buffers)."""
    q_bytes = 2 if design == "f16" else 1
    rows = sm90_q_rows(heads, next_n)
    if design in SM90_TMA_DESIGNS:
        stages = SM90_TMA_WG4_STAGES if groups > 1 else SM90_TMA_STAGES
        q_buffers = 2 if groups > 1 else 1
        return (groups * stages * SM90_TILE * (head_dim + SCALE_BYTES) + q_buffers * rows * heads * (head_dim + 4)
                + 16 * groups * stages + SM90_TMA_ALIGN)
    return TARGETS["sm_90a"].ring_bytes[head_dim] + rows * heads * head_dim * q_bytes + rows * heads * 4
