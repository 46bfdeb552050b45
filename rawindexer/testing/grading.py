"""Grading shared by every test and benchmark (the anchors' gates, NOTES section 1).

* the -inf mask of the result equals the reference's exactly;
* calc_diff(x, y) = 1 - 2 sum(x y) / sum(x^2 + y^2) over the finite entries, in float64, < 1e-3;
* nothing is NaN: outputs are poisoned with NaN before every launch, so a position the kernel failed
  to write shows up; with clean_logits=False the positions outside the window must still hold the
  poison (the kernel must not write them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .windows import window_mask

DIFF_TOLERANCE = 1e-3


def calc_diff(x: np.ndarray, y: np.ndarray) -> float:
    """1 - cosine-like similarity in float64; 0 for identical inputs."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    denominator = float((x * x + y * y).sum())
    if denominator == 0.0:
        return 0.0
    return float(1.0 - 2.0 * (x * y).sum() / denominator)


def poison(out: np.ndarray) -> np.ndarray:
    """Fill with NaN so an unwritten position cannot pass."""
    out[...] = np.nan
    return out


@dataclass(frozen=True)
class Grade:
    mask_ok: bool
    diff: float
    unwritten: int      # NaN inside the window (or anywhere, when clean)
    overwritten: int    # clean_logits=False: positions outside the window that were written
    message: str

    @property
    def ok(self) -> bool:
        return self.mask_ok and self.unwritten == 0 and self.overwritten == 0 and self.diff < DIFF_TOLERANCE


def grade(out: np.ndarray, ref: np.ndarray, cu_seqlen_ks: np.ndarray, cu_seqlen_ke: np.ndarray,
          clean_logits: bool) -> Grade:
    """Grade a NaN-poisoned kernel output [M, N] against the reference [M, N]."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        raise ValueError(f"out: shape {out.shape} differs from the reference's {ref.shape}")
    inside = window_mask(cu_seqlen_ks, cu_seqlen_ke, out.shape[1])
    if clean_logits:
        unwritten = int(np.isnan(out).sum())
        overwritten = 0
        got = out
    else:
        unwritten = int(np.isnan(out[inside]).sum())
        overwritten = int((~np.isnan(out[~inside])).sum())
        # The grader re-applies -inf outside the window, as the public tests do.
        got = np.where(inside, out, -np.inf)
        ref = np.where(inside, ref, -np.inf)
    mask_ok = bool(np.array_equal(np.isneginf(got), np.isneginf(ref)))
    finite = np.isfinite(got) & np.isfinite(ref)
    diff = calc_diff(got[finite], ref[finite])
    msg = (f"mask {'ok' if mask_ok else 'MISMATCH'}, calc_diff {diff:.2e}, unwritten {unwritten}, "
           f"written outside window {overwritten}")
    return Grade(mask_ok, diff, unwritten, overwritten, msg)
