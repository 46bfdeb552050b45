"""numpy reference of fp8_paged_mqa_logits (decode over a paged, fused fp8 key cache), plus the helpers
that read the fused cache layout and turn context_lens into per-row lengths.

    logits[b*next_n + j, t] = sum_h relu(<q[b,j,h,:], K_b[t,:]>) * scale_b[t] * weights[b*next_n + j, h]

for t < len(b, j): ``context_lens[b] - next_n + j + 1`` (1-D [B]) or ``context_lens[b, j]`` (2-D
[B, next_n]), clamped to [0, max_context_len]. Token t of sequence b is slot t % block_size of physical
block block_table[b, t // block_size]. A block of the fused cache [num_blocks, block_size, 1, D + 4]
uint8 holds block_size * D fp8 key bytes, then block_size float32 scales (docs/PAGED.md).
"""
from __future__ import annotations

import numpy as np

from ..fp8 import decode


def split_kv_cache(kv_cache: np.ndarray, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Fused cache [num_blocks, block_size, 1, head_dim + 4] uint8 -> (keys [num_blocks, block_size,
    head_dim] uint8 fp8 codes, scales [num_blocks, block_size] float32), both views of the same bytes."""
    num_blocks, block_size = kv_cache.shape[:2]
    flat = np.ascontiguousarray(kv_cache).reshape(num_blocks, block_size * (head_dim + 4))
    keys = flat[:, : block_size * head_dim].reshape(num_blocks, block_size, head_dim)
    scales = flat[:, block_size * head_dim:].copy().view(np.float32).reshape(num_blocks, block_size)
    return keys, scales


def fuse_kv_cache(keys: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_kv_cache`: keys [num_blocks, block_size, D] uint8 and scales
    [num_blocks, block_size] float32 -> fused [num_blocks, block_size, 1, D + 4] uint8."""
    num_blocks, block_size, head_dim = keys.shape
    flat = np.empty((num_blocks, block_size * (head_dim + 4)), np.uint8)
    flat[:, : block_size * head_dim] = keys.reshape(num_blocks, -1)
    flat[:, block_size * head_dim:] = np.ascontiguousarray(scales, np.float32).view(np.uint8).reshape(num_blocks, -1)
    return flat.reshape(num_blocks, block_size, 1, head_dim + 4)


def row_lengths(context_lens: np.ndarray, next_n: int, max_context_len: int) -> np.ndarray:
    """Valid length of each output row [B * next_n] (int64), clamped to [0, max_context_len]."""
    lens = np.asarray(context_lens, dtype=np.int64)
    if lens.ndim == 1:
        lens = lens[:, None] - next_n + np.arange(next_n)[None, :] + 1
    elif lens.shape[1] != next_n:
        raise ValueError(f"context_lens: expected [B] or [B, next_n={next_n}], got shape {lens.shape}")
    return np.clip(lens.reshape(-1), 0, max_context_len)


def fp8_paged_mqa_logits_ref(q: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                             block_table: np.ndarray, max_context_len: int, clean_logits: bool = True, *,
                             out: np.ndarray | None = None, dtype: type = np.float64,
                             with_bound: bool = False,
                             fp8_format: str = "e4m3fn") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Reference logits [B * next_n, max_context_len] of ``dtype``.

    q [B, next_n, H, D] uint8 fp8 codes of ``fp8_format`` (e4m3fn or e4m3fnuz; the cache's keys too); kv_cache fused uint8 (module docstring); weights [B*next_n, H]
    float; context_lens [B] or [B, next_n] int; block_table [B, max_blocks] int. Outside each row's length:
    -inf when ``clean_logits``, else ``out``'s values are kept (NaN when ``out`` is None: "not written").
    With ``with_bound`` also returns T [B*next_n, max_context_len] = scale[t] * sum_h |relu(<q,k>) w|
    (0 outside), the magnitude the per-logit error gate is relative to.
    """
    B, next_n, H, D = q.shape
    keys, scales = split_kv_cache(kv_cache, D)
    block_size = keys.shape[1]
    lens = row_lengths(context_lens, next_n, max_context_len).reshape(B, next_n)
    if out is None:
        out = np.full((B * next_n, max_context_len), -np.inf if clean_logits else np.nan, dtype=dtype)
    elif clean_logits:
        out[...] = -np.inf
    bound = np.zeros((B * next_n, max_context_len), dtype=dtype) if with_bound else None
    w = np.asarray(weights, dtype=dtype).reshape(B, next_n, H)
    for b in range(B):
        n = int(lens[b].max())
        if n == 0:
            continue
        t = np.arange(n)
        blocks = np.asarray(block_table[b, t // block_size], dtype=np.int64)
        k = decode(keys[blocks, t % block_size], fp8_format, dtype)             # [n, D]
        s = scales[blocks, t % block_size].astype(dtype)                    # [n]
        scores = decode(q[b], fp8_format, dtype).reshape(next_n * H, D) @ k.T  # [next_n*H, n]
        relu = np.maximum(scores, 0).reshape(next_n, H, n)
        logits = np.einsum("jhn,jh->jn", relu, w[b]) * s
        for j in range(next_n):
            row, length = b * next_n + j, int(lens[b, j])
            out[row, :length] = logits[j, :length]
            if bound is not None:
                bound[row, :length] = np.einsum("hn,h->n", relu[j, :, :length], np.abs(w[b, j])) * s[:length]
    return (out, bound) if with_bound else out
