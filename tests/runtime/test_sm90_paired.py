"""Design "wgpr" (wg on row-block pairs, kernels/sm90/prefill_wg_pair.cuh; docs/PERFORMANCE.md v15) on the CPU: the
shipped manifest has its kernels within two 256-thread blocks per SM, "auto" takes it only where the H200 races
measured it faster (H = 64, wg's grid one pass of one-warpgroup blocks), its plan launches ceil(R / 2) blocks of 8
warps, and the knobs it cannot honour are refused by name. Its results are checked on the H200 (tests/gpu,
--designs wgpr)."""
from __future__ import annotations

import json
from math import ceil

import numpy as np
import pytest

from rawindexer import registry
from rawindexer.dispatch.base import Pointers, Problem, Tunables
from rawindexer.kernel_files import kernel_dir

PTRS = Pointers(*[0x100000 * (i + 1) for i in range(7)])
SMS = 132


@pytest.fixture(scope="module")
def family_dir():
    return kernel_dir()


def _plan(family_dir, M, N, H, design=None, tunables=Tunables(), sms=SMS, D=128):
    from rawindexer.dispatch.sm90 import Sm90Family

    return Sm90Family(family_dir, design=design).plan(Problem(M, N, H, D, N, True), tunables, PTRS, sms)


def test_wgpr_kernels_fit_two_blocks_of_256_threads_per_sm(family_dir):
    kernels = json.loads((family_dir / "manifest.json").read_text())["targets"]["sm_90a"]["kernels"]
    mine = {n: k for n, k in kernels.items() if k["params"]["design"] == "wgpr"}
    assert {(k["params"]["heads"], k["params"]["head_dim"]) for k in mine.values()} == {
        (h, d) for h in (32, 64, 128) for d in (64, 128)}
    for name, k in mine.items():
        assert k["params"]["block_m"] * k["params"]["heads"] == 128, name
        if k["params"]["heads"] <= 64:  # two blocks of 256 threads in 64 K registers
            assert k["resources"]["registers"] <= 128, name


@pytest.mark.parametrize("M, N, H, pairs", [
    (1024, 1024, 64, True),    # 512 row blocks of 2 rows: one pass of 4 one-warpgroup blocks per SM
    (792, 1024, 64, True),     # 396 row blocks: ROW_BLOCKS_PER_SM_FOR_4_WARPS per SM, the lower edge
    (1056, 1984, 64, True),    # 528: TARGET_BLOCKS_PER_SM per SM, the upper edge; 31 tiles per row (wg unsplit)
    (1024, 1985, 64, False),   # 32 tiles per row: wg's heuristic would split, not measured for pairs
    (790, 1024, 64, False),    # 395 row blocks: wg runs two warpgroups per row block already
    (1058, 1024, 64, False),   # 529: more than one pass
    (1024, 1024, 32, False),   # H = 32: wgpr measured 7-15% slower
    (1024, 1024, 128, False),  # not measured
])
def test_the_paired_rule_holds_where_pairs_were_measured_faster(M, N, H, pairs):
    from rawindexer.dispatch.sm90 import paired_wins

    assert paired_wins(Problem(M, N, H, 128, N, True), SMS) is pairs


@pytest.mark.parametrize("M, N, H, want", [
    (792, 1024, 64, "wgpr"),    # below AUTO_QSHARED_MIN_M rows: the paired rule decides
    (1000, 1984, 64, "wgpr"),
    (790, 1024, 64, "wg"),
    (1024, 1024, 64, "tmaq"),   # from AUTO_QSHARED_MIN_M rows "tmaq" comes first (qshared_wins, session 11)
    (1024, 1024, 128, "wg"),    # not measured
])
def test_auto_takes_row_block_pairs_where_they_were_measured_faster(family_dir, monkeypatch, M, N, H, want):
    from rawindexer.dispatch import sm90_tensor_map

    monkeypatch.setattr(sm90_tensor_map, "encoder", lambda ptr, n, head_dim, *layout: bytes(128))  # tmaq's K map, no driver
    plan = _plan(family_dir, M, N, H)
    assert plan.config["design"] == want
    if want == "wgpr":
        assert plan.grid == (ceil(ceil(M / 2) / 2), 1, 1) and plan.block == (256, 1, 1)
        assert plan.symbol.endswith("_bm2_wgpr")


def test_the_rule_scales_with_the_sm_count(family_dir):
    assert _plan(family_dir, 1000, 1024, 64, sms=132).config["design"] == "wgpr"  # 500 row blocks: 3.8 per SM
    assert _plan(family_dir, 1000, 1024, 64, sms=78).config["design"] == "wg"  # 6.4 per SM


@pytest.mark.parametrize("tunables", [Tunables(num_warps=4), Tunables(num_warps=8), Tunables(block_m=2),
                                      Tunables(split_n=1), Tunables(reverse_rows=False)])
def test_auto_keeps_wg_when_the_caller_sets_a_wg_knob(family_dir, tunables):
    assert _plan(family_dir, 1024, 1024, 64, tunables=tunables).config["design"] == "wg"


@pytest.mark.parametrize("M, N", [(1, 1024), (2, 1024), (3, 1024), (5, 1024), (17, 1024), (1023, 1024), (1024, 1024),
                                  (1025, 1024), (900, 3000)])
def test_the_grid_covers_every_row_block_once(family_dir, M, N):
    """Block x takes row blocks R - 1 - x and x (x alone where they meet): ceil(R / 2) blocks cover all R."""
    plan = _plan(family_dir, M, N, 64, design="wgpr")
    rows = ceil(M / 2)
    blocks = plan.grid[0]
    assert blocks == ceil(rows / 2) and plan.block == (256, 1, 1)
    assert not plan.config["reverse_rows"] and not plan.config["zigzag_rows"]  # the pairs are the order
    covered = np.zeros(rows, dtype=int)
    for x in range(blocks):
        covered[rows - 1 - x] += 1
        if x < rows - 1 - x:
            covered[x] += 1
    assert (covered == 1).all()


def test_knobs_wgpr_cannot_honour_are_refused_by_name(family_dir):
    with pytest.raises(ValueError, match=r"num_warps must be 8 .*got 4"):
        _plan(family_dir, 1024, 1024, 64, design="wgpr", tunables=Tunables(num_warps=4))
    with pytest.raises(ValueError, match=r"split_n must be 1 .*got 2"):
        _plan(family_dir, 1024, 1024, 64, design="wgpr", tunables=Tunables(split_n=2))
    assert _plan(family_dir, 128, 32768, 64, design="wgpr").grid == (32, 1, 1)  # never split, even on long rows
    with pytest.raises(ValueError, match=r"reverse_rows must be None .*got True"):
        _plan(family_dir, 1024, 1024, 64, design="wgpr", tunables=Tunables(reverse_rows=True))


def test_wgpr_is_a_default_design_of_sm90():
    assert "wgpr" in registry.default_designs(registry.PREFILL, registry.SM90)
    assert not registry.SM90_DESIGNS["wgpr"].experiment
