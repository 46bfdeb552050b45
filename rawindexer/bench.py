"""Benchmark of the sm_90a kernel against DeepGEMM, a Triton baseline and plain torch, on one CUDA GPU.

    python -m rawindexer.bench [--out bench/] [--quick] [--tune] [--host-only] [--dlpack-cost]
    python -m rawindexer.bench --paged [--quick] [--block-size 64] [--log FILE]   (decode: rawindexer.bench_paged)

Cases: the seed's chunk shapes x windows {causal (one request, vLLM convention: diagonal included),
multi_req (four packed requests)} x clean_logits {0, 1} x heads {32, 64}, head_dim 128.
Each call is the public call as a serving loop makes it (torch CUDA tensors in, a new output out), on the
next of several input sets whose total exceeds twice the 60 MB L2 (so the numbers are not L2-resident).
Three numbers per implementation:
  (a) loop:   back-to-back calls, host included: CUDA events around a run of calls (enough for ~3 ms of device
              time, at least --reps), divided by their count; twice: the public call with a new output, and the
              form README gives serving loops, ``Indexer.bind`` on persistent buffers (a bound launch per input
              set, called back to back: "(a) bound");
  (b) device: CUDA events around each call with the stream kept busy for ~1 ms before it, so the host path
              is hidden: device time only (median); ours and DeepGEMM's each start after --settle s (default
              1) of idle, so both start from the same power state (see SETTLE_S);
  (c) host:   wall-clock microseconds of the host per call, measured in (b)'s loop while the GPU queue is
              non-empty (median), i.e. what the call costs the host thread.
(a) within ~(b) means the host path hides behind the kernel. The alternative is DeepGEMM's fp8_mqa_logits
(``fp8_mqa_logits(q, (k, kv_scale), weights, ks, ke, clean_logits)``) when ``deep_gemm`` imports; Triton and
torch get (b) only. Geomean ratios ours/DeepGEMM for (a) and (b) separately. A second table prices the host
path alone per entry point (fp8_mqa_logits, the prepared Indexer, launch() with integer pointers, CuPy, JAX,
DeepGEMM) at (1024, 1024) H=64.
TFLOP/s counts 2*H*D flops per in-window (row, key) pair; "% peak" is relative to a large fp8
torch._scaled_mm measured in the same run. Progress goes to stderr; the table and summary to stdout;
CSV and PNG under --out.

The "torch" column is :func:`rawindexer.testing.torch_reference.torch_fp8_mqa_logits`, also the reference
of the GPU tests (tests/gpu/test_cuda_gpu.py).
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .testing.torch_reference import make_inputs, torch_fp8_mqa_logits  # noqa: F401  (bench/*.py import them here)
from .testing.windows import causal, multi_req

SHAPES = [(1024, 1024), (4096, 4096), (8192, 8192), (4096, 32768), (2048, 65536), (1024, 131072),
          (128, 32768), (671, 131072)]
WINDOWS = ("causal", "multi_req")
HEADS = (32, 64)
HEAD_DIM = 128
L2_BYTES = 60 * 2**20


#: --trace: a wall-clock stamp at the start of each timed phase of a case, to line the log up with a clock / power trace
TRACE = False


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


#: seconds the card idles before each device-time (b) measurement, ours and DeepGEMM's alike (--settle): under a long
#: kernel the H200 reaches its power cap within ~0.1 s when the seconds before were busy, and then lowers the SM clock
#: (docs/results/session12/c1: 1980 -> 1845 MHz inside one case's timing), so without it a case's number depends on
#: what the benchmark ran just before it (the previous case's Triton and torch timings)
SETTLE_S = 1.0


def settle(seconds: float) -> None:
    """Let the card idle ``seconds`` (after finishing its queue) before a timed phase."""
    if seconds > 0:
        import torch

        torch.cuda.synchronize()
        time.sleep(seconds)


def phase(name: str) -> None:
    if TRACE:
        log(f"@{time.time():.3f} {name}")


def input_sets(M: int, N: int, H: int, ks_np: np.ndarray, ke_np: np.ndarray) -> list[tuple]:
    """Inputs of one case (rawindexer.testing.torch_reference.make_inputs, seeds 1000, 1001, ...), as many sets (2 to
    16) as make their bytes -- q, k, kv_scale, weights and the [M, N] output -- exceed twice the L2: timings that
    rotate through them never find a set still in L2."""
    set_bytes = M * H * HEAD_DIM + N * HEAD_DIM + 4 * (N + M * H) + 4 * M * N
    nsets = int(min(16, max(2, math.ceil(2 * L2_BYTES / set_bytes))))
    return [make_inputs(M, N, H, HEAD_DIM, ks_np, ke_np, seed=1000 + i) for i in range(nsets)]


def windows_for(mode: str, M: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """causal: one request, vLLM convention (diagonal included); multi_req: four packed requests."""
    if mode == "causal":
        return causal(M, N, diagonal=True)
    return multi_req(M, N, requests=4, diagonal=True)


def window_pairs(ks: np.ndarray, ke: np.ndarray, N: int) -> int:
    s = np.clip(ks.astype(np.int64), 0, N)
    e = np.maximum(np.clip(ke.astype(np.int64), 0, N), s)
    return int((e - s).sum())


# ---------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------
def time_fn(fn: Callable[[int], object], sets: int, reps: int, warmup: int = 3) -> float:
    """Median device microseconds of fn(set_index) over ``reps`` calls, rotating input sets ((b) only)."""
    return time_device_and_host(fn, sets, reps, warmup)[0]


def time_device_and_host(fn: Callable[[int], object], sets: int, reps: int, warmup: int = 3) -> tuple[float, float]:
    """(b) median device microseconds and (c) median host microseconds of fn(set_index) over ``reps`` calls,
    rotating input sets. Before each call the stream is kept busy for ~1 ms, so the call is enqueued while the
    GPU queue is non-empty: the events then time the device work alone, and the host clock the host path."""
    import torch

    for i in range(warmup):
        fn(i % sets)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    host = []
    clock = time.perf_counter_ns
    for i in range(reps):
        torch.cuda._sleep(2_000_000)  # ~1 ms of GPU busy-wait: the host enqueues fn meanwhile
        starts[i].record()
        t0 = clock()
        fn(i % sets)
        host.append(clock() - t0)
        ends[i].record()
    torch.cuda.synchronize()
    return (float(np.median([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)])),
            float(np.median(host)) / 1e3)


def loop_calls(reps: int, device_us: float, run_us: float = 3000.0, most: int = 2000) -> int:
    """Calls per (a) run: at least ``reps``, and enough that a run lasts ~``run_us`` of device time. A run starts
    with the queue empty, so its first call's host path runs with the GPU idle; over 10 calls of a 10 us kernel
    that one-off fill would add ~1.5 us to every call, which a serving loop (one call per layer per step, back to
    back) pays once, not per call."""
    return int(max(reps, min(most, math.ceil(run_us / max(device_us, 1e-3)))))


def time_loop(fn: Callable[[int], object], sets: int, reps: int, warmup: int = 3, rounds: int = 5) -> float:
    """(a) microseconds per call of back-to-back calls, host included (the median of ``rounds`` runs of ``reps``
    calls, each run timed by events around it with the queue empty at its start)."""
    import torch

    for i in range(warmup):
        fn(i % sets)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for i in range(reps):
            fn(i % sets)
        end.record()
        torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3 / reps)
    return float(np.median(per_call))


def deepgemm_fn() -> Callable | None:
    """DeepGEMM's fp8_mqa_logits as f(q, k, kv_scale, weights, ks, ke, clean_logits) when it imports, else None."""
    try:
        import deep_gemm
    except Exception as exc:  # noqa: BLE001 -- any import failure means "not on this machine"
        log(f"DeepGEMM not importable ({type(exc).__name__}: {exc}): its columns are n/a")
        return None
    fn = getattr(deep_gemm, "fp8_mqa_logits", None)
    if fn is None:
        log("deep_gemm has no fp8_mqa_logits: its columns are n/a")
        return None
    return lambda q, k, kv_scale, weights, ks, ke, clean: fn(q, (k, kv_scale), weights, ks, ke, clean_logits=clean)


def fp8_peak_tflops() -> float:
    """fp8 tensor rate of this GPU: a large torch._scaled_mm (e4m3 x e4m3 -> bf16), median of 20."""
    import torch

    n = 8192
    a = torch.randn((n, n), device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn((n, n), device="cuda").to(torch.float8_e4m3fn).T  # column-major, as _scaled_mm wants
    one = torch.tensor(1.0, device="cuda")
    fn = lambda _: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    us = time_fn(fn, 1, 20)
    return 2 * n ** 3 / us / 1e6


# ---------------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------------
@dataclass
class Row:
    s_q: int
    s_k: int
    clean: bool
    window: str
    heads: int
    torch_us: float
    triton_us: float
    ours_us: float          # (b) device
    tflops: float
    pct_peak: float
    speedup: float = field(init=False)
    check: str = "ok"
    ours_loop_us: float = float("nan")   # (a)
    ours_bound_loop_us: float = float("nan")  # (a) through Indexer.bind on persistent buffers
    ours_host_us: float = float("nan")   # (c)
    dg_loop_us: float = float("nan")
    dg_us: float = float("nan")
    dg_host_us: float = float("nan")
    dg_check: str = "n/a"

    def __post_init__(self) -> None:
        self.speedup = self.triton_us / self.ours_us


def quick_check(ours, ref, clean: bool, ks, ke) -> str:
    """Same gates as the tests, on the GPU: -inf mask equality and calc_diff < 1e-3 inside the windows."""
    import torch

    N = ref.shape[1]
    cols = torch.arange(N, device=ref.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    inside = (cols[None, :] >= s[:, None]) & (cols[None, :] < e[:, None])
    if clean and not torch.equal(torch.isneginf(ours), torch.isneginf(ref)):
        return "MASK"
    x, y = ours[inside].double(), ref[inside].double()
    if torch.isnan(x).any():
        return "NAN"
    den = float((x * x + y * y).sum())
    diff = 0.0 if den == 0 else 1 - 2 * float((x * y).sum()) / den
    return "ok" if diff < 1e-3 else f"diff {diff:.1e}"


def run(shapes, windows, heads, cleans, reps: int, torch_reps: int, tune: bool,
        settle_s: float = SETTLE_S) -> tuple[list[Row], float]:
    import torch

    import rawindexer
    from rawindexer.triton_baseline import fp8_mqa_logits_triton

    peak = fp8_peak_tflops()
    log(f"fp8 peak (torch._scaled_mm 8192^3): {peak:.0f} TFLOP/s on {torch.cuda.get_device_name()}")
    deepgemm = deepgemm_fn()
    rows: list[Row] = []
    for (M, N) in shapes:
        for window in windows:
            try:
                ks_np, ke_np = windows_for(window, M, N)
            except ValueError as exc:
                log(f"skip {M}x{N} {window}: {exc}")
                continue
            pairs = window_pairs(ks_np, ke_np, N)
            for H in heads:
                sets = input_sets(M, N, H, ks_np, ke_np)
                nsets = len(sets)
                outs = [torch.empty((M, N), device="cuda", dtype=torch.float32) for _ in range(nsets)]
                for clean in cleans:
                    t0 = time.time()
                    phase(f"{M}x{N} {window} c{int(clean)} H{H} check")
                    # the call as a serving loop makes it: torch tensors in, a new output out (as DeepGEMM's)
                    ours = lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean)
                    tri = lambda i: fp8_mqa_logits_triton(*sets[i], clean_logits=clean)
                    ref_fn = lambda i: torch_fp8_mqa_logits(*sets[i], clean_logits=clean)
                    # correctness spot check of this exact case before timing it (out= poisoned with NaN)
                    outs[0].fill_(float("nan"))
                    got = rawindexer.fp8_mqa_logits(*sets[0], clean_logits=clean, out=outs[0])
                    ref = ref_fn(0)
                    check = quick_check(got, ref, clean, sets[0][4], sets[0][5])
                    dg_check = "n/a"
                    if deepgemm is not None:
                        try:
                            dg_check = quick_check(deepgemm(*sets[0], clean), ref, clean, sets[0][4], sets[0][5])
                        except Exception as exc:  # noqa: BLE001 -- report, keep benchmarking ours
                            dg_check = f"error {type(exc).__name__}"
                            log(f"DeepGEMM failed at {M}x{N} H={H}: {exc}")
                    del ref
                    phase(f"{M}x{N} {window} c{int(clean)} H{H} ours")
                    settle(settle_s)
                    us_ours, host_ours = time_device_and_host(ours, nsets, reps)
                    loop_ours = time_loop(ours, nsets, loop_calls(reps, us_ours))
                    # the serving loop's form: persistent buffers bound once (README), launched back to back
                    indexer = rawindexer.Indexer(H, HEAD_DIM)
                    bound = [indexer.bind(*sets[i], clean_logits=clean, out=outs[i]) for i in range(nsets)]
                    loop_bound = time_loop(lambda i: bound[i](), nsets, loop_calls(reps, us_ours))
                    del bound, indexer
                    phase("triton")
                    us_tri = time_fn(tri, nsets, reps)
                    phase("torch")
                    us_torch = time_fn(ref_fn, nsets, torch_reps, warmup=1)
                    tflops = 2 * H * HEAD_DIM * pairs / us_ours / 1e6
                    row = Row(M, N, clean, window, H, us_torch, us_tri, us_ours, tflops, 100 * tflops / peak)
                    row.check, row.ours_loop_us, row.ours_host_us, row.dg_check = check, loop_ours, host_ours, dg_check
                    row.ours_bound_loop_us = loop_bound
                    if deepgemm is not None and not dg_check.startswith("error"):
                        dg = lambda i: deepgemm(*sets[i], clean)
                        phase("deepgemm")
                        settle(settle_s)
                        row.dg_us, row.dg_host_us = time_device_and_host(dg, nsets, reps)
                        row.dg_loop_us = time_loop(dg, nsets, loop_calls(reps, row.dg_us))
                    rows.append(row)
                    phase("end")
                    log(f"{M:5d} {N:6d} clean={int(clean)} {window:9s} H={H}: ours a {loop_ours:8.1f} "
                        f"a-bound {loop_bound:8.1f} b {us_ours:8.1f} "
                        f"c {host_ours:5.1f} us | DeepGEMM a {row.dg_loop_us:8.1f} b {row.dg_us:8.1f} "
                        f"c {row.dg_host_us:5.1f} | triton {us_tri:8.1f} torch {us_torch:9.1f} | {tflops:5.0f} TFLOP/s "
                        f"[{check}] [dg {dg_check}] ({time.time() - t0:.1f}s)")
                    if tune and clean and window == "causal":
                        tune_case(sets, outs, clean, nsets, reps)
                del sets, outs
                torch.cuda.empty_cache()
    return rows, peak


def tune_case(sets, outs, clean: bool, nsets: int, reps: int) -> None:
    """Print the time of a few tunable settings for one case (feeds the heuristic in dispatch/sm90.py)."""
    import rawindexer

    H = sets[0][0].shape[1]
    results = []
    for bm in sorted({64 // H, 128 // H, 256 // H} - {0}):
        for nw in (4, 8):
            for split in (0, 1, 2, 4):
                try:
                    fn = lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean, out=outs[i], block_m=bm,
                                                             num_warps=nw, split_n=split)
                    results.append((time_fn(fn, nsets, max(5, reps // 3)), bm, nw, split))
                except ValueError:
                    pass
    results.sort()
    log("   tune (us, block_m, num_warps, split_n; 0 = heuristic): "
        + "  ".join(f"{us:.1f}/{bm}/{nw}/{sp}" for us, bm, nw, sp in results[:6]))


def summarize(rows: list[Row]) -> list[tuple[str, int, float, float, float, int]]:
    groups = {
        "causal": [r for r in rows if r.window == "causal"],
        "multi_req": [r for r in rows if r.window == "multi_req"],
        "clean_logits=True": [r for r in rows if r.clean],
        "clean_logits=False": [r for r in rows if not r.clean],
        **{f"H={h}": [r for r in rows if r.heads == h] for h in sorted({r.heads for r in rows})},
        "all": rows,
    }
    out = []
    for name, rs in groups.items():
        if not rs:
            continue
        sp = [r.speedup for r in rs]
        out.append((name, len(rs), float(np.exp(np.mean(np.log(sp)))), min(sp), max(sp), sum(s > 1 for s in sp)))
    return out


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def report(rows: list[Row], peak: float, out_dir: Path | None, command: str, host_table: str = "") -> str:
    lines = [f"fp8 tensor peak measured in this run (torch._scaled_mm 8192^3): {peak:.0f} TFLOP/s",
             "(a) back-to-back calls, host included (public call, new output; 'bound': Indexer.bind on persistent "
             "buffers); (b) device only, after --settle s of idle; (c) host µs per call with the GPU queue "
             "non-empty",
             "",
             "s_q\ts_k\tclean\twindow\tH\tours (a) µs\tours (a) bound µs\tours (b) µs\tours (c) µs\t(a)/(b)\t"
             "(a) bound/(b)\t"
             "DeepGEMM (a)\tDeepGEMM (b)\tDeepGEMM (c)\tours/DG (a)\tours/DG (b)\tTriton (b)\ttorch (b)\t"
             "vs Triton\tTFLOP/s\t% peak\tcheck\tDG check"]
    for r in rows:
        lines.append(f"{r.s_q}\t{r.s_k}\t{r.clean}\t{r.window}\t{r.heads}\t{r.ours_loop_us:.1f}\t"
                     f"{r.ours_bound_loop_us:.1f}\t{r.ours_us:.1f}\t{r.ours_host_us:.1f}\t{r.ours_loop_us / r.ours_us:.2f}\t"
                     f"{r.ours_bound_loop_us / r.ours_us:.2f}\t{r.dg_loop_us:.1f}\t{r.dg_us:.1f}\t"
                     f"{r.dg_host_us:.1f}\t{r.ours_loop_us / r.dg_loop_us:.2f}\t{r.ours_us / r.dg_us:.2f}\t"
                     f"{r.triton_us:.1f}\t{r.torch_us:.1f}\t{r.speedup:.2f}x\t{r.tflops:.0f}\t{r.pct_peak:.0f}%\t"
                     f"{r.check}\t{r.dg_check}")
    lines += ["", "group\tcases\tgeomean vs Triton (b)\trange\tours faster"]
    for name, n, gm, lo, hi, faster in summarize(rows):
        lines.append(f"{name}\t{n}\t{gm:.2f}x\t{lo:.2f}x - {hi:.2f}x\t{faster} / {n}")
    if rows:
        lines.append("")
        for label, loop_of in (("(a)", lambda r: r.ours_loop_us), ("(a) bound", lambda r: r.ours_bound_loop_us)):
            ab = [loop_of(r) / r.ours_us for r in rows]
            worst = max(rows, key=lambda r: loop_of(r) / r.ours_us)
            lines.append(f"ours {label}/(b): geomean {_geomean(ab):.3f}, max {max(ab):.3f} at {worst.s_q}x{worst.s_k} "
                         f"{worst.window} clean={int(worst.clean)} H={worst.heads}; cases with {label} > 1.10 (b): "
                         f"{sum(x > 1.10 for x in ab)} / {len(ab)}")
        lines += [f"ours host (c): median {np.median([r.ours_host_us for r in rows]):.1f} µs, "
                  f"max {max(r.ours_host_us for r in rows):.1f} µs"]
        if any(r.dg_us == r.dg_us for r in rows):
            lines += [f"geomean time ratio ours/DeepGEMM (lower = ours faster): (a) "
                      f"{_geomean([r.ours_loop_us / r.dg_loop_us for r in rows]):.3f}, (b) "
                      f"{_geomean([r.ours_us / r.dg_us for r in rows]):.3f}; ours faster in (a) "
                      f"{sum(r.ours_loop_us < r.dg_loop_us for r in rows)} / {len(rows)}, in (b) "
                      f"{sum(r.ours_us < r.dg_us for r in rows)} / {len(rows)}",
                      f"DeepGEMM host (c): median {np.nanmedian([r.dg_host_us for r in rows]):.1f} µs"]
    if host_table:
        lines += ["", host_table]
    text = "\n".join(lines)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "bench_h200.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["s_q", "s_k", "clean_logits", "window", "heads", "torch_us", "triton_us", "ours_us",
                        "speedup_vs_triton", "tflops", "pct_fp8_peak", "check", "ours_loop_us", "ours_host_us",
                        "deepgemm_loop_us", "deepgemm_us", "deepgemm_host_us", "deepgemm_check", "ours_bound_loop_us"])
            for r in rows:
                w.writerow([r.s_q, r.s_k, int(r.clean), r.window, r.heads, f"{r.torch_us:.2f}", f"{r.triton_us:.2f}",
                            f"{r.ours_us:.2f}", f"{r.speedup:.3f}", f"{r.tflops:.1f}", f"{r.pct_peak:.1f}", r.check,
                            f"{r.ours_loop_us:.2f}", f"{r.ours_host_us:.2f}", f"{r.dg_loop_us:.2f}", f"{r.dg_us:.2f}",
                            f"{r.dg_host_us:.2f}", r.dg_check, f"{r.ours_bound_loop_us:.2f}"])
        (out_dir / "bench_h200.txt").write_text(f"$ {command}\n\n{text}\n")
        plot(rows, peak, out_dir / "bench_h200.png")
    return text


def plot(rows: list[Row], peak: float, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plot")
        return
    labels = [f"{r.s_q}x{r.s_k}\n{r.window[:5]} c{int(r.clean)} H{r.heads}" for r in rows]
    x = np.arange(len(rows))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(12, len(rows) * 0.45), 9), sharex=True)
    ax1.bar(x, [r.speedup for r in rows], color=["tab:green" if r.speedup >= 1 else "tab:red" for r in rows])
    ax1.axhline(1.0, color="k", lw=0.8)
    ax1.axhline(2.0, color="gray", lw=0.8, ls="--")
    ax1.set_ylabel("speedup vs Triton baseline")
    ax1.set_yscale("log")
    ax2.bar(x, [r.pct_peak for r in rows], color="tab:blue")
    ax2.axhline(75, color="gray", lw=0.8, ls="--")
    ax2.set_ylabel(f"% of fp8 peak ({peak:.0f} TFLOP/s)")
    ax2.set_xticks(x, labels, rotation=90, fontsize=6)
    fig.suptitle("fp8_mqa_logits sm_90a kernel on H200 (head_dim 128)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------------------------------
# the host path alone
# ---------------------------------------------------------------------------------------------------
def _host_us_interleaved(entries: list[tuple[str, Callable[[], object]]], reps: int, rounds: int
                         ) -> dict[str, float]:
    """Per entry, the median over ``rounds`` of the host wall-clock microseconds per call of ``reps`` back-to-back
    calls, each run started behind ~20 ms of GPU busy-wait so the queue stays non-empty (the host never waits).
    Rounds visit every entry in turn, so drifts of the host (clocks, other processes) hit every entry alike rather
    than whichever was measured first."""
    import time as _time

    import torch

    for _, fn in entries:
        for _ in range(10):
            fn()
    per_call: dict[str, list[float]] = {name: [] for name, _ in entries}
    for _ in range(rounds):
        for name, fn in entries:
            torch.cuda.synchronize()
            torch.cuda._sleep(20_000_000)
            t0 = _time.perf_counter_ns()
            for _ in range(reps):
                fn()
            per_call[name].append((_time.perf_counter_ns() - t0) / reps / 1e3)
    torch.cuda.synchronize()
    return {name: float(np.median(v)) for name, v in per_call.items()}


def host_cost_table(reps: int = 200, rounds: int = 15) -> str:
    """Host microseconds per call of each entry point at (1024, 1024) H=64 causal, clean_logits, measured on the
    GPU with the queue kept non-empty: what a serving loop pays on its host thread per layer."""
    import torch

    import rawindexer

    M, N, H = 1024, 1024, 64
    ks_np, ke_np = windows_for("causal", M, N)
    args = make_inputs(M, N, H, HEAD_DIM, ks_np, ke_np, seed=7)
    out = torch.empty((M, N), device="cuda", dtype=torch.float32)
    ind = rawindexer.Indexer(H, HEAD_DIM)
    raw = rawindexer.Indexer(H, HEAD_DIM, device="cuda")
    ptrs = tuple(x.data_ptr() for x in (*args, out))
    stream = torch.cuda.current_stream().cuda_stream
    entries: list[tuple[str, Callable[[], object]]] = [
        ("fp8_mqa_logits(torch tensors) -> new output", lambda: rawindexer.fp8_mqa_logits(*args)),
        ("fp8_mqa_logits(torch tensors, out=)", lambda: rawindexer.fp8_mqa_logits(*args, out=out)),
        ("Indexer(torch tensors) -> new output", lambda: ind(*args)),
        ("Indexer(torch tensors, out=)", lambda: ind(*args, out=out)),
        ("launch(integer pointers, stream=)", lambda: rawindexer.launch(*ptrs, M=M, N=N, num_heads=H, head_dim=HEAD_DIM,
                                                                        stream=stream, device="cuda")),
        ("Indexer.launch_pointers(integer pointers)", lambda: raw.launch_pointers(ptrs, M, N, stream=stream)),
        ("Indexer.bind(torch tensors, out=)() (persistent buffers)", ind.bind(*args, out=out)),
        ("for scale: torch.empty((M, N)) alone", lambda: torch.empty((M, N), device="cuda", dtype=torch.float32)),
        ("for scale: out.add_(1.0), one torch op", lambda: out.add_(1.0)),
    ]
    dg = deepgemm_fn()
    if dg is not None:
        entries.append(("DeepGEMM fp8_mqa_logits -> new output", lambda: dg(*args, True)))
    try:
        import cupy

        c = [cupy.from_dlpack(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x) for x in args]
        cout = cupy.empty((M, N), dtype=cupy.float32)
        entries += [("fp8_mqa_logits(CuPy arrays) -> new output", lambda: rawindexer.fp8_mqa_logits(*c)),
                    ("fp8_mqa_logits(CuPy arrays, out=)", lambda: rawindexer.fp8_mqa_logits(*c, out=cout))]
    except Exception as exc:  # noqa: BLE001
        log(f"CuPy row skipped: {type(exc).__name__}: {exc}")
    try:
        import jax

        gpu = jax.devices("gpu")[0]
        j = [jax.device_put((x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x).cpu().numpy(), gpu)
             for x in args]
        entries.append(("fp8_mqa_logits(JAX arrays) -> new output", lambda: rawindexer.fp8_mqa_logits(*j)))
    except Exception as exc:  # noqa: BLE001
        log(f"JAX row skipped: {type(exc).__name__}: {exc}")
    from rawindexer.backends import get_backend

    driver = get_backend("cuda")._raw  # (not "raw": the launch_pointers row's lambda reads that name)
    route = ("cuda-bindings" if driver is None else "C launcher extension" if driver.extension is not None
             else "C launcher via ctypes" if driver.shim is not None else "ctypes")
    lines = [f"host µs per call at ({M}, {N}) H={H} causal, clean_logits (GPU queue non-empty; median of {rounds} "
             f"interleaved rounds of {reps} calls; per-call CUDA route: {route})", "entry point\thost µs/call"]
    working = []
    for name, fn in entries:
        try:
            fn()
            working.append((name, fn))
        except Exception as exc:  # noqa: BLE001 -- one broken route must not hide the others
            lines.append(f"{name}\terror {type(exc).__name__}: {exc}")
            log(lines[-1])
    for name, us in _host_us_interleaved(working, reps, rounds).items():
        lines.append(f"{name}\t{us:.2f}")
        log(lines[-1])
    return "\n".join(lines)


def dlpack_cost_table(reps: int = 2000, rounds: int = 7) -> str:
    """What the DLPack interface costs per array, per framework present: the producer's ``__dlpack__`` (export
    and drop), ``__dlpack_device__``, our import (export + parse + release), and the attribute route we take
    for torch / CuPy instead. CPU arrays always; CUDA arrays where a GPU is visible."""
    import timeit

    from rawindexer import api, dlpack

    arrays: list[tuple[str, object, int | None]] = [("numpy", np.zeros((1024, 64), np.float32), None)]
    try:
        import torch

        arrays.append(("torch CPU", torch.zeros((1024, 64)), None))
        if torch.cuda.is_available():
            arrays.append(("torch CUDA", torch.zeros((1024, 64), device="cuda"),
                           torch.cuda.current_stream().cuda_stream or 1))  # DLPack: 1 = the legacy default stream
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp

        arrays.append(("JAX CPU", jax.device_put(jnp.zeros((1024, 64)), jax.devices("cpu")[0]), None))
        try:
            arrays.append(("JAX GPU", jax.device_put(jnp.zeros((1024, 64)), jax.devices("gpu")[0]), 1))
        except RuntimeError:
            pass
    except ImportError:
        pass
    try:
        import cupy

        arrays.append(("CuPy", cupy.zeros((1024, 64), cupy.float32), cupy.cuda.get_current_stream().ptr or 1))
    except Exception:  # noqa: BLE001 -- no CuPy or no GPU
        pass

    def best(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=reps, repeat=rounds)) / reps * 1e6

    lines = ["framework\t__dlpack__() export+drop µs\t__dlpack_device__() µs\tours: from_dlpack+release µs\t"
             "ours: attribute route µs"]
    for name, x, stream in arrays:
        kw = {} if stream is None else {"stream": stream}
        export = best(lambda: x.__dlpack__(**kw))
        device = best(lambda: x.__dlpack_device__())
        ours = best(lambda: dlpack.from_dlpack(x, name="x", stream=stream).release())
        fw, reader = api._classify(type(x), x)
        attr = f"{best(lambda: reader(x, 'x', None)):.2f}" if reader is not None else "-"
        lines.append(f"{name}\t{export:.2f}\t{device:.2f}\t{ours:.2f}\t{attr}")
    return "\n".join(lines)


def shape_list(value: str) -> list[tuple[int, int]]:
    """--shapes: "1024x131072,4096x4096" -> [(1024, 131072), (4096, 4096)]."""
    try:
        return [(int(m), int(n)) for m, n in (part.split("x") for part in value.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of MxN, e.g. 1024x131072, got {value!r}") from None


def heads_list(value: str) -> tuple[int, ...]:
    """--heads: "32,64" -> (32, 64)."""
    try:
        return tuple(int(h) for h in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of head counts, e.g. 32,64, got {value!r}") from None


def main(argv: list[str] | None = None) -> int | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--paged" in argv:  # the decode op's benchmark takes the remaining arguments
        from . import bench_paged

        return bench_paged.main([a for a in argv if a != "--paged"])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paged", action="store_true",
                        help="benchmark fp8_paged_mqa_logits instead (python -m rawindexer.bench_paged; its options)")
    parser.add_argument("--out", type=Path, default=None, help="folder for bench_h200.{csv,png,txt}")
    parser.add_argument("--quick", action="store_true", help="three shapes, H=32 only")
    parser.add_argument("--tune", action="store_true", help="also time a few tunable settings per causal case")
    parser.add_argument("--shapes", type=shape_list, default=None,
                        help="comma list of MxN (default: the benchmark's shapes, or --quick's)")
    parser.add_argument("--heads", type=heads_list, default=None,
                        help="comma list of head counts (default: 32,64; --quick: 32)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--settle", type=float, default=SETTLE_S,
                        help=f"seconds of idle before each device-time (b) measurement (default {SETTLE_S}; 0: none)")
    parser.add_argument("--trace", action="store_true", help="stamp the start of each timed phase (wall clock)")
    parser.add_argument("--torch-reps", type=int, default=3)
    parser.add_argument("--host-only", action="store_true", help="only the host-cost table (needs a GPU)")
    parser.add_argument("--dlpack-cost", action="store_true",
                        help="only the DLPack cost table (runs without a GPU: CPU arrays of each framework present)")
    args = parser.parse_args(argv)
    command = "python -m rawindexer.bench " + " ".join(argv)
    global TRACE
    TRACE = args.trace
    if args.dlpack_cost:
        print(f"$ {command}\n\n{dlpack_cost_table()}")
        return
    if args.host_only:
        print(f"$ {command}\n\n{host_cost_table()}")
        return
    shapes = args.shapes or ([(1024, 1024), (4096, 32768), (128, 32768)] if args.quick else SHAPES)
    heads = args.heads or ((32,) if args.quick else HEADS)
    rows, peak = run(shapes, WINDOWS, heads, (True, False), args.reps, args.torch_reps, args.tune, args.settle)
    host_table = host_cost_table()
    print(report(rows, peak, args.out, command, host_table))


if __name__ == "__main__":
    sys.exit(main())
