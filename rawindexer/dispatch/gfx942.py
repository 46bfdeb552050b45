"""Host side of kernels/fp8_mqa_logits.hip on gfx942 (MI300X / MI325X): the gfx950 family's heuristic and
launch geometry, on gfx942's build (rawindexer/registry.py GFX942_INSTANCES).

What differs from gfx950 is in the kernel's shared header (kernels/target.h) and here only in what is
built: the seed design (the accurate default; the MFMA-reduce designs are gfx950-only), each instance for
e4m3fnuz inputs (the MFMA's own format) and for e4m3fn inputs read in place (symbols ``_fn``: bytes
patched where loaded, weights x 4). The heuristic plans for the device's CUs: 304 on MI300X (the
emulator's modelled count, rawindexer.backends.emulator.MODELLED_CUS); nothing here is tuned on a gfx942.
"""
from __future__ import annotations

from .. import registry
from .gfx950 import Gfx950Family


class Gfx942Family(Gfx950Family):
    arch = "gfx942"
    fp8_formats = ("e4m3fnuz", "e4m3fn")
    fp8_format_note = "gfx942's MFMA reads e4m3fnuz; e4m3fn is read in place"
    designs = registry.designs(registry.PREFILL, registry.GFX942)  # ("seed",): the MFMA-reduce designs are gfx950's
    default_designs = registry.default_designs(registry.PREFILL, registry.GFX942)
    design_env = ""
