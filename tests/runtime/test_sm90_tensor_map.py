"""The sm_90a "tmas" design on the CPU: K's tensor map in the kernargs (dispatch/sm90_tensor_map.py), the "auto"
default's choice between "tmas" and "wg", and the launch path's re-encoding per K pointer against a fake driver
(the encoder is replaced: cuTensorMapEncodeTiled needs a real driver)."""
from __future__ import annotations

import dataclasses
import json

import pytest

import rawindexer
from rawindexer import api
from rawindexer.dispatch import sm90, sm90_tensor_map
from rawindexer.dispatch.base import Pointers, Problem, Tunables

from fake_cuda import stream_of, two_gpu_node


def _has_tmas() -> bool:
    from rawindexer.kernel_files import kernel_dir

    manifest = kernel_dir() / "manifest.json"
    if not manifest.exists():
        return False
    kernels = json.loads(manifest.read_text()).get("targets", {}).get("sm_90a", {}).get("kernels", {})
    return any(k["params"].get("design") == "tmas" for k in kernels.values())


pytestmark = pytest.mark.skipif(not _has_tmas(), reason="the kernel directory has no sm_90a tmas kernels (run make)")


def fake_map(ptr: int, n: int, head_dim: int, *layout: int) -> bytes:
    """128 bytes that name their inputs, so a test can read back which pointer (and, for Q's map, which block size
    and box) a launch's map was made for."""
    return b"".join(v.to_bytes(8, "little") for v in (ptr, n, head_dim, *layout)).ljust(128, b"\0")


@pytest.fixture
def encoder(monkeypatch):
    calls: list[tuple[int, ...]] = []

    def encode(ptr: int, n: int, head_dim: int, *layout: int) -> bytes:
        calls.append((ptr, n, head_dim, *layout))
        return fake_map(ptr, n, head_dim, *layout)

    monkeypatch.setattr(sm90_tensor_map, "encoder", encode)
    return calls


def _family(impl: str | None = None):
    from rawindexer.dispatch.sm90 import Sm90Family
    from rawindexer.kernel_files import kernel_dir

    return Sm90Family(kernel_dir(), design=impl)


def _slot(plan) -> dict:
    return plan.config["k_tensor_map"]["slot"]


PTRS = Pointers(*[0x100000 * (i + 1) for i in range(7)])


def test_tmas_plan_carries_the_maps_of_its_k_and_q_pointers(encoder):
    plan = _family("tmas").plan(Problem(4096, 32768, 32, 128, 32768, True), Tunables(), PTRS, 132)
    assert plan.symbol == "fp8_mqa_logits_sm90_h32_d128_bm16_tmas"
    assert plan.block == (640, 1, 1) and plan.grid == (256, 1, 1)
    # (+ 8: the "Q full" mbarrier of the Q boxes, v19)
    assert plan.shared_mem == sm90_tensor_map.shared_mem(16, 32, 128, 4) + 8 <= 227 * 1024
    slot, q_slot = _slot(plan), plan.config["q_tensor_map"]["slot"]
    assert plan.kernargs[slot["offset"]:slot["offset"] + 128] == fake_map(PTRS.k, 32768, 128)
    assert plan.kernargs[q_slot["offset"]:q_slot["offset"] + 128] == fake_map(PTRS.q, 4096 * 32, 128, 0, 128)
    assert int.from_bytes(plan.kernargs[8:16], "little") == PTRS.k, "the k slot keeps the pointer too"
    assert int.from_bytes(plan.kernargs[0:8], "little") == PTRS.q, "and the q slot its pointer"
    assert encoder == [(PTRS.k, 32768, 128), (PTRS.q, 4096 * 32, 128, 0, 128)]


def test_auto_takes_tmas_for_long_rows_and_wg_or_tmaq_otherwise(encoder):
    fam = _family()
    assert fam.design == "auto" and fam.is_supported(64, 128) and fam.is_supported(32, 64)
    long_rows = fam.plan(Problem(4096, 32768, 64, 128, 32768, True), Tunables(), PTRS, 132)  # (H = 32: balanced)
    assert long_rows.config["design"] == "tmas" and long_rows.symbol.endswith("_bm8_tmas")
    short_rows = fam.plan(Problem(512, 1024, 32, 128, 1024, True), Tunables(), PTRS, 132)
    assert short_rows.config["design"] == "wg" and "k_tensor_map" not in short_rows.config
    paired = fam.plan(Problem(1000, 1024, 64, 128, 1024, True), Tunables(), PTRS, 132)  # H = 64: row-block pairs
    assert paired.config["design"] == "wgpr" and "k_tensor_map" not in paired.config
    # short rows from 1024 rows: the Q-shared persistent design, which takes K's tensor map too
    q_shared = fam.plan(Problem(1024, 1024, 64, 128, 1024, True), Tunables(), PTRS, 132)
    assert q_shared.config["design"] == "tmaq" and q_shared.config["k_tensor_map"]["n"] == 1024
    # a caller's block_m / num_warps are the wg heuristic's knobs: auto honours them with wg
    fixed = fam.plan(Problem(4096, 32768, 64, 128, 32768, True), Tunables(block_m=2), PTRS, 132)
    assert fixed.config["design"] == "wg" and fixed.config["block_m"] == 2


def test_tmas_rejects_a_misaligned_k(encoder):
    with pytest.raises(ValueError, match="16-byte"):
        _family("tmas").plan(Problem(64, 8192, 32, 128, 8192, True), Tunables(),
                             Pointers(16, 8, 16, 16, 16, 16, 16), 132)


def test_per_k_pointer_launch_rebinds_only_when_k_changes(encoder):
    bound: list[bytes] = []
    launched: list[tuple] = []

    def bind(kernargs: bytes):
        bound.append(kernargs)
        index = len(bound) - 1
        return lambda stream, *ptrs: launched.append((index, stream, ptrs))

    slot = {"name": "k_map", "offset": 112, "size": 128}
    go = sm90_tensor_map.PerKPointerLaunch(bind, bytes(240), slot, 8192, 128)
    a, b = (0x1000, 0x2000, 0x3000, 0, 0, 0, 0), (0x1000, 0x4000, 0x3000, 0, 0, 0, 0)
    go(7, *a)
    go(7, *a)
    go(8, *b)
    go(9, *a)
    assert [i for i, _, _ in launched] == [0, 0, 1, 0] and len(bound) == 2
    assert bound[0][112:240] == fake_map(0x2000, 8192, 128) and bound[1][112:240] == fake_map(0x4000, 8192, 128)
    assert encoder == [(0x2000, 8192, 128), (0x4000, 8192, 128)]


def test_tmaq_plan_carries_the_maps_of_its_k_and_q_pointers(encoder):
    """tmaq (v19) copies each row block's Q as one box of Q's own map: Q viewed as M * H rows of head_dim bytes,
    box 128 rows, in the q_map slot after K's map."""
    plan = _family("tmaq").plan(Problem(1000, 1024, 64, 128, 1024, True), Tunables(), PTRS, 132)
    assert plan.symbol == "fp8_mqa_logits_sm90_h64_d128_bm2_tmaq"
    k_slot, q_slot = plan.config["k_tensor_map"]["slot"], plan.config["q_tensor_map"]["slot"]
    assert q_slot["name"] == "q_map" and q_slot["offset"] >= k_slot["offset"] + 128
    assert plan.kernargs[k_slot["offset"]:k_slot["offset"] + 128] == fake_map(PTRS.k, 1024, 128)
    assert plan.kernargs[q_slot["offset"]:q_slot["offset"] + 128] == fake_map(PTRS.q, 1000 * 64, 128, 0, 128)
    assert sm90_tensor_map.map_geometry(1000 * 64, 128, 0, 128) == ([128, 64000], [128], [128, 128])
    with pytest.raises(ValueError, match="q must be 16-byte aligned"):
        _family("tmaq").plan(Problem(1000, 1024, 64, 128, 1024, True), Tunables(), dataclasses.replace(PTRS, q=PTRS.q + 8), 132)


def test_per_pointer_launch_with_a_q_map_rebinds_when_k_or_q_changes(encoder):
    bound: list[bytes] = []

    def bind(kernargs: bytes):
        bound.append(kernargs)
        return lambda stream, *ptrs: None

    k_slot, q_slot = {"name": "k_map", "offset": 112, "size": 128}, {"name": "q_map", "offset": 240, "size": 128}
    go = sm90_tensor_map.PerKPointerLaunch(bind, bytes(368), k_slot, 1024, 128,
                                           q_map={"slot": q_slot, "rows": 4096, "head_dim": 128})
    calls = [(0x1000, 0x2000), (0x1000, 0x2000), (0x5000, 0x2000), (0x1000, 0x4000), (0x5000, 0x2000)]
    for q, k in calls:
        go(0, q, k, 0, 0, 0, 0, 0)
    assert len(bound) == 3, "one bound launch per distinct (K, Q) pair"
    for kernargs, (q, k) in zip(bound, [(0x1000, 0x2000), (0x5000, 0x2000), (0x1000, 0x4000)]):
        assert kernargs[112:240] == fake_map(k, 1024, 128)
        assert kernargs[240:368] == fake_map(q, 4096, 128, 0, 128)


@pytest.fixture(params=["bindings", "ctypes", "shim", "ext"])
def cuda2(monkeypatch, request):
    return two_gpu_node(monkeypatch, request.param)


def test_launch_path_writes_the_map_of_each_calls_k(cuda2, encoder):
    """The default ("auto") on long rows launches tmas through the launch path; each distinct K pointer gets its
    own map, a repeated one reuses the bound launch."""
    api._RAW.clear()
    ptrs = [0x100000 * (i + 1) for i in range(7)]
    other_k = ptrs[:1] + [0x900000] + ptrs[2:]
    kw = dict(M=64, N=8192, num_heads=64, head_dim=128, stream=stream_of(0, 5), device="cuda")
    for p in (ptrs, ptrs, other_k, ptrs):
        t = rawindexer.launch(*p, **kw)
        args = cuda2.launches()[-1][1][7]
        slot = t.config["k_tensor_map"]["slot"]
        assert t.symbol.endswith("_tmas")
        assert args[slot["offset"]:slot["offset"] + 128] == fake_map(p[1], 8192, 128)
        assert tuple(int.from_bytes(args[8 * i:8 * i + 8], "little") for i in range(7)) == tuple(p)
    # the template's placeholder K and Q, then one K map per real K pointer (the repeats reuse theirs), each bound
    # launch with the map of its Q (the same Q pointer throughout)
    k_maps = [c[0] for c in encoder[2:] if len(c) == 3]
    assert k_maps == [ptrs[1], other_k[1]] and {c[0] for c in encoder[2:] if len(c) == 5} == {ptrs[0]}
    api._RAW.clear()


def test_launch_path_binds_the_balanced_schedule_like_tmas(cuda2, encoder):
    """Where "auto" takes the balanced AUTO_BALANCED (H = 64, long rows, no clean_logits), the launch path writes each
    call's K map the same way; the grid is one block per SM of the (fake) device."""
    api._RAW.clear()
    ptrs = [0x100000 * (i + 1) for i in range(7)]
    other_k = ptrs[:1] + [0x900000] + ptrs[2:]
    kw = dict(M=2048, N=65536, num_heads=64, head_dim=128, clean_logits=False, stream=stream_of(0, 5), device="cuda")
    for p in (ptrs, other_k, ptrs):
        t = rawindexer.launch(*p, **kw)
        launch = cuda2.launches()[-1][1]
        args = launch[7]
        slot = t.config["k_tensor_map"]["slot"]
        assert t.symbol.endswith("_" + sm90.AUTO_BALANCED) and t.config["balanced_blocks"] == t.grid[0]
        assert args[slot["offset"]:slot["offset"] + 128] == fake_map(p[1], 65536, 128)
        assert tuple(int.from_bytes(args[8 * i:8 * i + 8], "little") for i in range(7)) == tuple(p)
    api._RAW.clear()


def test_launch_path_writes_the_maps_of_each_calls_k_and_q(cuda2, encoder):
    """The default at 1024^2 H 64 is tmaq, whose kernargs hold Q's map as well as K's: a call with a new Q pointer
    (same K) must get a map of its own Q, never the previous call's."""
    api._RAW.clear()
    ptrs = [0x100000 * (i + 1) for i in range(7)]
    other_q = [0xA00000] + ptrs[1:]
    other_k = ptrs[:1] + [0x900000] + ptrs[2:]
    kw = dict(M=1024, N=1024, num_heads=64, head_dim=128, stream=stream_of(0, 5), device="cuda")
    for p in (ptrs, other_q, ptrs, other_k):
        t = rawindexer.launch(*p, **kw)
        args = cuda2.launches()[-1][1][7]
        k_slot, q_slot = t.config["k_tensor_map"]["slot"], t.config["q_tensor_map"]["slot"]
        assert t.symbol.endswith("_tmaq")
        assert args[k_slot["offset"]:k_slot["offset"] + 128] == fake_map(p[1], 1024, 128)
        assert args[q_slot["offset"]:q_slot["offset"] + 128] == fake_map(p[0], 1024 * 64, 128, 0, 128)
        assert tuple(int.from_bytes(args[8 * i:8 * i + 8], "little") for i in range(7)) == tuple(p)
    api._RAW.clear()
