"""Public entry points of the decode indexer: :class:`PagedIndexer` (the prepared launch object, as
:class:`rawindexer.Indexer` is for prefill), ``fp8_paged_mqa_logits`` (any DLPack framework),
``prepare_paged_mqa_logits`` (a call bound to fixed buffers, relaunched with no per-call work) and
``launch_paged`` (raw device pointers).

The call machinery is prefill's (:mod:`rawindexer.launch_path`): torch / CuPy arrays read through their
attributes and anything else through DLPack, one validation and plan per distinct call description, the
inputs' device made current only for the launch (the caller's restored), the caller framework's current
stream of that device, outputs from the caller's framework, and nothing that synchronises or reads device
memory, so a call is capturable in a CUDA graph. This module says what is decode's: its arrays, validation,
kernel families, launch template and the memory a launch touches.

Block-table contract (the caller's, not checked on the device: checking would read device memory):
entries block_table[b, :ceil(len_b / block_size)] are physical block indices in [0, num_blocks), where
len_b is the longest row length of sequence b; entries past them are never read (any value is fine).
Row lengths are clamped to [0, min(max_context_len, max_blocks * block_size)], so no read leaves the
block table and no store leaves the output. An entry outside [0, num_blocks) makes the kernel read
outside the cache: on a GPU that is undefined (garbage logits or a memory fault); the emulator's
memcheck raises :class:`rawindexer.emulator.MemoryFault` naming the address.
"""
from __future__ import annotations

from typing import Any

from . import paged_kernels as pk
from .backends import Backend, BufferSpan, get_backend
from .dispatch.base import LaunchTemplate
from .dispatch.paged_gfx942 import PagedGfx942Family
from .dispatch.paged_gfx950 import PagedGfx950Family, PagedProblem, PagedTunables
from .dispatch.paged_sm90 import PagedSm90Family
from .launch_path import BoundLaunch, PreparedOp, _Device, _Shape
from .validation import (FP8_DTYPES, INT32_MAX, Operand, ValidationError, _check_contiguous, as_bool, as_int,
                         check_fp8_format, check_same_device)

#: target -> kernel family of the paged op (one entry per built target)
PAGED_FAMILIES = {"gfx950": PagedGfx950Family, "gfx942": PagedGfx942Family, "sm_90a": PagedSm90Family}
_families: dict[str, Any] = {}
_ARG_NAMES = ("q", "kv_cache", "weights", "context_lens", "block_table")


def _family(arch: str) -> Any:
    if arch not in PAGED_FAMILIES:
        raise ValueError(f"fp8_paged_mqa_logits: no kernel for {arch!r} yet (built targets: {sorted(PAGED_FAMILIES)})")
    if arch not in _families:
        _families[arch] = PAGED_FAMILIES[arch]()
    return _families[arch]


def is_paged_supported(num_heads: int, head_dim: int, block_size: int, arch: str = "gfx950") -> bool:
    """True when a built decode kernel for ``arch`` serves (num_heads, head_dim, block_size)."""
    return arch in PAGED_FAMILIES and _family(arch).is_supported(int(num_heads), int(head_dim), int(block_size))


# ---------------------------------------------------------------------------------------------------
# Validation (once per call description)
# ---------------------------------------------------------------------------------------------------
def _fail(name: str, got: str, expected: str) -> None:
    raise ValidationError(f"{name}: expected {expected}, got {got}")


def _check_scalars(next_n: int, max_context_len: int) -> None:
    if not 1 <= next_n <= pk.MAX_NEXT_N:
        raise ValidationError(f"next_n: expected 1..{pk.MAX_NEXT_N}, got {next_n}")
    if not 0 <= max_context_len <= INT32_MAX:
        raise ValidationError(f"max_context_len: expected 0..{INT32_MAX}, got {max_context_len}")


def validate_paged(q: Operand, kv_cache: Operand, weights: Operand, context_lens: Operand, block_table: Operand,
                   max_context_len: int, out: Operand | None, clean_logits: bool = False,
                   fp8_format: str | None = None) -> tuple[PagedProblem, int]:
    """Check every operand's description (Operand or TensorView; never its values); (problem, num_blocks).
    The 16-byte alignment of q and kv_cache is checked where pointers are (the family's ``prepare``). The fp8
    format of q and the cache's keys: q's float8 dtype, else ``fp8_format`` (default e4m3fn); the uint8 cache
    carries no dtype of its own and is read in q's format."""
    q, kv_cache, weights, context_lens, block_table = (
        Operand.of(t) for t in (q, kv_cache, weights, context_lens, block_table))
    out = Operand.of(out) if out is not None else None

    def dtype(name: str, t: Operand, allowed: tuple[str, ...]) -> None:
        if t.dtype not in allowed:
            _fail(name, f"dtype {t.dtype}", " or ".join(allowed))

    if len(q.shape) != 4:
        _fail("q", f"shape {tuple(q.shape)}", "a 4-d [B, next_n, num_heads, head_dim] array")
    B, next_n, H, D = q.shape
    dtype("q", q, FP8_DTYPES)
    _check_contiguous("q", q)
    _check_scalars(next_n, max_context_len)
    if len(kv_cache.shape) != 4 or kv_cache.shape[2] != 1 or kv_cache.shape[3] != D + pk.SCALE_BYTES:
        _fail("kv_cache", f"shape {tuple(kv_cache.shape)}",
              f"[num_blocks, block_size, 1, head_dim + 4 = {D + pk.SCALE_BYTES}] (fused fp8 keys + float32 scales)")
    num_blocks, block_size = kv_cache.shape[:2]
    dtype("kv_cache", kv_cache, ("uint8",))
    _check_contiguous("kv_cache", kv_cache)
    if tuple(weights.shape) != (B * next_n, H):
        _fail("weights", f"shape {tuple(weights.shape)}", f"shape ({B * next_n}, {H}) ([B * next_n, num_heads])")
    dtype("weights", weights, ("float32",))
    _check_contiguous("weights", weights)
    if tuple(context_lens.shape) not in ((B,), (B, next_n)):
        _fail("context_lens", f"shape {tuple(context_lens.shape)}", f"shape ({B},) or ({B}, {next_n})")
    dtype("context_lens", context_lens, ("int32",))
    _check_contiguous("context_lens", context_lens)
    if len(block_table.shape) != 2 or block_table.shape[0] != B:
        _fail("block_table", f"shape {tuple(block_table.shape)}", f"[B={B}, max_blocks]")
    dtype("block_table", block_table, ("int32",))
    _check_contiguous("block_table", block_table)
    rows = B * next_n
    if out is not None:
        if tuple(out.shape) != (rows, max_context_len):
            _fail("out", f"shape {tuple(out.shape)}", f"shape ({rows}, {max_context_len}) ([B * next_n, max_context_len])")
        dtype("out", out, ("float32",))
        if out.readonly:
            _fail("out", "a read-only array", "a writable array")
        if rows and max_context_len and ((rows > 1 and out.strides[0] < max_context_len)
                                         or (max_context_len > 1 and out.strides[1] != 1)):
            _fail("out", f"strides {tuple(out.strides)} (elements)", f"row stride >= max_context_len={max_context_len} "
                  "and column stride 1")
    check_same_device([("q", q), ("kv_cache", kv_cache), ("weights", weights), ("context_lens", context_lens),
                       ("block_table", block_table)] + ([("out", out)] if out is not None else []))
    if q.dtype == "uint8":
        fmt = check_fp8_format(fp8_format) or "e4m3fn"
    else:
        fmt = q.dtype.removeprefix("float8_")
        if fp8_format is not None and check_fp8_format(fp8_format) != fmt:
            _fail("fp8_format", repr(fp8_format), f"None or {fmt!r}: q is {q.dtype} (fp8_format= describes "
                  "uint8 bytes)")
    out_row_stride = out.strides[0] if out is not None and rows > 1 else max_context_len
    problem = PagedProblem(B, next_n, H, D, block_size, max_context_len, block_table.shape[1], out_row_stride,
                           bool(clean_logits), len(context_lens.shape) == 2, fmt, num_blocks)
    return problem, num_blocks


def _spans(p: PagedProblem, num_blocks: int, ptrs: tuple[int, ...]) -> list[BufferSpan]:
    """What one launch may touch, for the emulator's memcheck (GPU backends ignore it)."""
    rows = p.batch * p.next_n
    lens_entries = rows if p.context_lens_2d else p.batch
    out_bytes = ((rows - 1) * p.out_row_stride + p.max_context_len) * 4 if rows and p.max_context_len else 0
    sizes = (rows * p.heads * p.head_dim, num_blocks * p.block_size * (p.head_dim + pk.SCALE_BYTES),
             4 * rows * p.heads, 4 * lens_entries, 4 * p.batch * p.max_blocks, out_bytes)
    return [BufferSpan(ptr, n, name == "out", name) for name, ptr, n in zip((*_ARG_NAMES, "out"), ptrs, sizes)]


# ---------------------------------------------------------------------------------------------------
# The prepared launch object
# ---------------------------------------------------------------------------------------------------
class PagedIndexer(PreparedOp):
    """A prepared ``fp8_paged_mqa_logits``: resolve once, then each call costs microseconds of host time.

        decode = rawindexer.PagedIndexer(num_heads=64, head_dim=128)      # e.g. one per model
        logits = decode(q, kv_cache, weights, context_lens, block_table, max_context_len, out=buf)

    ``num_heads`` / ``head_dim``: the shape this object serves (None = whatever q has). ``device``: a backend
    name ("cuda", "hip", "emulator") to insist on, or None to follow the arrays' DLPack device. ``split_n``,
    ``num_warps``, ``variant``, ``arch``, ``fp8_format``: as :func:`fp8_paged_mqa_logits`. The inputs' device decides where the call
    runs (its context made current for the launch, the caller's restored), on the caller's current stream
    of that device. Thread-safe: several threads may share one object.
    """

    ARG_NAMES = _ARG_NAMES

    def __init__(self, num_heads: int | None = None, head_dim: int | None = None, *, device: str | None = None,
                 split_n: int = 0, num_warps: int = 0, variant: str | None = None, arch: str | None = None,
                 fp8_format: str | None = None) -> None:
        if arch is not None:
            _family(arch)  # names the targets when arch is unknown
        self.arch = arch
        self.fp8_format = check_fp8_format(fp8_format)
        self.num_heads = None if num_heads is None else as_int("num_heads", num_heads)
        self.head_dim = None if head_dim is None else as_int("head_dim", head_dim)
        self.tunables = PagedTunables(as_int("split_n", split_n), as_int("num_warps", num_warps), variant)
        super().__init__(get_backend(device) if device is not None else None)

    # -- decode's part of the prepared launch ------------------------------------------------------------
    def _family(self, arch: str) -> Any:
        return _family(arch)

    def _check_backend(self, backend: Backend, device_id: int | None = None) -> None:
        arch = self._arch(backend, device_id)
        if self.tunables.variant is not None:
            _family(arch).design(self.tunables.variant)  # a ValueError naming the target's designs

    def _describe(self, ops: list[Operand], out: Operand | None, scalars: tuple, device: _Device) -> _Shape:
        max_context_len, clean = scalars
        problem, num_blocks = validate_paged(*ops, max_context_len, out, clean, self.fp8_format)
        for name, want, got in (("num_heads", self.num_heads, problem.heads),
                                ("head_dim", self.head_dim, problem.head_dim)):
            if want is not None and got != want:
                raise ValidationError(f"q: expected {name}={want} (this PagedIndexer's), got shape {ops[0].shape}")
        self._check_supported(device, problem)
        device.family.design(self.tunables.variant, problem.fp8_format)  # refuses a format the target does not read
        rows = problem.batch * problem.next_n
        launch = problem if problem.batch and problem.max_context_len else None  # else nothing to write
        # the shape's dims: num_blocks, what the memcheck spans need beyond the problem
        return _Shape(num_blocks, launch, device, (rows, max_context_len))

    @staticmethod
    def _check_supported(device: _Device, p: PagedProblem) -> None:
        if not device.family.is_supported(p.heads, p.head_dim, p.block_size):
            raise ValidationError(f"(num_heads, head_dim, block_size): expected a shape with a built "
                                  f"{device.backend.arch} decode kernel (is_paged_supported() says which), got "
                                  f"({p.heads}, {p.head_dim}, {p.block_size})")

    def _template(self, shape: _Shape, alignment: tuple[int, ...], ptrs: tuple[int, ...]) -> LaunchTemplate:
        device = shape.device
        return device.family.prepare(shape.problem, self.tunables, alignment, device.compute_units, ptrs)

    def _spans(self, shape: _Shape, ptrs: tuple[int, ...]) -> list[BufferSpan]:
        return _spans(shape.problem, shape.dims, ptrs)

    # -- calls ----------------------------------------------------------------------------------------
    @staticmethod
    def _scalars(max_context_len: Any, clean_logits: Any) -> tuple[int, bool]:
        if isinstance(max_context_len, bool) or not hasattr(max_context_len, "__index__"):
            raise ValidationError(f"max_context_len: expected a host int, got {type(max_context_len).__name__}")
        if clean_logits is not True and clean_logits is not False:
            clean_logits = as_bool("clean_logits", clean_logits)
        return max_context_len.__index__(), clean_logits

    def __call__(self, q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                 max_context_len: int, clean_logits: bool = False, out: Any = None, *,
                 stream: int | None = None) -> Any:
        """Decode logits; arguments as :func:`fp8_paged_mqa_logits`. Returns ``out`` (written in place) or a
        new [B * next_n, max_context_len] float32 array of the caller's framework."""
        if type(max_context_len) is not int or (clean_logits is not True and clean_logits is not False):
            max_context_len, clean_logits = self._scalars(max_context_len, clean_logits)
        return self._call((q, kv_cache, weights, context_lens, block_table), out, (max_context_len, clean_logits),
                          stream)

    def bind(self, q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any, max_context_len: int,
             clean_logits: bool = False, out: Any = None, *, stream: int | None = None) -> BoundLaunch:
        """Everything a call does except the launch, once: the returned object launches on these buffers when
        called (their contents may change between calls, their addresses and shapes may not) and returns the
        output. An ``out`` of None is allocated now, once."""
        return self._call_slow((q, kv_cache, weights, context_lens, block_table), out,
                               self._scalars(max_context_len, clean_logits), stream, bind=True)

    def launch_pointers(self, pointers: tuple[int, ...], *, batch: int, next_n: int, block_size: int,
                        num_blocks: int, max_blocks: int, max_context_len: int, out_row_stride: int | None = None,
                        context_lens_2d: bool = False, clean_logits: bool = False, stream: int = 0,
                        device_id: int = 0) -> LaunchTemplate | None:
        """The prepared launch from device addresses (q, kv_cache, weights, context_lens, block_table, out),
        as :func:`launch_paged` describes them, on this object's ``device=`` backend (num_heads and head_dim
        are this object's). Returns the launch template used (``.symbol``, ``.grid``, ``.config``;
        ``.plan(pointers).kernargs`` the bytes), None when nothing is launched."""
        key = ("raw", batch, next_n, block_size, num_blocks, max_blocks, max_context_len, out_row_stride,
               context_lens_2d, clean_logits, device_id)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._raw_shape(key, batch, next_n, block_size, num_blocks, max_blocks, max_context_len,
                                    out_row_stride, context_lens_2d, clean_logits, device_id)
        if shape.problem is None:
            return None
        if len(pointers) != 6:
            raise ValueError(f"pointers: expected 6 device addresses, got {len(pointers)}")
        return self._launch(shape, tuple(pointers), stream).template

    def _raw_shape(self, key: tuple, batch: Any, next_n: Any, block_size: Any, num_blocks: Any, max_blocks: Any,
                   max_context_len: Any, out_row_stride: Any, two_d: Any, clean: Any, device_id: Any) -> _Shape:
        if self.num_heads is None or self.head_dim is None:
            raise ValueError("num_heads, head_dim: launch_pointers needs a PagedIndexer made with both")
        ints = {name: as_int(name, value) for name, value in (
            ("batch", batch), ("next_n", next_n), ("block_size", block_size), ("num_blocks", num_blocks),
            ("max_blocks", max_blocks), ("max_context_len", max_context_len), ("device_id", device_id))}
        for name in ("batch", "num_blocks", "max_blocks"):
            if not 0 <= ints[name] <= INT32_MAX:
                raise ValidationError(f"{name}: expected 0..{INT32_MAX}, got {ints[name]}")
        _check_scalars(ints["next_n"], ints["max_context_len"])
        width = ints["max_context_len"]
        out_row_stride = width if out_row_stride is None else as_int("out_row_stride", out_row_stride)
        if out_row_stride < width:
            raise ValidationError(f"out_row_stride: expected >= max_context_len={width}, got {out_row_stride}")
        p = PagedProblem(ints["batch"], ints["next_n"], self.num_heads, self.head_dim, ints["block_size"], width,
                         ints["max_blocks"], out_row_stride, as_bool("clean_logits", clean),
                         as_bool("context_lens_2d", two_d), self.fp8_format or "e4m3fn", ints["num_blocks"])
        device = self._raw_device(ints["device_id"])
        self._check_supported(device, p)
        device.family.design(self.tunables.variant, p.fp8_format)
        launch = p if p.batch and p.max_context_len else None
        return self._remember(key, _Shape(ints["num_blocks"], launch, device, (p.batch * p.next_n, width)))


# ---------------------------------------------------------------------------------------------------
# Functions over cached PagedIndexers
# ---------------------------------------------------------------------------------------------------
_DEFAULT = PagedIndexer()
_BY_TUNABLES: dict[tuple, PagedIndexer] = {}
_RAW: dict[tuple, PagedIndexer] = {}


def _indexer_for(split_n: int, num_warps: int, variant: str | None, arch: str | None,
                 fp8_format: str | None) -> PagedIndexer:
    if not split_n and not num_warps and variant is None and arch is None and fp8_format is None:
        return _DEFAULT
    key = (split_n, num_warps, variant, arch, fp8_format)
    indexer = _BY_TUNABLES.get(key)
    if indexer is None:
        indexer = _BY_TUNABLES[key] = PagedIndexer(split_n=split_n, num_warps=num_warps, variant=variant, arch=arch,
                                                   fp8_format=fp8_format)
    return indexer


def reset_caches(backend: str | None = None) -> None:
    """:func:`rawindexer.api.reset_caches` for the decode op's cached objects (it calls this)."""
    for indexer in (_DEFAULT, *_BY_TUNABLES.values()):
        indexer.reset(backend)
    for key in [k for k, ind in _RAW.items() if backend is None or ind._backend.name == backend]:
        _RAW.pop(key, None)


def fp8_paged_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                         max_context_len: int, clean_logits: bool = False, out: Any = None, *, split_n: int = 0,
                         num_warps: int = 0, variant: str | None = None, stream: int | None = None,
                         arch: str | None = None, fp8_format: str | None = None) -> Any:
    """Decode indexer logits over a paged fp8 key cache.

        logits[b*next_n + j, t] = sum_h relu(<q[b,j,h], K_b[t]>) * scale_b[t] * weights[b*next_n + j, h]

    Args (any objects with ``__dlpack__``: torch, CuPy, JAX, numpy arrays):
        q: [B, next_n, H, D] float8_e4m3fn (or uint8 codes), contiguous; next_n 1..4.
        kv_cache: [num_blocks, block_size, 1, D + 4] uint8, the fused layout: per block, block_size * D
            fp8 key bytes, then block_size float32 scales (>= 0). block_size 1, 16 or 64.
        weights: [B * next_n, H] float32.
        context_lens: int32 [B] (row j of b has length context_lens[b] - next_n + j + 1) or [B, next_n]
            (row length context_lens[b, j]).
        block_table: [B, max_blocks] int32: token t of sequence b is slot t % block_size of block
            block_table[b, t // block_size] (contract in this module's docstring).
        max_context_len: the output's width (a host int: no device read).
        clean_logits: write -inf at columns past each row's length; when False they are not written.
        out: optional [B * next_n, max_context_len] float32 destination, any row stride >= max_context_len
            (not a JAX array: those are immutable).
        split_n, num_warps: tunables (0 = host heuristic).
        variant: the design where a target builds several (sm_90a: "auto", the default -- "tma" at block size
            64, "tma4" instead where next_n x heads = 96 / 128 and batch x ceil(max_context_len / 64) >= 16384,
            else "f16" --, "tma" (TMA-fed fp8 wgmma, K from shared memory), "f16" (the score wgmma on exactly
            converted values, fp32-accurate), "fp8" (the e4m3 wgmma with K from registers) or "tma4" (block size
            64: at next_n x heads = 96 / 128 one block per SM with four warpgroups on a balanced schedule, faster
            than "tma" on large batches and slower on small ones, docs/PAGED.md "Session 19"); the fp8 designs carry
            Hopper's shorter fp8 accumulation, docs/NUMERICS.md); None = the target's default.
        stream: the stream to launch on; None = the caller framework's current stream of the arrays' device.
        arch: the target on ROCm arrays and the emulator, "gfx950" (None) or "gfx942" (MI300X / MI325X).
        fp8_format: the format of uint8 q and of the cache's key bytes, "e4m3fn" (None) or "e4m3fnuz" (gfx942
            reads both; gfx950 and sm_90a e4m3fn). A float8_e4m3fnuz q needs no fp8_format.
    Returns logits [B * next_n, max_context_len] float32 in the caller's framework (``out`` when given).
    CPU arrays run on the gfx950 (or gfx942: ``arch``) emulator, ROCm arrays on the gfx950 (gfx942) kernel, CUDA
    arrays on the sm_90a twin,
    on the arrays' device (every array on q's device). q and kv_cache must be 16-byte aligned. A thin wrapper
    over a cached :class:`PagedIndexer` (one per set of tunables); serving loops can hold their own.
    """
    return _indexer_for(split_n, num_warps, variant, arch, fp8_format)(
        q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits, out, stream=stream)


def prepare_paged_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                             max_context_len: int, clean_logits: bool = False, out: Any = None, *, split_n: int = 0,
                             num_warps: int = 0, variant: str | None = None, stream: int | None = None,
                             arch: str | None = None, fp8_format: str | None = None) -> BoundLaunch:
    """Everything :func:`fp8_paged_mqa_logits` does except the launch, once (:meth:`PagedIndexer.bind`): the
    returned object launches on these buffers when called, optionally on another ``stream=``, and returns
    the output (their contents may change between calls, their addresses and shapes may not)."""
    return _indexer_for(split_n, num_warps, variant, arch, fp8_format).bind(
        q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits, out, stream=stream)


def launch_paged(q_ptr: int, kv_cache_ptr: int, weights_ptr: int, context_lens_ptr: int, block_table_ptr: int,
                 out_ptr: int, *, batch: int, next_n: int, num_heads: int, head_dim: int, block_size: int,
                 num_blocks: int, max_blocks: int, max_context_len: int, out_row_stride: int | None = None,
                 context_lens_2d: bool = False, clean_logits: bool = False, stream: int = 0, device: str = "hip",
                 device_id: int = 0, split_n: int = 0, num_warps: int = 0, variant: str | None = None,
                 arch: str | None = None, fp8_format: str | None = None) -> LaunchTemplate | None:
    """Raw entry: device pointers as integers, every array contiguous.

    q [batch, next_n, num_heads, head_dim] fp8 bytes (``fp8_format``: e4m3fn by default, e4m3fnuz on gfx942); kv_cache [num_blocks, block_size, 1,
    head_dim + 4] uint8 (fused layout); weights [batch * next_n, num_heads] float32; context_lens int32
    [batch] (or [batch, next_n] with ``context_lens_2d``); block_table [batch, max_blocks] int32; out
    [batch * next_n, max_context_len] float32 with rows ``out_row_stride`` (>= max_context_len) elements
    apart. ``device`` a backend name ("hip", "cuda", or "emulator", whose pointers are host addresses),
    ``device_id`` the device the pointers live on, ``stream`` a stream of that device. Goes through a cached
    :class:`PagedIndexer`. Returns the launch template used (None when nothing is launched).
    """
    key = (num_heads, head_dim, device, split_n, num_warps, variant, arch, fp8_format)
    indexer = _RAW.get(key)
    if indexer is None:
        indexer = _RAW[key] = PagedIndexer(as_int("num_heads", num_heads), as_int("head_dim", head_dim),
                                           device=device, split_n=split_n, num_warps=num_warps, variant=variant,
                                           arch=arch, fp8_format=fp8_format)
    return indexer.launch_pointers((q_ptr, kv_cache_ptr, weights_ptr, context_lens_ptr, block_table_ptr, out_ptr),
                                   batch=batch, next_n=next_n, block_size=block_size, num_blocks=num_blocks,
                                   max_blocks=max_blocks, max_context_len=max_context_len,
                                   out_row_stride=out_row_stride, context_lens_2d=context_lens_2d,
                                   clean_logits=clean_logits, stream=stream, device_id=device_id)
