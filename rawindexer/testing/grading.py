"""Grading shared by every test and benchmark (the anchors' gates, NOTES section 1).

* the -inf mask of the result equals the reference's exactly;
* calc_diff(x, y) = 1 - 2 sum(x y) / sum(x^2 + y^2) over the finite entries, in float64, < 1e-3;
* nothing is NaN: outputs are poisoned with NaN before every launch, so a position the kernel failed
  to write shows up; with clean_logits=False the positions outside the window must still hold the
  poison (the kernel must not write them).

And the per-logit gate that judges ONE kernel against the exact result of the same fp8 inputs (issue 15):
for every in-window logit ``|out - ref| <= eps * T`` with ``ref`` the float64 result and
``T = kv_scale[n] * sum_h |relu(<q[m,h], k[n]>) * weights[m,h]|`` (the summation's own scale, from
rawindexer.testing.reference.fp8_mqa_logits_ref_with_scale), so that cancellation between heads is judged fairly.
fp32 accumulation of fp32 products meets :data:`LOGIT_EPS` = 1e-5 with room; rounding each term to bf16
(about 2^-9 relative) cannot.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .windows import window_mask

DIFF_TOLERANCE = 1e-3
#: The per-logit gate of the default designs (gfx950 and sm_90a): fp32-class accuracy.
LOGIT_EPS = 1e-5


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


@dataclass(frozen=True)
class LogitGate:
    """Result of :func:`logit_gate`: ``worst`` = max over in-window logits of |out - ref| / T."""
    worst: float
    failing: int                       # in-window logits with |out - ref| > eps * T (non-finite out included)
    eps: float
    worst_at: tuple[int, int] | None   # (m, n) of the worst logit
    message: str

    @property
    def ok(self) -> bool:
        return self.failing == 0


def logit_errors(out: np.ndarray, ref: np.ndarray, scale: np.ndarray, cu_seqlen_ks: np.ndarray,
                 cu_seqlen_ke: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(relative error |out - ref| / T per in-window logit [K] float64, their (m, n) indices [K, 2]).

    out: [M, N] float32 (any row stride); ref, scale: [M, N] float64 from
    fp8_mqa_logits_ref_with_scale. T == 0 (every head's term is 0) demands out == ref exactly: the error
    is then 0 or inf. A non-finite ``out`` where ``ref`` is finite counts as inf.
    """
    out = np.asarray(out)
    if out.shape != ref.shape or scale.shape != ref.shape:
        raise ValueError(f"out: shape {out.shape}, ref {ref.shape} and scale {scale.shape} must agree")
    inside = window_mask(cu_seqlen_ks, cu_seqlen_ke, out.shape[1])
    where = np.argwhere(inside)
    got = out[inside].astype(np.float64)
    want, total = ref[inside], scale[inside]
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(got - want)
        rel = np.where(total > 0, err / np.where(total > 0, total, 1.0), np.where(err == 0, 0.0, np.inf))
    rel[~np.isfinite(got) & np.isfinite(want)] = np.inf
    return rel, where


def worst_eps(out: np.ndarray, ref: np.ndarray, scale: np.ndarray, cu_seqlen_ks: np.ndarray,
              cu_seqlen_ke: np.ndarray) -> float:
    """The smallest eps for which :func:`logit_gate` passes (0.0 when there is no in-window logit)."""
    rel, _ = logit_errors(out, ref, scale, cu_seqlen_ks, cu_seqlen_ke)
    return float(rel.max()) if rel.size else 0.0


def logit_gate(out: np.ndarray, ref: np.ndarray, scale: np.ndarray, cu_seqlen_ks: np.ndarray,
               cu_seqlen_ke: np.ndarray, eps: float = LOGIT_EPS) -> LogitGate:
    """Every in-window logit: |out - ref| <= eps * T (see the module docstring)."""
    rel, where = logit_errors(out, ref, scale, cu_seqlen_ks, cu_seqlen_ke)
    if not rel.size:
        return LogitGate(0.0, 0, eps, None, "no in-window logit")
    i = int(np.argmax(rel))
    worst = float(rel[i])
    failing = int((rel > eps).sum())
    m, n = (int(x) for x in where[i])
    msg = (f"logit gate eps {eps:.0e}: worst {worst:.2e} at (m={m}, n={n}) "
           f"[out {float(np.asarray(out)[m, n]):.8g}, ref {ref[m, n]:.8g}, T {scale[m, n]:.4g}], failing {failing}")
    return LogitGate(worst, failing, eps, (m, n), msg)
