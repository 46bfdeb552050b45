"""A DLPack producer of ROCm device arrays (device type 10), built on hip-python the way a ROCm framework
behaves: its memory comes from hipMalloc, its contents are written asynchronously on the producer's own
stream, and ``__dlpack__(stream=s)`` makes the consumer's stream ``s`` wait for that work with an event
(the DLPack stream handshake for ROCm: None/0 = the default stream, -1 = no synchronisation).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rawindexer import dlpack

DL_ROCM = 10


def check(result: Any, what: str) -> Any:
    """hip-python returns (hipError_t, value...): raise on error, return the value(s)."""
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


class RocmArray:
    """``host``'s contents in device memory, copied on ``stream`` (queued, not yet done when this returns).

    ``dtype`` is the DLPack dtype to announce (e.g. "float8_e4m3fn" for a uint8 host buffer).
    ``handshake=False`` makes a producer that ignores the consumer's stream: the negative control of the
    ordering tests. ``streams_seen`` records the stream argument of every ``__dlpack__`` call.
    """

    def __init__(self, host: np.ndarray, stream: int, *, dtype: str | None = None, handshake: bool = True) -> None:
        from hip import hip

        self.hip = hip
        self.shape = host.shape
        self.dtype = dtype or str(host.dtype)
        self.nbytes = host.nbytes
        self.stream = int(stream)
        self.handshake = handshake
        self.streams_seen: list[int | None] = []
        self.ptr = int(check(hip.hipMalloc(max(1, host.nbytes)), "hipMalloc"))
        self._staging = np.ascontiguousarray(host).copy()  # must outlive the queued copy
        check(hip.hipMemcpyAsync(self.ptr, self._staging.ctypes.data, host.nbytes,
                                 hip.hipMemcpyKind.hipMemcpyHostToDevice, self.stream or None), "hipMemcpyAsync")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DL_ROCM, 0)

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        self.streams_seen.append(stream)
        if self.handshake and stream != -1 and stream != self.stream:
            hip = self.hip
            event = check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming), "hipEventCreateWithFlags")
            check(hip.hipEventRecord(event, self.stream or None), "hipEventRecord")
            check(hip.hipStreamWaitEvent(stream or None, event, 0), "hipStreamWaitEvent")
            check(hip.hipEventDestroy(event), "hipEventDestroy")
        view = dlpack.DLPackArray(self.ptr, self.shape, self.dtype, (DL_ROCM, 0), owner=self)
        return view.__dlpack__(stream=stream, max_version=max_version)

    def to_host(self, stream: int | None = None) -> np.ndarray:
        """Synchronise ``stream`` (default: this array's) and copy the contents back."""
        hip = self.hip
        check(hip.hipStreamSynchronize((self.stream if stream is None else stream) or None), "hipStreamSynchronize")
        storage = np.empty(self.nbytes, np.uint8)
        check(hip.hipMemcpy(storage.ctypes.data, self.ptr, self.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost),
              "hipMemcpy")
        return storage

    def free(self) -> None:
        if self.ptr:
            check(self.hip.hipFree(self.ptr), "hipFree")
            self.ptr = 0
