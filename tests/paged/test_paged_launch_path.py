"""The decode op on the shared launch path (rawindexer.launch_path), on the CPU: per-device context and stream
selection against a fake two-GPU CUDA driver, the mixed-device error, what a steady-state call still does,
the bound (prepared) form and the raw launch going through the same path, and torch tensors through their
attribute route on the emulator."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import rawindexer
from rawindexer import api, dlpack, paged
from rawindexer.testing.paged_cases import make_case
from rawindexer.testing.paged_grading import grade_paged
from rawindexer.testing.paged_reference import fp8_paged_mqa_logits_ref
from rawindexer.validation import ValidationError

from runtime.fake_cuda import CTX_BASE, stream_of, two_gpu_node  # tests/runtime/fake_cuda.py
from paged.fake_tensor_map import fake_tensor_map_encoder  # noqa: F401 (autouse: auto plans tma at block size 64)


@pytest.fixture(autouse=True)
def f16_default():
    """These tests are about the launch mechanism, written against the exact "f16" design's kernargs (pointers only);
    "auto" would pick "tma" at block size 64, whose kernargs also carry the cache's tensor map (that path:
    tests/paged/test_paged_tma_host.py)."""
    from rawindexer.dispatch import paged_sm90

    with pytest.MonkeyPatch.context() as mp:  # its own: a test's monkeypatch.undo() leaves it in place
        mp.setattr(paged_sm90, "AUTO_ORDER", ("f16",))
        yield

NAMES = ("q", "kv_cache", "weights", "context_lens", "block_table")


def _has_paged_sm90() -> bool:
    from rawindexer.kernel_files import KernelNotBuiltError, manifest_path

    try:
        manifest = json.loads(manifest_path().read_text())
    except KernelNotBuiltError:
        return False
    return "sm_90a" in manifest.get("ops", {}).get("fp8_paged_mqa_logits", {})


needs_sm90 = pytest.mark.skipif(not _has_paged_sm90(), reason="the kernels have no sm_90a decode build (make "
                                                               "builds it where nvcc is)")


@pytest.fixture(params=["bindings", "ctypes", "shim", "ext"])
def cuda2(monkeypatch, request):
    """A fake two-GPU node behind the cuda backend, on each per-call route (cuda-bindings, plain ctypes, the C
    launcher); the 'framework's current stream' of each device and thread is stream_of(device, thread slot)."""
    drv = two_gpu_node(monkeypatch, request.param)
    paged.reset_caches()
    yield drv
    paged.reset_caches()


def gpu_arrays(case, device_id: int) -> dict:
    """The case's host arrays announced as CUDA memory of ``device_id`` (the fake driver never reads them)."""
    out = {}
    for name in NAMES:
        a = getattr(case, name)
        dt = "float8_e4m3fn" if name == "q" else a.dtype.name
        out[name] = dlpack.DLPackArray(a.ctypes.data, a.shape, dt, (dlpack.DL_CUDA, device_id), owner=a)
    return out


def gpu_out(case, device_id: int) -> dlpack.DLPackArray:
    base = case.out.base if case.out.base is not None else case.out
    return dlpack.DLPackArray(case.out.ctypes.data, case.out.shape, "float32", (dlpack.DL_CUDA, device_id),
                              strides=(case.out.strides[0] // 4, 1), owner=base)


def pointers_in(kernargs: bytes) -> tuple[int, ...]:
    """The six pointers the decode kernels take first (paged_kernels.KERNEL_ARGS)."""
    return tuple(int.from_bytes(kernargs[8 * i:8 * i + 8], "little") for i in range(6))


def small_case(rng):
    return make_case(rng, [130, 7, 64], next_n=2, heads=64, head_dim=128, block_size=64)


# ---------------------------------------------------------------------------------------------------
# per-device context and stream (fake driver)
# ---------------------------------------------------------------------------------------------------
@needs_sm90
def test_inputs_on_device_1_launch_in_its_context_on_its_stream(rng, cuda2):
    case = small_case(rng)
    decode = rawindexer.PagedIndexer(64, 128)
    for device_id in (1, 0, 1):
        args, out = gpu_arrays(case, device_id), gpu_out(case, device_id)
        n = len(cuda2.calls)
        assert decode(**args, max_context_len=case.max_context_len, out=out) is out
        launches = [c for c in cuda2.calls[n:] if c[0] == "cuLaunchKernel"]
        assert len(launches) == 1
        _, largs, ctx, _ = launches[0]
        assert ctx == CTX_BASE + device_id, "launched in the inputs' device's primary context"
        assert largs[4] == stream_of(device_id, 1), "on the caller's current stream of that device"
        assert largs[0][1] == ctx, "with the function loaded in that context"
        assert pointers_in(largs[7]) == tuple(a.ptr for a in args.values()) + (out.ptr,)
        assert cuda2.current == 0, "the caller's (NULL) context is restored"
    loads = [c for c in cuda2.calls if c[0] == "cuModuleLoadData"]
    assert sorted(c[2] for c in loads) == [CTX_BASE, CTX_BASE + 1], "one decode module per device, loaded once"


@needs_sm90
def test_the_callers_context_is_left_as_it_was(rng, cuda2):
    case = small_case(rng)
    cuda2.cuCtxSetCurrent(CTX_BASE)  # the caller works on device 0
    rawindexer.fp8_paged_mqa_logits(**gpu_arrays(case, 1), max_context_len=case.max_context_len,
                                    out=gpu_out(case, 1))
    assert cuda2.launches()[-1][2] == CTX_BASE + 1 and cuda2.current == CTX_BASE
    n = len(cuda2.calls)
    rawindexer.fp8_paged_mqa_logits(**gpu_arrays(case, 0), max_context_len=case.max_context_len,
                                    out=gpu_out(case, 0))
    assert "cuCtxSetCurrent" not in cuda2.names(n), "device 0 already current: no switch"


@needs_sm90
def test_mixed_devices_are_one_error_naming_the_arguments_and_nothing_launches(rng, cuda2):
    case = small_case(rng)
    args = gpu_arrays(case, 0)
    on_1 = gpu_arrays(case, 1)
    args["weights"], args["block_table"] = on_1["weights"], on_1["block_table"]
    with pytest.raises(ValidationError, match=r"^weights, block_table: expected every array on q's device \(2, 0\), "
                                              r"got weights on \(2, 1\), block_table on \(2, 1\) \(mixed devices\)"):
        rawindexer.PagedIndexer()(**args, max_context_len=case.max_context_len, out=gpu_out(case, 0))
    with pytest.raises(ValidationError, match=r"^out: expected every array on q's device \(2, 0\)"):
        rawindexer.PagedIndexer()(**gpu_arrays(case, 0), max_context_len=case.max_context_len, out=gpu_out(case, 1))
    assert not cuda2.launches()


@needs_sm90
def test_steady_state_call_is_three_driver_calls_and_no_planning(rng, cuda2, monkeypatch):
    case = small_case(rng)
    decode = rawindexer.PagedIndexer()
    args, out = gpu_arrays(case, 0), gpu_out(case, 0)
    decode(**args, max_context_len=case.max_context_len, out=out)
    family = paged._family("sm_90a")
    monkeypatch.setattr(family, "plan", lambda *a, **k: pytest.fail("re-planned"))
    monkeypatch.setattr(paged, "validate_paged", lambda *a: pytest.fail("re-validated"))
    n = len(cuda2.calls)
    for _ in range(4):
        decode(**args, max_context_len=case.max_context_len, out=out)
    assert cuda2.names(n) == ["cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel", "cuCtxSetCurrent"] * 4
    # a new max_context_len or clean_logits is a new description: validated and planned again
    monkeypatch.undo()
    decode(**args, max_context_len=case.max_context_len, out=out, clean_logits=True)
    assert len(decode._shapes) == 2


@needs_sm90
def test_threads_one_per_device_share_one_object(rng, cuda2):
    case = small_case(rng)
    decode = rawindexer.PagedIndexer(64, 128)
    errors = []

    def worker(device_id: int) -> None:
        try:
            cuda2.slots.n = 7 + device_id
            cuda2.cuCtxSetCurrent(CTX_BASE + (1 - device_id))  # each thread starts on the *other* device
            for _ in range(40):
                decode(**gpu_arrays(case, device_id), max_context_len=case.max_context_len, out=gpu_out(case, device_id))
                assert cuda2.current == CTX_BASE + (1 - device_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for _, largs, ctx, _ in cuda2.launches():
        device_id = ctx - CTX_BASE
        assert largs[4] == stream_of(device_id, 7 + device_id) and largs[0][1] == ctx
    assert len(cuda2.launches()) == 80


@needs_sm90
def test_bound_launch_and_raw_launch_take_the_same_path(rng, cuda2):
    case = small_case(rng)
    args, out = gpu_arrays(case, 1), gpu_out(case, 1)
    bound = rawindexer.prepare_paged_mqa_logits(**args, max_context_len=case.max_context_len, out=out)
    assert not cuda2.launches(), "binding launches nothing"
    assert bound() is out and bound(stream=stream_of(1, 9)) is out
    first, second = cuda2.launches()
    assert first[2] == second[2] == CTX_BASE + 1 and cuda2.current == 0
    assert first[1][4] == stream_of(1, 1) and second[1][4] == stream_of(1, 9)
    ptrs = tuple(a.ptr for a in args.values()) + (out.ptr,)
    assert first[1][7] == bound.template.plan(ptrs).kernargs
    cuda2.slots.n = 4  # the caller's current stream changed (e.g. inside a graph capture): followed
    bound()
    assert cuda2.launches()[-1][1][4] == stream_of(1, 4)
    fixed = rawindexer.prepare_paged_mqa_logits(**args, max_context_len=case.max_context_len, out=out,
                                                stream=stream_of(1, 5))
    fixed()
    assert cuda2.launches()[-1][1][4] == stream_of(1, 5), "a stream= given when binding stands"
    # the same launch through raw pointers: identical kernargs, geometry, context and stream
    B, next_n, H, D = case.q.shape
    template = rawindexer.launch_paged(
        *ptrs, batch=B, next_n=next_n, num_heads=H, head_dim=D, block_size=64, num_blocks=case.kv_cache.shape[0],
        max_blocks=case.block_table.shape[1], max_context_len=case.max_context_len,
        out_row_stride=case.out.strides[0] // 4, stream=stream_of(1, 9), device="cuda", device_id=1)
    raw = cuda2.launches()[-1]
    assert raw[1][4] == stream_of(1, 9) and raw[1][7] == second[1][7] and raw[1][1:4] == second[1][1:4] and raw[2] == CTX_BASE + 1
    # the default design's kernel for this next_n (one per next_n in the cubin)
    assert template.symbol == bound.template.symbol == f"fp8_paged_mqa_logits_sm90_h64_d128_bs64_f16_n{next_n}"
    with pytest.raises(TypeError, match="^weights: expected an int device address, got float"):
        rawindexer.launch_paged(ptrs[0], ptrs[1], 1.5, *ptrs[3:], batch=B, next_n=next_n, num_heads=H, head_dim=D,
                                block_size=64, num_blocks=4, max_blocks=case.block_table.shape[1],
                                max_context_len=case.max_context_len, device="cuda")


@needs_sm90
def test_misaligned_q_or_cache_is_refused_before_launch(rng, cuda2):
    case = small_case(rng)
    args = gpu_arrays(case, 0)
    kv = case.kv_cache
    args["kv_cache"] = dlpack.DLPackArray(kv.ctypes.data + 4, kv.shape, "uint8", (dlpack.DL_CUDA, 0), owner=kv)
    with pytest.raises(ValidationError, match=r"^kv_cache: expected a 16-byte aligned address, got data address 0x"):
        rawindexer.fp8_paged_mqa_logits(**args, max_context_len=case.max_context_len, out=gpu_out(case, 0))
    assert not cuda2.launches()


# ---------------------------------------------------------------------------------------------------
# torch tensors (attribute route) on the emulator
# ---------------------------------------------------------------------------------------------------
def test_torch_tensors_take_the_attribute_route_and_get_torch_outputs(rng, monkeypatch):
    torch = pytest.importorskip("torch")
    case = make_case(rng, [70, 0, 17], next_n=2, heads=32, head_dim=64, block_size=16, two_d=True)
    t = {name: torch.from_numpy(np.ascontiguousarray(getattr(case, name))) for name in NAMES}
    decode = rawindexer.PagedIndexer(32, 64)
    got = decode(*t.values(), case.max_context_len, clean_logits=True)  # first call: classifies torch
    monkeypatch.setattr(dlpack, "from_dlpack", lambda *a, **k: pytest.fail("DLPack route taken"))
    got = decode(*t.values(), case.max_context_len, clean_logits=True)
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == case.out.shape
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, True, with_bound=True)
    grade = grade_paged(got.numpy(), ref, bound, case.lengths(), True)
    assert grade.ok, grade.message
    padded = torch.full((case.out.shape[0], case.max_context_len + 5), float("nan"))
    out = padded[:, :case.max_context_len]
    assert decode(*t.values(), case.max_context_len, clean_logits=True, out=out) is out
    assert torch.equal(out, got) and bool(torch.isnan(padded[:, case.max_context_len:]).all())
    with pytest.raises(ValidationError, match="^out: expected a tensor that does not require grad"):
        decode(*t.values(), case.max_context_len, out=torch.zeros(case.out.shape, requires_grad=True))
    with pytest.raises(ValidationError, match="^q: expected num_heads=64"):
        rawindexer.PagedIndexer(64)(*t.values(), case.max_context_len)


def test_scalars_are_checked(rng):
    case = make_case(rng, [20], next_n=1, heads=32, head_dim=64, block_size=16)
    args = [getattr(case, n) for n in NAMES]
    with pytest.raises(ValidationError, match="^max_context_len: expected a host int, got float"):
        rawindexer.fp8_paged_mqa_logits(*args, float(case.max_context_len))
    with pytest.raises(TypeError, match="^clean_logits: expected a bool or an int"):
        rawindexer.fp8_paged_mqa_logits(*args, case.max_context_len, clean_logits="yes")
    with pytest.raises(ValueError, match="^variant:"):
        rawindexer.fp8_paged_mqa_logits(*args, case.max_context_len, variant="f16")  # gfx950 builds one design


# ---------------------------------------------------------------------------------------------------
# the generic torch hot path (torch CPU tensors sent down the CUDA route of the fake driver)
# ---------------------------------------------------------------------------------------------------
@needs_sm90
def test_torch_hot_path_hits_without_validation_and_follows_the_stream(rng, cuda2, monkeypatch):
    torch = pytest.importorskip("torch")
    from rawindexer import backends, launch_path

    monkeypatch.setitem(backends.BACKEND_FOR_DEVICE_TYPE, 1, "cuda")  # CPU tensors take the CUDA route
    streams = {"now": stream_of(0, 1)}
    monkeypatch.setattr(launch_path, "_torch_raw_stream", lambda device_id: streams["now"])
    case = small_case(rng)
    t = [torch.from_numpy(np.ascontiguousarray(getattr(case, n))) for n in NAMES]
    out = torch.full((case.out.shape[0], case.max_context_len), float("nan"))
    decode = rawindexer.PagedIndexer(64, 128)
    for _ in range(2):  # first sight of torch classifies it; then the torch key is cached
        assert decode(*t, case.max_context_len, out=out) is out
    key = launch_path.torch_key(tuple(t), (case.max_context_len, False), out)
    assert key in decode._shapes
    monkeypatch.setattr(paged, "validate_paged", lambda *a: pytest.fail("re-validated"))
    family = paged._family("sm_90a")
    monkeypatch.setattr(family, "plan", lambda *a, **k: pytest.fail("re-planned"))
    n = len(cuda2.launches())
    decode(*t, case.max_context_len, out=out)
    streams["now"] = stream_of(0, 9)  # the caller switched streams: followed, no new plan
    decode(*t, case.max_context_len, out=out)
    decode(*t, case.max_context_len, out=out, stream=stream_of(0, 44))
    launches = cuda2.launches()[n:]
    assert [c[1][4] for c in launches] == [stream_of(0, 1), stream_of(0, 9), stream_of(0, 44)]
    want = tuple(a.data_ptr() for a in t) + (out.data_ptr(),)
    assert all(pointers_in(c[1][7]) == want for c in launches) and cuda2.current == 0
    monkeypatch.undo()  # a new description (no out=): validated once, then an output per call from torch
    monkeypatch.setitem(backends.BACKEND_FOR_DEVICE_TYPE, 1, "cuda")
    monkeypatch.setattr(launch_path, "_torch_raw_stream", lambda device_id: streams["now"])
    first, second = decode(*t, case.max_context_len), decode(*t, case.max_context_len)
    assert isinstance(second, torch.Tensor) and tuple(second.shape) == case.out.shape
    assert second.data_ptr() != first.data_ptr() and second.stride() == (case.max_context_len, 1)
    assert pointers_in(cuda2.launches()[-1][1][7])[5] == second.data_ptr()
    with pytest.raises(ValidationError, match="^out: expected a tensor that does not require grad"):
        decode(*t, case.max_context_len, out=torch.zeros(out.shape, requires_grad=True))
    bound = decode.bind(*t, case.max_context_len, out=out)
    streams["now"] = stream_of(0, 12)
    assert bound() is out and cuda2.launches()[-1][1][4] == stream_of(0, 12), "bound: the current stream"
