"""Small-N sweep of the sm_90a twin against DeepGEMM's fp8_mqa_logits (issue 14, docs/PERFORMANCE.md v10-small).

At N = 1024 a call is 4-9 GFLOP, a few microseconds of tensor time: what decides it is the grid (how many blocks,
how long the longest one runs), not the steady-state rate. One device call times, on the 8 cases M = N = 1024 x
{causal, multi_req} x clean {1, 0} x H {32, 64} (D = 128), every shipped sm_90a design over its host knobs
(rawindexer.dispatch.base.Tunables: block_m, num_warps, split_n, reverse_rows) beside DeepGEMM, and grades every
configuration it times; 4096 x 4096 with a few configurations for reference.

    python bench/small_sm90.py [--reps 15] [--out DIR]          # the sweep (every config graded)
    python bench/small_sm90.py --confirm [--reps 30] [--out DIR] # the public call (default design) vs DeepGEMM on
                                                                 # 1024^2, 4096^2, 128 x 32768; the A/B of v10-small

Timing: rawindexer.bench.time_fn (CUDA events around each call, ~1 ms of GPU busy-wait before it, median; input
sets rotated past twice the 60 MB L2), as bench/race_sm90.py. DeepGEMM is timed before and after the configs of a
case (its two medians show the drift within the case). Grading: tests/gpu/test_cuda_gpu.grade_gpu against race_sm90's
float64 reference, output NaN-poisoned before the launch (exact -inf mask, nothing unwritten, nothing written outside
the windows at clean=0, calc_diff < 1e-3), with the same output layout as the timed launches.
Output: DIR/small_sm90.log (one line per config) and DIR/small_sm90.csv.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

SMALL = [(1024, 1024)]
REFERENCE = [(4096, 4096)]
CONFIRM = [(1024, 1024), (4096, 4096), (128, 32768)]
WINDOWS = ("causal", "multi_req")
HEADS = (32, 64)
D = 128


def configs(design_instances: dict[str, list[int]], small: bool) -> list[tuple[str, dict]]:
    """(design, Tunables fields) to time. design_instances: design -> built block_m values at this (H, D)."""
    out: list[tuple[str, dict]] = [("auto", {}), ("wg", {}), ("tmas", {})]
    if not small:  # the reference shape: the defaults, a few wg grids and the tmas splits
        out += [("wg", {"num_warps": nw, "split_n": s}) for nw in (4, 8) for s in (1, 2)]
        out += [("tmas", {"split_n": s}) for s in (1, 2, 3, 4)]
        return out
    for bm in design_instances.get("wg", []):
        for nw in (4, 8):
            for s in (1, 2, 4):
                for rev in (False, True):
                    out.append(("wg", {"block_m": bm, "num_warps": nw, "split_n": s, "reverse_rows": rev}))
    for bm in design_instances.get("wgr", []):
        for nw in (4, 8):
            for s in (1, 2):
                out.append(("wgr", {"block_m": bm, "num_warps": nw, "split_n": s}))
    for nw in (4, 8):
        for s in (1, 2, 4):
            out.append(("mma", {"num_warps": nw, "split_n": s}))
    for s in (1, 2, 4):
        out.append(("ws", {"split_n": s}))
    for s in (1, 2, 3, 4, 6, 8):
        for rev in (False, True):
            out.append(("tmas", {"split_n": s, "reverse_rows": rev}))
    return out


def confirm_configs(heads: int, small: bool) -> list[tuple[str, dict]]:
    """--confirm: the public call; at N = 1024 also, through the family, the wg heuristic's plan (zigzag rows since
    v10-small), the same grid in the old forward order, a few other wg grids in the zigzag order, and tmas."""
    out: list[tuple[str, dict]] = [("api", {})]
    if small:
        out += [("wg", {}), ("wg", {"reverse_rows": False}), ("tmas", {}), ("tmas", {"split_n": 2, "reverse_rows": True})]
        grids = ((2, 4), (4, 4), (2, 8)) if heads == 32 else ((2, 8), (1, 4))
        out += [("wg", {"block_m": bm, "num_warps": nw}) for bm, nw in grids]
    return out


class Planner:
    """Plans and launches any sm_90a design of the package build with explicit Tunables, through CudaBackend."""

    def __init__(self, designs):
        from rawindexer.backends.cuda import CudaBackend
        from rawindexer.dispatch.sm90 import Sm90Family

        self.be = CudaBackend()
        self.fams = {d: Sm90Family(design=d) for d in designs}
        self.module = self.be.load_module(self.fams[designs[0]].code_object())
        self.cus = self.be.compute_units()
        self.funcs: dict = {}

    def instances(self, design: str, heads: int) -> list[int]:
        fam = self.fams[design]
        return sorted(fam._instances(heads, D)) if design != "auto" else []

    def __call__(self, design: str, tun: dict, args, out, clean: bool):
        import torch

        from rawindexer.dispatch.base import Pointers, Problem, Tunables

        q, k, kv, w, ks, ke = args
        M, H, Dq = q.shape
        plan = self.fams[design].plan(Problem(M, k.shape[0], H, Dq, out.stride(0), clean), Tunables(**tun),
                                      Pointers(q.data_ptr(), k.data_ptr(), kv.data_ptr(), w.data_ptr(), ks.data_ptr(),
                                               ke.data_ptr(), out.data_ptr()), self.cus)
        if plan.symbol not in self.funcs:
            self.funcs[plan.symbol] = self.be.get_function(self.module, plan.symbol)
        f, stream = self.funcs[plan.symbol], torch.cuda.current_stream().cuda_stream
        return (lambda: self.be.launch(f, plan.grid, plan.block, plan.kernargs, stream=stream,
                                       shared_mem=plan.shared_mem)), plan


def cfg_label(design: str, plan_config: dict, grid) -> str:
    c = plan_config
    order = "rev" if c["reverse_rows"] else "zig" if c.get("zigzag_rows") else "fwd"
    return f"{c.get('design', design)}:bm{c['block_m']}/w{c['num_warps']}/s{c['split_n']}/{order} grid {grid[0]}x{grid[1]}"


def main() -> None:
    import torch
    from race_sm90 import deepgemm, reference64
    from test_cuda_gpu import grade_gpu

    import rawindexer
    from rawindexer.bench import L2_BYTES, make_inputs, time_fn, window_pairs, windows_for

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--confirm", action="store_true", help="the public call (default design) on CONFIRM vs DeepGEMM")
    p.add_argument("--no-reference", action="store_true", help="sweep: skip 4096 x 4096")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    logf = open(a.out / ("small_confirm.log" if a.confirm else "small_sm90.log"), "w")

    def log(s: str) -> None:
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    planner = Planner(("auto", "wg", "wgr", "mma", "ws", "tmas"))
    dg = deepgemm()
    log(f"device {torch.cuda.get_device_name()}, {planner.cus} SMs; DeepGEMM {'yes' if dg else 'no'}; reps {a.reps}")
    shapes = CONFIRM if a.confirm else SMALL + ([] if a.no_reference else REFERENCE)
    rows, bad, graded = [], 0, 0
    for (M, N) in shapes:
        for window in WINDOWS:
            ks_np, ke_np = windows_for(window, M, N)
            pairs = window_pairs(ks_np, ke_np, N)
            for H in HEADS:
                set_bytes = M * H * D + N * D + 4 * (N + M * H) + 4 * M * N
                nsets = int(min(16, max(2, -(-2 * L2_BYTES // set_bytes))))
                sets = [make_inputs(M, N, H, D, ks_np, ke_np, seed=1000 + i) for i in range(nsets)]
                outs = [torch.empty((M, N), device="cuda") for _ in range(nsets)]
                ref = reference64(sets[0])
                insts = {d: planner.instances(d, H) for d in ("wg", "wgr")}
                todo = confirm_configs(H, (M, N) in SMALL) if a.confirm else configs(insts, (M, N) in SMALL)
                for clean in (True, False):
                    case = f"{M}x{N} {window:9s} c{int(clean)} H{H}"
                    dgf = None
                    if dg is not None:
                        dgf = lambda i: dg.fp8_mqa_logits(sets[i][0], (sets[i][1], sets[i][2]), sets[i][3],
                                                          sets[i][4], sets[i][5], clean_logits=clean)
                    dg0 = time_fn(dgf, nsets, a.reps) if dgf else float("nan")
                    results = []
                    for design, tun in todo:
                        try:
                            if design == "api":  # the public call as a serving loop makes it (a new output)
                                fn = lambda i: rawindexer.fp8_mqa_logits(*sets[i], clean_logits=clean)
                                outs[0].fill_(float("nan"))
                                rawindexer.fp8_mqa_logits(*sets[0], clean_logits=clean, out=outs[0])
                                label = "api (public call, default design)"
                            else:
                                gos = [planner(design, tun, sets[i], outs[i], clean) for i in range(nsets)]
                                fn = lambda i, gos=gos: gos[i][0]()
                                outs[0].fill_(float("nan"))
                                gos[0][0]()
                                label = cfg_label(design, gos[0][1].config, gos[0][1].grid)
                                label = ("auto->" if design == "auto" else "") + label + ("" if tun else " [default]")
                            torch.cuda.synchronize()
                            ok, msg = grade_gpu(outs[0], ref, sets[0][4], sets[0][5], clean)
                            us = time_fn(fn, nsets, a.reps)
                        except Exception as exc:  # noqa: BLE001 -- a config the plan refuses: report, go on
                            log(f"{case} | {design} {tun}: {type(exc).__name__}: {exc}")
                            continue
                        graded += 1
                        bad += not ok
                        results.append((us, label, ok))
                        rows.append({"M": M, "N": N, "window": window, "clean": int(clean), "H": H, "design": design,
                                     "tunables": repr(tun), "config": label, "us": round(us, 3),
                                     "ok": int(ok), "tflop": 2 * H * D * pairs / 1e12})
                        log(f"{case} | {us:8.2f} us [{dg0 / us:4.2f}x DG] {'PASS' if ok else 'FAIL'} {label}: {msg}")
                    dg1 = time_fn(dgf, nsets, a.reps) if dgf else float("nan")
                    for us_dg, tag in ((dg0, "before"), (dg1, "after")):
                        rows.append({"M": M, "N": N, "window": window, "clean": int(clean), "H": H,
                                     "design": "deepgemm", "tunables": tag, "config": f"deepgemm ({tag})",
                                     "us": round(us_dg, 3), "ok": 1, "tflop": 2 * H * D * pairs / 1e12})
                    results.sort()
                    log(f"== {case}: DeepGEMM {dg0:.2f} / {dg1:.2f} us (before / after); best of {len(results)}:")
                    for us, label, ok in results[:6]:
                        log(f"     {us:8.2f} us [{min(dg0, dg1) / us:4.2f}x best DG] {'ok' if ok else 'FAIL'} {label}")
                del sets, outs, ref
                torch.cuda.empty_cache()
    with open(a.out / ("small_confirm.csv" if a.confirm else "small_sm90.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    log(f"graded {graded} configs: {bad} failing")


if __name__ == "__main__":
    main()
