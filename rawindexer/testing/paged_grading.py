"""Grading of fp8_paged_mqa_logits outputs (NaN-poisoned before the launch) against the float64 reference.

* mask: with clean logits every column at or past a row's length is exactly -inf; without, it still
  holds the NaN poison (never written); every column inside is finite;
* per logit: prefill's gate, :func:`rawindexer.grading.logit_gate` (one gate for both ops), with each row's
  window [0, length): |out - ref| <= eps * T, T = scale[t] * sum_h |relu(<q, k>) * w| (the reference's bound).
  eps per design: :func:`design_eps` (the fp32-class 1e-5 of the default designs; Hopper's fp8 wgmma design
  is held to prefill's fp8-wgmma eps, docs/NUMERICS.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grading import LOGIT_EPS as EPS  # noqa: F401  (the default designs' gate; tests import it from here)
from .grading import logit_gate

def design_eps(arch: str, design: str | None = None) -> float:
    """The per-logit gate of a decode design (None = the target's default design): the family module's
    LOGIT_EPS, as prefill's designs keep theirs (rawindexer.dispatch.gfx950 / sm90)."""
    from ..dispatch import paged_gfx942, paged_gfx950, paged_sm90
    from ..paged_kernels import TARGETS

    table = {"gfx950": paged_gfx950.LOGIT_EPS, "gfx942": paged_gfx942.LOGIT_EPS, "sm_90a": paged_sm90.LOGIT_EPS}[arch]
    return table[TARGETS[arch].default_design if design is None else design]


@dataclass(frozen=True)
class PagedGrade:
    mask_ok: bool
    unwritten: int    # NaN or inf inside a row's length
    overwritten: int  # clean: not -inf past the length; not clean: written past the length
    worst: float      # max |out - ref| / T over the inside (0 where T = 0 and out = ref)
    failing: int      # logits with |out - ref| > eps * T
    message: str

    @property
    def ok(self) -> bool:
        return self.mask_ok and self.unwritten == 0 and self.overwritten == 0 and self.failing == 0


def grade_paged(out: np.ndarray, ref: np.ndarray, bound: np.ndarray, lengths: np.ndarray, clean_logits: bool,
                eps: float = EPS) -> PagedGrade:
    """out, ref, bound: [rows, max_context_len]; lengths: [rows] valid length of each row."""
    out = np.asarray(out)
    lengths = np.asarray(lengths)
    inside = np.arange(out.shape[1])[None, :] < lengths[:, None]
    unwritten = int((~np.isfinite(out[inside])).sum())
    outside = out[~inside]
    overwritten = int((~np.isneginf(outside)).sum()) if clean_logits else int((~np.isnan(outside)).sum())
    gate = logit_gate(out, ref, bound, np.zeros(len(lengths), np.int64), lengths.astype(np.int64), eps)
    mask_ok = unwritten == 0 and overwritten == 0
    msg = (f"mask {'ok' if mask_ok else 'MISMATCH'}, unwritten {unwritten}, wrong outside {overwritten}, "
           f"{gate.message}")
    stray = np.argwhere(~inside & (~np.isneginf(out) if clean_logits else ~np.isnan(out)))
    if len(stray):  # where to look first when debugging a kernel's mask
        r, c = (int(x) for x in stray[0])
        msg += f"; first written outside [{r}, {c}]: got {float(out[r, c])!r}, row length {int(lengths[r])}"
    return PagedGrade(mask_ok, unwritten, overwritten, gate.worst, gate.failing, msg)
