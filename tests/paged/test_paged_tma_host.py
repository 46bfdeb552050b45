"""The sm_90a decode design "tma" on the CPU (kernels/sm90/paged_tma.cuh): its plan carries the tensor map of the
call's cache (dispatch/sm90_tensor_map.py, generalised from prefill's K map), its geometry and shared memory, the
block sizes it is built for, and the launch path re-encoding the map per cache pointer against a fake two-GPU
driver (the encoder is replaced: cuTensorMapEncodeTiled needs a real driver)."""
from __future__ import annotations

import json

import pytest

import rawindexer
from rawindexer import dlpack, paged
from rawindexer import paged_kernels as pk
from rawindexer.dispatch import sm90_tensor_map
from rawindexer.dispatch.paged_gfx950 import PagedPointers, PagedProblem
from rawindexer.testing.paged_cases import make_case

from runtime.fake_cuda import two_gpu_node  # tests/runtime/fake_cuda.py


def _has_tma() -> bool:
    from rawindexer.kernel_files import KernelNotBuiltError, manifest_path

    try:
        manifest = json.loads(manifest_path().read_text())
    except KernelNotBuiltError:
        return False
    kernels = manifest.get("ops", {}).get(pk.OP, {}).get("sm_90a", {}).get("kernels", {})
    return any(k["params"].get("design") == "tma" for k in kernels.values())


needs_tma = pytest.mark.skipif(not _has_tma(), reason="the kernels have no sm_90a decode tma build (make)")


def fake_map(ptr: int, n: int, head_dim: int, block_size: int) -> bytes:
    """128 bytes that name their inputs, so a test reads back which cache a launch's map was made for."""
    return b"".join(v.to_bytes(8, "little") for v in (ptr, n, head_dim, block_size)) + bytes(96)


@pytest.fixture
def encoder(monkeypatch):
    calls: list[tuple] = []

    def encode(ptr: int, n: int, head_dim: int, block_size: int = 0) -> bytes:
        calls.append((ptr, n, head_dim, block_size))
        return fake_map(ptr, n, head_dim, block_size)

    monkeypatch.setattr(sm90_tensor_map, "encoder", encode)
    return calls


def test_paged_map_geometry_is_whole_blocks_of_the_fused_cache():
    # [num_blocks][64 * (D + 4)] bytes, keys first: dims {D, 64, num_blocks}, strides {D, 64 (D + 4)}, one block a box
    assert sm90_tensor_map.map_geometry(1000, 128, 64) == ([128, 64, 1000], [128, 64 * 132], [128, 64, 1])
    assert sm90_tensor_map.map_geometry(7, 64, 64) == ([64, 64, 7], [64, 64 * 68], [64, 64, 1])
    assert sm90_tensor_map.map_geometry(4096, 128) == ([128, 4096], [128], [128, 64]), "prefill's K map unchanged"
    with pytest.raises(ValueError, match="^block_size: "):
        sm90_tensor_map.map_geometry(10, 128, 16)


def test_tma_is_built_for_block_size_64_only():
    spec = pk.TARGETS["sm_90a"]
    assert {i.block_size for i in spec.instances_of("tma")} == {64}
    assert spec.instances_of("fp8") == spec.instances
    assert spec.kernel_args("tma") == pk.KERNEL_ARGS + [pk.TENSOR_MAP_ARG]


@needs_tma
@pytest.mark.parametrize("heads,next_n", [(32, 1), (64, 2), (128, 3)])
def test_tma_plan_carries_the_map_of_its_cache(encoder, heads, next_n):
    family = paged._family("sm_90a")
    p = PagedProblem(8, next_n, heads, 128, 64, 32768, 512, 32768, True, False, "e4m3fn", 4096)
    ptrs = PagedPointers(*[0x100000 * (i + 1) for i in range(6)])
    plan = family.plan(p, ptrs, 132, design="tma")
    assert plan.symbol == f"fp8_paged_mqa_logits_sm90_h{heads}_d128_bs64_tma_n{next_n}"
    threads = family.entry(heads, 128, 64, "tma")["resources_by_next_n"][str(next_n)]["max_threads"]
    assert threads in (pk.SM90_TMA_THREADS, 256)  # 256: the register split (a whole producer warpgroup)
    assert plan.block == (threads, 1, 1) and plan.grid[0] == 8
    assert plan.shared_mem == pk.sm90_shared_bytes(heads, 128, next_n, "tma") <= 227 * 1024
    slot = plan.config["k_tensor_map"]["slot"]
    assert plan.kernargs[slot["offset"]:slot["offset"] + 128] == fake_map(ptrs.kv_cache, 4096, 128, 64)
    assert int.from_bytes(plan.kernargs[8:16], "little") == ptrs.kv_cache, "the kv_cache slot keeps the pointer"
    assert encoder == [(ptrs.kv_cache, 4096, 128, 64)]


@needs_tma
def test_tma_refuses_other_block_sizes_by_name(encoder):
    family = paged._family("sm_90a")
    p = PagedProblem(8, 1, 64, 128, 16, 4096, 256, 4096, True, False, "e4m3fn", 4096)
    with pytest.raises(ValueError, match=r"^\(num_heads, head_dim, block_size\): no sm_90a decode kernel"):
        family.plan(p, PagedPointers(*[0x100000 * (i + 1) for i in range(6)]), 132, design="tma")


@needs_tma
def test_launch_path_writes_the_map_of_each_calls_cache(rng, monkeypatch, encoder):
    drv = two_gpu_node(monkeypatch, "bindings")
    paged.reset_caches()
    try:
        case = make_case(rng, [130, 7, 64], next_n=2, heads=64, head_dim=128, block_size=64)
        arrays = {name: getattr(case, name) for name in ("q", "kv_cache", "weights", "context_lens", "block_table")}
        other_cache = arrays["kv_cache"].copy()
        maps = []
        for cache in (arrays["kv_cache"], other_cache, arrays["kv_cache"]):
            args = {name: dlpack.DLPackArray(a.ctypes.data, a.shape, "float8_e4m3fn" if name == "q" else a.dtype.name,
                                             (dlpack.DL_CUDA, 0), owner=a)
                    for name, a in {**arrays, "kv_cache": cache}.items()}
            out = dlpack.DLPackArray(case.out.ctypes.data, case.out.shape, "float32", (dlpack.DL_CUDA, 0),
                                     owner=case.out)
            rawindexer.fp8_paged_mqa_logits(**args, max_context_len=case.max_context_len, out=out, variant="tma")
            kernargs = drv.launches()[-1][1][7]
            maps.append(int.from_bytes(kernargs[112:120], "little"))
        assert maps == [arrays["kv_cache"].ctypes.data, other_cache.ctypes.data, arrays["kv_cache"].ctypes.data]
        # encoded once per distinct cache pointer (besides the templates' placeholder pointers), never per call
        real = (arrays["kv_cache"].ctypes.data, other_cache.ctypes.data)
        assert [c[0] for c in encoder if c[0] in real] == list(real)
    finally:
        paged.reset_caches()


@needs_tma
def test_auto_is_tma_where_built_else_the_exact_f16():
    family = paged._family("sm_90a")
    assert family.resolve(64, 128, 64) == family.resolve(64, 128, 64, "auto") == "tma"
    assert family.resolve(64, 128, 16) == family.resolve(32, 64, 1) == "f16"
    assert family.resolve(64, 128, 64, "f16") == "f16", "an explicit design stands"
    # with the call's shape: tma4 at next_n x H = 96 / 128 from AUTO_TMA4_MIN_TILES tiles (docs/PAGED.md "Session 19")
    from rawindexer.dispatch.paged_sm90 import AUTO_TMA4_MIN_TILES

    def shape(batch, next_n, heads, ctx):
        return PagedProblem(batch, next_n, heads, 128, 64, ctx, -(-ctx // 64), ctx, True, False, "e4m3fn", 4096)
    enough = AUTO_TMA4_MIN_TILES * 64  # keys over the batch at full length
    assert family.resolve(64, 128, 64, None, shape(64, 2, 64, enough // 64)) == "tma4"
    assert family.resolve(32, 128, 64, None, shape(256, 3, 32, enough // 256)) == "tma4"
    assert family.resolve(64, 128, 64, None, shape(64, 2, 64, enough // 64 - 64)) == "tma", "a tile short per sequence"
    assert family.resolve(64, 128, 64, None, shape(64, 1, 64, 1 << 17)) == "tma", "N = 64 stays on tma"
    assert family.resolve(64, 128, 64, "tma", shape(64, 2, 64, 1 << 17)) == "tma", "an explicit design stands"
    assert family.resolve(64, 128, 16, None, shape(64, 2, 64, 1 << 17)) == "f16", "tma4 is block size 64 only"
    assert family.entry(64, 128, 64)["symbol"] == "fp8_paged_mqa_logits_sm90_h64_d128_bs64_tma"
    assert family.is_supported(64, 128, 16) and family.is_supported(64, 128, 64)
    with pytest.raises(ValueError, match="^variant: "):
        family.resolve(64, 128, 64, "bf16")
