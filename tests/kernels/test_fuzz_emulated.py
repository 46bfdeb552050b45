"""Fuzz the shipped gfx950 binary on the emulator: random shapes, arbitrary int32 windows (negative, past
N, reversed, one or two keys wide), random tunables and designs, inputs chosen to cancel (weights of both
signs, a head dominating, kv_scale zeros). Each case is graded by the exact -inf mask, calc_diff, and the
per-logit gate |out - ref| <= eps * T against the float64 result of the same fp8 inputs, with the eps of
the design that ran (1e-5 for the default). A few cases in CI, many more under ``-m slow``.
"""
import numpy as np
import pytest

import rawindexer
from rawindexer.dispatch.base import Tunables
from rawindexer.dispatch.gfx950 import LOGIT_EPS, DESIGNS, Gfx950Family
from rawindexer.fp8 import random_e4m3fn
from rawindexer.testing.grading import grade, logit_gate
from rawindexer.testing.reference import fp8_mqa_logits_ref_with_scale

HEAD_SHAPES = [(h, d) for h in (32, 64, 128) for d in (64, 128)]


def fuzz_windows(rng, M, N):
    """Arbitrary int32 windows: a mix of narrow (1-2 keys), empty, reversed, out-of-range and wide ones."""
    ks = rng.integers(-4, N + 4, M)
    kind = rng.integers(0, 4, M)
    width = np.where(kind == 0, rng.integers(1, 3, M), np.where(kind == 1, rng.integers(-3, 1, M),
                     rng.integers(1, N + 8, M)))
    return ks.astype(np.int32), (ks + width).astype(np.int32)


def fuzz_inputs(rng, M, N, H, D):
    q = random_e4m3fn(rng, (M, H, D), scale=float(rng.choice([0.05, 1.0, 60.0])))
    k = random_e4m3fn(rng, (N, D), scale=float(rng.choice([0.05, 1.0, 60.0])))
    kv_scale = rng.uniform(0, 2, N).astype(np.float32)
    kv_scale[rng.random(N) < 0.1] = 0.0
    w = rng.standard_normal((M, H))
    if rng.random() < 0.5:  # pairs of heads with opposite weights of almost equal size: cancellation
        w[:, 1::2] = -w[:, 0::2] * (1 + 1e-3 * rng.standard_normal((M, H // 2)))
    if rng.random() < 0.3:  # one head dominates
        w[:, int(rng.integers(H))] *= 1e4
    ks, ke = fuzz_windows(rng, M, N)
    return dict(q_fp8=q, k_fp8=k, kv_scale=kv_scale, weights=(w * H**-0.5).astype(np.float32),
                cu_seqlen_ks=ks, cu_seqlen_ke=ke)


def fuzz_case(rng, variant=None):
    family = Gfx950Family()
    H, D = HEAD_SHAPES[int(rng.integers(len(HEAD_SHAPES)))]
    design = family.design(Tunables(variant=variant), H, D)
    block_ms = sorted({bm for bm, _ in family.instances(H, D, design)})
    block_m = int(rng.choice(block_ms)) if rng.random() < 0.5 else 0
    M, N = int(rng.integers(1, 12)), int(rng.integers(1, 160))
    ops = fuzz_inputs(rng, M, N, H, D)
    clean = bool(rng.integers(2))
    tunables = dict(block_m=block_m, split_n=int(rng.integers(0, 4)), num_warps=int(rng.integers(0, 5)),
                    reverse_rows=bool(rng.integers(2)), variant=variant)
    out = np.full((M, N), np.nan, np.float32)
    rawindexer.fp8_mqa_logits(**ops, clean_logits=clean, out=out, **tunables)
    ref, scale = fp8_mqa_logits_ref_with_scale(*ops.values())
    label = f"(M={M}, N={N}, H={H}, D={D}, clean={clean}, {tunables}, ks={ops['cu_seqlen_ks']}, ke={ops['cu_seqlen_ke']})"
    g = grade(out, ref, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], clean)
    assert g.mask_ok and g.unwritten == 0 and g.overwritten == 0, f"{label}: {g.message}"
    gate = logit_gate(out, ref, scale, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], LOGIT_EPS[design])
    assert gate.ok, f"{label}: {gate.message}"
    return gate


@pytest.mark.parametrize("case", range(6))
def test_fuzz_default_design(rng, case):
    fuzz_case(rng)


@pytest.mark.parametrize("variant", DESIGNS)
def test_fuzz_each_design(rng, variant):
    fuzz_case(rng, variant)


@pytest.mark.slow
@pytest.mark.parametrize("case", range(200))
def test_fuzz_many(rng, case):
    fuzz_case(rng, None if case % 2 else DESIGNS[(case // 2) % len(DESIGNS)])
