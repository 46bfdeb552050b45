"""The pytest fixtures and the device-memory read every test module on the HIP stand-in uses (prefill:
tests/runtime/test_hip_standin.py, decode: tests/paged/test_paged_hip_standin.py). Import them into the module
after its hip-python skip check: they need hip-python."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hip import hip

import rawindexer.api as api
from rawindexer.backends import get_backend

from . import runtime
from .producer import check


@pytest.fixture(scope="module")
def standin():
    runtime.build()  # `make hip-standin`: rebuilds a stale library, a no-op otherwise
    return runtime.install()


@pytest.fixture
def hipb(standin):
    """The process-wide hip backend, with rawindexer's cached hip state (modules, Indexers, device targets; both
    ops) dropped around the test (a test that changes the device's target must see hipModuleLoadData called)."""
    api.reset_caches("hip")
    yield get_backend("hip")
    api.reset_caches("hip")
    standin.configure()


@pytest.fixture
def streams(standin):
    """Two fresh streams (producer, consumer), destroyed afterwards."""
    made = [int(check(hip.hipStreamCreate(), "hipStreamCreate")) for _ in range(2)]
    yield made
    for s in made:
        check(hip.hipStreamDestroy(s), "hipStreamDestroy")


def peek(ptr: int, shape: tuple, dtype=np.float32) -> np.ndarray:
    """Device memory read without synchronising anything (the stand-in's device memory is host memory)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer(ctypes.string_at(ptr, n), dtype).reshape(shape).copy()
