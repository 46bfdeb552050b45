"""ROCm backend: hipModuleLoadData / hipModuleLaunchKernel through hip-python (pinned to ROCm 7.x).

hip-python is imported on first use, so the package imports (and the emulator runs) without it.
Calls return tuples (hipError_t, value...); every one is checked.
"""
from __future__ import annotations

from typing import Any, Sequence

from .base import BufferSpan, DeviceAllocation, DriverBackend, PackedKernargs
from ..errors import HipError, HipUnavailable  # noqa: F401  (re-exported: raised here)

# HIP ends the packed-argument form of `extra` with 3 (CUDA with 0)
HIP_LAUNCH_PARAM_END = 3


#: what to do, the same wherever the hip backend turns out to be unusable
_INSTALL_HINT = ("install ROCm 7.x's HIP runtime (AMD's 'rocm-hip-runtime' package, see "
                 "https://rocm.docs.amd.com/projects/install-on-linux/) so that libamdhip64.so is found "
                 "(ldconfig, or LD_LIBRARY_PATH=/opt/rocm/lib); without an AMD GPU, run on the gfx950 emulator "
                 "instead (CPU arrays, or device='emulator')")


def _load_hip() -> Any:
    """hip-python's ``hip`` module with the ROCm runtime behind it loaded.

    hip-python imports without ROCm and dlopens libamdhip64.so at its first HIP call, where a missing
    runtime surfaces as a bare RuntimeError("failed to dlopen ..."); one call here turns that into
    HipUnavailable saying what to install, before any of rawindexer's calls is made."""
    try:
        from hip import hip  # type: ignore
    except ImportError as exc:
        from ..runtime_versions import hip_python_advice, rocm_version

        raise HipUnavailable(f"the hip backend needs the hip-python of your ROCm: {hip_python_advice(rocm_version())} "
                             f"(import failed: {exc})") from exc
    try:
        hip.hipGetDeviceCount()  # the first call loads the runtime; its answer is read where it matters
    except RuntimeError as exc:
        if "dlopen" not in str(exc):
            raise
        raise HipUnavailable(f"the hip backend needs the ROCm HIP runtime, which hip-python could not load "
                             f"({exc}): {_INSTALL_HINT}") from None
    return hip


class HipBackend(DriverBackend):
    name = "hip"
    dlpack_device_type = 10
    arch = "gfx950"
    kernarg_end_marker = HIP_LAUNCH_PARAM_END

    #: the gfx targets whose code objects the package ships (the kernels' build targets)
    shipped_archs = ("gfx950", "gfx942")

    def __init__(self, hip_module: Any = None) -> None:
        self._hip = hip_module  # injectable for tests (a fake of hip-python's `hip` module)
        self._archs: dict[int, str] = {}

    @property
    def hip(self) -> Any:
        """hip-python's ``hip`` module, its runtime loaded (HipUnavailable when either is missing)."""
        if self._hip is None:
            self._hip = _load_hip()
        return self._hip

    def _check(self, result: Any, what: str) -> Any:
        """hip-python returns (err,) or (err, value, ...): raise on error, return the value(s)."""
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != int(self.hip.hipError_t.hipSuccess):
            msg = self.hip.hipGetErrorString(err)
            if isinstance(msg, tuple):  # hip-python 7.2 returns (hipError_t, CStr), not a bare string
                msg = msg[-1]
            msg = str(msg)
            raise HipError(f"{what} failed: {msg!r} ({err!r})")
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def set_device(self, device_id: int) -> Any:
        """hipSetDevice(device_id) unless it is current already; returns the previous device to restore."""
        current = self._check(self.hip.hipGetDevice(), "hipGetDevice")
        if int(current) == device_id:
            return None
        self._check(self.hip.hipSetDevice(device_id), f"hipSetDevice({device_id})")
        return int(current)

    def restore_device(self, previous: Any) -> None:
        self._check(self.hip.hipSetDevice(previous), f"hipSetDevice({previous})")

    def load_module(self, image: bytes, device_id: int = 0) -> Any:
        with self.on_device(device_id):  # a HIP module belongs to the device current at load time
            return self._check(self.hip.hipModuleLoadData(image), "hipModuleLoadData")

    def get_function(self, module: Any, name: str) -> Any:
        return self._check(self.hip.hipModuleGetFunction(module, name.encode()), f"hipModuleGetFunction({name})")

    def launch_packed(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      kernargs: PackedKernargs, stream: int = 0, shared_mem: int = 0,
                      buffers: Sequence[BufferSpan] = ()) -> None:
        self._check(
            self.hip.hipModuleLaunchKernel(function, *grid, *block, shared_mem, stream or None, None, kernargs.address),
            "hipModuleLaunchKernel")

    def order_after(self, consumer_stream: int | None, producer_stream: int) -> None:
        if consumer_stream == -1 or consumer_stream == producer_stream:
            return
        consumer = int(consumer_stream or 0)  # ROCm: None/0 = the default stream
        hip = self.hip
        event = self._check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming), "hipEventCreateWithFlags")
        try:
            self._check(hip.hipEventRecord(event, producer_stream or None), "hipEventRecord")
            self._check(hip.hipStreamWaitEvent(consumer or None, event, 0), "hipStreamWaitEvent")
        finally:
            self._check(hip.hipEventDestroy(event), "hipEventDestroy")

    def synchronize(self, stream: int = 0) -> None:
        self._check(self.hip.hipStreamSynchronize(stream or None), "hipStreamSynchronize")

    def alloc(self, nbytes: int, device_id: int = 0) -> DeviceAllocation:
        with self.on_device(device_id):
            ptr = self._check(self.hip.hipMalloc(max(1, nbytes)), f"hipMalloc({nbytes})")
        return DeviceAllocation(int(ptr), nbytes, self)

    def free(self, allocation: DeviceAllocation) -> None:
        self._check(self.hip.hipFree(allocation.ptr), "hipFree")

    def copy_from_host(self, dst_ptr: int, src) -> None:
        kind = self.hip.hipMemcpyKind.hipMemcpyHostToDevice
        self._check(self.hip.hipMemcpy(dst_ptr, src.ctypes.data, src.nbytes, kind), "hipMemcpy(HostToDevice)")

    def copy_to_host(self, dst, src_ptr: int) -> None:
        kind = self.hip.hipMemcpyKind.hipMemcpyDeviceToHost
        self._check(self.hip.hipMemcpy(dst.ctypes.data, src_ptr, dst.nbytes, kind), "hipMemcpy(DeviceToHost)")

    def device_count(self) -> int:
        """ROCm devices visible to this process; 0 (never an exception) without hip-python or ROCm."""
        try:
            hip = self.hip
        except HipUnavailable:
            return 0
        result = hip.hipGetDeviceCount()
        # The runtime answers "no device" with hipErrorNoDevice (count 0), not with success and 0.
        if int(result[0]) == int(hip.hipError_t.hipErrorNoDevice):
            return 0
        return int(self._check(result, "hipGetDeviceCount"))

    def arch_of(self, device_id: int) -> str:
        """The device's gfx target from hipGetDeviceProperties' gcnArchName ("gfx942:sramecc+:xnack-" ->
        "gfx942"), once per device; a HipError naming the device and the shipped targets when it is neither."""
        arch = self._archs.get(device_id)
        if arch is None:
            props = self.hip.hipDeviceProp_t()
            self._check(self.hip.hipGetDeviceProperties(props, device_id), f"hipGetDeviceProperties({device_id})")
            name = props.gcnArchName
            name = bytes(name).split(b"\0")[0].decode() if not isinstance(name, str) else name
            arch = name.split(":")[0]
            if arch not in self.shipped_archs:
                raise HipError(f"ROCm device {device_id} is {name or 'of an unnamed target'}: rawindexer ships kernels "
                               f"for {' and '.join(self.shipped_archs)} only (MI350X / MI355X, MI300X / MI325X)")
            self._archs[device_id] = arch
        return arch

    def forget_devices(self) -> None:
        self._archs.clear()

    def compute_units(self, device_id: int = 0) -> int:
        attr = self.hip.hipDeviceAttribute_t.hipDeviceAttributeMultiprocessorCount
        return int(self._check(self.hip.hipDeviceGetAttribute(attr, device_id), "hipDeviceGetAttribute"))
