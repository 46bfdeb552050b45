"""Host-side dispatch: one kernel family per target architecture (heuristics, launch geometry)."""
from __future__ import annotations

import importlib
from functools import lru_cache

from .base import KernelFamily, LaunchPlan, Pointers, Problem, Tunables

#: target architecture -> (module, class); a new target is one new file plus a line here
FAMILIES: dict[str, tuple[str, str]] = {
    "gfx950": ("rawindexer.dispatch.gfx950", "Gfx950Family"),
    "gfx942": ("rawindexer.dispatch.gfx942", "Gfx942Family"),
    "sm_90a": ("rawindexer.dispatch.sm90", "Sm90Family"),
}


@lru_cache(maxsize=None)
def family_for(arch: str) -> KernelFamily:
    if arch not in FAMILIES:
        raise ValueError(f"arch: expected one of {sorted(FAMILIES)}, got {arch!r}")
    module, cls = FAMILIES[arch]
    return getattr(importlib.import_module(module), cls)()


__all__ = ["FAMILIES", "family_for", "KernelFamily", "LaunchPlan", "Pointers", "Problem", "Tunables"]
