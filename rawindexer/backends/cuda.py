"""CUDA runtime backend through the driver API of ``cuda-bindings`` (``cuda.bindings.driver``) only.

Loads the sm_90a cubin with cuModuleLoadData, launches with cuLaunchKernel and hands the packed kernarg
buffer over through ``extra`` (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END), so the same packer
(:func:`rawindexer.dispatch.base.pack_kernargs`) serves every backend. Works in the device's primary
context, the one PyTorch, CuPy and JAX use, so their pointers and streams are valid here.
"""
from __future__ import annotations

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


class CudaBackend(Backend):
    """Backend for NVIDIA sm_90a through cuda.bindings.driver. ``device_id`` is the CUDA ordinal."""

    name = "cuda"
    dlpack_device_type = 2  # kDLCUDA
    arch = "sm_90a"

    def __init__(self, device_id: int = 0) -> None:
        self.driver = _driver()
        self.device_id = device_id
        self._check(self.driver.cuInit(0), "cuInit")
        self.device = self._check(self.driver.cuDeviceGet(device_id), "cuDeviceGet")
        self.context = self._check(self.driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._make_current()
        self._modules: list[Any] = []  # keep loaded modules alive as long as the backend
        self._dyn_shared: dict[int, int] = {}  # function -> dynamic shared-memory limit already set

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

    def _make_current(self) -> None:
        self._check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def _stream(self, stream: int) -> Any:
        return self.driver.CUstream(int(stream))

    # -- Backend ------------------------------------------------------------------------------------
    def load_module(self, image: bytes) -> Any:
        self._make_current()
        module = self._check(self.driver.cuModuleLoadData(bytes(image)), "cuModuleLoadData")
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
        """Enqueue ``function`` with the packed ``kernargs`` (bytes laid out per the manifest)."""
        if shared_mem > 0:  # static + dynamic above 48 KB needs the raised limit; set it for any dynamic use
            self._allow_dynamic_shared(function, int(shared_mem))
        extra = PackedKernargs(kernargs, CU_LAUNCH_PARAM_END)
        self._check(
            self.driver.cuLaunchKernel(function, *map(int, grid), *map(int, block), int(shared_mem),
                                       self._stream(stream), 0, extra.address),
            "cuLaunchKernel",
        )

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

    def alloc(self, nbytes: int) -> DeviceAllocation:
        self._make_current()
        ptr = self._check(self.driver.cuMemAlloc(max(1, int(nbytes))), "cuMemAlloc")
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
        dev = self.device if device_id is None or device_id == self.device_id else \
            self._check(self.driver.cuDeviceGet(device_id), "cuDeviceGet")
        attr = self.driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        return int(self._check(self.driver.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))
