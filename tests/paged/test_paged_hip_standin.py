"""The decode op on the hip backend end to end through the real hip-python wheel and the HIP stand-in
(tests/hip_standin/: a C libamdhip64.so that validates calls like the ROCm runtime, queues work on in-order streams
and runs launches on the gfx950 emulator with memcheck), as tests/runtime/test_hip_standin.py does for prefill.

Covered: fp8_paged_mqa_logits and PagedIndexer on ROCm producer arrays (queued on the caller's stream, the module
loaded once, results bitwise the emulator backend's and graded), the bound launch relaunching on rewritten buffers,
launch_paged with raw pointers and padded rows, mixed ROCm / CPU arrays refused before anything is queued.
"""

import numpy as np
import pytest

try:
    from hip import hip
except ImportError as exc:  # pragma: no cover - CI installs hip-python
    pytest.skip(f"hip-python is not importable ({exc}): the hip path through the real wheel needs "
                f"pip install 'hip-python~=7.2'", allow_module_level=True)

import rawindexer
from hip_standin import runtime
from hip_standin.fixtures import hipb, peek, standin, streams  # noqa: F401 -- pytest fixtures
from hip_standin.producer import RocmArray, check
from rawindexer.testing.paged_cases import make_case
from rawindexer.testing.paged_grading import grade_paged
from rawindexer.testing.paged_reference import fp8_paged_mqa_logits_ref
from rawindexer.validation import ValidationError

NAMES = ("q", "kv_cache", "weights", "context_lens", "block_table")


def emulator_result(case, clean, **tunables):
    out = np.full(case.out.shape, np.nan, np.float32)
    rawindexer.fp8_paged_mqa_logits(*(getattr(case, n) for n in NAMES), case.max_context_len, clean_logits=clean,
                                    out=out, **tunables)
    return out


def graded(case, got, clean):
    ref, bound = fp8_paged_mqa_logits_ref(*(getattr(case, n) for n in NAMES), case.max_context_len, clean,
                                          with_bound=True)
    grade = grade_paged(got, ref, bound, case.lengths(), clean)
    assert grade.ok, grade.message


def producers(case, stream):
    return {n: RocmArray(getattr(case, n), stream, dtype="float8_e4m3fn" if n == "q" else None) for n in NAMES}


def test_paged_indexer_on_rocm_arrays_bitwise_equal_to_emulator(rng, standin, hipb, streams):
    producer_stream, consumer_stream = streams
    decode = rawindexer.PagedIndexer(32, 64)
    for clean, two_d in [(True, False), (False, True), (True, True)]:
        case = make_case(rng, [70, 0, 17, 33], next_n=2, heads=32, head_dim=64, block_size=16, two_d=two_d,
                         share_blocks=True)
        expected = emulator_result(case, clean)
        arrays = producers(case, producer_stream)
        out = RocmArray(np.full(case.out.shape, np.nan, np.float32), producer_stream)  # poisoned
        ran = standin.launches_run
        assert decode(*arrays.values(), case.max_context_len, clean_logits=clean, out=out,
                      stream=consumer_stream) is out
        for name, a in {**arrays, "out": out}.items():
            assert a.streams_seen == [consumer_stream], f"{name}: DLPack stream argument"
        assert standin.launches_run == ran, "the launch must be queued, not run inside the call"
        check(hip.hipStreamSynchronize(consumer_stream), "hipStreamSynchronize")
        assert standin.launches_run == ran + 1
        got = peek(out.ptr, case.out.shape)
        assert got.tobytes() == expected.tobytes(), f"clean={clean}, two_d={two_d}: not bitwise equal"
        graded(case, got, clean)
        for a in (*arrays.values(), out):
            a.free()
    (state,) = decode._devices.values()
    assert state.backend is hipb and state.compute_units == 256


def test_bound_launch_relaunches_on_rewritten_buffers(rng, standin, hipb, streams):
    """prepare_paged_mqa_logits on ROCm buffers: each call queues one launch on the bound stream and reads the
    buffers' current contents (new lengths and q written between calls, on that stream)."""
    stream = streams[0]
    case = make_case(rng, [120, 40], next_n=2, heads=64, head_dim=128, block_size=16, two_d=True)
    arrays = producers(case, stream)
    out = RocmArray(np.full(case.out.shape, np.nan, np.float32), stream)
    bound = rawindexer.prepare_paged_mqa_logits(*arrays.values(), case.max_context_len, clean_logits=True, out=out,
                                                stream=stream)
    try:
        for step in range(3):
            case.context_lens[:] = np.minimum(case.context_lens + 9 * step, [[120], [40]])
            case.q[...] = make_case(rng, [1, 1], next_n=2, heads=64, head_dim=128, block_size=16).q
            for n, host in (("context_lens", case.context_lens), ("q", case.q)):
                staged = np.ascontiguousarray(host).copy()
                check(hip.hipMemcpyAsync(arrays[n].ptr, staged.ctypes.data, staged.nbytes,
                                         hip.hipMemcpyKind.hipMemcpyHostToDevice, stream), "hipMemcpyAsync")
                check(hip.hipStreamSynchronize(stream), "hipStreamSynchronize")
            ran = standin.launches_run
            assert bound() is out and standin.launches_run == ran
            check(hip.hipStreamSynchronize(stream), "hipStreamSynchronize")
            got = peek(out.ptr, case.out.shape)
            assert got.tobytes() == emulator_result(case, True).tobytes(), f"step {step}"
            graded(case, got, True)
    finally:
        for a in (*arrays.values(), out):
            a.free()


def test_launch_paged_raw_pointers_with_padded_rows(rng, standin, hipb, streams):
    stream = streams[0]
    case = make_case(rng, [50, 17, 64], next_n=1, heads=32, head_dim=128, block_size=64)
    expected = emulator_result(case, False)
    rows, width = case.out.shape
    bufs = {n: hipb.alloc(getattr(case, n).nbytes) for n in NAMES}
    out = hipb.alloc(4 * rows * (width + 7))
    try:
        for n in NAMES:
            hipb.copy_from_host(bufs[n].ptr, np.ascontiguousarray(getattr(case, n)))
        hipb.copy_from_host(out.ptr, np.full((rows, width + 7), np.nan, np.float32))  # poisoned
        ptrs = (*(bufs[n].ptr for n in NAMES), out.ptr)
        B, next_n, H, D = case.q.shape
        template = rawindexer.launch_paged(
            *ptrs, batch=B, next_n=next_n, num_heads=H, head_dim=D, block_size=64, num_blocks=case.kv_cache.shape[0],
            max_blocks=case.block_table.shape[1], max_context_len=width, out_row_stride=width + 7, stream=stream)
        assert standin.pending(stream) == 1
        hipb.synchronize(stream)
        got = np.empty((rows, width + 7), np.float32)
        hipb.copy_to_host(got, out.ptr)
        assert got[:, :width].tobytes() == expected.tobytes(), template.symbol
        assert np.isnan(got[:, width:]).all(), "the kernel wrote into the row padding"
        assert template.symbol == "fp8_paged_mqa_logits_h32_d128_bs64"
    finally:
        for b in (*bufs.values(), out):
            b.free()


def test_mixed_rocm_and_cpu_arrays_are_refused_before_anything_is_queued(rng, standin, hipb, streams):
    stream = streams[0]
    case = make_case(rng, [20], next_n=1, heads=32, head_dim=64, block_size=16)
    arrays = producers(case, stream)
    check(hip.hipStreamSynchronize(stream), "hipStreamSynchronize")
    args = dict(arrays, block_table=case.block_table)  # one array left in host memory
    try:
        with pytest.raises(ValidationError, match=r"^block_table: expected every array on q's device \(10, 0\), "
                                                  r"got block_table on \(1, 0\) \(mixed devices\)"):
            rawindexer.fp8_paged_mqa_logits(*args.values(), case.max_context_len, stream=stream)
        assert standin.pending(stream) == 0
    finally:
        for a in arrays.values():
            a.free()
