"""The balanced sm_90a schedule ("tmasb", "tmasb2"; docs/PERFORMANCE.md v10) on the CPU: the host model of the
kernel's walk (dispatch/sm90_balanced.py) covers every tile of every row block's span exactly once and splits the
cost evenly; the plan launches one block per SM with the spans and prefix in shared memory and falls back to "tmas"'s
split grid above the row-block cap; "auto" takes "tmasb2" only where the H200 runs measured it faster. The plans are
made against a manifest whose "tmasb" entries are the shipped "tmas" ones renamed (same argument list), so no race
build is needed."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from rawindexer.dispatch import sm90_balanced as sb
from rawindexer.dispatch import sm90_tensor_map
from rawindexer.dispatch.base import Pointers, Problem, Tunables
from rawindexer.testing.windows import causal, multi_req, ragged

PTRS = Pointers(*[0x100000 * (i + 1) for i in range(7)])


@pytest.mark.parametrize("piece_cost", sorted(set(sb.PIECE_COSTS.values())))
@pytest.mark.parametrize("seed", range(4))
def test_every_tile_is_walked_exactly_once(seed, piece_cost):
    rng = np.random.default_rng(seed + 1000 * np.random.default_rng().integers(1 << 20))
    M, N = int(rng.integers(1, 700)), int(rng.integers(1, 9000))
    block_m, blocks = int(rng.choice([4, 8, 16])), int(rng.integers(1, 140))
    ks, ke = ragged(M, N, rng)
    spans = sb.row_block_spans(ks, ke, N, block_m)
    pieces = sb.schedule(ks, ke, N, block_m, blocks, piece_cost)
    seen = {}
    for ps in pieces:
        for p in ps:
            assert 0 <= p.t0 < p.t1, p
            for t in range(p.t0, p.t1):
                key = (p.row_block, t)
                assert key not in seen, f"tile {key} walked twice (M={M}, N={N}, block_m={block_m}, G={blocks})"
                seen[key] = True
    want = {(r, t) for r, (lo, hi) in enumerate(spans) for t in range(-(-(hi - lo) // sb.TILE))}
    assert set(seen) == want


def test_spans_cover_every_window():
    rng = np.random.default_rng()
    M, N, block_m = 333, 5000, 8
    ks, ke = ragged(M, N, rng)
    spans = sb.row_block_spans(ks, ke, N, block_m)
    s = np.clip(ks, 0, N)
    e = np.maximum(np.clip(ke, 0, N), s)
    for m in range(M):
        lo, hi = spans[m // block_m]
        if e[m] > s[m]:
            assert lo <= s[m] and e[m] <= hi <= N


@pytest.mark.parametrize("windows", ["multi_req", "causal"])
def test_blocks_get_equal_shares(windows):
    """No block's modelled cost exceeds the mean by more than a piece's cost: the straddling row blocks of
    multi_req (two requests' slices) no longer set the time."""
    M, N, block_m, blocks = 671, 131072, 16, 132
    ks, ke = multi_req(M, N) if windows == "multi_req" else causal(M, N, diagonal=True)
    costs = sb.block_costs(sb.schedule(ks, ke, N, block_m, blocks))
    total = int(sb.cost_prefix(sb.row_block_spans(ks, ke, N, block_m))[-1])
    assert max(costs) <= total / blocks + 2 * sb.PIECE_COST + 1


@pytest.fixture
def balanced_dir(tmp_path):
    """A kernel directory whose sm_90a target has "tmasb" and "tmasb2" entries (the shipped "tmas" ones, renamed)."""
    from rawindexer.kernel_files import kernel_dir

    manifest = json.loads((kernel_dir() / "manifest.json").read_text())
    target = manifest["targets"].get("sm_90a")
    if target is None or not any(k["params"]["design"] == "tmas" for k in target["kernels"].values()):
        pytest.skip("the kernel directory has no sm_90a tmas kernels (run make)")
    for sym, k in list(target["kernels"].items()):
        if k["params"]["design"] == "tmas":
            for design in sb.PIECE_COSTS:  # the experiment ("tmasb") is not in the shipped build
                target["kernels"].setdefault(sym[:-len("tmas")] + design, copy.deepcopy(k))["params"]["design"] = design
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


@pytest.fixture
def encoder(monkeypatch):
    monkeypatch.setattr(sm90_tensor_map, "encoder", lambda ptr, n, head_dim, *layout: bytes(128))


@pytest.mark.parametrize("design", sorted(sb.PIECE_COSTS))
def test_balanced_plan_is_one_block_per_sm(balanced_dir, encoder, design):
    from rawindexer.dispatch.sm90 import Sm90Family

    plan = Sm90Family(balanced_dir, design=design).plan(Problem(4096, 32768, 64, 128, 32768, True), Tunables(),
                                                         PTRS, 132)
    assert plan.symbol == f"fp8_mqa_logits_sm90_h64_d128_bm8_{design}"
    assert plan.grid == (132, 1, 1) and plan.block == (640, 1, 1)
    R = 4096 // 8
    # the two-buffer designs' second Q / weights / windows buffer
    second = 4 * 128 * (128 + 4) + 8 * 8 if design in ("tmasb3", "tmasb4") else 0
    assert plan.shared_mem == sm90_tensor_map.shared_mem(8, 64, 128, 4) + second + 8 * R + 4 * (R + 1) <= 227 * 1024
    assert plan.config["design"] == design and plan.config["balanced_blocks"] == 132


@pytest.mark.parametrize("H", [32, 64, 128])
def test_q_prefetch_plan_fits_shared_memory_up_to_its_cap(balanced_dir, encoder, H):
    """tmasb3 at its row-block cap still fits the 227 KB a block may have; one row block more and it is tmas's plan."""
    from rawindexer.dispatch.sm90 import BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS, Sm90Family

    assert BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS == sb.Q_PREFETCH_MAX_ROW_BLOCKS
    bm = 512 // H
    fam = Sm90Family(balanced_dir, design="tmasb3")
    M = bm * BALANCED_Q_PREFETCH_MAX_ROW_BLOCKS
    plan = fam.plan(Problem(M, 32768, H, 128, 32768, False), Tunables(), PTRS, 132)
    assert plan.config["design"] == "tmasb3" and plan.shared_mem <= 227 * 1024
    plan = fam.plan(Problem(M + bm, 32768, H, 128, 32768, False), Tunables(), PTRS, 132)
    assert plan.config["design"] == "tmas"


@pytest.mark.parametrize("why", ["row blocks over the cap", "split_n fixed"])
def test_balanced_plan_falls_back_to_the_split_grid(balanced_dir, encoder, why):
    """tmas's plan, whichever balanced design was asked for."""
    from rawindexer.dispatch.sm90 import BALANCED_MAX_ROW_BLOCKS, Sm90Family

    assert BALANCED_MAX_ROW_BLOCKS == sb.MAX_ROW_BLOCKS
    M = 8 * (BALANCED_MAX_ROW_BLOCKS + 1) if why == "row blocks over the cap" else 4096
    tunables = Tunables(split_n=2) if why == "split_n fixed" else Tunables()
    plan = Sm90Family(balanced_dir, design="tmasb").plan(Problem(M, 8192, 64, 128, 8192, True), tunables, PTRS, 132)
    assert plan.symbol == "fp8_mqa_logits_sm90_h64_d128_bm8_tmas"
    assert plan.config["design"] == "tmas" and plan.grid[0] == -(-M // 8)


@pytest.mark.parametrize("M, N, H, clean, want", [
    (671, 131072, 32, True, "balanced"),   # few row blocks, uneven spans: 1.6-1.9x tmas on multi_req
    (671, 131072, 32, False, "balanced"),
    (512, 32768, 32, False, "balanced"),   # the H = 32 corner: AUTO_BALANCED_M32 rows, AUTO_BALANCED_MIN_N keys
    (4096, 32768, 32, False, "balanced"),  # long rows at H = 32: +2-4% over tmas since v14
    (1024, 131072, 32, True, "balanced"),
    (511, 131072, 32, False, "tmas"),      # below AUTO_BALANCED_M32
    (671, 16384, 32, False, "tmas"),       # H = 32 below AUTO_BALANCED_MIN_N
    (8192, 8192, 32, True, "tmas"),
    (128, 32768, 32, True, "tmas"),
    (1024, 131072, 64, False, "balanced"),  # the longest rows at H = 64: +2.5-5% over tmas (v14)
    (2048, 65536, 64, True, "balanced"),    # the H = 64 corner: AUTO_BALANCED_M64 rows, AUTO_BALANCED_MIN_N64 keys
    (1023, 131072, 64, False, "tmas"),     # below AUTO_BALANCED_M64 (671 x 131072: tmas 5-16% faster)
    (4096, 32768, 64, True, "tmas"),       # below AUTO_BALANCED_MIN_N64: tmas 0-4% faster since v14
    (8192, 8192, 64, False, "tmas"),
    (128, 32768, 64, True, "tmas"),
    (4096, 32768, 128, False, "tmas"),     # not measured at H = 128
    (1024, 1024, 32, True, "tmaq"),       # short rows from AUTO_QSHARED_MIN_M rows: tmaq (qshared_wins)
    (1024, 1024, 64, False, "tmaq"),
    (4096, 4096, 32, False, "tmaq"),      # H = 32 up to AUTO_QSHARED_MAX_N32 keys
    (4096, 4096, 64, False, "tmas"),      # H = 64 from AUTO_TMAS_MIN_N keys: tmas's K sharing wins
    (4096, 2048, 64, False, "tmaq"),
    (1000, 1024, 64, False, "wgpr"),      # below AUTO_QSHARED_MIN_M: wg, on row-block pairs here (paired_wins)
    (512, 1024, 32, False, "wg"),
])
def test_auto_takes_the_balanced_schedule_where_it_was_measured_faster(balanced_dir, encoder, M, N, H, clean, want):
    from rawindexer.dispatch.sm90 import Sm90Family

    from rawindexer.dispatch.sm90 import AUTO_BALANCED

    want = AUTO_BALANCED if want == "balanced" else want
    plan = Sm90Family(balanced_dir).plan(Problem(M, N, H, 128, N, clean), Tunables(), PTRS, 132)
    assert plan.config["design"] == want
    if want == AUTO_BALANCED:
        assert plan.grid == (132, 1, 1) and plan.symbol.endswith("_" + AUTO_BALANCED)


def test_auto_keeps_tmas_when_the_caller_fixes_split_n(balanced_dir, encoder):
    from rawindexer.dispatch.sm90 import Sm90Family

    plan = Sm90Family(balanced_dir).plan(Problem(671, 131072, 32, 128, 131072, True), Tunables(split_n=2), PTRS, 132)
    assert plan.config["design"] == "tmas" and plan.grid == (42, 2, 1)
