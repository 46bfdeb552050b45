"""The balanced schedule of the sm_90a "tmasb" design (docs/PERFORMANCE.md v10), modelled on the host.

The kernel (kernels/sm90/prefill_tma_balanced.cuh) computes this schedule itself from the windows on the device (the
host never reads them: the call stays capturable in a CUDA graph). This module mirrors it for the CPU tests (every
tile of every row block's span in exactly one piece) and for the cost model behind the v10 prediction; nothing on
the launch path calls it.

Row block r = rows [r * block_m, (r + 1) * block_m); its span is the union [lo, hi) of its rows' non-empty windows
clipped to [0, N) ([0, 0) if none); tiles = ceil((hi - lo) / TILE); cost = tiles + PIECE_COST (0 for no tiles).
Block b of G owns the cost units [b T / G, (b + 1) T / G) of the concatenated row blocks (T = total cost); within
a row block the first PIECE_COST units carry no tile.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: tmab_piece_cost in the kernel: a piece's fixed cost (consumer barrier, Q staging) in tile units, per design
#: ("tmasb": the guess before the H200 run; "tmasb2": fitted to tmasb's measured times, 3.75 us per piece; "tmasb3":
#: and "tmasb4": tmasb2's; the v11 run gave no reason to change it)
PIECE_COSTS = {"tmasb": 2, "tmasb2": 4, "tmasb3": 4, "tmasb4": 4}
PIECE_COST = PIECE_COSTS["tmasb"]
#: TMAB_MAX_ROW_BLOCKS in the kernel; mirrored by dispatch/sm90.py's BALANCED_MAX_ROW_BLOCKS
MAX_ROW_BLOCKS = 4096
#: TMAB3_MAX_ROW_BLOCKS: "tmasb3"'s second Q / weights / windows buffer leaves room for fewer row blocks
Q_PREFETCH_MAX_ROW_BLOCKS = 2048
TILE = 64


class Piece(NamedTuple):
    """Tiles [t0, t1) of row block ``row_block``'s span, walked by one block."""
    row_block: int
    t0: int
    t1: int


def row_block_spans(ks: np.ndarray, ke: np.ndarray, N: int, block_m: int) -> np.ndarray:
    """[R, 2] int64: each row block's union [lo, hi) of its rows' windows clipped to [0, N), [0, 0) when empty.
    ks, ke: [M] integers."""
    s = np.clip(np.asarray(ks, dtype=np.int64), 0, N)
    e = np.maximum(np.clip(np.asarray(ke, dtype=np.int64), 0, N), s)
    M = len(s)
    R = -(-M // block_m)
    spans = np.zeros((R, 2), dtype=np.int64)
    for r in range(R):
        rs, re = s[r * block_m:(r + 1) * block_m], e[r * block_m:(r + 1) * block_m]
        live = re > rs
        if live.any():
            spans[r] = (rs[live].min(), re[live].max())
    return spans


def cost_prefix(spans: np.ndarray, piece_cost: int = PIECE_COST) -> np.ndarray:
    """[R + 1] int64: the exclusive prefix sum of the row blocks' costs (the kernel's pre_s)."""
    tiles = -(-(spans[:, 1] - spans[:, 0]) // TILE)
    cost = np.where(tiles > 0, tiles + piece_cost, 0)
    return np.concatenate([[0], np.cumsum(cost)])


def block_pieces(prefix: np.ndarray, block: int, blocks: int, piece_cost: int = PIECE_COST) -> list[Piece]:
    """The pieces block ``block`` of ``blocks`` walks, in order (the kernel's TmabWalk)."""
    R = len(prefix) - 1
    total = int(prefix[R])
    u0, u1 = total * block // blocks, total * (block + 1) // blocks
    r = max(0, int(np.searchsorted(prefix[:R], u0, side="right")) - 1)
    out = []
    while r < R and prefix[r] < u1:
        p = int(prefix[r])
        a = max(u0 - p, 0) - piece_cost
        b = min(u1, int(prefix[r + 1])) - p - piece_cost
        if b > max(a, 0):
            out.append(Piece(r, max(a, 0), b))
        r += 1
    return out


def schedule(ks: np.ndarray, ke: np.ndarray, N: int, block_m: int, blocks: int,
             piece_cost: int = PIECE_COST) -> list[list[Piece]]:
    """Every block's pieces for the windows ks, ke ([M] integers) of an [M, N] problem."""
    prefix = cost_prefix(row_block_spans(ks, ke, N, block_m), piece_cost)
    return [block_pieces(prefix, b, blocks, piece_cost) for b in range(blocks)]


def block_costs(pieces: list[list[Piece]], piece_cost: int = PIECE_COST) -> list[int]:
    """Each block's modelled cost: its tiles plus piece_cost per piece."""
    return [sum(p.t1 - p.t0 + piece_cost for p in ps) for ps in pieces]
