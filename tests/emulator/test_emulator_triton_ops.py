"""Micro-kernels (tests/emulator/emulator_triton_ops.hip) for the instruction families Triton's gfx950 output
needed and the emulator lacked, each checked against a scalar model of AMD's pseudocode / ISA text:
ds_read_b64_tr_b{16,8,4}, VOP1/VOP2 DPP, v_div_scale/fmas/fixup_f32, 16-bit integer VALU ops."""
import functools
import math
import struct
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np

import build
from rawindexer.emulator import Emulator, pack_kernargs
from rawindexer.emulator.listing import compare_with_listing

HERE = Path(__file__).resolve().parent
POISON = 0xA5A5A5A5


@functools.cache
def _compiled() -> tuple[Emulator, str]:
    tmp = Path(tempfile.mkdtemp(prefix="rawindexer-triton-ops-"))
    out, asm = tmp / "ops.hsaco", tmp / "ops.s"
    build.compile_hip(HERE / "emulator_triton_ops.hip", out, asm=asm, extra_flags=[f"-I{HERE / 'emulator_kernels'}"])
    return Emulator(out.read_bytes()), asm.read_text()


def _launch(kernel, args, writable=(), readonly=()):
    emu = _compiled()[0]
    kernargs = pack_kernargs(emu.code.kernels[kernel], list(args), (1, 1, 1), (64, 1, 1))
    spans = [(a.ctypes.data, a.nbytes, True) for a in writable] + [(a.ctypes.data, a.nbytes, False) for a in readonly]
    return emu.launch(kernel, (1, 1, 1), (64, 1, 1), kernargs, spans)


def test_decoder_agrees_with_listing():
    emu, listing = _compiled()
    assert compare_with_listing(emu.code, listing) == []


# ---------------------------------------------------------------------------------------------------
def _tr_model(lane_bytes: np.ndarray, bits: int) -> np.ndarray:
    """CDNA4 ISA 11.4 transpose loads, per 16-lane group: the group's 16 x 64 bits are an n-row x
    16-column matrix of `bits`-bit elements (n = 64 / bits), row r held by the k = 16 / n consecutive
    lanes k*r .. k*r+k-1 (in lane order, elements in address order); lane j gets column j."""
    n = 64 // bits
    k = 16 // n
    out = np.zeros((64, 8), np.uint8)
    for g in range(4):
        elems = []  # elements of each lane of the group, in address order
        for lane in range(16 * g, 16 * g + 16):
            b = lane_bytes[lane]
            if bits == 16:
                elems.append([int(b[2 * i]) | int(b[2 * i + 1]) << 8 for i in range(4)])
            elif bits == 8:
                elems.append([int(x) for x in b])
            else:
                elems.append([int(b[i // 2]) >> (4 * (i % 2)) & 0xF for i in range(16)])
        matrix = [sum((elems[k * r + q] for q in range(k)), []) for r in range(n)]  # n rows x 16 columns
        for j in range(16):
            col = [matrix[r][j] for r in range(n)]
            value = sum(v << (bits * e) for e, v in enumerate(col))
            out[16 * g + j] = np.frombuffer(value.to_bytes(8, "little"), np.uint8)
    return out


def test_ds_read_b64_transpose_loads(rng):
    src = rng.integers(0, 2**32, size=1024, dtype=np.uint64).astype(np.uint32)
    lds = src.view(np.uint8)
    addr = (rng.permutation(500)[:64] * 8).astype(np.uint32)   # any 8-byte aligned block per lane
    out = np.full(384, POISON, np.uint32)
    stats = _launch("tr_loads", [src, addr, out], writable=[out], readonly=[src, addr])
    for k, (bits, off) in enumerate([(16, 0), (8, 8), (4, 16)]):
        lane_bytes = np.stack([lds[a + off: a + off + 8] for a in addr])
        exp = _tr_model(lane_bytes, bits).view("<u4").reshape(64, 2)
        np.testing.assert_array_equal(out[128 * k: 128 * (k + 1)].reshape(64, 2), exp, err_msg=f"tr_b{bits}")
    for bits in (16, 8, 4):
        assert stats.per_opcode[f"ds_read_b64_tr_b{bits}"] == 1


# ---------------------------------------------------------------------------------------------------
def _dpp_src(ctrl: str, lane: int):
    """Source lane for a DPP control (ISA text, GFX9), None when there is none."""
    row, pos = divmod(lane, 16)
    if ctrl.startswith("quad_perm"):
        sel = [int(c) for c in ctrl[ctrl.index("[") + 1:-1].split(",")]
        return lane - lane % 4 + sel[lane % 4]
    kind, _, n = ctrl.partition(":")
    n = int(n) if n else 0
    if kind == "row_shr":
        return lane - n if pos - n >= 0 else None
    if kind == "row_shl":
        return lane + n if pos + n < 16 else None
    if kind == "row_ror":
        return 16 * row + (pos + n) % 16
    if kind == "row_bcast" and n == 15:
        return 16 * row - 1 if row >= 1 else None
    if kind == "row_bcast" and n == 31:
        return 31 if row >= 2 else None
    if kind == "row_mirror":
        return 16 * row + 15 - pos
    if kind == "row_half_mirror":
        return lane - lane % 8 + 7 - lane % 8
    if kind == "wave_shr":
        return lane - 1 if lane >= 1 else None
    if kind == "wave_rol":
        return (lane + 1) % 64
    raise AssertionError(ctrl)


_DPP = [("mov", "quad_perm:[2,3,0,1]", 0xF, 0xF, 0), ("mov", "row_shr:3", 0xF, 0xF, 1), ("mov", "row_shr:3", 0xF, 0xF, 0),
        ("mov", "row_shl:5", 0xF, 0xF, 0), ("mov", "row_ror:7", 0xF, 0xF, 0), ("mov", "row_bcast:15", 0xA, 0xF, 0),
        ("mov", "row_bcast:31", 0xC, 0xF, 0), ("mov", "row_mirror", 0x5, 0x6, 0),
        ("mov", "row_half_mirror", 0xF, 0xF, 0), ("mov", "wave_shr:1", 0xF, 0xF, 1), ("mov", "wave_rol:1", 0xF, 0xF, 0),
        ("add", "row_shr:1", 0xF, 0xF, 1), ("add", "quad_perm:[1,0,3,2]", 0xF, 0xF, 0),
        ("mov", "row_shr:1", 0xF, 0xF, 1), ("mov", "row_shr:1", 0xF, 0xF, 0)]


def test_dpp_forms(rng):
    xf = rng.standard_normal(64).astype(np.float32)
    x = xf.view(np.uint32).copy()
    x[::3] ^= 1  # a mixed low bit: forms 13/14 run with EXEC = lanes whose x is odd
    yf = rng.standard_normal(64).astype(np.float32)
    olds = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    out = np.full(64 * len(_DPP), POISON, np.uint32)
    stats = _launch("dpp_forms", [x, yf.view(np.uint32), olds, out], writable=[out], readonly=[x, yf, olds])
    active_all = np.ones(64, bool)
    for k, (op, ctrl, row_mask, bank_mask, bound) in enumerate(_DPP):
        active = (x & 1 == 1) if k >= 13 else active_all
        exp = np.full(64, POISON, np.uint32)
        for lane in range(64):
            if not active[lane]:
                continue
            s = _dpp_src(ctrl, lane)
            valid = s is not None and active[s]
            enabled = row_mask >> (lane // 16) & 1 and bank_mask >> (lane % 16 // 4) & 1
            if not enabled or (not valid and not bound):
                exp[lane] = olds[lane]
                continue
            src0 = int(x[s]) if valid else 0
            if op == "mov":
                exp[lane] = src0
            else:
                exp[lane] = (np.float32(struct.unpack("<f", struct.pack("<I", src0))[0]) + yf[lane]).view(np.uint32)
        np.testing.assert_array_equal(out[64 * k: 64 * (k + 1)], exp, err_msg=f"{op} {ctrl} (form {k})")
    assert stats.per_opcode["v_mov_b32_dpp"] == 13 and stats.per_opcode["v_add_f32_dpp"] == 2


# ---------------------------------------------------------------------------------------------------
def _bits(f: float) -> int:
    return struct.unpack("<I", struct.pack("<f", f))[0]


def _exp(f) -> int:
    return _bits(float(f)) >> 23 & 0xFF


def _f32(x) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _div_scale_model(s0, s1, s2):
    """AMD pseudocode V_DIV_SCALE_F32 (CDNA4), D0 = S0 unless a branch scales it; returns (D0, VCC)."""
    d, vcc = s0, 0
    with np.errstate(all="ignore"):
        q = float(np.float32(s2) / np.float32(s1))
    denorm = lambda v: v != 0 and _exp(v) == 0  # noqa: E731
    if s2 == 0.0 or s1 == 0.0:
        d = math.nan
    elif _exp(s2) - _exp(s1) >= 96:
        vcc = 1
        if s0 == s1:
            d = _f32(s0 * 2.0 ** 64)
    elif denorm(s1):
        d = _f32(s0 * 2.0 ** 64)
    elif denorm(q):   # (1.0 / f64(S1) is never an f64 denormal for float32 S1)
        vcc = 1
        if s0 == s2:
            d = _f32(s0 * 2.0 ** 64)
    elif _exp(s2) <= 23:
        d = _f32(s0 * 2.0 ** 64)
    return d, vcc


def _fma_f32(a, b, c) -> float:
    ex = Fraction(a) * Fraction(b) + Fraction(c)
    r = float(np.float32(float(ex)))
    cands = [r, float(np.nextafter(np.float32(r), np.float32(np.inf))), float(np.nextafter(np.float32(r), np.float32(-np.inf)))]
    return min(cands, key=lambda v: (abs(Fraction(v) - ex), _bits(v) & 1))


def _div_fixup_model(s0, s1, s2):
    neg = (math.copysign(1, s1) < 0) != (math.copysign(1, s2) < 0)
    if math.isnan(s2) or math.isnan(s1):
        return math.nan
    if s1 == 0 and s2 == 0:
        return math.nan
    if math.isinf(s1) and math.isinf(s2):
        return math.nan
    if s1 == 0 or math.isinf(s2):
        return -math.inf if neg else math.inf
    if math.isinf(s1) or s2 == 0:
        return -0.0 if neg else 0.0
    if _exp(s2) - _exp(s1) < -150:
        return -0.0 if neg else 0.0
    return -abs(s0) if neg else abs(s0)


def test_div_scale_fmas_fixup(rng):
    n = (rng.standard_normal(64) * 10).astype(np.float32)
    d = (rng.standard_normal(64) * 10).astype(np.float32)
    q = (rng.standard_normal(64) * 10).astype(np.float32)
    tiny, denorm, big = np.float32(1e-38) * np.float32(1e-3), np.float32(3e-40), np.float32(3e38)
    n[:10] = [1.0, 0.0, 5.0, big, 1.0, tiny, 2.0, -3.0, 1e-30, 7.0]
    d[:10] = [0.0, 2.0, denorm, 1e-3, big, 3.0, -np.inf, 0.0, 1e10, -0.0]
    q[:4] = [np.nan, -2.5, 1.0, -0.0]
    vmask = rng.integers(0, 2, size=64).astype(np.uint32)
    out = np.full(256, np.nan, np.float32)
    flags = np.full(128, POISON, np.uint32)
    _launch("div_ops", [n, d, q, vmask, out, flags], writable=[out, flags], readonly=[n, d, q, vmask])
    for lane in range(64):
        a, b, c = float(n[lane]), float(d[lane]), float(q[lane])
        for k, (s0, s1, s2) in enumerate([(b, b, a), (a, b, a)]):
            dv, vcc = _div_scale_model(s0, s1, s2)
            got = float(out[64 * k + lane])
            assert (math.isnan(dv) and math.isnan(got)) or _bits(dv) == _bits(got), (k, lane, a, b, got, dv)
            assert flags[64 * k + lane] == vcc, (k, lane, a, b)
        fm = _fma_f32(a, b, c) if not (math.isnan(c) or math.isinf(b)) else float(np.float32(a) * np.float32(b) + np.float32(c))
        if vmask[lane]:
            fm = _f32(fm * 2.0 ** 32)
        got = float(out[128 + lane])
        assert (math.isnan(fm) and math.isnan(got)) or _bits(fm) == _bits(got), ("fmas", lane, a, b, c, got, fm)
        fx = _div_fixup_model(c, b, a)
        got = float(out[192 + lane])
        assert (math.isnan(fx) and math.isnan(got)) or _bits(fx) == _bits(got), ("fixup", lane, a, b, c, got, fx)


# ---------------------------------------------------------------------------------------------------
def test_int16_ops_zero_the_high_half(rng):
    x = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0, 15, 16, 0xFFFF]
    y[:4] = [0x8000, 0xFFFF, 0x7FFF, 1]
    out = np.full(640, POISON, np.uint32)
    stats = _launch("int16_ops", [x, y, out], writable=[out], readonly=[x, y])

    def s16(v):
        v &= 0xFFFF
        return v - 0x10000 if v & 0x8000 else v

    models = [lambda a, b: b << (a & 15), lambda a, b: b >> (a & 15), lambda a, b: s16(b) >> (a & 15),
              lambda a, b: a + b, lambda a, b: a - b, lambda a, b: b - a, lambda a, b: a * b,
              lambda a, b: max(s16(a), s16(b)), lambda a, b: min(a, b), lambda a, b: b << (a & 15)]
    for k, f in enumerate(models):
        exp = [f(int(a) & 0xFFFF, int(b) & 0xFFFF) & 0xFFFF for a, b in zip(x, y)]   # D0.u16, high half 0
        np.testing.assert_array_equal(out[64 * k: 64 * (k + 1)], np.array(exp, np.uint32), err_msg=f"op {k}")
    assert stats.per_opcode["v_lshlrev_b16_e32"] == 1 and stats.per_opcode["v_lshlrev_b16_e64"] == 1
