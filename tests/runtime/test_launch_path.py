"""The prepared launch (rawindexer.Indexer) on the CPU: what is cached and when the cache is bypassed, the errors,
the per-device context and stream selection against a fake CUDA driver (several devices, several threads),
the torch attribute route against the DLPack route, and the "also found" fixes of the launch-path issue."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import rawindexer
from rawindexer import api, dlpack
from rawindexer.testing.inputs import check_logits as check
from rawindexer.testing.inputs import random_inputs
from rawindexer.validation import ValidationError

from fake_cuda import CTX_BASE, stream_of, two_gpu_node

ROOT = Path(__file__).resolve().parents[2]


def _has_sm90() -> bool:
    from rawindexer.kernel_files import kernel_dir

    manifest = kernel_dir() / "manifest.json"
    return manifest.exists() and "sm_90a" in json.loads(manifest.read_text()).get("targets", {})


# `make` builds the sm_90a target on every machine (PyPI nvcc where none is installed), so this skips only
# for a kernel directory that was built without it.
needs_sm90 = pytest.mark.skipif(not _has_sm90(), reason="the kernel directory has no sm_90a target (run make)")


def host_inputs(rng, M=6, N=70, H=32, D=128):
    return random_inputs(rng, M, N, H, D, np.zeros(M, np.int32), (np.arange(M) + N - M + 1).astype(np.int32))


# ---------------------------------------------------------------------------------------------------
# fake "GPU arrays": host memory announced as CUDA device memory through DLPack (the fake driver never reads it)
# ---------------------------------------------------------------------------------------------------
def aligned_copy(a: np.ndarray, pad_cols: int = 0, fill: float | None = None) -> np.ndarray:
    """``a`` (or a ``fill``-ed array of its shape, rows widened by pad_cols) at a 256-byte aligned address, as
    device allocators hand out: plans are cached per pointer alignment, so tests that count plans must not see the
    allocator's varying low address bits."""
    shape = a.shape[:-1] + (a.shape[-1] + pad_cols,) if pad_cols else a.shape
    raw = np.empty(a.dtype.itemsize * int(np.prod(shape)) + 256, np.uint8)
    skip = -raw.ctypes.data % 256
    out = raw[skip:skip + a.dtype.itemsize * int(np.prod(shape))].view(a.dtype).reshape(shape)
    if fill is None:
        out[...] = a
    else:
        out.fill(fill)
    return out


def gpu_arrays(host: dict, device_id: int) -> dict:
    out = {}
    for name, a in host.items():
        dt = "float8_e4m3fn" if a.dtype == np.uint8 else a.dtype.name
        a = aligned_copy(a)
        out[name] = dlpack.DLPackArray(a.ctypes.data, a.shape, dt, (dlpack.DL_CUDA, device_id), owner=a)
    return out


def gpu_out(M, N, device_id, pad=0):
    buf = aligned_copy(np.empty((M, N), np.float32), pad_cols=pad, fill=np.nan)
    return dlpack.DLPackArray(buf.ctypes.data, (M, N), "float32", (dlpack.DL_CUDA, device_id),
                              strides=(N + pad, 1), owner=buf)


@pytest.fixture(params=["bindings", "ctypes", "shim", "ext"])
def cuda2(monkeypatch, request):
    """A fake two-GPU node behind the cuda backend, on each per-call route (cuda-bindings, plain ctypes, the C
    launcher through ctypes, its extension); the 'framework's current stream' of each device and thread is stream_of(device, thread slot)."""
    drv = two_gpu_node(monkeypatch, request.param)
    return drv


def launched_kernargs(call) -> bytes:
    return call[1][7]


def pointers_in(kernargs: bytes) -> tuple[int, ...]:
    return tuple(int.from_bytes(kernargs[8 * i:8 * i + 8], "little") for i in range(7))


# ---------------------------------------------------------------------------------------------------
# per-device context and stream selection (fake driver)
# ---------------------------------------------------------------------------------------------------
@needs_sm90
def test_inputs_on_device_1_launch_in_device_1_context_on_its_stream(rng, cuda2):
    host = host_inputs(rng)
    ind = rawindexer.Indexer(32, 128)
    for device_id in (1, 0, 1):
        args = gpu_arrays(host, device_id)
        out = gpu_out(6, 70, device_id, pad=2)
        n = len(cuda2.calls)
        assert ind(**args, out=out) is out
        launches = [c for c in cuda2.calls[n:] if c[0] == "cuLaunchKernel"]
        assert len(launches) == 1
        name, largs, ctx, _ = launches[0]
        assert ctx == CTX_BASE + device_id, "launched in the inputs' device's primary context"
        assert largs[4] == stream_of(device_id, 1), "on the caller's current stream of that device"
        assert largs[0][1] == ctx, "with the function loaded in that context"
        ptrs = pointers_in(launched_kernargs(launches[0]))
        assert ptrs == tuple(a.ptr for a in args.values()) + (out.ptr,)
        assert cuda2.current == 0, "the caller's (NULL) context is restored"
    loads = [c for c in cuda2.calls if c[0] == "cuModuleLoadData"]
    assert sorted(c[2] for c in loads) == [CTX_BASE, CTX_BASE + 1], "one module per device, loaded once"


@needs_sm90
def test_the_callers_context_is_left_as_it_was(rng, cuda2):
    host = host_inputs(rng)
    ind = rawindexer.Indexer()
    cuda2.cuCtxSetCurrent(CTX_BASE + 0)  # the caller works on device 0
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1))
    assert cuda2.current == CTX_BASE
    n = len(cuda2.calls)
    ind(**gpu_arrays(host, 0), out=gpu_out(6, 70, 0))  # already current: no switch at all
    assert "cuCtxSetCurrent" not in cuda2.names(n)
    assert cuda2.launches()[-1][2] == CTX_BASE


@needs_sm90
def test_mixed_devices_are_one_error_naming_the_arguments_and_nothing_launches(rng, cuda2):
    host = host_inputs(rng)
    args = gpu_arrays(host, 0)
    args["weights"] = gpu_arrays(host, 1)["weights"]
    args["cu_seqlen_ke"] = gpu_arrays(host, 1)["cu_seqlen_ke"]
    with pytest.raises(ValidationError, match=r"weights, cu_seqlen_ke: expected every array on q_fp8's device "
                                              r"\(2, 0\), got weights on \(2, 1\), cu_seqlen_ke on \(2, 1\)"):
        rawindexer.Indexer()(**args, out=gpu_out(6, 70, 0))
    with pytest.raises(ValidationError, match=r"out: expected every array on q_fp8's device \(2, 0\)"):
        rawindexer.Indexer()(**gpu_arrays(host, 0), out=gpu_out(6, 70, 1))
    assert not cuda2.launches()


@needs_sm90
def test_threads_one_per_device_each_in_its_context_and_stream(rng, cuda2):
    host = host_inputs(rng)
    ind = rawindexer.Indexer(32, 128)  # one object shared by both threads
    errors = []
    per_thread: dict[int, int] = {}

    def worker(device_id: int) -> None:
        try:
            cuda2.slots.n = 7 + device_id
            cuda2.cuCtxSetCurrent(CTX_BASE + (1 - device_id))  # each thread starts on the *other* device
            per_thread[threading.get_ident()] = device_id
            for i in range(60):
                M = 4 + (i % 3)  # a few shapes, so the plan cache is exercised under threads
                h = {k: (v[:M] if k not in ("k_fp8", "kv_scale") else v) for k, v in host.items()}
                h = {k: np.ascontiguousarray(v) for k, v in h.items()}
                ind(**gpu_arrays(h, device_id), out=gpu_out(M, 70, device_id))
                assert cuda2.current == CTX_BASE + (1 - device_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    launches = cuda2.launches()
    assert len(launches) == 120
    for name, largs, ctx, tid in launches:
        device_id = per_thread[tid]
        assert ctx == CTX_BASE + device_id
        assert largs[4] == stream_of(device_id, 7 + device_id)


@needs_sm90
def test_a_launch_error_still_restores_the_callers_context(rng, cuda2):
    from rawindexer.backends.cuda import CudaError

    host = host_inputs(rng)
    ind = rawindexer.Indexer()
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1))
    cuda2.fail = "cuLaunchKernel"
    with pytest.raises(CudaError, match="cuLaunchKernel failed"):
        ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1))
    assert cuda2.current == 0


# ---------------------------------------------------------------------------------------------------
# caching: what is resolved once, what a call still does, what invalidates
# ---------------------------------------------------------------------------------------------------
@needs_sm90
def test_steady_state_call_is_three_driver_calls_and_no_planning(rng, cuda2, monkeypatch):
    host = host_inputs(rng)
    ind = rawindexer.Indexer(32, 128)
    args, out = gpu_arrays(host, 0), gpu_out(6, 70, 0)
    ind(**args, out=out)
    plans = []
    family = api.family_for("sm_90a")
    monkeypatch.setattr(family, "plan", lambda *a, **k: plans.append(a) or pytest.fail("re-planned"))
    monkeypatch.setattr(api, "validate", lambda *a: pytest.fail("re-validated"))
    n = len(cuda2.calls)
    for _ in range(5):
        ind(**args, out=out)
    # per call: is device 0 current? make it so; launch; restore the caller's (NULL) context
    assert cuda2.names(n) == ["cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel", "cuCtxSetCurrent"] * 5
    assert [c[1][4] for c in cuda2.launches()[-5:]] == [stream_of(0, 1)] * 5


@needs_sm90
def test_new_shape_new_device_new_stream_new_alignment(rng, cuda2, monkeypatch):
    ind = rawindexer.Indexer(32, 128)
    family = api.family_for("sm_90a")
    real_prepare = family.prepare
    prepared = []
    monkeypatch.setattr(family, "prepare", lambda p, *a: prepared.append(p) or real_prepare(p, *a))
    host = host_inputs(rng)
    ind(**gpu_arrays(host, 0), out=gpu_out(6, 70, 0))
    ind(**gpu_arrays(host, 0), out=gpu_out(6, 70, 0))
    assert len(prepared) == 1
    # a new shape: planned again, with its own M, N in the kernargs
    small = host_inputs(rng, M=3, N=40)
    ind(**gpu_arrays(small, 0), out=gpu_out(3, 40, 0))
    assert len(prepared) == 2 and (prepared[-1].M, prepared[-1].N) == (3, 40)
    kernargs = launched_kernargs(cuda2.launches()[-1])
    assert int.from_bytes(kernargs[64:68], "little") == 3 and int.from_bytes(kernargs[68:72], "little") == 40
    # a new row stride of out: a new plan with that stride
    ind(**gpu_arrays(host, 0), out=gpu_out(6, 70, 0, pad=9))
    assert prepared[-1].out_row_stride == 79
    # a new device: its own context, module and plan
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1))
    assert cuda2.launches()[-1][2] == CTX_BASE + 1 and len(prepared) == 4
    # a new stream: no new plan, the launch goes to the new stream
    cuda2.slots.n = 3
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1))
    assert len(prepared) == 4 and cuda2.launches()[-1][1][4] == stream_of(1, 3)
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1), stream=stream_of(1, 44))
    assert cuda2.launches()[-1][1][4] == stream_of(1, 44)
    # a pointer of another alignment: planned again (the plan may depend on it: the float4 -inf fill)
    buf = np.full(6 * 70 + 1, np.nan, np.float32)
    odd = dlpack.DLPackArray(buf.ctypes.data + 4, (6, 70), "float32", (dlpack.DL_CUDA, 1), owner=buf)
    ind(**gpu_arrays(host, 1), out=odd)
    assert len(prepared) == 5
    flags = int.from_bytes(launched_kernargs(cuda2.launches()[-1])[80:84], "little")
    assert not flags & 4, "an out pointer that is not 16-byte aligned must not take the float4 fill"
    # clean_logits is part of the description
    ind(**gpu_arrays(host, 1), out=gpu_out(6, 70, 1), clean_logits=False)
    assert len(prepared) == 6 and not prepared[-1].clean_logits


@needs_sm90
def test_raw_launch_uses_the_same_path(cuda2):
    api._RAW.clear()
    t = rawindexer.launch(*[0x100000 * (i + 1) for i in range(7)], M=64, N=1000, num_heads=64,
                          head_dim=128, stream=stream_of(1, 5), device="cuda", device_id=1)
    call = cuda2.launches()[-1]
    assert call[2] == CTX_BASE + 1 and call[1][4] == stream_of(1, 5)
    assert launched_kernargs(call) == t.plan(tuple(0x100000 * (i + 1) for i in range(7))).kernargs
    with pytest.raises(TypeError, match="weights: expected an int device address, got float"):
        rawindexer.launch(1 << 20, 1 << 20, 1 << 20, 1.5, 1 << 20, 1 << 20, 1 << 20, M=64, N=1000, num_heads=64,
                          head_dim=128, device="cuda")
    with pytest.raises(ValueError, match="out: expected a device address"):
        rawindexer.launch(*[1 << 20] * 6, -16, M=64, N=1000, num_heads=64, head_dim=128, device="cuda")
    assert rawindexer.launch(*[1 << 20] * 7, M=0, N=1000, num_heads=64, head_dim=128, device="cuda") is None
    api._RAW.clear()


@needs_sm90
def test_the_route_under_test_is_the_one_taken(cuda2, request):
    from rawindexer import backends

    api._RAW.clear()
    rawindexer.launch(*[0x100000 * (i + 1) for i in range(7)], M=64, N=1000, num_heads=64, head_dim=128,
                      stream=stream_of(0, 5), device="cuda")
    raw = backends.get_backend("cuda")._raw
    route = request.node.callspec.params["cuda2"]
    assert (raw is None) == (route == "bindings")
    assert (raw is not None and raw.shim is not None) == (route == "shim")
    assert (raw is not None and raw.extension is not None) == (route == "ext")
    assert cuda2.launches()[-1][1][4] == stream_of(0, 5)
    api._RAW.clear()


@needs_sm90
def test_raw_launch_hot_path_still_names_bad_arguments(cuda2, request):
    api._RAW.clear()
    good = [0x100000 * (i + 1) for i in range(7)]
    kw = dict(M=64, N=1000, num_heads=64, head_dim=128, device="cuda", device_id=1)
    for _ in range(2):  # the second call takes the hot path
        t = rawindexer.launch(*good, stream=stream_of(1, 5), **kw)
    n = len(cuda2.launches())
    with pytest.raises(TypeError, match="weights: expected an int device address, got float"):
        rawindexer.launch(*good[:3], 1.5, *good[4:], stream=stream_of(1, 5), **kw)
    with pytest.raises(ValueError, match=r"out: expected a device address in \[0, 2\*\*64\)"):
        rawindexer.launch(*good[:6], -256, stream=stream_of(1, 5), **kw)
    if request.node.callspec.params["cuda2"] != "bindings":  # (through cuda-bindings the driver judges streams)
        with pytest.raises(TypeError, match="stream: expected an int stream handle"):
            rawindexer.launch(*good, stream=-1, **kw)
        with pytest.raises(TypeError, match="stream: expected an int stream handle"):
            rawindexer.launch(*good, stream="s", **kw)
    assert len(cuda2.launches()) == n, "nothing launched on a bad argument"
    odd = good[:6] + [good[6] + 4]  # another alignment: its own plan, the exact pointers
    t_odd = rawindexer.launch(*odd, stream=stream_of(1, 5), **kw)
    assert launched_kernargs(cuda2.launches()[-1]) == t_odd.plan(tuple(odd)).kernargs
    as_numpy = [np.uint64(p) for p in good]
    assert rawindexer.launch(*as_numpy, stream=np.int64(stream_of(1, 5)), **kw).symbol == t.symbol
    assert pointers_in(launched_kernargs(cuda2.launches()[-1])) == tuple(good)
    api._RAW.clear()


@needs_sm90
def test_raw_launch_hot_entries_are_per_shape_and_dropped_with_their_indexers(cuda2):
    """launch()'s one-lookup hot path: a repeated (configuration, shape) launches the same prepared launch, another
    shape or stride is its own entry, and reset_caches (which drops launch()'s Indexers) drops every hot entry."""
    api._RAW.clear()
    good = [0x100000 * (i + 1) for i in range(7)]
    kw = dict(num_heads=64, head_dim=128, device="cuda", device_id=1, stream=stream_of(1, 5))
    first = [rawindexer.launch(*good, M=64, N=1000, **kw) for _ in range(3)]
    assert first[0] is first[1] is first[2] and len(api._RAW.hot) == 1
    other = rawindexer.launch(*good, M=64, N=2000, out_row_stride=2048, **kw)
    assert other is not first[0] and len(api._RAW.hot) == 2
    n = len(cuda2.launches())
    assert rawindexer.launch(*good, M=64, N=2000, out_row_stride=2048, **kw) is other
    assert launched_kernargs(cuda2.launches()[-1]) == other.plan(tuple(good)).kernargs and len(cuda2.launches()) == n + 1
    api.reset_caches("cuda")
    assert not api._RAW.hot and not api._RAW
    for n in range(api.MAX_CACHED_SHAPES + 2):  # ever new shapes: the hot cache starts over, as the Indexer's does
        rawindexer.launch(*good, M=64, N=1000 + n, **kw)
        assert 1 <= len(api._RAW.hot) <= api.MAX_CACHED_SHAPES
    api._RAW.clear()
    again = rawindexer.launch(*good, M=64, N=1000, **kw)
    assert again is not first[0] and launched_kernargs(cuda2.launches()[-1]) == again.plan(tuple(good)).kernargs
    api._RAW.clear()


@needs_sm90
def test_launch_pointers_hot_path_launches_and_still_names_bad_arguments(cuda2, request):
    ind = rawindexer.Indexer(64, 128, device="cuda")
    good = tuple(0x100000 * (i + 1) for i in range(7))
    templates = [ind.launch_pointers(good, 64, 1000, stream=stream_of(1, s), device_id=1) for s in (5, 6)]
    assert templates[0] is templates[1], "the second call is the prepared launch of the first"
    first, second = cuda2.launches()[-2:]
    assert first[2] == second[2] == CTX_BASE + 1 and (first[1][4], second[1][4]) == (stream_of(1, 5), stream_of(1, 6))
    assert launched_kernargs(second) == templates[0].plan(good).kernargs
    n = len(cuda2.launches())
    with pytest.raises(ValueError, match="pointers: expected 7 device addresses, got 6"):
        ind.launch_pointers(good[:6], 64, 1000, stream=stream_of(1, 5), device_id=1)
    with pytest.raises(TypeError, match="kv_scale: expected an int device address, got float"):
        ind.launch_pointers((*good[:2], 2.5, *good[3:]), 64, 1000, stream=stream_of(1, 5), device_id=1)
    if request.node.callspec.params["cuda2"] != "bindings":  # (through cuda-bindings the driver judges streams)
        with pytest.raises(TypeError, match="stream: expected an int stream handle"):
            ind.launch_pointers(good, 64, 1000, stream=None, device_id=1)
    assert len(cuda2.launches()) == n, "nothing launched on a bad argument"
    odd = (*good[:6], good[6] + 4)  # another alignment: its own plan, the exact pointers
    t_odd = ind.launch_pointers(odd, 64, 1000, stream=stream_of(1, 5), device_id=1)
    assert launched_kernargs(cuda2.launches()[-1]) == t_odd.plan(odd).kernargs


@needs_sm90
def test_indexer_bind_launches_its_buffers_on_the_current_stream(rng, cuda2):
    host = host_inputs(rng)
    args, out = gpu_arrays(host, 1), gpu_out(6, 70, 1, pad=2)
    bound = rawindexer.Indexer(32, 128).bind(**args, out=out)
    assert not cuda2.launches(), "binding launches nothing"
    assert bound() is out and bound() is out and bound(stream=stream_of(1, 9)) is out
    launches = cuda2.launches()
    assert [c[2] for c in launches] == [CTX_BASE + 1] * 3 and cuda2.current == 0
    assert [c[1][4] for c in launches] == [stream_of(1, 1), stream_of(1, 1), stream_of(1, 9)]
    ptrs = tuple(a.ptr for a in args.values()) + (out.ptr,)
    assert all(launched_kernargs(c) == bound.template.plan(ptrs).kernargs for c in launches)
    cuda2.slots.n = 4  # the caller's current stream changed (e.g. inside a graph capture): followed
    bound()
    assert cuda2.launches()[-1][1][4] == stream_of(1, 4)
    fixed = rawindexer.Indexer(32, 128).bind(**args, out=out, stream=stream_of(1, 5))
    fixed()
    fixed()
    assert [c[1][4] for c in cuda2.launches()[-2:]] == [stream_of(1, 5)] * 2, "a stream= given when binding stands"


def test_indexer_bind_on_the_emulator_reads_the_buffers_contents_at_each_call(rng):
    host = host_inputs(rng)
    out = np.full((6, 70), np.nan, np.float32)
    bound = rawindexer.Indexer(32, 128).bind(**host, out=out)
    assert np.isnan(out).all(), "binding launches nothing"
    assert bound() is out
    check(host, out)
    fresh = host_inputs(rng)
    for name in ("q_fp8", "k_fp8", "kv_scale", "weights"):  # new contents, same buffers
        host[name][...] = fresh[name]
    out.fill(np.nan)
    bound()
    check(host, out)
    made = rawindexer.Indexer(32, 128).bind(**host)  # no out=: allocated once, at binding
    assert made() is made()
    check(host, made())


# ---------------------------------------------------------------------------------------------------
# the torch hot path (torch CPU tensors sent down the CUDA route of the fake driver: what a CUDA tensor would do)
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def torch_on_cuda2(cuda2, monkeypatch):
    torch = pytest.importorskip("torch")
    from rawindexer import backends

    monkeypatch.setitem(backends.BACKEND_FOR_DEVICE_TYPE, 1, "cuda")  # CPU tensors take the CUDA route
    streams = {"now": stream_of(0, 1)}
    from rawindexer import launch_path

    monkeypatch.setattr(launch_path, "_torch_raw_stream", lambda device_id: streams["now"])
    return torch, streams


def torch_args(torch, host: dict) -> list:
    return [torch.from_numpy(aligned_copy(a)).view(torch.float8_e4m3fn) if a.dtype == np.uint8
            else torch.from_numpy(aligned_copy(a)) for a in host.values()]


def torch_out(torch, M, N, pad=0):
    buf = torch.from_numpy(aligned_copy(np.empty((M, N), np.float32), pad_cols=pad, fill=np.nan))
    return buf[:, :N]


@needs_sm90
def test_torch_hot_path_hits_without_validation_and_launches_the_right_pointers(rng, cuda2, torch_on_cuda2,
                                                                                 monkeypatch, request):
    torch, streams = torch_on_cuda2
    ind = rawindexer.Indexer(32, 128)
    args, out = torch_args(torch, host_inputs(rng)), torch_out(torch, 6, 70)
    assert ind(*args, out=out) is out  # first sight of torch: the DLPack route; second: the torch key
    assert ind(*args, out=out) is out
    ind(*args)  # and once without out= (a description of its own)
    assert api._torch_key(tuple(args), True, out) in ind._shapes, "the inline key and _torch_key agree"
    monkeypatch.setattr(api, "validate", lambda *a: pytest.fail("re-validated"))
    family = api.family_for("sm_90a")
    real_prepare, plans = family.prepare, []
    monkeypatch.setattr(family, "prepare", lambda *a: plans.append(a) or real_prepare(*a))
    n = len(cuda2.launches())
    assert ind(*args, out=out) is out
    streams["now"] = stream_of(0, 9)  # the caller switched streams: the next call follows it, no new plan
    assert ind(*args, out=out) is out
    assert ind(*args, out=out, stream=stream_of(0, 44)) is out
    assert not plans
    new = ind(*args)  # (torch's CPU allocator aligns to 64 bytes only: this may plan for a new alignment)
    assert new.shape == (6, 70) and new.dtype == torch.float32 and new.stride() == (70, 1)
    assert not new.requires_grad and new.device == args[0].device
    launches = cuda2.launches()[n:]
    assert [c[1][4] for c in launches] == [stream_of(0, 1), stream_of(0, 9), stream_of(0, 44), stream_of(0, 9)]
    want = tuple(a.data_ptr() for a in args)
    assert [pointers_in(launched_kernargs(c)) for c in launches] == [want + (out.data_ptr(),)] * 3 + [
        want + (new.data_ptr(),)]
    assert all(c[2] == CTX_BASE for c in launches) and cuda2.current == 0
    if request.node.callspec.params["cuda2"] != "bindings":  # (through cuda-bindings the driver judges streams)
        with pytest.raises(TypeError, match="stream: expected an int stream handle"):
            ind(*args, out=out, stream="s")


@needs_sm90
def test_torch_hot_path_never_reuses_a_description_it_did_not_validate(rng, cuda2, torch_on_cuda2):
    torch, _ = torch_on_cuda2
    ind = rawindexer.Indexer(32, 128)
    host = host_inputs(rng)
    args, out = torch_args(torch, host), torch_out(torch, 6, 70)
    for _ in range(2):
        ind(*args, out=out)
    q, k, kv, w, ks, ke = args
    wide_k = torch.from_numpy(aligned_copy(np.zeros((70, 256), np.uint8))).view(torch.float8_e4m3fn)[:, :128]
    with pytest.raises(ValidationError, match=r"k_fp8: expected a contiguous row-major array, got strides \(256, 1\)"):
        ind(q, wide_k, kv, w, ks, ke, out=out)  # same shape and dtype, other strides
    with pytest.raises(ValidationError, match="kv_scale: expected float32, got dtype float64"):
        ind(q, k, kv.double(), w, ks, ke, out=out)
    with pytest.raises(ValidationError, match=r"weights: expected shape \(6, 32\)"):
        ind(q, k, kv, torch.zeros((6, 33)), ks, ke, out=out)
    with pytest.raises(ValidationError, match="out: expected a tensor that does not require grad"):
        ind(*args, out=torch.zeros((6, 70), requires_grad=True))
    with pytest.raises(ValidationError, match=r"out: expected shape \(6, 70\), got shape \(6, 71\)"):
        ind(*args, out=torch_out(torch, 6, 71))
    with pytest.raises(TypeError, match="clean_logits: expected a bool or an int"):
        ind(*args, out=out, clean_logits="no")
    # a padded out: a new plan with its row stride; clean_logits=0 is False's plan
    ind(*args, out=torch_out(torch, 6, 70, pad=6))
    assert int.from_bytes(launched_kernargs(cuda2.launches()[-1])[56:64], "little") == 76
    ind(*args, out=out, clean_logits=0)
    assert ind._shapes.get(api._torch_key(tuple(args), False, out)) is not None


# ---------------------------------------------------------------------------------------------------
# errors of the prepared object
# ---------------------------------------------------------------------------------------------------
def test_indexer_errors_name_argument_value_and_expectation(rng):
    with pytest.raises(ValueError, match=r"\(num_heads, head_dim\): expected a shape with a built gfx950 kernel.*"
                                         r"got \(48, 128\)"):
        rawindexer.Indexer(48, 128, device="emulator")
    with pytest.raises(TypeError, match="num_heads: expected an int, got str '32'"):
        rawindexer.Indexer("32", 128)
    host = host_inputs(rng)
    with pytest.raises(ValidationError, match=r"q_fp8: expected num_heads=64 \(this Indexer's\), got shape "
                                              r"\(6, 32, 128\)"):
        rawindexer.Indexer(64, 128)(**host)
    ind = rawindexer.Indexer(32, 128)
    ind._backend = type("B", (), {"name": "cuda", "dlpack_device_type": 2})()  # as if made with device="cuda"
    with pytest.raises(ValueError, match=r"arrays: expected arrays on a cuda device .* got arrays on DLPack device "
                                         r"\(1, 0\)"):
        ind(**host)


# ---------------------------------------------------------------------------------------------------
# the torch route reads what DLPack would export
# ---------------------------------------------------------------------------------------------------
def test_torch_attribute_route_matches_the_dlpack_route():
    torch = pytest.importorskip("torch")
    base = torch.zeros((5, 7, 9), dtype=torch.float32)
    cases = [base, base[1:, ::2], base.transpose(0, 2), base[:, 3], torch.zeros(0, 4), torch.zeros(()),
             torch.zeros((4, 8), dtype=torch.uint8), torch.zeros((4, 8), dtype=torch.uint8).view(torch.float8_e4m3fn),
             torch.zeros(6, dtype=torch.int32)[1:], torch.zeros((3, 1, 4)).expand(3, 5, 4),
             torch.zeros(12).as_strided((3, 1, 4), (4, 99, 1)), torch.zeros(16).as_strided((3, 1, 4), (5, 4, 1)),
             torch.zeros((2, 0, 3)).transpose(0, 2), torch.zeros((4, 1))]
    for t in cases:
        # the torch hot path keys inputs by is_contiguous(): it must say what validation's is_compact says
        assert t.is_contiguous() == dlpack.is_compact(tuple(t.shape), t.stride()), (t.shape, t.stride())
        fast = api._read_torch(t, "t", None)
        view = dlpack.from_dlpack(t, name="t")
        assert fast[0] == view.ptr, t.shape
        shape, strides, dtype, device = fast[1]
        assert tuple(shape) == view.shape and dtype == view.dtype.name and device == view.device
        if t.numel():
            assert tuple(strides) == view.strides, (t.shape, t.stride())
        view.release()


# ---------------------------------------------------------------------------------------------------
# the emulator through the prepared object, and the "also found" list
# ---------------------------------------------------------------------------------------------------
def test_indexer_on_the_emulator_and_its_cache(rng):
    host = host_inputs(rng)
    ind = rawindexer.Indexer(32, 128)
    check(host, ind(**host))
    out = np.full((6, 75), np.nan, np.float32)[:, :70]
    assert ind(**host, out=out, clean_logits=0) is out
    check(host, out, clean=False)
    assert len(ind._shapes) == 2
    host["kv_scale"][3] = -1.0  # host memory: the emulator path still refuses negative scales
    with pytest.raises(ValidationError, match="kv_scale: expected values >= 0"):
        ind(**host)


def test_jax_out_is_refused():
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(0)
    host = host_inputs(rng)
    out = jnp.zeros((6, 70), jnp.float32)
    with pytest.raises(ValidationError, match="out: expected a writable array .* got a JAX array, which is immutable"):
        rawindexer.fp8_mqa_logits(**host, out=out)
    assert float(jnp.abs(out).max()) == 0.0


def test_empty_outputs_are_valid(rng):
    host = host_inputs(rng, M=0)
    out = np.empty((0, 70), np.float32)
    assert rawindexer.fp8_mqa_logits(**host, out=out) is out
    assert rawindexer.fp8_mqa_logits(**host).shape == (0, 70)
    host = host_inputs(rng, N=0, M=3)
    host["cu_seqlen_ke"][:] = 0
    assert rawindexer.fp8_mqa_logits(**host, out=np.empty((3, 0), np.float32)).shape == (3, 0)


@pytest.mark.parametrize("bad", ["32", 32.5, 32.0, None])
def test_is_supported_takes_ints_only(bad):
    with pytest.raises(TypeError, match=r"num_heads: expected an int, got"):
        rawindexer.is_supported(bad, 128)
    with pytest.raises(TypeError, match=r"head_dim: expected an int, got"):
        rawindexer.is_supported(32, bad)
    assert rawindexer.is_supported(np.int64(32), 128) and rawindexer.is_supported(True * 32, 128)


@pytest.mark.parametrize("bad", ["no", None, 0.5, "False"])
def test_clean_logits_takes_bools_and_ints_only(rng, bad):
    with pytest.raises(TypeError, match=r"clean_logits: expected a bool or an int, got"):
        rawindexer.fp8_mqa_logits(**host_inputs(rng), clean_logits=bad)


def test_emulator_raw_launch_refuses_unmapped_or_too_small_pointers(rng):
    host = host_inputs(rng, M=4, N=64)
    out = np.full((4, 64), np.nan, np.float32)
    ptrs = [a.ctypes.data for a in host.values()] + [out.ctypes.data]
    kw = dict(M=4, N=64, num_heads=32, head_dim=128, device="emulator")
    with pytest.raises(ValueError, match=r"weights: expected 512 readable bytes at 0x10, .* not mapped"):
        rawindexer.launch(*ptrs[:3], 0x10, *ptrs[4:], **kw)
    ro = np.full((4, 64), np.nan, np.float32)
    import mmap

    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)
    page_ptr = np.frombuffer(page, np.uint8).ctypes.data
    with pytest.raises(ValueError, match="out: expected 1024 readable and writable bytes .* not mapped readable "
                                         "and writable"):
        rawindexer.launch(*ptrs[:6], page_ptr, **kw)
    # too small: a span that runs off the end of a mapping
    tail = mmap.mmap(-1, 4096)
    tail_ptr = np.frombuffer(tail, np.uint8).ctypes.data + 4096 - 100
    import rawindexer.backends.emulator as emu

    maps = emu._mapped_ranges()
    if not any(lo <= tail_ptr + 100 < hi for lo, hi, *_ in maps):  # nothing mapped right after it
        with pytest.raises(ValueError, match="kv_scale: expected 256 readable bytes"):
            rawindexer.launch(*ptrs[:2], tail_ptr, *ptrs[3:], **kw)
    del ro
    rawindexer.launch(*ptrs, **kw)  # the real buffers pass, and the result is right
    check(host, out)
