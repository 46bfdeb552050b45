"""Public entry points of the decode indexer: ``fp8_paged_mqa_logits`` (any DLPack framework), its prepared
form ``prepare_paged_mqa_logits`` (validate and plan once, launch many times) and
``launch_paged`` (raw device pointers), on the same backends as the prefill path.

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

from . import dlpack
from . import paged_kernels as pk
from .backends import Backend, BufferSpan, backend_for_device_type, get_backend
from .dispatch.base import LaunchPlan
from .dispatch.paged_gfx942 import PagedGfx942Family
from .dispatch.paged_gfx950 import PagedGfx950Family, PagedPointers, PagedProblem
from .dispatch.paged_sm90 import PagedSm90Family
from .dlpack import TensorView
from .validation import FP8_DTYPES, INT32_MAX, ValidationError, check_fp8_format

#: target -> kernel family of the paged op (one entry per built target)
PAGED_FAMILIES = {"gfx950": PagedGfx950Family, "gfx942": PagedGfx942Family, "sm_90a": PagedSm90Family}
#: the targets a backend runs besides its own (``arch=``)
RUNS_ON = {"hip": ("gfx950", "gfx942"), "emulator": ("gfx950", "gfx942")}


def _arch(backend: Backend, arch: str | None) -> str:
    """The target a call runs: ``arch`` where ``backend`` runs it, else the backend's own."""
    if arch is None:
        return backend.arch
    allowed = RUNS_ON.get(backend.name, (backend.arch,))
    if arch not in allowed:
        raise ValueError(f"arch: expected one of {allowed} for arrays on the {backend.name} backend, got {arch!r}")
    return arch
_families: dict[str, Any] = {}
_functions: dict[tuple, Any] = {}


def _family(arch: str):
    if arch not in PAGED_FAMILIES:
        raise ValueError(f"fp8_paged_mqa_logits: no kernel for {arch!r} yet (built targets: {sorted(PAGED_FAMILIES)})")
    if arch not in _families:
        _families[arch] = PAGED_FAMILIES[arch]()
    return _families[arch]


def is_paged_supported(num_heads: int, head_dim: int, block_size: int, arch: str = "gfx950") -> bool:
    """True when a built decode kernel for ``arch`` serves (num_heads, head_dim, block_size)."""
    return arch in PAGED_FAMILIES and _family(arch).is_supported(int(num_heads), int(head_dim), int(block_size))


def _function(backend: Backend, device_id: int, symbol: str, arch: str | None = None) -> Any:
    arch = arch or backend.arch
    key = (backend.name, device_id, arch)
    if key not in _functions:
        _functions[key] = backend.load_module(_family(arch).code_object())
    fkey = (*key, symbol)
    if fkey not in _functions:
        _functions[fkey] = backend.get_function(_functions[key], symbol)
    return _functions[fkey]


def _spans(p: PagedProblem, ptrs: PagedPointers, num_blocks: int) -> list[BufferSpan]:
    """What one launch may touch, for the emulator's memcheck (GPU backends ignore it)."""
    rows = p.batch * p.next_n
    lens_entries = rows if p.context_lens_2d else p.batch
    out_bytes = ((rows - 1) * p.out_row_stride + p.max_context_len) * 4 if rows and p.max_context_len else 0
    return [
        BufferSpan(ptrs.q, rows * p.heads * p.head_dim),
        BufferSpan(ptrs.kv_cache, num_blocks * p.block_size * (p.head_dim + pk.SCALE_BYTES)),
        BufferSpan(ptrs.weights, 4 * rows * p.heads), BufferSpan(ptrs.context_lens, 4 * lens_entries),
        BufferSpan(ptrs.block_table, 4 * p.batch * p.max_blocks), BufferSpan(ptrs.out, out_bytes, writable=True),
    ]


def _plan_and_launch(backend: Backend, device_id: int, p: PagedProblem, ptrs: PagedPointers, num_blocks: int,
                     stream: int, split_n: int, num_warps: int, variant: str | None = None,
                     arch: str | None = None) -> LaunchPlan | None:
    arch = _arch(backend, arch)
    family = _family(arch)
    if not family.is_supported(p.heads, p.head_dim, p.block_size):
        raise ValidationError(f"(num_heads, head_dim, block_size): expected a shape with a built {arch} "
                              f"decode kernel (is_paged_supported() says which), got "
                              f"({p.heads}, {p.head_dim}, {p.block_size})")
    if p.batch == 0 or p.max_context_len == 0:
        return None  # nothing to compute, nothing to write
    plan = family.plan(p, ptrs, backend.compute_units_for(device_id, arch), split_n=split_n, num_warps=num_warps,
                       variant=variant)
    if hasattr(backend, "set_device"):
        backend.set_device(device_id)
    backend.launch(_function(backend, device_id, plan.symbol, arch), plan.grid, plan.block, plan.kernargs,
                   stream=stream, buffers=_spans(p, ptrs, num_blocks), shared_mem=plan.shared_mem)
    return plan


def _check_scalars(next_n: int, max_context_len: int) -> None:
    if not 1 <= next_n <= pk.MAX_NEXT_N:
        raise ValidationError(f"next_n: expected 1..{pk.MAX_NEXT_N}, got {next_n}")
    if not 0 <= max_context_len <= INT32_MAX:
        raise ValidationError(f"max_context_len: expected 0..{INT32_MAX}, got {max_context_len}")


def launch_paged(q_ptr: int, kv_cache_ptr: int, weights_ptr: int, context_lens_ptr: int, block_table_ptr: int,
                 out_ptr: int, *, batch: int, next_n: int, num_heads: int, head_dim: int, block_size: int,
                 num_blocks: int, max_blocks: int, max_context_len: int, out_row_stride: int | None = None,
                 context_lens_2d: bool = False, clean_logits: bool = False, stream: int = 0, device: str = "hip",
                 device_id: int = 0, split_n: int = 0, num_warps: int = 0,
                 variant: str | None = None, arch: str | None = None,
                 fp8_format: str | None = None) -> LaunchPlan | None:
    """Raw entry: device pointers as integers, every array contiguous.

    q [batch, next_n, num_heads, head_dim] fp8 bytes (``fp8_format``: e4m3fn by default, e4m3fnuz on gfx942); kv_cache [num_blocks, block_size, 1,
    head_dim + 4] uint8 (fused layout); weights [batch * next_n, num_heads] float32; context_lens int32
    [batch] (or [batch, next_n] with ``context_lens_2d``); block_table [batch, max_blocks] int32; out
    [batch * next_n, max_context_len] float32 with rows ``out_row_stride`` (>= max_context_len) elements
    apart. Returns the plan launched (None when nothing is launched).
    """
    out_row_stride = max_context_len if out_row_stride is None else int(out_row_stride)
    for name, value in [("batch", batch), ("num_blocks", num_blocks), ("max_blocks", max_blocks)]:
        if not 0 <= int(value) <= INT32_MAX:
            raise ValidationError(f"{name}: expected 0..{INT32_MAX}, got {value}")
    _check_scalars(int(next_n), int(max_context_len))
    if out_row_stride < max_context_len:
        raise ValidationError(f"out_row_stride: expected >= max_context_len={max_context_len}, got {out_row_stride}")
    p = PagedProblem(int(batch), int(next_n), int(num_heads), int(head_dim), int(block_size), int(max_context_len),
                     int(max_blocks), out_row_stride, bool(clean_logits), bool(context_lens_2d),
                     check_fp8_format(fp8_format) or "e4m3fn")
    ptrs = PagedPointers(q_ptr, kv_cache_ptr, weights_ptr, context_lens_ptr, block_table_ptr, out_ptr)
    return _plan_and_launch(get_backend(device), device_id, p, ptrs, int(num_blocks), stream, split_n, num_warps,
                            variant, arch)


def _fail(name: str, got: str, expected: str) -> None:
    raise ValidationError(f"{name}: expected {expected}, got {got}")


def validate_paged(q: TensorView, kv_cache: TensorView, weights: TensorView, context_lens: TensorView,
                   block_table: TensorView, max_context_len: int, out: TensorView | None,
                   fp8_format: str | None = None) -> tuple[PagedProblem, int]:
    """Check every operand; (problem without out_row_stride / clean_logits filled in, num_blocks). The
    fp8 format of q and the cache's keys: q's float8 dtype, else ``fp8_format`` (default e4m3fn); the
    uint8 cache carries no dtype of its own and is read in q's format."""
    def contiguous(name: str, t: TensorView) -> None:
        if not t.is_contiguous():
            _fail(name, f"strides {tuple(t.strides)} (elements) for shape {tuple(t.shape)}", "a contiguous array")

    def dtype(name: str, t: TensorView, allowed: tuple[str, ...]) -> None:
        if t.dtype.name not in allowed:
            _fail(name, f"dtype {t.dtype.name}", " or ".join(allowed))

    if len(q.shape) != 4:
        _fail("q", f"shape {tuple(q.shape)}", "a 4-d [B, next_n, num_heads, head_dim] array")
    B, next_n, H, D = q.shape
    dtype("q", q, FP8_DTYPES)
    contiguous("q", q)
    _check_scalars(next_n, int(max_context_len))
    if len(kv_cache.shape) != 4 or kv_cache.shape[2] != 1 or kv_cache.shape[3] != D + pk.SCALE_BYTES:
        _fail("kv_cache", f"shape {tuple(kv_cache.shape)}",
              f"[num_blocks, block_size, 1, head_dim + 4 = {D + pk.SCALE_BYTES}] (fused fp8 keys + float32 scales)")
    num_blocks, block_size = kv_cache.shape[:2]
    dtype("kv_cache", kv_cache, ("uint8",))
    contiguous("kv_cache", kv_cache)
    if tuple(weights.shape) != (B * next_n, H):
        _fail("weights", f"shape {tuple(weights.shape)}", f"shape ({B * next_n}, {H}) ([B * next_n, num_heads])")
    dtype("weights", weights, ("float32",))
    contiguous("weights", weights)
    if tuple(context_lens.shape) not in ((B,), (B, next_n)):
        _fail("context_lens", f"shape {tuple(context_lens.shape)}", f"shape ({B},) or ({B}, {next_n})")
    dtype("context_lens", context_lens, ("int32",))
    contiguous("context_lens", context_lens)
    if len(block_table.shape) != 2 or block_table.shape[0] != B:
        _fail("block_table", f"shape {tuple(block_table.shape)}", f"[B={B}, max_blocks]")
    dtype("block_table", block_table, ("int32",))
    contiguous("block_table", block_table)
    for name, t in (("q", q), ("kv_cache", kv_cache)):
        if t.ptr % 16:  # both kernels read these with 16-byte loads
            _fail(name, f"data address 0x{t.ptr:x}", "a 16-byte aligned address")
    rows = B * next_n
    if out is not None:
        if tuple(out.shape) != (rows, max_context_len):
            _fail("out", f"shape {tuple(out.shape)}", f"shape ({rows}, {max_context_len}) ([B * next_n, max_context_len])")
        dtype("out", out, ("float32",))
        if out.readonly:
            _fail("out", "a read-only array", "a writable array")
        if (rows > 1 and out.strides[0] < max_context_len) or (max_context_len > 1 and out.strides[1] != 1):
            _fail("out", f"strides {tuple(out.strides)} (elements)", f"row stride >= max_context_len={max_context_len} "
                  "and column stride 1")
    named = [("q", q), ("kv_cache", kv_cache), ("weights", weights), ("context_lens", context_lens),
             ("block_table", block_table)] + ([("out", out)] if out is not None else [])
    for name, t in named:
        if t.device != q.device:
            _fail(name, f"an array on DLPack device {t.device}", f"q's device {q.device} (mixed devices)")
    if q.dtype.name == "uint8":
        fmt = check_fp8_format(fp8_format) or "e4m3fn"
    else:
        fmt = q.dtype.name.removeprefix("float8_")
        if fp8_format is not None and check_fp8_format(fp8_format) != fmt:
            _fail("fp8_format", repr(fp8_format), f"None or {fmt!r}: q is {q.dtype.name} (fp8_format= describes "
                  "uint8 bytes)")
    problem = PagedProblem(B, next_n, H, D, block_size, int(max_context_len), block_table.shape[1], 0, False,
                           len(context_lens.shape) == 2, fmt)
    return problem, num_blocks


class PreparedPagedLogits:
    """One validated, planned decode launch over fixed buffers: calling it re-launches the same kernel on
    the same device addresses with no validation, DLPack import or planning (the serving loop's form,
    where q, weights, context_lens, block_table and out are persistent buffers rewritten in place each
    step). It keeps the arrays it was built from alive. Returns ``out``.
    """

    def __init__(self, backend: Backend, device_id: int, plan: LaunchPlan | None, spans: list[BufferSpan],
                 stream: int, keep: tuple, result: Any, arch: str | None = None) -> None:
        self.backend, self.device_id, self.plan, self.stream = backend, device_id, plan, stream
        self._spans, self._keep, self._result = spans, keep, result
        self._function = _function(backend, device_id, plan.symbol, arch) if plan is not None else None

    def __call__(self, stream: int | None = None) -> Any:
        if self.plan is not None:
            self.backend.launch(self._function, self.plan.grid, self.plan.block, self.plan.kernargs,
                                stream=self.stream if stream is None else stream, buffers=self._spans,
                                shared_mem=self.plan.shared_mem)
        return self._result()


def _prepare(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any, max_context_len: int,
             clean_logits: bool, out: Any, split_n: int, num_warps: int, stream: int | None,
             fp8_format: str | None = None):
    """Validate, allocate ``out`` when None, plan. -> (backend, device_id, problem, ptrs, num_blocks, stream,
    result, views)."""
    from .api import _STREAM_OF_FRAMEWORK, _allocate_out, _dlpack_stream

    named = {"q": q, "kv_cache": kv_cache, "weights": weights, "context_lens": context_lens,
             "block_table": block_table}
    for name, obj in named.items():
        if not hasattr(obj, "__dlpack_device__"):
            raise dlpack.DLPackError(f"{name}: expected an array with __dlpack__ (torch, CuPy, JAX, numpy), "
                                     f"got {type(obj).__name__}")
    if not isinstance(max_context_len, int) and not hasattr(max_context_len, "__index__"):
        raise ValidationError(f"max_context_len: expected a host int, got {type(max_context_len).__name__}")
    max_context_len = int(max_context_len)
    device = tuple(int(x) for x in q.__dlpack_device__())
    backend = backend_for_device_type(device[0])
    framework = dlpack.framework_of(q)
    if stream is None:
        get_stream = _STREAM_OF_FRAMEWORK.get(framework)  # the framework's current stream on a GPU
        stream = get_stream(device[1]) if get_stream is not None and device[0] != dlpack.DL_CPU else 0
    dl_stream = _dlpack_stream(backend, stream)
    views = {name: dlpack.from_dlpack(obj, name=name, stream=dl_stream) for name, obj in named.items()}
    out_view = dlpack.from_dlpack(out, name="out", stream=dl_stream) if out is not None else None
    problem, num_blocks = validate_paged(*views.values(), max_context_len, out_view, fp8_format)
    rows = problem.batch * problem.next_n
    result = lambda: out  # noqa: E731
    if out is None:
        out, _, result = _allocate_out(framework, q, backend, device, rows, max_context_len, stream)
        out_view = dlpack.from_dlpack(out, name="out", stream=dl_stream)
    out_row_stride = out_view.strides[0] if rows > 1 else max_context_len
    problem = PagedProblem(problem.batch, problem.next_n, problem.heads, problem.head_dim, problem.block_size,
                           max_context_len, problem.max_blocks, out_row_stride, bool(clean_logits),
                           problem.context_lens_2d, problem.fp8_format)
    ptrs = PagedPointers(*(views[n].ptr for n in named), out_view.ptr)
    return backend, device[1], problem, ptrs, num_blocks, stream, result, (views, out_view, out)


def fp8_paged_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                         max_context_len: int, clean_logits: bool = False, out: Any = None, *, split_n: int = 0,
                         num_warps: int = 0, variant: str | None = None, stream: int | None = None,
                         arch: str | None = None, fp8_format: str | None = None) -> Any:
    """Decode indexer logits over a paged fp8 key cache.

        logits[b*next_n + j, t] = sum_h relu(<q[b,j,h], K_b[t]>) * scale_b[t] * weights[b*next_n + j, h]

    Args (any objects with ``__dlpack__``):
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
        out: optional [B * next_n, max_context_len] float32 destination, any row stride >= max_context_len.
        split_n, num_warps: tunables (0 = host heuristic).
        variant: the design where a target builds several (sm_90a: "f16", the default -- the score wgmma on
            exactly converted values, fp32-accurate -- or "fp8", the e4m3 wgmma at twice the tensor rate
            with Hopper's shorter fp8 accumulation); None = the target's default.
        stream: the stream to launch on; None = the caller framework's current stream.
        arch: the target on ROCm arrays and the emulator, "gfx950" (None) or "gfx942" (MI300X / MI325X).
        fp8_format: the format of uint8 q and of the cache's key bytes, "e4m3fn" (None) or "e4m3fnuz" (gfx942
            reads both; gfx950 and sm_90a e4m3fn). A float8_e4m3fnuz q needs no fp8_format.
    Returns logits [B * next_n, max_context_len] float32 in the caller's framework (``out`` when given).
    CPU arrays run on the gfx950 emulator, ROCm arrays on the gfx950 kernel, CUDA arrays on the sm_90a twin.
    q and kv_cache must be 16-byte aligned.
    """
    backend, device_id, problem, ptrs, num_blocks, stream, result, _ = _prepare(
        q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits, out, split_n, num_warps,
        stream, fp8_format)
    _plan_and_launch(backend, device_id, problem, ptrs, num_blocks, stream, int(split_n), int(num_warps), variant,
                     arch)
    return result()


def prepare_paged_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                             max_context_len: int, clean_logits: bool = False, out: Any = None, *, split_n: int = 0,
                             num_warps: int = 0, variant: str | None = None,
                             stream: int | None = None, arch: str | None = None,
                             fp8_format: str | None = None) -> PreparedPagedLogits:
    """Everything :func:`fp8_paged_mqa_logits` does except the launch, once: the returned object launches
    on these buffers when called (their contents may change between calls, their addresses and shapes
    may not)."""
    backend, device_id, problem, ptrs, num_blocks, stream, result, keep = _prepare(
        q, kv_cache, weights, context_lens, block_table, max_context_len, clean_logits, out, split_n, num_warps,
        stream, fp8_format)
    arch = _arch(backend, arch)
    family = _family(arch)
    if not family.is_supported(problem.heads, problem.head_dim, problem.block_size):
        raise ValidationError(f"(num_heads, head_dim, block_size): expected a shape with a built {arch} "
                              f"decode kernel, got ({problem.heads}, {problem.head_dim}, {problem.block_size})")
    plan = None
    if problem.batch and problem.max_context_len:
        plan = family.plan(problem, ptrs, backend.compute_units_for(device_id, arch), split_n=int(split_n),
                           num_warps=int(num_warps), variant=variant)
        if hasattr(backend, "set_device"):
            backend.set_device(device_id)
    return PreparedPagedLogits(backend, device_id, plan, _spans(problem, ptrs, num_blocks), stream,
                               (keep, q, kv_cache, weights, context_lens, block_table), result, arch)
