"""A/B of decode kernel builds on the H200 in one call: DeepGEMM once, then each build (a kernel directory, its own
subprocess through RAWINDEXER_KERNEL_DIR) in the order given, so drift between builds shows as the spread of a
repeated entry (give the baseline twice). Design "tma" (block size 64, D = 128) unless the entry says otherwise.

    python3 bench/paged_ab.py NAME=DIR[:sN][:dDESIGN][:pN|:wK|:tT] ... [--log FILE] [--cases all|n128|n128short|h64n2|power|decode6|decode7|split|spec]
                              [--ragged]

":sN": the build's tma ring has N stages (the host sizes shared memory from paged_kernels.SM90_TMA_STAGES);
":dDESIGN": time that design; ":pN": split_n = N forced through the API; ":wK": split_n = max(1, K x slots // B), K
waves of the host's resident blocks (slots: dispatch/paged_sm90.py's choose), forced the same way; ":tT": the
heuristic's split_n raised until no split holds more than T tiles at the case's context (split_n = max(heuristic,
ceil(tiles / T))). Each cell names the
split_n it ran ("s33"; the heuristic's where none is forced). Prints one table: GPU us per call (CUDA graph of 20 calls, median of 5 replays),
after rawindexer.bench_paged's settle and warm-up (AB_WARM: the warm-up's seconds, default WARM_S),
ours / DeepGEMM, % of the read bandwidth (torch sum over 4 GiB, DeepGEMM's subprocess), calc_diff against DeepGEMM
over the valid columns (BAD: > 1e-3 or a non-finite valid output). --ragged: each case's context lengths as the public
benchmark's --ragged draws them (rawindexer.bench_paged.ragged_lengths: uniform in [context / 16, context], seeded per
case, the same for every build and DeepGEMM); the bandwidth column then counts the bytes of the lengths drawn.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # rawindexer from this checkout (bench_paged, the children)
CASES = [  # (B, context, next_n, H): N = next_n x H = 128 first, then 64 and 32 for the no-regression check
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 4, 32), (256, 4096, 2, 64),
    (64, 32768, 1, 64), (64, 131072, 1, 64), (64, 131072, 2, 32), (64, 131072, 1, 32), (64, 32768, 1, 32),
]
# --cases decode6: the register-split kernels (N = 96, 128 at H <= 64) at large and small batches, a few N <= 64
# --cases decode7: the brief's grid (B x context x (H 64 nn 1/2, H 32 nn 4)), large N = 128 first
CASES_DECODE7 = [
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 4, 32), (256, 4096, 2, 64),
    (8, 32768, 2, 64), (1, 131072, 2, 64),
    (64, 32768, 1, 64), (64, 131072, 1, 64), (256, 32768, 1, 64), (256, 4096, 1, 64), (8, 32768, 1, 64),
    (1, 131072, 1, 64), (64, 131072, 4, 32), (256, 4096, 4, 32),
]
CASES_DECODE6 = [
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 4, 32), (256, 4096, 2, 64),
    (64, 32768, 3, 32), (64, 32768, 1, 64), (64, 131072, 2, 32), (64, 32768, 1, 32),
    (1, 131072, 2, 64), (8, 32768, 2, 64), (1, 4096, 2, 64),
]


# --cases split: the large batches whose split count ragged lengths make matter (one wave of blocks at B = 256), B = 64
# and B = 8 beside them
CASES_SPLIT = [
    (256, 131072, 2, 64), (256, 131072, 1, 64), (256, 131072, 1, 32), (256, 32768, 2, 64), (256, 32768, 1, 64),
    (256, 32768, 1, 32), (64, 131072, 2, 64), (64, 131072, 1, 32), (64, 32768, 2, 64), (64, 32768, 1, 32),
    (256, 4096, 2, 64), (8, 131072, 2, 64),
]

# --cases spec: the block prologue's cases (session 16): every case the targets still miss (N = 128 at B x context >=
# 64 x 32768, 64 x 32768 H 32 next_n 2), the short-block and one-wave small batches, N = 64 / 32 beside them
CASES_SPEC = [
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 2, 32), (64, 32768, 1, 64),
    (64, 131072, 1, 64), (256, 32768, 1, 64), (64, 32768, 1, 32), (256, 4096, 2, 64), (8, 32768, 2, 64),
    (1, 131072, 2, 64), (8, 32768, 1, 64), (1, 131072, 1, 64), (64, 131072, 2, 32), (64, 32768, 4, 32),
]


# --cases h64n2: the H 64 next_n 2 (N = 128) cases of the brief's grid, and H 64 next_n 1 beside them (session 17)
CASES_H64N2 = [
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (256, 4096, 2, 64), (8, 32768, 2, 64),
    (1, 131072, 2, 64), (64, 32768, 1, 64), (64, 131072, 1, 64),
]


# --cases n128short: four H 64 next_n 2 cases for a short A/B (session 17's last call)
CASES_N128_SHORT = [(64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (8, 32768, 2, 64)]

# --cases wg4: the N = 128 cases (H 64 next_n 2 and H 32 next_n 4) at large and small batches, N = 64 beside them
# (session 18, the four-warpgroup form)
CASES_WG4 = [
    (64, 32768, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 4, 32), (256, 4096, 2, 64),
    (8, 32768, 2, 64), (1, 131072, 2, 64), (64, 32768, 1, 64),
]

# --cases wg4short: its three large N = 128 cases (a short call)
CASES_WG4_SHORT = CASES_WG4[:3]

# --cases power: the longest calls of the brief's grid, where the card runs at its power cap (session 17)
CASES_POWER = [
    (256, 131072, 2, 64), (64, 131072, 2, 64), (256, 32768, 2, 64), (64, 32768, 2, 64), (256, 131072, 1, 64),
    (256, 131072, 2, 32),
]


def case_set(name: str) -> list:
    return {"decode6": CASES_DECODE6, "decode7": CASES_DECODE7, "split": CASES_SPLIT, "spec": CASES_SPEC,
            "h64n2": CASES_H64N2, "power": CASES_POWER, "n128short": CASES_N128_SHORT, "wg4": CASES_WG4,
            "wg4short": CASES_WG4_SHORT,
            "n128": [c for c in CASES if c[2] * c[3] == 128]}.get(name, CASES)


def _choose(B: int, ctx: int, nn: int, H: int, design: str, sms: int, num_blocks: int, max_blocks: int,
            split_n: int = 0) -> dict:
    from rawindexer.dispatch.paged_gfx950 import PagedProblem
    from rawindexer.dispatch.paged_sm90 import PagedSm90Family
    p = PagedProblem(B, nn, H, 128, 64, ctx, max_blocks, ctx, False, False, num_blocks=num_blocks)
    return PagedSm90Family(None).choose(p, sms, split_n, 0, design)


def heuristic_split(*case) -> int:
    return _choose(*case)["split_n"]


def forced_split(B: int, ctx: int, nn: int, H: int, design: str, sms: int, num_blocks: int, max_blocks: int) -> int:
    """split_n of the entry's ":pN" / ":wK" / ":tT" option (AB_SPLIT), 0 (the heuristic) without one."""
    opt = os.environ.get("AB_SPLIT", "")
    if opt.startswith("p"):
        return int(opt[1:])
    if opt.startswith("t"):
        tiles = -(-ctx // 64)
        return max(heuristic_split(B, ctx, nn, H, design, sms, num_blocks, max_blocks), -(-tiles // int(opt[1:])))
    if opt.startswith("w"):
        slots = _choose(B, ctx, nn, H, design, sms, num_blocks, max_blocks)["slots"]
        return max(1, int(opt[1:]) * slots // B)
    return 0


def cache_bytes(B: int, ctx: int, nn: int) -> int:
    """Cache bytes a call reads (132 per token at D = 128) for the case's lengths: all B x ctx, or the drawn ones."""
    from rawindexer.bench_paged import cache_tokens
    return cache_tokens(B, ctx, nn, bool(os.environ.get("AB_RAGGED"))) * 132


def ref_path(key: str) -> str:
    return f"/tmp/pab_ref_{key.replace(',', '_')}{'_ragged' if os.environ.get('AB_RAGGED') else ''}.pt"


def child(mode: str) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from rawindexer import bench_paged as bp
    from rawindexer import paged_kernels as pk
    if os.environ.get("AB_TMA_STAGES"):
        pk.SM90_TMA_STAGES = int(os.environ["AB_TMA_STAGES"])
    import rawindexer
    design = os.environ.get("AB_DESIGN", "tma")
    warm_s = float(os.environ.get("AB_WARM", bp.WARM_S))  # seconds of untimed replays before each timing
    res: dict = {}
    if mode == "dg":
        res["read_bw"] = bp.read_bandwidth(torch)
    cases = case_set(os.environ.get("AB_CASES_SET", "default"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B, ctx, nn, H in cases:
        torch.manual_seed(B * 7 + ctx + nn * 3 + H)
        kv, table = bp.make_cache(torch, B, ctx, 64)
        q, w, l1, l2 = bp.make_queries(torch, B, ctx, nn, H, bool(os.environ.get("AB_RAGGED")))
        key = f"{B},{ctx},{nn},{H}"
        if mode == "dg":
            call, why = bp.deepgemm_call(torch, q, kv, w, l2, table, ctx, 64)
            res[key] = bp.graph_time(torch, call, warm_s=warm_s) * 1e6 if call else float("nan")
            if call:
                torch.save(call().float().cpu(), ref_path(key))
            else:
                print(f"# {key}: {why}", file=sys.stderr)
        else:
            split = forced_split(B, ctx, nn, H, design, sms, kv.shape[0], table.shape[1])
            out = torch.empty((B * nn, ctx), dtype=torch.float32, device="cuda")
            f = lambda: rawindexer.fp8_paged_mqa_logits(q.view(torch.uint8), kv, w, l1, table, ctx,  # noqa: E731
                                                        out=out, variant=design, split_n=split)
            out.fill_(float("nan"))
            f()
            torch.cuda.synchronize()
            valid = torch.arange(ctx, device="cuda")[None, :] < l2.reshape(-1, 1)
            ok = bool(torch.isfinite(torch.where(valid, out, 0)).all())
            diff = float("nan")
            if os.path.exists(ref_path(key)):
                ref = torch.load(ref_path(key)).cuda()
                diff = bp.calc_diff(torch, torch.where(valid, out, 0), torch.where(valid, ref, 0))
                del ref
            res[key] = (bp.graph_time(torch, f, warm_s=warm_s) * 1e6, diff, ok,
                        split or heuristic_split(B, ctx, nn, H, design, sms, kv.shape[0], table.shape[1]))
            del out
        del kv, table, q, w
        torch.cuda.empty_cache()
    print("ABJSON" + json.dumps(res), flush=True)


def run_child(mode: str, env_extra: dict) -> dict:
    env = {**os.environ, **env_extra}
    try:
        p = subprocess.run([sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True,
                           timeout=float(os.environ.get("AB_CHILD_S", "120")))
    except subprocess.TimeoutExpired:
        print(f"# {mode} {env_extra}: timed out", flush=True)
        return {}
    line = [x for x in p.stdout.splitlines() if x.startswith("ABJSON")]
    if not line:
        print(p.stdout[-2000:], p.stderr[-3000:], flush=True)
        return {}
    if p.stderr.strip():
        print(p.stderr[-1500:], flush=True)
    return json.loads(line[0][6:])


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        child(argv[1])
        return 0
    global CASES
    os.environ["AB_CASES_SET"] = argv[argv.index("--cases") + 1] if "--cases" in argv else "default"
    CASES = case_set(os.environ["AB_CASES_SET"])
    log = argv[argv.index("--log") + 1] if "--log" in argv else None
    if "--ragged" in argv:
        os.environ["AB_RAGGED"] = "1"
    entries = [a for a in argv if "=" in a]
    dg = run_child("dg", {})
    bw = dg.get("read_bw", float("nan"))
    runs = []  # (label, results)
    for e in entries:
        name, spec = e.split("=", 1)
        d, *opts = spec.split(":")
        extra = {"RAWINDEXER_KERNEL_DIR": os.path.abspath(d)}
        for o in opts:
            if o.startswith("s"):
                extra["AB_TMA_STAGES"] = o[1:]
            elif o.startswith("d"):
                extra["AB_DESIGN"] = o[1:]
            elif o.startswith(("p", "w", "t")):
                extra["AB_SPLIT"] = o
        label = name if name not in [r[0] for r in runs] else f"{name}#{sum(r[0].split('#')[0] == name for r in runs) + 1}"
        runs.append((label, run_child("ours", extra)))
        print(f"# done {label}", flush=True)
    head = "| B | ctx | nn | H | N | DG us | " + " | ".join(label for label, _ in runs) + " |"
    ragged = " (ragged lengths)" if os.environ.get("AB_RAGGED") else ""
    lines = [f"# read bandwidth {bw / 1e12:.2f} TB/s; cells: us (ours / DG, % read bw){ragged}", head,
             "|" + "---|" * (6 + len(runs))]
    for B, ctx, nn, H in CASES:
        key = f"{B},{ctx},{nn},{H}"
        t_dg = dg.get(key, float("nan"))
        nbytes = cache_bytes(B, ctx, nn)
        cells = []
        for _, res in runs:
            got = list(res.get(key, ()))  # (us, calc_diff, finite, split_n); older logs lack the split
            t, diff, ok, split = got + [float("nan"), float("nan"), False, 0][len(got):]
            flag = "" if ok and (diff != diff or diff < 1e-3) else " BAD"
            cells.append(f"{t:.1f} ({t / t_dg:.2f}, {100 * nbytes / (t * 1e-6) / bw:.0f}%, s{split}){flag}")
        lines.append(f"| {B} | {ctx} | {nn} | {H} | {nn * H} | {t_dg:.1f} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    if log:
        Path(log).write_text(text + "\n" + json.dumps({"dg": dg, "runs": runs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
