"""Benchmark of the sm_90a kernel against a Triton baseline and plain torch, on one CUDA GPU.

    python -m rawindexer.bench [--out bench/] [--quick] [--tune]

Cases: the seed's chunk shapes x windows {causal (one request, vLLM convention: diagonal included),
multi_req (four packed requests)} x clean_logits {0, 1} x heads {32, 64}, head_dim 128.
Timing: CUDA events around each call, median of many calls, each call on the next of several input sets
whose total exceeds twice the 60 MB L2 (so the numbers are not L2-resident); before each timed call the
stream is kept busy for ~1 ms so host-side launch overhead does not leak into the measurement.
TFLOP/s counts 2*H*D flops per in-window (row, key) pair; "% peak" is relative to a large fp8
torch._scaled_mm measured in the same run. Progress goes to stderr; the table and summary to stdout;
CSV and PNG under --out.

Also home of :func:`torch_fp8_mqa_logits`, the plain-torch implementation that is both the "torch"
column here and the reference of tests/test_cuda_gpu.py.
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

SHAPES = [(1024, 1024), (4096, 4096), (8192, 8192), (4096, 32768), (2048, 65536), (1024, 131072),
          (128, 32768), (671, 131072)]
WINDOWS = ("causal", "multi_req")
HEADS = (32, 64)
HEAD_DIM = 128
L2_BYTES = 60 * 2**20


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# torch implementation (baseline and test reference)
# ---------------------------------------------------------------------------------------------------
def torch_fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits: bool = True, out=None,
                         chunk_bytes: int = 1 << 31):
    """Plain torch, chunked over query rows so the [rows, H, N] score tensor stays under ``chunk_bytes``.

    q [M,H,D] float8_e4m3fn, k [N,D] float8_e4m3fn, kv_scale [N] f32, weights [M,H] f32, ks/ke [M] int32
    -> [M,N] f32 (``out`` if given). Scores are f32 matmuls of the fp8 values; TF32 is exact here because
    an e4m3 value has 4 significant bits, so the products are exact and only the f32 sums round.
    With clean_logits=False, positions outside the window are left as ``out`` held them.
    """
    import torch

    M, H, D = q.shape
    N = k.shape[0]
    if out is None:
        out = torch.empty((M, N), device=q.device, dtype=torch.float32)
    kf = k.to(torch.float32)
    cols = torch.arange(N, device=q.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    rows = max(1, min(M, chunk_bytes // max(1, H * N * 4)))
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        for r0 in range(0, M, rows):
            r1 = min(M, r0 + rows)
            qf = q[r0:r1].to(torch.float32).reshape(-1, D)
            scores = (qf @ kf.T).view(r1 - r0, H, N).relu_()
            logits = torch.bmm(weights[r0:r1].unsqueeze(1), scores).squeeze(1) * kv_scale
            inside = (cols[None, :] >= s[r0:r1, None]) & (cols[None, :] < e[r0:r1, None])
            if clean_logits:
                out[r0:r1] = torch.where(inside, logits, float("-inf"))
            else:
                out[r0:r1] = torch.where(inside, logits, out[r0:r1])
            del scores, logits, inside
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def make_inputs(M: int, N: int, H: int, D: int, ks_np: np.ndarray, ke_np: np.ndarray, seed: int, device="cuda"):
    """Random fp8 q/k (never zeros), kv_scale in [0.5, 1.5), weights ~ N(0, 1/H); windows as given."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn((M, H, D), generator=g, device=device).to(torch.float8_e4m3fn)
    k = torch.randn((N, D), generator=g, device=device).to(torch.float8_e4m3fn)
    kv_scale = torch.rand((N,), generator=g, device=device) + 0.5
    weights = torch.randn((M, H), generator=g, device=device) * H ** -0.5
    ks = torch.from_numpy(np.ascontiguousarray(ks_np, dtype=np.int32)).to(device)
    ke = torch.from_numpy(np.ascontiguousarray(ke_np, dtype=np.int32)).to(device)
    return q, k, kv_scale, weights, ks, ke


def windows_for(mode: str, M: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """causal: one request, vLLM convention (diagonal included); multi_req: four packed requests."""
    try:
        from rawindexer.windows import causal, multi_req
        if mode == "causal":
            return causal(M, N, diagonal=True)
        return multi_req(M, N, requests=4, diagonal=True)
    except ImportError:  # rawindexer.windows predates this file in some checkouts
        rows = np.arange(M)
        if mode == "causal":
            return np.zeros(M, np.int32), (rows + (N - M) + 1).astype(np.int32)
        raise


def window_pairs(ks: np.ndarray, ke: np.ndarray, N: int) -> int:
    s = np.clip(ks.astype(np.int64), 0, N)
    e = np.maximum(np.clip(ke.astype(np.int64), 0, N), s)
    return int((e - s).sum())


# ---------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------
def time_fn(fn: Callable[[int], object], sets: int, reps: int, warmup: int = 3) -> float:
    """Median microseconds of fn(set_index) over ``reps`` calls, rotating input sets."""
    import torch

    for i in range(warmup):
        fn(i % sets)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        torch.cuda._sleep(2_000_000)  # ~1 ms of GPU busy-wait: the host enqueues fn meanwhile
        starts[i].record()
        fn(i % sets)
        ends[i].record()
    torch.cuda.synchronize()
    return float(np.median([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]))


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
    ours_us: float
    tflops: float
    pct_peak: float
    speedup: float = field(init=False)
    check: str = "ok"

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


def run(shapes, windows, heads, cleans, reps: int, torch_reps: int, tune: bool) -> tuple[list[Row], float]:
    import torch

    import rawindexer
    from rawindexer.triton_baseline import fp8_mqa_logits_triton

    peak = fp8_peak_tflops()
    log(f"fp8 peak (torch._scaled_mm 8192^3): {peak:.0f} TFLOP/s on {torch.cuda.get_device_name()}")
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
                set_bytes = M * H * HEAD_DIM + N * HEAD_DIM + 4 * (N + M * H) + 4 * M * N
                nsets = int(min(16, max(2, math.ceil(2 * L2_BYTES / set_bytes))))
                sets = [make_inputs(M, N, H, HEAD_DIM, ks_np, ke_np, seed=1000 + i) for i in range(nsets)]
                outs = [torch.empty((M, N), device="cuda", dtype=torch.float32) for _ in range(nsets)]
                for clean in cleans:
                    t0 = time.time()
                    ours = lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean, out=outs[i])
                    tri = lambda i: fp8_mqa_logits_triton(*sets[i], clean_logits=clean)
                    ref_fn = lambda i: torch_fp8_mqa_logits(*sets[i], clean_logits=clean)
                    # correctness spot check of this exact case before timing it
                    outs[0].fill_(float("nan"))
                    got = ours(0)
                    ref = ref_fn(0)
                    check = quick_check(got, ref, clean, sets[0][4], sets[0][5])
                    del ref
                    us_ours = time_fn(ours, nsets, reps)
                    us_tri = time_fn(tri, nsets, reps)
                    us_torch = time_fn(ref_fn, nsets, torch_reps, warmup=1)
                    tflops = 2 * H * HEAD_DIM * pairs / us_ours / 1e6
                    row = Row(M, N, clean, window, H, us_torch, us_tri, us_ours, tflops, 100 * tflops / peak)
                    row.check = check
                    rows.append(row)
                    log(f"{M:5d} {N:6d} clean={int(clean)} {window:9s} H={H}: ours {us_ours:9.1f} us  "
                        f"triton {us_tri:9.1f}  torch {us_torch:10.1f}  {row.speedup:5.2f}x  "
                        f"{tflops:6.0f} TFLOP/s  [{check}]  ({time.time() - t0:.1f}s)")
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


def report(rows: list[Row], peak: float, out_dir: Path | None, command: str) -> str:
    lines = [f"fp8 tensor peak measured in this run (torch._scaled_mm 8192^3): {peak:.0f} TFLOP/s", "",
             "s_q\ts_k\tclean\twindow\tH\ttorch µs\tTriton µs\tours µs\tvs Triton\tTFLOP/s\t% peak\tcheck"]
    for r in rows:
        lines.append(f"{r.s_q}\t{r.s_k}\t{r.clean}\t{r.window}\t{r.heads}\t{r.torch_us:.1f}\t{r.triton_us:.1f}\t"
                     f"{r.ours_us:.1f}\t{r.speedup:.2f}x\t{r.tflops:.0f}\t{r.pct_peak:.0f}%\t{r.check}")
    lines += ["", "group\tcases\tgeomean\trange\tours faster"]
    for name, n, gm, lo, hi, faster in summarize(rows):
        lines.append(f"{name}\t{n}\t{gm:.2f}x\t{lo:.2f}x - {hi:.2f}x\t{faster} / {n}")
    text = "\n".join(lines)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "bench_h200.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["s_q", "s_k", "clean_logits", "window", "heads", "torch_us", "triton_us", "ours_us",
                        "speedup_vs_triton", "tflops", "pct_fp8_peak", "check"])
            for r in rows:
                w.writerow([r.s_q, r.s_k, int(r.clean), r.window, r.heads, f"{r.torch_us:.2f}", f"{r.triton_us:.2f}",
                            f"{r.ours_us:.2f}", f"{r.speedup:.3f}", f"{r.tflops:.1f}", f"{r.pct_peak:.1f}", r.check])
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="folder for bench_h200.{csv,png,txt}")
    parser.add_argument("--quick", action="store_true", help="three shapes, H=32 only")
    parser.add_argument("--tune", action="store_true", help="also time a few tunable settings per causal case")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--torch-reps", type=int, default=3)
    args = parser.parse_args(argv)
    shapes = [(1024, 1024), (4096, 32768), (128, 32768)] if args.quick else SHAPES
    heads = (32,) if args.quick else HEADS
    rows, peak = run(shapes, WINDOWS, heads, (True, False), args.reps, args.torch_reps, args.tune)
    command = "python -m rawindexer.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    print(report(rows, peak, args.out, command))


if __name__ == "__main__":
    main()
