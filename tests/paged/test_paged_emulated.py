"""fp8_paged_mqa_logits: the gfx950 decode binary on the emulator against the float64 reference.

Every launch runs under the emulator's memcheck (only the operands' spans are accessible), outputs are
NaN-poisoned with padded rows, block tables are shuffled, shared between sequences and poisoned past
each sequence, and the gate is the exact mask plus |out - ref| <= 1e-5 * T per logit.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import rawindexer
from rawindexer.emulator import MemoryFault
from rawindexer.testing.paged_cases import make_case, ragged_lengths
from rawindexer.testing.paged_grading import EPS, grade_paged
from rawindexer.testing.paged_reference import fp8_paged_mqa_logits_ref, fuse_kv_cache, split_kv_cache
from rawindexer.validation import ValidationError
from paged.fake_tensor_map import fake_tensor_map_encoder  # noqa: F401 (autouse: auto plans tma at block size 64)


def run_and_grade(case, clean: bool, **tunables):
    case.poison()
    got = rawindexer.fp8_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean_logits=clean, out=case.out, **tunables)
    assert got is case.out
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean, with_bound=True)
    return grade_paged(case.out, ref, bound, case.lengths(), clean)


# (heads, head_dim) x block size x next_n x context-length form x clean, each with the ragged lengths
# 0, 1, bs-1, bs, bs+1 and a long one, shared prefix blocks and a forced split where it matters.
SHAPES = [(32, 128), (64, 64), (128, 128), (32, 64)]
SWEEP = [
    (shape, bs, next_n, two_d, clean)
    for (shape, bs), next_n, two_d, clean in zip(
        itertools.cycle(itertools.product(SHAPES, (1, 16, 64))),
        (1, 2, 3, 4, 1, 2, 3, 4, 2, 1, 4, 3), (False, True, False, True, True, False) * 2,
        (True, True, False, False, True, False) * 2)
] + [((64, 128), 64, 2, True, False), ((64, 128), 1, 1, False, True), ((128, 64), 16, 4, False, True),
     ((128, 64), 64, 3, True, False)]


@pytest.mark.parametrize("shape,block_size,next_n,two_d,clean", SWEEP)
def test_ragged_sweep(rng, shape, block_size, next_n, two_d, clean):
    heads, head_dim = shape
    long = {1: 70, 16: 90, 64: 200}[block_size]
    case = make_case(rng, ragged_lengths(block_size, long), next_n=next_n, heads=heads, head_dim=head_dim,
                     block_size=block_size, two_d=two_d, share_blocks=True)
    grade = run_and_grade(case, clean)
    assert grade.ok, grade.message


@pytest.mark.parametrize("split_n,num_warps", [(2, 1), (3, 4), (7, 2)])
def test_context_split_across_workgroups(rng, split_n, num_warps):
    """The same answer whichever way a sequence is cut into (split, wave) pieces, including splits
    with no tile at all."""
    case = make_case(rng, [300, 0, 33, 129], next_n=2, heads=32, head_dim=64, block_size=16, share_blocks=True)
    grade = run_and_grade(case, True, split_n=split_n, num_warps=num_warps)
    assert grade.ok, grade.message


def test_all_lengths_zero_fills_only(rng):
    case = make_case(rng, [0, 0], next_n=3, heads=32, head_dim=128, block_size=64, extra_columns=100)
    grade = run_and_grade(case, False)
    assert grade.ok and np.isnan(case.out).all(), grade.message
    grade = run_and_grade(case, True)
    assert grade.ok and np.isneginf(case.out).all(), grade.message


def test_emulator_memcheck_catches_block_outside_cache(rng):
    """Block-table entries are the caller's contract; one outside the cache is reported, not read."""
    case = make_case(rng, [40, 70], heads=32, head_dim=64, block_size=16)
    # The cache sits inside a larger allocation, so the bytes next to it exist but are not registered.
    guard = 4 * case.kv_cache[0].nbytes
    backing = np.zeros(case.kv_cache.nbytes + 2 * guard, np.uint8)
    kv_cache = backing[guard:guard + case.kv_cache.nbytes].reshape(case.kv_cache.shape)
    kv_cache[...] = case.kv_cache
    num_blocks = kv_cache.shape[0]
    for bad in (num_blocks, -1):
        table = case.block_table.copy()
        table[1, 2] = bad
        case.poison()
        with pytest.raises(MemoryFault):
            rawindexer.fp8_paged_mqa_logits(case.q, kv_cache, case.weights, case.context_lens, table,
                                            case.max_context_len, out=case.out)
    # the same call with the good table passes under the same memcheck
    rawindexer.fp8_paged_mqa_logits(case.q, kv_cache, case.weights, case.context_lens, case.block_table,
                                    case.max_context_len, clean_logits=True, out=case.out)


def test_allocates_output_and_raw_launch_matches(rng):
    case = make_case(rng, [50, 17], next_n=2, heads=64, head_dim=128, block_size=16, row_pad=0, two_d=True)
    allocated = rawindexer.fp8_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens,
                                                case.block_table, case.max_context_len, clean_logits=True)
    assert allocated.shape == case.out.shape and allocated.dtype == np.float32
    out = np.full((4, case.max_context_len + 8), np.nan, np.float32)
    B, next_n, H, D = case.q.shape
    plan = rawindexer.launch_paged(
        case.q.ctypes.data, case.kv_cache.ctypes.data, case.weights.ctypes.data, case.context_lens.ctypes.data,
        case.block_table.ctypes.data, out.ctypes.data, batch=B, next_n=next_n, num_heads=H, head_dim=D,
        block_size=16, num_blocks=case.kv_cache.shape[0], max_blocks=case.block_table.shape[1],
        max_context_len=case.max_context_len, out_row_stride=out.shape[1], context_lens_2d=True,
        clean_logits=True, device="emulator")
    assert plan.symbol == "fp8_paged_mqa_logits_h64_d128_bs16"
    np.testing.assert_array_equal(out[:, :case.max_context_len], allocated)
    assert np.isnan(out[:, case.max_context_len:]).all()  # row padding never written


def test_grader_rejects_small_errors_and_stray_writes(rng):
    case = make_case(rng, [30, 64], heads=32, head_dim=64, block_size=16)
    assert run_and_grade(case, False).ok
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens,
                                          case.block_table, case.max_context_len, False, with_bound=True)
    bad = case.out.copy()
    r, c = np.argwhere(bound > 0)[0]
    bad[r, c] += 3 * EPS * bound[r, c]
    assert grade_paged(bad, ref, bound, case.lengths(), False).failing == 1
    bad = case.out.copy()
    bad[0, case.max_context_len - 1] = 0.0
    assert grade_paged(bad, ref, bound, case.lengths(), False).overwritten == 1


def test_fused_cache_round_trip(rng):
    keys = rng.integers(0, 256, (5, 16, 64), dtype=np.uint8)
    scales = rng.uniform(0, 3, (5, 16)).astype(np.float32)
    fused = fuse_kv_cache(keys, scales)
    assert fused.shape == (5, 16, 1, 68)
    # within a block: 16 * 64 key bytes, then 16 float32 scales
    assert fused.reshape(5, -1)[2, :1024].tobytes() == keys[2].tobytes()
    assert fused.reshape(5, -1)[2, 1024:].tobytes() == scales[2].tobytes()
    k2, s2 = split_kv_cache(fused, 64)
    np.testing.assert_array_equal(k2, keys)
    np.testing.assert_array_equal(s2, scales)


@pytest.mark.parametrize("change,name", [
    (lambda a: {**a, "kv_cache": a["kv_cache"][..., :-1].copy()}, "kv_cache"),
    (lambda a: {**a, "block_table": a["block_table"].astype(np.int64)}, "block_table"),
    (lambda a: {**a, "context_lens": np.zeros(3, np.int32)}, "context_lens"),
    (lambda a: {**a, "weights": a["weights"][:, :-1].copy()}, "weights"),
    (lambda a: {**a, "q": a["q"][:, :1].copy()}, "weights"),  # next_n 1: weights no longer [B*1, H]
    (lambda a: {**a, "out": np.zeros((4, a["max_context_len"] - 1), np.float32)}, "out"),
    (lambda a: {**a, "max_context_len": -1}, "max_context_len"),
    (lambda a: {**a, "kv_cache": np.frombuffer(bytearray(a["kv_cache"].nbytes + 16), np.uint8)[4:4 + a["kv_cache"].nbytes]
                .reshape(a["kv_cache"].shape)}, "kv_cache"),
])
def test_validation_names_the_argument(rng, change, name):
    case = make_case(rng, [10, 20], next_n=2, heads=32, head_dim=64, block_size=16)
    args = {"q": case.q, "kv_cache": case.kv_cache, "weights": case.weights, "context_lens": case.context_lens,
            "block_table": case.block_table, "max_context_len": case.max_context_len, "out": None}
    args = change(args)
    with pytest.raises(ValidationError, match=f"^{name}:"):
        rawindexer.fp8_paged_mqa_logits(**args)


def test_unsupported_block_size_and_next_n_are_named(rng):
    case = make_case(rng, [10], next_n=1, heads=32, head_dim=64, block_size=8)
    with pytest.raises(ValidationError, match="block_size"):
        rawindexer.fp8_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                        case.max_context_len)
    q5 = np.zeros((1, 5, 32, 64), np.uint8)
    with pytest.raises(ValidationError, match="^next_n:"):
        rawindexer.fp8_paged_mqa_logits(q5, case.kv_cache, np.zeros((5, 32), np.float32), case.context_lens,
                                        case.block_table, case.max_context_len)
    assert rawindexer.is_paged_supported(64, 128, 64) and not rawindexer.is_paged_supported(64, 128, 8)


@pytest.mark.slow
@pytest.mark.parametrize("block_size", [1, 16, 64])
def test_long_contexts(rng, block_size):
    case = make_case(rng, [2500, 1, 1900], next_n=2, heads=64, head_dim=128, block_size=block_size,
                     share_blocks=True)
    grade = run_and_grade(case, True, split_n=5)
    assert grade.ok, grade.message


def test_sm90_plans_fit_the_sm(rng):
    """Host side of the sm_90a twin (no GPU needed): every (H, D, next_n) fits one SM's shared memory, the
    grid is (B, split) and split_n respects the minimum tiles per split. Skipped where nvcc did not build it."""
    from rawindexer import paged_kernels as pk
    from rawindexer.dispatch.base import KernelNotBuiltError
    from rawindexer.dispatch.paged_gfx950 import PagedPointers, PagedProblem
    from rawindexer.dispatch.paged_sm90 import (MAX_BLOCKS_PER_SM, MIN_TILES_PER_SPLIT, SHARED_PER_SM,
                                                PagedSm90Family, four_warpgroups_win)

    family = PagedSm90Family()
    try:
        family.target
    except KernelNotBuiltError:
        pytest.skip("sm_90a decode kernels not built (no nvcc)")
    for heads, head_dim, next_n in itertools.product(pk.HEADS, pk.HEAD_DIMS, range(1, 5)):
        batch, ctx = int(rng.integers(1, 300)), int(rng.choice([rng.integers(1, 8192), rng.integers(1, 200_000)]))
        p = PagedProblem(batch, next_n, heads, head_dim, 64, ctx, -(-ctx // 64), ctx, True, False, "e4m3fn", 4096)
        for design in ("f16", "fp8", "tma"):
            plan = family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design=design)
            assert plan.shared_mem == pk.sm90_shared_bytes(heads, head_dim, next_n, design) <= SHARED_PER_SM
            threads = family.entry(heads, head_dim, 64, design)["resources_by_next_n"][str(next_n)]["max_threads"]
            assert threads == pk.TARGETS["sm_90a"].threads(design) or (
                design == "tma" and threads == 256 and heads <= 64 and 64 < heads * next_n <= 128)
            assert plan.grid[0] == batch and plan.block == (threads, 1, 1)
            # small batches may split down to one tile; where MIN_TILES_PER_SPLIT-tile splits fill every
            # possible resident block (132 SMs x MAX_BLOCKS_PER_SM) the floor holds
            tiles = -(-ctx // 64)
            floor = MIN_TILES_PER_SPLIT if batch * -(-tiles // MIN_TILES_PER_SPLIT) >= 132 * MAX_BLOCKS_PER_SM else 1
            assert plan.grid[1] == 1 or -(-ctx // 64) // plan.grid[1] >= floor
            # one kernel per next_n in the cubin (its own register allocation), one manifest entry per design
            assert plan.symbol == f"fp8_paged_mqa_logits_sm90_h{heads}_d{head_dim}_bs64_{design}_n{next_n}"
        # the default ("auto"): tma at block size 64 (tma4 where four_warpgroups_win: test_sm90_tma4_plan), f16 at
        # the block sizes tma is not built for
        auto = "tma4" if four_warpgroups_win(p) else "tma"
        assert family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132).symbol.endswith(f"_{auto}_n{next_n}")
        p16 = PagedProblem(batch, next_n, heads, head_dim, 16, ctx, -(-ctx // 16), ctx, True, False, "e4m3fn", 4096)
        assert family.plan(p16, PagedPointers(0, 0, 0, 0, 0, 0), 132).symbol.endswith(f"_f16_n{next_n}")
        with pytest.raises(ValueError, match="^variant:"):
            family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="bf16")


def test_sm90_persistent_plan(tmp_path, rng):
    """A persistent "tma" build (kernels/sm90/paged_tma.cuh, PAGED_TMA_PERSISTENT: the kernels' argument list ends in
    `batch`) is launched on grid (min(B x split_n, resident slots), 1, 1) with B in that argument; the shipped build
    keeps grid (B, split_n). Host only: a copy of the built manifest with the argument added."""
    import json
    import shutil

    from rawindexer import paged_kernels as pk
    from rawindexer.dispatch import paged_sm90
    from rawindexer.dispatch.base import KernelNotBuiltError
    from rawindexer.dispatch.paged_gfx950 import PagedPointers, PagedProblem, best_split
    from rawindexer.dispatch.paged_sm90 import min_tiles_per_split
    from rawindexer.kernel_files import manifest_path

    try:
        paged_sm90.PagedSm90Family().target
    except KernelNotBuiltError:
        pytest.skip("sm_90a decode kernels not built (no nvcc)")
    manifest = json.loads(manifest_path(None).read_text())
    kernels = manifest["ops"][pk.OP]["sm_90a"]["kernels"]
    for entry in kernels.values():
        if entry["params"]["design"] == "tma":
            assert not paged_sm90.is_persistent(entry)
            last = entry["args"][-1]
            entry["args"].append({"name": "batch", "offset": last["offset"] + last["size"], "size": 4})
            entry["kernarg_size"] = last["offset"] + last["size"] + 8
    shutil.copy(manifest_path(None).parent / pk.TARGETS["sm_90a"].code_object, tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    shipped, persistent = paged_sm90.PagedSm90Family(), paged_sm90.PagedSm90Family(tmp_path)
    for _ in range(20):
        batch, ctx, next_n = int(rng.integers(1, 300)), int(rng.integers(1, 200_000)), int(rng.integers(1, 5))
        p = PagedProblem(batch, next_n, 64, 128, 64, ctx, -(-ctx // 64), ctx, True, False, "e4m3fn", 4096)
        ptrs = PagedPointers(0, 0, 0, 0, 0, 0)
        split = int(rng.integers(0, 50))
        a, b = shipped.plan(p, ptrs, 132, split, design="tma"), persistent.plan(p, ptrs, 132, split, design="tma")
        assert a.grid == (batch, a.config["split_n"], 1)
        tiles, slots = -(-ctx // 64), b.config["slots"]
        assert slots == a.config["slots"] and b.symbol == a.symbol
        # the persistent split rule: best_split over up to PERSISTENT_MAX_WAVES slots' worth of units
        assert b.config["split_n"] == (split or best_split(batch, tiles, slots, min_tiles_per_split(batch, tiles, slots),
                                                           paged_sm90.PERSISTENT_MAX_WAVES))
        assert b.grid == (min(batch * b.config["split_n"], b.config["slots"]), 1, 1)
        off = next(x["offset"] for x in persistent.entry(64, 128, 64, "tma")["args"] if x["name"] == "batch")
        assert int.from_bytes(b.kernargs[off:off + 4], "little") == batch
        if b.config["split_n"] == a.config["split_n"]:
            assert b.kernargs[:off] == a.kernargs[:off]  # the common list and the map unchanged
    old = paged_sm90.PERSISTENT_MAX_GRID
    try:
        paged_sm90.PERSISTENT_MAX_GRID = 3
        p = PagedProblem(64, 2, 64, 128, 64, 32768, 512, 32768, True, False, "e4m3fn", 4096)
        assert persistent.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="tma").grid == (3, 1, 1)
        paged_sm90.PERSISTENT_MAX_GRID = 0
        # 256 x 32768: 33 splits, 16 units on each of the 528 blocks (the one-unit grid: 16 splits, 4096 blocks of 32
        # tiles, balanced_split's 8 waves)
        p = PagedProblem(256, 2, 64, 128, 64, 32768, 512, 32768, True, False, "e4m3fn", 4096)
        assert persistent.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="tma").grid == (528, 1, 1)
        assert shipped.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="tma").grid == (256, 16, 1)
    finally:
        paged_sm90.PERSISTENT_MAX_GRID = old


def test_sm90_four_warpgroup_plan(tmp_path, rng):
    """The four-warpgroup experiment form of "tma" (kernels/sm90/paged_tma_wg4.cuh, PAGED_TMA_WG4: 640-thread kernels
    at next_n x H = 96 / 128, the persistent argument list): the host reads the block's shape from the manifest's
    max_threads, so such a kernel gets one block per SM, the shared memory of four rings and two Q / weight buffers,
    and a grid of at most one block per SM; the other next_n keep the one-warpgroup block. Host only: a copy of the
    built manifest with `batch` added and max_threads 640 on those kernels."""
    import json
    import shutil

    from rawindexer import paged_kernels as pk
    from rawindexer.dispatch import paged_sm90
    from rawindexer.dispatch.base import KernelNotBuiltError
    from rawindexer.dispatch.paged_gfx950 import PagedPointers, PagedProblem
    from rawindexer.kernel_files import manifest_path

    try:
        paged_sm90.PagedSm90Family().target
    except KernelNotBuiltError:
        pytest.skip("sm_90a decode kernels not built (no nvcc)")
    # four 4-slot rings of 64 x (128 + 4) bytes, two buffers of Q and weights (2 x 64 rows x (128 + 4)), 32 mbarriers
    assert pk.sm90_shared_bytes(64, 128, 2, "tma", groups=4) == 4 * 4 * 64 * 132 + 2 * 2 * 64 * 132 + 16 * 16 + 1024
    manifest = json.loads(manifest_path(None).read_text())
    for entry in manifest["ops"][pk.OP]["sm_90a"]["kernels"].values():
        if entry["params"]["design"] == "tma":
            last = entry["args"][-1]
            entry["args"].append({"name": "batch", "offset": last["offset"] + last["size"], "size": 4})
            entry["kernarg_size"] = last["offset"] + last["size"] + 8
            for nn, res in entry["resources_by_next_n"].items():
                if 64 < entry["params"]["heads"] * int(nn) <= 128:
                    res["max_threads"] = 4 * pk.SM90_TMA_THREADS
    shutil.copy(manifest_path(None).parent / pk.TARGETS["sm_90a"].code_object, tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    family = paged_sm90.PagedSm90Family(tmp_path)
    for _ in range(10):
        batch, ctx = int(rng.integers(1, 300)), int(rng.choice([rng.integers(1, 8192), rng.integers(1, 200_000)]))
        for heads, next_n in ((64, 2), (32, 4), (32, 3), (128, 1), (64, 1)):
            p = PagedProblem(batch, next_n, heads, 128, 64, ctx, -(-ctx // 64), ctx, True, False, "e4m3fn", 4096)
            plan = family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="tma")
            groups = 4 if 64 < heads * next_n <= 128 else 1
            assert plan.block == (groups * pk.SM90_TMA_THREADS, 1, 1)
            shared = pk.sm90_shared_bytes(heads, 128, next_n, "tma", groups)
            assert plan.shared_mem == shared <= paged_sm90.SHARED_PER_SM
            if groups == 4:
                assert plan.config["slots"] == 132 and plan.grid == (min(batch * plan.config["split_n"], 132), 1, 1)


def test_sm90_tma4_plan(rng):
    """Design "tma4" (opt-in; kernels/sm90/paged_tma_wg4.cuh) from the built manifest: its kernels at next_n x H = 96
    / 128 are 640-thread blocks, one per SM, on a grid of at most one block per SM with `batch` in their arguments and
    the four-ring shared memory; its other next_n run the persistent one-warpgroup form (160 threads); "auto" picks
    it at N = 96 / 128 from AUTO_TMA4_MIN_TILES tiles, else "tma". Host only."""
    from rawindexer import paged_kernels as pk
    from rawindexer.dispatch import paged_sm90
    from rawindexer.dispatch.base import KernelNotBuiltError
    from rawindexer.dispatch.paged_gfx950 import PagedPointers, PagedProblem

    family = paged_sm90.PagedSm90Family()
    try:
        family.target
    except KernelNotBuiltError:
        pytest.skip("sm_90a decode kernels not built (no nvcc)")
    if family.entry(64, 128, 64, "tma4") is None:
        pytest.skip("this build has no tma4 kernels")
    for _ in range(10):
        batch, ctx = int(rng.integers(1, 300)), int(rng.choice([rng.integers(1, 8192), rng.integers(1, 200_000)]))
        for heads, head_dim, next_n in itertools.product(pk.HEADS, pk.HEAD_DIMS, range(1, 5)):
            p = PagedProblem(batch, next_n, heads, head_dim, 64, ctx, -(-ctx // 64), ctx, True, False, "e4m3fn", 4096)
            plan = family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132, design="tma4")
            four = 64 < heads * next_n <= 128
            assert plan.symbol == f"fp8_paged_mqa_logits_sm90_h{heads}_d{head_dim}_bs64_tma4_n{next_n}"
            assert plan.block == ((4 if four else 1) * pk.SM90_TMA_THREADS, 1, 1)
            shared = pk.sm90_shared_bytes(heads, head_dim, next_n, "tma4", 4 if four else 1)
            assert plan.shared_mem == shared <= paged_sm90.SHARED_PER_SM
            slots = plan.config["slots"]
            assert (slots == 132) == four and plan.grid == (min(batch * plan.config["split_n"], slots), 1, 1)
            entry = family.entry(heads, head_dim, 64, "tma4")
            off = next(a["offset"] for a in entry["args"] if a["name"] == "batch")
            assert int.from_bytes(plan.kernargs[off:off + 4], "little") == batch
            auto = family.plan(p, PagedPointers(0, 0, 0, 0, 0, 0), 132).symbol
            routed = four and batch * -(-ctx // 64) >= paged_sm90.AUTO_TMA4_MIN_TILES
            assert auto.endswith(f"_tma4_n{next_n}") == routed == paged_sm90.four_warpgroups_win(p), (auto, p)
            assert routed or auto.endswith(f"_tma_n{next_n}")


@pytest.mark.parametrize("split_n,num_warps", [(1, 1), (3, 2), (2, 4)])
def test_k_read_once_per_split(rng, split_n, num_warps):
    """Emulated global-load bytes equal the design's model: per workgroup with work, Q and weights once;
    per wave with n tiles, n + 1 K tiles (32 keys x D bytes + 32 scales, both lane halves) -- each tile of
    the split once, plus the pipeline's clamped prefetch of the split's last tile, a cache hit on hardware
    -- and n + 2 block-table reads (the entries one tile further ahead)."""
    from rawindexer.backends import get_backend

    heads, head_dim, next_n = 32, 128, 2
    case = make_case(rng, [int(rng.integers(200, 400)), 0, 33, 129], next_n=next_n, heads=heads,
                     head_dim=head_dim, block_size=16)
    assert run_and_grade(case, True, split_n=split_n, num_warps=num_warps).ok
    model = 0
    for length in case.lengths().reshape(-1, next_n).max(axis=1):
        tiles = -(-int(length) // 32)
        for split in range(split_n):
            begin, end = tiles * split // split_n, tiles * (split + 1) // split_n
            if begin >= end:
                continue
            model += next_n * heads * (head_dim + 4)
            for wave in range(num_warps):
                n = len(range(begin + wave, end, num_warps))
                if n:
                    model += (n + 1) * (32 * head_dim + 64 * 4) + (n + 2) * 64 * 4
    assert get_backend("emulator").last_stats.vmem_bytes_loaded == model


def test_empty_batch_or_width_launches_nothing():
    kv_cache = np.zeros((4, 16, 1, 68), np.uint8)
    got = rawindexer.fp8_paged_mqa_logits(np.zeros((0, 2, 32, 64), np.uint8), kv_cache, np.zeros((0, 32), np.float32),
                                          np.zeros(0, np.int32), np.zeros((0, 3), np.int32), 40)
    assert got.shape == (0, 40)
    got = rawindexer.fp8_paged_mqa_logits(np.zeros((2, 2, 32, 64), np.uint8), kv_cache, np.zeros((4, 32), np.float32),
                                          np.full(2, 5, np.int32), np.zeros((2, 3), np.int32), 0)
    assert got.shape == (4, 0)


def test_prepared_launch_reads_the_buffers_each_call(rng):
    """prepare once, call many times: each call sees the buffers' current contents (new lengths, new q)."""
    case = make_case(rng, [120, 40], next_n=2, heads=32, head_dim=64, block_size=16, two_d=True)
    case.poison()
    run = rawindexer.prepare_paged_mqa_logits(case.q, case.kv_cache, case.weights, case.context_lens,
                                              case.block_table, case.max_context_len, clean_logits=True,
                                              out=case.out)
    for step in range(3):
        case.context_lens[:] = np.minimum(case.context_lens + 7 * step, [[120], [40]])  # within each table
        case.q[...] = make_case(rng, [1, 1], next_n=2, heads=32, head_dim=64, block_size=16).q
        case.poison()
        assert run() is case.out
        ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens,
                                              case.block_table, case.max_context_len, True, with_bound=True)
        grade = grade_paged(case.out, ref, bound, case.lengths(), True)
        assert grade.ok, f"step {step}: {grade.message}"


def test_best_split_fills_the_last_wave(rng):
    from rawindexer.dispatch.paged_gfx950 import best_split

    assert best_split(64, 512, 528, 4) == 33  # 2112 = 4 full waves of 528 (9 splits: 1.09 waves, 55% busy)
    assert best_split(64, 40, 528, 4) == 8    # at most 10 splits of >= 4 tiles: 512 of 528 slots
    for _ in range(200):
        batch, tiles, slots, min_tiles = (int(rng.integers(1, 1100)), int(rng.integers(1, 9000)),
                                          int(rng.integers(16, 2000)), int(rng.integers(1, 9)))
        split = best_split(batch, tiles, slots, min_tiles)
        assert split == 1 or tiles // split >= min_tiles
        busy = lambda s: batch * s / (slots * -(-(batch * s) // slots))  # noqa: E731
        assert all(busy(split) >= busy(s) - 1e-9 for s in range(1, split + 1))


def test_balanced_split_for_ragged_lengths(rng):
    """sm_90a: the wave-filling split is raised so that no split holds more than MAX_TILES_PER_SPLIT tiles and, while
    splits keep BALANCE_MIN_TILES tiles, toward BALANCE_WAVES waves (ragged lengths; docs/PAGED.md "Session 15"), then
    the best wave fill within one wave's worth above that floor. The H200 cases it was measured on come out as
    measured best."""
    from rawindexer.dispatch import paged_sm90 as ps
    from rawindexer.dispatch.paged_gfx950 import best_split

    assert ps.balanced_split(256, 512, 528, 2) == 16   # 256 x 32768: 8 waves of 32-tile blocks (was one wave)
    assert ps.balanced_split(256, 2048, 528, 2) == 33  # 256 x 131072: 62 tiles, 16 full waves
    assert ps.balanced_split(64, 2048, 528, 33) == 66  # 64 x 131072: 31 tiles, 8 full waves
    assert ps.balanced_split(64, 512, 528, 33) == 33   # 64 x 32768: the heuristic's 15.5-tile blocks stay
    assert ps.balanced_split(256, 64, 528, 2) == 2 and ps.balanced_split(8, 2048, 528, 66) == 66
    for _ in range(300):
        batch, tiles, slots = int(rng.integers(1, 1100)), int(rng.integers(1, 4200)), int(rng.integers(16, 2000))
        split = best_split(batch, tiles, slots, ps.min_tiles_per_split(batch, tiles, slots))
        got = ps.balanced_split(batch, tiles, slots, split)
        assert got >= split and got >= -(-tiles // ps.MAX_TILES_PER_SPLIT)
        if got > split:
            floor = max(-(-tiles // ps.MAX_TILES_PER_SPLIT),
                        min(-(-ps.BALANCE_WAVES * slots // batch), tiles // ps.BALANCE_MIN_TILES))
            window = range(floor, min(floor + -(-slots // batch), tiles + 1))
            busy = lambda s: batch * s / (slots * -(-(batch * s) // slots))  # noqa: E731
            assert got in window and all(busy(got) >= busy(s) - 1e-9 for s in window)
            assert got == floor or tiles // got >= min(ps.BALANCE_MIN_TILES, tiles // floor) // 2


def test_host_sizes_match_the_kernel_sources():
    """The host allocates the kernels' dynamic shared memory from constants in rawindexer/paged_kernels.py;
    they must equal the sources' (an undersized allocation would corrupt memory on a GPU)."""
    import re

    from rawindexer import paged_kernels as pk

    def constants(path) -> dict[str, int]:
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"constexpr int (\w+) = (\d+);", path.read_text())}

    from conftest import REPO  # the kernel sources are the checkout's (the installed package has none)

    def source(arch):
        return REPO / pk.TARGETS[arch].source.relative_to(pk.ROOT)

    sm90 = constants(source("sm_90a"))
    assert (sm90["STAGES"], sm90["TILE"], sm90["K_PAD"], sm90["THREADS"]) == (
        pk.SM90_STAGES, pk.SM90_TILE, pk.SM90_K_PAD, pk.SM90_THREADS)
    tma = (REPO / "kernels" / "sm90" / "paged_tma.cuh").read_text()
    assert f"#define PAGED_TMA_STAGES {pk.SM90_TMA_STAGES}\n" in tma
    # the consumer warpgroup + the producer warp (the manifest also records each kernel's own block size, max_threads
    # of resources_by_next_n, which the host launches)
    assert "constexpr int PT_THREADS = PT_CONSUMERS + WARP;" in tma and pk.SM90_TMA_THREADS == 128 + 32
    gfx = constants(source("gfx950"))
    assert pk.dynamic_lds_bytes(32, 128, 1) == 32 * (128 + gfx["Q_PAD"]) + 32 * 4
    assert gfx["MAX_NEXT_N"] == sm90["MAX_NEXT_N"] == pk.MAX_NEXT_N


def test_every_decode_design_has_a_gate():
    """Every built decode design has a per-logit gate (its family module's LOGIT_EPS), and the default designs are
    held to prefill's fp32-class eps (one gate: rawindexer.testing.grading.logit_gate) -- except sm_90a's "auto",
    which runs the fp8-wgmma "tma" design at block size 64 and takes its gate (docs/NUMERICS.md, decode)."""
    from rawindexer import paged_kernels as pk
    from rawindexer.testing.grading import LOGIT_EPS as PREFILL_EPS
    from rawindexer.testing.paged_grading import design_eps

    for arch, target in pk.TARGETS.items():
        assert all(0 < design_eps(arch, d) <= 2e-3 for d in target.designs)
        assert design_eps(arch) == (2e-3 if arch == "sm_90a" else PREFILL_EPS)
    assert design_eps("sm_90a", "f16") == PREFILL_EPS


def test_sm90_q_rows_and_small_batch_splits():
    """sm_90a host rules: Q is staged in whole wgmma chunks of at most 256 columns (next_n x H), and small batches
    split down to one tile only where MIN_TILES_PER_SPLIT-tile splits would leave resident blocks idle."""
    from rawindexer import paged_kernels as pk
    from rawindexer.dispatch.paged_sm90 import MIN_TILES_PER_SPLIT, min_tiles_per_split

    for heads, next_n in itertools.product(pk.HEADS, range(1, 5)):
        rows = pk.sm90_q_rows(heads, next_n)
        per_mma = min(next_n, pk.SM90_MAX_WGMMA_N // heads)
        assert rows >= next_n and rows % per_mma == 0 and rows - next_n < per_mma
    assert pk.sm90_q_rows(128, 3) == 4 and pk.sm90_q_rows(64, 4) == 4 and pk.sm90_q_rows(128, 2) == 2
    assert pk.sm90_shared_bytes(128, 128, 3) == pk.sm90_shared_bytes(128, 128, 4)
    assert min_tiles_per_split(1, 64, 528) == 1  # B = 1, context 4096: 16 four-tile splits on 528 slots
    assert min_tiles_per_split(64, 64, 528) == MIN_TILES_PER_SPLIT  # B = 64 x 4096: 1024 four-tile splits
    assert min_tiles_per_split(8, 2048, 528) == MIN_TILES_PER_SPLIT
