"""Input validation before any launch: each error names the argument, what it got and what it expected.

Nothing is written (no output allocated, nothing launched) when a check fails.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dlpack import TensorView

INT32_MAX = 2**31 - 1
# The kernel indexes keys with int32 and walks up to one 32-token tile past the window end per warp.
MAX_KEYS = INT32_MAX - 1024
FP8_DTYPES = ("float8_e4m3fn", "uint8")


class ValidationError(ValueError):
    pass


@dataclass(frozen=True)
class Dims:
    M: int
    N: int
    heads: int
    head_dim: int


def _fail(name: str, got: str, expected: str) -> None:
    raise ValidationError(f"{name}: expected {expected}, got {got}")


def _check_dtype(name: str, t: TensorView, allowed: tuple[str, ...]) -> None:
    if t.dtype.name not in allowed:
        _fail(name, f"dtype {t.dtype.name}", " or ".join(allowed))


def _check_shape(name: str, t: TensorView, shape: tuple[int, ...], described: str) -> None:
    if tuple(t.shape) != tuple(shape):
        _fail(name, f"shape {tuple(t.shape)}", f"shape {tuple(shape)} ({described})")


def _check_contiguous(name: str, t: TensorView) -> None:
    if not t.is_contiguous():
        _fail(name, f"strides {tuple(t.strides)} (elements) for shape {tuple(t.shape)}", "a contiguous row-major array")


def validate(q: TensorView, k: TensorView, kv_scale: TensorView, weights: TensorView,
             cu_seqlen_ks: TensorView, cu_seqlen_ke: TensorView, out: TensorView | None) -> Dims:
    """Check every operand; return the problem's dimensions."""
    if len(q.shape) != 3:
        _fail("q_fp8", f"{len(q.shape)}-d shape {tuple(q.shape)}", "a 3-d [M, num_heads, head_dim] array")
    M, H, D = q.shape
    _check_dtype("q_fp8", q, FP8_DTYPES)
    _check_contiguous("q_fp8", q)
    if len(k.shape) != 2:
        _fail("k_fp8", f"{len(k.shape)}-d shape {tuple(k.shape)}", "a 2-d [N, head_dim] array")
    N = k.shape[0]
    _check_shape("k_fp8", k, (N, D), f"[N, head_dim] with q_fp8's head_dim={D}")
    _check_dtype("k_fp8", k, FP8_DTYPES)
    if k.dtype.name != q.dtype.name:
        _fail("k_fp8", f"dtype {k.dtype.name}", f"q_fp8's dtype {q.dtype.name}")
    _check_contiguous("k_fp8", k)
    for name, t, shape, described in [
        ("kv_scale", kv_scale, (N,), "[N] float32"),
        ("weights", weights, (M, H), "[M, num_heads] float32"),
        ("cu_seqlen_ks", cu_seqlen_ks, (M,), "[M] int32"),
        ("cu_seqlen_ke", cu_seqlen_ke, (M,), "[M] int32"),
    ]:
        _check_shape(name, t, shape, described)
        _check_dtype(name, t, ("float32",) if "int32" not in described else ("int32",))
        _check_contiguous(name, t)
    if out is not None:
        if len(out.shape) != 2 or tuple(out.shape) != (M, N):
            _fail("out", f"shape {tuple(out.shape)}", f"shape ({M}, {N})")
        _check_dtype("out", out, ("float32",))
        if out.readonly:
            _fail("out", "a read-only array", "a writable array")
        if M > 1 and out.strides[0] < N or (N > 1 and out.strides[1] != 1):
            _fail("out", f"strides {tuple(out.strides)} (elements)", f"row stride >= N={N} and column stride 1")
    if N > MAX_KEYS:
        _fail("k_fp8", f"N={N} keys", f"at most {MAX_KEYS} (the kernel indexes keys with int32)")
    if M > INT32_MAX:
        _fail("q_fp8", f"M={M} rows", f"at most {INT32_MAX}")
    devices = {name: t.device for name, t in [("q_fp8", q), ("k_fp8", k), ("kv_scale", kv_scale),
                                              ("weights", weights), ("cu_seqlen_ks", cu_seqlen_ks),
                                              ("cu_seqlen_ke", cu_seqlen_ke)] + ([("out", out)] if out else [])}
    for name, dev in devices.items():
        if dev != q.device:
            _fail(name, f"an array on DLPack device {dev}", f"q_fp8's device {q.device} (mixed devices)")
    return Dims(M, N, H, D)
