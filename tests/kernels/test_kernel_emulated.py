"""The seed's test plan, run on the shipped gfx950 binary through the emulator (issue 3, item 8).

Every case goes through the public API with numpy arrays (the CPU device is the emulator), on a
NaN-poisoned output, with memcheck on (the emulator registers exactly the operands' spans), graded by
the exact -inf mask and calc_diff < 1e-3 against the numpy reference, and by the per-logit gate
|out - ref| <= eps * T against the float64 result of the same fp8 inputs (eps = 1e-5 for the default
design, each design's documented bound otherwise: rawindexer.dispatch.gfx950.LOGIT_EPS).
"""
import itertools

import numpy as np
import pytest

import rawindexer
from rawindexer.fp8 import random_e4m3fn
from rawindexer.dispatch.base import Tunables
from rawindexer.dispatch.gfx950 import LOGIT_EPS, Gfx950Family
from rawindexer.testing.grading import grade, logit_gate
from rawindexer.testing.reference import fp8_mqa_logits_ref, fp8_mqa_logits_ref_with_scale
from rawindexer.testing.windows import WINDOW_MODES, WindowNotApplicable, make_windows

HEAD_SHAPES = [(h, d) for h in (32, 64, 128) for d in (64, 128)]


def inputs(rng, M, N, H, D, mode):
    ks, ke = make_windows(mode, M, N, rng)
    return dict(
        q_fp8=random_e4m3fn(rng, (M, H, D)),
        k_fp8=random_e4m3fn(rng, (N, D)),
        kv_scale=rng.uniform(0.0, 2.0, N).astype(np.float32),
        weights=(rng.standard_normal((M, H)) * H**-0.5).astype(np.float32),
        cu_seqlen_ks=ks,
        cu_seqlen_ke=ke,
    )


def run_case(rng, M, N, H, D, mode, clean, pad=0, **tunables):
    try:
        ops = inputs(rng, M, N, H, D, mode)
    except WindowNotApplicable:
        pytest.skip(f"{mode} does not apply to ({M}, {N})")
    storage = np.full((M, N + pad), np.nan, dtype=np.float32)  # poisoned, padding included
    out = storage[:, :N]
    result = rawindexer.fp8_mqa_logits(**ops, clean_logits=clean, out=out, **tunables)
    assert result is out
    ref = fp8_mqa_logits_ref(ops["q_fp8"], ops["k_fp8"], ops["kv_scale"], ops["weights"],
                             ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], clean, dtype=np.float64)
    g = grade(out, ref, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], clean)
    assert g.ok, f"({M}, {N}, H={H}, D={D}, {mode}, clean={clean}, {tunables}): {g.message}"
    assert_logit_gate(ops, out, H, D, tunables.get("variant"), f"({M}, {N}, H={H}, D={D}, {mode}, {tunables})")
    if pad:
        assert np.isnan(storage[:, N:]).all(), "the kernel wrote into the row padding"
    return ops, out


def design_eps(heads, head_dim, variant=None):
    """The per-logit gate's eps of the design that runs (the default when ``variant`` is None)."""
    return LOGIT_EPS[Gfx950Family().design(Tunables(variant=variant), heads, head_dim)]


def assert_logit_gate(ops, out, heads, head_dim, variant, label):
    ref, scale = fp8_mqa_logits_ref_with_scale(ops["q_fp8"], ops["k_fp8"], ops["kv_scale"], ops["weights"],
                                               ops["cu_seqlen_ks"], ops["cu_seqlen_ke"])
    gate = logit_gate(out, ref, scale, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], design_eps(heads, head_dim, variant))
    assert gate.ok, f"{label}: {gate.message}"
    return gate


def test_default_design_is_fp32_class_at_every_head_shape():
    for h, d in HEAD_SHAPES:
        assert design_eps(h, d) <= 1e-5, (h, d)


@pytest.mark.parametrize("heads,head_dim", HEAD_SHAPES)
@pytest.mark.parametrize("mode", WINDOW_MODES)
@pytest.mark.parametrize("clean", [True, False])
def test_window_modes_for_every_head_shape(rng, heads, head_dim, mode, clean):
    M, N = (12, 96) if mode == "cp" else (17, 76)
    run_case(rng, M, N, heads, head_dim, mode, clean)


# The small shapes of the seed's sweep (NOTES section 1) plus ones whose M and N are not multiples of
# 32, BLOCK_M or 4.
SEED_SMALL_SHAPES = [(1, 1), (1, 113), (17, 76), (61, 1024), (128, 1024), (64, 2048), (128, 64)]
ODD_SHAPES = [(3, 33), (7, 31), (9, 65), (13, 129), (31, 200), (35, 97)]


@pytest.mark.parametrize("M,N", SEED_SMALL_SHAPES + ODD_SHAPES)
@pytest.mark.parametrize("clean", [True, False])
def test_seed_and_odd_shapes(rng, M, N, clean):
    mode = ["causal", "misaligned", "multi_req", "empty", "past_end"][(M + N) % 5]
    try:
        make_windows(mode, M, N, rng)
    except WindowNotApplicable:
        mode = "causal"
    run_case(rng, M, N, 32, 128, mode, clean)


def test_padded_output_rows_are_left_alone(rng):
    run_case(rng, 21, 70, 64, 128, "misaligned", clean=True, pad=13)
    run_case(rng, 21, 70, 64, 128, "past_end", clean=False, pad=5)


def _tunable_grid():
    """(variant, heads, head_dim, block_m) for every BLOCK_M each kernel design builds, read from the
    manifest so that a new variant is swept without editing this list."""
    from rawindexer.dispatch.gfx950 import DESIGNS, Gfx950Family

    family = Gfx950Family()
    grid = []
    for design in DESIGNS:
        for h, d in HEAD_SHAPES:
            for bm in sorted({bm for bm, _ in family.instances(h, d, design)}):
                grid.append((design, h, d, bm))
    return grid


@pytest.mark.parametrize("variant,heads,head_dim,block_m", _tunable_grid())
def test_tunables(rng, variant, heads, head_dim, block_m):
    # Each BLOCK_M against a fresh random draw of the other tunables (split_n 1..4, num_warps 1..8,
    # unroll2, reverse_rows), so repeated runs cover the whole grid.
    split_n = int(rng.integers(1, 5))
    num_warps = int(rng.integers(1, 9))
    built = {u for bm, u in Gfx950Family().instances(heads, head_dim, variant) if bm == block_m}
    unroll2 = bool(rng.integers(2)) if variant == "seed" and 2 in built else None  # MFMA-reduce loops always pipeline
    reverse = bool(rng.integers(2))
    mode = WINDOW_MODES[int(rng.integers(len(WINDOW_MODES)))]
    M, N = (6 * block_m, 96 * block_m) if mode == "cp" else (int(rng.integers(1, 4 * block_m + 3)), int(rng.integers(40, 300)))
    if mode == "multi_req":
        M = max(M, 2)  # two requests at least
    run_case(rng, M, N, heads, head_dim, mode, bool(rng.integers(2)), block_m=block_m, split_n=split_n,
             num_warps=num_warps, unroll2=unroll2, reverse_rows=reverse, variant=variant)


@pytest.mark.parametrize("variant,heads,head_dim", sorted({(p, h, d) for p, h, d, _ in _tunable_grid()}))
@pytest.mark.parametrize("mode", WINDOW_MODES)
def test_window_modes_for_every_design(rng, variant, heads, head_dim, mode):
    M, N = (12, 96) if mode == "cp" else (19, 150)
    run_case(rng, M, N, heads, head_dim, mode, bool(rng.integers(2)), variant=variant)


@pytest.mark.parametrize("split_n,num_warps,unroll2,reverse", itertools.product([1, 3], [1, 2, 8], [None, True], [False, True]))
def test_split_and_warps_at_the_default_block_m(rng, split_n, num_warps, unroll2, reverse):
    # unroll2 exists on the seed design only: True runs the seed's two-tile loop, None the default design.
    run_case(rng, 19, 333, 32, 128, "multi_req", True, split_n=split_n, num_warps=num_warps,
             unroll2=unroll2, reverse_rows=reverse, variant="seed" if unroll2 else None)


def test_two_launches_are_bitwise_identical(rng):
    ops = inputs(rng, 24, 300, 32, 128, "misaligned")
    first = rawindexer.fp8_mqa_logits(**ops)
    second = rawindexer.fp8_mqa_logits(**ops)
    assert first.tobytes() == second.tobytes()


def test_negative_kv_scale_is_rejected_before_launch(rng):
    ops = inputs(rng, 4, 40, 32, 128, "causal")
    ops["kv_scale"][3] = -1.0
    out = np.full((4, 40), np.nan, np.float32)
    with pytest.raises(ValueError, match="kv_scale: expected values >= 0"):
        rawindexer.fp8_mqa_logits(**ops, out=out)
    assert np.isnan(out).all()


def test_empty_problem_launches_nothing(rng):
    ops = inputs(rng, 0, 10, 32, 128, "causal")
    assert rawindexer.fp8_mqa_logits(**ops).shape == (0, 10)


@pytest.mark.slow
@pytest.mark.parametrize("M,N,mode", [(1024, 1000, "causal"), (128, 2048, "multi_req"), (64, 8192, "causal")])
def test_larger_seed_shapes(rng, M, N, mode):
    run_case(rng, M, N, 32, 128, mode, True)


@pytest.mark.slow
@pytest.mark.parametrize("M,N", [(16, 32768), (8, 65536), (4, 131072)])
def test_real_chunk_widths_at_reduced_M(rng, M, N):
    """The seed's real chunks (4096, 32768), (2048, 65536), (1024, 131072) at reduced M: the last rows of
    a causal chunk, whose windows span almost the whole key range."""
    run_case(rng, M, N, 32, 128, "causal", True)
