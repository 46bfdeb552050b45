"""User-facing accuracy of a kernel design: top-k agreement with the float64 reference (issue 15).

The indexer's logits feed a per-row top-k (k = 2048 in DeepSeek-V3.2 / GLM-5); what a user sees of a
kernel's rounding is which keys change sides of the cut. This module draws inputs the way a trained
indexer's look (normal activations quantised to e4m3 with per-token scales, the q scale folded into the
weights, weights ~ N(0, 1) * H^-0.5 * D^-0.5), and measures:

* recall@k per row: |topk(out) & topk(ref)| / k, with ties in ``ref`` broken by index;
* the flips (keys the kernel selects that the reference does not) and the share of them that lie within
  the fp8 quantisation noise of the cut: |ref[m, n] - cut[m]| <= noise[m], where noise[m] is the standard
  deviation, over row m's window, of (logit of the fp8 inputs - logit of the unquantised inputs). Such a
  flip is a choice the fp8 inputs could not make reliably in the first place.

Everything here is numpy on the host; the kernel output comes from the caller (the emulator, in
``python -m rawindexer.profile --accuracy``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fp8 import E4M3FN_MAX, encode_e4m3fn
from .testing.windows import clamp_windows

TOPK = 2048


@dataclass(frozen=True)
class RealisticInputs:
    """Kernel inputs and the unquantised float64 logits they were quantised from."""
    q_fp8: np.ndarray        # [M, H, D] uint8 e4m3fn, per (row, head) scaled to use the fp8 range
    k_fp8: np.ndarray        # [N, D] uint8 e4m3fn, per token scaled
    kv_scale: np.ndarray     # [N] float32: the per-token scale of K
    weights: np.ndarray      # [M, H] float32: head weight x the per-(row, head) scale of Q
    cu_seqlen_ks: np.ndarray
    cu_seqlen_ke: np.ndarray
    unquantised: np.ndarray  # [M, N] float64 logits of the float activations (NaN outside the windows)

    def kernel_args(self) -> dict:
        return dict(q_fp8=self.q_fp8, k_fp8=self.k_fp8, kv_scale=self.kv_scale, weights=self.weights,
                    cu_seqlen_ks=self.cu_seqlen_ks, cu_seqlen_ke=self.cu_seqlen_ke)


def _per_row_fp8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantise the last axis of ``x`` to e4m3fn with one scale per leading index: (codes, scales)."""
    scale = np.abs(x).max(axis=-1) / E4M3FN_MAX
    scale = np.where(scale > 0, scale, 1.0)
    return encode_e4m3fn(x / scale[..., None]), scale


def realistic_inputs(rng: np.random.Generator, M: int, N: int, H: int, D: int, ks: np.ndarray,
                     ke: np.ndarray) -> RealisticInputs:
    q = rng.standard_normal((M, H, D))
    k = rng.standard_normal((N, D))
    w = rng.standard_normal((M, H)) * H**-0.5 * D**-0.5
    q8, q_scale = _per_row_fp8(q)
    k8, k_scale = _per_row_fp8(k)
    starts, ends = clamp_windows(ks, ke, N)
    exact = np.full((M, N), np.nan)
    for m in range(M):
        s, e = starts[m], ends[m]
        if e > s:
            exact[m, s:e] = np.maximum(q[m] @ k[s:e].T, 0).T @ w[m]
    return RealisticInputs(q8, k8, k_scale.astype(np.float32), (w * q_scale).astype(np.float32),
                           np.asarray(ks, np.int32), np.asarray(ke, np.int32), exact)


@dataclass(frozen=True)
class TopkAgreement:
    rows: int             # rows whose window holds more than k keys (the others select everything)
    recall: float         # mean over those rows of |topk(out) & topk(ref)| / k
    min_recall: float
    flips: int            # keys selected by out and not by ref, over all rows
    flips_in_noise: int   # of them, within the fp8 quantisation noise of the cut


def topk_agreement(out: np.ndarray, ref: np.ndarray, unquantised: np.ndarray, ks: np.ndarray, ke: np.ndarray,
                   k: int | None = TOPK, fraction: int | None = None) -> TopkAgreement:
    """Top-k agreement of ``out`` with ``ref`` ([M, N], -inf or anything outside the windows), per row over
    its window. ``k`` fixed (rows with a window of at most k keys are skipped), or, with ``fraction=f``,
    k = window length // f per row (rows shorter than f keys skipped)."""
    N = out.shape[1]
    starts, ends = clamp_windows(ks, ke, N)
    rows = flips = in_noise = 0
    recalls = []
    for m in range(out.shape[0]):
        s, e = int(starts[m]), int(ends[m])
        length = e - s
        kk = length // fraction if fraction else k
        if kk < 1 or kk >= length:
            continue
        o = np.asarray(out[m, s:e], np.float64)
        r = np.asarray(ref[m, s:e], np.float64)
        # stable order: equal values rank by index, in both
        top_o = np.argsort(-o, kind="stable")[:kk]
        order_r = np.argsort(-r, kind="stable")
        top_r = order_r[:kk]
        hit = np.intersect1d(top_o, top_r, assume_unique=True).size
        recalls.append(hit / kk)
        rows += 1
        flipped = np.setdiff1d(top_o, top_r, assume_unique=True)
        flips += flipped.size
        if flipped.size:
            cut = r[order_r[kk - 1]]
            noise = np.nanstd(r - unquantised[m, s:e])
            in_noise += int((np.abs(r[flipped] - cut) <= noise).sum())
    return TopkAgreement(rows, float(np.mean(recalls)) if recalls else float("nan"),
                         float(np.min(recalls)) if recalls else float("nan"), flips, in_noise)
