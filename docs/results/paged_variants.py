"""Measurement harness (H200): the sm_90a decode kernel's builds side by side, one subprocess per kernel
directory (RAWINDEXER_KERNEL_DIR), DeepGEMM once per case, calc_diff of each against DeepGEMM.

    python3 docs/results/paged_variants.py NAME=DIR[:mtN][:sN][:tsN][:tmaonly][:legacy][:onewave] ... [--log FILE]

Each NAME=DIR is a full kernel directory (manifest.json + code objects); ":mtN" sets the host heuristic's
MIN_TILES_PER_SPLIT for that entry, ":sN" tells the host the build's ring has N stages, ":legacy" that the build
has one kernel per design (before the per-next_n kernels), ":onewave" replaces the split heuristic by the
largest split that fits one wave of resident blocks. Prints one table: GPU us per call (CUDA graph of 20 calls, median of 5).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

#: the designs timed where the build has them ("tma": block size 64, kernels/sm90/paged_tma.cuh)
VARIANTS = ("f16", "fp8", "tma")
CASES = [  # (B, context, next_n, H)
    (64, 131072, 1, 32), (64, 131072, 1, 64), (64, 131072, 2, 32), (64, 131072, 2, 64),
    (64, 32768, 1, 64), (64, 32768, 2, 64), (256, 32768, 1, 32), (256, 32768, 2, 64),
    (8, 131072, 1, 64), (8, 32768, 2, 64), (64, 4096, 1, 64), (64, 4096, 2, 32),
    (1, 4096, 1, 32), (1, 4096, 2, 64), (1, 131072, 2, 64), (8, 4096, 1, 64),
]


def child(dg: bool) -> None:
    import torch

    import rawindexer
    from rawindexer import bench_paged as bp
    from rawindexer.dispatch import paged_sm90

    if os.environ.get("PV_MIN_TILES"):
        paged_sm90.MIN_TILES_PER_SPLIT = int(os.environ["PV_MIN_TILES"])
    if os.environ.get("PV_ONE_WAVE"):  # split heuristic under test: the largest split that fits one wave
        wave_split = paged_sm90.best_split

        def one_wave(batch: int, tiles: int, slots: int, min_tiles: int) -> int:
            if batch >= slots:
                return wave_split(batch, tiles, slots, min_tiles)
            return max(1, min(slots // max(batch, 1), tiles // max(min_tiles, 1)))
        paged_sm90.best_split = one_wave
    if os.environ.get("PV_LEGACY"):  # a build from before the per-next_n kernels: one symbol per design
        import dataclasses

        from rawindexer import paged_kernels as pk
        pk.TARGETS["sm_90a"] = dataclasses.replace(pk.TARGETS["sm_90a"], per_next_n=False)
    if os.environ.get("PV_STAGES"):  # a build whose ring has another depth: the host sizes shared memory to match
        import dataclasses

        from rawindexer import paged_kernels as pk
        stages = int(os.environ["PV_STAGES"])
        pk.SM90_STAGES = stages
        pk.TARGETS["sm_90a"] = dataclasses.replace(pk.TARGETS["sm_90a"], ring_bytes={
            d: stages * pk.SM90_TILE * (d + pk.SM90_K_PAD + pk.SCALE_BYTES) for d in pk.HEAD_DIMS})
    from rawindexer import paged_kernels as pk
    if os.environ.get("PV_TMA_STAGES"):  # a "tma" build with another PAGED_TMA_STAGES: the host sizes shared memory
        pk.SM90_TMA_STAGES = int(os.environ["PV_TMA_STAGES"])
    wanted = os.environ.get("PV_VARIANTS", ",".join(VARIANTS)).split(",")
    built = {v for v in wanted if rawindexer.is_paged_supported(64, 128, 64) and
             any(i.block_size == 64 for i in pk.TARGETS["sm_90a"].instances_of(v))}
    res = {}
    for B, ctx, nn, H in CASES:
        torch.manual_seed(B * 7 + ctx + nn * 3 + H)
        kv, table = bp.make_cache(torch, B, ctx, 64)
        q, w, l1, l2 = bp.make_queries(torch, B, ctx, nn, H)
        out = torch.empty((B * nn, ctx), dtype=torch.float32, device="cuda")
        key = f"{B},{ctx},{nn},{H}"
        if dg:
            call, why = bp.deepgemm_call(torch, q, kv, w, l2, table, ctx, 64)
            res[key] = {"dg": bp.graph_time(torch, call) * 1e6 if call else float("nan")}
            if call:
                torch.save(call().float().cpu(), f"/tmp/pv_ref_{key.replace(',', '_')}.pt")
        else:
            res[key] = {}
            ref_path = f"/tmp/pv_ref_{key.replace(',', '_')}.pt"
            ref = torch.load(ref_path).cuda() if os.path.exists(ref_path) else None
            valid = torch.arange(ctx, device="cuda")[None, :] < l2.reshape(-1, 1)
            for v in VARIANTS:
                if v not in built:
                    continue
                f = lambda: rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, l1, table, ctx,  # noqa: E731
                                                            out=out, variant=v)
                out.fill_(float("nan"))
                f()
                torch.cuda.synchronize()
                ok = bool(torch.isfinite(torch.where(valid, out, 0)).all())
                diff = bp.calc_diff(torch, torch.where(valid, out, 0), torch.where(valid, ref, 0)) if ref is not None else float("nan")
                res[key][v] = (bp.graph_time(torch, f) * 1e6, diff, ok)
        del kv, table, q, w, out
        torch.cuda.empty_cache()
    print("PVJSON" + json.dumps(res), flush=True)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        child(argv[1] == "dg")
        return 0
    entries = [a for a in argv if "=" in a]
    log = argv[argv.index("--log") + 1] if "--log" in argv else None

    def run(env_extra: dict, mode: str) -> dict:
        env = {**os.environ, **env_extra}
        p = subprocess.run([sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("PVJSON")]
        if not line:
            print(p.stdout[-2000:], p.stderr[-3000:])
            return {}
        return json.loads(line[0][6:])

    results = {"DG": run({}, "dg")}
    for e in entries:
        name, spec = e.split("=", 1)
        d, *opts = spec.split(":")
        extra = {"RAWINDEXER_KERNEL_DIR": os.path.abspath(d)}
        for o in opts:  # mtN: MIN_TILES_PER_SPLIT = N; sN: the build's ring depth is N; legacy: one kernel per design
            if o in ("legacy", "onewave"):
                extra["PV_LEGACY" if o == "legacy" else "PV_ONE_WAVE"] = "1"
            elif o == "tmaonly":  # time only the tma design of this build
                extra["PV_VARIANTS"] = "tma"
            elif o.startswith("ts"):  # tsN: the build's tma ring has N stages
                extra["PV_TMA_STAGES"] = o[2:]
            else:
                extra["PV_MIN_TILES" if o.startswith("mt") else "PV_STAGES"] = o.lstrip("mts")
        results[name] = run(extra, "ours")
    names = [e.split("=", 1)[0] for e in entries]
    head = "| B | ctx | nn | H | DG us | " + " | ".join(f"{n} {v}" for n in names for v in VARIANTS) + " |"
    lines = [head, "|" + "---|" * (5 + len(VARIANTS) * len(names))]
    for B, ctx, nn, H in CASES:
        key = f"{B},{ctx},{nn},{H}"
        dg = results["DG"].get(key, {}).get("dg", float("nan"))
        cells = []
        for n in names:
            for v in VARIANTS:
                t, diff, ok = results[n].get(key, {}).get(v, (float("nan"), float("nan"), False))
                flag = "" if ok and (diff != diff or diff < 1e-3) else " BAD"
                cells.append(f"{t:.1f} ({t / dg:.2f}){flag}")
        lines.append(f"| {B} | {ctx} | {nn} | {H} | {dg:.1f} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    if log:
        open(log, "w").write(text + "\n" + json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
