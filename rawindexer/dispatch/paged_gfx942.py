"""Host side of kernels/fp8_paged_mqa_logits.hip on gfx942 (MI300X / MI325X): the gfx950 family on gfx942's
build, with gfx942's 64 KB of LDS per CU (Q and weights of one sequence must fit: H=128, D=128 serves
next_n <= 3). The design follows the input format: "" reads e4m3fnuz, "fn" e4m3fn in place
(rawindexer/paged_kernels.py, kernels/target.h). Not tuned on a gfx942.
"""
from __future__ import annotations

from .paged_gfx950 import PagedGfx950Family

LDS_PER_CU = 64 * 1024  # gfx942
#: Per-logit gate of each design (paged_grading.design_eps): gfx950's kernel source, fp32 head reduce; ""
#: reads e4m3fnuz, "fn" e4m3fn -- both exact conversions
LOGIT_EPS = {"": 1e-5, "fn": 1e-5}


class PagedGfx942Family(PagedGfx950Family):
    arch = "gfx942"
    lds_per_cu = LDS_PER_CU
