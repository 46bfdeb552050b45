"""fp8_paged_mqa_logits on a real Hopper GPU (the sm_90a twin; marked ``gpu``: never runs in CI).

Full sweep: heads {32, 64, 128} x head_dim {64, 128} x block size {1, 16, 64} x next_n 1..4 x both
context-length forms x clean_logits, each over the ragged lengths 0, 1, bs-1, bs, bs+1 and a long one, with
shuffled + shared physical blocks, poisoned unused table entries and NaN-poisoned padded output rows;
graded against the float64 numpy reference: exact mask, calc_diff < 1e-3, and prefill's per-logit gate
(rawindexer.testing.grading.logit_gate) |out - ref| <= eps * T with each design's eps (rawindexer.testing.paged_grading.design_eps):
1e-5 for the default design ("f16": the score wgmma on exactly converted values), 2e-3 for "fp8" (e4m3 wgmma,
Hopper's shorter fp8 accumulation, as prefill's fp8 wgmma designs in docs/NUMERICS.md); the worst |err| / T is
printed.
Also: forced context splits; CUDA-graph capture of the three entry points (function with out=, PagedIndexer
allocating its output inside the capture, a bound prepare_paged_mqa_logits launch) with the context lengths and
q changed between replays (no host read of device memory); "auto" launching the four-warpgroup "tma4" kernel on
a 256-sequence batch at next_n x H = 96 / 128, graded; the torch-allocated output; and, with two GPUs
(marker ``two_gpus``), tensors on cuda:1 while the current device is 0 (device 1's current stream, no switch of
the current device, no allocation on device 0, the mixed-device error).

Runnable as a script on the device: ``python tests/gpu/test_paged_gpu.py [--quick] [--checks-only] [--log FILE]`` (the
sweep, then the graph, allocation and -- with two GPUs -- cuda:1 checks, one PASS/FAIL line each).
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
from rawindexer.testing.paged_grading import design_eps, grade_paged  # noqa: E402
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


DESIGNS = ("f16", "fp8", "tma", "tma4")  # tma4: "auto"'s choice at next_n x H = 96 / 128 on large batches
#: designs built for some block sizes only (rawindexer.paged_kernels: "tma" is block size 64)
TOP_K = 2048


def builds(design: str, block_size: int) -> bool:
    from rawindexer import paged_kernels as pk

    return any(i.block_size == block_size for i in pk.TARGETS["sm_90a"].instances_of(design))


def topk_recall(got: np.ndarray, ref: np.ndarray, lengths: np.ndarray, k: int = TOP_K) -> float:
    """Worst row's |top-k(got) & top-k(ref)| / k with k = min(TOP_K, the row's length), over the valid columns
    (what an indexer's top-k selection keeps; 1.0 = the same set as the float64 reference)."""
    worst = 1.0
    for r, n in enumerate(lengths):
        n = int(n)
        if n == 0:
            continue
        kk = min(k, n)
        top = lambda row: set(np.argpartition(-row[:n], kk - 1)[:kk].tolist())  # noqa: E731
        worst = min(worst, len(top(got[r]) & top(ref[r])) / kk)
    return worst


def run_case(case, clean: bool, *, seed_note: str = "", **tunables) -> tuple[bool, str]:
    import torch

    import rawindexer

    dev = torch.device("cuda")
    t = {name: torch.from_numpy(np.ascontiguousarray(getattr(case, name))).to(dev)
         for name in ("q", "kv_cache", "weights", "context_lens", "block_table")}
    padded = torch.full((case.out.shape[0], case.max_context_len + 12), float("nan"), device=dev)
    out = padded[:, :case.max_context_len]
    rawindexer.fp8_paged_mqa_logits(t["q"], t["kv_cache"], t["weights"], t["context_lens"], t["block_table"],
                                    case.max_context_len, clean_logits=clean, out=out, **tunables)
    torch.cuda.synchronize()
    ok, msg, _ = grade_padded(case, padded.cpu().numpy(), clean, tunables.get("variant"))
    return ok, msg + seed_note


def grade_padded(case, got: np.ndarray, clean: bool, design: str | None) -> tuple[bool, str, float]:
    """(ok, message, top-k recall) of an output whose rows run past max_context_len into NaN padding: the design's
    per-logit gate against the float64 reference, the anchors' calc_diff, and the padding left untouched."""
    from rawindexer.testing.grading import DIFF_TOLERANCE, calc_diff

    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean, with_bound=True)
    grade = grade_paged(got[:, :case.max_context_len], ref, bound, case.lengths(), clean,
                        eps=design_eps("sm_90a", design))
    pad_ok = bool(np.isnan(got[:, case.max_context_len:]).all())
    inside = np.arange(case.max_context_len)[None, :] < case.lengths()[:, None]
    diff = calc_diff(got[:, :case.max_context_len][inside], ref[inside])
    ok = grade.ok and diff < DIFF_TOLERANCE  # the per-logit gate of the design, and the anchors' calc_diff
    recall = topk_recall(np.nan_to_num(got[:, :case.max_context_len], nan=-np.inf), ref, case.lengths())
    return ok and pad_ok, (grade.message + f", calc_diff {diff:.1e}, top-{TOP_K} recall {recall:.4f}"
                           + ("" if pad_ok else ", ROW PADDING WRITTEN")), recall


SWEEP = list(itertools.product(HEADS, DIMS, BLOCK_SIZES, NEXT_N, (False, True), (True, False)))


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("heads,head_dim,block_size,next_n,two_d,clean", SWEEP)
def test_sweep(rng, heads, head_dim, block_size, next_n, two_d, clean, design):
    if not builds(design, block_size):
        pytest.skip(f"{design} is not built for block size {block_size}")
    case = make_case(rng, ragged_lengths(block_size, LONG[block_size]), next_n=next_n, heads=heads,
                     head_dim=head_dim, block_size=block_size, two_d=two_d, share_blocks=True)
    ok, msg = run_case(case, clean, variant=design)
    assert ok, msg


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("split_n", [1, 2, 7, 40])
def test_forced_splits(rng, split_n, design):
    case = make_case(rng, [5000, 0, 64, 4097], next_n=2, heads=64, head_dim=128, block_size=64, share_blocks=True)
    ok, msg = run_case(case, True, split_n=split_n, variant=design)
    assert ok, msg


def _to(case, device) -> dict:
    import torch

    return {name: torch.from_numpy(np.ascontiguousarray(getattr(case, name))).to(device)
            for name in ("q", "kv_cache", "weights", "context_lens", "block_table")}


def _grade(case, got, clean: bool) -> tuple[bool, str]:
    ref, bound = fp8_paged_mqa_logits_ref(case.q, case.kv_cache, case.weights, case.context_lens, case.block_table,
                                          case.max_context_len, clean, with_bound=True)
    grade = grade_paged(got.cpu().numpy(), ref, bound, case.lengths(), clean, eps=design_eps("sm_90a"))
    return grade.ok, grade.message


def check_graph_replay(rng) -> str:
    """Three captures on a side stream, each replayed on new inputs written into the captured buffers with the
    output NaN-poisoned first: fp8_paged_mqa_logits with out=, a PagedIndexer whose output is allocated inside
    the capture (torch's graph pool), and a bound launch (prepare_paged_mqa_logits, bound outside the capture,
    called inside it: it follows the current stream). The context lengths change between replays (within each
    sequence's blocks): the kernel reads them itself and the host never does. torch.cuda.graph's default
    capture mode turns a synchronisation, an illegal allocation or a launch on another stream into an error."""
    import torch

    import rawindexer

    case = make_case(rng, [3000, 1700, 65], next_n=2, heads=64, head_dim=128, block_size=64)
    t = _to(case, "cuda")
    args = [t[n] for n in ("q", "kv_cache", "weights", "context_lens", "block_table")]
    out = torch.full(case.out.shape, float("nan"), device="cuda")
    decode = rawindexer.PagedIndexer(64, 128)
    bound = rawindexer.prepare_paged_mqa_logits(*args, case.max_context_len, clean_logits=True, out=out)
    calls = {
        "fp8_paged_mqa_logits(out=)": lambda: rawindexer.fp8_paged_mqa_logits(*args, case.max_context_len,
                                                                                clean_logits=True, out=out),
        "PagedIndexer, output allocated in the graph": lambda: decode(*args, case.max_context_len, clean_logits=True),
        "prepare_paged_mqa_logits(...)()": bound,
    }
    report = []
    for label, call in calls.items():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()  # warm-up: module load, plan and function attributes outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            static_out = call()
        for lens in ([3000, 1700, 65], [10, 1699, 0], [1, 1, 1]):
            case.context_lens[:] = lens
            case.q[...] = make_case(rng, [1, 1, 1], next_n=2, heads=64, head_dim=128, block_size=64).q
            t["context_lens"].copy_(torch.from_numpy(case.context_lens))
            t["q"].copy_(torch.from_numpy(case.q).to("cuda"))
            static_out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            ok, msg = _grade(case, static_out, True)
            assert ok, f"{label}, lengths {lens}: {msg}"
        report.append(label)
    return "graph replay, 3 input sets each: " + "; ".join(report)


def check_second_gpu(rng) -> str:
    """Tensors on cuda:1 while the current device is 0 (a tensor-parallel rank): the launch lands on device 1's
    current stream (a busy-wait and a NaN fill queued there first must finish before it, or the result is NaN),
    a new output is allocated on cuda:1, the current device is still 0 afterwards, device 0 gets no allocation,
    and inputs on mixed devices are one error with nothing launched."""
    import torch

    import rawindexer
    from rawindexer.validation import ValidationError

    torch.cuda.set_device(0)
    case = make_case(rng, [12000, 4097, 1], next_n=2, heads=64, head_dim=128, block_size=64)
    t = _to(case, "cuda:1")
    args = [t[n] for n in ("q", "kv_cache", "weights", "context_lens", "block_table")]
    decode = rawindexer.PagedIndexer(64, 128)
    report = []
    for label, call in (("fp8_paged_mqa_logits", lambda **kw: rawindexer.fp8_paged_mqa_logits(
                            *args, case.max_context_len, clean_logits=True, **kw)),
                        ("PagedIndexer", lambda **kw: decode(*args, case.max_context_len, clean_logits=True, **kw))):
        got = call()
        torch.cuda.synchronize(1)
        ok, msg = _grade(case, got, True)
        assert ok and got.device == torch.device("cuda:1"), f"{label} new output on {got.device}: {msg}"
        out = torch.empty(case.out.shape, device="cuda:1")
        torch.cuda.synchronize(1)
        allocated0 = torch.cuda.memory_allocated(0)
        with torch.cuda.device(1):
            torch.cuda._sleep(40_000_000)  # device 1's current stream: busy-wait, then the poison, then our call
            out.fill_(float("nan"))
        assert call(out=out) is out
        same_device = torch.cuda.current_device() == 0
        torch.cuda.synchronize(1)
        ok, msg = _grade(case, out, True)
        assert ok, f"{label} cuda:1 out= behind a busy-wait and NaN fill on device 1's current stream: {msg}"
        assert same_device, f"{label}: the current device changed to {torch.cuda.current_device()}"
        assert torch.cuda.memory_allocated(0) == allocated0, f"{label}: allocated on device 0"
        report.append(label)
    mixed = dict(t, weights=t["weights"].to("cuda:0"))
    out = torch.full(case.out.shape, float("nan"), device="cuda:1")
    try:
        rawindexer.fp8_paged_mqa_logits(*mixed.values(), case.max_context_len, out=out)
        raise AssertionError("inputs on mixed devices were accepted")
    except ValidationError as exc:
        assert str(exc).startswith("weights: expected every array on q's device"), str(exc)
    torch.cuda.synchronize(1)
    assert bool(torch.isnan(out).all()), "mixed devices: the output was written"
    return "cuda:1 with current device 0: " + ", ".join(report) + " right, on device 1's current stream; mixed " \
           "devices refused"


def check_auto_four_warpgroups(rng) -> str:
    """The default design on batches "auto" sends to "tma4" (next_n x H = 96 / 128, at least
    paged_sm90.AUTO_TMA4_MIN_TILES tiles at max_context_len: 256 sequences, max_context_len 4096, most of them short,
    a few long, shared blocks): the raw-pointer launch reports the four-warpgroup kernel, and its NaN-poisoned output
    is graded against the float64 reference (the design's gate, calc_diff, top-2048 recall) as the sweep's."""
    import torch

    import rawindexer

    report = []
    for heads, next_n in ((64, 2), (32, 4), (128, 1), (32, 3)):
        lengths = [int(v) for v in rng.integers(0, 300, 256)]
        lengths[int(rng.integers(0, 256))], lengths[int(rng.integers(0, 256))] = 4056, 2049
        case = make_case(rng, lengths, next_n=next_n, heads=heads, head_dim=128, block_size=64, share_blocks=True)
        t = _to(case, "cuda")
        padded = torch.full((case.out.shape[0], case.max_context_len + 12), float("nan"), device="cuda")
        ptrs = [t[n].data_ptr() for n in ("q", "kv_cache", "weights", "context_lens", "block_table")]
        template = rawindexer.launch_paged(*ptrs, padded.data_ptr(), batch=256, next_n=next_n, num_heads=heads,
                                           head_dim=128, block_size=64, num_blocks=case.kv_cache.shape[0],
                                           max_blocks=case.block_table.shape[1],
                                           max_context_len=case.max_context_len, out_row_stride=padded.stride(0),
                                           clean_logits=True, stream=torch.cuda.current_stream().cuda_stream,
                                           device="cuda")
        torch.cuda.synchronize()
        assert template.symbol.endswith(f"_tma4_n{next_n}"), f"H {heads} next_n {next_n}: auto ran {template.symbol}"
        ok, msg, recall = grade_padded(case, padded.cpu().numpy(), True, "tma4")
        assert ok and recall >= 0.99, f"H {heads} next_n {next_n}: {msg}"
        report.append(f"H {heads} next_n {next_n} ({template.symbol.split('sm90_')[1]}, recall {recall:.4f})")
    return "auto at 256 x 4096 tiles ran the four-warpgroup kernel, graded: " + "; ".join(report)


def check_allocated_output(rng) -> str:
    import torch

    import rawindexer

    case = make_case(rng, [900, 33], next_n=1, heads=32, head_dim=128, block_size=64)
    got = rawindexer.fp8_paged_mqa_logits(*_to(case, "cuda").values(), case.max_context_len, clean_logits=True)
    assert isinstance(got, torch.Tensor) and got.is_cuda and tuple(got.shape) == case.out.shape
    ok, msg = _grade(case, got, True)
    assert ok, msg
    return "allocated torch output: " + msg


def _two_gpus() -> bool:
    return _cuda_available() and __import__("torch").cuda.device_count() >= 2


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
def test_cuda_graph_replay(rng):
    check_graph_replay(rng)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
def test_auto_four_warpgroups(rng):
    check_auto_four_warpgroups(rng)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and torch")
def test_allocated_output(rng):
    check_allocated_output(rng)


@pytest.mark.gpu
@pytest.mark.two_gpus
@pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs and torch")
def test_second_gpu(rng):
    check_second_gpu(rng)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="H=64, D=128 only")
    parser.add_argument("--design", "--variant", choices=DESIGNS, action="append",
                        help="default: all (--variant: its older name)")
    parser.add_argument("--checks-only", action="store_true",
                        help="skip the sweep: only the graph, allocation and (two GPUs) cuda:1 checks")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--split", type=int, default=0, help="split_n forced on every sweep case (0: the heuristic)")
    parser.add_argument("--persistent-grid", type=int, default=0,
                        help="a persistent build's grid at most this many blocks (several (b, split) units each)")
    args = parser.parse_args()
    if args.persistent_grid:
        from rawindexer.dispatch import paged_sm90
        paged_sm90.PERSISTENT_MAX_GRID = args.persistent_grid
    seed = int(time.time())
    rng = np.random.default_rng(seed)
    lines = [f"seed {seed}"]
    failed = 0
    worst_recall: dict[str, float] = {}
    for heads, head_dim, bs, next_n, two_d, clean in [] if args.checks_only else SWEEP:
        if args.quick and (heads, head_dim) != (64, 128):
            continue
        case = make_case(rng, ragged_lengths(bs, LONG[bs]), next_n=next_n, heads=heads, head_dim=head_dim,
                         block_size=bs, two_d=two_d, share_blocks=True)
        for design in args.design or DESIGNS:
            if not builds(design, bs):
                continue
            ok, msg = run_case(case, clean, split_n=args.split, variant=design)
            recall = float(msg.split("recall ")[1].split(",")[0])
            worst_recall[design] = min(worst_recall.get(design, 1.0), recall)
            failed += not ok
            lines.append(f"{'PASS' if ok else 'FAIL'} {design} H={heads} D={head_dim} bs={bs} next_n={next_n} "
                         f"{'2d' if two_d else '1d'} clean={int(clean)}: {msg}")
            print(lines[-1], flush=True)
    checks = [check_graph_replay, check_auto_four_warpgroups, check_allocated_output]
    if _two_gpus():
        checks.append(check_second_gpu)
    else:
        lines.append("SKIP cuda:1 check: one GPU (run on nvidia-h200-x2)")
        print(lines[-1])
    for check in checks:
        try:
            lines.append(f"PASS {check.__name__}: {check(rng)}")
        except Exception as exc:  # every check reports, the others still run
            failed += 1
            lines.append(f"FAIL {check.__name__}: {type(exc).__name__}: {exc}")
        print(lines[-1], flush=True)
    for design, recall in worst_recall.items():
        lines.append(f"worst top-{TOP_K} recall (k = min({TOP_K}, row length)) vs the float64 reference, {design}: "
                     f"{recall:.4f}")
        print(lines[-1])
    runs = sum(line.startswith(("PASS", "FAIL")) for line in lines)
    lines.append(f"{runs - failed}/{runs} passed")
    print(lines[-1])
    if args.log:
        args.log.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
