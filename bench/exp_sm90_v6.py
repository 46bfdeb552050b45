"""H200 experiment behind docs/PERFORMANCE.md v6: the SS wgmma form (K through shared memory) and the
register-file diagnostics, against v4's wg and v5's wf, same inputs, one call.

    python bench/exp_sm90_v6.py --build     # here (nvcc): experimental cubin -> build/exp6/
    python bench/exp_sm90_v6.py             # on the H200: correctness + accuracy of ss + timings of every variant

Variants (kernels/fp8_mqa_logits_sm90.cu, fp8_mqa_logits_wf_body<..., KSRC, EPX>):
  wg   v4 default (RS wgmma: K tile in registers as A, f32 FMNMX + FFMA head reduce)
  wf   v5 lean epilogue, RS (the base of the rest)
  ss   v6: SS wgmma, K tile HBM -> shared memory by cp.async (3 stages per warpgroup), exact f32 epilogue
  wfx / ssx   diagnostics, no head reduce (every output still stored): RS / SS
  wfd / ssd   diagnostics, the epilogue's 64 FMNMX + 64 FFMA per tile on registers that are not the accumulators
Diagnostics give wrong results and are timed only.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
EXP = ROOT / "build" / "exp6"
ALL_IMPLS = ("wg", "wf", "ss", "wfx", "ssx", "wfd", "ssd", "ssn", "ssxn", "ss4", "ssx4", "ssa", "ssxa")
# EXP6_IMPLS / EXP6_CASES narrow a run (the second H200 call timed only the long chunks and ss/ssn/ssx/ssxn/wfx)
IMPLS = tuple(os.environ.get("EXP6_IMPLS", ",".join(ALL_IMPLS)).split(","))
DIAG = ("wfx", "ssx", "wfd", "ssd", "ssxn", "ssx4", "ssxa")
GRADED = tuple(os.environ.get("EXP6_GRADED", "wg,ss,ssn").split(","))
VARIANTS = [(h, d, bm, impl) for impl in ALL_IMPLS for (h, bm) in ((32, 4), (64, 2)) for d in (64, 128)]


def build() -> None:
    import build as b
    b.build_sm90(EXP, [b.Sm90Variant(*v) for v in VARIANTS])
    import json
    ks = json.loads((EXP / "manifest.json").read_text())["targets"]["sm_90a"]["kernels"]
    for name, k in ks.items():
        print(name, k["resources"])


def main(skip_correct: bool, profile: str | None = None) -> None:
    import torch
    from test_cuda_gpu import _windows, grade_gpu

    from rawindexer.backends.cuda import CudaBackend
    from rawindexer.bench import (
        fp8_peak_tflops,
        make_inputs,
        time_fn,
        torch_fp8_mqa_logits,
        window_pairs,
        windows_for,
    )
    from rawindexer.dispatch.base import Pointers, Problem, Tunables
    from rawindexer.dispatch.sm90 import Sm90Family

    variants = [v for v in VARIANTS if v[3] in IMPLS]
    be = CudaBackend()
    fams = {impl: Sm90Family(EXP, impl=impl) for impl in IMPLS}
    module = be.load_module(next(iter(fams.values())).code_object())
    funcs: dict = {}

    def launcher(impl, args, out, clean, tun):
        q, k, kv, w, ks, ke = args
        M, H, D = q.shape
        N = k.shape[0]
        plan = fams[impl].plan(Problem(M, N, H, D, out.stride(0), clean), tun,
                               Pointers(q.data_ptr(), k.data_ptr(), kv.data_ptr(), w.data_ptr(), ks.data_ptr(),
                                        ke.data_ptr(), out.data_ptr()), be.compute_units())
        if plan.symbol not in funcs:
            funcs[plan.symbol] = be.get_function(module, plan.symbol)
        f = funcs[plan.symbol]
        stream = torch.cuda.current_stream().cuda_stream
        return (lambda: be.launch(f, plan.grid, plan.block, plan.kernargs, stream=stream,
                                  shared_mem=plan.shared_mem)), plan

    bad = 0
    if not skip_correct and not profile:
        print("== correctness (calc_diff vs the exact reference; gate 1e-3)", flush=True)
        for (M, N, mode) in [(61, 1024, "multi_req"), (1024, 1560, "misaligned"), (17, 76, "causal"),
                             (300, 3000, "cp"), (200, 2000, "empty"), (4096, 32768, "causal"), (1024, 131072, "causal"),
                             (1024, 1024, "multi_req")]:
            for (H, D, bm, impl) in variants:
                if impl not in GRADED or (D == 64 and M > 4096):
                    continue
                try:
                    ks_np, ke_np = _windows(mode, M, N, seed=M + N + H)
                except Exception as exc:  # noqa: BLE001 -- window mode not applicable
                    print(f"skip {mode}: {exc}")
                    continue
                args = make_inputs(M, N, H, D, ks_np, ke_np, seed=M + N + H + bm)
                ref = torch_fp8_mqa_logits(*args, clean_logits=True)
                for clean in (True, False):
                    for nw in ((4, 8) if M <= 1024 and N <= 4096 else (4,)):
                        big = torch.full((M, N + 3), float("nan"), device="cuda")
                        out = big[:, :N]
                        go, _plan = launcher(impl, args, out, clean, Tunables(block_m=bm, num_warps=nw))
                        go()
                        torch.cuda.synchronize()
                        ok, msg = grade_gpu(out, ref, args[4], args[5], clean)
                        ok = ok and bool(torch.isnan(big[:, N:]).all())
                        bad += not ok
                        print(f"{'PASS' if ok else 'FAIL'} {impl:4s} M={M} N={N} H={H} D={D} bm={bm} nw={nw} {mode} "
                              f"clean={int(clean)}: {msg}")
                del ref, args
                torch.cuda.empty_cache()
        print(f"correctness failures: {bad}", flush=True)

    peak = fp8_peak_tflops()
    print(f"== timings (fp8 peak {peak:.0f} TFLOP/s); us / TFLOP/s / % peak", flush=True)
    if profile:
        # one launch of `profile` on 4096x32768 causal H=32 after one warm-up, for ncu (--launch-skip 1 --launch-count 1)
        ks_np, ke_np = windows_for("causal", 4096, 32768)
        args = make_inputs(4096, 32768, 32, 128, ks_np, ke_np, seed=3)
        out = torch.empty((4096, 32768), device="cuda")
        go, plan = launcher(profile, args, out, True, Tunables(block_m=4, num_warps=4))
        go()
        go()
        torch.cuda.synchronize()
        print("profiled", plan.symbol, plan.grid, plan.config)
        return
    cases = [(4096, 32768, "causal", True), (2048, 65536, "causal", True), (1024, 131072, "causal", True),
             (671, 131072, "causal", True), (128, 32768, "causal", True), (4096, 32768, "multi_req", True),
             (8192, 8192, "causal", False), (1024, 1024, "multi_req", False)]
    if os.environ.get("EXP6_CASES") == "long":
        cases = cases[:2]
    summary = []
    for (M, N, window, clean) in cases:
        ks_np, ke_np = windows_for(window, M, N)
        pairs = window_pairs(ks_np, ke_np, N)
        for H in (32, 64):
            set_bytes = M * H * 128 + N * 128 + 4 * M * N
            nsets = int(min(16, max(2, -(-2 * 60 * 2**20 // set_bytes))))
            sets = [make_inputs(M, N, H, 128, ks_np, ke_np, seed=7 + i) for i in range(nsets)]
            outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
            res = []
            for (h, d, bm, impl) in variants:
                if h != H or d != 128:
                    continue
                for nw in ((4,) if M >= 1024 and N >= 32768 else (4, 8)):
                    gos = [launcher(impl, sets[i], outs[i], clean, Tunables(block_m=bm, num_warps=nw))
                           for i in range(nsets)]
                    us = time_fn(lambda i, gos=gos: gos[i][0](), nsets, 20)
                    tf = 2 * H * 128 * pairs / us / 1e6
                    res.append((us, impl, bm, nw, gos[0][1].config["split_n"], tf))
            res.sort()
            print(f"-- {M}x{N} {window} clean={int(clean)} H={H}")
            for us, impl, bm, nw, sn, tf in res:
                print(f"   {impl:4s} bm={bm} nw={nw} split={sn}: {us:9.1f} us {tf:6.0f} TFLOP/s {100 * tf / peak:4.0f}%")
            best = {}
            for us, impl, *_ in res:
                best.setdefault(impl, us)
            summary.append((M, N, window, H, best))
            del sets, outs
            torch.cuda.empty_cache()
    print("== summary: best us per impl (% of peak for the long causal rows)")
    print("case".ljust(34) + "".join(i.rjust(9) for i in IMPLS))
    for M, N, window, H, best in summary:
        print(f"{M}x{N} {window} H={H}".ljust(34) + "".join(f"{best.get(i, float('nan')):9.1f}" for i in IMPLS))
    print(f"correctness failures: {bad}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--build", action="store_true")
    p.add_argument("--no-correct", action="store_true")
    p.add_argument("--profile", default=None, help="launch one impl twice on 4096x32768 causal H=32 (for ncu)")
    a = p.parse_args()
    build() if a.build else main(a.no_correct, a.profile)
