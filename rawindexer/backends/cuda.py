"""CUDA runtime backend through the driver API of ``cuda-bindings`` (``cuda.bindings.driver``) only.

Loads the sm_90a cubin with cuModuleLoadData, launches with cuLaunchKernel and hands the packed kernarg
buffer over through ``extra`` (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END), so the same packer
(:func:`rawindexer.dispatch.base.pack_kernargs`) serves every backend. Works in the device's primary
context, the one PyTorch, CuPy and JAX use, so their pointers and streams are valid here.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Sequence

from .base import Backend, BufferSpan, DeviceAllocation, PackedKernargs

# Markers of cuLaunchKernel's ``extra`` array (cuda.h). Unlike HIP's (POINTER=1, SIZE=2, END=3).
CU_LAUNCH_PARAM_END = 0


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - exercised where cuda-bindings is absent
        raise ImportError(
            "the CUDA backend needs cuda-bindings (the driver API): pip install 'rawindexer[cuda]' "
            "(cuda-bindings~=13.0, for drivers of CUDA >= 13.0, which the shipped cubin needs)"
        ) from exc
    return driver


def cuda_device_count(driver: Any = None) -> int:
    """CUDA devices visible to this process: cuInit + cuDeviceGetCount. 0 when cuda-bindings is missing, the
    driver cannot be loaded or initialised (no GPU), or any call fails; this never raises."""
    try:
        drv = driver if driver is not None else _driver()
        ok = drv.CUresult.CUDA_SUCCESS
        err = drv.cuInit(0)
        if (err[0] if isinstance(err, tuple) else err) != ok:
            return 0
        err, count = drv.cuDeviceGetCount()
        return int(count) if err == ok else 0
    except Exception:  # noqa: BLE001 -- no bindings, no libcuda, odd bindings: "no device", never raise
        return 0


def _require_contiguous(array: Any, what: str) -> None:
    flags = getattr(array, "flags", None)
    if flags is None or not flags.c_contiguous:
        raise ValueError(f"{what}: expected a C-contiguous numpy array")


class CudaError(RuntimeError):
    """A CUDA driver call returned something other than CUDA_SUCCESS."""


def _handle(obj: Any) -> int:
    """The address behind a driver handle (CUcontext and friends convert with int(); None is NULL)."""
    if obj is None:
        return 0
    get_ptr = getattr(obj, "getPtr", None)  # cuda-bindings handles: the address where the handle value is stored
    if get_ptr is not None:
        return ctypes.c_void_p.from_address(get_ptr()).value or 0
    try:
        return int(obj)
    except TypeError:
        return id(obj)  # a handle type without __int__ (fakes): identity is all we compare


class _RawDriver:
    """The three driver entry points of the per-call path called straight through ctypes on libcuda, the library
    cuda-bindings itself loads: the same handles and contexts, without building the bindings' Python objects
    per call (about 2-3 us of a launch on the H200's host). Everything else stays on cuda-bindings.
    ``RAWINDEXER_CUDA_LAUNCH=bindings`` keeps the hot path on cuda-bindings too."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        self.launch = lib.cuLaunchKernel
        self.launch.restype = ctypes.c_int
        self.launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        self.get_current = lib.cuCtxGetCurrent
        self.get_current.restype = ctypes.c_int
        self.get_current.argtypes = [ctypes.c_void_p]
        self.set_current = lib.cuCtxSetCurrent
        self.set_current.restype = ctypes.c_int
        self.set_current.argtypes = [ctypes.c_void_p]
        self.current = ctypes.c_void_p()
        self.current_address = ctypes.addressof(self.current)


def _raw_driver(driver: Any) -> _RawDriver | None:
    """ctypes access to libcuda when it loads and the bindings are the real ones (never with a fake driver)."""
    if os.environ.get("RAWINDEXER_CUDA_LAUNCH", "") == "bindings" or not type(driver).__name__ == "module" \
            or not getattr(driver, "__file__", None):
        return None
    try:
        return _RawDriver()
    except (OSError, AttributeError):
        return None


class _Previous:
    """The context current before :meth:`CudaBackend.set_device` switched (possibly NULL: a fresh thread)."""

    __slots__ = ("context",)

    def __init__(self, context: Any) -> None:
        self.context = context


class CudaBackend(Backend):
    """Backend for NVIDIA sm_90a through cuda.bindings.driver, on every device of the node.

    Each device works in its primary context (the one PyTorch, CuPy and JAX use), retained on first use.
    :meth:`set_device` makes a device's context current for one call and :meth:`restore_device` puts the
    caller's back, like a framework's device guard. ``device_id`` is the default device of the methods that
    take one (host copies, allocation without a device)."""

    name = "cuda"
    dlpack_device_type = 2  # kDLCUDA
    arch = "sm_90a"
    kernarg_end_marker = CU_LAUNCH_PARAM_END

    def __init__(self, device_id: int = 0) -> None:
        self.driver = _driver()
        self.device_id = device_id
        self._success = self.driver.CUresult.CUDA_SUCCESS
        self._check(self.driver.cuInit(0), "cuInit")
        self._devices: dict[int, Any] = {}    # ordinal -> CUdevice
        self._contexts: dict[int, Any] = {}   # ordinal -> retained primary CUcontext
        self._context_ids: dict[int, int] = {}  # ordinal -> int(handle), for the cheap "already current?" test
        self._modules: list[Any] = []  # keep loaded modules alive as long as the backend
        self._dyn_shared: dict[int, int] = {}  # function -> dynamic shared-memory limit already set
        self._raw = _raw_driver(self.driver)
        self._raw_tls = threading.local()  # per-thread out-parameter for cuCtxGetCurrent

    @property
    def device(self) -> Any:
        return self._device(self.device_id)

    @property
    def context(self) -> Any:
        return self._context(self.device_id)

    # -- helpers ------------------------------------------------------------------------------------
    def _check(self, result: Any, what: str) -> Any:
        """cuda-bindings returns (CUresult, *values); raise on error, return the value(s)."""
        if isinstance(result, tuple):
            err, values = result[0], result[1:]
        else:
            err, values = result, ()
        if err != self.driver.CUresult.CUDA_SUCCESS:
            name = ""
            try:
                e2, s = self.driver.cuGetErrorName(err)
                name = s.decode() if isinstance(s, bytes) else str(s)
            except Exception:  # error naming is best effort
                pass
            raise CudaError(f"{what} failed: {name or err}")
        if not values:
            return None
        return values[0] if len(values) == 1 else values

    def _device(self, device_id: int) -> Any:
        dev = self._devices.get(device_id)
        if dev is None:
            count = int(self._check(self.driver.cuDeviceGetCount(), "cuDeviceGetCount"))
            if not 0 <= device_id < count:
                raise CudaError(f"device_id: expected 0..{count - 1} (CUDA devices visible), got {device_id}")
            dev = self._devices[device_id] = self._check(self.driver.cuDeviceGet(device_id), "cuDeviceGet")
        return dev

    def _context(self, device_id: int) -> Any:
        ctx = self._contexts.get(device_id)
        if ctx is None:
            ctx = self._check(self.driver.cuDevicePrimaryCtxRetain(self._device(device_id)),
                              f"cuDevicePrimaryCtxRetain(device {device_id})")
            self._contexts[device_id] = ctx
            self._context_ids[device_id] = _handle(ctx)
        return ctx

    def _make_current(self, device_id: int | None = None) -> None:
        self._check(self.driver.cuCtxSetCurrent(self._context(self.device_id if device_id is None else device_id)),
                    "cuCtxSetCurrent")

    def _stream(self, stream: int) -> Any:
        return self.driver.CUstream(int(stream))

    # -- Backend ------------------------------------------------------------------------------------
    def set_device(self, device_id: int) -> Any:
        want = self._context_ids.get(device_id)
        if want is None:
            self._context(device_id)
            want = self._context_ids[device_id]
        raw = self._raw
        if raw is not None:
            slot = getattr(self._raw_tls, "slot", None)
            if slot is None:
                slot = self._raw_tls.slot = ctypes.c_void_p()
            err = raw.get_current(ctypes.addressof(slot))
            if err:
                raise CudaError(f"cuCtxGetCurrent failed: {err}")
            current = slot.value or 0
            if current == want:
                return None
            err = raw.set_current(want)
            if err:
                raise CudaError(f"cuCtxSetCurrent(device {device_id}) failed: {err}")
            return _Previous(current)
        result = self.driver.cuCtxGetCurrent()
        if result[0] != self._success:
            self._check(result, "cuCtxGetCurrent")
        current = result[1]
        if _handle(current) == want:
            return None
        self._check(self.driver.cuCtxSetCurrent(self._contexts[device_id]), f"cuCtxSetCurrent(device {device_id})")
        return _Previous(current)

    def restore_device(self, previous: Any) -> None:
        if self._raw is not None and isinstance(previous.context, int):
            err = self._raw.set_current(previous.context or None)
            if err:
                raise CudaError(f"cuCtxSetCurrent(restore) failed: {err}")
            return
        self._check(self.driver.cuCtxSetCurrent(previous.context), "cuCtxSetCurrent(restore)")

    def load_module(self, image: bytes, device_id: int | None = None) -> Any:
        previous = self.set_device(self.device_id if device_id is None else device_id)
        try:
            module = self._check(self.driver.cuModuleLoadData(bytes(image)), "cuModuleLoadData")
        finally:
            if previous is not None:
                self.restore_device(previous)
        self._modules.append(module)
        return module

    def get_function(self, module: Any, name: str) -> Any:
        return self._check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def launch(
        self,
        function: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        kernargs: bytes,
        stream: int = 0,
        buffers: Sequence[BufferSpan] = (),
        shared_mem: int = 0,
    ) -> None:
        """Enqueue ``function`` with the packed ``kernargs`` (bytes laid out per the manifest) on the current
        context (the caller's, or one made current by :meth:`set_device`)."""
        self.launch_packed(function, grid, block, PackedKernargs(kernargs, CU_LAUNCH_PARAM_END), stream, shared_mem)

    def launch_packed(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      kernargs: PackedKernargs, stream: int = 0, shared_mem: int = 0,
                      buffers: Sequence[BufferSpan] = ()) -> None:
        if shared_mem > 0:  # static + dynamic above 48 KB needs the raised limit; set it for any dynamic use
            self._allow_dynamic_shared(function, int(shared_mem))
        raw = self._raw
        if raw is not None:
            err = raw.launch(_handle(function), grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem,
                             stream or None, None, kernargs.address)
            if err:
                self._check((self.driver.CUresult(err),), "cuLaunchKernel")
            return
        try:
            result = self.driver.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                                shared_mem, stream, 0, kernargs.address)
        except TypeError:  # bindings that take only CUstream objects for the stream
            result = self.driver.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                                shared_mem, self._stream(stream), 0, kernargs.address)
        if (result[0] if isinstance(result, tuple) else result) != self._success:
            self._check(result, "cuLaunchKernel")

    def _allow_dynamic_shared(self, function: Any, nbytes: int) -> None:
        """Raise the function's dynamic shared-memory limit (needed above 48 KB), once per function and size."""
        key = int(function) if hasattr(function, "__int__") else id(function)
        if self._dyn_shared.get(key, 0) >= nbytes:
            return
        attr = self.driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        self._check(self.driver.cuFuncSetAttribute(function, attr, nbytes), "cuFuncSetAttribute")
        self._dyn_shared[key] = nbytes

    def order_after(self, consumer_stream: int | None, producer_stream: int) -> None:
        if consumer_stream == -1 or consumer_stream == producer_stream:
            return  # the consumer asked for no synchronisation, or runs on our stream already
        consumer = 1 if consumer_stream is None else int(consumer_stream)  # 1 = CU_STREAM_LEGACY
        d = self.driver
        flags = d.CUevent_flags.CU_EVENT_DISABLE_TIMING
        event = self._check(d.cuEventCreate(flags), "cuEventCreate")
        try:
            self._check(d.cuEventRecord(event, self._stream(producer_stream)), "cuEventRecord")
            self._check(d.cuStreamWaitEvent(self._stream(consumer), event, 0), "cuStreamWaitEvent")
        finally:
            # Destroying an event whose wait is enqueued is allowed: the wait keeps its state.
            self._check(d.cuEventDestroy(event), "cuEventDestroy")

    def synchronize(self, stream: int = 0) -> None:
        self._check(self.driver.cuStreamSynchronize(self._stream(stream)), "cuStreamSynchronize")

    def alloc(self, nbytes: int, device_id: int | None = None) -> DeviceAllocation:
        previous = self.set_device(self.device_id if device_id is None else device_id)
        try:
            ptr = self._check(self.driver.cuMemAlloc(max(1, int(nbytes))), "cuMemAlloc")
        finally:
            if previous is not None:
                self.restore_device(previous)
        return DeviceAllocation(ptr=int(ptr), nbytes=int(nbytes), backend=self)

    def free(self, allocation: DeviceAllocation) -> None:
        self._check(self.driver.cuMemFree(self.driver.CUdeviceptr(allocation.ptr)), "cuMemFree")

    def copy_from_host(self, dst_ptr: int, src: Any) -> None:
        """cuMemcpyHtoD of a contiguous host array's bytes to device address ``dst_ptr`` (synchronous)."""
        _require_contiguous(src, "copy_from_host")
        if src.nbytes == 0:
            return
        self._make_current()
        self._check(self.driver.cuMemcpyHtoD(self.driver.CUdeviceptr(int(dst_ptr)), int(src.ctypes.data),
                                             int(src.nbytes)), "cuMemcpyHtoD")

    def copy_to_host(self, dst: Any, src_ptr: int) -> None:
        """cuMemcpyDtoH of ``dst.nbytes`` bytes from device address ``src_ptr`` into a contiguous host array."""
        _require_contiguous(dst, "copy_to_host")
        if not dst.flags.writeable:
            raise ValueError("copy_to_host: the destination array is read-only")
        if dst.nbytes == 0:
            return
        self._make_current()
        self._check(self.driver.cuMemcpyDtoH(int(dst.ctypes.data), self.driver.CUdeviceptr(int(src_ptr)),
                                             int(dst.nbytes)), "cuMemcpyDtoH")

    def device_count(self) -> int:
        """cuDeviceGetCount; 0 (never an exception) when the driver call fails."""
        return cuda_device_count(self.driver)

    def compute_units(self, device_id: int | None = None) -> int:
        dev = self._device(self.device_id if device_id is None else device_id)
        attr = self.driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        return int(self._check(self.driver.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))
