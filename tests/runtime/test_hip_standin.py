"""The hip backend end to end through the real hip-python wheel, on the HIP stand-in (tests/hip_standin/):
a C libamdhip64.so that validates calls like the ROCm runtime, queues work on in-order streams run at
synchronisation, and executes launches on the gfx950 emulator with memcheck.

Covered: fp8_mqa_logits and the prepared Indexer on ROCm producer arrays, Indexer.launch_pointers and
launch() with raw pointers, the out=None result as a DLPack exporter of the device buffer, run.py, and the
errors a ROCm user meets (no device, no runtime at all, wrong target, out of memory, rejected launch, fault).

What this proves: rawindexer's calls survive hip-python's real Cython layer (argument conversion,
`extra` and its END=3 marker, stream/event handles, None vs 0, bytes images, return tuples, error
enums); results are bitwise those of the emulator backend; the DLPack handshake for ROCm orders work
across streams. What it does not: the ROCm runtime, the driver and the hardware.
"""
import ctypes
import subprocess
import sys

import numpy as np
import pytest

try:
    from hip import hip
except ImportError as exc:  # pragma: no cover - CI installs hip-python
    pytest.skip(f"hip-python is not importable ({exc}): the hip path through the real wheel needs "
                f"pip install 'hip-python~=7.2'", allow_module_level=True)

import rawindexer
import rawindexer.api as api
from hip_standin import runtime
from hip_standin.fixtures import hipb, peek, standin, streams  # noqa: F401 -- pytest fixtures
from hip_standin.producer import RocmArray, check
from rawindexer import dlpack
from rawindexer.backends import get_backend
from rawindexer.backends.hip import HipError
from rawindexer.fp8 import random_e4m3fn
from rawindexer.testing.grading import grade
from rawindexer.testing.reference import fp8_mqa_logits_ref
from rawindexer.testing.windows import make_windows

ROOT = runtime.ROOT
OPERANDS = ["q_fp8", "k_fp8", "kv_scale", "weights", "cu_seqlen_ks", "cu_seqlen_ke"]


def inputs(rng, M, N, H, D, mode):
    ks, ke = make_windows(mode, M, N, rng)
    return dict(q_fp8=random_e4m3fn(rng, (M, H, D)), k_fp8=random_e4m3fn(rng, (N, D)),
                kv_scale=rng.uniform(0.0, 2.0, N).astype(np.float32),
                weights=(rng.standard_normal((M, H)) * H**-0.5).astype(np.float32),
                cu_seqlen_ks=ks, cu_seqlen_ke=ke)


def emulator_result(ops, clean, **tunables):
    out = np.full((ops["q_fp8"].shape[0], ops["k_fp8"].shape[0]), np.nan, np.float32)  # poisoned
    rawindexer.fp8_mqa_logits(**ops, clean_logits=clean, out=out, **tunables)
    return out


def producers(ops, stream, handshake=True):
    fp8 = {"q_fp8", "k_fp8"}
    return {n: RocmArray(a, stream, dtype="float8_e4m3fn" if n in fp8 else None, handshake=handshake)
            for n, a in ops.items()}


# ---- the stand-in speaks hip-python's numbering ---------------------------------------------------
def test_error_codes_and_attributes_match_hip_python(standin, hipb):
    named = 0
    for code in range(1000):
        name = standin.error_name(code)
        if code == 999 or name != "hipErrorUnknown":
            assert hip.hipError_t(code).name == name, f"stand-in code {code} is {name}"
            named += 1
    assert named >= 15
    attrs = hip.hipDeviceAttribute_t
    get = lambda a: check(hip.hipDeviceGetAttribute(a, 0), "hipDeviceGetAttribute")  # noqa: E731
    assert get(attrs.hipDeviceAttributeWarpSize) == 64
    assert get(attrs.hipDeviceAttributeMaxThreadsPerBlock) == 1024
    assert hipb.compute_units(0) == 256
    with standin.configured(compute_units=80):
        assert hipb.compute_units(0) == 80
    assert hipb.device_count() == 1


# ---- results: bitwise the emulator backend's -------------------------------------------------------
SMALL_CASES = [(1, 1, 32, 128, "causal", True), (1, 113, 64, 64, "misaligned", False),
               (17, 76, 32, 128, "multi_req", True), (17, 76, 128, 64, "empty", False),
               (12, 96, 64, 128, "cp", True)]
SLOW_CASES = [(61, 1024, 32, 128, "past_end", True), (128, 64, 64, 128, "causal", False),
              (128, 1024, 32, 128, "multi_req", True), (64, 2048, 32, 128, "misaligned", False)]


def run_through_dlpack(rng, standin, streams, M, N, H, D, mode, clean, **tunables):
    producer_stream, consumer_stream = streams
    ops = inputs(rng, M, N, H, D, mode)
    expected = emulator_result(ops, clean, **tunables)
    arrays = producers(ops, producer_stream)
    out = RocmArray(np.full((M, N), np.nan, np.float32), producer_stream)  # poisoned
    ran = standin.launches_run
    result = rawindexer.fp8_mqa_logits(*arrays.values(), clean_logits=clean, out=out, stream=consumer_stream,
                                       **tunables)
    assert result is out
    for name, a in {**arrays, "out": out}.items():
        assert a.streams_seen == [consumer_stream], f"{name}: DLPack stream argument"
    # Queued, not run: the consumer stream holds the waits and the launch; the copies are still pending.
    assert standin.launches_run == ran and standin.pending(consumer_stream) >= 2
    assert standin.pending(producer_stream) > 0
    check(hip.hipStreamSynchronize(consumer_stream), "hipStreamSynchronize")
    assert standin.launches_run == ran + 1
    got = peek(out.ptr, (M, N))
    assert got.tobytes() == expected.tobytes(), f"({M}, {N}, {H}, {D}, {mode}, {clean}): not bitwise equal"
    ref = fp8_mqa_logits_ref(*ops.values(), clean, dtype=np.float64)
    assert grade(got, ref, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], clean).ok
    for a in (*arrays.values(), out):
        a.free()


@pytest.mark.parametrize("M,N,H,D,mode,clean", SMALL_CASES)
def test_dlpack_rocm_arrays_bitwise_equal_to_emulator(rng, standin, hipb, streams, M, N, H, D, mode, clean):
    run_through_dlpack(rng, standin, streams, M, N, H, D, mode, clean)


@pytest.mark.parametrize("tunables", [dict(variant="seed", unroll2=True), dict(variant="mr", block_m=2, split_n=3),
                                      dict(variant="mrp", num_warps=4, reverse_rows=True)])
def test_kernel_designs_and_tunables_bitwise_equal_to_emulator(rng, standin, hipb, streams, tunables):
    run_through_dlpack(rng, standin, streams, 19, 150, 64, 128, "misaligned", True, **tunables)


@pytest.mark.slow
@pytest.mark.parametrize("M,N,H,D,mode,clean", SLOW_CASES)
def test_dlpack_rocm_arrays_bitwise_equal_to_emulator_larger(rng, standin, hipb, streams, M, N, H, D, mode, clean):
    run_through_dlpack(rng, standin, streams, M, N, H, D, mode, clean)


def test_raw_pointer_launch_bitwise_equal_to_emulator(rng, standin, hipb, streams):
    M, N, H, D = 9, 65, 64, 128
    live = standin.live_allocations
    ops = inputs(rng, M, N, H, D, "misaligned")
    expected = emulator_result(ops, True)
    bufs = {n: hipb.alloc(a.nbytes) for n, a in ops.items()}
    out = hipb.alloc(4 * M * (N + 3))
    try:
        for n, a in ops.items():
            hipb.copy_from_host(bufs[n].ptr, a)
        hipb.copy_from_host(out.ptr, np.full((M, N + 3), np.nan, np.float32))
        for stream in streams:  # the same launch on two streams: same bits (repeatable)
            plan = rawindexer.launch(*(bufs[n].ptr for n in OPERANDS), out.ptr, M=M, N=N, num_heads=H, head_dim=D,
                                     out_row_stride=N + 3, stream=stream, device="hip")
            assert standin.pending(stream) == 1
            hipb.synchronize(stream)
            got = np.empty((M, N + 3), np.float32)
            hipb.copy_to_host(got, out.ptr)
            assert got[:, :N].tobytes() == expected.tobytes(), f"stream 0x{stream:x}: {plan.symbol}"
            assert np.isnan(got[:, N:]).all(), "the kernel wrote into the row padding"
            hipb.copy_from_host(out.ptr, np.full((M, N + 3), np.nan, np.float32))
    finally:
        for b in (*bufs.values(), out):
            b.free()
    assert standin.live_allocations == live


def graded(got, ops, clean):
    ref = fp8_mqa_logits_ref(*ops.values(), clean, dtype=np.float64)
    g = grade(got, ref, ops["cu_seqlen_ks"], ops["cu_seqlen_ke"], clean)
    assert g.ok, g.message
    return g


# ---- the prepared object ---------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["hip", None])
def test_indexer_on_rocm_arrays_bitwise_equal_to_emulator(rng, standin, hipb, streams, device):
    """rawindexer.Indexer(H, D, device="hip" or None = follow the arrays' DLPack device 10) on the test
    producer's ROCm arrays: three calls with fresh inputs of one shape reuse the prepared launch (the module is
    loaded once), each queued on the caller's stream and bitwise the emulator backend's result."""
    producer_stream, consumer_stream = streams
    M, N, H, D = 11, 90, 64, 128
    ind = rawindexer.Indexer(H, D, device=device)
    for clean, mode in [(True, "multi_req"), (False, "misaligned"), (True, "causal")]:
        ops = inputs(rng, M, N, H, D, mode)
        expected = emulator_result(ops, clean)
        arrays = producers(ops, producer_stream)
        out = RocmArray(np.full((M, N), np.nan, np.float32), producer_stream)  # poisoned
        ran = standin.launches_run
        assert ind(*arrays.values(), clean_logits=clean, out=out, stream=consumer_stream) is out
        assert standin.launches_run == ran, "the launch must be queued, not run inside the call"
        check(hip.hipStreamSynchronize(consumer_stream), "hipStreamSynchronize")
        assert standin.launches_run == ran + 1
        got = peek(out.ptr, (M, N))
        assert got.tobytes() == expected.tobytes(), f"{mode}, clean={clean}: not bitwise equal"
        graded(got, ops, clean)
        for a in (*arrays.values(), out):
            a.free()
    (state,) = ind._devices.values()
    assert state.backend is hipb and state.device_id == 0 and state.compute_units == 256
    assert len(ind._shapes) == 2  # clean_logits is part of the call description; the third call reused one


def test_indexer_refuses_arrays_of_another_backend(rng, standin, hipb, streams):
    ops = inputs(rng, 3, 20, 32, 64, "causal")
    with pytest.raises(ValueError, match=r"arrays: expected arrays on a hip device .*got arrays on DLPack "
                                         r"device \(1, 0\)"):
        rawindexer.Indexer(32, 64, device="hip")(*ops.values())
    arrays = producers(ops, streams[0])
    try:
        with pytest.raises(ValueError, match=r"expected arrays on a emulator device .*DLPack device \(10, 0\)"):
            rawindexer.Indexer(32, 64, device="emulator")(*arrays.values())
    finally:
        for a in arrays.values():
            a.free()


def test_indexer_launch_pointers_bitwise_equal_to_emulator(rng, standin, hipb, streams):
    """Indexer.launch_pointers (the serving loop's raw entry): padded output rows, both clean_logits, on a
    stream; the template it returns describes the launch the stand-in ran."""
    M, N, H, D = 13, 77, 32, 128
    ind = rawindexer.Indexer(H, D, device="hip")
    stream = streams[0]
    for clean in (True, False):
        ops = inputs(rng, M, N, H, D, "multi_req")
        expected = emulator_result(ops, clean)
        bufs = {n: hipb.alloc(a.nbytes) for n, a in ops.items()}
        out = hipb.alloc(4 * M * (N + 5))
        try:
            for n, a in ops.items():
                hipb.copy_from_host(bufs[n].ptr, a)
            hipb.copy_from_host(out.ptr, np.full((M, N + 5), np.nan, np.float32))  # poisoned
            ptrs = (*(bufs[n].ptr for n in OPERANDS), out.ptr)
            template = ind.launch_pointers(ptrs, M, N, out_row_stride=N + 5, clean_logits=clean, stream=stream)
            assert standin.pending(stream) == 1
            hipb.synchronize(stream)
            got = np.empty((M, N + 5), np.float32)
            hipb.copy_to_host(got, out.ptr)
            assert got[:, :N].tobytes() == expected.tobytes(), f"clean={clean}: {template.symbol}"
            assert np.isnan(got[:, N:]).all(), "the kernel wrote into the row padding"
            graded(got[:, :N], ops, clean)
            plan = template.plan(ptrs)
            assert plan.symbol.startswith(f"fp8_mqa_logits_h{H}_d{D}_") and plan.grid[0] >= 1
        finally:
            for b in (*bufs.values(), out):
                b.free()
    assert ind.launch_pointers((1,) * 7, 0, N) is None  # nothing to launch
    with pytest.raises(ValueError, match="pointers: expected 7 device addresses, got 6"):
        ind.launch_pointers((1,) * 6, M, N)


# ---- stream ordering ---------------------------------------------------------------------------------
def test_without_the_handshake_the_consumer_reads_unwritten_memory(rng, standin, hipb, streams):
    """Negative control: a producer that ignores the consumer's stream leaves its copies queued, so the
    kernel reads device memory nobody wrote yet. Proves that the equality above depends on the ordering."""
    producer_stream, consumer_stream = streams
    ops = inputs(rng, 8, 40, 32, 64, "causal")
    expected = emulator_result(ops, True)
    arrays = producers(ops, producer_stream, handshake=False)
    out = RocmArray(np.full((8, 40), np.nan, np.float32), producer_stream, handshake=False)
    rawindexer.fp8_mqa_logits(*arrays.values(), out=out, stream=consumer_stream)
    check(hip.hipStreamSynchronize(consumer_stream), "hipStreamSynchronize")
    assert standin.pending(producer_stream) == len(ops) + 1  # the copies still wait on their stream
    early = peek(out.ptr, (8, 40))
    assert early.tobytes() != expected.tobytes()
    # The producer's copies then overwrite the output with its NaN poison: later work, later effect.
    check(hip.hipStreamSynchronize(producer_stream), "hipStreamSynchronize")
    assert np.isnan(peek(out.ptr, (8, 40))).all()
    for a in (*arrays.values(), out):
        a.free()


def test_null_stream_waits_for_blocking_streams(rng, standin, hipb, streams):
    """Legacy default-stream semantics: work on the null stream starts after the work queued before it
    on every blocking stream, so a launch on stream 0 sees a copy queued on another stream."""
    producer_stream, _ = streams
    ops = inputs(rng, 5, 33, 32, 128, "causal")
    expected = emulator_result(ops, True)
    arrays = producers(ops, producer_stream, handshake=False)
    out = hipb.alloc(4 * 5 * 33)
    rawindexer.launch(*(arrays[n].ptr for n in OPERANDS), out.ptr, M=5, N=33, num_heads=32, head_dim=128,
                      stream=0, device="hip")
    assert standin.pending(producer_stream) == len(ops) and standin.pending(0) == 1
    assert int(hip.hipStreamQuery(None)[0]) == int(hip.hipError_t.hipErrorNotReady)
    hipb.synchronize(0)
    assert standin.pending(producer_stream) == 0
    assert peek(out.ptr, (5, 33)).tobytes() == expected.tobytes()
    out.free()
    for a in arrays.values():
        a.free()


def test_order_after_makes_the_consumer_wait_for_the_launch(rng, standin, hipb, streams):
    """rawindexer as the producer: backend.order_after (what its DLPack exports call) makes another
    stream wait for the launch with an event, through the real hip-python."""
    launch_stream, consumer_stream = streams
    M, N = 4, 48
    ops = inputs(rng, M, N, 32, 64, "causal")
    expected = emulator_result(ops, True)
    bufs = {n: hipb.alloc(a.nbytes) for n, a in ops.items()}
    for n, a in ops.items():
        hipb.copy_from_host(bufs[n].ptr, a)
    out = hipb.alloc(4 * M * N)
    rawindexer.launch(*(bufs[n].ptr for n in OPERANDS), out.ptr, M=M, N=N, num_heads=32, head_dim=64,
                      stream=launch_stream, device="hip")
    hipb.order_after(consumer_stream, launch_stream)
    hipb.synchronize(consumer_stream)  # only the consumer: it must have pulled the launch in
    assert standin.pending(launch_stream) == 0
    assert peek(out.ptr, (M, N)).tobytes() == expected.tobytes()
    hipb.order_after(-1, launch_stream)  # -1: the consumer asked for no synchronisation
    assert standin.pending(consumer_stream) == 0
    for b in (*bufs.values(), out):
        b.free()


def test_result_allocated_by_rawindexer_for_a_plain_rocm_producer(rng, standin, hipb, streams):
    """out=None with a ROCm producer rawindexer cannot import into: the result is the device buffer rawindexer
    allocated, as a DLPack exporter (device (10, 0)). A consumer importing it on another stream waits for the
    launch (the handshake, through the real hip-python's events); the buffer lives until the result and every
    view taken from it are dropped. Fresh stand-in memory holds 0xA5 bytes, so an unwritten element differs."""
    import gc

    producer_stream, consumer_stream = streams
    M, N, H, D = 6, 40, 32, 64
    ops = inputs(rng, M, N, H, D, "multi_req")
    expected = emulator_result(ops, True)
    arrays = producers(ops, producer_stream)
    live = standin.live_allocations
    try:
        result = rawindexer.fp8_mqa_logits(*arrays.values(), stream=consumer_stream)
        assert result.__dlpack_device__() == (10, 0)
        assert standin.live_allocations == live + 1 and standin.pending(consumer_stream) >= 1
        # A third party reads the result on the producer's stream: only that stream is synchronised, so the
        # launch queued on consumer_stream runs because the export made producer_stream wait for it.
        view = dlpack.from_dlpack(result, name="logits", stream=producer_stream)
        assert (view.shape, view.dtype.name, view.device, view.ptr) == ((M, N), "float32", (10, 0), result.ptr)
        check(hip.hipStreamSynchronize(producer_stream), "hipStreamSynchronize")
        assert standin.pending(consumer_stream) == 0
        got = peek(view.ptr, (M, N))
        assert got.tobytes() == expected.tobytes()
        graded(got, ops, True)
        del result
        gc.collect()
        assert standin.live_allocations == live + 1, "freed while a view of it was alive"
        view.release()
        del view
        gc.collect()
        assert standin.live_allocations == live, "the result's buffer was not freed"
    finally:
        for a in arrays.values():
            a.free()


def test_result_export_without_synchronisation_and_on_its_own_stream(rng, standin, hipb, streams):
    """The result's exports: stream=-1 (the consumer asked for no synchronisation) and the launch's own stream
    queue nothing; a capsule taken from it keeps the buffer alive after the result is gone."""
    import gc

    producer_stream, consumer_stream = streams
    arrays = producers(inputs(rng, 3, 24, 32, 64, "causal"), producer_stream)
    live = standin.live_allocations
    try:
        result = rawindexer.fp8_mqa_logits(*arrays.values(), stream=consumer_stream)
        before = (standin.pending(producer_stream), standin.pending(consumer_stream))
        dlpack.from_dlpack(result, stream=-1).release()
        dlpack.from_dlpack(result, stream=consumer_stream).release()
        assert (standin.pending(producer_stream), standin.pending(consumer_stream)) == before
        dlpack.from_dlpack(result, stream=producer_stream).release()  # control: another stream does wait
        assert standin.pending(producer_stream) == before[0] + 1
        capsule = result.__dlpack__(stream=-1, max_version=(1, 0))
        del result
        gc.collect()
        assert standin.live_allocations == live + 1
        dlpack.from_dlpack(capsule).release()
        del capsule
        gc.collect()
        assert standin.live_allocations == live
        check(hip.hipStreamSynchronize(consumer_stream), "hipStreamSynchronize")
    finally:
        for a in arrays.values():
            a.free()


# ---- run.py on the hip backend -------------------------------------------------------------------
@pytest.mark.parametrize("device_args", [["--device", "hip"], []])
def test_run_py_on_the_hip_backend(standin, device_args):
    """run.py in its own process, the stand-in installed first; without --device it must pick hip."""
    cmd = [sys.executable, str(ROOT / "tests" / "hip_standin" / "with_standin.py"), str(ROOT / "run.py"),
           *device_args, "--M", "16", "--N", "128", "--heads", "64", "--iters", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hip (gfx950)" in done.stdout and "PASS" in done.stdout, done.stdout


# ---- what a ROCm user meets when something is wrong ------------------------------------------------
def test_no_device(standin, hipb, rng):
    with standin.configured(devices=0):
        assert hipb.device_count() == 0
        with pytest.raises(HipError, match=r"failed: 'no ROCm-capable device is detected' .*hipErrorNoDevice"):
            rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=4, N=64, num_heads=32, head_dim=128, device="hip")
        # run's choice of device (rawindexer.chunk) falls back to another backend
        from rawindexer.chunk import usable_gpu_backend
        assert usable_gpu_backend() != "hip"


NO_ROCM_SCRIPT = r"""
import ctypes, sys
try:
    ctypes.CDLL("libamdhip64.so")
    print("ROCM-PRESENT")
    sys.exit(0)
except OSError:
    pass
import rawindexer
from rawindexer.backends import get_backend
from rawindexer.backends.hip import HipUnavailable
hip = get_backend("hip")
print("count", hip.device_count())
for attempt in ("launch", "indexer"):
    try:
        if attempt == "launch":
            rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=4, N=64, num_heads=32, head_dim=128, device="hip")
        else:
            rawindexer.Indexer(32, 128, device="hip").launch_pointers((1,) * 7, 4, 64)
    except HipUnavailable as exc:
        print(attempt, "HipUnavailable:", exc)
from rawindexer.chunk import usable_gpu_backend
print("run.py picks", usable_gpu_backend() or "emulator")
"""


def test_no_rocm_runtime_at_all(standin):
    """No libamdhip64.so anywhere (a fresh process without the stand-in): hip-python's bare
    RuntimeError('failed to dlopen ...') becomes one HipUnavailable saying what to install, at the first
    call that needs the runtime; device_count() answers 0 and run.py falls back to another device."""
    done = subprocess.run([sys.executable, "-c", NO_ROCM_SCRIPT, str(ROOT)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    if "ROCM-PRESENT" in done.stdout:
        pytest.skip("a ROCm runtime is installed on this machine")
    lines = done.stdout.splitlines()
    assert lines[0] == "count 0"
    for attempt in ("launch", "indexer"):
        (line,) = [x for x in lines if x.startswith(f"{attempt} HipUnavailable:")]
        assert "needs the ROCm HIP runtime" in line and "libamdhip64.so" in line and "rocm-hip-runtime" in line
        assert "emulator" in line
    assert lines[-1] in ("run.py picks emulator", "run.py picks cuda")


def test_no_hip_python(monkeypatch):
    from rawindexer.backends.hip import HipBackend, HipUnavailable

    monkeypatch.setitem(sys.modules, "hip", None)  # `from hip import hip` raises ImportError
    backend = HipBackend()
    assert backend.device_count() == 0
    with pytest.raises(HipUnavailable, match=r"needs the hip-python of your ROCm: .*hip-python"):
        backend.compute_units(0)


def test_code_object_for_another_gfx_target(standin, hipb):
    with pytest.raises(HipError, match=r"hipModuleLoadData failed: 'no kernel image is available.*"
                                       r"hipErrorNoBinaryForGpu"):
        hipb.load_module(runtime.OTHER_TARGET_CODE_OBJECT.read_bytes())
    with pytest.raises(HipError, match="hipModuleLoadData failed.*hipErrorInvalidImage"):
        hipb.load_module(b"\x7fELF not a code object" + bytes(64))


def test_device_properties_offsets_match_hip_python(standin, hipb):
    """The stand-in's hipGetDevicePropertiesR0600 writes the fields hip-python's struct reads."""
    props = hip.hipDeviceProp_t()
    assert props.c_sizeof() == 1472
    check(hip.hipGetDeviceProperties(props, 0), "hipGetDeviceProperties")
    assert bytes(props.gcnArchName).split(b"\0")[0] == b"gfx950:sramecc+:xnack-"
    assert props.multiProcessorCount == 256
    with standin.configured(mach=runtime.MACH_GFX942, compute_units=304):
        check(hip.hipGetDeviceProperties(props, 0), "hipGetDeviceProperties")
        assert bytes(props.gcnArchName).split(b"\0")[0] == b"gfx942:sramecc+:xnack-"
        assert props.multiProcessorCount == 304


def test_the_devices_gfx_target_picks_the_code_object(rng, standin, hipb, streams):
    """An MI300X (gfx942) runs the gfx942 kernel without arch=; arch= naming another target than the device's is
    refused naming both; a device of a target the package does not ship is refused naming the shipped ones."""
    M, N, H, D = 5, 48, 32, 128
    ops = inputs(rng, M, N, H, D, "causal")
    expected = emulator_result(ops, True, arch="gfx942")
    with standin.configured(mach=runtime.MACH_GFX942):
        api.reset_caches("hip")
        arrays = producers(ops, streams[0])
        out = RocmArray(np.full((M, N), np.nan, np.float32), streams[0])
        rawindexer.fp8_mqa_logits(*arrays.values(), out=out, stream=streams[1])
        check(hip.hipStreamSynchronize(streams[1]), "hipStreamSynchronize")
        assert peek(out.ptr, (M, N)).tobytes() == expected.tobytes()
        assert hipb.arch_of(0) == "gfx942"
        with pytest.raises(ValueError, match="arch: expected 'gfx942' .* on hip device 0, which is gfx942; got 'gfx950'"):
            rawindexer.fp8_mqa_logits(*arrays.values(), out=out, arch="gfx950")
        for a in (*arrays.values(), out):
            a.free()
    with standin.configured(mach=0x03F):  # gfx90a (MI200): no kernel of ours
        api.reset_caches("hip")
        with pytest.raises(HipError, match="ROCm device 0 is gfx90a.*ships kernels for gfx950 and gfx942 only"):
            rawindexer.launch(1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 6 << 20, 7 << 20, M=4, N=64, num_heads=32,
                              head_dim=128, device="hip")
    api.reset_caches("hip")


def test_reset_caches_makes_the_next_call_load_the_module_again(rng, standin, hipb):
    """A loaded module stays in use while the device changes under it (as a runtime keeps it); after
    api.reset_caches("hip") the next launch loads it again and meets the new device's refusal. Resetting
    another backend leaves hip's cache alone; after it the device's target is asked again."""
    M, N, H, D = 4, 40, 32, 64
    ops = inputs(rng, M, N, H, D, "causal")
    expected = emulator_result(ops, True)
    bufs = {n: hipb.alloc(a.nbytes) for n, a in ops.items()}
    out = hipb.alloc(4 * M * N)
    try:
        for n, a in ops.items():
            hipb.copy_from_host(bufs[n].ptr, a)
        ptrs = [bufs[n].ptr for n in OPERANDS]

        def run():
            hipb.copy_from_host(out.ptr, np.full((M, N), np.nan, np.float32))
            rawindexer.launch(*ptrs, out.ptr, M=M, N=N, num_heads=H, head_dim=D, device="hip")
            hipb.synchronize(0)
            assert peek(out.ptr, (M, N)).tobytes() == expected.tobytes()
        run()
        with standin.configured(mach=runtime.MACH_GFX942):
            run()  # the module loaded on the gfx950 device is still the one used
            api.reset_caches("emulator")
            run()
            api.reset_caches("hip")  # now the device's own target is asked again: gfx942, whose code object loads
            run_942 = emulator_result(ops, True, arch="gfx942")
            hipb.copy_from_host(out.ptr, np.full((M, N), np.nan, np.float32))
            rawindexer.launch(*ptrs, out.ptr, M=M, N=N, num_heads=H, head_dim=D, device="hip")
            hipb.synchronize(0)
            assert peek(out.ptr, (M, N)).tobytes() == run_942.tobytes()
            with pytest.raises(HipError, match="hipModuleLoadData failed.*hipErrorNoBinaryForGpu"):
                hipb.load_module(rawindexer.dispatch.family_for("gfx950").code_object())
        api.reset_caches()
        run()
    finally:
        for b in (*bufs.values(), out):
            b.free()


def test_out_of_memory(rng, standin, hipb):
    live = standin.live_allocations
    with pytest.raises(HipError, match=r"hipMalloc\(1125899906842624\) failed: 'out of memory' .*hipErrorOutOfMemory"):
        hipb.alloc(1 << 50)
    with standin.configured(memory_limit=1 << 20):
        keep = hipb.alloc(1 << 19)
        with pytest.raises(HipError, match="hipErrorOutOfMemory"):
            hipb.alloc((1 << 19) + 1)
        keep.free()
    assert standin.live_allocations == live


def test_descriptor_kernarg_size_is_the_metadata_size():
    """The stand-in checks kernarg sizes against the kernel descriptor (it does not parse the msgpack
    metadata); for every shipped kernel the two agree with the manifest the packer uses."""
    from rawindexer.codeobject import CodeObject

    family = rawindexer.dispatch.family_for("gfx950")
    code = CodeObject(family.code_object())
    for symbol, entry in family.target["kernels"].items():
        kernel = code.kernels[symbol]
        assert kernel.descriptor.kernarg_size == kernel.metadata[".kernarg_segment_size"] == entry["kernarg_size"]


def test_launch_rejected_by_the_runtime(standin, hipb):
    """Arguments the runtime refuses at the launch call: each one HipError naming the HIP error."""
    module = hipb.load_module(rawindexer.dispatch.family_for("gfx950").code_object())
    symbol = "fp8_mqa_logits_h32_d128_bm4_mrp"
    function = hipb.get_function(module, symbol)
    size = rawindexer.dispatch.family_for("gfx950").target["kernels"][symbol]["kernarg_size"]
    with pytest.raises(HipError, match="hipModuleLaunchKernel failed.*hipErrorInvalidConfiguration"):
        hipb.launch(function, (1, 1, 1), (2048, 1, 1), bytes(size))
    with pytest.raises(HipError, match="hipModuleLaunchKernel failed.*hipErrorInvalidValue"):
        hipb.launch(function, (1, 1, 1), (64, 1, 1), bytes(size - 8))  # kernarg size != the descriptor's
    with pytest.raises(HipError, match="hipModuleLaunchKernel failed.*hipErrorInvalidValue"):
        hipb.launch(function, (0, 1, 1), (64, 1, 1), bytes(size))
    with pytest.raises(HipError, match=r"hipModuleGetFunction\(nope\) failed.*hipErrorNotFound"):
        hipb.get_function(module, "nope")
    # the `extra` array itself: a wrong marker layout, and both kernelParams and extra
    buf = ctypes.create_string_buffer(size)
    n = ctypes.c_size_t(size)
    bad = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(n), 0)  # CUDA's END marker
    assert hip.hipModuleLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, None, None, ctypes.addressof(bad))[0] == \
        hip.hipError_t.hipErrorInvalidValue
    good = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(n), 3)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(buf))
    assert hip.hipModuleLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, None, ctypes.addressof(params),
                                     ctypes.addressof(good))[0] == hip.hipError_t.hipErrorInvalidValue
    assert hip.hipModuleLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, 0x1234, None,
                                     ctypes.addressof(good))[0] == hip.hipError_t.hipErrorInvalidHandle
    assert standin.pending(0) == 0
    # The kernel's own limit (.max_flat_workgroup_size 512, in the metadata the stand-in does not parse) is
    # enforced when the launch executes: the emulator refuses it and the synchronising call reports it.
    hipb.launch(function, (1, 1, 1), (1024, 1, 1), bytes(size))
    with pytest.raises(HipError, match="hipStreamSynchronize failed.*hipErrorLaunchFailure"):
        hipb.synchronize(0)
    assert "max_flat_workgroup_size" in standin.last_fault
    assert int(hip.hipGetLastError()[0]) != 0 and int(hip.hipGetLastError()[0]) == 0  # sticky, then cleared


def test_kernel_fault_surfaces_at_synchronisation(rng, standin, hipb, streams):
    """A launch whose output allocation is too small: queued fine, then the emulator's memcheck faults,
    and the synchronising call returns hipErrorIllegalAddress, as an asynchronous kernel error does."""
    stream = streams[0]
    M, N = 8, 64
    ops = inputs(rng, M, N, 32, 128, "causal")
    bufs = {n: hipb.alloc(a.nbytes) for n, a in ops.items()}
    for n, a in ops.items():
        hipb.copy_from_host(bufs[n].ptr, a)
    short_out = hipb.alloc(4 * M * N // 2)
    rawindexer.launch(*(bufs[n].ptr for n in OPERANDS), short_out.ptr, M=M, N=N, num_heads=32, head_dim=128,
                      stream=stream, device="hip")
    with pytest.raises(HipError, match=r"hipStreamSynchronize failed: 'an illegal memory access was "
                                       r"encountered' .*hipErrorIllegalAddress"):
        hipb.synchronize(stream)
    assert "MemoryFault" in standin.last_fault
    assert int(hip.hipGetLastError()[0]) == 700 and int(hip.hipGetLastError()[0]) == 0  # reported once
    for b in (*bufs.values(), short_out):
        b.free()
