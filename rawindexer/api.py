"""The public entry points of prefill: :class:`Indexer` (the prepared launch), ``fp8_mqa_logits`` (any DLPack
framework), ``launch`` (raw pointers), ``is_supported``.

A serving loop calls the indexer once per layer per step, so a call must cost microseconds of host time.
Everything that does not depend on the call is resolved once: the backend, the per-device module and
function, the device's compute units, and per distinct call description -- shapes, strides, dtypes,
devices, clean_logits, pointer alignment -- the validation and the launch plan with its pointers left as
holes. The machinery (reading arrays, the caller's stream and device context, outputs from the caller's
framework, the caches, the launch) is :mod:`rawindexer.launch_path`, shared with the decode op
(:mod:`rawindexer.paged`); this module says what is prefill's: its arrays, validation, family and spans.
Nothing synchronises, nothing reads device memory on the host, and outputs are allocated through the
caller's framework, so a call made while the caller's stream is captured into a CUDA graph
(torch.cuda.graph, CuPy graphs) is captured like any framework op.
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np

from . import launch_path as _lp
from .backends import Backend, BufferSpan, forget_devices, get_backend
from .dispatch import family_for
from .dispatch.base import ALIGNMENT_BITS, LaunchTemplate, Problem, Tunables
from .launch_path import (_STREAM_OF_FRAMEWORK, BoundLaunch, MAX_CACHED_SHAPES, RUNS_ON, PreparedOp, _classify,  # noqa: F401
                          _Device, _OtherAlignment, _read_torch, _Shape, torch_key)
from .validation import Dims, Operand, ValidationError, as_bool, as_int, check_fp8_format, check_sizes, validate

_ARG_NAMES = ("q_fp8", "k_fp8", "kv_scale", "weights", "cu_seqlen_ks", "cu_seqlen_ke")
#: the seven alignments of pointers whose low ALIGNMENT_BITS are zero
_ALIGNED = (0,) * 7


def _torch_key(tensors: tuple, clean: bool, out: Any) -> tuple:
    """The cache key of an all-torch prefill call (launch_path.torch_key with clean_logits as the one scalar):
    what Indexer.__call__ builds inline."""
    return torch_key(tensors, (clean,), out)


def is_supported(num_heads: int, head_dim: int, arch: str = "gfx950") -> bool:
    """True when a built kernel for ``arch`` ("gfx950", "gfx942" or "sm_90a") serves this (num_heads, head_dim);
    callers route other shapes elsewhere instead of tripping an error. Ints (or bools) only."""
    return family_for(arch).is_supported(as_int("num_heads", num_heads), as_int("head_dim", head_dim))


# ---------------------------------------------------------------------------------------------------
# The prepared launch object
# ---------------------------------------------------------------------------------------------------
class Indexer(PreparedOp):
    """A prepared ``fp8_mqa_logits``: resolve once, then each call costs microseconds of host time.

        indexer = rawindexer.Indexer(num_heads=64, head_dim=128)          # e.g. one per model
        logits = indexer(q_fp8, k_fp8, kv_scale, weights, ks, ke, clean_logits=False, out=buf)

    ``num_heads`` / ``head_dim``: the shape this object serves (checked once per new call shape; None =
    whatever q_fp8 has). ``device``: a backend name ("cuda", "hip", "emulator") to insist on, or None to
    follow the arrays' DLPack device (CPU -> emulator, CUDA -> sm_90a, ROCm -> gfx950). ``arch``: the
    target whose kernel runs, "gfx950" or "gfx942" on ROCm and on the emulator (None: gfx950 there,
    sm_90a on CUDA). ``fp8_format``: the format of uint8 q / k bytes, "e4m3fn" (None) or "e4m3fnuz".
    Tunables as in :func:`fp8_mqa_logits`. The device of the inputs decides where the call runs (its context is made
    current for the launch and the caller's is restored), on the caller's current stream of that device.
    Thread-safe: several threads (one per GPU, say) may share one object.
    """

    ARG_NAMES = _ARG_NAMES

    def __init__(self, num_heads: int | None = None, head_dim: int | None = None, *, device: str | None = None,
                 block_m: int = 0, split_n: int = 0, num_warps: int = 0, unroll2: bool | None = None,
                 reverse_rows: bool | None = None, variant: str | None = None, arch: str | None = None,
                 fp8_format: str | None = None) -> None:
        if arch is not None:
            family_for(arch)  # names the targets when arch is unknown
        self.arch = arch
        self.fp8_format = check_fp8_format(fp8_format)
        self.num_heads = None if num_heads is None else as_int("num_heads", num_heads)
        self.head_dim = None if head_dim is None else as_int("head_dim", head_dim)
        self.tunables = Tunables(as_int("block_m", block_m), as_int("split_n", split_n),
                                 as_int("num_warps", num_warps),
                                 None if unroll2 is None else as_bool("unroll2", unroll2),
                                 None if reverse_rows is None else as_bool("reverse_rows", reverse_rows), variant)
        super().__init__(get_backend(device) if device is not None else None)

    # -- prefill's part of the prepared launch -----------------------------------------------------------
    def _family(self, arch: str) -> Any:
        return family_for(arch)

    def _check_backend(self, backend: Backend, device_id: int | None = None) -> None:
        arch = self._arch(backend, device_id)
        if self.tunables.variant is not None and arch not in ("gfx950", "gfx942"):
            raise ValueError(f"variant: only the gfx950 / gfx942 kernels have variants; got {self.tunables.variant!r} "
                             f"for {arch}")
        if self.num_heads is not None and self.head_dim is not None:
            self._check_supported(arch, self.num_heads, self.head_dim)

    @staticmethod
    def _check_supported(arch: str, heads: int, head_dim: int) -> None:
        if not family_for(arch).is_supported(heads, head_dim):
            raise ValueError(f"(num_heads, head_dim): expected a shape with a built {arch} kernel "
                             f"(is_supported() says which), got ({heads}, {head_dim})")

    def _describe(self, ops: list[Operand], out: Operand | None, scalars: tuple, device: _Device) -> _Shape:
        (clean,) = scalars
        dims = validate(*ops, out, self.fp8_format)
        if self.num_heads is not None and dims.heads != self.num_heads:
            raise ValidationError(f"q_fp8: expected num_heads={self.num_heads} (this Indexer's), got "
                                  f"shape {tuple(ops[0].shape)}")
        if self.head_dim is not None and dims.head_dim != self.head_dim:
            raise ValidationError(f"q_fp8: expected head_dim={self.head_dim} (this Indexer's), got "
                                  f"shape {tuple(ops[0].shape)}")
        family = device.family
        self._check_supported(family.arch, dims.heads, dims.head_dim)
        if dims.fp8_format not in family.fp8_formats:
            raise ValidationError(f"q_fp8, k_fp8: expected {' or '.join(family.fp8_formats)} inputs for the "
                                  f"{family.arch} kernel, got {dims.fp8_format} ({family.fp8_format_note})")
        problem = None
        if dims.M and dims.N:
            stride = out.strides[0] if out is not None and dims.M > 1 else dims.N
            problem = Problem(dims.M, dims.N, dims.heads, dims.head_dim, stride, clean, dims.fp8_format)
        return _Shape(dims, problem, device, (dims.M, dims.N))

    def _template(self, shape: _Shape, alignment: tuple[int, ...], ptrs: tuple[int, ...]) -> LaunchTemplate:
        device = shape.device
        return device.family.prepare(shape.problem, self.tunables, alignment, device.compute_units)

    def _spans(self, shape: _Shape, ptrs: tuple[int, ...]) -> list[BufferSpan]:
        return _spans(shape.dims, shape.problem.out_row_stride, ptrs)

    def _check_host_values(self, shape: _Shape, ptrs: list[int]) -> None:
        """Emulator only (host memory): kv_scale must be >= 0 since the kernel applies it after the ReLU."""
        N = shape.dims.N
        if not N:
            return
        scale = np.ctypeslib.as_array((ctypes.c_float * N).from_address(ptrs[2]))
        if (scale < 0).any():
            raise ValidationError(f"kv_scale: expected values >= 0 (the scale is applied after the ReLU), "
                                  f"got min {float(scale.min())}")

    # -- the call -------------------------------------------------------------------------------------
    def __call__(self, q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                 clean_logits: bool = True, out: Any = None, *, stream: int | None = None) -> Any:
        """logits[m, n] = sum_h relu(<q[m,h], k[n]>) * kv_scale[n] * weights[m,h] for n in [ks[m], ke[m]).

        Arguments as :func:`fp8_mqa_logits`. Returns ``out`` (written in place) or a new [M, N] float32
        array of the caller's framework.
        """
        # The hot path: torch tensors whose description (shapes, strides, dtypes, devices, clean_logits, out's) was
        # validated before. Everything it reads is in the key, so a hit is a call validated before; anything new
        # (or any other framework) takes _call_slow, which validates, caches under the same key, and launches.
        # It is PreparedOp._call's hot path unrolled for prefill's six arrays (the key is launch_path.torch_key's
        # tuple; a test checks they agree): about a microsecond less per call than the loops, on the op a serving
        # loop calls once per layer per step.
        T = _lp._TorchTensor
        if (type(q_fp8) is T and type(k_fp8) is T and type(kv_scale) is T and type(weights) is T
                and type(cu_seqlen_ks) is T and type(cu_seqlen_ke) is T
                and (clean_logits is True or clean_logits is False)):
            if out is None:
                out_key = None
            elif type(out) is T:
                out_key = (out.shape, out.stride(), out.dtype, out.get_device(), out.requires_grad)
            else:
                out_key = False  # never a key of the torch route: falls through
            shape = self._shapes.get((
                q_fp8.shape, q_fp8.is_contiguous(), q_fp8.dtype, q_fp8.get_device(),
                k_fp8.shape, k_fp8.is_contiguous(), k_fp8.dtype, k_fp8.get_device(),
                kv_scale.shape, kv_scale.is_contiguous(), kv_scale.dtype, kv_scale.get_device(),
                weights.shape, weights.is_contiguous(), weights.dtype, weights.get_device(),
                cu_seqlen_ks.shape, cu_seqlen_ks.is_contiguous(), cu_seqlen_ks.dtype, cu_seqlen_ks.get_device(),
                cu_seqlen_ke.shape, cu_seqlen_ke.is_contiguous(), cu_seqlen_ke.dtype, cu_seqlen_ke.get_device(),
                clean_logits, out_key))
            if shape is not None and not shape.host_checks:
                if stream is None:
                    stream = shape.stream_now()
                if out is None:
                    out = _lp._torch_empty_like(shape.out_like)
                if shape.problem is not None:
                    p0, p1, p2, p3 = q_fp8.data_ptr(), k_fp8.data_ptr(), kv_scale.data_ptr(), weights.data_ptr()
                    p4, p5, p6 = cu_seqlen_ks.data_ptr(), cu_seqlen_ke.data_ptr(), out.data_ptr()
                    try:
                        if (p0 | p1 | p2 | p3 | p4 | p5 | p6) & ALIGNMENT_BITS:
                            raise _OtherAlignment
                        (shape.aligned or self._prepared(shape, _ALIGNED, (p0, p1, p2, p3, p4, p5, p6))).go(
                            stream, p0, p1, p2, p3, p4, p5, p6)
                    except (_OtherAlignment, TypeError, OverflowError, struct.error):
                        # other alignments, or a stream= the launch cannot take: _launch plans / names it
                        self._launch(shape, (p0, p1, p2, p3, p4, p5, p6), stream)
                return out
        # The same path for every op (rawindexer.launch_path.PreparedOp._call_slow), after the argument check.
        if clean_logits is not True and clean_logits is not False:
            clean_logits = as_bool("clean_logits", clean_logits)
        return self._call_slow((q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke), out, (clean_logits,),
                               stream)

    def bind(self, q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
             clean_logits: bool = True, out: Any = None, *, stream: int | None = None) -> BoundLaunch:
        """Everything a call does except the launch, once: the returned object launches on these buffers when
        called (``bound()`` or ``bound(stream=...)``) and returns the output. Their contents may change between
        calls; their addresses and shapes may not (the serving loop's persistent buffers). An ``out`` of None is
        allocated now, once. Without ``stream=`` each launch reads the caller's current stream again, so a
        bound launch made outside a CUDA graph capture is captured when called inside one."""
        if clean_logits is not True and clean_logits is not False:
            clean_logits = as_bool("clean_logits", clean_logits)
        return self._call_slow((q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke), out, (clean_logits,),
                               stream, bind=True)

    # -- raw pointers -------------------------------------------------------------------------------------
    def launch_pointers(self, pointers: tuple[int, ...], M: int, N: int, out_row_stride: int | None = None,
                        clean_logits: bool = True, stream: int = 0, device_id: int = 0) -> LaunchTemplate | None:
        """The prepared launch from device addresses (q, k, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, out),
        as :func:`launch` describes them, on this Indexer's ``device=`` backend. Returns the launch template
        used (its ``plan(pointers)`` gives the exact kernarg bytes), None when M or N is 0."""
        if self._backend is None:
            raise ValueError("device: launch_pointers needs an Indexer made with device= (a backend name)")
        if clean_logits is not True and clean_logits is not False:
            clean_logits = as_bool("clean_logits", clean_logits)
        key = ("raw", M, N, out_row_stride, clean_logits, device_id)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._raw_shape(key, M, N, out_row_stride, clean_logits, device_id)
        aligned = shape.aligned
        if aligned is not None:
            # The hot path (as launch()'s): seven pointers of the allocators' alignment on a launch prepared before.
            # Anything else (a wrong count, a bad pointer or stream, other alignments) takes _launch, which names it.
            try:
                p0, p1, p2, p3, p4, p5, p6 = pointers
                if not (p0 | p1 | p2 | p3 | p4 | p5 | p6) & ALIGNMENT_BITS:
                    aligned.go(stream, p0, p1, p2, p3, p4, p5, p6)
                    return aligned.template
            except (TypeError, ValueError, OverflowError, struct.error):
                pass
        if shape.problem is None:
            return None
        if len(pointers) != 7:
            raise ValueError(f"pointers: expected 7 device addresses, got {len(pointers)}")
        return self._launch(shape, pointers, stream).template

    def _raw_shape(self, key: tuple, M: Any, N: Any, out_row_stride: Any, clean: bool, device_id: Any) -> _Shape:
        if self.num_heads is None or self.head_dim is None:
            raise ValueError("num_heads, head_dim: launch_pointers needs an Indexer made with both")
        M, N = as_int("M", M), as_int("N", N)
        device_id = as_int("device_id", device_id)
        out_row_stride = N if out_row_stride is None else as_int("out_row_stride", out_row_stride)
        check_sizes(M, N, out_row_stride)
        device = self._raw_device(device_id)
        fmt = self.fp8_format or "e4m3fn"
        if fmt not in device.family.fp8_formats:
            raise ValueError(f"fp8_format: expected {' or '.join(device.family.fp8_formats)} for the "
                             f"{device.family.arch} kernel, got {fmt!r} ({device.family.fp8_format_note})")
        problem = Problem(M, N, self.num_heads, self.head_dim, out_row_stride, clean, fmt) if M and N else None
        return self._remember(key, _Shape(Dims(M, N, self.num_heads, self.head_dim, fmt), problem, device, (M, N)))


def _spans(dims: Dims, out_row_stride: int, ptrs: tuple[int, ...]) -> list[BufferSpan]:
    """The memory one launch may touch, for the emulator's memcheck and its mapped-memory check."""
    M, N, H, D = dims.M, dims.N, dims.heads, dims.head_dim
    out_bytes = ((M - 1) * out_row_stride + N) * 4 if M and N else 0
    sizes = (M * H * D, N * D, 4 * N, 4 * M * H, 4 * M, 4 * M, out_bytes)
    return [BufferSpan(p, n, name == "out", name) for name, p, n in zip((*_ARG_NAMES, "out"), ptrs, sizes)]


# ---------------------------------------------------------------------------------------------------
# Functions over cached Indexers
# ---------------------------------------------------------------------------------------------------
_DEFAULT = Indexer()
_BY_TUNABLES: dict[tuple, Indexer] = {}


class _LaunchIndexers(dict):
    """launch()'s Indexers by configuration, and beside them (``hot``) each configuration-and-shape key already
    launched with allocator-aligned pointers -> its prepared launch, so a repeated launch() costs one tuple and one
    dict lookup before the driver. Dropping or clearing Indexers drops every hot entry (they hold its launches)."""

    def __init__(self) -> None:
        super().__init__()
        self.hot: dict[tuple, Any] = {}

    def clear(self) -> None:
        self.hot.clear()
        super().clear()

    def pop(self, key: tuple, default: Any = None) -> Any:
        self.hot.clear()
        return super().pop(key, default)

    def remember_hot(self, key: tuple, prepared: Any) -> None:
        """Keep ``key`` -> ``prepared``; past MAX_CACHED_SHAPES entries the hot cache starts over, as an Indexer's
        description cache does (a loop over ever new shapes must not grow it without bound)."""
        if len(self.hot) >= MAX_CACHED_SHAPES:
            self.hot.clear()
        self.hot[key] = prepared


_RAW = _LaunchIndexers()


def _indexer_for(tunables: tuple) -> Indexer:
    ind = _BY_TUNABLES.get(tunables)
    if ind is None:
        ind = _BY_TUNABLES[tunables] = Indexer(None, None, block_m=tunables[0], split_n=tunables[1],
                                               num_warps=tunables[2], unroll2=tunables[3],
                                               reverse_rows=tunables[4], variant=tunables[5], arch=tunables[6],
                                               fp8_format=tunables[7])
    return ind


def reset_caches(backend: str | None = None) -> None:
    """Forget the per-device state (modules, functions, compute units, prepared launches) that
    :func:`fp8_mqa_logits` and :func:`launch` cached, for backend ``backend`` or all, and the ``launch``
    Indexers bound to it (they hold the backend instance); likewise for the decode op's functions
    (:func:`rawindexer.paged.reset_caches`). Indexers the caller made are the caller's:
    :meth:`Indexer.reset`. For hosts (and tests) that reset or reconfigure a device under rawindexer."""
    forget_devices(backend)
    for indexer in (_DEFAULT, *_BY_TUNABLES.values()):
        indexer.reset(backend)
    for key in [k for k, ind in _RAW.items() if backend is None or ind._backend.name == backend]:
        _RAW.pop(key, None)
    from . import paged  # imports this module: resolved at call time

    paged.reset_caches(backend)


def fp8_mqa_logits(q_fp8: Any, k_fp8: Any, kv_scale: Any, weights: Any, cu_seqlen_ks: Any, cu_seqlen_ke: Any,
                   clean_logits: bool = True, out: Any = None, *, block_m: int = 0, split_n: int = 0,
                   num_warps: int = 0, unroll2: bool | None = None, reverse_rows: bool | None = None,
                   variant: str | None = None, stream: int | None = None, arch: str | None = None,
                   fp8_format: str | None = None) -> Any:
    """logits[m, n] = sum_h relu(<q[m,h], k[n]>) * kv_scale[n] * weights[m,h] for n in [ks[m], ke[m]).

    Args (any objects with ``__dlpack__``: torch, CuPy, JAX, numpy arrays):
        q_fp8: [M, H, D] float8_e4m3fn or float8_e4m3fnuz (or their uint8 bytes), contiguous.
        k_fp8: [N, D] in q_fp8's format, contiguous.
        kv_scale: [N] float32, >= 0 (the kernel applies it after the ReLU).
        weights: [M, H] float32.
        cu_seqlen_ks, cu_seqlen_ke: [M] int32, each row's key window [ks, ke), clamped to [0, N); any
            int32 is legal (empty when ke <= ks after clamping).
        clean_logits: write -inf outside each row's window; when False those positions are not written.
            A bool or an int.
        out: optional [M, N] float32 destination whose row stride may be any value >= N (not a JAX array:
            those are immutable).
        block_m, split_n, num_warps, unroll2, reverse_rows: tunables; 0 / None = host heuristic.
        variant: gfx950 kernel design, "seed" (the seed's permlane head reduce, the baseline), "mr"
            (weighted head sum on a bf16 MFMA) or "mrp" (the same with a packed-int16 ReLU); None = default.
        stream: the stream to launch on; None = the caller framework's current stream of the arrays' device.
        arch: the target whose kernel runs on ROCm arrays and on the emulator: "gfx950" (None) or "gfx942"
            (MI300X / MI325X).
        fp8_format: the format of uint8 q / k bytes: "e4m3fn" (None) or "e4m3fnuz". gfx942 serves both
            (e4m3fn read in place, see kernels/target.h); gfx950 and sm_90a serve e4m3fn.
    Returns:
        logits [M, N] float32 in the caller's framework (``out`` itself when given). GPU arrays of a framework
        rawindexer does not import into (neither torch, CuPy nor JAX) give a ``dlpack.DLPackArray`` over the
        device buffer it allocated: ``__dlpack__`` (with the stream handshake) and ``__dlpack_device__``, the
        buffer freed once that object and every capsule taken from it are dropped.
    Arrays on the CPU run on the gfx950 emulator (slow; for tests and small shapes), ROCm arrays on the
    gfx950 kernel through hip-python, CUDA arrays on the sm_90a twin. A thin wrapper over a cached
    :class:`Indexer` (one per set of tunables); serving loops can hold their own.
    """
    if (block_m or split_n or num_warps or unroll2 is not None or reverse_rows is not None or variant is not None
            or arch is not None or fp8_format is not None):
        indexer = _indexer_for((block_m, split_n, num_warps, unroll2, reverse_rows, variant, arch, fp8_format))
    else:
        indexer = _DEFAULT
    return indexer(q_fp8, k_fp8, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits, out, stream=stream)


def launch(q_ptr: int, k_ptr: int, kv_scale_ptr: int, weights_ptr: int, cu_seqlen_ks_ptr: int,
           cu_seqlen_ke_ptr: int, out_ptr: int, *, M: int, N: int, num_heads: int, head_dim: int,
           out_row_stride: int | None = None, clean_logits: bool = True, stream: int = 0,
           device: str = "hip", device_id: int = 0, block_m: int = 0, split_n: int = 0, num_warps: int = 0,
           unroll2: bool | None = None, reverse_rows: bool | None = None,
           variant: str | None = None, arch: str | None = None,
           fp8_format: str | None = None) -> LaunchTemplate | None:
    """Raw entry for hosts without a DLPack framework: device pointers as integers.

    q [M, num_heads, head_dim] and k [N, head_dim] are contiguous fp8 bytes (``fp8_format``, e4m3fn by default); kv_scale [N],
    weights [M, num_heads] contiguous float32; cu_seqlen_ks / cu_seqlen_ke [M] int32; out [M, N]
    float32 with rows ``out_row_stride`` (>= N, default N) elements apart. ``device`` is a backend name
    ("hip", "cuda" or "emulator", whose pointers are host addresses: it refuses ranges that are not mapped)
    and ``device_id`` the device the pointers live on; ``stream`` a stream handle of that device. Goes
    through a cached :class:`Indexer`. Returns the launch template used (``.symbol``, ``.grid``,
    ``.block``, ``.config``; ``.plan(pointers).kernargs`` the bytes), None when M or N is 0.
    """
    # The hot path: this configuration and shape launched before with pointers of the allocators' alignment.
    # Anything else (a new description, other alignments, a bad pointer or stream) goes through launch_pointers,
    # which validates, plans and names what is wrong.
    hot_key = (M, N, num_heads, head_dim, device, device_id, out_row_stride, clean_logits, block_m, split_n,
               num_warps, unroll2, reverse_rows, variant, arch, fp8_format)
    prepared = _RAW.hot.get(hot_key)
    if prepared is not None and (clean_logits is True or clean_logits is False):
        try:
            if not (q_ptr | k_ptr | kv_scale_ptr | weights_ptr | cu_seqlen_ks_ptr | cu_seqlen_ke_ptr
                    | out_ptr) & ALIGNMENT_BITS:
                prepared.go(stream, q_ptr, k_ptr, kv_scale_ptr, weights_ptr, cu_seqlen_ks_ptr, cu_seqlen_ke_ptr,
                            out_ptr)
                return prepared.template
        except (TypeError, OverflowError, struct.error):
            pass  # launch_pointers below raises the error that names the argument
    key = (num_heads, head_dim, device, block_m, split_n, num_warps, unroll2, reverse_rows, variant, arch, fp8_format)
    indexer = _RAW.get(key)
    if indexer is None:
        indexer = Indexer(as_int("num_heads", num_heads), as_int("head_dim", head_dim), device=device,
                          block_m=block_m, split_n=split_n, num_warps=num_warps, unroll2=unroll2,
                          reverse_rows=reverse_rows, variant=variant, arch=arch, fp8_format=fp8_format)
        _RAW[key] = indexer
    template = indexer.launch_pointers((q_ptr, k_ptr, kv_scale_ptr, weights_ptr, cu_seqlen_ks_ptr, cu_seqlen_ke_ptr,
                                        out_ptr), M, N, out_row_stride, clean_logits, stream, device_id)
    shape = indexer._shapes.get(("raw", M, N, out_row_stride, clean_logits, device_id))
    if shape is not None and shape.aligned is not None and (clean_logits is True or clean_logits is False):
        _RAW.remember_hot(hot_key, shape.aligned)
    return template
