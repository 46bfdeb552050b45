"""The reference, the fp8 codec, the window generators and the grader: what every other test trusts."""
import tracemalloc

import numpy as np
import pytest

from rawindexer.testing import reference as reference_module
from rawindexer.fp8 import E4M3FN_TABLE, decode_e4m3fn, encode_e4m3fn, random_e4m3fn
from rawindexer.testing.grading import Grade, calc_diff, grade, poison
from rawindexer.testing.reference import fp8_mqa_logits_ref
from rawindexer.testing.windows import WINDOW_MODES, WindowNotApplicable, clamp_windows, make_windows, window_mask


def naive_logits(q, k, kv_scale, weights, ks, ke, clean):
    """Loop-by-loop float64 transcription of the op's definition."""
    M, H, D = q.shape
    N = k.shape[0]
    qf, kf = decode_e4m3fn(q, np.float64), decode_e4m3fn(k, np.float64)
    kv_scale, weights = np.asarray(kv_scale, np.float64), np.asarray(weights, np.float64)
    out = np.full((M, N), -np.inf if clean else np.nan)
    for m in range(M):
        lo, hi = max(0, min(int(ks[m]), N)), max(0, min(int(ke[m]), N))
        for n in range(lo, hi):
            s = sum(max(float(qf[m, h] @ kf[n]), 0.0) * weights[m, h] for h in range(H))
            out[m, n] = s * kv_scale[n]
    return out


def random_inputs(rng, M, N, H, D):
    q = random_e4m3fn(rng, (M, H, D))
    k = random_e4m3fn(rng, (N, D))
    kv_scale = rng.uniform(0.0, 2.0, N).astype(np.float32)
    weights = rng.standard_normal((M, H)).astype(np.float32)
    return q, k, kv_scale, weights


def test_e4m3fn_table_matches_the_format():
    assert E4M3FN_TABLE[0x7E] == 448.0 and E4M3FN_TABLE[0xFE] == -448.0
    assert E4M3FN_TABLE[0x01] == 2.0**-9  # smallest subnormal
    assert E4M3FN_TABLE[0x08] == 2.0**-6  # smallest normal
    assert E4M3FN_TABLE[0x38] == 1.0
    assert np.isnan(E4M3FN_TABLE[0x7F]) and np.isnan(E4M3FN_TABLE[0xFF])
    assert not np.isinf(E4M3FN_TABLE).any()


def test_encode_round_trips_every_code_and_rounds_to_nearest_even(rng):
    codes = np.arange(256, dtype=np.uint8)
    finite = ~np.isnan(E4M3FN_TABLE)
    assert np.array_equal(encode_e4m3fn(E4M3FN_TABLE[finite]), codes[finite])
    # Between two neighbours, values below the midpoint go down, above go up, ties go to even.
    lo, hi = E4M3FN_TABLE[0x38], E4M3FN_TABLE[0x39]
    mid = (float(lo) + float(hi)) / 2
    assert encode_e4m3fn(np.array([mid]))[0] == 0x38
    assert encode_e4m3fn(np.array([np.nextafter(mid, 2.0)]))[0] == 0x39
    x = rng.standard_normal(10_000) * 50
    err = np.abs(decode_e4m3fn(encode_e4m3fn(x), np.float64) - np.clip(x, -448, 448))
    assert (err <= np.maximum(np.abs(x) * 2**-4, 2**-10)).all()
    assert encode_e4m3fn(np.array([1e9]))[0] == 0x7E  # saturates


@pytest.mark.parametrize("mode", WINDOW_MODES)
@pytest.mark.parametrize("clean", [True, False])
def test_reference_equals_naive_definition(rng, mode, clean):
    M, N, H, D = 13, 45, 32, 64
    try:
        ks, ke = make_windows(mode, M, N, rng)
    except WindowNotApplicable:
        M, N = 8, 48
        ks, ke = make_windows(mode, M, N, rng)
    q, k, s, w = random_inputs(rng, M, N, H, D)
    expected = naive_logits(q, k, s, w, ks, ke, clean)
    got = fp8_mqa_logits_ref(q, k, s, w, ks, ke, clean, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-12, atol=1e-12)


def test_reference_chunking_changes_nothing(rng, monkeypatch):
    M, N, H, D = 37, 300, 64, 128
    q, k, s, w = random_inputs(rng, M, N, H, D)
    ks, ke = make_windows("misaligned", M, N, rng)
    whole = fp8_mqa_logits_ref(q, k, s, w, ks, ke)
    monkeypatch.setattr(reference_module, "CHUNK_BYTES", 1)  # one row per chunk
    chunked = fp8_mqa_logits_ref(q, k, s, w, ks, ke)
    assert np.array_equal(np.isneginf(chunked), np.isneginf(whole))
    finite = np.isfinite(whole)
    # BLAS blocking may reorder float32 sums: bound the difference by the result's scale.
    np.testing.assert_allclose(chunked[finite], whole[finite], rtol=0, atol=1e-5 * np.abs(whole[finite]).max())


def test_reference_memory_stays_bounded_on_a_long_chunk(rng):
    # 64 rows of a 128K-key chunk at 32 heads: unchunked scores would be 1 GiB.
    M, N, H, D = 64, 131072, 32, 128
    q, k, s, w = random_inputs(rng, M, N, H, D)
    ks, ke = make_windows("causal", M, N, diagonal=True)
    tracemalloc.start()
    fp8_mqa_logits_ref(q, k, s, w, ks, ke)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2 * reference_module.CHUNK_BYTES + 8 * M * N + (64 << 20), peak


def test_windows_are_int32_and_each_mode_has_its_shape(rng):
    M, N = 64, 2048
    for mode in WINDOW_MODES:
        ks, ke = make_windows(mode, M, N, rng)
        assert ks.dtype == ke.dtype == np.int32 and ks.shape == ke.shape == (M,)
    ks, ke = make_windows("causal", M, M)
    assert ke[0] == 0  # public convention: no diagonal, row 0 of a square chunk is empty
    ks, ke = make_windows("causal", M, M, diagonal=True)
    assert ke[0] == 1
    ks, ke = make_windows("empty", M, N, rng)
    assert (ke[::3] < 0).all() and (ke[1::3] <= np.maximum(ks[1::3], 0)).all()
    ks, ke = make_windows("past_end", M, N, rng)
    assert (ks[::2] >= N).all() and (ke[::2] > N).all()
    ks, ke = make_windows("multi_req", M, N)
    assert len(np.unique(ks)) == 4 and (np.diff(ks) >= 0).all()
    ks, ke = make_windows("misaligned", M, N, rng)
    assert (ks % 32 != 0).all()
    with pytest.raises(WindowNotApplicable):
        make_windows("cp", 17, 76)


def test_clamp_and_mask():
    s, e = clamp_windows(np.array([-5, 3, 10, 90]), np.array([4, 2, 200, 95]), 64)
    assert s.tolist() == [0, 3, 10, 64] and e.tolist() == [4, 3, 64, 64]
    mask = window_mask(np.array([-5, 3]), np.array([4, 2]), 8)
    assert mask[0].tolist() == [True] * 4 + [False] * 4 and not mask[1].any()


def test_calc_diff_and_grade_catch_what_they_should(rng):
    x = rng.standard_normal(1000)
    assert calc_diff(x, x) == pytest.approx(0.0, abs=1e-15)
    assert calc_diff(x, -x) == pytest.approx(2.0)
    assert calc_diff(x, x * (1 + 1e-2 * rng.standard_normal(1000))) < 1e-3

    M, N, H, D = 9, 70, 32, 64
    q, k, s, w = random_inputs(rng, M, N, H, D)
    ks, ke = make_windows("misaligned", M, N, rng)
    for clean in (True, False):
        ref = fp8_mqa_logits_ref(q, k, s, w, ks, ke, clean)
        out = poison(np.empty((M, N), np.float32))
        out[window_mask(ks, ke, N)] = ref[window_mask(ks, ke, N)]
        if clean:
            out[~window_mask(ks, ke, N)] = -np.inf
        assert grade(out, ref, ks, ke, clean).ok
        missing = out.copy()
        missing[0, ks[0]] = np.nan
        assert not grade(missing, ref, ks, ke, clean).ok
        wrong = out.copy()
        wrong[window_mask(ks, ke, N)] *= -1
        assert not grade(wrong, ref, ks, ke, clean).ok
    stray = out.copy()
    stray[~window_mask(ks, ke, N)] = 0.0  # clean=False: writing outside the window is a failure
    g = grade(stray, ref, ks, ke, False)
    assert isinstance(g, Grade) and not g.ok and g.overwritten > 0


# ---- the per-logit gate (issue 15) ----
from rawindexer.testing.grading import LOGIT_EPS, logit_gate, worst_eps  # noqa: E402
from rawindexer.testing.reference import fp8_mqa_logits_ref_with_scale  # noqa: E402


def naive_scale(q, k, kv_scale, weights, ks, ke):
    """T[m, n] = kv_scale[n] * sum_h |relu(<q[m,h], k[n]>) * weights[m,h]| in the window, 0 outside."""
    M, H, D = q.shape
    N = k.shape[0]
    qf, kf = decode_e4m3fn(q, np.float64), decode_e4m3fn(k, np.float64)
    out = np.zeros((M, N))
    for m in range(M):
        lo, hi = max(0, min(int(ks[m]), N)), max(0, min(int(ke[m]), N))
        for n in range(lo, hi):
            out[m, n] = sum(abs(max(float(qf[m, h] @ kf[n]), 0.0) * float(weights[m, h])) for h in range(H)) * float(kv_scale[n])
    return out


def test_reference_with_scale_equals_the_definition(rng):
    M, N, H, D = 9, 40, 32, 64
    ks, ke = make_windows("misaligned", M, N, rng)
    q, k, s, w = random_inputs(rng, M, N, H, D)
    ref, total = fp8_mqa_logits_ref_with_scale(q, k, s, w, ks, ke)
    expected = naive_logits(q, k, s, w, ks, ke, True)
    assert np.array_equal(np.isneginf(ref), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(ref[finite], expected[finite], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(total, naive_scale(q, k, s, w, ks, ke), rtol=1e-12, atol=1e-12)
    assert (total[finite] >= np.abs(ref[finite]) * (1 - 1e-12)).all()


def test_logit_gate_judges_each_logit_by_its_own_scale(rng):
    M, N, H, D = 6, 50, 32, 64
    ks, ke = make_windows("causal", M, N, rng)
    q, k, s, w = random_inputs(rng, M, N, H, D)
    ref, total = fp8_mqa_logits_ref_with_scale(q, k, s, w, ks, ke)
    exact32 = ref.astype(np.float32)
    gate = logit_gate(exact32, ref, total, ks, ke)
    assert gate.ok and gate.worst < 1e-7 and worst_eps(exact32, ref, total, ks, ke) == gate.worst
    inside = np.argwhere(np.isfinite(ref) & (total > 0))
    m, n = inside[rng.integers(len(inside))]
    bumped = exact32.copy()
    bumped[m, n] = np.float32(ref[m, n] + 3 * LOGIT_EPS * total[m, n])
    gate = logit_gate(bumped, ref, total, ks, ke)
    assert not gate.ok and gate.failing == 1 and gate.worst_at == (m, n) and 2.9e-5 < gate.worst < 3.1e-5
    assert logit_gate(bumped, ref, total, ks, ke, eps=4e-5).ok
    # Non-finite output where the reference is finite fails; anything outside the window is not judged.
    nan_in = exact32.copy()
    nan_in[m, n] = np.nan
    assert logit_gate(nan_in, ref, total, ks, ke).worst == np.inf
    outside = np.argwhere(~np.isfinite(ref))
    junk = exact32.copy()
    junk[tuple(outside[0])] = 12345.0
    assert logit_gate(junk, ref, total, ks, ke).ok


def test_logit_gate_demands_exact_zero_where_every_term_is_zero():
    ks, ke = np.array([0], np.int32), np.array([2], np.int32)
    ref, total = np.array([[0.0, 1.0]]), np.array([[0.0, 1.0]])
    assert logit_gate(np.array([[0.0, 1.0]], np.float32), ref, total, ks, ke).ok
    assert not logit_gate(np.array([[1e-30, 1.0]], np.float32), ref, total, ks, ke).ok
