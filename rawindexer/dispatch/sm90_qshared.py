"""The schedule of the sm_90a "tmaq" design (kernels/sm90/prefill_tma_qshared.cuh, docs/PERFORMANCE.md v17), modelled
on the host: which row blocks each persistent block takes, and which ring position, stage and phase each consumer's
tiles use. The kernel computes all of it on the device; tests check the model's invariants (every tile of every row
block once, each ring position read by one consumer at the stage and phase the consumer's stepping gives) and the
snake order's balance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sm90_balanced import row_block_spans

#: kernels/sm90/prefill_tma.cuh: TMA_TILE, TMA_NC; prefill_tma_qshared.cuh: TMAQ_STAGES
TILE = 64
STAGES = 16
CONSUMERS = 4


def row_block_order(block: int, blocks: int, row_blocks: int) -> list[int]:
    """Row blocks of persistent block ``block`` of ``blocks``, in the order it runs them (tmaq_row_block: i G + b for
    even i, i G + G - 1 - b for odd i, until past the last row block)."""
    order, i = [], 0
    while True:
        rb = i * blocks + (blocks - 1 - block if i & 1 else block)
        if rb >= row_blocks:
            return order
        order.append(rb)
        i += 1


@dataclass(frozen=True)
class ConsumerTile:
    row_block: int
    tile: int        # tile index within the row block's span
    consumer: int    # position % CONSUMERS: consumer c reads ring stages c, c + CONSUMERS, ... only
    position: int    # the block's ring position (tiles streamed before it)
    stage: int       # the consumer's stage and phase when it reads the tile (release_stage<CONSUMERS> stepping)
    phase: int


def schedule(ks: np.ndarray, ke: np.ndarray, N: int, block_m: int, blocks: int) -> list[list[ConsumerTile]]:
    """Per persistent block, the tiles its consumers read, as the kernel walks them."""
    spans = row_block_spans(ks, ke, N, block_m)  # the union a row block's tiles cover, as the kernel clips it
    out = []
    for b in range(blocks):
        tiles, g = [], 0
        for rb in row_block_order(b, blocks, len(spans)):
            lo, hi = (int(v) for v in spans[rb])
            n_t = -(-(hi - lo) // TILE)
            for c in range(CONSUMERS):
                j0 = (c - g) % CONSUMERS  # the consumer of ring position p is p % CONSUMERS
                first = g + j0
                stage, phase = first % STAGES, (first // STAGES) & 1
                for t in range(j0, n_t, CONSUMERS):
                    tiles.append(ConsumerTile(rb, t, c, g + t, stage, phase))
                    stage += CONSUMERS
                    if stage >= STAGES:
                        stage -= STAGES
                        phase ^= 1
            g += n_t
        out.append(tiles)
    return out


def block_costs(sched: list[list[ConsumerTile]]) -> list[int]:
    """Each block's time in tiles: its busiest consumer's tile count (the consumers run ahead of each other by up to
    a row block: the Q buffers, not the tiles, couple them)."""
    costs = []
    for tiles in sched:
        per_consumer = [0] * CONSUMERS
        for t in tiles:
            per_consumer[t.consumer] += 1
        costs.append(max(per_consumer))
    return costs
