"""CUDA runtime backend through the driver API of ``cuda-bindings`` (``cuda.bindings.driver``) only.

Loads the sm_90a cubin with cuModuleLoadData, launches with cuLaunchKernel and hands the packed kernarg
buffer over through ``extra`` (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END), so the same packer
(:func:`rawindexer.dispatch.base.pack_kernargs`) serves every backend. Works in the device's primary
context, the one PyTorch, CuPy and JAX use, so their pointers and streams are valid here.
"""
from __future__ import annotations

import ctypes
import functools
import os
import struct
import threading
from typing import Any, Callable, Sequence

from .base import BufferSpan, DeviceAllocation, DriverBackend, PackedKernargs, pointer_writer
from ..errors import CudaError  # noqa: F401  (re-exported: raised here)

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


#: the C launcher (rawindexer/backends/csrc/cuda_launch.c), built by `make` into the kernel directory
SHIM_NAME = "libri_cuda_launch.so"
#: the same launcher as a CPython extension (csrc/cuda_launch_ext.c, stable ABI 3.10+), built where Python.h exists
EXTENSION_NAME = "_ri_cuda_launch.abi3.so"
#: its record: launch, get_current, set_current, context, function, grid_xy, grid_z|block_x, block_yz, shared_mem,
#: extra, then the per-call stream directly followed by the kernel arguments
_RECORD = struct.Struct("<11Q")
_STREAM_OFFSET = 80
#: which driver call failed, in bits 16.. of the launcher's result
_SHIM_STAGES = {1: "cuCtxGetCurrent", 2: "cuCtxSetCurrent", 3: "cuLaunchKernel", 4: "cuCtxSetCurrent(restore)"}


_SHIM_LIBS: list = []


def _load_shim(path: str | None = None) -> Any:
    """The C launcher's entry point (restype int, one record argument), or None when it is not built."""
    if path is None:
        from ..kernel_files import kernel_dir

        path = str(kernel_dir() / SHIM_NAME)
    if not os.path.exists(path):
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    size = lib.ri_cuda_launch_record_size
    size.restype = ctypes.c_int
    if size() != _RECORD.size:
        return None  # built from another layout: never guess
    call = lib["ri_cuda_launch"]
    call.restype = ctypes.c_int
    _SHIM_LIBS.append(lib)  # loaded for the life of the process
    return call


def _load_launch_extension(path: str | None = None) -> Any:
    """The C launcher's extension module (``bind(record, kernarg_bytes, pointers, fail, keep) -> go``), or None
    when it is not built, does not load here (another machine or interpreter), or was built for another record."""
    if path is None:
        from ..kernel_files import kernel_dir

        path = str(kernel_dir() / EXTENSION_NAME)
    if not os.path.exists(path):
        return None
    import importlib.machinery
    import importlib.util

    try:
        loader = importlib.machinery.ExtensionFileLoader("_ri_cuda_launch", path)
        spec = importlib.util.spec_from_file_location("_ri_cuda_launch", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError):
        return None
    return module if module.record_size() == _RECORD.size else None


class _RawDriver:
    """The three driver entry points of the per-call path (cuCtxGetCurrent, cuCtxSetCurrent, cuLaunchKernel)
    called without cuda-bindings' per-call Python objects, on libcuda, the library cuda-bindings itself loads
    (same handles, same contexts). Two routes: the C launcher (one foreign call per launch: the record holds the
    entry points' addresses), else ctypes with arguments converted once per stream. ``lib``: anything with those
    three ctypes function pointers as attributes (libcuda; the tests' fakes). Everything else stays on
    cuda-bindings. ``RAWINDEXER_CUDA_LAUNCH=bindings`` keeps the hot path on cuda-bindings, ``=ctypes`` skips the
    C launcher. ``extension``: the C launcher's CPython extension, preferred over ``shim`` where it loads
    (``RAWINDEXER_CUDA_LAUNCH=shim`` keeps the ctypes-called launcher)."""

    def __init__(self, lib: Any = "libcuda.so.1", shim: Any = None, extension: Any = None) -> None:
        if isinstance(lib, str):
            lib = ctypes.CDLL(lib)
        self.lib = lib
        self.addresses = tuple(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                               for name in ("cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent"))
        int_ = ctypes.c_int
        proto = ctypes.CFUNCTYPE
        # argument-less prototypes: the ctypes route hands over ctypes objects built once (no per-call conversion)
        self.launch = proto(int_)(self.addresses[0])
        self.get_current = proto(int_)(self.addresses[1])
        self.set_current = proto(int_)(self.addresses[2])
        self.shim = shim
        self.extension = extension


def _raw_driver(driver: Any) -> _RawDriver | None:
    """ctypes access to libcuda when it loads and the bindings are the real ones (never with a fake driver)."""
    route = os.environ.get("RAWINDEXER_CUDA_LAUNCH", "")
    if route == "bindings" or not type(driver).__name__ == "module" or not getattr(driver, "__file__", None):
        return None
    try:
        return _RawDriver("libcuda.so.1", None if route == "ctypes" else _load_shim(),
                          None if route in ("ctypes", "shim") else _load_launch_extension())
    except (OSError, AttributeError):
        return None


class _Previous:
    """The context current before :meth:`CudaBackend.set_device` switched (possibly NULL: a fresh thread)."""

    __slots__ = ("context",)

    def __init__(self, context: Any) -> None:
        self.context = context


class CudaBackend(DriverBackend):
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

    def _result(self, code: int) -> Any:
        """A raw CUresult code as the bindings' enum (for _check's error names); the int where that fails."""
        try:
            return self.driver.CUresult(code)
        except (TypeError, ValueError):
            return code

    def _stream(self, stream: int) -> Any:
        return self.driver.CUstream(int(stream))

    # -- Backend ------------------------------------------------------------------------------------
    def set_device(self, device_id: int) -> Any:
        want = self._context_ids.get(device_id)
        if want is None:
            self._context(device_id)
            want = self._context_ids[device_id]
        result = self.driver.cuCtxGetCurrent()
        if result[0] != self._success:
            self._check(result, "cuCtxGetCurrent")
        current = result[1]
        if _handle(current) == want:
            return None
        self._check(self.driver.cuCtxSetCurrent(self._contexts[device_id]), f"cuCtxSetCurrent(device {device_id})")
        return _Previous(current)

    def restore_device(self, previous: Any) -> None:
        self._check(self.driver.cuCtxSetCurrent(previous.context), "cuCtxSetCurrent(restore)")

    def load_module(self, image: bytes, device_id: int | None = None) -> Any:
        with self.on_device(self.device_id if device_id is None else device_id):
            module = self._check(self.driver.cuModuleLoadData(bytes(image)), "cuModuleLoadData")
        self._modules.append(module)
        return module

    def get_function(self, module: Any, name: str) -> Any:
        return self._check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def launch_packed(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      kernargs: PackedKernargs, stream: int = 0, shared_mem: int = 0,
                      buffers: Sequence[BufferSpan] = ()) -> None:
        if shared_mem > 0:  # static + dynamic above 48 KB needs the raised limit; set it for any dynamic use
            self._allow_dynamic_shared(function, int(shared_mem))
        try:
            result = self.driver.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                                shared_mem, stream, 0, kernargs.address)
        except TypeError:  # bindings that take only CUstream objects for the stream
            result = self.driver.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                                shared_mem, self._stream(stream), 0, kernargs.address)
        if (result[0] if isinstance(result, tuple) else result) != self._success:
            self._check(result, "cuLaunchKernel")

    def bind_launch(self, function: Any, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                    shared_mem: int, kernargs: bytes, pointer_offsets: tuple[int, ...],
                    spans_of: Any = None) -> Callable[..., None]:
        """The per-call launch of a prepared kernel (see :meth:`Backend.bind_launch`). On libcuda: the C launcher
        when built (one foreign call: context check and switch, launch, restore), else ctypes with every argument
        but the stream converted here, once; with cuda-bindings alone (or a fake driver) the generic route."""
        # static + dynamic above 48 KB needs the raised limit: set once per function and size (binding runs again
        # for each new K / Q pointer of the tensor-map designs, so the check comes before any context switch)
        if shared_mem > 0 and self._dyn_shared.get(self._function_key(function), 0) < shared_mem:
            with self.on_device(device_id):
                self._allow_dynamic_shared(function, int(shared_mem))
        raw = self._raw
        if raw is None:
            return super().bind_launch(function, device_id, grid, block, shared_mem, kernargs, pointer_offsets)
        self._context(device_id)
        context = self._context_ids[device_id]
        handle = _handle(function)
        if raw.shim is not None or raw.extension is not None:
            return self._bind_shim(raw, context, handle, grid, block, shared_mem, kernargs, pointer_offsets, device_id)
        return self._bind_ctypes(raw, context, handle, grid, block, shared_mem, kernargs, pointer_offsets, device_id)

    def _bind_shim(self, raw: _RawDriver, context: int, handle: int, grid: tuple[int, int, int],
                   block: tuple[int, int, int], shared_mem: int, kernargs: bytes, pointer_offsets: tuple[int, ...],
                   device_id: int) -> Callable[..., None]:
        header = _RECORD.size  # the kernel arguments follow the record's stream slot
        record = ctypes.create_string_buffer(header + len(kernargs))
        base = ctypes.addressof(record)
        ctypes.memmove(base + header, bytes(kernargs), len(kernargs))
        size = ctypes.c_size_t(len(kernargs))
        extra = (ctypes.c_void_p * 5)(1, base + header, 2, ctypes.addressof(size), CU_LAUNCH_PARAM_END)
        _RECORD.pack_into(record, 0, *raw.addresses, context, handle, grid[0] | grid[1] << 32,
                          grid[2] | block[0] << 32, block[1] | block[2] << 32, shared_mem, ctypes.addressof(extra), 0)
        keep = (record, size, extra)  # what the record points at, alive as long as go
        ext = raw.extension
        if (ext is not None and tuple(pointer_offsets) == tuple(range(0, 8 * len(pointer_offsets), 8))
                and len(kernargs) <= ext.MAX_KERNARG_BYTES and len(pointer_offsets) <= ext.MAX_POINTERS):
            # the extension copies the record per call (no lock) and reads the integers itself (no pack_into)
            return ext.bind(base, len(kernargs), len(pointer_offsets),
                            functools.partial(self._shim_error, device_id=device_id), keep)
        if raw.shim is None:  # an extension-only build with a layout the extension does not take
            return self._bind_ctypes(raw, context, handle, grid, block, shared_mem, kernargs, pointer_offsets,
                                     device_id)
        lock, fail = threading.Lock(), self._shim_error
        acquire, release = lock.acquire, lock.release
        # CFUNCTYPE: the GIL is released for the driver's work, as torch's own launches do, so a thread per GPU
        # overlaps its Python with another's launch (keeping it, PYFUNCTYPE, saves only ~50 ns)
        call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.cast(raw.shim, ctypes.c_void_p).value)
        record_arg = ctypes.c_void_p(base)
        keep = (*keep, raw.shim)
        if tuple(pointer_offsets) == tuple(range(0, 56, 8)):
            # prefill's layout: stream and the seven pointers are one run of 8-byte slots
            pack = struct.Struct(f"<{1 + len(pointer_offsets)}Q").pack_into

            def go(stream: int, q: int, k: int, kv_scale: int, weights: int, ks: int, ke: int, out: int,
                   _keep: Any = keep) -> None:
                acquire()
                try:
                    pack(record, _STREAM_OFFSET, stream, q, k, kv_scale, weights, ks, ke, out)
                    err = call(record_arg)
                finally:
                    release()
                if err:
                    fail(err, device_id)
            return go

        if tuple(pointer_offsets) == tuple(range(0, 8 * len(pointer_offsets), 8)):
            # another op's pointers first (decode: six): still one run with the stream slot
            pack_run = struct.Struct(f"<{1 + len(pointer_offsets)}Q").pack_into

            def go_run(stream: int, *pointers: int, _keep: Any = keep) -> None:
                acquire()
                try:
                    pack_run(record, _STREAM_OFFSET, stream, *pointers)
                    err = call(record_arg)
                finally:
                    release()
                if err:
                    fail(err, device_id)
            return go_run

        write, offset = pointer_writer(pointer_offsets, header)
        pack_stream = struct.Struct("<Q").pack_into

        def go_general(stream: int, *pointers: int, _keep: Any = keep) -> None:
            acquire()
            try:
                write(record, offset, *pointers)
                pack_stream(record, _STREAM_OFFSET, stream)
                err = call(record_arg)
            finally:
                release()
            if err:
                fail(err, device_id)
        return go_general

    def _shim_error(self, err: int, device_id: int) -> None:
        stage, code = _SHIM_STAGES.get(err >> 16, "the C launcher"), err & 0xFFFF
        self._check((self._result(code),), stage)
        raise CudaError(f"{stage} failed: {code} (device {device_id})")

    def _bind_ctypes(self, raw: _RawDriver, context: int, handle: int, grid: tuple[int, int, int],
                     block: tuple[int, int, int], shared_mem: int, kernargs: bytes, pointer_offsets: tuple[int, ...],
                     device_id: int) -> Callable[..., None]:
        packed = self.kernarg_buffer(kernargs)
        write, offset = pointer_writer(pointer_offsets)
        buffer, lock = packed.buffer, threading.Lock()
        u = ctypes.c_uint
        head = (ctypes.c_void_p(handle), u(grid[0]), u(grid[1]), u(grid[2]), u(block[0]), u(block[1]), u(block[2]),
                u(shared_mem))
        tail = (None, ctypes.c_void_p(packed.address))
        by_stream: dict[int, tuple] = {}
        current = ctypes.c_void_p()  # cuCtxGetCurrent's out-parameter; used under the lock
        current_ref, context_arg = ctypes.byref(current), ctypes.c_void_p(context)
        launch, get_current, set_current, check = raw.launch, raw.get_current, raw.set_current, self._check
        driver_error = self._result

        def go(stream: int, *pointers: int, _keep: Any = packed) -> None:
            args = by_stream.get(stream)
            if args is None:
                if isinstance(stream, bool) or not isinstance(stream, int) or not 0 <= stream < 2**64:
                    raise TypeError(f"stream: expected an int stream handle in [0, 2**64), got "
                                    f"{type(stream).__name__} {stream!r}")
                if len(by_stream) > 64:
                    by_stream.clear()
                args = by_stream[stream] = (*head, ctypes.c_void_p(stream or None), *tail)
            with lock:
                write(buffer, offset, *pointers)
                err = get_current(current_ref)
                if err:
                    check((driver_error(err),), "cuCtxGetCurrent")
                previous = current.value
                if previous == context:
                    err = launch(*args)
                else:
                    err = set_current(context_arg)
                    if err:
                        check((driver_error(err),), "cuCtxSetCurrent")
                    try:
                        err = launch(*args)
                    finally:
                        restored = set_current(ctypes.c_void_p(previous))
                    if restored and not err:
                        check((driver_error(restored),), "cuCtxSetCurrent(restore)")
            if err:
                check((driver_error(err),), "cuLaunchKernel")
        return go

    @staticmethod
    def _function_key(function: Any) -> int:
        return int(function) if hasattr(function, "__int__") else id(function)

    def _allow_dynamic_shared(self, function: Any, nbytes: int) -> None:
        """Raise the function's dynamic shared-memory limit (needed above 48 KB), once per function and size."""
        key = self._function_key(function)
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
        with self.on_device(self.device_id if device_id is None else device_id):
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
        dev = self._device(self.device_id if device_id is None else device_id)
        attr = self.driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        return int(self._check(self.driver.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))
