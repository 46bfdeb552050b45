"""H200 experiments behind docs/PERFORMANCE.md v4, v5 and v6: instances of the sm_90a kernel, graded and timed on
the same inputs in one call. The kernels live in kernels/experimental/fp8_mqa_logits_sm90_experiments.cu (which
includes the production kernels/fp8_mqa_logits_sm90.cu); the default build (build.py) never compiles them.

    python bench/exp_sm90.py [--set v4|v5|v6] --build   # here (nvcc): experimental cubin -> build/exp{,5,6}/
    python bench/exp_sm90.py [--set v4|v5|v6]           # on the H200: correctness + accuracy + timings

--set defaults to v4. Options of a GPU run: --no-correct (timings only), --designs a,b (time only these),
--graded a,b (grade these; default per set), --long-cases (only the two longest timing shapes), --profile DESIGN
(v6: launch DESIGN twice on 4096x32768 causal H=32, for ncu --launch-skip 1 --launch-count 1).

Experiment sets (diagnostics give WRONG results: timed only, never graded):
  v4  epilogues of the wgmma path: wg (f32 FMNMX + FFMA head reduce), wgr (bf16 tensor-core head reduce, the gfx950
      mirror), wgp / wgrp (the same two with ping-pong accumulators), wgx (diagnostic: no head reduce)
  v5  lean epilogues against v4's wg: wf (exact f32), wa (|x| FFMA + linear term as 8 extra wgmma columns),
      wfs / was (the same with the tile split in two commit groups, wait_group 1), wgx
  v6  the SS wgmma form (K through shared memory) and the register-file diagnostics, against wg and wf:
      ss (3-stage cp.async.cg ring), ssn (no proxy fence), ss4 (4 stages), ssa (cp.async.ca); diagnostics
      wfx / ssx / ssxn / ssx4 / ssxa (no head reduce), wfd / ssd (the epilogue's FMNMX + FFMA off the accumulators)
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))  # test_cuda_gpu (grade_gpu)
EXPERIMENTS_SOURCE = ROOT / "kernels" / "experimental" / "fp8_mqa_logits_sm90_experiments.cu"

CORRECT_CASES = [(61, 1024, "multi_req"), (1024, 1560, "misaligned"), (17, 76, "causal"), (300, 3000, "cp"),
                 (200, 2000, "empty"), (4096, 32768, "causal"), (1024, 131072, "causal"), (1024, 1024, "multi_req")]
TIME_CASES = [(4096, 32768, "causal", True), (2048, 65536, "causal", True), (1024, 131072, "causal", True),
              (671, 131072, "causal", True), (128, 32768, "causal", True), (4096, 32768, "multi_req", True),
              (8192, 8192, "causal", False), (1024, 1024, "multi_req", False)]


@dataclass(frozen=True)
class ExperimentSet:
    """One experiment: what it builds (instances: (H, D, BLOCK_M, design)), grades and times, and how."""

    out: Path
    instances: list[tuple[int, int, int, str]]
    diagnostics: tuple[str, ...]  # wrong results by design: timed, never graded
    graded: tuple[str, ...] | None = None  # None: every design that is not a diagnostic
    correct_cases: list[tuple[int, int, str]] = field(default_factory=lambda: CORRECT_CASES)
    time_cases: list[tuple[int, int, str, bool]] = field(default_factory=lambda: TIME_CASES)
    # num_warps per correctness / timing shape (0: the host heuristic), SplitN values timed per shape (0: heuristic)
    correct_warps: Callable[[int, int], tuple[int, ...]] = lambda M, N: (4, 8) if M <= 1024 and N <= 4096 else (4,)
    time_warps: Callable[[int, int], tuple[int, ...]] = lambda M, N: (4,) if M >= 1024 and N >= 32768 else (4, 8)
    time_splits: Callable[[int, int], tuple[int, ...]] = lambda M, N: (0,)

    @property
    def designs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v[3] for v in self.instances))


_V6_DESIGNS = ("wg", "wf", "ss", "wfx", "ssx", "wfd", "ssd", "ssn", "ssxn", "ss4", "ssx4", "ssa", "ssxa")
SETS: dict[str, ExperimentSet] = {
    # v4 (the first H200 call of the set): head/BLOCK_M pairs at D=128, default num_warps when grading, SplitN swept
    # on the two shapes where it matters.
    "v4": ExperimentSet(
        out=ROOT / "build" / "exp",
        instances=[(h, 128, bm, design) for design in ("wg", "wgr", "wgp", "wgrp", "wgx") for (h, bm) in ((32, 4), (64, 2))]
        + [(32, 128, 8, "wg"), (32, 128, 8, "wgr"), (64, 128, 4, "wgr"), (64, 128, 4, "wg")],
        diagnostics=("wgx",),
        correct_cases=[c for c in CORRECT_CASES if c[2] not in ("cp", "empty")],
        time_cases=[c for c in TIME_CASES if c[:2] != (8192, 8192)],
        correct_warps=lambda M, N: (0,),
        time_warps=lambda M, N: (4, 8),
        time_splits=lambda M, N: (0, 1, 2) if (M, N) in ((1024, 1024), (128, 32768)) else (0,),
    ),
    "v5": ExperimentSet(
        out=ROOT / "build" / "exp5",
        instances=[(h, d, bm, design) for design in ("wg", "wf", "wa", "wfs", "was", "wgx")
                  for (h, bm) in ((32, 4), (64, 2)) for d in (64, 128)],
        diagnostics=("wgx",),
    ),
    "v6": ExperimentSet(
        out=ROOT / "build" / "exp6",
        instances=[(h, d, bm, design) for design in _V6_DESIGNS for (h, bm) in ((32, 4), (64, 2)) for d in (64, 128)],
        diagnostics=("wfx", "ssx", "wfd", "ssd", "ssxn", "ssx4", "ssxa"),
        graded=("wg", "ss", "ssn"),
    ),
}


# ---------------------------------------------------------------------------------------------------------------
# build (no GPU)
# ---------------------------------------------------------------------------------------------------------------
def build(exp: ExperimentSet) -> None:
    """Compile the set's instances from the experiments source into exp.out (cubin, ptxas report, manifest)."""
    import build as b
    from rawindexer import registry

    path = b.build_sm90(exp.out, [registry.Sm90Instance(*v) for v in exp.instances], source=EXPERIMENTS_SOURCE)
    kernels = json.loads(path.read_text())["targets"][b.SM90_ARCH]["kernels"]
    print(f"built {len(kernels)} experimental sm_90a kernels -> {exp.out}")
    for name, k in kernels.items():
        r = k["resources"]
        print(f"  {name:42s} regs={r['registers']:3d} spill={r['spill_stores'] + r['spill_loads']} "
              f"stack={r['stack_frame']} smem={r['smem']}")


# ---------------------------------------------------------------------------------------------------------------
# GPU run: grade, time, summarise
# ---------------------------------------------------------------------------------------------------------------
class Launcher:
    """Plans and launches any design of one experimental build, caching the module's functions."""

    def __init__(self, exp: ExperimentSet, designs: tuple[str, ...]):
        from rawindexer.backends.cuda import CudaBackend
        from rawindexer.dispatch.sm90 import Sm90Family

        self.be = CudaBackend()
        self.fams = {design: Sm90Family(exp.out, design=design) for design in designs}
        self.module = self.be.load_module(next(iter(self.fams.values())).code_object())
        self.funcs: dict = {}

    def __call__(self, design, args, out, clean, tun):
        """(launch thunk, plan) for design on args = (q, k, kv_scale, weights, ks, ke) writing out."""
        import torch

        from rawindexer.dispatch.base import Pointers, Problem

        q, k, kv, w, ks, ke = args
        M, H, D = q.shape
        plan = self.fams[design].plan(Problem(M, k.shape[0], H, D, out.stride(0), clean), tun,
                                    Pointers(q.data_ptr(), k.data_ptr(), kv.data_ptr(), w.data_ptr(), ks.data_ptr(),
                                             ke.data_ptr(), out.data_ptr()), self.be.compute_units())
        if plan.symbol not in self.funcs:
            self.funcs[plan.symbol] = self.be.get_function(self.module, plan.symbol)
        f, stream = self.funcs[plan.symbol], torch.cuda.current_stream().cuda_stream
        return (lambda: self.be.launch(f, plan.grid, plan.block, plan.kernargs, stream=stream,
                                       shared_mem=plan.shared_mem)), plan


def grade(exp: ExperimentSet, launch: Launcher, graded: tuple[str, ...]) -> int:
    """calc_diff against the f32-exact reference (gate 1e-3), NaN-poisoned padding untouched; returns failures."""
    import torch
    from test_cuda_gpu import _windows, grade_gpu

    from rawindexer.bench import make_inputs, torch_fp8_mqa_logits
    from rawindexer.dispatch.base import Tunables

    print("== correctness (calc_diff vs the exact reference; gate 1e-3)", flush=True)
    bad = 0
    for (M, N, mode) in exp.correct_cases:
        for (H, D, bm, design) in exp.instances:
            if design not in graded or (D == 64 and M > 4096):
                continue
            try:
                ks_np, ke_np = _windows(mode, M, N, seed=M + N + H)
            except Exception as exc:  # noqa: BLE001 -- window mode not applicable
                print(f"skip {mode}: {exc}")
                continue
            args = make_inputs(M, N, H, D, ks_np, ke_np, seed=M + N + H + bm)
            ref = torch_fp8_mqa_logits(*args, clean_logits=True)
            for clean in (True, False):
                for nw in exp.correct_warps(M, N):
                    big = torch.full((M, N + 3), float("nan"), device="cuda")
                    out = big[:, :N]
                    go, _plan = launch(design, args, out, clean, Tunables(block_m=bm, num_warps=nw))
                    go()
                    torch.cuda.synchronize()
                    ok, msg = grade_gpu(out, ref, args[4], args[5], clean)
                    ok = ok and bool(torch.isnan(big[:, N:]).all())
                    bad += not ok
                    print(f"{'PASS' if ok else 'FAIL'} {design:4s} M={M} N={N} H={H} D={D} bm={bm} nw={nw} {mode} "
                          f"clean={int(clean)}: {msg}")
            del ref, args
            torch.cuda.empty_cache()
    print(f"correctness failures: {bad}", flush=True)
    return bad


def profile_once(launch: Launcher, design: str) -> None:
    """One warm-up and one measured launch of design on 4096x32768 causal H=32 (ncu --launch-skip 1 --launch-count 1)."""
    import torch

    from rawindexer.bench import make_inputs, windows_for
    from rawindexer.dispatch.base import Tunables

    ks_np, ke_np = windows_for("causal", 4096, 32768)
    args = make_inputs(4096, 32768, 32, 128, ks_np, ke_np, seed=3)
    out = torch.empty((4096, 32768), device="cuda")
    go, plan = launch(design, args, out, True, Tunables(block_m=4, num_warps=4))
    go()
    go()
    torch.cuda.synchronize()
    print("profiled", plan.symbol, plan.grid, plan.config)


def time_all(exp: ExperimentSet, launch: Launcher, designs: tuple[str, ...], cases) -> list:
    """Median us of every (design, num_warps, SplitN) per shape at D=128, rotating input sets past the L2."""
    import torch

    from rawindexer.bench import (
        fp8_peak_tflops,
        make_inputs,
        time_fn,
        window_pairs,
        windows_for,
    )
    from rawindexer.dispatch.base import Tunables

    peak = fp8_peak_tflops()
    print(f"== timings (fp8 peak {peak:.0f} TFLOP/s); us / TFLOP/s / % peak", flush=True)
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
            for (h, d, bm, design) in exp.instances:
                if h != H or d != 128 or design not in designs:
                    continue
                for nw in exp.time_warps(M, N):
                    for split in exp.time_splits(M, N):
                        try:
                            gos = [launch(design, sets[i], outs[i], clean,
                                          Tunables(block_m=bm, num_warps=nw, split_n=split)) for i in range(nsets)]
                        except ValueError:  # that configuration does not exist for this shape
                            continue
                        us = time_fn(lambda i, gos=gos: gos[i][0](), nsets, 20)
                        tf = 2 * H * 128 * pairs / us / 1e6
                        res.append((us, design, bm, nw, split, gos[0][1].config["split_n"], tf))
            res.sort()
            print(f"-- {M}x{N} {window} clean={int(clean)} H={H}")
            for us, design, bm, nw, split, sn, tf in res:
                asked = f"{split}->" if len(exp.time_splits(M, N)) > 1 else ""
                print(f"   {design:4s} bm={bm} nw={nw} split={asked}{sn}: {us:9.1f} us {tf:6.0f} TFLOP/s "
                      f"{100 * tf / peak:4.0f}%")
            best: dict[str, float] = {}
            for us, design, *_ in res:
                best.setdefault(design, us)
            summary.append((M, N, window, H, best))
            del sets, outs
            torch.cuda.empty_cache()
    return summary


def run(exp: ExperimentSet, designs: tuple[str, ...], graded: tuple[str, ...], skip_correct: bool,
        long_cases: bool, profile: str | None) -> None:
    launch = Launcher(exp, designs if not profile else (profile,))
    if profile:
        return profile_once(launch, profile)
    bad = 0 if skip_correct else grade(exp, launch, graded)
    summary = time_all(exp, launch, designs, exp.time_cases[:2] if long_cases else exp.time_cases)
    print("== summary: best us per design")
    print("case".ljust(34) + "".join(i.rjust(9) for i in designs))
    for M, N, window, H, best in summary:
        print(f"{M}x{N} {window} H={H}".ljust(34) + "".join(f"{best.get(i, float('nan')):9.1f}" for i in designs))
    print(f"correctness failures: {bad}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", choices=sorted(SETS), default="v4", help="experiment set (default v4)")
    p.add_argument("--build", action="store_true", help="compile the set's cubin (no GPU needed)")
    p.add_argument("--no-correct", action="store_true", help="skip grading, time only")
    p.add_argument("--designs", "--impls", default=None,
                   help="comma-separated designs to time (default: all of the set; --impls: its older name)")
    p.add_argument("--graded", default=None, help="comma-separated designs to grade (default: per set)")
    p.add_argument("--long-cases", action="store_true", help="time only the two longest causal shapes")
    p.add_argument("--profile", default=None, metavar="DESIGN",
                   help="launch DESIGN twice on 4096x32768 causal H=32 (for ncu) and stop")
    a = p.parse_args()
    exp = SETS[a.set]
    if a.build:
        return build(exp)
    designs = tuple(a.designs.split(",")) if a.designs else exp.designs
    unknown = set(designs) - set(exp.designs) | ({a.profile} - set(exp.designs) if a.profile else set())
    if unknown:
        p.error(f"not in set {a.set}: {', '.join(sorted(unknown))}")
    graded = tuple(a.graded.split(",")) if a.graded else (
        exp.graded if exp.graded is not None else tuple(i for i in exp.designs if i not in exp.diagnostics))
    run(exp, designs, tuple(g for g in graded if g in designs), a.no_correct, a.long_cases, a.profile)


if __name__ == "__main__":
    main()
