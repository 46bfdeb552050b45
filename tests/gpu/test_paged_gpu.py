"""fp8_paged_mqa_logits on a real Hopper GPU (the sm_90a twin; marked ``gpu``: never runs in CI).

Full sweep: heads {32, 64, 128} x head_dim {64, 128} x block size {1, 16, 64} x next_n 1..4 x both
context-length forms x clean_logits, each over the ragged lengths 0, 1, bs-1, bs, bs+1 and a long one, with
shuffled + shared physical blocks, poisoned unused table entries and NaN-poisoned padded output rows;
graded against the float64 numpy reference: exact mask, and |out - ref| <= 1e-5 * T per logit for the
default design ("f16": the score wgmma on exactly converted values); the "fp8" design (e4m3 wgmma, Hopper's
shorter fp8 accumulation) is held to the anchors' calc_diff < 1e-3 and its worst |err| / T is printed.
Also: forced context splits, CUDA-graph capture with the context lengths changed between replays (no host
read of device memory), and the DLPack-allocated output.

Runnable as a script on the device: ``python tests/gpu/test_paged_gpu.py [--quick] [--log FILE]``.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rawindexer.testing.paged_cases import make_case, ragged_lengths  # noqa: E402
from rawindexer.testing.paged_grading import grade_paged  # noqa: E402
from rawindexer.testing.paged_reference import fp8_paged_mqa_logits_ref  # noqa: E402

HEADS = (32, 64, 128)
DIMS = (64, 128)
BLOCK_SIZES = (1, 16, 64)
NEXT_N = (1, 2, 3, 4)
LONG = {1: 700, 16: 2100, 64: 3000}


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


VARIANTS = ("f16", "fp8")


def run_case(case, clean: bool, *, seed_note: str = "", **tunables) -> tuple[bool, str]:
    import torch

    import rawindexer
    from rawindexer.testing.grading import DIFF_TOLERANCE, calc_diff

    dev = torch.device("cuda")
    t = {name: torch.from_numpy(np.ascontiguousarray(getattr(case, name))).to(dev)
         for name in ("q", "kv_cache", "weights", "context_lens", "block_table")}
    padded = torch.full((case.out.shape[0], case.max_context_len + 12), float("nan"), device=dev)
    out = padded[:, :case.max_context_len]
    rawindexer.fp8_paged_mqa_logits(t["q"], t["kv_cache"], t["weights"], t["context_lens"], t["block_table"],
                                    case.max_context_len, clean_logits=clean, out=out, **tunables)
    torch.cuda.synchronize()
    got = padded.cpu().numpy()
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean, with_bound=True)
    grade = grade_paged(got[:, :case.max_context_len], ref, bound, case.lengths(), clean)
    pad_ok = bool(np.isnan(got[:, case.max_context_len:]).all())
    inside = np.arange(case.max_context_len)[None, :] < case.lengths()[:, None]
    diff = calc_diff(got[:, :case.max_context_len][inside], ref[inside])
    if tunables.get("variant") == "fp8":  # the anchors' gate; the per-logit bound is reported, not required
        ok = grade.mask_ok and grade.unwritten == 0 and grade.overwritten == 0 and diff < DIFF_TOLERANCE
    else:
        ok = grade.ok
    return ok and pad_ok, (grade.message + f", calc_diff {diff:.1e}" + ("" if pad_ok else ", ROW PADDING WRITTEN")
                           + seed_note)


SWEEP = list(itertools.product(HEADS, DIMS, BLOCK_SIZES, NEXT_N, (False, True), (True, False)))


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("heads,head_dim,block_size,next_n,two_d,clean", SWEEP)
def test_sweep(rng, heads, head_dim, block_size, next_n, two_d, clean, variant):
    case = make_case(rng, ragged_lengths(block_size, LONG[block_size]), next_n=next_n, heads=heads,
                     head_dim=head_dim, block_size=block_size, two_d=two_d, share_blocks=True)
    ok, msg = run_case(case, clean, variant=variant)
    assert ok, msg


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("split_n", [1, 2, 7, 40])
def test_forced_splits(rng, split_n, variant):
    case = make_case(rng, [5000, 0, 64, 4097], next_n=2, heads=64, head_dim=128, block_size=64, share_blocks=True)
    ok, msg = run_case(case, True, split_n=split_n, variant=variant)
    assert ok, msg


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
def test_cuda_graph_replay_reads_new_lengths(rng):
    """Captured once, replayed after the context lengths changed on the device: the kernel reads them
    itself and the host never does, so the replay is correct."""
    import torch

    import rawindexer

    case = make_case(rng, [3000, 1700, 65], next_n=2, heads=64, head_dim=128, block_size=64)
    dev = torch.device("cuda")
    t = {name: torch.from_numpy(np.ascontiguousarray(getattr(case, name))).to(dev)
         for name in ("q", "kv_cache", "weights", "context_lens", "block_table")}
    out = torch.full(case.out.shape, float("nan"), device=dev)
    call = lambda: rawindexer.fp8_paged_mqa_logits(  # noqa: E731
        t["q"], t["kv_cache"], t["weights"], t["context_lens"], t["block_table"], case.max_context_len,
        clean_logits=True, out=out)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()  # warm-up: module load and function attributes outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        call()
    for lens in ([3000, 1700, 65], [10, 1699, 0], [1, 1, 1]):  # within each sequence's blocks
        case.context_lens[:] = lens
        t["context_lens"].copy_(torch.from_numpy(case.context_lens))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens,
                                              case.block_table, case.max_context_len, True, with_bound=True)
        grade = grade_paged(out.cpu().numpy(), ref, bound, case.lengths(), True)
        assert grade.ok, f"lengths {lens}: {grade.message}"


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
def test_allocated_output(rng):
    import torch

    import rawindexer

    case = make_case(rng, [900, 33], next_n=1, heads=32, head_dim=128, block_size=64)
    dev = torch.device("cuda")
    got = rawindexer.fp8_paged_mqa_logits(*(torch.from_numpy(np.ascontiguousarray(getattr(case, n))).to(dev)
                                            for n in ("q", "kv_cache", "weights", "context_lens", "block_table")),
                                          case.max_context_len, clean_logits=True)
    assert isinstance(got, torch.Tensor) and got.is_cuda and tuple(got.shape) == case.out.shape
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, True, with_bound=True)
    grade = grade_paged(got.cpu().numpy(), ref, bound, case.lengths(), True)
    assert grade.ok, grade.message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="H=64, D=128 only")
    parser.add_argument("--variant", choices=VARIANTS, action="append", help="default: both")
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    seed = int(time.time())
    rng = np.random.default_rng(seed)
    lines = [f"seed {seed}"]
    failed = 0
    for heads, head_dim, bs, next_n, two_d, clean in SWEEP:
        if args.quick and (heads, head_dim) != (64, 128):
            continue
        case = make_case(rng, ragged_lengths(bs, LONG[bs]), next_n=next_n, heads=heads, head_dim=head_dim,
                         block_size=bs, two_d=two_d, share_blocks=True)
        for variant in args.variant or VARIANTS:
            ok, msg = run_case(case, clean, variant=variant)
            failed += not ok
            lines.append(f"{'PASS' if ok else 'FAIL'} {variant} H={heads} D={head_dim} bs={bs} next_n={next_n} "
                         f"{'2d' if two_d else '1d'} clean={int(clean)}: {msg}")
            print(lines[-1], flush=True)
    lines.append(f"{len(lines) - 1 - failed}/{len(lines) - 1} passed")
    print(lines[-1])
    if args.log:
        args.log.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
