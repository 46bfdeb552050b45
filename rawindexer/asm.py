"""Reading the assembly listing that the build writes beside the code object (same compile).

Used by the static checks and by the profile: split the listing per kernel, find the steady-state
loop (the innermost loop that issues MFMAs), and classify its instructions.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_LABEL = re.compile(r"^(\.LBB\d+_\d+):")
_BRANCH = re.compile(r"^\s+s_(?:cbranch_\w+|branch)\s+(\.LBB\d+_\d+)")
_INSN = re.compile(r"^\s+([a-z][a-z0-9_]*)\b(.*)$")


def split_functions(asm: str) -> dict[str, list[str]]:
    """{kernel symbol: its lines, from its label to .Lfunc_end}."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_][\w]*):", line)
        if m and not line.startswith("."):
            current = out.setdefault(m.group(1), [])
            continue
        if current is not None:
            if line.startswith(".Lfunc_end"):
                current = None
                continue
            current.append(line)
    return out


@dataclass(frozen=True)
class Insn:
    mnemonic: str
    operands: str

    @property
    def klass(self) -> str:
        return classify(self.mnemonic)


def instructions(lines: list[str]) -> list[Insn]:
    out = []
    for line in lines:
        line = line.split(";")[0].rstrip()
        m = _INSN.match(line)
        if m and not m.group(1).startswith("."):
            out.append(Insn(m.group(1), m.group(2).strip()))
    return out


def classify(mnemonic: str) -> str:
    if "mfma" in mnemonic:
        return "MFMA"
    if mnemonic.startswith(("s_waitcnt", "s_nop")):
        return "wait"
    if mnemonic.startswith(("s_cbranch", "s_branch", "s_setpc", "s_swappc", "s_endpgm")):
        return "branch"
    if mnemonic.startswith(("s_load", "s_buffer_load", "s_store")):
        return "SMEM"
    if mnemonic.startswith("s_"):
        return "SALU"
    if mnemonic.startswith(("global_", "buffer_", "flat_", "scratch_")):
        return "VMEM"
    if mnemonic.startswith("ds_"):
        return "LDS"
    if mnemonic.startswith("v_"):
        return "VALU"
    return "other"


def steady_state_loop(lines: list[str]) -> list[str]:
    """Lines of the innermost loop (a label with a later branch back to it) that contains an MFMA."""
    labels: dict[str, int] = {}
    loops: list[tuple[int, int]] = []
    for idx, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = idx
        b = _BRANCH.match(line)
        if b and b.group(1) in labels:
            loops.append((labels[b.group(1)], idx))
    with_mfma = [(a, b) for a, b in loops if any("mfma" in ln for ln in lines[a : b + 1])]
    if not with_mfma:
        raise ValueError("no loop containing an MFMA")
    a, b = min(with_mfma, key=lambda ab: ab[1] - ab[0])
    return lines[a : b + 1]


def wait_states(insns: list[Insn]) -> int:
    """s_nop N stalls N+1 cycles: the hazard padding the compiler (or inline asm) inserted."""
    total = 0
    for insn in insns:
        if insn.mnemonic == "s_nop":
            total += int(insn.operands.split()[0], 0) + 1
    return total


def mix(insns: list[Insn]) -> Counter:
    return Counter(i.klass for i in insns)


# ---------------------------------------------------------------------------------------------------
# Loop structure from LLVM's own annotations, and the steady-state path
# ---------------------------------------------------------------------------------------------------
_BLOCK = re.compile(r"^(?:(\.LBB\d+_\d+):|; %bb\.(\d+):)")
_IN_LOOP = re.compile(r";\s+in Loop: Header=(BB\d+_\d+) Depth=(\d+)")
_HEADER = re.compile(r"; =>This (?:Inner )?Loop Header: Depth=(\d+)")
#: Blocks the kernel marks (an empty inline asm comment) as off the steady state: edge-tile stores.
EDGE_MARKER = "rawindexer: edge tile"


@dataclass
class Block:
    name: str
    lines: list[str]
    loop: str | None = None  # header block name (BBx_y) of the innermost loop holding this block
    depth: int = 0


def blocks(lines: list[str]) -> list[Block]:
    """Basic blocks in listing order, each tagged with the innermost loop LLVM says it belongs to."""
    out: list[Block] = [Block("entry", [])]
    for line in lines:
        m = _BLOCK.match(line)
        if m:
            # ".LBB0_33" is referred to as "BB0_33" in LLVM's loop annotations
            out.append(Block(m.group(1)[2:] if m.group(1) else f"bb.{m.group(2)}", []))
        blk = out[-1]
        blk.lines.append(line)
        h = _HEADER.search(line)
        if h and blk.loop is None:
            blk.loop, blk.depth = blk.name, int(h.group(1))
        il = _IN_LOOP.search(line)
        if il and blk.loop is None:
            blk.loop, blk.depth = il.group(1), int(il.group(2))
    return out


def loop_blocks(lines: list[str]) -> list[Block]:
    """Blocks of the innermost loop that issues MFMAs (the most MFMAs if several), listing order
    rotated to start at the loop header. Unlike :func:`steady_state_loop` this follows LLVM's loop
    membership, so blocks the layout put after the latch are included."""
    bl = blocks(lines)
    loops: dict[str, list[Block]] = {}
    for b in bl:
        if b.loop:
            loops.setdefault(b.loop, []).append(b)

    def n_mfma(bs: list[Block]) -> int:
        return sum(1 for b in bs for i in instructions(b.lines) if "mfma" in i.mnemonic)

    cands = [(max(b.depth for b in bs), n_mfma(bs), h) for h, bs in loops.items() if n_mfma(bs)]
    if not cands:
        raise ValueError("no loop containing an MFMA")
    _, _, header = max(cands)
    bs = loops[header]
    start = next((k for k, b in enumerate(bs) if b.name == header), 0)
    return bs[start:] + bs[:start]


def steady_state(lines: list[str]) -> list[Insn]:
    """Instructions of the MFMA loop minus the blocks the kernel marks as edge-tile work."""
    return [i for b in loop_blocks(lines) if not any(EDGE_MARKER in ln for ln in b.lines)
            for i in instructions(b.lines)]


# ---------------------------------------------------------------------------------------------------
# MFMA cost model. Pass counts from LLVM's SISchedule.td, SchedModel SIDPGFX950FullSpeedModel
# (the gfx950 model): 16x16x32 (bf16, fp8) Write4PassMAI; 32x32x16 (bf16, fp8) Write8PassMAI;
# 16x16x128_f8f6f4 / 32x32x64_f8f6f4 Write8PassMAI / Write16PassMAI when either operand format is
# fp8/bf8 (cbsz/blgp 0 or 1: PredIsF8_MFMA_SCALE), half that for fp6/fp4. 1 pass = 4 cycles.
# gfx942 (SIDPGFX940FullSpeedModel): the fp8 MFMAs it has take the same passes as on gfx950 (32x32x16
# fp8 8, 16x16x32 fp8 4; the compiler's own hazard wait states in build/fp8_mqa_logits.gfx942.s agree:
# 11 = 8 passes + 3 between an XDL MFMA and the VALU reading it), and its bf16 "_1k" forms 32x32x8 8,
# 16x16x16 4.
# ---------------------------------------------------------------------------------------------------
MFMA_SHAPES = {  # mnemonic: (M, N, K, passes with fp8 operands)
    "v_mfma_f32_32x32x64_f8f6f4": (32, 32, 64, 16),
    "v_mfma_scale_f32_32x32x64_f8f6f4": (32, 32, 64, 16),
    "v_mfma_f32_16x16x128_f8f6f4": (16, 16, 128, 8),
    "v_mfma_scale_f32_16x16x128_f8f6f4": (16, 16, 128, 8),
    "v_mfma_f32_16x16x32_fp8_fp8": (16, 16, 32, 4),
    "v_mfma_f32_16x16x32_bf16": (16, 16, 32, 4),
    "v_mfma_f32_32x32x16_bf16": (32, 32, 16, 8),
    "v_mfma_f32_32x32x16_fp8_fp8": (32, 32, 16, 8),
    "v_mfma_f32_32x32x8_bf16": (32, 32, 8, 8),
    "v_mfma_f32_16x16x16_bf16": (16, 16, 16, 4),
}


def mfma_cost(insn: Insn) -> tuple[int, int, bool]:
    """(multiply-adds, passes, takes fp8 operands) of one MFMA instruction."""
    m, n, k, passes = MFMA_SHAPES[insn.mnemonic]
    fp8 = any(t in insn.mnemonic for t in ("f8f6f4", "fp8", "bf8"))
    if "f8f6f4" in insn.mnemonic:
        fmts = [int(x) for x in re.findall(r"(?:cbsz|blgp):(\d+)", insn.operands)] or [0]
        if all(f >= 2 for f in fmts):  # fp6/fp4 on both sides
            passes //= 2
    return m * n * k, passes, fp8


@dataclass
class TileProfile:
    """Static numbers of one variant's steady-state tile, read from its assembly."""

    tiles_in_loop: float
    mix: Counter
    valu_per_row_token: float
    mfma_passes_per_row_token: float
    score_passes_per_row_token: float
    reduce_passes_per_row_token: float
    wait_states_per_tile: float
    loads_in_flight_at_first_mfma: int
    loads_before_first_mfma: int
    mfma_mnemonics: Counter


def tile_profile(lines: list[str], heads: int, head_dim: int, block_m: int, tile_n: int = 32) -> TileProfile:
    """Per-tile levers of the steady state: a tile = BLOCK_M rows x ``tile_n`` tokens, counted from the
    fp8 (score) multiply-adds the loop issues, so unrolled loops and ping-pong loops compare."""
    insns = steady_state(lines)
    score_macs = reduce_passes = score_passes = 0
    for i in insns:
        if i.klass == "MFMA":
            macs, passes, fp8 = mfma_cost(i)
            if fp8:
                score_macs += macs
                score_passes += passes
            else:
                reduce_passes += passes
    tiles = score_macs / (block_m * heads * tile_n * head_dim)
    row_tokens = tiles * block_m * tile_n
    mx = mix(insns)
    # Loads this iteration issued before its first MFMA that are still outstanding when that MFMA issues.
    # vmcnt counts loads and stores in issue order, so a wait for vmcnt(n) leaves at most the last n VMEM
    # operations outstanding; the ones before them are complete.
    pending: list[bool] = []  # VMEM ops of this iteration that may be outstanding (True = a load)
    loads = 0
    for i in insns:
        if i.klass == "MFMA":
            break
        if i.klass == "VMEM":
            is_load = "load" in i.mnemonic
            loads += is_load
            pending.append(is_load)
        if i.mnemonic == "s_waitcnt":
            vm = re.search(r"vmcnt\((\d+)\)", i.operands)
            if vm:
                n = int(vm.group(1))
                pending = pending[len(pending) - n:] if n < len(pending) else pending
    in_flight = sum(pending)
    return TileProfile(
        tiles_in_loop=tiles, mix=mx,
        valu_per_row_token=mx["VALU"] / row_tokens,
        mfma_passes_per_row_token=(score_passes + reduce_passes) / row_tokens,
        score_passes_per_row_token=score_passes / row_tokens,
        reduce_passes_per_row_token=reduce_passes / row_tokens,
        wait_states_per_tile=wait_states(insns) / tiles,
        loads_in_flight_at_first_mfma=in_flight, loads_before_first_mfma=loads,
        mfma_mnemonics=Counter(i.mnemonic for i in insns if i.klass == "MFMA"),
    )
