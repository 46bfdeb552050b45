"""Grading of fp8_paged_mqa_logits outputs (NaN-poisoned before the launch) against the float64 reference.

* mask: with clean logits every column at or past a row's length is exactly -inf; without, it still
  holds the NaN poison (never written); every column inside is finite;
* per logit: |out - ref| <= EPS * T, T = scale[t] * sum_h |relu(<q, k>) * w| (the reference's bound):
  the kernel must do the head reduce in fp32 (a bf16 step fails this at once).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-5


@dataclass(frozen=True)
class PagedGrade:
    mask_ok: bool
    unwritten: int    # NaN or inf inside a row's length
    overwritten: int  # clean: not -inf past the length; not clean: written past the length
    worst: float      # max |out - ref| / T over the inside (0 where T = 0 and out = ref)
    failing: int      # logits with |out - ref| > EPS * T
    message: str

    @property
    def ok(self) -> bool:
        return self.mask_ok and self.unwritten == 0 and self.overwritten == 0 and self.failing == 0


def grade_paged(out: np.ndarray, ref: np.ndarray, bound: np.ndarray, lengths: np.ndarray, clean_logits: bool,
                eps: float = EPS) -> PagedGrade:
    """out, ref, bound: [rows, max_context_len]; lengths: [rows] valid length of each row."""
    out = np.asarray(out, np.float64)
    inside = np.arange(out.shape[1])[None, :] < np.asarray(lengths)[:, None]
    unwritten = int((~np.isfinite(out[inside])).sum())
    outside = out[~inside]
    overwritten = int((~np.isneginf(outside)).sum()) if clean_logits else int((~np.isnan(outside)).sum())
    err = np.abs(out[inside] - ref[inside])
    t = bound[inside]
    bad = ~(err <= eps * t)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(t > 0, err / t, np.where(err == 0, 0.0, np.inf))
    worst = float(np.nanmax(rel)) if rel.size else 0.0
    mask_ok = unwritten == 0 and overwritten == 0
    msg = (f"mask {'ok' if mask_ok else 'MISMATCH'}, unwritten {unwritten}, wrong outside {overwritten}, "
           f"worst |err|/T {worst:.2e} (gate {eps:.0e}), failing {int(bad.sum())}")
    wrong = np.argwhere(inside & ~(np.abs(out - np.where(inside, ref, 0)) <= eps * bound))
    if not clean_logits:
        wrong = np.concatenate([wrong, np.argwhere(~inside & ~np.isnan(out))])
    else:
        wrong = np.concatenate([wrong, np.argwhere(~inside & ~np.isneginf(out))])
    if len(wrong):  # where to look first when debugging a kernel
        r, c = (int(x) for x in wrong[0])
        msg += f"; first wrong [{r}, {c}]: got {float(out[r, c])!r}, ref {float(ref[r, c])!r}, row length {int(lengths[r])}"
    return PagedGrade(mask_ok, unwritten, overwritten, worst, int(bad.sum()), msg)
