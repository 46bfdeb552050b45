"""Input validation before any launch: each error names the argument, what it got and what it expected.

Nothing is written (no output allocated, nothing launched) when a check fails. The checks read only what
describes an array (pointer, shape, strides, dtype, device), never its values on a GPU; a prepared
launch runs them once per distinct description (``rawindexer.api.Indexer``), not once per call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .dlpack import TensorView, is_compact
from .errors import ValidationError  # noqa: F401  (re-exported: raised here)

INT32_MAX = 2**31 - 1
# The kernel indexes keys with int32 and walks up to one 32-token tile past the window end per warp.
MAX_KEYS = INT32_MAX - 1024
FP8_DTYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "uint8")
#: the fp8 formats q and k may hold: OCP e4m3fn (bias 7, max 448) and e4m3fnuz (bias 8, max 240, 0x80 NaN)
FP8_FORMATS = ("e4m3fn", "e4m3fnuz")


class Operand(NamedTuple):
    """What the checks need of one array: data pointer, shape, strides (elements), dtype name, DLPack
    device (type, id), read-only flag. Built from a DLPack view or read from a framework's own attributes."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    device: tuple[int, int]
    readonly: bool = False

    @classmethod
    def of(cls, t: "Operand | TensorView") -> "Operand":
        if isinstance(t, Operand):
            return t
        return cls(t.ptr, tuple(t.shape), tuple(t.strides), t.dtype.name, tuple(t.device), bool(t.readonly))


@dataclass(frozen=True)
class Dims:
    M: int
    N: int
    heads: int
    head_dim: int
    #: format of q and k's bytes: "e4m3fn" or "e4m3fnuz" (their dtype, or fp8_format= for uint8 bytes)
    fp8_format: str = "e4m3fn"


def check_fp8_format(fp8_format: Any) -> str | None:
    """``fp8_format`` (None, "e4m3fn" or "e4m3fnuz") checked; the name of the argument in errors."""
    if fp8_format is None or fp8_format in FP8_FORMATS:
        return fp8_format
    raise ValueError(f"fp8_format: expected None or one of {FP8_FORMATS}, got {fp8_format!r}")


def input_format(q_dtype: str, k_dtype: str, fp8_format: str | None) -> str:
    """The fp8 format of q and k: their float8 dtype, or ``fp8_format`` (default e4m3fn) for uint8 bytes.
    q and k in different formats, or a float8 dtype that contradicts ``fp8_format``, are errors naming both."""
    if k_dtype != q_dtype:
        formats = {d: d.removeprefix("float8_") if d.startswith("float8_") else f"{d} bytes" for d in (q_dtype, k_dtype)}
        _fail("k_fp8", f"dtype {k_dtype} ({formats[k_dtype]})",
              f"q_fp8's dtype {q_dtype} ({formats[q_dtype]}): q and k in one format")
    if q_dtype == "uint8":
        return fp8_format or "e4m3fn"
    fmt = q_dtype.removeprefix("float8_")
    if fp8_format is not None and fp8_format != fmt:
        _fail("fp8_format", repr(fp8_format), f"None or {fmt!r}: q_fp8 and k_fp8 are {q_dtype} (fp8_format= "
              "describes uint8 bytes)")
    return fmt


def _fail(name: str, got: str, expected: str) -> None:
    raise ValidationError(f"{name}: expected {expected}, got {got}")


def as_int(name: str, value: Any) -> int:
    """``value`` as an int when it is an int or a bool (numpy integers included); anything else, a
    string "32" or a float 32.5 or 32.0, is a TypeError naming ``name``."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")


def as_bool(name: str, value: Any) -> bool:
    """``value`` as a bool when it is a bool or an int (numpy's included); "no", None or 0.5 is a
    TypeError naming ``name``."""
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        return bool(value)
    raise TypeError(f"{name}: expected a bool or an int, got {type(value).__name__} {value!r}")


def _check_dtype(name: str, t: Operand, allowed: tuple[str, ...]) -> None:
    if t.dtype not in allowed:
        _fail(name, f"dtype {t.dtype}", " or ".join(allowed))


def _check_shape(name: str, t: Operand, shape: tuple[int, ...], described: str) -> None:
    if tuple(t.shape) != tuple(shape):
        _fail(name, f"shape {tuple(t.shape)}", f"shape {tuple(shape)} ({described})")


def _check_contiguous(name: str, t: Operand) -> None:
    if not is_compact(t.shape, t.strides):
        _fail(name, f"strides {tuple(t.strides)} (elements) for shape {tuple(t.shape)}", "a contiguous row-major array")


def check_sizes(M: int, N: int, out_row_stride: int) -> None:
    """The size checks every launch needs, whether its sizes came from arrays or as integers (``launch``,
    ``Indexer.launch_pointers``, a dispatch family's ``plan``): M, N >= 0, a row stride that holds N
    logits, and sizes the kernels' int32 indexing reaches."""
    for name, value in (("M", M), ("N", N)):
        if value < 0:
            _fail(name, str(value), ">= 0")
    if out_row_stride < N:
        _fail("out_row_stride", str(out_row_stride), f">= N={N}")
    if N > MAX_KEYS or M > INT32_MAX:
        _fail("M, N", f"M={M}, N={N}", f"int32 sizes (N <= {MAX_KEYS})")


def validate(q: Any, k: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
             out: Any | None, fp8_format: str | None = None) -> Dims:
    """Check every operand (Operand or TensorView); return the problem's dimensions and input format
    (``fp8_format``: the format of uint8 q / k bytes, None = e4m3fn; see :func:`input_format`)."""
    q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke = (
        Operand.of(t) for t in (q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke))
    out = Operand.of(out) if out is not None else None
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
    fmt = input_format(q.dtype, k.dtype, fp8_format)
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
        # An empty output has nothing to address: numpy and others give it arbitrary (even zero) strides.
        if M and N and ((M > 1 and out.strides[0] < N) or (N > 1 and out.strides[1] != 1)):
            _fail("out", f"strides {tuple(out.strides)} (elements)", f"row stride >= N={N} and column stride 1")
    if N > MAX_KEYS:
        _fail("k_fp8", f"N={N} keys", f"at most {MAX_KEYS} (the kernel indexes keys with int32)")
    if M > INT32_MAX:
        _fail("q_fp8", f"M={M} rows", f"at most {INT32_MAX}")
    check_same_device([("q_fp8", q), ("k_fp8", k), ("kv_scale", kv_scale), ("weights", weights),
                       ("cu_seqlen_ks", cu_seqlen_ks), ("cu_seqlen_ke", cu_seqlen_ke)] + ([("out", out)] if out else []))
    return Dims(M, N, H, D, fmt)


def check_same_device(named: list[tuple[str, Operand]]) -> None:
    """Every operand on the first one's device (the device a call runs on), else one error naming every
    argument that is not, with its device -- before anything is allocated or launched."""
    first_name, first = named[0]
    mixed = [(name, t.device) for name, t in named[1:] if t.device != first.device]
    if mixed:
        listed = ", ".join(f"{name} on {device}" for name, device in mixed)
        _fail(", ".join(name for name, _ in mixed), f"{listed} (mixed devices)",
              f"every array on {first_name}'s device {first.device}")
