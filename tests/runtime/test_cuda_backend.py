"""CPU-only tests of the sm_90a target: build resources, manifest layout, the host heuristic, and the CUDA
backend's driver call sequence against a fake ``cuda.bindings.driver`` (no GPU, no cuda-bindings needed)."""
from __future__ import annotations

import ctypes
import json
import sys
import types
from pathlib import Path

import pytest

import build  # conftest loads the repository's build.py under this name
from rawindexer.dispatch.base import Pointers, Problem, Tunables
from rawindexer import registry
from rawindexer.kernel_files import kernel_dir

EXPECTED_OFFSETS = [0, 8, 16, 24, 32, 40, 48, 56, 64, 68, 72, 76, 80]


@pytest.fixture(scope="module")
def sm90_target() -> tuple[Path, dict]:
    """The sm_90a manifest target the package ships (`make` always builds it: nvcc from PATH or PyPI)."""
    manifest = kernel_dir() / "manifest.json"
    return kernel_dir(), json.loads(manifest.read_text())["targets"]["sm_90a"]


def test_every_variant_built_without_spills_or_local_memory(sm90_target):
    build_dir, target = sm90_target
    assert (build_dir / target["code_object"]).exists()
    assert set(target["kernels"]) == {v.symbol for v in registry.SM90_INSTANCES}
    for name, k in target["kernels"].items():
        r = k["resources"]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, name
        assert r["stack_frame"] == 0 and r.get("lmem", 0) == 0, name
        assert 0 < r["registers"] <= 255, name
        assert r["smem"] <= 48 * 1024, name


def test_kernarg_layout_matches_the_gfx950_argument_list(sm90_target):
    """Every kernel takes the gfx950 argument list at the gfx950 offsets; the TMA designs ("tmas", "tmasb4", "tmaq") add
    K's 128-byte tensor map after it, and those that take Q by TMA ("tmas", "tmaq", v19) Q's after K's, each where the
    parameter bank address (c[0x0][0x210] + offset) is 64-byte aligned."""
    _, target = sm90_target
    for name, k in target["kernels"].items():
        common = k["args"][:len(build.KERNEL_ARGS)]
        assert [a["name"] for a in common] == [n for n, _ in build.KERNEL_ARGS], name
        assert [a["offset"] for a in common] == EXPECTED_OFFSETS, name
        assert [a["size"] for a in common] == [s for _, s in build.KERNEL_ARGS], name
        params = registry.SM90_DESIGNS[k["params"]["design"]].params
        if params.get("k_tensor_map"):
            maps = k["args"][len(build.KERNEL_ARGS):]
            assert [m["name"] for m in maps] == ["k_map"] + (["q_map"] if params.get("q_tensor_map") else []), name
            for m in maps:
                assert m["size"] == 128 and (0x210 + m["offset"]) % 64 == 0, name
            assert k["kernarg_size"] == maps[-1]["offset"] + 128, name
        else:
            assert len(k["args"]) == len(build.KERNEL_ARGS) and k["kernarg_size"] == 84, name


def test_coverage_of_heads_and_dims(sm90_target):
    _, target = sm90_target
    covered = {(k["params"]["heads"], k["params"]["head_dim"]) for k in target["kernels"].values()
               if k["params"]["design"] == "wg"}
    assert covered == {(h, d) for h in (32, 64, 128) for d in (64, 128)}


def test_parse_ptxas_report():
    text = """ptxas info    : Compiling entry function 'kern_a' for 'sm_90a'
ptxas info    : Function properties for kern_a
    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8 bytes cumulative stack size, 34944 bytes smem
"""
    r = build.parse_ptxas_report(text)["kern_a"]
    assert r == {"stack_frame": 8, "spill_stores": 4, "spill_loads": 8, "registers": 128, "smem": 34944, "lmem": 0}


# ---------------------------------------------------------------------------------------------------
# host heuristic
# ---------------------------------------------------------------------------------------------------
def _family(sm90_target):
    """The "wg" heuristic (the default "auto" plans with it below N = 4096 and for callers' block_m / num_warps)."""
    from rawindexer.dispatch.sm90 import Sm90Family
    return Sm90Family(build_dir=sm90_target[0], design="wg")


PTRS = Pointers(*[1 << 20] * 7)


def test_plan_defaults_and_kernargs(sm90_target):
    fam = _family(sm90_target)
    plan = fam.plan(Problem(4096, 32768, 32, 128, 32768, True), Tunables(), PTRS, 132)
    assert plan.symbol == "fp8_mqa_logits_sm90_h32_d128_bm4_wg"
    assert plan.grid == (1024, 1, 1) and plan.block == (128, 1, 1)
    assert plan.config["reverse_rows"] is True
    # flags = clean | reverse | vec4 fill (out 16-byte aligned, stride % 4 == 0) at offset 80; M, N at 64, 68
    assert int.from_bytes(plan.kernargs[80:84], "little") == 7
    odd = fam.plan(Problem(4096, 32768, 32, 128, 32769, True), Tunables(), PTRS, 132)
    assert int.from_bytes(odd.kernargs[80:84], "little") == 3, "an odd row stride must not take the float4 fill"
    assert int.from_bytes(plan.kernargs[64:68], "little") == 4096
    assert int.from_bytes(plan.kernargs[68:72], "little") == 32768
    small = fam.plan(Problem(128, 32768, 64, 128, 32768, False), Tunables(), PTRS, 132)
    assert small.grid[1] > 1, "a small row grid must be split over N to fill the card"
    # v4 heuristic (H200 numbers in docs/PERFORMANCE.md): 336 row blocks keep two warpgroups per block,
    # and N = 1024 rows are never split
    mid = fam.plan(Problem(671, 131072, 64, 128, 131072, True), Tunables(), PTRS, 132)
    assert mid.config["num_warps"] == 8
    square = fam.plan(Problem(1024, 1024, 64, 128, 1024, False), Tunables(), PTRS, 132)
    assert square.config["split_n"] == 1 and square.config["num_warps"] == 4


def test_plan_row_order(sm90_target):
    """v10-small: below REVERSE_ROWS_MIN_N keys the wg heuristic takes the zigzag row order (flag 8: the grid's
    first half walks the row blocks down from the top, the second half up), past it high-m first (flag 2); a
    caller's reverse_rows keeps the straight order it names; designs outside ZIGZAG_DESIGNS never take it."""
    from rawindexer.dispatch.sm90 import FLAG_REVERSE_ROWS, FLAG_ZIGZAG_ROWS, REVERSE_ROWS_MIN_N, Sm90Family

    fam = _family(sm90_target)
    flags = lambda plan: int.from_bytes(plan.kernargs[80:84], "little")
    order = lambda plan: (bool(flags(plan) & FLAG_REVERSE_ROWS), bool(flags(plan) & FLAG_ZIGZAG_ROWS))
    for n in (64, 1024, REVERSE_ROWS_MIN_N):
        plan = fam.plan(Problem(1024, n, 64, 128, n, True), Tunables(), PTRS, 132)
        assert order(plan) == (False, True) and plan.config["zigzag_rows"] and not plan.config["reverse_rows"], n
        assert flags(plan) == 1 | 4 | FLAG_ZIGZAG_ROWS, n
    past = fam.plan(Problem(1024, REVERSE_ROWS_MIN_N + 1, 32, 128, 4096, True), Tunables(), PTRS, 132)
    assert order(past) == (True, False) and not past.config["zigzag_rows"]
    for asked in (False, True):
        fixed = fam.plan(Problem(1024, 1024, 32, 128, 1024, False), Tunables(reverse_rows=asked), PTRS, 132)
        assert order(fixed) == (asked, False) and fixed.config["reverse_rows"] is asked
    other = Sm90Family(build_dir=sm90_target[0], design="mma").plan(Problem(1024, 1024, 32, 128, 1024, True),
                                                                   Tunables(), PTRS, 132)
    assert order(other) == (False, False) and not other.config["zigzag_rows"]


@pytest.mark.parametrize("tunables, problem, match", [
    (Tunables(block_m=3), Problem(64, 64, 32, 128, 64, True), "block_m"),
    (Tunables(num_warps=6), Problem(64, 64, 32, 128, 64, True), "num_warps"),
    (Tunables(split_n=70000), Problem(64, 64, 32, 128, 64, True), "split_n"),
    (Tunables(unroll2=True), Problem(64, 64, 32, 128, 64, True), "unroll2"),
    (Tunables(), Problem(64, 64, 32, 128, 63, True), "out_row_stride"),
    (Tunables(), Problem(64, 64, 48, 128, 64, True), "heads=48"),
])
def test_plan_rejects_bad_input(sm90_target, tunables, problem, match):
    with pytest.raises(ValueError, match=match):
        _family(sm90_target).plan(problem, tunables, PTRS, 132)


def test_plan_rejects_misaligned_q(sm90_target):
    with pytest.raises(ValueError, match="16-byte"):
        _family(sm90_target).plan(Problem(4, 64, 32, 128, 64, True), Tunables(),
                                  Pointers(8, 16, 16, 16, 16, 16, 16), 132)


# ---------------------------------------------------------------------------------------------------
# CudaBackend against a fake driver module
# ---------------------------------------------------------------------------------------------------
from fake_cuda import fake_driver  # noqa: E402,F401  (the fixture)


def test_backend_call_sequence(fake_driver):
    from rawindexer.backends.cuda import CudaBackend

    be = CudaBackend()
    assert (be.name, be.dlpack_device_type, be.arch) == ("cuda", 2, "sm_90a")
    assert fake_driver.names() == ["cuInit"], "constructing the backend touches no device or context"
    mod = be.load_module(b"\x7fELFcubin")  # device 0: its primary context current for the load, then restored
    assert fake_driver.names(1) == ["cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxGetCurrent",
                                    "cuCtxSetCurrent", "cuModuleLoadData", "cuCtxSetCurrent"]
    assert fake_driver.calls[-2][:3] == ("cuModuleLoadData", (b"\x7fELFcubin",), 0xC0000)
    assert fake_driver.current == 0, "the thread's (NULL) context is restored"
    fn = be.get_function(mod, "fp8_mqa_logits_sm90_h32_d128_bm4_wg")
    assert fake_driver.calls[-1][:2] == ("cuModuleGetFunction", (mod, b"fp8_mqa_logits_sm90_h32_d128_bm4_wg"))
    kernargs = bytes(range(84))
    assert be.set_device(0) is not None
    be.launch(fn, (10, 2, 1), (128, 1, 1), kernargs, stream=0x50000 + 77)
    name, args, ctx, _ = fake_driver.calls[-1]
    assert name == "cuLaunchKernel" and ctx == 0xC0000
    assert args[:6] == (fn, (10, 2, 1), (128, 1, 1), 0, 0x50000 + 77, 0)
    assert args[6] == (1, 2, 0)  # BUFFER_POINTER, BUFFER_SIZE, END
    assert args[7] == kernargs
    be.synchronize(77)
    assert fake_driver.calls[-1][:2] == ("cuStreamSynchronize", (77,))
    assert be.compute_units() == 132
    alloc = be.alloc(4096)
    assert alloc.ptr == 0x1000 and alloc.nbytes == 4096
    alloc.free()
    assert fake_driver.calls[-1][:2] == ("cuMemFree", (0x1000,))


def test_backend_raises_on_error_codes(fake_driver):
    from rawindexer.backends.cuda import CudaBackend, CudaError

    be = CudaBackend()
    fake_driver.fail = "cuLaunchKernel"
    with pytest.raises(CudaError, match="cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"):
        be.launch("fn", (1, 1, 1), (32, 1, 1), bytes(84))
    fake_driver.fail = "cuModuleLoadData"
    with pytest.raises(CudaError, match="cuModuleLoadData"):
        be.load_module(b"x")


def test_backend_without_cuda_bindings(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    from rawindexer.backends.cuda import CudaBackend

    with pytest.raises(ImportError, match="cuda-bindings"):
        CudaBackend()


def test_mirror_variant_is_built_and_selectable(sm90_target, monkeypatch):
    """The bf16 tensor-core head reduce ("wgr", docs/PERFORMANCE.md) ships beside the default and is chosen by
    design= or RAWINDEXER_SM90_DESIGN; the older names impl= and RAWINDEXER_SM90_IMPL still work, deprecated."""
    from rawindexer.dispatch.sm90 import DEFAULT_DESIGN, Sm90Family

    build_dir, _ = sm90_target
    plan = Sm90Family(build_dir, design="wgr").plan(Problem(4096, 32768, 32, 128, 32768, True), Tunables(), PTRS, 132)
    assert plan.symbol == "fp8_mqa_logits_sm90_h32_d128_bm4_wgr" and plan.config["design"] == "wgr"
    monkeypatch.delenv("RAWINDEXER_SM90_IMPL", raising=False)
    monkeypatch.setenv("RAWINDEXER_SM90_DESIGN", "wgr")
    assert Sm90Family(build_dir).design == "wgr"
    monkeypatch.delenv("RAWINDEXER_SM90_DESIGN")
    assert Sm90Family(build_dir).design == DEFAULT_DESIGN == "auto"
    monkeypatch.setenv("RAWINDEXER_SM90_IMPL", "wgr")
    with pytest.warns(DeprecationWarning, match="RAWINDEXER_SM90_DESIGN"):
        assert Sm90Family(build_dir).design == "wgr"
    with pytest.warns(DeprecationWarning, match="design="):
        assert Sm90Family(build_dir, impl="mma").design == "mma"
    monkeypatch.setenv("RAWINDEXER_SM90_DESIGN", "nope")
    with pytest.raises(ValueError, match="RAWINDEXER_SM90_DESIGN: expected one of"):
        Sm90Family(build_dir)


def test_backend_host_copies(fake_driver):
    import numpy as np

    from rawindexer.backends.cuda import CudaBackend, CudaError

    be = CudaBackend()
    src = np.arange(1000, dtype=np.float32)
    dev = np.zeros(1000, dtype=np.float32)  # stands in for device memory (the fake memmoves)
    be.copy_from_host(dev.ctypes.data, src)
    name, args = fake_driver.calls[-1][:2]
    assert name == "cuMemcpyHtoD" and args == ("CUdeviceptr", dev.ctypes.data, src.ctypes.data, 4000)
    assert fake_driver.calls[-2][0] == "cuCtxSetCurrent" and fake_driver.calls[-1][2] == 0xC0000, \
        "copies run in the backend's context"
    np.testing.assert_array_equal(dev, src)
    back = np.full(1000, np.nan, dtype=np.float32)
    be.copy_to_host(back, dev.ctypes.data)
    name, args = fake_driver.calls[-1][:2]
    assert name == "cuMemcpyDtoH" and args == (back.ctypes.data, "CUdeviceptr", dev.ctypes.data, 4000)
    np.testing.assert_array_equal(back, src)
    # 2-D and uint8 arrays copy their bytes as they lie
    q = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    qd = np.zeros_like(q)
    be.copy_from_host(qd.ctypes.data, q)
    np.testing.assert_array_equal(qd, q)
    # empty arrays make no driver call
    n = len(fake_driver.calls)
    be.copy_from_host(dev.ctypes.data, np.empty(0, np.float32))
    be.copy_to_host(np.empty(0, np.float32), dev.ctypes.data)
    assert len(fake_driver.calls) == n
    # non-contiguous or read-only arrays are refused before any copy
    with pytest.raises(ValueError, match="contiguous"):
        be.copy_from_host(dev.ctypes.data, src[::2])
    with pytest.raises(ValueError, match="contiguous"):
        be.copy_to_host(back[::2], dev.ctypes.data)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        be.copy_to_host(ro, dev.ctypes.data)
    fake_driver.fail = "cuMemcpyHtoD"
    with pytest.raises(CudaError, match="cuMemcpyHtoD failed"):
        be.copy_from_host(dev.ctypes.data, src)
    fake_driver.fail = "cuMemcpyDtoH"
    with pytest.raises(CudaError, match="cuMemcpyDtoH failed"):
        be.copy_to_host(back, dev.ctypes.data)


def test_backend_device_count(fake_driver):
    from rawindexer.backends.cuda import CudaBackend, cuda_device_count

    be = CudaBackend()
    assert be.device_count() == 1
    fake_driver.count = 8
    assert be.device_count() == 8 and cuda_device_count() == 8
    fake_driver.fail = "cuDeviceGetCount"
    assert be.device_count() == 0
    fake_driver.fail = "cuInit"  # e.g. CUDA_ERROR_NO_DEVICE: 0, not an exception
    assert be.device_count() == 0 and cuda_device_count() == 0

    def broken():
        raise OSError("libcuda.so.1: cannot open shared object file")
    fake_driver.cuDeviceGetCount = broken
    fake_driver.fail = None
    assert be.device_count() == 0


def test_device_count_without_cuda_bindings(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    from rawindexer.backends.cuda import cuda_device_count

    assert cuda_device_count() == 0


def test_run_py_picks_cuda_when_a_device_is_counted(fake_driver, monkeypatch):
    """run.py's (`python -m rawindexer run`'s) device choice: hip absent, cuda with device_count() > 0 ->
    "cuda"; 0 devices -> none (the emulator)."""
    from rawindexer import backends
    from rawindexer.chunk import usable_gpu_backend

    def no_hip(name, _get=backends.get_backend):
        if name == "hip":
            raise ImportError("no hip-python")
        return _get(name)
    monkeypatch.setattr(backends, "_instances", {})
    monkeypatch.setattr(backends, "get_backend", no_hip)
    assert usable_gpu_backend() == "cuda"
    fake_driver.count = 0
    assert usable_gpu_backend() is None


def test_v5_experiment_designs_are_known_but_not_in_the_default_build(sm90_target):
    """wf/wa/wfs/was (docs/PERFORMANCE.md v5) are accepted names; the default build ships none of them, so a plan
    for one says so instead of silently falling back."""
    from rawindexer.dispatch.sm90 import Sm90Family

    build_dir, _ = sm90_target
    for design in ("wf", "wa", "wfs", "was"):
        fam = Sm90Family(build_dir, design=design)
        assert not fam.is_supported(32, 128)
        with pytest.raises(ValueError, match=f"no {design} kernel"):
            fam.plan(Problem(64, 64, 32, 128, 64, True), Tunables(), PTRS, 132)
    with pytest.raises(ValueError, match="design: expected one of"):
        Sm90Family(build_dir, design="nope")


def test_order_after_makes_the_consumer_stream_wait_on_an_event(fake_driver):
    """The DLPack handshake for outputs we allocate: the consumer's stream waits for our launch stream
    through an event, without a host synchronize."""
    from rawindexer.backends.cuda import CudaBackend

    be = CudaBackend()
    n = len(fake_driver.calls)
    be.order_after(0xC0FFEE, 0xABC)
    assert [c[:2] for c in fake_driver.calls[n:]] == [("cuEventCreate", (2,)), ("cuEventRecord", ("event", 0xABC)),
                                     ("cuStreamWaitEvent", (0xC0FFEE, "event", 0)), ("cuEventDestroy", ("event",))]
    be.order_after(None, 0xABC)  # DLPack: None means the legacy default stream (CU_STREAM_LEGACY = 1)
    assert fake_driver.calls[-2][:2] == ("cuStreamWaitEvent", (1, "event", 0))
    n = len(fake_driver.calls)
    be.order_after(-1, 0xABC)  # the consumer asked for no synchronisation
    be.order_after(0xABC, 0xABC)  # same stream: already ordered
    assert len(fake_driver.calls) == n
    fake_driver.fail = "cuStreamWaitEvent"
    with pytest.raises(RuntimeError, match="cuStreamWaitEvent"):
        be.order_after(5, 6)
    assert fake_driver.calls[-1][:2] == ("cuEventDestroy", ("event",)), "the event is released on failure too"


def test_warp_specialised_plan(sm90_target):
    """"ws" (docs/PERFORMANCE.md v7): one 384-thread block per SM, two consumers of N = 128 rows each, dynamic
    shared memory = both consumers' Q + the K ring + the weights, SplitN in whole waves of one block per SM."""
    from rawindexer.dispatch.sm90 import WS_STAGES, Sm90Family

    build_dir, _ = sm90_target
    fam = Sm90Family(build_dir, design="ws")
    for heads, block_m in ((32, 8), (64, 4), (128, 2)):
        plan = fam.plan(Problem(4096, 32768, heads, 128, 32768, True), Tunables(), PTRS, 132)
        assert plan.symbol == f"fp8_mqa_logits_sm90_h{heads}_d128_bm{block_m}_ws"
        assert plan.block == (384, 1, 1) and plan.config["num_warps"] == 12
        assert plan.grid[0] == 4096 // block_m
        assert plan.shared_mem == 2 * 128 * 128 + WS_STAGES * 64 * 128 + 2 * 128 * 4
        assert int.from_bytes(plan.kernargs[76:80], "little") == 12  # num_warps reaches the kernel
    # a long chunk fills the card with rows alone; a short one is split, and into about one whole wave
    assert fam.plan(Problem(4096, 32768, 32, 128, 32768, True), Tunables(), PTRS, 132).grid[1] == 1
    small = fam.plan(Problem(128, 32768, 32, 128, 32768, True), Tunables(), PTRS, 132)
    blocks = small.grid[0] * small.grid[1]
    assert small.grid[1] > 1 and blocks <= 132 and blocks > 132 // 2
    with pytest.raises(ValueError, match="num_warps must be 12"):
        fam.plan(Problem(64, 64, 32, 128, 64, True), Tunables(num_warps=8), PTRS, 132)
