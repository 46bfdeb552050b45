"""The NaN/Inf contract of docs/NUMERICS.md on the shipped gfx950 binary (emulated), every design and
every BLOCK_M it builds:

* a NaN fp8 byte in one row's q, or a NaN / Inf in one row's weights, changes no other row's output:
  bitwise equal to a clean run;
* a NaN fp8 byte in K at key n, or a NaN kv_scale[n], changes column n only;
* the poisoned row itself: on the mrf and seed designs a NaN score is dropped by the ReLU (bitwise equal to a run
  with that head's weight set to 0); on the bf16 MFMA-reduce designs (mr, mrp) a NaN byte of q reads as +0 (bitwise equal
  to a run with that byte zeroed); a NaN weight makes the row's in-window logits NaN; an Inf weight makes
  them non-finite exactly where the float64 reference is (NaN where it is NaN, the same infinity where it
  is infinite).
"""
import numpy as np
import pytest

import rawindexer
from rawindexer.dispatch.gfx950 import DESIGNS, Gfx950Family
from rawindexer.fp8 import random_e4m3fn
from rawindexer.testing.reference import fp8_mqa_logits_ref

NAN_CODES = (0x7F, 0xFF)


def _grid():
    family = Gfx950Family()
    out = []
    for design in DESIGNS:
        for h, d in ((32, 128), (32, 64), (64, 128), (128, 64)):
            for bm in sorted({bm for bm, _ in family.instances(h, d, design)}):
                out.append((design, h, d, bm))
    return out


GRID = _grid()
# CI runs every (design, BLOCK_M) at H=32, D=128 and each design's largest BLOCK_M at the other shapes;
# the rest under -m slow.
FAST = [c for c in GRID if (c[1], c[2]) == (32, 128)
        or c[3] == max(bm for p, h, d, bm in GRID if (p, h, d) == c[:3])]


def _inputs(rng, M, N, H, D):
    return dict(q_fp8=random_e4m3fn(rng, (M, H, D)), k_fp8=random_e4m3fn(rng, (N, D)),
                kv_scale=rng.uniform(0.5, 1.5, N).astype(np.float32),
                weights=(rng.standard_normal((M, H)) * H**-0.5).astype(np.float32),
                cu_seqlen_ks=rng.integers(-3, 5, M).astype(np.int32),
                cu_seqlen_ke=rng.integers(N - 5, N + 3, M).astype(np.int32))


def _run(ops, clean, **tunables):
    M, N = ops["q_fp8"].shape[0], ops["k_fp8"].shape[0]
    out = np.full((M, N), np.nan, np.float32)
    rawindexer.fp8_mqa_logits(**ops, clean_logits=clean, out=out, **tunables)
    return out


def _same_bits(a, b):
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


def check_contract(rng, variant, H, D, block_m):
    M, N = max(2 * block_m, 3), int(rng.integers(40, 100))
    ops = _inputs(rng, M, N, H, D)
    r_q, r_w = rng.choice(M, 2, replace=False)   # often in the same row block
    n_k, n_s = rng.choice(N, 2, replace=False)
    h = int(rng.integers(H))
    clean = bool(rng.integers(2))
    tunables = dict(variant=variant, block_m=block_m, split_n=int(rng.integers(1, 3)), num_warps=int(rng.integers(1, 3)))

    bad = {name: a.copy() for name, a in ops.items()}
    bad["q_fp8"][r_q, h, rng.integers(D)] = rng.choice(NAN_CODES)
    bad["weights"][r_w, int(rng.integers(H))] = np.nan
    bad["k_fp8"][n_k, rng.integers(D)] = rng.choice(NAN_CODES)
    bad["kv_scale"][n_s] = np.nan
    if variant in ("seed", "mrf"):  # the clean run: the poisoned head dropped by the ReLU
        weights = ops["weights"].copy()
        weights[r_q, h] = 0.0
        clean_ops = {**ops, "weights": weights}
    else:                  # the clean run: the NaN byte of q read as +0
        clean_ops = {**ops, "q_fp8": np.where(np.isin(bad["q_fp8"], NAN_CODES), np.uint8(0), bad["q_fp8"])}

    ref = _run(clean_ops, clean, **tunables)
    got = _run(bad, clean, **tunables)
    label = f"{variant} H={H} D={D} BM={block_m} M={M} N={N} q-row {r_q} w-row {r_w} K key {n_k} scale key {n_s}"
    cols = np.ones(N, bool)
    cols[[n_k, n_s]] = False
    others = np.ones(M, bool)
    others[r_w] = False
    assert _same_bits(got[others][:, cols], ref[others][:, cols]), f"{label}: a row or column outside the poison changed"
    lo, hi = max(0, ops["cu_seqlen_ks"][r_w]), min(N, ops["cu_seqlen_ke"][r_w])
    assert np.isnan(got[r_w, lo:hi]).all(), f"{label}: a NaN weight must make its row's in-window logits NaN"
    # Column n_s (NaN kv_scale) is NaN in every row whose window holds it; column n_k is unspecified.
    inside = (ops["cu_seqlen_ks"] <= n_s) & (n_s < ops["cu_seqlen_ke"])
    assert np.isnan(got[inside, n_s]).all(), f"{label}: a NaN kv_scale[n] must make column n NaN inside the windows"


@pytest.mark.parametrize("variant,heads,head_dim,block_m", FAST)
def test_non_finite_inputs_stay_in_their_row_or_column(rng, variant, heads, head_dim, block_m):
    check_contract(rng, variant, heads, head_dim, block_m)


@pytest.mark.slow
@pytest.mark.parametrize("variant,heads,head_dim,block_m", [c for c in GRID if c not in FAST])
def test_non_finite_inputs_stay_in_their_row_or_column_all(rng, variant, heads, head_dim, block_m):
    check_contract(rng, variant, heads, head_dim, block_m)


@pytest.mark.parametrize("variant", DESIGNS)
def test_inf_weight_gives_what_ieee_gives(rng, variant):
    M, N, H, D = 5, 60, 32, 128
    ops = _inputs(rng, M, N, H, D)
    ops["cu_seqlen_ks"][:] = 0
    ops["cu_seqlen_ke"][:] = N
    ops["kv_scale"][int(rng.integers(N))] = 0.0  # inf x 0 after the head sum: NaN in that column
    bad = {**ops, "weights": ops["weights"].copy()}
    r = int(rng.integers(M))
    bad["weights"][r, int(rng.integers(H))] = rng.choice([np.inf, -np.inf])
    got = _run(bad, True, variant=variant)
    clean = _run(ops, True, variant=variant)
    ref = fp8_mqa_logits_ref(*bad.values(), True, dtype=np.float64)
    rows = np.arange(M) != r
    assert _same_bits(got[rows], clean[rows])
    assert np.array_equal(np.isnan(got[r]), np.isnan(ref[r])), (got[r], ref[r])
    assert np.array_equal(got[r][np.isinf(ref[r])], ref[r][np.isinf(ref[r])].astype(np.float32))
