"""Micro-kernels per instruction family, compiled from tests/emulator/emulator_kernels/*.hip, against numpy."""
from fractions import Fraction

import numpy as np
import pytest

from rawindexer.emulator import BarrierDeadlock, ExecMaskError
from rawindexer.emulator.numerics import E4M3FN, E5M2

from emulator_kernels.harness import emulator, launch

M32 = 0xFFFFFFFF


def s32(x):
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def u(x):
    return x & M32


# ---------------------------------------------------------------------------------------------------
def salu_expected(a, b, c):
    ua, ub, uc = u(a), u(b), u(c) | 1
    r = [s32(a + b), s32(a - b), s32(a * b), ua // uc, ua % uc, s32(a << (b & 31)), a >> (b & 31),
         ua >> (ub & 31), s32((a & b) ^ (a | ~c)), min(a, b), a if ua > ub else b, (ua * ub) >> 32,
         s32((a * b) >> 32), bin(ua).count("1"), 32 - ua.bit_length(), ((ua & -ua).bit_length() - 1) if ua else 32,
         s32(abs(a)), ((ua << 33 | ub) >> 7) & M32]
    s = 0
    for k in range(c & 15):
        s = s32(s + k * a + (b if k & 1 else -b))
    r.append(s)
    r.append(int(a == b) + 2 * int(ua >= ub) + 4 * int(a <= c) + 8 * int(a != c))
    r.append(s32(((a & 0xFFFF) ^ 0x8000) - 0x8000 + ((b & 0xFF) ^ 0x80) - 0x80))
    r.append(s32(int(np.fmod(a * c, 1000003))))
    r.append((a >> 3) & 0x7F)
    d = b | 1
    r.append(s32(int(c / d)) if abs(c) // abs(d) * abs(d) != abs(c) or True else 0)
    r[-1] = s32(int(abs(c) // abs(d)) * (1 if (c < 0) == (d < 0) else -1))
    return [s32(x) for x in r]


def test_salu_arithmetic_compare_branch(rng):
    n = 48
    vals = rng.integers(-2**31, 2**31, size=3 * n, dtype=np.int64)
    vals[:6] = [0, 0, 0, -1, 1, -7]
    vals[6:9] = [2**31 - 1, -2**31, 15]
    inp = vals.astype(np.int32)
    out = np.zeros(24 * n, np.int32)
    stats = launch("salu", "salu_ops", (n, 1, 1), (64, 1, 1), [inp, out], writable=[out], readonly=[inp])
    got = out.reshape(n, 24)
    for g in range(n):
        a, b, c = (int(x) for x in inp[3 * g: 3 * g + 3])
        assert got[g].tolist() == salu_expected(a, b, c), (g, a, b, c)
    assert stats.per_class["SALU"] > stats.per_class["VALU"]


def test_valu_integer(rng):
    n = 150  # not a multiple of 64: the tail wave runs with a partial EXEC
    a = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    a[:4] = [0, 1, M32, 0x80000000]
    b[:4] = [0, M32, 31, 33]
    out = np.zeros(20 * n, np.uint32)
    launch("valu", "valu_int", (3, 1, 1), (64, 1, 1), [a, b, out, n], writable=[out], readonly=[a, b])
    x, y = a.astype(np.uint64), b.astype(np.uint64)
    sx, sy = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    m = np.uint64(M32)
    sh = y & np.uint64(31)
    yo = y | np.uint64(1)
    exp = [
        (x + y) & m, (x - y) & m, (x * y) & m, (x * y) >> np.uint64(32), ((sx * sy) >> 32).astype(np.uint64) & m,
        x // yo, x % yo, (x << sh) & m, (sx >> sh.astype(np.int64)).astype(np.uint64) & m, x >> sh,
        ((x & y) | (~x & m & (y >> np.uint64(3)))), np.minimum(sx, sy).astype(np.uint64) & m, np.maximum(x, y),
        (x >> np.uint64(5)) & np.uint64(0x3FF),
        np.array([bin(int(v)).count("1") + (32 - int(v).bit_length()) for v in a], np.uint64),
        np.array([((int(p) << 32 | int(q)) >> (int(q) & 63)) & M32 for p, q in zip(a, b)], np.uint64),
        np.array([((int(p) * int(q) + int(p)) >> 7) & M32 for p, q in zip(a, b)], np.uint64),
        (((x & np.uint64(0xFF)).astype(np.int64) ^ 0x80) - 0x80 + ((y & np.uint64(0xFFFF)).astype(np.int64) ^ 0x8000)
         - 0x8000).astype(np.uint64) & m,
        (x & np.uint64(0xFF)) * (y & np.uint64(0xFFFF)),
        x ^ ((y << np.uint64(3)) & m) ^ np.uint64(0x9E3779B9),
    ]
    got = out.reshape(20, n)
    for k, e in enumerate(exp):
        np.testing.assert_array_equal(got[k], (e & m).astype(np.uint32), err_msg=f"result {k}")


def _fma_exact(x, y, z):
    out = np.empty(len(x), np.float32)
    for i in range(len(x)):
        ex = Fraction(float(x[i])) * Fraction(float(y[i])) + Fraction(float(z[i]))
        c = np.float32(float(ex))
        cands = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
        out[i] = min(cands, key=lambda v: (abs(Fraction(float(v)) - ex), int(np.array(v).view(np.uint32)) & 1))
    return out


def test_valu_float_and_conversions(rng):
    n = 128
    a = (rng.standard_normal(n) * 100).astype(np.float32)
    b = (rng.standard_normal(n) * 100).astype(np.float32)
    c = (rng.standard_normal(n) * 100).astype(np.float32)
    a[:6] = [0.0, -0.0, 2.5, -2.5, 3.5, 1e-40]     # ties for rint, a denormal
    b[:6] = [-0.0, 0.0, 1.0, 7.0, -1e-40, 3.0]
    c[:3] = (-(a[:3].astype(np.float64) * b[:3])).astype(np.float32)   # fma cancellation
    out = np.zeros(16 * n, np.float32)
    launch("valu", "valu_float", (2, 1, 1), (64, 1, 1), [a, b, c, out, n], writable=[out], readonly=[a, b, c])
    got = out.reshape(16, n)
    f = np.float32
    both0 = (a == 0) & (b == 0)
    amd_max = np.where(both0, (a.view(np.uint32) & b.view(np.uint32)).view(f), np.maximum(a, b))  # max(+0,-0)=+0
    both0c = (a == 0) & (c == 0)
    amd_min = np.where(both0c, (a.view(np.uint32) | c.view(np.uint32)).view(f), np.minimum(a, c))  # min(+0,-0)=-0
    exp = [a + b, a - b, a * b, _fma_exact(a, b, c), amd_max, amd_min, np.maximum(a, f(0)) + f(0),
           np.trunc(a).astype(np.int32).astype(f), np.trunc(np.abs(b)).astype(np.uint32).astype(f),
           np.floor(a) + np.ceil(b), np.trunc(c) - np.rint(a), a * f(0.5) + f(3.0), -np.abs(a) * b,
           np.ldexp(a, 3).astype(f), (np.arange(n) - 7).astype(f), np.where(a < b, c, a * c)]
    for k, e in enumerate(exp):
        if k == 11:  # may be contracted into one fma by the compiler: allow one rounding either way
            np.testing.assert_allclose(got[k], e, rtol=1e-6, err_msg=f"result {k}")
            continue
        np.testing.assert_array_equal(got[k].view(np.uint32), np.asarray(e, f).view(np.uint32),
                                      err_msg=f"result {k}")


def test_vopc_exec_divergence(rng):
    n = 200
    a = rng.integers(-20, 40, size=n).astype(np.int32)
    out = np.full(n + 56, -12345, np.int32)
    stats = launch("valu", "divergence", (4, 1, 1), (64, 1, 1), [a, out, n], writable=[out], readonly=[a])
    exp = []
    for x in a.tolist():
        if x > 10:
            y = x * 3 + (7 if x & 1 else -2)
        else:
            y = sum(k * x + 1 for k in range(x & 7))
        exp.append(y)
    assert out[:n].tolist() == exp
    assert (out[n:] == -12345).all()  # inactive lanes of the tail wave stored nothing
    assert stats.per_opcode.get("s_and_saveexec_b64", 0) > 0


# ---------------------------------------------------------------------------------------------------
def test_global_loads_and_stores_of_each_width(rng):
    inp = rng.integers(0, 256, size=4096, dtype=np.uint8)
    out = np.zeros(4096, np.uint8)
    stats = launch("mem", "global_widths", (1, 1, 1), (64, 1, 1), [inp, out], writable=[out], readonly=[inp])
    i32 = lambda buf, off, cnt: buf[off:off + 4 * cnt].view(np.int32)  # noqa: E731
    np.testing.assert_array_equal(i32(out, 0, 64), inp[:64].view(np.int8).astype(np.int32))
    np.testing.assert_array_equal(i32(out, 256, 64), inp[64:192].view(np.int16).astype(np.int32))
    w1 = inp[256:512].view(np.uint32)
    np.testing.assert_array_equal(out[512:576], ((w1 >> 8) & 0xFF).astype(np.uint8))
    np.testing.assert_array_equal(out[576:704].view(np.uint16), (w1 >> 16).astype(np.uint16))
    np.testing.assert_array_equal(out[1024:1536], inp[512:1024])
    np.testing.assert_array_equal(out[1536:1536 + 768], inp[1024:1024 + 768])
    np.testing.assert_array_equal(out[2560:3584], inp[2048:3072])
    assert stats.vmem_bytes_loaded == 64 * (1 + 2 + 4 + 8 + 12 + 16)
    assert stats.vmem_bytes_stored == 64 * (4 + 4 + 1 + 2 + 8 + 12 + 16)


def test_buffer_loads_stores_and_range_check(rng):
    inp = rng.integers(0, 2**32, size=256, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(1024, np.uint32)
    num_records = 200  # bytes: dword loads of lanes >= 50 are out of range and read 0
    launch("mem", "buffer_widths", (1, 1, 1), (64, 1, 1), [inp, out, num_records], writable=[out], readonly=[inp])
    b = inp.view(np.uint8)
    ok = lambda size: np.array([(size * i + size) <= num_records for i in range(64)])  # noqa: E731
    x = np.where(ok(4), inp[:64], 0)
    np.testing.assert_array_equal(out[:64], (x + 1).astype(np.uint32))
    y = np.where(ok(8)[:, None], b[:512].view(np.uint32).reshape(64, 2), 0)
    np.testing.assert_array_equal(out[64:192].reshape(64, 2), y)
    z = np.where(ok(16)[:, None], inp[:256].reshape(64, 4), 0)
    np.testing.assert_array_equal(out[192:448].reshape(64, 4), z)


def test_scalar_loads(rng):
    p = rng.integers(-1000, 1000, size=64).astype(np.int32)
    out = np.zeros(2, np.int32)
    stats = launch("mem", "scalar_loads", (1, 1, 1), (64, 1, 1), [p, out], writable=[out], readonly=[p])
    assert out[0] == sum(int(p[k]) * (k + 1) for k in range(31))
    assert out[1] == int(p[40]) ^ int(p[41])
    assert stats.smem_bytes_loaded >= 4 * 33
    assert any(name.startswith("s_load_dwordx") for name in stats.per_opcode)


# ---------------------------------------------------------------------------------------------------
def test_lds_and_barrier_across_waves(rng):
    groups = 3
    inp = rng.standard_normal(256 * groups).astype(np.float32)
    out = np.zeros(256 * groups, np.float32)
    count = np.zeros(groups, np.int32)
    stats = launch("lds", "lds_exchange", (groups, 1, 1), (256, 1, 1), [inp, out, count], writable=[out, count],
                   readonly=[inp])
    t = np.arange(256)
    for g in range(groups):
        buf = inp[256 * g: 256 * (g + 1)]
        np.testing.assert_array_equal(out[256 * g: 256 * (g + 1)], buf[255 - t] + np.float32(2) * buf[(t * 7 + 64) & 255])
    assert count.tolist() == [int((t & 3).sum())] * groups
    assert stats.per_class["BARRIER"] == groups * 4 * 2
    assert stats.lds_bytes_written >= 256 * 4 * groups


def test_barrier_that_ended_waves_cannot_reach_raises():
    out = np.zeros(256, np.float32)
    with pytest.raises(BarrierDeadlock, match="wait at s_barrier"):
        launch("lds", "early_exit_barrier", (1, 1, 1), (256, 1, 1), [out], writable=[out])


# ---------------------------------------------------------------------------------------------------
def test_permlane32_swap(rng):
    a = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128, np.uint32)
    launch("xlane", "permlane_swap", (1, 1, 1), (64, 1, 1), [a, b, out], writable=[out], readonly=[a, b])
    # AMD pseudocode: for lane < 32: swap VGPR[lane][src0] with VGPR[lane + 32][vdst]
    np.testing.assert_array_equal(out[:64], np.concatenate([a[:32], b[:32]]))
    np.testing.assert_array_equal(out[64:], np.concatenate([a[32:], b[32:]]))


def _lanes(mat_rows: np.ndarray) -> np.ndarray:
    """32 x 64 operand (rows i = A rows or B columns) -> 32 bytes per lane, lane l = i + 32g holding
    k = 16g + 32*(n//16) + n%16 at byte n (NOTES section 3)."""
    lanes = np.zeros((64, 32), np.uint8)
    for g in range(2):
        for n in range(32):
            lanes[32 * g: 32 * g + 32, n] = mat_rows[:, 16 * g + 32 * (n // 16) + n % 16]
    return lanes


def _acc_layout(d: np.ndarray) -> np.ndarray:
    """32 x 32 matrix -> (64 lanes, 16 registers): VGPR r of lane l = D[8(r//4) + 4(l//32) + r%4][l%32]."""
    out = np.zeros((64, 16), np.float32)
    for l in range(64):
        for r in range(16):
            out[l, r] = d[8 * (r // 4) + 4 * (l // 32) + r % 4, l % 32]
    return out


def _random_fp8(rng, shape, table):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    bad = ~np.isfinite(table[b])
    b[bad] = 0x3C
    return b


@pytest.mark.parametrize("kernel,ta,tb", [("mfma_e4m3", E4M3FN, E4M3FN), ("mfma_e5m2", E5M2, E5M2),
                                          ("mfma_e4m3_e5m2", E4M3FN, E5M2)])
def test_mfma_32x32x64_fp8(rng, kernel, ta, tb):
    A = _random_fp8(rng, (32, 64), ta)       # A[i][k]
    Bt = _random_fp8(rng, (32, 64), tb)      # B[k][j] stored as Bt[j][k]
    C = rng.standard_normal((32, 32)).astype(np.float32)
    a_l, b_l = _lanes(A), _lanes(Bt)
    c_l = _acc_layout(C)
    out = np.zeros((64, 16), np.float32)
    stats = launch("xlane", kernel, (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, out], writable=[out],
                   readonly=[a_l, b_l, c_l])
    D = ta[A] @ tb[Bt].T + C.astype(np.float64)
    np.testing.assert_allclose(out, _acc_layout(D.astype(np.float32)), rtol=2e-7, atol=0)
    # a wrong row/column mapping would not be within rounding; check a few entries exactly too
    assert stats.per_opcode["v_mfma_f32_32x32x64_f8f6f4"] == 1


def test_mfma_scaled_e8m0(rng):
    A = _random_fp8(rng, (32, 64), E4M3FN)
    Bt = _random_fp8(rng, (32, 64), E4M3FN)
    C = rng.standard_normal((32, 32)).astype(np.float32)
    ea, eb = 127 + 3, 127 - 2           # uniform scales: x8 for A, x1/4 for B
    scales = np.zeros(128, np.uint32)
    scales[:64] = (ea << 8) | 0x11     # byte 1 selected (opsel 1)
    scales[64:] = (eb << 16) | 0x2222  # byte 2 selected (opsel 2)
    out = np.zeros((64, 16), np.float32)
    a_l, b_l, c_l = _lanes(A), _lanes(Bt), _acc_layout(C)
    stats = launch("xlane", "mfma_scaled", (1, 1, 1), (64, 1, 1), [a_l, b_l, c_l, scales, out],
                   writable=[out], readonly=[a_l, b_l, c_l, scales])
    D = (E4M3FN[A] @ E4M3FN[Bt].T) * 2.0 ** (ea - 127) * 2.0 ** (eb - 127) + C
    np.testing.assert_allclose(out, _acc_layout(D.astype(np.float32)), rtol=2e-7)
    assert stats.per_opcode["v_mfma_scale_f32_32x32x64_f8f6f4"] == 1


def test_mfma_requires_full_exec():
    z = np.zeros((64, 32), np.uint8)
    c = np.zeros((64, 16), np.float32)
    out = np.zeros((64, 16), np.float32)
    with pytest.raises(ExecMaskError, match="EXEC all ones"):
        launch("xlane", "mfma_e4m3", (1, 1, 1), (32, 1, 1), [z, z, c, out], writable=[out], readonly=[z, c])


def test_permlane_requires_full_exec():
    a = np.zeros(64, np.uint32)
    out = np.zeros(128, np.uint32)
    with pytest.raises(ExecMaskError):
        launch("xlane", "permlane_swap", (1, 1, 1), (48, 1, 1), [a, a, out], writable=[out], readonly=[a])


def test_packed_int16_ops(rng):
    """v_pk_{max,min}_{i16,u16}, v_pk_{add,sub}_u16, v_pk_mul_lo_u16 against numpy, op_sel swizzles included."""
    from emulator_kernels.harness import compiled

    listing = compiled("pk16")[1]
    for mnemonic in ("v_pk_max_i16", "v_pk_min_i16", "v_pk_max_u16", "v_pk_min_u16", "v_pk_add_u16",
                     "v_pk_sub_i16", "v_pk_mul_lo_u16"):
        assert mnemonic in listing, mnemonic
    assert "op_sel:[1,0] op_sel_hi:[0,1]" in listing  # the swizzled max
    n = 128
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    a[:4] = [0x80000000, 0x00008000, 0x7FFF8001, 0xFFFF0000]  # -0.0 bf16 patterns and extremes
    out = np.zeros(9 * n, np.uint32)
    launch("pk16", "pk16_ops", (n // 64, 1, 1), (64, 1, 1), [a, b, out, n], writable=[out], readonly=[a, b])
    sa, sb = a.view(np.int16).reshape(n, 2), b.view(np.int16).reshape(n, 2)
    ua, ub = a.view(np.uint16).reshape(n, 2), b.view(np.uint16).reshape(n, 2)
    pack = lambda x: np.ascontiguousarray(x.astype(np.uint16)).view(np.uint32).reshape(n)  # noqa: E731
    expected = [np.maximum(sa, sb), np.minimum(sa, sb), np.maximum(ua, ub), np.minimum(ua, ub), ua + ub, ua - ub,
                np.maximum(sa, 0), np.maximum(sa[:, ::-1], sb), ua * ub]
    for k, e in enumerate(expected):
        assert np.array_equal(out[k * n:(k + 1) * n], pack(e)), k


# ---------------------------------------------------------------------------------------------------
# fp8 / bf8 conversions (tests/emulator/emulator_kernels/fp8cvt.hip) against ml_dtypes' OCP float8 casts
# ---------------------------------------------------------------------------------------------------
NAN_POISON = 0x7FA5A5A5  # a NaN no conversion produces: an output still holding it was never written


def _f8_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    return {"fp8": ml.float8_e4m3fn, "bf8": ml.float8_e5m2}


def _f8_values(b: np.ndarray, dt) -> np.ndarray:
    return (np.asarray(b) & 0xFF).astype(np.uint8).view(dt).astype(np.float32)


def _assert_same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-equal where ``want`` is a number (signed zeros included); NaN where it is NaN."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), np.flatnonzero(np.isnan(got) != nan)[:8]
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _bytes_in_every_position(rng) -> np.ndarray:
    """256 words whose byte k runs through all 256 values (each position in its own random order)."""
    cols = [rng.permutation(256).astype(np.uint32) for _ in range(4)]
    return cols[0] | (cols[1] << 8) | (cols[2] << 16) | (cols[3] << 24)


def _poisoned(n):
    return np.full(n, NAN_POISON, np.uint32).view(np.float32)


def test_cvt_f32_fp8_bf8_every_byte_every_byte_select(rng):
    """v_cvt_f32_{fp8,bf8}: the e32 form (byte 0) and the SDWA src0_sel:BYTE_1..3 forms, all 256 values."""
    dts = _f8_dtypes()
    a = _bytes_in_every_position(rng)
    n = a.size
    out = _poisoned(8 * n)
    stats = launch("fp8cvt", "cvt_f32_f8", (n // 64, 1, 1), (64, 1, 1), [a, out, n], writable=[out], readonly=[a])
    got = out.reshape(8, n)
    for kind, dt in enumerate(dts.values()):
        for byte in range(4):
            _assert_same_floats(got[4 * kind + byte], _f8_values(a >> (8 * byte), dt))
    for name in ("v_cvt_f32_fp8_e32", "v_cvt_f32_fp8_sdwa", "v_cvt_f32_bf8_e32", "v_cvt_f32_bf8_sdwa"):
        assert stats.per_opcode[name] > 0, name


def test_cvt_pk_f32_fp8_bf8_both_words(rng):
    """v_cvt_pk_f32_{fp8,bf8}: a byte pair to a VGPR pair; word 1 through SDWA src0_sel:WORD_1."""
    dts = _f8_dtypes()
    a = _bytes_in_every_position(rng)
    n = a.size
    out = _poisoned(8 * n)
    stats = launch("fp8cvt", "cvt_pk_f32_f8", (n // 64, 1, 1), (64, 1, 1), [a, out, n], writable=[out],
                   readonly=[a])
    got = out.reshape(8, n)
    for kind, dt in enumerate(dts.values()):
        for word in range(2):
            for half in range(2):
                _assert_same_floats(got[4 * kind + 2 * word + half], _f8_values(a >> (16 * word + 8 * half), dt))
    assert stats.per_opcode["v_cvt_pk_f32_fp8_sdwa"] > 0 and stats.per_opcode["v_cvt_pk_f32_bf8_e32"] > 0


def test_cvt_f32_fp8_vop3_forms_with_output_modifiers(rng):
    """The e64 forms: mul:2 and clamp apply to the decoded value; the packed e64 form reads word 0."""
    dts = _f8_dtypes()
    a = _bytes_in_every_position(rng)
    n = a.size
    out = _poisoned(4 * n)
    launch("fp8cvt", "cvt_f32_f8_e64", (n // 64, 1, 1), (64, 1, 1), [a, out, n], writable=[out], readonly=[a])
    got = out.reshape(4, n)
    fp8v, bf8v = _f8_values(a, dts["fp8"]), _f8_values(a, dts["bf8"])
    _assert_same_floats(got[0], (fp8v * np.float32(2)).astype(np.float32))
    clamped = np.where(np.isnan(bf8v), np.float32(0), np.clip(bf8v, np.float32(0), np.float32(1)))  # dx10 clamp
    _assert_same_floats(got[1], clamped.astype(np.float32))
    _assert_same_floats(got[2], fp8v)
    _assert_same_floats(got[3], _f8_values(a >> 8, dts["fp8"]))


def _f32_to_f8_cases(rng, dt) -> np.ndarray:
    """Random magnitudes over the whole range, every f8 value, every midpoint between neighbours (ties),
    values just off the midpoints, the overflow edge, infinities, NaN, zeros, f32 denormals."""
    vals = _f8_values(np.arange(256), dt).astype(np.float64)
    pos = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
    mids = (pos[:-1] + pos[1:]) / 2
    top = pos[-1]
    ulp = pos[-1] - pos[-2]
    edge = [top + ulp / 2, top + ulp / 2 + ulp / 64, top + ulp / 2 - ulp / 64, 2 * top, 3.0e38]
    special = [0.0, np.inf, np.nan, 1e-45, 1e-39, pos[1] / 2, pos[1] / 2 * 1.01, pos[1] / 4]
    rand = rng.standard_normal(1024) * 10.0 ** rng.uniform(-6, 6, 1024)
    x = np.concatenate([pos, mids, mids * (1 + 2.0 ** -10), mids * (1 - 2.0 ** -10), edge, special]).astype(np.float32)
    x = np.concatenate([x, -x, rand.astype(np.float32)])
    return np.resize(x, -(-x.size // 64) * 64)  # whole waves (np.resize repeats from the start)


@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_cvt_pk_fp8_bf8_f32_rounding_overflow_word_select(rng, kind):
    """v_cvt_pk_{fp8,bf8}_f32: round to nearest even (ties included), no saturation (fp8 overflow -> NaN,
    bf8 overflow -> inf), op_sel[3] picks the word written, the other word of the destination is kept."""
    dt = _f8_dtypes()[kind]
    x = _f32_to_f8_cases(rng, dt)
    y = rng.permutation(x)
    n = x.size
    old = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = np.full(4 * n, NAN_POISON, np.uint32)
    launch("fp8cvt", "cvt_pk_f8_f32", (n // 64, 1, 1), (64, 1, 1), [x, y, old, out, n], writable=[out],
           readonly=[x, y, old])
    got = out.reshape(4, n)[0 if kind == "fp8" else 2: (0 if kind == "fp8" else 2) + 2]

    def code(v):
        return v.astype(dt).view(np.uint8).astype(np.uint32)
    pair = code(x) | (code(y) << 8)
    for word, want in enumerate([(old & 0xFFFF0000) | pair, (old & 0xFFFF) | (pair << 16)]):
        same = got[word] == want
        # NaN codes may differ (any NaN of the format is a NaN); everything else must be bit-exact
        g8 = [(got[word] >> (16 * word + 8 * k)) & 0xFF for k in range(2)]
        nan_ok = np.isnan(_f8_values(g8[0], dt)) == np.isnan(_f8_values(code(x), dt))
        nan_ok &= np.isnan(_f8_values(g8[1], dt)) == np.isnan(_f8_values(code(y), dt))
        nan_either = np.isnan(_f8_values(code(x), dt)) | np.isnan(_f8_values(code(y), dt))
        assert np.all(same | (nan_either & nan_ok)), (word, x[~same][:4], y[~same][:4], got[word][~same][:4],
                                                      want[~same][:4])
    # the cases really cover ties, overflow and NaN
    assert np.isnan(x).any() and np.isinf(x).any()
    overflow = np.isnan(_f8_values(code(x), dt)) if kind == "fp8" else np.isinf(_f8_values(code(x), dt))
    assert (overflow & np.isfinite(x)).any()


def test_cvt_sr_fp8_raises_as_not_emulated():
    from rawindexer.emulator import DecodeError
    x = np.ones(64, np.float32)
    r = np.zeros(64, np.uint32)
    out = np.zeros(8 * 64, np.uint32)
    with pytest.raises(DecodeError, match="stochastic rounding"):
        launch("fp8cvt", "cvt_sr_f8_f32", (1, 1, 1), (64, 1, 1), [x, r, r, out, 64], writable=[out], readonly=[x, r])


def test_cvt_f32_fp8_e64_op_sel_raises_instead_of_guessing():
    from rawindexer.emulator import DecodeError
    from rawindexer.emulator.decoder import decode_one
    from rawindexer.emulator.ops_valu import build_valu
    # v_cvt_f32_fp8_e64 v1, v3 with op_sel bit 0 set (VOP3 opcode 320 + 84)
    raw = b"".join(w.to_bytes(4, "little") for w in [0xD1940801, 0x00000103])
    inst = decode_one(raw, 0, 0)
    assert inst.name == "v_cvt_f32_fp8_e64" and inst.fields["opsel"] == 1
    with pytest.raises(DecodeError, match="op_sel"):
        build_valu(inst, None)
    plain = decode_one(b"".join(w.to_bytes(4, "little") for w in [0xD1940001, 0x00000103]), 0, 0)
    assert callable(build_valu(plain, None))


@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_f32_to_f8_model_matches_ml_dtypes_on_random_bits(rng, kind):
    """The encoder behind v_cvt_pk_*_f32 on 200k random float32 bit patterns (every exponent, NaNs and
    infinities included): same code as ml_dtypes' cast, or a NaN code of the same sign where it gives NaN."""
    from rawindexer.emulator import fp8
    dt = _f8_dtypes()[kind]
    fmt = fp8.FP8 if kind == "fp8" else fp8.BF8
    x = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    got = fp8.from_f32(x, fmt)
    with np.errstate(invalid="ignore"):
        want = x.astype(dt).view(np.uint8).astype(np.uint32)
    nan_both = np.isnan(_f8_values(got, dt)) & np.isnan(_f8_values(want, dt)) & ((got ^ want) & 0x80 == 0)
    assert np.all((got == want) | nan_both), (x[(got != want) & ~nan_both][:4])
