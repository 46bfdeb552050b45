"""The sm_90a "tmaq" design (docs/PERFORMANCE.md v17) on the CPU: the host model of its schedule
(dispatch/sm90_qshared.py) reads every tile of every row block once, each ring position by one consumer at the stage
and phase the consumer's own stepping gives; the snake order balances causal rows; the plan launches a persistent
grid of one 640-thread block per SM within the shared-memory limit and refuses SplitN. The plans are made against a
manifest whose "tmaq" entries are the shipped "tmas" ones renamed (same argument list), so no race build is needed."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from rawindexer.dispatch import sm90_qshared as sq
from rawindexer.dispatch import sm90_tensor_map
from rawindexer.dispatch.sm90_balanced import row_block_spans
from rawindexer.dispatch.base import Pointers, Problem, Tunables
from rawindexer.testing.windows import causal, multi_req, ragged

PTRS = Pointers(*[0x100000 * (i + 1) for i in range(7)])


@pytest.mark.parametrize("seed", range(6))
def test_every_tile_is_read_once_at_its_ring_stage(seed):
    rng = np.random.default_rng(seed + 1000 * np.random.default_rng().integers(1 << 20))
    M, N = int(rng.integers(1, 900)), int(rng.integers(1, 9000))
    block_m, blocks = int(rng.choice([1, 2, 4])), int(rng.integers(1, 140))
    blocks = min(blocks, -(-M // block_m))
    ks, ke = ragged(M, N, rng)
    sched = sq.schedule(ks, ke, N, block_m, blocks)
    seen = set()
    for tiles in sched:
        positions = [t.position for t in tiles]
        assert sorted(positions) == list(range(len(tiles))), "ring positions: each once, none skipped"
        for t in tiles:
            assert (t.row_block, t.tile) not in seen, f"tile {(t.row_block, t.tile)} read twice"
            seen.add((t.row_block, t.tile))
            assert t.position % sq.CONSUMERS == t.consumer
            assert (t.stage, t.phase) == (t.position % sq.STAGES, (t.position // sq.STAGES) & 1), t
    want = set()
    for rb, (lo, hi) in enumerate(row_block_spans(ks, ke, N, block_m)):
        want |= {(rb, t) for t in range(-(-(int(hi) - int(lo)) // sq.TILE))}
    assert seen == want


@pytest.mark.parametrize("blocks,R", [(132, 512), (132, 1024), (7, 7), (5, 23), (1, 3)])
def test_snake_order_covers_every_row_block_once(blocks, R):
    got = sorted(rb for b in range(blocks) for rb in sq.row_block_order(b, blocks, R))
    assert got == list(range(R))


@pytest.mark.parametrize("M,H", [(1024, 64), (1024, 32), (4096, 32)])
def test_snake_order_balances_causal_rows(monkeypatch, M, H):
    """Causal rows on 132 blocks: the busiest consumer within 10% of the mean, where the plain order b, b + G, ...
    leaves it further over (the snake's reason)."""
    ks, ke = causal(M, M, diagonal=True)
    bm = 128 // H
    costs = sq.block_costs(sq.schedule(ks, ke, M, bm, 132))
    assert max(costs) <= 1.1 * np.mean(costs)
    monkeypatch.setattr(sq, "row_block_order", lambda b, G, R: list(range(b, R, G)))
    plain = sq.block_costs(sq.schedule(ks, ke, M, bm, 132))
    assert max(plain) / np.mean(plain) > max(costs) / np.mean(costs)


@pytest.fixture
def qshared_dir(tmp_path):
    """A kernel directory whose sm_90a target has "tmaq" entries (the shipped "tmas" ones renamed, BLOCK_M 128 / H)."""
    from rawindexer.kernel_files import kernel_dir

    manifest = json.loads((kernel_dir() / "manifest.json").read_text())
    target = manifest["targets"].get("sm_90a")
    if target is None or not any(k["params"]["design"] == "tmas" for k in target["kernels"].values()):
        pytest.skip("the kernel directory has no sm_90a tmas kernels (run make)")
    for k in list(target["kernels"].values()):
        p = k["params"]
        if p["design"] == "tmas":
            e = copy.deepcopy(k)
            e["params"].update(design="tmaq", block_m=128 // p["heads"])
            target["kernels"][f"fp8_mqa_logits_sm90_h{p['heads']}_d{p['head_dim']}_bm{128 // p['heads']}_tmaq"] = e
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


@pytest.fixture
def encoder(monkeypatch):
    monkeypatch.setattr(sm90_tensor_map, "encoder", lambda ptr, n, head_dim, *layout: bytes(128))


@pytest.mark.parametrize("H", [32, 64, 128])
@pytest.mark.parametrize("D", [64, 128])
def test_plan_is_a_persistent_grid_within_shared_memory(qshared_dir, encoder, H, D):
    from rawindexer.dispatch.sm90 import Sm90Family

    fam = Sm90Family(qshared_dir, design="tmaq")
    plan = fam.plan(Problem(4096, 4096, H, D, 4096, True), Tunables(), PTRS, 132)
    assert plan.symbol == f"fp8_mqa_logits_sm90_h{H}_d{D}_bm{128 // H}_tmaq"
    assert plan.grid == (132, 1, 1) and plan.block == (640, 1, 1)
    nq = 128
    want = 2 * (nq * D + nq * 4 + (128 // H) * 8) + 16 * 64 * D + (2 * 16 + 2 * 2) * 8 + 1024
    assert plan.shared_mem == want <= 227 * 1024
    assert plan.config["design"] == "tmaq" and plan.config["persistent_blocks"] == 132
    # fewer row blocks than SMs: one block per row block
    small = fam.plan(Problem(5, 4096, H, D, 4096, False), Tunables(), PTRS, 132)
    assert small.grid == (-(-5 // (128 // H)), 1, 1)


def test_plan_refuses_split_n_and_a_row_order(qshared_dir, encoder):
    from rawindexer.dispatch.sm90 import Sm90Family

    fam = Sm90Family(qshared_dir, design="tmaq")
    with pytest.raises(ValueError, match="split_n must be 1"):
        fam.plan(Problem(1024, 1024, 64, 128, 1024, False), Tunables(split_n=2), PTRS, 132)
    assert fam.plan(Problem(1024, 1024, 64, 128, 1024, False), Tunables(split_n=1), PTRS, 132).grid == (132, 1, 1)
    with pytest.raises(ValueError, match="reverse_rows must be None"):
        fam.plan(Problem(1024, 1024, 64, 128, 1024, False), Tunables(reverse_rows=True), PTRS, 132)


def test_multi_req_rows_keep_their_requests_apart():
    """A row block straddling two packed requests spans both slices; the model still reads each of its tiles once."""
    ks, ke = multi_req(4096, 4096, requests=4, diagonal=True)
    sched = sq.schedule(ks, ke, 4096, 4, 132)
    assert sum(len(t) for t in sched) == len({(t.row_block, t.tile) for ts in sched for t in ts})


def test_auto_leaves_tmaq_when_the_caller_fixes_the_geometry(qshared_dir, encoder):
    """"auto" takes tmaq only at its own geometry: a caller's split_n, num_warps or block_m goes to the design whose
    knobs they are."""
    from rawindexer.dispatch.sm90 import Sm90Family

    fam = Sm90Family(qshared_dir)
    p = Problem(1024, 1024, 64, 128, 1024, False)
    assert fam.plan(p, Tunables(), PTRS, 132).config["design"] == "tmaq"
    assert fam.plan(p, Tunables(split_n=2), PTRS, 132).config["design"] == "wg"
    assert fam.plan(p, Tunables(num_warps=4), PTRS, 132).config["design"] == "wg"
    assert fam.plan(p, Tunables(block_m=2), PTRS, 132).config["design"] == "wg"


def test_host_mirrors_match_the_kernel_source():
    """The host's copies of the kernel's constants (the model's ring depth, the plan's shared memory) are the
    source's: a change to prefill_tma_qshared.cuh must change them too."""
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "kernels" / "sm90" / "prefill_tma_qshared.cuh").read_text()
    assert f"constexpr int TMAQ_STAGES = {sq.STAGES};" in src
    assert f"constexpr int TMAQ_STAGES = {sm90_tensor_map.TMAQ_STAGES};" in src
    assert f"constexpr int TMAQ_QBUF = {sm90_tensor_map.TMAQ_QBUF};" in src
    common = (Path(__file__).resolve().parents[2] / "kernels" / "sm90" / "prefill_tma.cuh").read_text()
    assert f"constexpr int TMA_NC = {sq.CONSUMERS};" in common and f"constexpr int TMA_TILE = {sq.TILE};" in common


def test_plan_sets_no_row_order_flag(qshared_dir, encoder):
    """tmaq's blocks walk their own snake order: the plan never asks for the reversed row order it would ignore."""
    from rawindexer.dispatch.sm90 import Sm90Family

    plan = Sm90Family(qshared_dir, design="tmaq").plan(Problem(4096, 4096, 32, 128, 4096, False), Tunables(), PTRS, 132)
    assert not plan.config["reverse_rows"] and not plan.config["zigzag_rows"]
