"""Micro-kernels per instruction family, compiled from tests/emulator_kernels/*.hip, against numpy."""
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
