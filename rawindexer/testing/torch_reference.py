"""The plain-torch fp8_mqa_logits and its random inputs: the reference of the GPU tests (tests/gpu/) and the
"torch" column of the benchmark (rawindexer.bench). Needs torch; imported only where torch is wanted.

Scores are f32 matmuls of the fp8 values; the products of two e4m3 values are exact in f32 (and in TF32:
an e4m3 value has 4 significant bits), so only the f32 sums round -- the same property that makes the
numpy reference (rawindexer.testing.reference) exact up to summation order.
"""
from __future__ import annotations

import numpy as np


def torch_fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits: bool = True, out=None,
                         chunk_bytes: int = 1 << 31):
    """Plain torch, chunked over query rows so the [rows, H, N] score tensor stays under ``chunk_bytes``.

    q [M,H,D] float8_e4m3fn, k [N,D] float8_e4m3fn, kv_scale [N] f32, weights [M,H] f32, ks/ke [M] int32
    -> [M,N] f32 (``out`` if given). Scores are f32 matmuls of the fp8 values; TF32 is exact here because
    an e4m3 value has 4 significant bits, so the products are exact and only the f32 sums round.
    With clean_logits=False, positions outside the window are left as ``out`` held them.
    """
    import torch

    M, H, D = q.shape
    N = k.shape[0]
    if out is None:
        out = torch.empty((M, N), device=q.device, dtype=torch.float32)
    kf = k.to(torch.float32)
    cols = torch.arange(N, device=q.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    rows = max(1, min(M, chunk_bytes // max(1, H * N * 4)))
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        for r0 in range(0, M, rows):
            r1 = min(M, r0 + rows)
            qf = q[r0:r1].to(torch.float32).reshape(-1, D)
            scores = (qf @ kf.T).view(r1 - r0, H, N).relu_()
            logits = torch.bmm(weights[r0:r1].unsqueeze(1), scores).squeeze(1) * kv_scale
            inside = (cols[None, :] >= s[r0:r1, None]) & (cols[None, :] < e[r0:r1, None])
            if clean_logits:
                out[r0:r1] = torch.where(inside, logits, float("-inf"))
            else:
                out[r0:r1] = torch.where(inside, logits, out[r0:r1])
            del scores, logits, inside
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def make_inputs(M: int, N: int, H: int, D: int, ks_np: np.ndarray, ke_np: np.ndarray, seed: int, device="cuda"):
    """Random fp8 q/k (never zeros), kv_scale in [0.5, 1.5), weights ~ N(0, 1/H); windows as given."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn((M, H, D), generator=g, device=device).to(torch.float8_e4m3fn)
    k = torch.randn((N, D), generator=g, device=device).to(torch.float8_e4m3fn)
    kv_scale = torch.rand((N,), generator=g, device=device) + 0.5
    weights = torch.randn((M, H), generator=g, device=device) * H ** -0.5
    ks = torch.from_numpy(np.ascontiguousarray(ks_np, dtype=np.int32)).to(device)
    ke = torch.from_numpy(np.ascontiguousarray(ke_np, dtype=np.int32)).to(device)
    return q, k, kv_scale, weights, ks, ke
