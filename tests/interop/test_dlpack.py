"""Tests for rawindexer.dlpack (CPU only): zero-copy in both directions with numpy, torch and JAX,
strides/offsets/empty/0-d tensors, fp8, capsule ownership (consumed once, deleter once), leaks,
and error messages. torch / JAX tests skip when those packages are absent."""
from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest

try:
    from rawindexer import dlpack as dl
except ImportError:  # pytest run from elsewhere without the repo on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from rawindexer import dlpack as dl


# numpy >= 2.1 speaks DLPack 1.x (max_version, read-only flag); older numpy only legacy capsules.
NUMPY_DLPACK_1 = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)


def np_ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def capsule_name(cap) -> str:
    # repr is '<capsule object "NAME" at 0x...>'
    return repr(cap).split('"')[1]


class Owner:
    """A weakref-able owner of a numpy buffer; counts how often it was finalized."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def counted_owner(array: np.ndarray) -> tuple[Owner, list[int]]:
    owner = Owner(array)
    calls: list[int] = []
    weakref.finalize(owner, calls.append, 1)
    return owner, calls


def aligned_empty(nbytes: int, align: int = 64, offset: int = 0) -> np.ndarray:
    raw = np.zeros(nbytes + 2 * align, np.uint8)
    start = (-np_ptr(raw)) % align + offset
    return raw[start:start + nbytes]


@pytest.fixture(params=["numpy-c", "ctypes"])
def backend(request, monkeypatch):
    """Run a test with numpy's C destructor/deleter and with the ctypes-callback fallback."""
    if request.param == "numpy-c" and dl._BACKEND != "numpy-c":
        pytest.skip("numpy C deleters not available with this numpy")
    monkeypatch.setattr(dl, "_BACKEND", request.param)
    return request.param


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------
def test_dtype_constants_follow_dlpack_1_1():
    assert (dl.DL_CPU, dl.DL_CUDA, dl.DL_ROCM) == (1, 2, 10)
    assert (dl.FLOAT32.code, dl.FLOAT32.bits, dl.FLOAT32.itemsize) == (2, 32, 4)
    assert (dl.INT32.code, dl.UINT8.code, dl.BFLOAT16.code, dl.BOOL.code) == (0, 1, 4, 6)
    assert (dl.FLOAT8_E4M3FN.code, dl.FLOAT8_E4M3FNUZ.code, dl.FLOAT8_E5M2.code) == (10, 11, 12)
    assert dl.FLOAT8_E4M3FN.bits == 8 and dl.FLOAT8_E4M3FN.itemsize == 1
    assert dl.DType("float32x4", 2, 32, 4).itemsize == 16


def test_dtype_from_name_accepts_common_spellings():
    assert dl.dtype_from_name("float32") is dl.FLOAT32
    assert dl.dtype_from_name("bf16") is dl.BFLOAT16
    assert dl.dtype_from_name("fp8_e4m3fn") is dl.FLOAT8_E4M3FN
    assert dl.dtype_from_name(np.int64) is dl.INT64
    assert dl.dtype_from_name(np.dtype("<f2")) is dl.FLOAT16
    assert dl.dtype_from_name("f8") is dl.FLOAT64
    assert dl.dtype_from_name(dl.UINT8) is dl.UINT8
    with pytest.raises(dl.DLPackError, match=r"^kind: unknown dtype 'float7'"):
        dl.dtype_from_name("float7", arg="kind")


# ---------------------------------------------------------------------------------------------
# numpy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8", "uint16", "bool", "complex64"])
def test_numpy_import_is_zero_copy(dtype):
    x = (np.arange(24) % 2).astype(dtype).reshape(2, 3, 4)
    v = dl.from_dlpack(x)
    assert v.ptr == np_ptr(x)
    assert v.shape == (2, 3, 4) and v.strides == (12, 4, 1)
    assert v.dtype is dl.dtype_from_name(dtype)
    assert v.device == (dl.DL_CPU, 0)
    if NUMPY_DLPACK_1:
        assert v.version is not None and v.version[0] == 1
    assert v.source is x and v.is_contiguous()
    assert v.nbytes_span == x.nbytes
    y = v.numpy()
    assert np_ptr(y) == np_ptr(x)
    np.testing.assert_array_equal(y, x)


def test_numpy_strides_transpose_and_byte_offset():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    for sub in (base.T, base[:, 1::3], base[2:, 3:], base[1:5:2, ::4].T, base[3]):
        v = dl.from_dlpack(sub)
        # slicing shows up as a data pointer (numpy exports byte_offset 0) that ptr must match
        assert v.ptr == np_ptr(sub)
        assert v.strides == tuple(s // 4 for s in sub.strides)
        assert v.is_contiguous() == sub.flags.c_contiguous
        np.testing.assert_array_equal(v.numpy(), sub)
        assert np_ptr(v.numpy()) == np_ptr(sub)
    v = dl.from_dlpack(base[:, 1::3])
    # rows 0..5 at stride 10, cols 1, 4, 7: last element is (5, 7) -> 5*10 + 2*3 + 1 elements
    assert v.nbytes_span == (5 * 10 + 2 * 3 + 1) * 4


def test_numpy_view_is_writable_and_shares_memory():
    x = np.zeros((3, 4), np.int32)
    v = dl.from_dlpack(x[:, 1:3])
    v.numpy()[...] = 7
    assert x[:, 1:3].sum() == 7 * 6 and x[:, 0].sum() == 0 and x[:, 3].sum() == 0


def test_shape_zero_and_zero_d():
    e = dl.from_dlpack(np.zeros((0, 5), np.float32))
    assert e.shape == (0, 5) and e.nbytes_span == 0 and e.is_contiguous() and e.size == 0
    assert e.numpy().shape == (0, 5)
    s = np.array(2.5, np.float64)
    z = dl.from_dlpack(s)
    assert z.shape == () and z.strides == () and z.ndim == 0 and z.ptr == np_ptr(s)
    assert z.nbytes_span == 8 and z.is_contiguous()
    assert z.numpy().shape == () and float(z.numpy()) == 2.5
    # and exported: shape-0 and 0-d DLPackArrays import into numpy
    assert np.from_dlpack(dl.DLPackArray.from_numpy(np.zeros((4, 0), np.int8))).shape == (4, 0)
    out = np.from_dlpack(dl.DLPackArray.from_numpy(s))
    assert out.shape == () and np_ptr(out) == np_ptr(s)


def test_contiguity_ignores_size_one_dims():
    x = np.zeros((4, 1, 3), np.float32)
    v = dl.TensorView(ptr=np_ptr(x), shape=(4, 1, 3), strides=(3, 99, 1), dtype=dl.FLOAT32,
                      device=(1, 0), readonly=False, source=x)
    assert v.is_contiguous()
    assert not dl.TensorView(ptr=0, shape=(2, 3), strides=(1, 2), dtype=dl.FLOAT32,
                             device=(1, 0), readonly=False, source=None).is_contiguous()


def test_dlpack_array_into_numpy_is_zero_copy():
    buf = np.arange(48, dtype=np.float32)
    arr = dl.DLPackArray(np_ptr(buf), (4, 6), dl.FLOAT32, (dl.DL_CPU, 0), strides=(12, 2), owner=buf)
    out = np.from_dlpack(arr)
    assert np_ptr(out) == np_ptr(buf)
    assert out.strides == (48, 8)
    np.testing.assert_array_equal(out, buf.reshape(4, 12)[:, ::2])
    out2 = dl.import_into("numpy", arr)
    assert np_ptr(out2) == np_ptr(buf)
    assert dl.import_into("unknown", arr).shape == (4, 6)


def test_numpy_view_keeps_producer_alive():
    x = np.arange(10, dtype=np.int16)
    ref = weakref.ref(x)
    v = dl.from_dlpack(x)
    y = v.numpy()
    del x, v
    gc.collect()
    assert ref() is not None  # y -> view -> managed tensor -> numpy's export -> x
    np.testing.assert_array_equal(y, np.arange(10))
    del y
    gc.collect()
    assert ref() is None  # the producer's deleter ran


def test_readonly_and_copy_flags():
    r = np.arange(4, dtype=np.float32)
    r.flags.writeable = False
    arr = dl.DLPackArray.from_numpy(r)
    assert arr.readonly
    if NUMPY_DLPACK_1:
        assert np.from_dlpack(arr).flags.writeable is False
    assert capsule_name(arr.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    with pytest.raises(BufferError, match="read-only"):
        arr.__dlpack__()  # a legacy capsule cannot say read-only
    if NUMPY_DLPACK_1:
        v = dl.from_dlpack(r)
        assert v.readonly and v.numpy().flags.writeable is False

    x = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    src = dl.DLPackArray.from_numpy(x)
    c = dl.from_dlpack(src.__dlpack__(max_version=(1, 1), copy=True))
    assert c.copied and c.ptr != np_ptr(x) and c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), x)
    with pytest.raises(BufferError, match="device"):
        src.__dlpack__(dl_device=(dl.DL_CUDA, 0))


def test_legacy_and_versioned_capsules_from_dlpack_array():
    buf = np.arange(6, dtype=np.int32)
    arr = dl.DLPackArray.from_numpy(buf)
    legacy = arr.__dlpack__()
    versioned = arr.__dlpack__(max_version=(1, 0))
    assert capsule_name(legacy) == "dltensor" and capsule_name(versioned) == "dltensor_versioned"
    for cap in (legacy, versioned):
        v = dl.from_dlpack(cap)
        assert v.ptr == np_ptr(buf) and v.shape == (6,) and v.dtype is dl.INT32
    # the version announced never exceeds the consumer's max_version
    assert dl.from_dlpack(arr.__dlpack__(max_version=(1, 0))).version == (1, 0)
    assert dl.from_dlpack(arr.__dlpack__(max_version=(1, 7))).version == (1, 1)


# ---------------------------------------------------------------------------------------------
# Ownership: consumed once, deleter once
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("versioned", [False, True])
def test_capsule_consumed_exactly_once(versioned, backend):
    buf = np.arange(8, dtype=np.float32)
    owner, calls = counted_owner(buf)
    base = dl.live_exports()
    cap = dl.to_dlpack_capsule(np_ptr(buf), (8,), dl.FLOAT32, (dl.DL_CPU, 0), owner=owner,
                               versioned=versioned)
    del owner
    assert capsule_name(cap) == ("dltensor_versioned" if versioned else "dltensor")
    assert dl.live_exports() == base + 1
    view = dl.from_dlpack(cap, name="weights")
    assert capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    with pytest.raises(dl.DLPackError, match=r"^weights: DLPack capsule was already consumed"):
        dl.from_dlpack(cap, name="weights")
    del cap  # a consumed capsule's destructor must not call the deleter
    gc.collect()
    assert calls == [] and dl.live_exports() == base + 1
    np.testing.assert_array_equal(view.numpy(), buf)
    view.release()
    assert calls == [1] and dl.live_exports() == base and view.released
    view.release()
    del view
    gc.collect()
    assert calls == [1]


@pytest.mark.parametrize("versioned", [False, True])
def test_unconsumed_capsule_calls_deleter_once_when_dropped(versioned, backend):
    owner, calls = counted_owner(np.zeros(4, np.uint8))
    base = dl.live_exports()
    cap = dl.to_dlpack_capsule(np_ptr(owner.array), (4,), "uint8", (1, 0), owner=owner,
                               versioned=versioned)
    del owner
    assert calls == []
    del cap
    assert calls == [1] and dl.live_exports() == base


def test_view_garbage_collection_calls_deleter_once(backend):
    owner, calls = counted_owner(np.zeros(3, np.float64))
    arr = dl.DLPackArray(np_ptr(owner.array), (3,), dl.FLOAT64, (1, 0), owner=owner)
    del owner
    view = dl.from_dlpack(arr)
    del arr
    gc.collect()
    assert calls == []
    del view
    gc.collect()
    assert calls == [1]


def test_foreign_consumers_call_deleter_once(backend):
    owner, calls = counted_owner(np.arange(5, dtype=np.int64))
    arr = dl.DLPackArray.from_numpy(owner.array)
    arr.owner = owner  # make the counted object the one the registry keeps alive
    del owner
    base = dl.live_exports()
    out = np.from_dlpack(arr)
    assert dl.live_exports() == base + 1
    del arr
    gc.collect()
    assert calls == []
    del out
    gc.collect()
    assert calls == [1] and dl.live_exports() == base


@pytest.mark.skipif(dl._BACKEND != "numpy-c",
                    reason="the ctypes fallback (numpy < 2) has exactly the SystemError problem")
def test_rejected_capsule_keeps_consumer_error_and_frees_memory():
    # numpy rejects fp8 codes. Its C code drops our capsule while its error is pending: the
    # capsule destructor and deleter are C functions here, so the error survives intact (a Python
    # destructor would turn it into "SystemError: ... returned NULL without setting an exception").
    base = dl.live_exports()
    owner, calls = counted_owner(np.zeros(8, np.uint8))
    arr = dl.DLPackArray.from_numpy(owner.array, dtype="float8_e4m3fn")
    arr.owner = owner
    del owner
    with pytest.raises(Exception) as info:
        np.from_dlpack(arr)
    assert not isinstance(info.value, SystemError)
    del arr, info
    gc.collect()
    assert calls == [1] and dl.live_exports() == base


def test_foreign_producer_deleter_runs_on_release():
    x = np.arange(6, dtype=np.float32)
    before = sys.getrefcount(x)
    v = dl.from_dlpack(x)
    # +1 for view.source, +1 held by numpy's managed tensor (its manager_ctx)
    assert sys.getrefcount(x) == before + 2
    v.release()
    assert sys.getrefcount(x) == before + 1  # numpy's deleter dropped its reference
    v.release()
    assert sys.getrefcount(x) == before + 1
    with pytest.raises(dl.DLPackError, match="after release"):
        v.numpy()


def test_no_leak_over_10000_round_trips():
    buf = np.arange(64, dtype=np.float32).reshape(8, 8)
    arr = dl.DLPackArray.from_numpy(buf)

    def round_trips(n):
        for _ in range(n):
            v = dl.from_dlpack(arr)  # our export -> our import -> deleter
            assert v.ptr == arr.ptr
            v.release()
            out = np.from_dlpack(arr)  # our export -> numpy import -> deleter when out dies
            del out

    def other_paths(n):
        for _ in range(n):
            w = dl.from_dlpack(buf)  # numpy export -> our import, released by garbage collection
            del w
            cap = arr.__dlpack__(max_version=(1, 0))  # dropped unconsumed
            del cap

    round_trips(200)  # warm caches before measuring
    other_paths(200)
    gc.collect()
    base = dl.live_exports()
    # tracemalloc slows these calls ~9x, so it watches the two export/import round trips; the
    # other paths run as often untraced and are checked through the owner registry.
    other_paths(10_000)
    gc.collect()
    assert dl.live_exports() == base
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        round_trips(10_000)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dl.live_exports() == base
    # 10,000 leaked managed tensors would be >= 800 KB (80-byte structs + shape/strides)
    assert after - before < 32 * 1024, f"grew by {after - before} bytes"


# ---------------------------------------------------------------------------------------------
# Errors and protocol details
# ---------------------------------------------------------------------------------------------
def test_object_without_dlpack_names_argument():
    with pytest.raises(dl.DLPackError, match=r"^q_scale: expected an object implementing the DLPack"):
        dl.from_dlpack([1.0, 2.0], name="q_scale")
    with pytest.raises(dl.DLPackError, match=r"^tensor: "):
        dl.from_dlpack(3)


@pytest.mark.parametrize("dtype", [dl.DType("float4_e2m1fn", 17, 4), dl.DType("int32x2", 0, 32, 2),
                                   dl.DType("weird", 42, 8)])
def test_unsupported_dtype_code_raises_and_leaves_capsule_unconsumed(dtype):
    owner, calls = counted_owner(np.zeros(16, np.uint8))
    cap = dl.to_dlpack_capsule(np_ptr(owner.array), (2,), dtype, (1, 0), owner=owner,
                               versioned=True)
    del owner
    with pytest.raises(dl.DLPackError, match=rf"^kv: unsupported DLPack dtype \(code={dtype.code}"):
        dl.from_dlpack(cap, name="kv")
    assert capsule_name(cap) == "dltensor_versioned"  # still the producer's to free
    del cap
    assert calls == [1]


def test_unsupported_major_version_calls_deleter():
    owner, calls = counted_owner(np.zeros(4, np.float32))
    cap = dl.to_dlpack_capsule(np_ptr(owner.array), (4,), dl.FLOAT32, (1, 0), owner=owner,
                               versioned=True, version=(2, 0))
    del owner
    with pytest.raises(dl.DLPackError, match=r"^x: DLPack major version 2"):
        dl.from_dlpack(cap, name="x")
    assert calls == [1] and capsule_name(cap) == "used_dltensor_versioned"


class SpyProducer:
    """Records the keyword arguments __dlpack__ receives; forwards to a DLPackArray."""

    def __init__(self, device, accepts_max_version=True):
        self.buf = np.zeros(4, np.float32)
        self.array = dl.DLPackArray(np_ptr(self.buf), (4,), dl.FLOAT32, device, owner=self.buf)
        self.accepts_max_version = accepts_max_version
        self.calls = []

    def __dlpack_device__(self):
        return self.array.device

    def __dlpack__(self, *, stream=None, **kwargs):
        self.calls.append(dict(stream=stream, **kwargs))
        if kwargs and not self.accepts_max_version:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.array.__dlpack__(**kwargs)


def test_versioned_first_then_legacy_fallback():
    spy = SpyProducer((1, 0))
    assert dl.from_dlpack(spy).version == (1, 1)
    assert spy.calls == [{"stream": None, "max_version": (1, 1)}]
    old = SpyProducer((1, 0), accepts_max_version=False)
    v = dl.from_dlpack(old)
    assert v.version is None and v.ptr == np_ptr(old.buf)
    assert old.calls == [{"stream": None, "max_version": (1, 1)}, {"stream": None}]


def test_stream_rules():
    cpu = SpyProducer((dl.DL_CPU, 0))
    dl.from_dlpack(cpu, stream=2)
    assert cpu.calls[0]["stream"] is None  # CPU producers never get a stream
    cuda = SpyProducer((dl.DL_CUDA, 0))
    v = dl.from_dlpack(cuda, stream=2)
    assert cuda.calls[0]["stream"] == 2 and v.device == (dl.DL_CUDA, 0)
    with pytest.raises(dl.DLPackError, match="numpy\\(\\) needs host memory"):
        v.numpy()
    for bad in (0, -2, "s"):
        with pytest.raises(dl.DLPackError, match=r"^k: stream"):
            dl.from_dlpack(SpyProducer((dl.DL_CUDA, 0)), name="k", stream=bad)
    with pytest.raises(dl.DLPackError, match=r"^k: stream=1 is not allowed for ROCm"):
        dl.from_dlpack(SpyProducer((dl.DL_ROCM, 0)), name="k", stream=1)
    rocm = SpyProducer((dl.DL_ROCM, 0))
    dl.from_dlpack(rocm, stream=0)
    assert rocm.calls[0]["stream"] == 0


def test_export_argument_errors_name_the_argument():
    with pytest.raises(dl.DLPackError, match=r"^ptr: NULL"):
        dl.to_dlpack_capsule(0, (4,), dl.FLOAT32, (1, 0), versioned=True)
    with pytest.raises(dl.DLPackError, match=r"^strides: "):
        dl.DLPackArray(16, (4, 4), dl.FLOAT32, (1, 0), strides=(4,))
    with pytest.raises(dl.DLPackError, match=r"^shape: "):
        dl.DLPackArray(16, (-1,), dl.FLOAT32, (1, 0))
    with pytest.raises(dl.DLPackError, match=r"^device: "):
        dl.DLPackArray(16, (1,), dl.FLOAT32, "cpu")
    with pytest.raises(dl.DLPackError, match=r"^readonly: "):
        dl.to_dlpack_capsule(16, (1,), dl.FLOAT32, (1, 0), versioned=False, readonly=True)
    with pytest.raises(dl.DLPackError, match=r"^framework: "):
        dl.import_into("tensorflow", dl.DLPackArray.from_numpy(np.zeros(1)))


def test_producer_failure_is_wrapped():
    class Broken:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("not exportable")

    with pytest.raises(dl.DLPackError, match=r"^idx: Broken.__dlpack__\(\) failed: BufferError"):
        dl.from_dlpack(Broken(), name="idx")


def test_framework_of_uses_module_names_only():
    class MyArray(np.ndarray):
        pass

    assert dl.framework_of(np.zeros(1)) == "numpy"
    assert dl.framework_of(np.zeros(1).view(MyArray)) == "numpy"
    assert dl.framework_of([1]) == "unknown"
    assert dl.framework_of(dl.DLPackArray.from_numpy(np.zeros(1))) == "unknown"


def test_module_import_does_not_import_frameworks():
    import subprocess

    code = ("import sys, rawindexer.dlpack; "
            "print(sorted(m for m in ('torch', 'jax', 'cupy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# torch (CPU)
# ---------------------------------------------------------------------------------------------
def test_torch_import_and_export_zero_copy():
    torch = pytest.importorskip("torch")
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert dl.framework_of(t) == "torch"
    v = dl.from_dlpack(t)
    assert v.ptr == t.data_ptr() and v.shape == (4, 6) and v.strides == (6, 1)
    assert v.version is not None and v.version[0] == 1  # torch answers max_version with 1.x
    np.testing.assert_array_equal(v.numpy(), t.numpy())
    for sub in (t.t(), t[:, 1::2], t[2:, 3:], t[1]):
        s = dl.from_dlpack(sub)
        assert s.ptr == sub.data_ptr()  # storage offset folded into ptr
        assert s.strides == tuple(sub.stride())
        np.testing.assert_array_equal(s.numpy(), sub.numpy())

    buf = np.arange(12, dtype=np.int32)
    arr = dl.DLPackArray(np_ptr(buf), (3, 2), dl.INT32, (dl.DL_CPU, 0), strides=(4, 1), owner=buf)
    out = dl.import_into("torch", arr)
    assert isinstance(out, torch.Tensor) and out.data_ptr() == np_ptr(buf)
    assert tuple(out.stride()) == (4, 1)
    np.testing.assert_array_equal(out.numpy(), buf.reshape(3, 4)[:, :2])
    out[0, 0] = 100  # shared memory
    assert buf[0] == 100


def test_torch_shape_zero_and_zero_d():
    torch = pytest.importorskip("torch")
    z = torch.tensor(3.5)
    v = dl.from_dlpack(z)
    assert v.shape == () and v.ptr == z.data_ptr() and float(v.numpy()) == 3.5
    e = dl.from_dlpack(torch.zeros(0, 3))
    assert e.shape == (0, 3) and e.nbytes_span == 0
    out = torch.from_dlpack(dl.DLPackArray.from_numpy(np.zeros((2, 0), np.float32)))
    assert tuple(out.shape) == (2, 0)


def test_torch_float8_round_trip():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch without float8_e4m3fn")
    t = torch.tensor([0.5, -1.0, 2.0, 448.0]).to(torch.float8_e4m3fn)
    v = dl.from_dlpack(t)
    assert (v.dtype.code, v.dtype.bits) == (10, 8) and v.dtype is dl.FLOAT8_E4M3FN
    assert v.ptr == t.data_ptr()
    bits = v.numpy()
    assert bits.dtype == np.uint8
    np.testing.assert_array_equal(bits, t.view(torch.uint8).numpy())

    # export the same bytes back as fp8: torch sees float8_e4m3fn at the same address
    arr = dl.DLPackArray.from_numpy(bits, dtype="float8_e4m3fn")
    back = torch.from_dlpack(arr)
    assert back.dtype == torch.float8_e4m3fn and back.data_ptr() == t.data_ptr()
    assert torch.equal(back.float(), t.float())
    u8 = torch.from_dlpack(arr.view("uint8"))  # what CuPy users get
    assert u8.dtype == torch.uint8 and u8.data_ptr() == t.data_ptr()
    fnuz = dl.from_dlpack(torch.zeros(2, dtype=torch.float8_e4m3fnuz))
    assert (fnuz.dtype.code, fnuz.dtype.bits) == (11, 8)


def test_torch_errors_name_argument():
    torch = pytest.importorskip("torch")
    with pytest.raises(dl.DLPackError, match=r"^q: Tensor.__dlpack__\(\) failed"):
        dl.from_dlpack(torch.zeros(2, requires_grad=True), name="q")


def test_torch_consumer_calls_deleter_once():
    torch = pytest.importorskip("torch")
    owner, calls = counted_owner(np.arange(4, dtype=np.float32))
    arr = dl.DLPackArray(np_ptr(owner.array), (4,), dl.FLOAT32, (1, 0), owner=owner)
    del owner
    t = torch.from_dlpack(arr)
    del arr
    gc.collect()
    assert calls == [] and t.sum().item() == 6.0
    del t
    gc.collect()
    assert calls == [1]


# ---------------------------------------------------------------------------------------------
# JAX (CPU)
# ---------------------------------------------------------------------------------------------
def test_jax_import_zero_copy():
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    assert dl.framework_of(j) == "jax"
    v = dl.from_dlpack(j)
    assert v.ptr == j.unsafe_buffer_pointer()
    assert v.version is None  # JAX answers with a legacy capsule
    np.testing.assert_array_equal(v.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_jax_export_zero_copy_when_aligned():
    jax = pytest.importorskip("jax")
    # JAX's CPU client aliases external memory only when it is 64-byte aligned and copies it
    # otherwise (observed with jax 0.10.2): both are asserted so a change of behaviour shows up.
    aligned = aligned_empty(64 * 4).view(np.float32)
    aligned[:] = np.arange(64)
    out = dl.import_into("jax", dl.DLPackArray.from_numpy(aligned))
    assert isinstance(out, jax.Array)
    assert out.unsafe_buffer_pointer() == np_ptr(aligned)
    np.testing.assert_array_equal(np.asarray(out), aligned)

    misaligned = aligned_empty(64 * 4, offset=16).view(np.float32)
    misaligned[:] = np.arange(64)
    out2 = dl.import_into("jax", dl.DLPackArray.from_numpy(misaligned))
    assert out2.unsafe_buffer_pointer() != np_ptr(misaligned)  # copied
    np.testing.assert_array_equal(np.asarray(out2), misaligned)


def test_ready_hook_sees_each_consumers_stream():
    """DLPackArray(ready=...) is the producer side of the stream handshake: called before every export
    with the stream the consumer passed."""
    from rawindexer.dlpack import DL_CUDA, DLPackArray, from_dlpack

    buf = np.zeros(16, np.float32)
    seen = []
    arr = DLPackArray(buf.ctypes.data, (4, 4), "float32", (DL_CUDA, 0), owner=buf, ready=seen.append)
    from_dlpack(arr, name="out", stream=7).release()
    from_dlpack(arr, name="out", stream=None).release()
    assert seen == [7, None]
