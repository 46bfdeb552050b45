"""A straightforward Triton implementation of fp8_mqa_logits: the baseline of ``python -m rawindexer.bench``.

It plays the role aiter's Triton kernel plays in the seed's tables: one program per query row walks that
row's KV window in BLOCK_N-token tiles, one fp8 ``tl.dot`` per tile ([H, D] x [D, BLOCK_N] -> f32), ReLU,
weights, a head sum and kv_scale, written at absolute columns. ``clean_logits`` is a separate
``torch.full(-inf)`` pass over all M*N elements before the kernel, as the Triton path upstream does.
Needs torch and triton; imported lazily by the benchmark only.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _fp8_mqa_logits_row(q_ptr, k_ptr, scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, out_stride, N,
                        H: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    start = tl.maximum(tl.load(ks_ptr + m), 0)
    end = tl.minimum(tl.load(ke_ptr + m), N)
    offs_h = tl.arange(0, H)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + m * H * D + offs_h[:, None] * D + offs_d[None, :])  # [H, D] fp8
    w = tl.load(w_ptr + m * H + offs_h)                                      # [H] f32
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        valid = offs_n < end
        k = tl.load(k_ptr + offs_n.to(tl.int64)[:, None] * D + offs_d[None, :], mask=valid[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k))                       # [H, BLOCK_N] f32
        s = tl.maximum(s, 0.0) * w[:, None]
        logit = tl.sum(s, axis=0) * tl.load(scale_ptr + offs_n, mask=valid, other=0.0)
        tl.store(out_ptr + m * out_stride + offs_n, logit, mask=valid)


def fp8_mqa_logits_triton(q: torch.Tensor, k: torch.Tensor, kv_scale: torch.Tensor, weights: torch.Tensor,
                          ks: torch.Tensor, ke: torch.Tensor, clean_logits: bool = True,
                          block_n: int = 128, num_warps: int = 4) -> torch.Tensor:
    """q [M,H,D] float8_e4m3fn, k [N,D] float8_e4m3fn, kv_scale [N] f32, weights [M,H] f32, ks/ke [M] int32
    (CUDA tensors) -> logits [M,N] f32."""
    M, H, D = q.shape
    N = k.shape[0]
    out = (torch.full((M, N), float("-inf"), device=q.device, dtype=torch.float32) if clean_logits
           else torch.empty((M, N), device=q.device, dtype=torch.float32))
    if M and N:
        _fp8_mqa_logits_row[(M,)](q, k, kv_scale, weights, ks, ke, out, out.stride(0), N,
                                  H=H, D=D, BLOCK_N=block_n, num_warps=num_warps)
    return out
