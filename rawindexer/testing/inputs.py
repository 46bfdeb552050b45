"""Random host inputs of one fp8_mqa_logits call and the check of a result against the reference."""
from __future__ import annotations

import numpy as np

from ..fp8 import random_e4m3fn
from .grading import grade
from .reference import fp8_mqa_logits_ref


def random_inputs(rng: np.random.Generator, M: int, N: int, H: int, D: int, cu_seqlen_ks: np.ndarray,
                  cu_seqlen_ke: np.ndarray) -> dict[str, np.ndarray]:
    """Keyword arguments of one call: q [M, H, D] and k [N, D] float8_e4m3fn (random finite codes),
    kv_scale [N] float32 in [0, 2), weights [M, H] float32 ~ N(0, 1), the given [M] int32 windows."""
    return dict(q_fp8=random_e4m3fn(rng, (M, H, D)), k_fp8=random_e4m3fn(rng, (N, D)),
                kv_scale=rng.uniform(0, 2, N).astype(np.float32),
                weights=rng.standard_normal((M, H)).astype(np.float32),
                cu_seqlen_ks=np.asarray(cu_seqlen_ks, np.int32), cu_seqlen_ke=np.asarray(cu_seqlen_ke, np.int32))


def check_logits(inputs: dict[str, np.ndarray], out, clean: bool = True) -> None:
    """Assert that ``out`` (any array numpy can read) passes :func:`grade` against the float64 reference of
    ``inputs`` (a :func:`random_inputs` dict)."""
    ref = fp8_mqa_logits_ref(*inputs.values(), clean, dtype=np.float64)
    g = grade(np.asarray(out), ref, inputs["cu_seqlen_ks"], inputs["cu_seqlen_ke"], clean)
    assert g.ok, g.message
