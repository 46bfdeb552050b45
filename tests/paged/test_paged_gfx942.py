"""The decode kernel's gfx942 binary through the emulator (``arch="gfx942"``): e4m3fn caches read in place
and e4m3fnuz caches, graded by the per-logit bound of rawindexer.testing.paged_grading against the float64
reference of the same codes; the gfx942 LDS limit and the format errors."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rawindexer
from rawindexer.emulator import fp8 as efp8
from rawindexer.fp8 import decode
from rawindexer.testing.paged_cases import make_case, ragged_lengths
from rawindexer.testing.paged_grading import grade_paged
from rawindexer.testing.paged_reference import fp8_paged_mqa_logits_ref, fuse_kv_cache, split_kv_cache
from rawindexer.validation import ValidationError

ARCH = "gfx942"


def run_and_grade(case, clean, fmt, **tunables):
    case.poison()
    got = rawindexer.fp8_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean_logits=clean, out=case.out, arch=ARCH,
                                          fp8_format=fmt, **tunables)
    assert got is case.out
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean, with_bound=True, fp8_format=fmt or "e4m3fn")
    return grade_paged(case.out, ref, bound, case.lengths(), clean)


def as_fnuz(case):
    """The same values as e4m3fnuz codes (exact: the generator's values are far below 240)."""
    def conv(codes):
        vals = decode(codes, "e4m3fn")
        out = efp8.from_f32(vals, efp8.FP8_FNUZ).astype(np.uint8)
        np.testing.assert_array_equal(decode(out, "e4m3fnuz"), vals)
        return out
    keys, scales = split_kv_cache(case.kv_cache, case.q.shape[-1])
    out = np.full_like(case.out.base if case.out.base is not None else case.out, np.nan)
    return dataclasses.replace(case, q=conv(case.q), kv_cache=fuse_kv_cache(conv(keys), scales.copy()),
                               out=out[:, :case.out.shape[1]])


@pytest.mark.parametrize("shape,block_size,next_n,two_d,clean", [
    ((32, 128), 64, 2, False, True), ((64, 64), 16, 4, True, False), ((128, 128), 1, 3, False, True),
    ((32, 64), 16, 1, True, True)])
def test_fn_and_fnuz_caches(rng, shape, block_size, next_n, two_d, clean):
    heads, head_dim = shape
    case = make_case(rng, ragged_lengths(block_size, {1: 70, 16: 90, 64: 200}[block_size]), next_n=next_n,
                     heads=heads, head_dim=head_dim, block_size=block_size, two_d=two_d, share_blocks=True)
    case.q.reshape(-1)[rng.choice(case.q.size, 8, replace=False)] = 0x80  # -0 in q; the cache gets some below
    keys, _ = split_kv_cache(case.kv_cache, head_dim)
    keys.reshape(-1)[rng.choice(keys.size, 8, replace=False)] = 0x80
    g = run_and_grade(case, clean, None)
    assert g.ok, g.message
    fn_out = case.out.copy()
    fnuz = as_fnuz(case)
    g = run_and_grade(fnuz, clean, "e4m3fnuz")
    assert g.ok, g.message
    # the same values in either format: bit-identical logits (the weights' factor 4 is exact)
    np.testing.assert_array_equal(np.nan_to_num(fnuz.out, nan=7.0).view(np.uint32),
                                  np.nan_to_num(fn_out, nan=7.0).view(np.uint32))


def test_lds_limit_of_gfx942_is_named(rng):
    case = make_case(rng, [40], next_n=4, heads=128, head_dim=128, block_size=16)
    with pytest.raises(ValueError, match="LDS"):
        run_and_grade(case, True, None)
    assert rawindexer.is_paged_supported(128, 128, 16, arch=ARCH)


def test_gfx950_refuses_fnuz_caches(rng):
    case = make_case(rng, [40], next_n=1, heads=32, head_dim=64, block_size=16)
    with pytest.raises((ValueError, ValidationError), match="fp8_format"):
        rawindexer.fp8_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                         case.max_context_len, out=case.out, fp8_format="e4m3fnuz")
