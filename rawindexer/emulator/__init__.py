"""A gfx950 / gfx942 (AMD CDNA4 / CDNA3, wave64) emulator: executes AMDGPU code objects on the CPU,
instruction by instruction, with memory checking. It is the package's default device when there is no GPU.

The target is read from the code object (``Emulator(...).target``: metadata and ``e_flags``, which must
agree). The two share encodings and semantics except the fp8 formats: gfx950's fp8/bf8 MFMAs and
conversions read OCP e4m3fn / e5m2, gfx942's read e4m3fnuz / e5m2fnuz (:mod:`.targets`, :mod:`.fp8`).

Public API (stable; used by the backend and by tests that run kernels we did not write)::

    from rawindexer.emulator import Emulator, pack_kernargs

    emu = Emulator(hsaco_bytes)                       # any gfx950/gfx942 code object (clang/hipcc/Triton)
    args = pack_kernargs(emu.code.kernels[name], [x, y, n], grid, block)   # from the ELF metadata
    stats = emu.launch(name, grid, block, args,
                       buffers=[(x.ctypes.data, x.nbytes, False), (y.ctypes.data, y.nbytes, True)],
                       shared_mem=0)                  # dynamic LDS bytes
    print(stats)                                      # per-class / per-opcode counts, bytes moved

* Device addresses are host addresses: pass numpy (or torch-CPU / JAX-CPU) buffers zero-copy.
  ``buffers`` lists what the launch may touch, ``(ptr, nbytes, writable)`` or ``BufferSpan``; every
  vector/scalar access outside them (or a store into a read-only one) raises :class:`MemoryFault`
  naming the instruction, lane and address. Kernargs are copied into a read-only span.
* ``Emulator(..., strict_barrier=True)`` raises :class:`BarrierDeadlock` when waves of a workgroup
  wait at ``s_barrier`` that ended waves can no longer reach.
* Unknown or unimplemented instructions raise :class:`DecodeError` naming address and encoding when
  they are executed. MFMA and ``v_permlane*_swap`` raise :class:`ExecMaskError` unless EXEC is all ones.
* ``rawindexer.emulator.listing.compare_with_listing`` checks the decoder against the assembly of the
  same compile (``-save-temps``).
* ``python -m rawindexer.emulator.bench`` prints instructions per second on the package kernel.

Numerics: float32 ops are IEEE round-to-nearest-even with denormals (fma correctly rounded);
v_max/v_min follow AMD's NaN/signed-zero rules; MFMA decodes the target's fp8 / bf8 formats exactly, sums all
products of one instruction in float64 and rounds once to float32 (see :mod:`.ops_mfma`).
Transcendentals (v_exp/v_log/v_rcp/v_rsq) are correctly rounded or within 1 ulp of float32, not
bit-identical to the hardware's approximations. Not implemented: scratch (private) memory, LDS DMA,
DPP on compares and on ops outside the plain VALU table, fp6/fp4 MFMA operands, 16-bit float VALU ops and
op_sel on 16-bit ops, ds_read_b96_tr_b6, image/export instructions. Triton-compiled kernels (fp8/bf16
dots with LDS transpose loads, DPP reductions, IEEE division) run: tests/emulator/test_emulator_triton.py, and
for gfx942 (fnuz fp8 and bf16 dots, reductions) tests/emulator/test_emulator_triton_gfx942.py.

Modules: targets (what the code object's target changes), encodings (format layouts as data), decoder (words -> Instruction, reading encodings),
opcodes (tables), state (wave registers), memory (spans, memcheck), operands (operand readers/writers),
ops_salu / ops_valu / ops_vmem / ops_lds / ops_mfma (instruction semantics), numerics (exact float
helpers), stats, launcher (scheduling), kernargs, bench.
"""
from .errors import (BarrierDeadlock, DecodeError, EmulatorError, ExecMaskError, InstructionLimit,
                     MemoryFault)
from .kernargs import pack_kernargs, pointer_of
from .launcher import Emulator
from .memory import Memory
from .stats import LaunchStats

__all__ = ["Emulator", "Memory", "LaunchStats", "pack_kernargs", "pointer_of", "EmulatorError", "DecodeError",
           "MemoryFault", "ExecMaskError", "BarrierDeadlock", "InstructionLimit"]
