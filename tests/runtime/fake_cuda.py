"""A fake of ``cuda.bindings.driver`` for CPU tests: several devices, per-thread current contexts, and a
record of every call with the context current when it ran (no GPU, no cuda-bindings needed).

Like the real driver it refuses what would fail on a GPU: a launch of a function loaded in another
context, or on a stream of another device, returns CUDA_ERROR_INVALID_HANDLE / _CONTEXT.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import types
from pathlib import Path

import pytest

CTX_BASE = 0xC0000  # device d's primary context handle: CTX_BASE + d


def stream_of(device: int, n: int = 0) -> int:
    """A fake stream handle that belongs to ``device`` (0 and the legacy/per-thread 1/2 belong to all)."""
    return 0x50000 + 0x100 * device + n


class FakeDriver(types.ModuleType):
    """Records every call as (name, args, context current on the calling thread, thread ident)."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1
        CUDA_ERROR_INVALID_CONTEXT = 201
        CUDA_ERROR_INVALID_HANDLE = 400

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    class CUstream(int):
        pass

    class CUevent_flags:
        CU_EVENT_DISABLE_TIMING = 2

    class CUdeviceptr(int):
        pass

    def __init__(self, count: int = 1) -> None:
        super().__init__("cuda.bindings.driver")
        self.calls: list[tuple] = []
        self.fail: str | None = None
        self.count = count
        self._tls = threading.local()
        self._lock = threading.Lock()
        self.by_handle: dict[int, tuple] = {}
        self._c_entry_points = None

    # -- bookkeeping ----------------------------------------------------------------------------------
    @property
    def current(self) -> int:
        return getattr(self._tls, "ctx", 0)

    def _rec(self, name, *args, value=None, err=None):
        with self._lock:
            self.calls.append((name, args, self.current, threading.get_ident()))
        if err is None:
            err = self.CUresult.CUDA_ERROR_INVALID_VALUE if self.fail == name else self.CUresult.CUDA_SUCCESS
        return (err,) if value is None else (err, value)

    def names(self, since: int = 0) -> list[str]:
        return [c[0] for c in self.calls[since:]]

    def launches(self) -> list[tuple]:
        return [c for c in self.calls if c[0] == "cuLaunchKernel"]

    # -- the driver API ------------------------------------------------------------------------------
    def cuInit(self, flags): return self._rec("cuInit", flags)
    def cuDeviceGetCount(self): return self._rec("cuDeviceGetCount", value=self.count)
    def cuDeviceGet(self, i): return self._rec("cuDeviceGet", i, value=f"dev{i}")
    def cuDevicePrimaryCtxRetain(self, d): return self._rec("cuDevicePrimaryCtxRetain", d, value=CTX_BASE + int(d[3:]))
    def cuCtxGetCurrent(self): return self._rec("cuCtxGetCurrent", value=self.current)

    def cuCtxSetCurrent(self, c):
        if self.fail != "cuCtxSetCurrent":
            self._tls.ctx = int(c or 0)
        return self._rec("cuCtxSetCurrent", int(c or 0))

    def cuModuleLoadData(self, image): return self._rec("cuModuleLoadData", image, value=("module", self.current))
    def cuModuleGetFunction(self, m, name):
        fn = ("fn", m[1], name)
        self.by_handle[id(fn)] = fn  # the raw routes hand over id(fn) (what _handle gives a handle without int())
        return self._rec("cuModuleGetFunction", m, name, value=fn)
    def cuFuncSetAttribute(self, f, attr, value): return self._rec("cuFuncSetAttribute", f, attr, value)
    def cuStreamSynchronize(self, s): return self._rec("cuStreamSynchronize", int(s))
    def cuMemAlloc(self, n): return self._rec("cuMemAlloc", n, value=self.CUdeviceptr(0x1000))
    def cuMemFree(self, p): return self._rec("cuMemFree", int(p))
    def cuDeviceGetAttribute(self, a, d): return self._rec("cuDeviceGetAttribute", a, d, value=132)
    def cuGetErrorName(self, e): return (0, b"CUDA_ERROR_INVALID_VALUE")
    def cuEventCreate(self, flags): return self._rec("cuEventCreate", flags, value="event")
    def cuEventRecord(self, e, s): return self._rec("cuEventRecord", e, int(s))
    def cuStreamWaitEvent(self, s, e, flags): return self._rec("cuStreamWaitEvent", int(s), e, flags)
    def cuEventDestroy(self, e): return self._rec("cuEventDestroy", e)

    # The fake's "device memory" is host memory: the copies really move bytes, so the tests can check them.
    def cuMemcpyHtoD(self, dst, src, n):
        if self.fail != "cuMemcpyHtoD":
            ctypes.memmove(int(dst), int(src), n)
        return self._rec("cuMemcpyHtoD", type(dst).__name__, int(dst), int(src), n)

    def cuMemcpyDtoH(self, dst, src, n):
        if self.fail != "cuMemcpyDtoH":
            ctypes.memmove(int(dst), int(src), n)
        return self._rec("cuMemcpyDtoH", int(dst), type(src).__name__, int(src), n)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        # Decode the extra array now: its buffers only live for the duration of the call.
        arr = (ctypes.c_void_p * 5).from_address(extra)
        size = ctypes.c_size_t.from_address(arr[3]).value
        payload = ctypes.string_at(arr[1], size)
        err = None
        ctx = self.current
        stream = int(stream)
        if not ctx:
            err = self.CUresult.CUDA_ERROR_INVALID_CONTEXT
        elif isinstance(f, tuple) and f[1] != ctx:
            err = self.CUresult.CUDA_ERROR_INVALID_HANDLE  # a function of another context
        elif stream > 2 and (stream - 0x50000) // 0x100 != ctx - CTX_BASE:
            err = self.CUresult.CUDA_ERROR_INVALID_HANDLE  # a stream of another device
        return self._rec("cuLaunchKernel", f, (gx, gy, gz), (bx, by, bz), shared, stream, params,
                         (arr[0], arr[2], arr[4] or 0), payload, err=err)


    # -- the per-call entry points as C function pointers ----------------------------------------------------
    def c_library(self) -> types.SimpleNamespace:
        """cuCtxGetCurrent / cuCtxSetCurrent / cuLaunchKernel as C function pointers (ctypes callbacks into this
        fake, recorded like the bindings' calls): what the backend's raw routes (the C launcher, plain ctypes) call
        in place of libcuda's."""
        if self._c_entry_points is None:
            vp, u = ctypes.c_void_p, ctypes.c_uint

            def get_current(out):
                err, ctx = self.cuCtxGetCurrent()
                ctypes.c_void_p.from_address(out).value = ctx or None
                return int(err)

            def set_current(ctx):
                return int(self.cuCtxSetCurrent(ctx or 0)[0])

            def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
                return int(self.cuLaunchKernel(self.by_handle.get(f, f), gx, gy, gz, bx, by, bz, shared, stream or 0,
                                               params, extra)[0])

            self._c_entry_points = types.SimpleNamespace(
                cuCtxGetCurrent=ctypes.CFUNCTYPE(ctypes.c_int, vp)(get_current),
                cuCtxSetCurrent=ctypes.CFUNCTYPE(ctypes.c_int, vp)(set_current),
                cuLaunchKernel=ctypes.CFUNCTYPE(ctypes.c_int, vp, u, u, u, u, u, u, u, vp, vp, vp)(launch))
        return self._c_entry_points


def use_raw_route(monkeypatch, drv: FakeDriver, route: str) -> None:
    """Make the cuda backend take ``route`` ("bindings", "ctypes", "shim" = the C launcher through ctypes, "ext" =
    the C launcher's CPython extension) with this fake behind it; fails when that launcher is not built."""
    if route == "bindings":
        return
    from rawindexer.backends import cuda as cuda_backend

    shim = extension = None
    if route == "shim":
        shim = cuda_backend._load_shim()
        if shim is None:
            pytest.fail("the kernel directory has no C launcher: `make` builds rawindexer/_kernels/libri_cuda_launch.so")
    if route == "ext":
        extension = cuda_backend._load_launch_extension()
        if extension is None:
            import sysconfig

            if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
                pytest.skip("no Python.h for this interpreter: `make` skips the launcher extension")
            pytest.fail("the kernel directory has no launcher extension: `make` builds "
                        f"rawindexer/_kernels/{cuda_backend.EXTENSION_NAME}")
    monkeypatch.setattr(cuda_backend, "_raw_driver",
                        lambda driver: cuda_backend._RawDriver(drv.c_library(), shim, extension))


def install(monkeypatch, count: int = 1) -> FakeDriver:
    drv = FakeDriver(count)
    cuda = types.ModuleType("cuda")
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv
    cuda.bindings = bindings
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", drv)
    return drv


@pytest.fixture
def fake_driver(monkeypatch):
    return install(monkeypatch)


def two_gpu_node(monkeypatch, route: str) -> FakeDriver:
    """A fake two-GPU node behind the cuda backend on one per-call route ("bindings", "ctypes", "shim", "ext"); the
    'framework's current stream' of each device and thread is stream_of(device, drv.slots.n, default 1)."""
    import threading

    from rawindexer import api, backends

    drv = install(monkeypatch, count=2)
    use_raw_route(monkeypatch, drv, route)
    monkeypatch.setattr(backends, "_instances", {})
    slots = threading.local()
    monkeypatch.setitem(api._STREAM_OF_FRAMEWORK, "unknown", lambda dev: stream_of(dev, getattr(slots, "n", 1)))
    drv.slots = slots
    return drv
