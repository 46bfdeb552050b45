"""What ``python -m rawindexer info`` reports: the package, the kernels it ships per target, and per backend
whether it can run here (bindings installed, driver found, versions matching, devices seen).

Everything is gathered without launching anything and without raising for expected conditions (no GPU,
no bindings, a version mismatch): each becomes one line saying what to install.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .kernel_files import KernelNotBuiltError, kernel_dir, kernel_source, manifest_path
from .runtime_versions import Verdict, cuda_verdict, hip_verdict, parse_version


@dataclass(frozen=True)
class Row:
    name: str
    value: str
    #: False marks a problem the exit code reports (the package itself is broken); environment
    #: conditions (no GPU, missing bindings) are not problems of the package
    ok: bool = True


def _shapes(kernels: dict) -> str:
    shapes = sorted({(k["params"]["heads"], k["params"]["head_dim"]) for k in kernels.values()})
    return " ".join(f"{h}x{d}" for h, d in shapes)


def _span(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def gfx950_summary(target: dict) -> str:
    ks = target["kernels"]
    res = [k["resources"] for k in ks.values()]
    spills = sum(r["vgpr_spill"] + r["sgpr_spill"] + r["scratch"] for r in res)
    return (f"{len(ks)} kernels, (H, D) {_shapes(ks)}; VGPR {_span([r['vgpr'] for r in res])}, "
            f"{_span([r['waves_per_simd'] for r in res])} waves/SIMD, spill+scratch {spills} B; "
            f"built by {target.get('toolchain', '?')}")


def sm90_summary(target: dict) -> str:
    ks = target["kernels"]
    res = [k["resources"] for k in ks.values()]
    spills = sum(r["spill_stores"] + r["spill_loads"] + r["stack_frame"] for r in res)
    return (f"{len(ks)} kernels, (H, D) {_shapes(ks)}; regs {_span([r['registers'] for r in res])}, "
            f"smem {_span([r['smem'] for r in res])} B, spill+stack {spills} B; "
            f"built by {target.get('toolchain', '?')}")


SUMMARIES = {"gfx950": gfx950_summary, "gfx942": gfx950_summary, "sm_90a": sm90_summary}


def load_manifest() -> tuple[Path | None, dict, str]:
    """(manifest path or None, its content or {}, the error in one line or "")."""
    try:
        path = manifest_path()
    except KernelNotBuiltError as exc:
        return None, {}, str(exc)
    return path, json.loads(path.read_text()), ""


def kernel_rows(manifest: dict, error: str) -> list[Row]:
    if error:
        return [Row("kernels", error, ok=False)]
    rows = [Row("kernels", f"{kernel_dir()} ({kernel_source()})")]
    targets = manifest.get("targets", {})
    for arch, summarize in SUMMARIES.items():
        target = targets.get(arch)
        if target is None:
            rows.append(Row(f"  {arch}", "missing from manifest.json: rebuild with `make`", ok=False))
        elif not (kernel_dir() / target["code_object"]).is_file():
            rows.append(Row(f"  {arch}", f"{target['code_object']} missing next to manifest.json", ok=False))
        else:
            rows.append(Row(f"  {arch}", summarize(target)))
    return rows


def _device_count(name: str) -> tuple[int | None, str]:
    """(devices seen, "" or the reason in one line); imports the backend only when asked."""
    try:
        from .backends import get_backend

        return get_backend(name).device_count(), ""
    except Exception as exc:  # a driver call that fails is a condition of this machine, not a bug
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def backend_state(name: str, verdict: Verdict) -> tuple[bool, str]:
    """(ready, one line): ready means bindings and driver match and at least one device is seen."""
    label = {"hip": "hip-python", "cuda": "cuda-bindings"}[name]
    bindings = f"{label} {verdict.bindings}" if verdict.bindings else f"{label} not installed"
    if verdict.ok is None:
        return False, f"{verdict.advice}; {bindings}"
    if verdict.ok is False:
        return False, f"{verdict.driver} with {bindings}: {verdict.advice}"
    count, why = _device_count(name)
    if not count:
        return False, f"no device seen ({verdict.driver}, {bindings})" + (f": {why}" if why else "")
    return True, f"ready: {count} device(s), {verdict.driver}, {bindings}"


def info_rows() -> list[Row]:
    path, manifest, error = load_manifest()
    sm90 = manifest.get("targets", {}).get("sm_90a", {})
    rows = [Row("rawindexer", f"{__version__} ({Path(__file__).resolve().parent})")]
    rows += kernel_rows(manifest, error)
    rows.append(Row("backends", "emulator (CPU arrays) always; GPUs below"))
    rows.append(Row("  emulator", "ready: executes the gfx950 (default) or gfx942 (arch=\"gfx942\") code object on "
                                  "the CPU (exact, slow)"))
    rows.append(Row("  hip", backend_state("hip", hip_verdict())[1]))
    rows.append(Row("  cuda", backend_state("cuda", cuda_verdict(parse_version(sm90.get("cuda_version"))))[1]))
    return rows
