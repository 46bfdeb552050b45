"""The C launcher's CPython extension (rawindexer/backends/csrc/cuda_launch_ext.c) on its own, against the fake
driver: what a bound launch sends, how it refuses bad arguments, how a driver failure surfaces, and that
threads launching through one bound launch each send their own pointers (it copies the record per call, no
lock). The launch-path tests run every route, this one included, through the public calls."""
from __future__ import annotations

import struct
import threading

import numpy as np
import pytest

from fake_cuda import install, use_raw_route
from rawindexer.backends import cuda as cuda_backend
from rawindexer.errors import CudaError

pytestmark = pytest.mark.skipif(cuda_backend._load_launch_extension() is None,
                                reason="launcher extension not built (no Python.h where `make` ran)")


@pytest.fixture
def bound(monkeypatch):
    """A bound launch of a 112-byte argument list (seven pointers first, then a tail of known bytes) on device 0
    of the fake, through the extension route."""
    drv = install(monkeypatch)
    use_raw_route(monkeypatch, drv, "ext")
    backend = cuda_backend.CudaBackend(0)
    assert backend._raw is not None and backend._raw.extension is not None
    rng = np.random.default_rng()
    tail = rng.integers(0, 256, 56, dtype=np.uint8).tobytes()
    kernargs = bytes(56) + tail
    go = backend.bind_launch(0x1234, 0, (8, 2, 1), (128, 1, 1), 0, kernargs, tuple(range(0, 56, 8)))
    return drv, go, tail, rng


def random_pointers(rng) -> list[int]:
    return [int(x) * 256 for x in rng.integers(1, 2**40, 7)]


def test_a_launch_sends_the_stream_pointers_and_the_argument_tail(bound):
    drv, go, tail, rng = bound
    pointers = random_pointers(rng)
    assert go(0x50001, *pointers) is None
    name, args, _, _ = drv.launches()[-1]
    assert args[1:3] == ((8, 2, 1), (128, 1, 1)) and args[4] == 0x50001
    assert args[7] == struct.pack("<7Q", *pointers) + tail


@pytest.mark.parametrize("bad, error", [(-1, OverflowError), (2**64, OverflowError), (1.5, TypeError),
                                        ("0x10", TypeError), (None, TypeError)])
def test_bad_integers_are_refused_before_the_driver(bound, bad, error):
    drv, go, _, rng = bound
    before = len(drv.launches())
    pointers = random_pointers(rng)
    with pytest.raises(error):
        go(0x50001, *pointers[:3], bad, *pointers[4:])
    with pytest.raises(error):
        go(bad, *pointers)
    assert len(drv.launches()) == before


def test_the_argument_count_is_checked(bound):
    drv, go, _, rng = bound
    with pytest.raises(TypeError, match="expected a stream and 7 pointers, got 7 arguments"):
        go(0x50001, *random_pointers(rng)[:6])
    with pytest.raises(TypeError, match="got 9 arguments"):
        go(0x50001, *random_pointers(rng), 0)


def test_a_driver_failure_names_the_call_and_device(bound):
    drv, go, _, rng = bound
    drv.fail = "cuLaunchKernel"
    with pytest.raises(CudaError, match="cuLaunchKernel"):
        go(0x50001, *random_pointers(rng))


def test_threads_sharing_one_bound_launch_send_their_own_pointers(bound):
    drv, go, tail, rng = bound
    per_thread = [[random_pointers(rng) for _ in range(50)] for _ in range(4)]

    def work(calls):
        for pointers in calls:
            go(0x50001, *pointers)

    before = len(drv.launches())
    threads = [threading.Thread(target=work, args=(calls,)) for calls in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sent = sorted(call[1][7] for call in drv.launches()[before:])
    expected = sorted(struct.pack("<7Q", *p) + tail for calls in per_thread for p in calls)
    assert sent == expected


def test_argument_lists_past_the_extensions_bounds_take_the_ctypes_launcher(monkeypatch):
    """The bounds bind() takes come from the build (MAX_KERNARG_BYTES); a longer argument list is launched by the
    ctypes-called launcher instead, with the same bytes."""
    drv = install(monkeypatch)
    use_raw_route(monkeypatch, drv, "ext")
    backend = cuda_backend.CudaBackend(0)
    extension = backend._raw.extension
    rng = np.random.default_rng()
    for size, by_extension in ((extension.MAX_KERNARG_BYTES, True), (extension.MAX_KERNARG_BYTES + 8, False)):
        tail = rng.integers(0, 256, size - 56, dtype=np.uint8).tobytes()
        go = backend.bind_launch(0x1234, 0, (8, 1, 1), (128, 1, 1), 0, bytes(56) + tail, tuple(range(0, 56, 8)))
        assert (type(go).__name__ == "builtin_function_or_method") == by_extension
        pointers = random_pointers(rng)
        go(0x50001, *pointers)
        assert drv.launches()[-1][1][7] == struct.pack("<7Q", *pointers) + tail
