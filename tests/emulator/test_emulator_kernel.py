"""Smoke test: the shipped fp8_mqa_logits code object, executed by the emulator, against a tiny numpy
reference (the real reference and the big sweep live elsewhere)."""
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from rawindexer.emulator import Emulator
from rawindexer.emulator.numerics import E4M3FN
from rawindexer.kernel_files import kernel_dir

HSACO = kernel_dir() / "fp8_mqa_logits.gfx950.hsaco"  # the installed package's (or the override's)
MANIFEST = kernel_dir() / "manifest.json"


@pytest.fixture(scope="module")
def emu():
    return Emulator(HSACO.read_bytes())


def _fp8(rng, shape):
    b = rng.integers(0, 256, size=shape, dtype=np.uint8)
    b[(b & 0x7F) == 0x7F] = 0x38  # no NaN encodings
    return b


def tiny_reference(q, k, kv_scale, w, ks, ke, clean):
    M, N = q.shape[0], k.shape[0]
    s = np.einsum("mhd,nd->mhn", E4M3FN[q], E4M3FN[k])
    lg = (np.maximum(s, 0) * w[:, :, None].astype(np.float64)).sum(1) * kv_scale[None, :].astype(np.float64)
    out = np.full((M, N), -np.inf if clean else np.nan)
    for m in range(M):
        lo = max(0, min(int(ks[m]), N))
        hi = max(lo, min(int(ke[m]), N))
        out[m, lo:hi] = lg[m, lo:hi]
    return out


def run_kernel(emu, rng, M, N, H, D, bm, unroll, num_warps, split_n, flags, ks, ke):
    sym = f"fp8_mqa_logits_h{H}_d{D}_bm{bm}_u{unroll}"
    entry = json.loads(MANIFEST.read_text())["targets"]["gfx950"]["kernels"][sym]
    q, k = _fp8(rng, (M, H, D)), _fp8(rng, (N, D))
    kv = rng.random(N).astype(np.float32)
    w = rng.standard_normal((M, H)).astype(np.float32)
    ks, ke = np.asarray(ks, np.int32), np.asarray(ke, np.int32)
    out = np.full((M, N), np.nan, np.float32)  # NaN poison: every written cell must be overwritten
    vals = [q.ctypes.data, k.ctypes.data, kv.ctypes.data, w.ctypes.data, ks.ctypes.data, ke.ctypes.data,
            out.ctypes.data, N, M, N, split_n, num_warps, flags]
    buf = bytearray(entry["kernarg_size"])
    for a, v in zip(entry["args"], vals):
        struct.pack_into("<q" if a["size"] == 8 else "<i", buf, a["offset"], v)
    spans = [(x.ctypes.data, x.nbytes, False) for x in (q, k, kv, w, ks, ke)] + [(out.ctypes.data, out.nbytes, True)]
    stats = emu.launch(sym, (-(-M // bm), split_n, 1), (64 * num_warps, 1, 1), bytes(buf), spans)
    return out, tiny_reference(q, k, kv, w, ks, ke, flags & 1), stats


def calc_diff(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    return 1 - 2 * (x * y).sum() / (x * x + y * y).sum()


@pytest.mark.parametrize("M,N,bm,warps,split,flags", [
    (5, 70, 4, 4, 1, 1),        # M, N not multiples of 32
    (33, 100, 2, 2, 2, 1),      # split_n, partial row block
    (17, 76, 3, 1, 1, 3),       # reverse rows, one warp
    (9, 45, 4, 2, 1, 0),        # no clean logits: outside the window stays NaN
])
def test_fp8_mqa_logits_causal(emu, rng, M, N, bm, warps, split, flags):
    ks = np.zeros(M)
    ke = np.arange(M) + (N - M)
    out, ref, stats = run_kernel(emu, rng, M, N, 32, 128, bm, 1, warps, split, flags, ks, ke)
    inside = np.isfinite(ref)
    if flags & 1:
        assert np.array_equal(np.isneginf(out), np.isneginf(ref))
        assert not np.isnan(out).any()
    else:
        assert np.isnan(out[~inside]).all()  # untouched
    assert np.isfinite(out[inside]).all()
    assert calc_diff(out[inside], ref[inside]) < 1e-6
    np.testing.assert_allclose(out[inside], ref[inside], rtol=1e-4, atol=1e-3 * np.abs(ref[inside]).max())
    assert stats.per_class["MFMA"] > 0


def test_fp8_mqa_logits_windows_h64_d64_unroll2(emu, rng):
    M, N = 11, 130
    ks = rng.integers(-5, N, size=M)
    ke = ks + rng.integers(-3, 60, size=M)
    out, ref, _ = run_kernel(emu, rng, M, N, 64, 64, 3, 2, 2, 1, 1, ks, ke)
    assert np.array_equal(np.isneginf(out), np.isneginf(ref))
    inside = np.isfinite(ref)
    assert calc_diff(out[inside], ref[inside]) < 1e-6
