"""H200 experiment behind docs/PERFORMANCE.md v4: epilogue variants of the wgmma path, timed on the same inputs.

    python bench/exp_sm90.py --build     # here (nvcc): experimental cubin -> build/exp/
    python bench/exp_sm90.py             # on the H200: correctness + accuracy + timings of every variant

Variants (kernels/fp8_mqa_logits_sm90.cu): wg (f32 FMNMX+FFMA head reduce, v3), wgr (bf16 tensor-core head
reduce, the gfx950 mirror), wgp / wgrp (the same two with ping-pong accumulators), wgx (diagnostic: no head
reduce at all, wrong results, timing only: the MMA + K stream + stores alone).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
EXP = ROOT / "build" / "exp"

VARIANTS = [(h, 128, bm, impl) for impl in ("wg", "wgr", "wgp", "wgrp", "wgx") for (h, bm) in ((32, 4), (64, 2))] + \
    [(32, 128, 8, "wg"), (32, 128, 8, "wgr"), (64, 128, 4, "wgr"), (64, 128, 4, "wg")]


def build() -> None:
    import build as b
    b.build_sm90(EXP, [b.Sm90Variant(*v) for v in VARIANTS])
    print((EXP / "fp8_mqa_logits.sm90a.ptxas.txt").read_text()[-3000:])


def main() -> None:
    import numpy as np
    import torch

    from rawindexer.backends.cuda import CudaBackend
    from rawindexer.bench import fp8_peak_tflops, make_inputs, time_fn, torch_fp8_mqa_logits, window_pairs, windows_for
    from rawindexer.dispatch.base import Pointers, Problem, Tunables
    from rawindexer.dispatch.sm90 import Sm90Family
    from test_cuda_gpu import grade_gpu

    be = CudaBackend()
    fams = {impl: Sm90Family(EXP, impl=impl) for impl in ("wg", "wgr", "wgp", "wgrp", "wgx")}
    module = be.load_module(fams["wg"].code_object())
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
        return lambda: be.launch(f, plan.grid, plan.block, plan.kernargs, stream=stream), plan

    # 1. correctness + accuracy (calc_diff vs the f32-exact torch reference) of every non-diagnostic variant
    print("== correctness (calc_diff; gate 1e-3)")
    bad = 0
    for (M, N, mode) in [(61, 1024, "multi_req"), (1024, 1560, "misaligned"), (17, 76, "causal"),
                         (4096, 32768, "causal"), (1024, 131072, "causal"), (1024, 1024, "multi_req")]:
        for (H, D, bm, impl) in VARIANTS:
            if impl == "wgx":
                continue
            from test_cuda_gpu import _windows
            ks_np, ke_np = _windows(mode, M, N, seed=M + N + H)
            args = make_inputs(M, N, H, D, ks_np, ke_np, seed=M + N + H + bm)
            ref = torch_fp8_mqa_logits(*args, clean_logits=True)
            for clean in (True, False):
                big = torch.full((M, N + 3), float("nan"), device="cuda")
                out = big[:, :N]
                go, plan = launcher(impl, args, out, clean, Tunables(block_m=bm))
                go()
                torch.cuda.synchronize()
                ok, msg = grade_gpu(out, ref, args[4], args[5], clean)
                ok = ok and bool(torch.isnan(big[:, N:]).all())
                bad += not ok
                print(f"{'PASS' if ok else 'FAIL'} {impl:5s} M={M} N={N} H={H} bm={bm} {mode} clean={int(clean)}: {msg}")
            del ref, args
            torch.cuda.empty_cache()
    print(f"correctness failures: {bad}")

    # 2. timings
    peak = fp8_peak_tflops()
    print(f"== timings (fp8 peak {peak:.0f} TFLOP/s); us / TFLOP/s / % peak")
    cases = [(4096, 32768, "causal", True), (2048, 65536, "causal", True), (1024, 131072, "causal", True),
             (671, 131072, "causal", True), (128, 32768, "causal", True), (4096, 32768, "multi_req", True),
             (1024, 1024, "multi_req", False)]
    for (M, N, window, clean) in cases:
        ks_np, ke_np = windows_for(window, M, N)
        pairs = window_pairs(ks_np, ke_np, N)
        for H in (32, 64):
            set_bytes = M * H * 128 + N * 128 + 4 * M * N
            nsets = int(min(16, max(2, -(-2 * 60 * 2**20 // set_bytes))))
            sets = [make_inputs(M, N, H, 128, ks_np, ke_np, seed=7 + i) for i in range(nsets)]
            outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
            res = []
            for (h, d, bm, impl) in VARIANTS:
                if h != H:
                    continue
                for nw in (4, 8):
                    for split in ((0, 1, 2) if (M, N) in ((1024, 1024), (128, 32768)) else (0,)):
                        try:
                            gos = [launcher(impl, sets[i], outs[i], clean, Tunables(block_m=bm, num_warps=nw, split_n=split))
                                   for i in range(nsets)]
                        except ValueError:
                            continue
                        us = time_fn(lambda i: gos[i][0](), nsets, 20)
                        tf = 2 * H * 128 * pairs / us / 1e6
                        res.append((us, impl, bm, nw, split, gos[0][1].config["split_n"], tf))
            res.sort()
            print(f"-- {M}x{N} {window} clean={int(clean)} H={H}")
            for us, impl, bm, nw, split, sn, tf in res:
                print(f"   {impl:5s} bm={bm} nw={nw} split={split}->{sn}: {us:9.1f} us {tf:6.0f} TFLOP/s {100 * tf / peak:4.0f}%")
            del sets, outs
            torch.cuda.empty_cache()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--build", action="store_true")
    a = p.parse_args()
    build() if a.build else main()
