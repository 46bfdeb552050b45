"""Load a gfx950 or gfx942 code object, compile its instructions to closures, and execute launches.

One :class:`Emulator` per code object. ``launch`` runs the whole grid: workgroups one after another,
the waves of a workgroup round-robin, each wave running until ``s_barrier`` or ``s_endpgm``. A
barrier releases when every wave of the workgroup that has not ended waits at one. With
``strict_barrier`` (default) a barrier that some waves of the workgroup can no longer reach because
they ended raises :class:`BarrierDeadlock` (hardware would release it; in HIP/Triton source this is
a divergent ``__syncthreads`` and almost always a bug).
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..codeobject import CodeObject
from .decoder import Instruction, decode_one
from .errors import BarrierDeadlock, DecodeError, EmulatorError, InstructionLimit
from .memory import Memory
from .ops_lds import build_ds
from .ops_mfma import build_mfma
from .ops_salu import BARRIER, ENDPGM, build_sop1, build_sop2, build_sopc, build_sopk, build_sopp
from .ops_valu import build_valu
from .ops_vmem import build_smem, build_vmem
from .state import N_LANES, Wave
from .stats import N_COUNTERS, LaunchStats
from .targets import Target, target_of

RUNNING, AT_BARRIER, ENDED = 0, 1, 2

_BUILDERS: dict[str, Callable] = {
    "SOP1": build_sop1, "SOP2": build_sop2, "SOPC": build_sopc, "SOPK": build_sopk, "SOPP": build_sopp,
    "VOP1": build_valu, "VOP2": build_valu, "VOPC": build_valu, "VOP3": build_valu, "VOP3B": build_valu,
    "VOP3C": build_valu, "SMEM": build_smem, "GLOBAL": build_vmem, "FLAT": build_vmem, "MUBUF": build_vmem,
    "SCRATCH": build_vmem, "DS": build_ds, "VOP3PX2": build_mfma,
}


def _build_vop3p(inst: Instruction, ctx) -> Callable:
    if "mfma" in inst.name:
        return build_mfma(inst, ctx)
    return build_valu(inst, ctx)


_BUILDERS["VOP3P"] = _build_vop3p


def _raiser(inst: Instruction, message: str) -> Callable:
    def run(w):
        raise DecodeError(f"{message} (wave {w.wave_id} of workgroup {w.workgroup})")
    return run


@dataclass
class _Ctx:
    """What instruction builders may capture: the kernel's register layout, the memory and the
    target (whose fp8 formats the fp8 instructions read)."""

    accum_offset: int
    memory: Memory
    target: Target
    hwregs: dict = field(default_factory=dict)

    def hwreg(self, w, hw_id: int) -> int:
        if hw_id == 4:  # HW_REG_HW_ID: wave id in the low bits is enough for programs that read it
            return w.wave_id & 0xF
        return self.hwregs.get(hw_id, 0)

    def set_hwreg(self, w, hw_id: int, value: int) -> None:
        self.hwregs[hw_id] = value & 0xFFFFFFFF


class Program:
    """The compiled instructions of one kernel: pc -> (closure, next pc, slot). Compiled lazily, so
    only reachable code is decoded and compiled (calls into other functions of .text work too)."""

    def __init__(self, code: CodeObject, kernel: str, memory: Memory, target: Target) -> None:
        self.code = code
        self.kernel = kernel
        self.info = code.kernels[kernel]
        self.ctx = _Ctx(self.info.descriptor.accum_offset, memory, target)
        self.text = code.section(".text")
        self.entries: dict[int, tuple] = {}
        self.insts: list[Instruction] = []
        self.counts: list[int] = []

    def compile_at(self, pc: int) -> tuple:
        t = self.text
        if not (t.addr <= pc < t.addr + t.size):
            raise EmulatorError(f"{self.kernel}: jump to 0x{pc:x}, outside .text [0x{t.addr:x}, 0x{t.addr + t.size:x})")
        inst = decode_one(t.data, pc - t.addr, pc)
        if inst.fmt == "UNKNOWN":
            fn = _raiser(inst, f"unknown instruction at 0x{pc:x}: encoding {inst.encoding}")
        else:
            builder = _BUILDERS.get(inst.fmt)
            try:
                if builder is None:
                    raise DecodeError(f"unimplemented format {inst.fmt}: {inst}")
                fn = builder(inst, self.ctx)
            except DecodeError as e:
                fn = _raiser(inst, f"{e} -- at 0x{pc:x}, encoding {inst.encoding}")
        entry = (fn, pc + inst.size, len(self.insts))
        self.insts.append(inst)
        self.counts.append(0)
        self.entries[pc] = entry
        return entry


def _pack_ids(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    return (x | (y << 10) | (z << 20)).astype(np.uint32)


class Emulator:
    """Execute the kernels of one gfx950 or gfx942 code object on the CPU (``target``: which, read
    from the code object).

    ``Emulator(image).launch(kernel, grid, block, kernargs, buffers)`` -- see the package docstring.
    """

    def __init__(self, image: bytes, memory: Memory | None = None, *, strict_barrier: bool = True,
                 max_instructions_per_wave: int = 50_000_000) -> None:
        self.code = CodeObject(image)
        self.target = target_of(self.code)
        self.memory = memory if memory is not None else Memory()
        self.strict_barrier = strict_barrier
        self.max_instructions_per_wave = max_instructions_per_wave
        self._programs: dict[str, Program] = {}
        self.last_stats: LaunchStats | None = None

    @property
    def kernels(self) -> list[str]:
        return sorted(self.code.kernels)

    def program(self, kernel: str) -> Program:
        p = self._programs.get(kernel)
        if p is None:
            if kernel not in self.code.kernels:
                raise KeyError(f"no kernel {kernel!r} in the code object (has {', '.join(self.kernels)})")
            p = self._programs[kernel] = Program(self.code, kernel, self.memory, self.target)
        return p

    # ------------------------------------------------------------------------------------------------
    def launch(self, kernel: str, grid: Sequence[int], block: Sequence[int], kernargs: bytes,
               buffers: Sequence = (), shared_mem: int = 0) -> LaunchStats:
        """Run ``kernel`` over ``grid`` workgroups of ``block`` work-items.

        ``kernargs``: the packed kernarg segment (copied into a read-only span). ``buffers``: spans the
        launch may touch, each ``(ptr, nbytes, writable)`` or an object with those attributes
        (``BufferSpan``); they are registered for this launch only. Returns (and keeps in
        ``last_stats``) the launch statistics.
        """
        grid = tuple(int(g) for g in (tuple(grid) + (1, 1))[:3])
        block = tuple(int(b) for b in (tuple(block) + (1, 1))[:3])
        prog = self.program(kernel)
        info = prog.info
        kd = info.descriptor
        if any(g <= 0 for g in grid) or any(b <= 0 for b in block):
            raise ValueError(f"empty launch grid={grid} block={block}")
        threads = block[0] * block[1] * block[2]
        limit = info.metadata.get(".max_flat_workgroup_size", 1024)
        if threads > limit:
            raise EmulatorError(f"{kernel}: block {block} has {threads} work-items > max_flat_workgroup_size {limit}")
        mem = self.memory
        saved = mem.spans
        stats = LaunchStats(kernel=kernel, grid=grid, block=block)
        try:
            size = max(len(kernargs), kd.kernarg_size)
            kbuf = np.zeros(-(-max(size, 4) // 64) * 64, np.uint8)  # s_load_dwordx16 may read whole 64 B lines
            kbuf[:len(kernargs)] = np.frombuffer(bytes(kernargs), np.uint8)
            mem.register(kbuf.ctypes.data, kbuf.nbytes, False, "kernargs")
            for b in buffers:
                ptr, nbytes, writable = (b if isinstance(b, tuple) else (b.ptr, b.nbytes, b.writable))
                if nbytes:
                    mem.register(int(ptr), int(nbytes), bool(writable), f"buffer@0x{int(ptr):x}")
            dispatch = self._dispatch_packet(grid, block, kd, kbuf.ctypes.data)
            mem.register(dispatch.ctypes.data, dispatch.nbytes, False, "dispatch_packet")
            t0, c0 = time.perf_counter(), time.process_time()
            prog.counts[:] = [0] * len(prog.counts)
            counters = [0] * N_COUNTERS
            lds_size = kd.group_segment_fixed_size + int(shared_mem)
            n_waves = -(-threads // N_LANES)
            for gz in range(grid[2]):
                for gy in range(grid[1]):
                    for gx in range(grid[0]):
                        lds = np.zeros(lds_size, np.uint8)
                        waves = [self._make_wave(prog, k, (gx, gy, gz), block, threads, lds, counters,
                                                 kbuf.ctypes.data, dispatch.ctypes.data)
                                 for k in range(n_waves)]
                        self._run_workgroup(prog, waves)
                        stats.waves += n_waves
            stats.seconds = time.perf_counter() - t0
            stats.cpu_seconds = time.process_time() - c0
            stats.merge_counts(prog.insts, prog.counts, counters)
        finally:
            mem.clear()
            for s in saved:
                mem.register(s.ptr, s.nbytes, s.writable, s.name)
        self.last_stats = stats
        return stats

    # ------------------------------------------------------------------------------------------------
    @staticmethod
    def _dispatch_packet(grid, block, kd, kernarg_addr: int) -> np.ndarray:
        """An hsa_kernel_dispatch_packet_t for kernels that read the dispatch pointer."""
        pkt = bytearray(64)
        dims = 3 if grid[2] > 1 or block[2] > 1 else (2 if grid[1] > 1 or block[1] > 1 else 1)
        struct.pack_into("<HHHHHH", pkt, 0, 0, dims, block[0], block[1], block[2], 0)
        struct.pack_into("<III", pkt, 12, grid[0] * block[0], grid[1] * block[1], grid[2] * block[2])
        struct.pack_into("<II", pkt, 24, kd.private_segment_fixed_size, kd.group_segment_fixed_size)
        struct.pack_into("<Q", pkt, 40, kernarg_addr)
        return np.frombuffer(bytes(pkt), np.uint8).copy()

    def _make_wave(self, prog: Program, k: int, wg: tuple, block: tuple, threads: int, lds: np.ndarray,
                   counters: list, kernarg_addr: int, dispatch_addr: int) -> Wave:
        kd = prog.info.descriptor
        w = Wave(k, lds, counters, wg)
        s = w.s
        flags = kd.user_sgpr_flags
        i = 0
        if flags["private_segment_buffer"]:
            i += 4
        if flags["dispatch_ptr"]:
            s[i], s[i + 1] = dispatch_addr & 0xFFFFFFFF, dispatch_addr >> 32
            i += 2
        if flags["queue_ptr"]:
            i += 2
        if flags["kernarg_segment_ptr"]:
            s[i], s[i + 1] = kernarg_addr & 0xFFFFFFFF, kernarg_addr >> 32
            i += 2
        if flags["dispatch_id"]:
            i += 2
        if flags["flat_scratch_init"]:
            i += 2
        if flags["private_segment_size"]:
            i += 1
        preload = kd.kernarg_preload & 0x7F
        if preload:
            off = (kd.kernarg_preload >> 7) * 4
            vals = self.memory.read_dwords(kernarg_addr + off, preload, (prog.info.entry_address, "kernarg preload"))
            s[i:i + preload] = vals
            i += preload
        i = kd.user_sgpr_count
        r2 = kd.compute_pgm_rsrc2
        for axis, on in enumerate(kd.enable_sgpr_workgroup_id):
            if on:
                s[i] = wg[axis]
                i += 1
        if r2 >> 10 & 1:  # workgroup info
            i += 1
        # work-item ids of this wave's lanes
        t = np.arange(k * N_LANES, (k + 1) * N_LANES)
        x = t % block[0]
        y = (t // block[0]) % block[1]
        z = t // (block[0] * block[1])
        ids = kd.enable_vgpr_workitem_id
        w.v[:, 0] = _pack_ids(x, y if ids >= 1 else 0 * y, z if ids >= 2 else 0 * z)
        live = int(min(N_LANES, threads - k * N_LANES))
        w.set_exec((1 << live) - 1)
        w.pc = prog.info.entry_address
        return w

    def _run_workgroup(self, prog: Program, waves: list[Wave]) -> None:
        while True:
            for w in waves:
                if w.state == RUNNING:
                    w.state = AT_BARRIER if self._run_wave(prog, w) == BARRIER else ENDED
            waiting = [w for w in waves if w.state == AT_BARRIER]
            if not waiting:
                return
            ended = [w for w in waves if w.state == ENDED]
            if ended and self.strict_barrier:
                raise BarrierDeadlock(
                    f"{prog.kernel}, workgroup {waves[0].workgroup}: waves "
                    f"{[w.wave_id for w in waiting]} wait at s_barrier (pc "
                    f"{sorted({hex(w.pc) for w in waiting})}) but waves {[w.wave_id for w in ended]} have ended "
                    "and can never arrive")
            for w in waiting:
                w.state = RUNNING

    def _run_wave(self, prog: Program, w: Wave) -> int:
        """Execute ``w`` until it reaches s_barrier or s_endpgm; returns BARRIER or ENDPGM."""
        entries = prog.entries
        counts = prog.counts
        pc = w.pc
        n = w.executed
        limit = self.max_instructions_per_wave
        try:
            while True:
                e = entries.get(pc)
                if e is None:
                    e = prog.compile_at(pc)
                    counts = prog.counts
                fn, npc, k = e
                counts[k] += 1
                n += 1
                r = fn(w)
                if r is None:
                    pc = npc
                elif r >= 0:
                    pc = r
                    if n > limit:
                        raise InstructionLimit(f"{prog.kernel}: wave {w.wave_id} of workgroup {w.workgroup} "
                                               f"executed more than {limit} instructions (endless loop?)")
                else:
                    w.pc = npc
                    w.executed = n
                    return r
        except EmulatorError:
            w.pc = pc
            raise
        except Exception as exc:  # a bug in an op or an unexpected operand: name the instruction
            inst = prog.insts[entries[pc][2]] if pc in entries else None
            raise EmulatorError(f"{prog.kernel}: {type(exc).__name__}: {exc} while executing {inst} "
                                f"(wave {w.wave_id}, workgroup {w.workgroup})") from exc
