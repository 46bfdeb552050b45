"""The numpy reference every test and benchmark is graded against.

    logits[m, n] = sum_h relu(<Q[m,h,:], K[n,:]>) * kv_scale[n] * weights[m,h]   for n in window(m)

Computed from the same fp8 codes the kernel reads, in float32 or float64, chunked over query rows so
that a (1024, 131072) chunk with 32 heads stays well under 2 GiB of host memory.
"""
from __future__ import annotations

import numpy as np

from ..fp8 import decode
from .windows import clamp_windows

#: bytes of the [rows, H, cols] score block one chunk may hold
CHUNK_BYTES = 256 << 20


def fp8_mqa_logits_ref(
    q: np.ndarray,
    k: np.ndarray,
    kv_scale: np.ndarray,
    weights: np.ndarray,
    cu_seqlen_ks: np.ndarray,
    cu_seqlen_ke: np.ndarray,
    clean_logits: bool = True,
    *,
    out: np.ndarray | None = None,
    dtype: type = np.float32,
    fp8_format: str = "e4m3fn",
) -> np.ndarray:
    """Reference logits.

    q: [M, H, D] uint8 codes of ``fp8_format`` (e4m3fn or e4m3fnuz); k: [N, D] uint8 codes; kv_scale: [N] float; weights: [M, H] float;
    cu_seqlen_ks / cu_seqlen_ke: [M] int (end exclusive, clamped to [0, N)).
    Returns [M, N] ``dtype``. Outside each row's window: -inf when ``clean_logits``; otherwise the
    values of ``out`` are left as they were (NaN when ``out`` is None, i.e. "not written").
    """
    M, H, D = q.shape
    N = k.shape[0]
    if k.shape != (N, D) or kv_scale.shape != (N,) or weights.shape != (M, H):
        raise ValueError(f"shapes disagree: q {q.shape}, k {k.shape}, kv_scale {kv_scale.shape}, weights {weights.shape}")
    if out is None:
        out = np.full((M, N), -np.inf if clean_logits else np.nan, dtype=dtype)
    elif clean_logits:
        out[...] = -np.inf
    starts, ends = clamp_windows(cu_seqlen_ks, cu_seqlen_ke, N)

    for m0, m1, lo, hi, inside, logits, _ in _chunks(q, k, kv_scale, weights, starts, ends, dtype, False, fp8_format):
        block = out[m0:m1, lo:hi]
        block[inside] = logits[inside]
    return out


def _chunks(q, k, kv_scale, weights, starts, ends, dtype, with_scale: bool, fp8_format: str = "e4m3fn"):
    """Per chunk of query rows: (m0, m1, lo, hi, inside [rows, hi-lo], logits, T or None) over the chunk's
    key span [lo, hi) (the union of its rows' windows)."""
    M, H, D = q.shape
    N = k.shape[0]
    kf = decode(k, fp8_format, dtype)
    scale = np.asarray(kv_scale, dtype=dtype)
    w = np.asarray(weights, dtype=dtype)
    rows_per_chunk = max(1, CHUNK_BYTES // max(1, H * N * np.dtype(dtype).itemsize))
    for m0 in range(0, M, rows_per_chunk):
        m1 = min(M, m0 + rows_per_chunk)
        live = ends[m0:m1] > starts[m0:m1]
        if not live.any():
            continue
        lo = int(starts[m0:m1][live].min())
        hi = int(ends[m0:m1][live].max())
        qf = decode(q[m0:m1], fp8_format, dtype).reshape(-1, D)
        scores = (qf @ kf[lo:hi].T).reshape(m1 - m0, H, hi - lo)
        np.maximum(scores, 0, out=scores)  # NaN stays NaN
        logits = np.einsum("mhn,mh->mn", scores, w[m0:m1], optimize=True) * scale[lo:hi]
        total = None
        if with_scale:
            total = np.einsum("mhn,mh->mn", scores, np.abs(w[m0:m1]), optimize=True) * scale[lo:hi]
        cols = np.arange(lo, hi)
        inside = (cols[None, :] >= starts[m0:m1, None]) & (cols[None, :] < ends[m0:m1, None])
        yield m0, m1, lo, hi, inside, logits, total


def fp8_mqa_logits_ref_with_scale(q: np.ndarray, k: np.ndarray, kv_scale: np.ndarray, weights: np.ndarray,
                                  cu_seqlen_ks: np.ndarray, cu_seqlen_ke: np.ndarray,
                                  fp8_format: str = "e4m3fn") -> tuple[np.ndarray, np.ndarray]:
    """(ref, T), both [M, N] float64: the float64 reference (-inf outside each row's window) and the
    summation's own scale T[m, n] = kv_scale[n] * sum_h |relu(<q[m,h], k[n]>) * weights[m,h]| (0 outside
    the window), against which rawindexer.testing.grading.logit_gate judges each logit's error."""
    M, H, D = q.shape
    N = k.shape[0]
    if k.shape != (N, D) or kv_scale.shape != (N,) or weights.shape != (M, H):
        raise ValueError(f"shapes disagree: q {q.shape}, k {k.shape}, kv_scale {kv_scale.shape}, weights {weights.shape}")
    starts, ends = clamp_windows(cu_seqlen_ks, cu_seqlen_ke, N)
    ref = np.full((M, N), -np.inf)
    total = np.zeros((M, N))
    for m0, m1, lo, hi, inside, logits, t in _chunks(q, k, kv_scale, weights, starts, ends, np.float64, True, fp8_format):
        ref[m0:m1, lo:hi][inside] = logits[inside]
        total[m0:m1, lo:hi][inside] = t[inside]
    return ref, total
