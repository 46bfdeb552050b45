"""H200 race of the sm_90a twin against DeepGEMM's fp8_mqa_logits (issue 14; docs/PERFORMANCE.md v7).

One call grades the new kernel on the chunk shapes, then times the shipped default ("wg"), the candidate(s)
and DeepGEMM on the same inputs over the benchmark's 64 cases (rawindexer.bench.SHAPES x {causal, multi_req} x
clean {1, 0} x H {32, 64}, D = 128), with the fp8 matmul rate measured in the same run.

    python bench/race_sm90.py --build          # here (nvcc): every ws form + wg -> build/race/ (RACE_BUILD)
    python bench/race_sm90.py [--designs wg,ws] [--no-grade] [--cases all|long] [--out DIR]
    python bench/race_sm90.py --profile ws|deepgemm [--heads 32]   # one warm-up + one launch, for ncu

Timing is rawindexer.bench.time_fn: CUDA events around each call, median, input sets rotated past the 60 MB L2,
~1 ms of GPU busy-wait before each call so host work never shows. rawindexer's kernels are launched straight
through CudaBackend (the plan of Sm90Family(design)); DeepGEMM through its Python entry point (its own output
allocation included, as a caller would see it). DeepGEMM: ``deep_gemm.fp8_mqa_logits(q, (k, kv_scale), weights,
ks, ke, clean_logits)``, the tokenspeed-deepgemm wheel, JIT-compiled at first use (needs CUDA_HOME).

Grading (the new kernel, and DeepGEMM once per shape as a semantics check) against a float64 reference:
rawindexer's GPU gates (NaN poison, exact -inf mask, calc_diff < 1e-3, nothing written outside the window when
clean=0) decide PASS/FAIL; the per-logit error of issue 15, max |out - ref| / T with T[m, n] = sum_h |w[m,h]|
|q[m,h]|.|k[n]| kv_scale[n], is reported beside it and counted against 1e-5 separately (v7: 2.7e-5 - 4.8e-5 for
every wgmma kernel here and for DeepGEMM alike, so the bound measures the fp8 wgmma accumulation, not a kernel).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))  # test_cuda_gpu (grade_gpu)

GRADE_CASES = [(4096, 32768, "causal"), (1024, 131072, "causal"), (671, 131072, "causal"), (128, 32768, "causal"),
               (4096, 32768, "multi_req"), (8192, 8192, "causal"), (1024, 1024, "multi_req"), (17, 76, "causal"),
               (61, 1024, "multi_req"), (1024, 1560, "misaligned"), (300, 3000, "cp"), (200, 2000, "empty")]
LONG = [(4096, 32768), (2048, 65536), (1024, 131072)]
#: the race build (RAWINDEXER_RACE_BUILD overrides it: a variant built with --define)
RACE_BUILD = Path(os.environ.get("RAWINDEXER_RACE_BUILD", ROOT / "build" / "race"))
#: what --build compiles: the shipped wg plus every warp-specialised form ((design, consumers); BLOCK_M = nc * 128 / H)
RACE_DESIGNS = (("wgpr", 1), ("ws", 2), ("ws3", 3), ("ws4", 4), ("ws4n", 4), ("wss", 4), ("tma", 4), ("tmas", 4), ("tmas8", 4), ("tmas9", 4),
                ("tmasb", 4), ("tmasb2", 4), ("tmasb3", 4), ("tmasb4", 4), ("tmaq", 1))


def build_race(only: tuple[str, ...] = (), defines: tuple[str, ...] = ()) -> None:
    """Compile wg and the ws forms for H in {32, 64, 128}, D in {64, 128} into RACE_BUILD (the 4-consumer forms run
    at 112 registers and spill a few bytes, so they stay out of the default build and its no-spill test)."""
    import json

    import build as b
    from rawindexer import registry

    instances = [registry.Sm90Instance(h, d, 128 // h, "wg") for h in (32, 64, 128) for d in (64, 128)]
    instances += [registry.Sm90Instance(h, d, nc * 128 // h, design) for design, nc in RACE_DESIGNS
                  for h in (32, 64, 128) for d in (64, 128) if not only or design in only]
    tools = b.cuda_toolchain()
    tools = dataclasses.replace(tools, extra_flags=(*tools.extra_flags, *(f"-D{d}" for d in defines)))
    path = b.build_sm90(RACE_BUILD, instances, tools=tools)
    for name, k in json.loads(path.read_text())["targets"][b.SM90_ARCH]["kernels"].items():
        r = k["resources"]
        print(f"  {name:42s} regs={r['registers']:3d} spill={r['spill_stores'] + r['spill_loads']} "
              f"stack={r['stack_frame']}")
PER_LOGIT_GATE = 1e-5


class Launcher:
    """Plans and launches rawindexer sm_90a implementations of the default build straight through CudaBackend."""

    def __init__(self, designs):
        from rawindexer.backends.cuda import CudaBackend
        from rawindexer.dispatch.sm90 import Sm90Family

        self.be = CudaBackend()
        # "tmas" / "tma" plans carry K's tensor map for the K pointer they are given (dispatch/sm90_tensor_map.py)
        self.fams = {design: Sm90Family(RACE_BUILD if RACE_BUILD.exists() else ROOT / "build", design=design)
                     for design in designs}
        self.module = self.be.load_module(next(iter(self.fams.values())).code_object())
        self.funcs: dict = {}

    def __call__(self, design, args, out, clean):
        import torch

        from rawindexer.dispatch.base import Pointers, Problem, Tunables

        q, k, kv, w, ks, ke = args
        M, H, D = q.shape
        plan = self.fams[design].plan(Problem(M, k.shape[0], H, D, out.stride(0), clean), Tunables(),
                                    Pointers(q.data_ptr(), k.data_ptr(), kv.data_ptr(), w.data_ptr(), ks.data_ptr(),
                                             ke.data_ptr(), out.data_ptr()), self.be.compute_units())
        if plan.symbol not in self.funcs:
            self.funcs[plan.symbol] = self.be.get_function(self.module, plan.symbol)
        f, stream = self.funcs[plan.symbol], torch.cuda.current_stream().cuda_stream
        return (lambda: self.be.launch(f, plan.grid, plan.block, plan.kernargs, stream=stream,
                                       shared_mem=plan.shared_mem)), plan


def deepgemm():
    try:
        import deep_gemm
        return deep_gemm
    except Exception as exc:  # noqa: BLE001 -- report and race without it
        print(f"DeepGEMM unavailable: {type(exc).__name__}: {exc}", flush=True)
        return None


def reference64(args, absolute: bool = False):
    """The logits in float64 (-inf outside the windows); absolute=True gives the error scale of issue 15,
    T[m, n] = sum_h |w[m,h]| |q[m,h]|.|k[n]| kv_scale[n]. Chunked over rows to bound the [rows, H, N] scores."""
    import torch

    q, k, kv, w, ks, ke = args
    M, H, D = q.shape
    N = k.shape[0]
    qd, kd, wd = q.double(), k.double(), w.double()
    if absolute:
        qd, kd, wd = qd.abs(), kd.abs(), wd.abs()
    out = torch.empty((M, N), device=q.device, dtype=torch.float64)
    cols = torch.arange(N, device=q.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    rows = max(1, min(M, (1 << 31) // max(1, H * N * 8)))
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        sc = (qd[r0:r1].reshape(-1, D) @ kd.T).view(r1 - r0, H, N).relu_()
        lg = torch.bmm(wd[r0:r1].unsqueeze(1), sc).squeeze(1) * kv.double()
        inside = (cols[None, :] >= s[r0:r1, None]) & (cols[None, :] < e[r0:r1, None])
        out[r0:r1] = torch.where(inside, lg, float("-inf"))
        del sc, lg
    return out


def per_logit(out, ref, T, ks, ke) -> float:
    import torch

    M, N = ref.shape
    cols = torch.arange(N, device=ref.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    inside = (cols[None, :] >= s[:, None]) & (cols[None, :] < e[:, None])
    if not bool(inside.any()):
        return 0.0
    err = (out[inside].double() - ref[inside].double()).abs()
    return float((err / T[inside].double().clamp_min(1e-30)).max())


def grade(launch: Launcher, designs, dg, log) -> int:
    import torch
    from test_cuda_gpu import _windows, grade_gpu

    from rawindexer.bench import make_inputs

    bad = over = 0
    log("== grading against a float64 reference (rawindexer GPU gates; per-logit |out-ref| / T reported)")
    for (M, N, mode) in GRADE_CASES:
        for H in (32, 64, 128):
            for D in (64, 128) if M * N <= 4_000_000 else (128,):
                if H == 128 and M * N > 40_000_000:
                    continue
                try:
                    ks_np, ke_np = _windows(mode, M, N, seed=M + N + H)
                except Exception as exc:  # noqa: BLE001 -- window mode not applicable to this shape
                    log(f"skip {mode} {M}x{N}: {exc}")
                    continue
                args = make_inputs(M, N, H, D, ks_np, ke_np, seed=M + N + H + D)
                ref = reference64(args)
                T = reference64(args, absolute=True)
                for design in designs:
                    for clean in (True, False):
                        big = torch.full((M, N + 3), float("nan"), device="cuda")
                        out = big[:, :N]
                        go, plan = launch(design, args, out, clean)
                        go()
                        torch.cuda.synchronize()
                        ok, msg = grade_gpu(out, ref, args[4], args[5], clean)
                        pl = per_logit(out, ref, T, args[4], args[5])
                        ok = ok and bool(torch.isnan(big[:, N:]).all())
                        bad += not ok
                        over += pl > PER_LOGIT_GATE
                        log(f"{'PASS' if ok else 'FAIL'} {design} M={M} N={N} H={H} D={D} {mode} clean={int(clean)} "
                            f"split={plan.config['split_n']}: {msg} per-logit {pl:.1e}")
                if dg is not None and D == 128 and H in (32, 64) and mode in ("causal", "multi_req"):
                    try:
                        o = dg.fp8_mqa_logits(args[0], (args[1], args[2]), args[3], args[4], args[5], clean_logits=True)
                        torch.cuda.synchronize()
                        o = o[:, :N]
                        ok, msg = grade_gpu(o.contiguous(), ref, args[4], args[5], True)
                        log(f"{'SAME' if ok else 'DIFF'} deepgemm M={M} N={N} H={H} {mode}: {msg} "
                            f"per-logit {per_logit(o, ref, T, args[4], args[5]):.1e}")
                    except Exception as exc:  # noqa: BLE001
                        log(f"deepgemm M={M} N={N} H={H} {mode}: {type(exc).__name__}: {exc}")
                del ref, T, args
                torch.cuda.empty_cache()
    log(f"grading failures: {bad}; cases over the per-logit bound {PER_LOGIT_GATE:g} T: {over}")
    return bad


def race(launch: Launcher, designs, dg, cases, reps: int, log) -> list[dict]:
    import torch

    from rawindexer.bench import L2_BYTES, SHAPES, fp8_peak_tflops, make_inputs, time_fn, window_pairs, windows_for

    peak = fp8_peak_tflops()
    log(f"== race; fp8 rate (torch._scaled_mm 8192^3) {peak:.0f} TFLOP/s on {torch.cuda.get_device_name()}")
    shapes = LONG if cases == "long" else SHAPES
    rows = []
    for (M, N) in shapes:
        for window in ("causal", "multi_req"):
            ks_np, ke_np = windows_for(window, M, N)
            pairs = window_pairs(ks_np, ke_np, N)
            for H in (32, 64):
                set_bytes = M * H * 128 + N * 128 + 4 * M * N
                nsets = int(min(16, max(2, -(-2 * L2_BYTES // set_bytes))))
                sets = [make_inputs(M, N, H, 128, ks_np, ke_np, seed=11 + i) for i in range(nsets)]
                outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
                for clean in (True, False):
                    row = {"M": M, "N": N, "window": window, "clean": clean, "H": H, "peak": peak}
                    for design in designs:
                        gos = [launch(design, sets[i], outs[i], clean) for i in range(nsets)]
                        row[design] = time_fn(lambda i, gos=gos: gos[i][0](), nsets, reps)
                        row[design + "_cfg"] = gos[0][1].config
                    if dg is not None:
                        fn = lambda i: dg.fp8_mqa_logits(sets[i][0], (sets[i][1], sets[i][2]), sets[i][3], sets[i][4],
                                                         sets[i][5], clean_logits=clean)
                        try:
                            row["deepgemm"] = time_fn(fn, nsets, reps)
                        except Exception as exc:  # noqa: BLE001
                            log(f"deepgemm failed on {M}x{N} {window} H={H}: {type(exc).__name__}: {exc}")
                            row["deepgemm"] = float("nan")
                    row["tflop"] = 2 * H * 128 * pairs / 1e12
                    rows.append(row)
                    log(fmt_row(row, designs))
                del sets, outs
                torch.cuda.empty_cache()
    return rows


def fmt_row(r: dict, designs) -> str:
    """One case: per design us (% of the fp8 rate) [speed vs DeepGEMM], then DeepGEMM us (%)."""
    pct = lambda us: 100 * r["tflop"] / (us * 1e-6) / r["peak"]
    dg = r.get("deepgemm", float("nan"))
    cols = "".join(f" {i} {r[i]:8.1f} ({pct(r[i]):3.0f}%) [{dg / r[i]:4.2f}x]" for i in designs)
    return (f"{r['M']:5d}x{r['N']:<6d} {r['window']:9s} c={int(r['clean'])} H={r['H']:2d} |{cols}"
            f" | deepgemm {dg:8.1f} ({pct(dg) if dg == dg else float('nan'):3.0f}%)")


def summary(rows, designs, log) -> None:
    if not rows or "deepgemm" not in rows[0]:
        return
    log("== summary vs DeepGEMM (speed ratio = DeepGEMM us / ours us; > 1 is faster)")
    for design in designs:
        for label, sel in (("all", lambda r: True), ("H=32", lambda r: r["H"] == 32), ("H=64", lambda r: r["H"] == 64),
                           ("causal", lambda r: r["window"] == "causal"),
                           ("multi_req", lambda r: r["window"] == "multi_req")):
            ratios = [r["deepgemm"] / r[design] for r in rows if sel(r) and r["deepgemm"] == r["deepgemm"]]
            if ratios:
                g = math.exp(sum(map(math.log, ratios)) / len(ratios))
                log(f"{design:3s} {label:9s} geomean {g:5.3f}x  min {min(ratios):5.3f}x  slower in "
                    f"{sum(x < 1 for x in ratios)}/{len(ratios)}")
    log("long causal chunks, % of the fp8 rate (clean=1):")
    for r in rows:
        if (r["M"], r["N"]) in LONG and r["window"] == "causal" and r["clean"]:
            pct = lambda us: 100 * r["tflop"] / (us * 1e-6) / r["peak"]
            log(f"  {r['M']}x{r['N']} H={r['H']}: " + "  ".join(f"{i} {pct(r[i]):.1f}%" for i in designs)
                + f"  deepgemm {pct(r['deepgemm']):.1f}%")


def smoke(design: str) -> None:
    """Launch design once on a small and a long case at H 32 and 64 and wait for it (run in a child process with a
    timeout by main(), so a kernel that never finishes costs seconds, not the whole call)."""
    import torch

    from rawindexer.bench import make_inputs, windows_for

    launch = Launcher((design,))
    for (M, N) in ((61, 1024), (4096, 32768)):
        for H in (32, 64):
            ks_np, ke_np = windows_for("causal", M, N)
            args = make_inputs(M, N, H, 128, ks_np, ke_np, seed=1)
            out = torch.empty((M, N), device="cuda")
            launch(design, args, out, True)[0]()
            torch.cuda.synchronize()


def alive(designs, log, timeout_s: float = 40.0) -> tuple[str, ...]:
    """The designs whose smoke launch finishes within timeout_s in a child process."""
    import subprocess

    keep = []
    for design in designs:
        try:
            r = subprocess.run([sys.executable, __file__, "--smoke", design], timeout=timeout_s, capture_output=True,
                               text=True)
            ok, why = r.returncode == 0, (r.stderr.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            ok, why = False, f"no completion within {timeout_s:.0f} s (hang)"
        log(f"smoke {design}: {'ok' if ok else 'DROPPED: ' + why}")
        if ok:
            keep.append(design)
    return tuple(keep)


def profile(target: str, heads: int) -> None:
    """One warm-up and one measured call on 4096x32768 causal (ncu --launch-skip 1 --launch-count 1 -k regex)."""
    import torch

    from rawindexer.bench import make_inputs, windows_for

    ks_np, ke_np = windows_for("causal", 4096, 32768)
    args = make_inputs(4096, 32768, heads, 128, ks_np, ke_np, seed=3)
    if target == "deepgemm":
        dg = deepgemm()
        for _ in range(2):
            dg.fp8_mqa_logits(args[0], (args[1], args[2]), args[3], args[4], args[5], clean_logits=True)
    else:
        launch = Launcher((target,))
        out = torch.empty((4096, 32768), device="cuda")
        go, plan = launch(target, args, out, True)
        go()
        go()
        print("profiled", plan.symbol, plan.grid, plan.config)
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--designs", "--impls", default="wg,ws",
                   help="rawindexer designs to time (last = the candidate; --impls: its older name)")
    p.add_argument("--grade", default=None, help="implementations to grade (default: the candidate)")
    p.add_argument("--no-grade", action="store_true")
    p.add_argument("--cases", choices=("all", "long"), default="all")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", type=Path, default=None, help="folder for race_sm90.log")
    p.add_argument("--profile", default=None, help="DESIGN or deepgemm: one launch for ncu, then stop")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--build", action="store_true", help="compile RACE_BUILD (no GPU needed) and stop")
    p.add_argument("--build-only", default="", help="with --build: these RACE_DESIGNS only (comma list; wg always)")
    p.add_argument("--define", action="append", default=[], help="with --build: NAME=VALUE, a -D for nvcc (repeatable)")
    p.add_argument("--smoke", default=None, help=argparse.SUPPRESS)  # child process of alive()
    a = p.parse_args()
    if a.build:
        return build_race(tuple(filter(None, a.build_only.split(","))), tuple(a.define))
    if a.smoke:
        return smoke(a.smoke)
    if a.profile:
        return profile(a.profile, a.heads)
    designs = tuple(a.designs.split(","))
    logf = open(a.out / "race_sm90.log", "w") if a.out else None

    def log(s: str) -> None:
        print(s, flush=True)
        if logf:
            logf.write(s + "\n")
            logf.flush()

    # Timings first, grading after: a failure in one must not cost the other (call 2 of v7 lost every timing to
    # a kernel that never finished in the grading that came first). Each design must finish a smoke launch first.
    designs = alive(designs, log)
    graded = [g for g in (a.grade.split(",") if a.grade else designs[-1:]) if g in designs]
    launch = Launcher(designs)
    dg = deepgemm()
    rows = race(launch, designs, dg, a.cases, a.reps, log)
    summary(rows, designs, log)
    bad = 0 if a.no_grade else grade(launch, tuple(graded), dg, log)
    log(f"grading failures: {bad}")


if __name__ == "__main__":
    main()
