"""Scalar ALU (SOP1, SOP2, SOPK, SOPC) and program control (SOPP) on Python ints.

Each ``build_*`` turns one decoded instruction into a closure ``fn(wave) -> None | pc | code``:
None falls through, an int >= 0 is the next PC, ``ENDPGM``/``BARRIER`` end the wave's time slice.
Semantics follow AMD's CDNA4 pseudocode (SCC rules per opcode); values are unsigned 32-bit ints.
"""
from __future__ import annotations

from typing import Callable

from .decoder import Instruction
from .errors import DecodeError, EmulatorError
from .operands import M32, M64, signed32, signed64, sreader, swriter
from .state import EXEC

ENDPGM = -1
BARRIER = -2


def _ovf_add(a: int, b: int, d: int) -> int:
    """Signed overflow of a 32-bit add: operands agree in sign, result differs."""
    return int((a >> 31) == (b >> 31) and (a >> 31) != (d >> 31))


def _ff1(x: int) -> int:
    return (x & -x).bit_length() - 1 if x else -1


def _flbit(x: int, bits: int) -> int:
    return bits - x.bit_length() if x else -1


# SOP2: name -> (bits of S0, bits of S1, bits of D, f(a, b, scc) -> (d, scc or None))
def _sop2_table() -> dict:
    t: dict[str, tuple] = {}
    t["s_add_u32"] = (32, 32, 32, lambda a, b, c: ((a + b) & M32, int(a + b > M32)))
    t["s_sub_u32"] = (32, 32, 32, lambda a, b, c: ((a - b) & M32, int(b > a)))
    t["s_add_i32"] = (32, 32, 32, lambda a, b, c: ((a + b) & M32, _ovf_add(a, b, (a + b) & M32)))
    t["s_sub_i32"] = (32, 32, 32, lambda a, b, c: ((a - b) & M32, _ovf_add(a, (~b) & M32, (a - b) & M32)))
    t["s_addc_u32"] = (32, 32, 32, lambda a, b, c: ((a + b + c) & M32, int(a + b + c > M32)))
    t["s_subb_u32"] = (32, 32, 32, lambda a, b, c: ((a - b - c) & M32, int(b + c > a)))
    t["s_min_i32"] = (32, 32, 32, lambda a, b, c: (a, 1) if signed32(a) < signed32(b) else (b, 0))
    t["s_min_u32"] = (32, 32, 32, lambda a, b, c: (a, 1) if a < b else (b, 0))
    t["s_max_i32"] = (32, 32, 32, lambda a, b, c: (a, 1) if signed32(a) >= signed32(b) else (b, 0))
    t["s_max_u32"] = (32, 32, 32, lambda a, b, c: (a, 1) if a >= b else (b, 0))
    t["s_cselect_b32"] = (32, 32, 32, lambda a, b, c: (a if c else b, None))
    t["s_cselect_b64"] = (64, 64, 64, lambda a, b, c: (a if c else b, None))
    for bits, m in ((32, M32), (64, M64)):
        sfx = f"b{bits}"
        t[f"s_and_{sfx}"] = (bits, bits, bits, lambda a, b, c: (a & b, int(a & b != 0)))
        t[f"s_or_{sfx}"] = (bits, bits, bits, lambda a, b, c: (a | b, int(a | b != 0)))
        t[f"s_xor_{sfx}"] = (bits, bits, bits, lambda a, b, c: (a ^ b, int(a ^ b != 0)))
        t[f"s_andn2_{sfx}"] = (bits, bits, bits, lambda a, b, c, m=m: (a & ~b & m, int(a & ~b & m != 0)))
        t[f"s_orn2_{sfx}"] = (bits, bits, bits, lambda a, b, c, m=m: ((a | ~b) & m, int((a | ~b) & m != 0)))
        t[f"s_nand_{sfx}"] = (bits, bits, bits, lambda a, b, c, m=m: (~(a & b) & m, int(~(a & b) & m != 0)))
        t[f"s_nor_{sfx}"] = (bits, bits, bits, lambda a, b, c, m=m: (~(a | b) & m, int(~(a | b) & m != 0)))
        t[f"s_xnor_{sfx}"] = (bits, bits, bits, lambda a, b, c, m=m: (~(a ^ b) & m, int(~(a ^ b) & m != 0)))
    t["s_lshl_b32"] = (32, 32, 32, lambda a, b, c: ((a << (b & 31)) & M32, int((a << (b & 31)) & M32 != 0)))
    t["s_lshl_b64"] = (64, 32, 64, lambda a, b, c: ((a << (b & 63)) & M64, int((a << (b & 63)) & M64 != 0)))
    t["s_lshr_b32"] = (32, 32, 32, lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0)))
    t["s_lshr_b64"] = (64, 32, 64, lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0)))
    t["s_ashr_i32"] = (32, 32, 32, lambda a, b, c: ((signed32(a) >> (b & 31)) & M32, int(signed32(a) >> (b & 31) != 0)))
    t["s_ashr_i64"] = (64, 32, 64, lambda a, b, c: ((signed64(a) >> (b & 63)) & M64, int(signed64(a) >> (b & 63) != 0)))
    t["s_bfm_b32"] = (32, 32, 32, lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None))
    t["s_bfm_b64"] = (32, 32, 64, lambda a, b, c: ((((1 << (a & 63)) - 1) << (b & 63)) & M64, None))
    t["s_mul_i32"] = (32, 32, 32, lambda a, b, c: ((signed32(a) * signed32(b)) & M32, None))
    t["s_mul_hi_u32"] = (32, 32, 32, lambda a, b, c: ((a * b) >> 32, None))
    t["s_mul_hi_i32"] = (32, 32, 32, lambda a, b, c: (((signed32(a) * signed32(b)) >> 32) & M32, None))

    def bfe_u(a, b, c, bits):
        off, width = b & (bits - 1), (b >> 16) & 0x7F
        d = (a >> off) & ((1 << width) - 1) if width else 0
        return d, int(d != 0)

    def bfe_i(a, b, c, bits):
        off, width = b & (bits - 1), (b >> 16) & 0x7F
        if width == 0:
            return 0, 0
        d = (a >> off) & ((1 << width) - 1)
        if d >> (width - 1) & 1:
            d -= 1 << width
        m = M32 if bits == 32 else M64
        return d & m, int(d != 0)

    t["s_bfe_u32"] = (32, 32, 32, lambda a, b, c: bfe_u(a, b, c, 32))
    t["s_bfe_i32"] = (32, 32, 32, lambda a, b, c: bfe_i(a, b, c, 32))
    t["s_bfe_u64"] = (64, 32, 64, lambda a, b, c: bfe_u(a, b, c, 64))
    t["s_bfe_i64"] = (64, 32, 64, lambda a, b, c: bfe_i(a, b, c, 64))
    t["s_absdiff_i32"] = (32, 32, 32, lambda a, b, c: (abs(signed32(a) - signed32(b)) & M32,
                                                       int(signed32(a) != signed32(b))))
    for k in (1, 2, 3, 4):
        t[f"s_lshl{k}_add_u32"] = (32, 32, 32, lambda a, b, c, k=k: (((a << k) + b) & M32, int((a << k) + b > M32)))
    t["s_pack_ll_b32_b16"] = (32, 32, 32, lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF) << 16, None))
    t["s_pack_lh_b32_b16"] = (32, 32, 32, lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None))
    t["s_pack_hh_b32_b16"] = (32, 32, 32, lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None))
    return t


SOP2_OPS = _sop2_table()


def _sop1_table() -> dict:
    """name -> (bits of S0, bits of D, f(a, w) -> (d, scc or None))."""
    t: dict[str, tuple] = {}
    t["s_mov_b32"] = (32, 32, lambda a, w: (a, None))
    t["s_mov_b64"] = (64, 64, lambda a, w: (a, None))
    t["s_not_b32"] = (32, 32, lambda a, w: (~a & M32, int(~a & M32 != 0)))
    t["s_not_b64"] = (64, 64, lambda a, w: (~a & M64, int(~a & M64 != 0)))
    t["s_brev_b32"] = (32, 32, lambda a, w: (int(f"{a:032b}"[::-1], 2), None))
    t["s_brev_b64"] = (64, 64, lambda a, w: (int(f"{a:064b}"[::-1], 2), None))
    t["s_bcnt0_i32_b32"] = (32, 32, lambda a, w: (32 - a.bit_count(), int(32 - a.bit_count() != 0)))
    t["s_bcnt0_i32_b64"] = (64, 32, lambda a, w: (64 - a.bit_count(), int(64 - a.bit_count() != 0)))
    t["s_bcnt1_i32_b32"] = (32, 32, lambda a, w: (a.bit_count(), int(a != 0)))
    t["s_bcnt1_i32_b64"] = (64, 32, lambda a, w: (a.bit_count(), int(a != 0)))
    t["s_ff0_i32_b32"] = (32, 32, lambda a, w: (_ff1(~a & M32) & M32, None))
    t["s_ff0_i32_b64"] = (64, 32, lambda a, w: (_ff1(~a & M64) & M32, None))
    t["s_ff1_i32_b32"] = (32, 32, lambda a, w: (_ff1(a) & M32, None))
    t["s_ff1_i32_b64"] = (64, 32, lambda a, w: (_ff1(a) & M32, None))
    t["s_flbit_i32_b32"] = (32, 32, lambda a, w: (_flbit(a, 32) & M32, None))
    t["s_flbit_i32_b64"] = (64, 32, lambda a, w: (_flbit(a, 64) & M32, None))
    t["s_sext_i32_i8"] = (32, 32, lambda a, w: ((((a & 0xFF) ^ 0x80) - 0x80) & M32, None))
    t["s_sext_i32_i16"] = (32, 32, lambda a, w: ((((a & 0xFFFF) ^ 0x8000) - 0x8000) & M32, None))
    t["s_abs_i32"] = (32, 32, lambda a, w: (abs(signed32(a)) & M32, int(a != 0)))
    t["s_getpc_b64"] = (32, 64, None)  # handled specially (needs the instruction's address)
    # saveexec family: D = old EXEC; EXEC = f(S0, EXEC); SCC = EXEC != 0
    for name, f in (("and", lambda a, e: a & e), ("or", lambda a, e: a | e), ("xor", lambda a, e: a ^ e),
                    ("andn2", lambda a, e: a & ~e & M64), ("orn2", lambda a, e: (a | ~e) & M64),
                    ("nand", lambda a, e: ~(a & e) & M64), ("nor", lambda a, e: ~(a | e) & M64),
                    ("xnor", lambda a, e: ~(a ^ e) & M64), ("andn1", lambda a, e: ~a & e & M64),
                    ("orn1", lambda a, e: (~a | e) & M64)):
        t[f"s_{name}_saveexec_b64"] = (64, 64, ("saveexec", f))
    t["s_andn1_wrexec_b64"] = (64, 64, ("wrexec", lambda a, e: ~a & e & M64))
    t["s_andn2_wrexec_b64"] = (64, 64, ("wrexec", lambda a, e: a & ~e & M64))
    return t


SOP1_OPS = _sop1_table()

SOPC_OPS = {
    "s_cmp_eq_i32": lambda a, b: a == b, "s_cmp_lg_i32": lambda a, b: a != b,
    "s_cmp_gt_i32": lambda a, b: signed32(a) > signed32(b), "s_cmp_ge_i32": lambda a, b: signed32(a) >= signed32(b),
    "s_cmp_lt_i32": lambda a, b: signed32(a) < signed32(b), "s_cmp_le_i32": lambda a, b: signed32(a) <= signed32(b),
    "s_cmp_eq_u32": lambda a, b: a == b, "s_cmp_lg_u32": lambda a, b: a != b,
    "s_cmp_gt_u32": lambda a, b: a > b, "s_cmp_ge_u32": lambda a, b: a >= b,
    "s_cmp_lt_u32": lambda a, b: a < b, "s_cmp_le_u32": lambda a, b: a <= b,
    "s_bitcmp0_b32": lambda a, b: (a >> (b & 31)) & 1 == 0, "s_bitcmp1_b32": lambda a, b: (a >> (b & 31)) & 1 == 1,
    "s_bitcmp0_b64": lambda a, b: (a >> (b & 63)) & 1 == 0, "s_bitcmp1_b64": lambda a, b: (a >> (b & 63)) & 1 == 1,
    "s_cmp_eq_u64": lambda a, b: a == b, "s_cmp_lg_u64": lambda a, b: a != b,
}
_SOPC_BITS = {"s_bitcmp0_b64": (64, 32), "s_bitcmp1_b64": (64, 32), "s_cmp_eq_u64": (64, 64), "s_cmp_lg_u64": (64, 64)}


def build_sop2(inst: Instruction, ctx) -> Callable:
    spec = SOP2_OPS.get(inst.name)
    if spec is None:
        raise DecodeError(f"unimplemented {inst}")
    b0, b1, bd, f = spec
    r0 = sreader(inst.fields["ssrc0"], inst, b0)
    r1 = sreader(inst.fields["ssrc1"], inst, b1)
    wr = swriter(inst.fields["sdst"], inst, bd)
    if inst.name.startswith("s_cselect") or inst.name.startswith("s_mul") or inst.name.startswith("s_bfm") \
            or inst.name.startswith("s_pack"):
        def run(w):
            wr(w, f(r0(w), r1(w), w.scc)[0])
        return run

    def run(w):
        d, c = f(r0(w), r1(w), w.scc)
        wr(w, d)
        w.scc = c
    return run


def build_sop1(inst: Instruction, ctx) -> Callable:
    spec = SOP1_OPS.get(inst.name)
    name = inst.name
    sdst, ssrc0 = inst.fields["sdst"], inst.fields["ssrc0"]
    if name == "s_getpc_b64":
        wr = swriter(sdst, inst, 64)
        nxt = inst.address + inst.size
        return lambda w: wr(w, nxt)
    if name == "s_setpc_b64":
        rd = sreader(ssrc0, inst, 64)
        return lambda w: rd(w)
    if name == "s_swappc_b64":
        rd, wr = sreader(ssrc0, inst, 64), swriter(sdst, inst, 64)
        nxt = inst.address + inst.size

        def run(w):
            target = rd(w)
            wr(w, nxt)
            return target
        return run
    if name in ("s_cmov_b32", "s_cmov_b64"):
        bits = 32 if name.endswith("32") else 64
        rd, wr = sreader(ssrc0, inst, bits), swriter(sdst, inst, bits)

        def run(w):
            if w.scc:
                wr(w, rd(w))
        return run
    if name in ("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64"):
        bits = 32 if name.endswith("32") else 64
        rd, rdd, wr = sreader(ssrc0, inst, 32), sreader(sdst, inst, bits), swriter(sdst, inst, bits)
        one = name.startswith("s_bitset1")

        def run(w):
            b = rd(w) & (bits - 1)
            d = rdd(w)
            wr(w, d | (1 << b) if one else d & ~(1 << b))
        return run
    if spec is None:
        raise DecodeError(f"unimplemented {inst}")
    b0, bd, f = spec
    rd, wr = sreader(ssrc0, inst, b0), swriter(sdst, inst, bd)
    if isinstance(f, tuple):
        kind, g = f

        def run(w):
            a = rd(w)
            old = w.exec_bits
            new = g(a, old)
            if kind == "saveexec":
                wr(w, old)
            w.s[EXEC], w.s[EXEC + 1] = new & M32, new >> 32
            w.sync_exec()
            if kind == "wrexec":
                wr(w, new)
            w.scc = int(new != 0)
        return run
    if name in ("s_mov_b32", "s_mov_b64"):
        return lambda w: wr(w, rd(w))

    def run(w):
        d, c = f(rd(w), w)
        wr(w, d)
        if c is not None:
            w.scc = c
    return run


def build_sopc(inst: Instruction, ctx) -> Callable:
    f = SOPC_OPS.get(inst.name)
    if f is None:
        raise DecodeError(f"unimplemented {inst}")
    b0, b1 = _SOPC_BITS.get(inst.name, (32, 32))
    r0, r1 = sreader(inst.fields["ssrc0"], inst, b0), sreader(inst.fields["ssrc1"], inst, b1)

    def run(w):
        w.scc = int(f(r0(w), r1(w)))
    return run


def build_sopk(inst: Instruction, ctx) -> Callable:
    name = inst.name
    k = inst.fields["simm16"]
    ks = k - ((k & 0x8000) << 1)
    sdst = inst.fields["sdst"]
    if name == "s_movk_i32":
        wr = swriter(sdst, inst)
        v = ks & M32
        return lambda w: wr(w, v)
    if name == "s_cmovk_i32":
        wr = swriter(sdst, inst)
        v = ks & M32

        def run(w):
            if w.scc:
                wr(w, v)
        return run
    if name.startswith("s_cmpk_"):
        op = "s_cmp_" + name[len("s_cmpk_"):]
        f = SOPC_OPS[op]
        rd = sreader(sdst, inst)
        kk = ks & M32 if name.endswith("i32") else k

        def run(w):
            w.scc = int(f(rd(w), kk))
        return run
    if name == "s_addk_i32":
        rd, wr = sreader(sdst, inst), swriter(sdst, inst)
        kk = ks & M32

        def run(w):
            a = rd(w)
            d = (a + kk) & M32
            wr(w, d)
            w.scc = _ovf_add(a, kk, d)
        return run
    if name == "s_mulk_i32":
        rd, wr = sreader(sdst, inst), swriter(sdst, inst)
        return lambda w: wr(w, (signed32(rd(w)) * ks) & M32)
    if name == "s_call_b64":
        wr = swriter(sdst, inst, 64)
        nxt = inst.address + 4
        target = inst.address + 4 + ks * 4

        def run(w):
            wr(w, nxt)
            return target
        return run
    if name == "s_getreg_b32":
        wr = swriter(sdst, inst)
        hw_id, off, size = k & 0x3F, (k >> 6) & 0x1F, ((k >> 11) & 0x1F) + 1
        return lambda w: wr(w, (ctx.hwreg(w, hw_id) >> off) & ((1 << size) - 1))
    if name in ("s_setreg_b32", "s_setreg_imm32_b32"):
        hw_id, off, size = k & 0x3F, (k >> 6) & 0x1F, ((k >> 11) & 0x1F) + 1
        rd = (lambda w, c=inst.literal: c) if name == "s_setreg_imm32_b32" else sreader(sdst, inst)
        mask = ((1 << size) - 1) << off

        def run(w):
            ctx.set_hwreg(w, hw_id, (ctx.hwreg(w, hw_id) & ~mask) | ((rd(w) << off) & mask))
        return run
    raise DecodeError(f"unimplemented {inst}")


def build_sopp(inst: Instruction, ctx) -> Callable:
    name = inst.name
    k = inst.fields["simm16"]
    target = inst.address + 4 + (k - ((k & 0x8000) << 1)) * 4
    nxt = inst.address + 4
    if name in ("s_nop", "s_waitcnt", "s_setprio", "s_sleep", "s_icache_inv", "s_incperflevel", "s_decperflevel",
                "s_ttracedata", "s_set_valu_coexec_mode", "s_sendmsg", "s_wakeup", "s_setkill"):
        return lambda w: None
    if name == "s_endpgm":
        return lambda w: ENDPGM
    if name == "s_barrier":
        return lambda w: BARRIER
    if name == "s_branch":
        return lambda w: target
    if name == "s_cbranch_scc0":
        return lambda w: None if w.scc else target
    if name == "s_cbranch_scc1":
        return lambda w: target if w.scc else None
    if name == "s_cbranch_vccz":
        return lambda w: None if (w.s[106] | w.s[107]) else target
    if name == "s_cbranch_vccnz":
        return lambda w: target if (w.s[106] | w.s[107]) else None
    if name == "s_cbranch_execz":
        return lambda w: None if w.exec_bits else target
    if name == "s_cbranch_execnz":
        return lambda w: target if w.exec_bits else None
    if name == "s_trap":
        def run(w):
            raise EmulatorError(f"s_trap {k} at pc 0x{inst.address:x} (wave {w.wave_id}, workgroup {w.workgroup})")
        return run
    if name in ("s_cbranch_cdbgsys", "s_cbranch_cdbguser", "s_cbranch_cdbgsys_or_user", "s_cbranch_cdbgsys_and_user"):
        return lambda w: None  # no debugger attached: never taken
    raise DecodeError(f"unimplemented {inst}")
