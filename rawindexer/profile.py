"""Static (and emulated) profile of the shipped gfx950 kernels.

    python -m rawindexer.profile [--all] [--no-emulator] [--markdown]

Reads build/manifest.json, the code object's metadata and the assembly of the same compile, and prints
per variant: VGPR/AGPR/SGPR, waves per SIMD, spills, the steady-state loop's instruction mix by class,
VALU instructions and MFMA passes per row-token (one (query row, key) pair), wait states (s_nop) per
tile, and the loads still in flight when the tile's first MFMA issues. Then, unless --no-emulator, the
dynamic instruction counts by class of one small launch on the emulator (numpy inputs through the
public API). Nothing here is a gfx950 timing: there is no AMD GPU where this was written.

A tile is BLOCK_M rows x 32 keys; loops that walk two tiles per iteration are normalised by the score
MFMAs' multiply-adds. MFMA pass counts: rawindexer.asm.MFMA_SHAPES (LLVM SISchedule.td, gfx950 model).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from . import asm

BUILD = Path(__file__).resolve().parents[1] / "build"
#: The side-by-side pair of the issue: the seed baseline and the MFMA-reduce kernel, H=32, D=128, BM=4.
HEADLINE = ["fp8_mqa_logits_h32_d128_bm4_u1", "fp8_mqa_logits_h32_d128_bm4_u2",
            "fp8_mqa_logits_h32_d128_bm4_mr", "fp8_mqa_logits_h32_d128_bm4_mrp"]
#: One representative per (H, D) and path at its default BLOCK_M.
DEFAULTS = HEADLINE + [
    "fp8_mqa_logits_h64_d128_bm2_u1", "fp8_mqa_logits_h64_d128_bm2_mr",
    "fp8_mqa_logits_h128_d128_bm1_u1", "fp8_mqa_logits_h128_d128_bm1_mr",
    "fp8_mqa_logits_h32_d64_bm4_u1", "fp8_mqa_logits_h32_d64_bm4_mr",
    "fp8_mqa_logits_h64_d64_bm2_u1", "fp8_mqa_logits_h64_d64_bm4_mr",
    "fp8_mqa_logits_h128_d64_bm2_u1", "fp8_mqa_logits_h128_d64_bm2_mr",
]
CLASSES = ["VALU", "SALU", "MFMA", "VMEM", "SMEM", "wait", "branch"]


def static_rows(build: Path = BUILD, symbols: list[str] | None = None) -> list[dict]:
    """One dict per variant with the static levers."""
    man = json.loads((build / "manifest.json").read_text())["targets"]["gfx950"]
    funcs = asm.split_functions((build / man["assembly"]).read_text())
    rows = []
    for sym in symbols or list(man["kernels"]):
        if sym not in man["kernels"]:
            continue
        e = man["kernels"][sym]
        p, r = e["params"], e["resources"]
        tp = asm.tile_profile(funcs[sym], p["heads"], p["head_dim"], p["block_m"])
        rows.append({
            "symbol": sym, "path": p.get("path", "seed"), "H": p["heads"], "D": p["head_dim"],
            "BM": p["block_m"], "vgpr": r["vgpr"], "agpr": r["agpr"], "sgpr": r["sgpr"],
            "waves": r["waves_per_simd"], "spill": r["vgpr_spill"] + r["sgpr_spill"],
            "tiles_in_loop": tp.tiles_in_loop,
            "mix_per_tile": {c: tp.mix.get(c, 0) / tp.tiles_in_loop for c in CLASSES},
            "valu_per_rt": tp.valu_per_row_token, "mfma_passes_per_rt": tp.mfma_passes_per_row_token,
            "score_passes_per_rt": tp.score_passes_per_row_token,
            "reduce_passes_per_rt": tp.reduce_passes_per_row_token,
            "wait_states_per_tile": tp.wait_states_per_tile,
            "loads_in_flight": tp.loads_in_flight_at_first_mfma,
            "k_bytes_per_row": p["head_dim"] / p["block_m"],  # K bytes read per output row per key
        })
    return rows


def emulated_counts(symbol_paths: dict[str, str], M: int = 8, N: int = 256, H: int = 32, D: int = 128,
                    seed: int = 0) -> dict[str, dict]:
    """{path: {"stats": per-class dynamic counts, "symbol": ...}} of one causal launch per path on the
    emulator, or {} when the emulator backend is not there."""
    try:
        import numpy as np

        import rawindexer
        from rawindexer.backends import get_backend
        from rawindexer.fp8 import random_e4m3fn
        from rawindexer.windows import make_windows
    except ImportError:
        return {}
    out = {}
    for path, block_m in symbol_paths.items():
        rng = np.random.default_rng(seed)
        ks, ke = make_windows("causal", M, N, rng)
        ops = dict(q_fp8=random_e4m3fn(rng, (M, H, D)), k_fp8=random_e4m3fn(rng, (N, D)),
                   kv_scale=rng.uniform(0, 2, N).astype(np.float32),
                   weights=rng.standard_normal((M, H)).astype(np.float32), cu_seqlen_ks=ks, cu_seqlen_ke=ke)
        old = os.environ.get("RAWINDEXER_GFX950_PATH")
        os.environ["RAWINDEXER_GFX950_PATH"] = path
        try:
            rawindexer.fp8_mqa_logits(**ops, block_m=block_m, num_warps=1, split_n=1)
            stats = getattr(get_backend("emulator"), "last_stats", None)
        except Exception as exc:  # noqa: BLE001 -- the emulator is optional and still growing
            out[path] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        finally:
            if old is None:
                os.environ.pop("RAWINDEXER_GFX950_PATH", None)
            else:
                os.environ["RAWINDEXER_GFX950_PATH"] = old
        if stats is None:
            continue
        out[path] = {"symbol": stats.kernel, "per_class": dict(stats.per_class),
                     "instructions": stats.instructions, "shape": (M, N, H, D, block_m)}
    return out


def markdown(rows: list[dict], emu: dict) -> str:
    lines = ["| variant | path | VGPR | AGPR | SGPR | waves/SIMD | spills | VALU/tile | SALU/tile | MFMA/tile | "
             "VMEM/tile | VALU per row-token | MFMA passes per row-token (score + reduce) | wait states/tile | "
             "loads in flight at 1st MFMA | K bytes per row per key |",
             "|" + "---|" * 16]
    for r in rows:
        m = r["mix_per_tile"]
        lines.append(
            f"| {r['symbol']} | {r['path']} | {r['vgpr']} | {r['agpr']} | {r['sgpr']} | {r['waves']} | {r['spill']} | "
            f"{m['VALU']:.0f} | {m['SALU']:.0f} | {m['MFMA']:.0f} | {m['VMEM']:.0f} | {r['valu_per_rt']:.3f} | "
            f"{r['mfma_passes_per_rt']:.2f} ({r['score_passes_per_rt']:.2f} + {r['reduce_passes_per_rt']:.2f}) | "
            f"{r['wait_states_per_tile']:.1f} | {r['loads_in_flight']} | {r['k_bytes_per_row']:.0f} |")
    if emu:
        ecls = sorted({c for e in emu.values() for c in e.get("per_class", {})})
        lines += ["", "Emulated dynamic instruction counts (one causal launch, numpy inputs, num_warps=1, split_n=1;"
                  " classes as the emulator names them):",
                  "", "| path | kernel | shape (M, N, H, D, BM) | " + " | ".join(ecls) + " | total |",
                  "|" + "---|" * (len(ecls) + 4)]
        for path, e in emu.items():
            if "error" in e:
                lines.append(f"| {path} | (not run: {e['error'][:120]}) |")
                continue
            pc = e["per_class"]
            lines.append(f"| {path} | {e['symbol']} | {e['shape']} | " +
                         " | ".join(str(pc.get(c, 0)) for c in ecls) + f" | {e['instructions']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every shipped variant, not just the defaults")
    ap.add_argument("--no-emulator", action="store_true")
    ap.add_argument("--build", type=Path, default=BUILD)
    args = ap.parse_args(argv)
    rows = static_rows(args.build, None if args.all else DEFAULTS)
    emu = {} if args.no_emulator else emulated_counts({"seed": 4, "mr": 4})
    print(markdown(rows, emu))


if __name__ == "__main__":
    main()
