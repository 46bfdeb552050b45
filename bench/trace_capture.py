"""What the sm_90a trace diagnostics share (bench/tmaq_trace.py, bench/paged_trace.py): the device address of a trace
build's stamp array, and traced calls, each started after ~1 ms of GPU busy-wait with the array cleared first."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np


def stamp_buffer(be: Any, modules: Iterable[Any], name: bytes, nbytes: int) -> int:
    """The device address of ``__device__`` array ``name`` in the first of ``modules`` that holds it, its size
    checked against ``nbytes``."""
    for module in modules:
        err, ptr, size = be.driver.cuModuleGetGlobal(module, name)
        if int(err) == 0:
            assert int(size) == nbytes, (name, int(size), nbytes)
            return int(ptr)
    raise RuntimeError(f"no loaded module holds {name.decode()}: not a trace build?")


def traced_calls(be: Any, ptr: int, shape: tuple[int, int], launch: Callable[[int], Any],
                 calls: int) -> tuple[list[np.ndarray], list[float]]:
    """``calls`` traced launches (``launch(i)`` for i in range(calls)): per call the stamp array (int64 ``shape``, read
    back) and the call's event time in us. The array is zeroed and the GPU kept busy ~1 ms before each."""
    import torch

    nbytes = shape[0] * shape[1] * 8
    traces, events = [], []
    for call in range(calls):
        be.driver.cuMemsetD8(ptr, 0, nbytes)
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch(call)
        end.record()
        torch.cuda.synchronize()
        host = np.zeros(shape, dtype=np.int64)
        be.copy_to_host(host, ptr)
        traces.append(host)
        events.append(start.elapsed_time(end) * 1e3)
    return traces, events


def median_call(events: list[float]) -> int:
    """Index of the median call by event time."""
    return int(np.argsort(events)[len(events) // 2])
