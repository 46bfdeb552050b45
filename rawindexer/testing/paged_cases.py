"""Input generators for fp8_paged_mqa_logits tests and benchmarks (numpy, fresh random data).

One :class:`PagedCase` is a complete call: q, the fused cache, weights, context_lens (1-D or 2-D form),
a block table whose physical blocks are shuffled (and, on request, shared between sequences, as prefix
caching does), a NaN-poisoned output whose rows may be longer than max_context_len, and the per-row
lengths the kernel must honour. Block-table entries past a sequence's last block hold a value far
outside the cache, so a kernel that reads them trips the emulator's memcheck.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fp8 import random_e4m3fn
from .paged_reference import fuse_kv_cache, row_lengths

#: block-table filler past each sequence's blocks: reading it means reading far outside the cache
UNUSED_BLOCK = 0x3FFFFFFF


@dataclass
class PagedCase:
    q: np.ndarray             # [B, next_n, H, D] uint8 fp8 codes
    kv_cache: np.ndarray      # [num_blocks, block_size, 1, D + 4] uint8
    weights: np.ndarray       # [B * next_n, H] float32
    context_lens: np.ndarray  # [B] or [B, next_n] int32
    block_table: np.ndarray   # [B, max_blocks] int32
    max_context_len: int
    out: np.ndarray           # [B * next_n, max_context_len] float32 view of NaN-filled padded rows

    @property
    def next_n(self) -> int:
        return self.q.shape[1]

    @property
    def block_size(self) -> int:
        return self.kv_cache.shape[1]

    def lengths(self) -> np.ndarray:
        """Valid length of each output row [B * next_n]."""
        return row_lengths(self.context_lens, self.next_n, self.max_context_len)

    def poison(self) -> None:
        self.out[...] = np.nan


def ragged_lengths(block_size: int, long: int) -> list[int]:
    """The context lengths every sweep covers: 0, 1, block_size - 1, block_size, block_size + 1, long."""
    return sorted({0, 1, max(block_size - 1, 0), block_size, block_size + 1, long})


def make_case(rng: np.random.Generator, context: list[int], *, next_n: int = 1, heads: int = 32, head_dim: int = 128,
              block_size: int = 64, two_d: bool = False, share_blocks: bool = False, spare_blocks: int = 3,
              extra_columns: int = 40, row_pad: int = 12) -> PagedCase:
    """One call over len(context) sequences whose (final) context lengths are ``context``.

    two_d: context_lens as [B, next_n], entry j drawn in [0, context[b]] with the last = context[b];
        else [B] with row j's length context[b] - next_n + j + 1 (clamped at 0).
    share_blocks: sequence b > 0 maps its first full blocks to sequence 0's physical blocks (prefix
        caching), so two rows of the table point at the same block.
    extra_columns: max_context_len = max(context) + this (the tail the kernel must fill or leave alone).
    row_pad: the output's row stride is max_context_len + row_pad.
    """
    B = len(context)
    blocks_per_seq = [-(-c // block_size) for c in context]
    num_blocks = sum(blocks_per_seq) + spare_blocks
    physical = rng.permutation(num_blocks).astype(np.int32)
    max_blocks = max(max(blocks_per_seq), 1) + 1  # one column past the longest: never read
    block_table = np.full((B, max_blocks), UNUSED_BLOCK, np.int32)
    used = 0
    for b, n in enumerate(blocks_per_seq):
        block_table[b, :n] = physical[used:used + n]
        used += n
    if share_blocks and B > 1:
        for b in range(1, B):
            shared = min(context[0], context[b]) // block_size
            block_table[b, :shared] = block_table[0, :shared]

    keys = random_e4m3fn(rng, (num_blocks, block_size, head_dim))
    scales = rng.uniform(0.25, 2.0, (num_blocks, block_size)).astype(np.float32)
    kv_cache = fuse_kv_cache(keys, scales)
    q = random_e4m3fn(rng, (B, next_n, heads, head_dim))
    weights = rng.standard_normal((B * next_n, heads)).astype(np.float32)
    if two_d:
        lens = np.empty((B, next_n), np.int32)
        for b, c in enumerate(context):
            lens[b] = rng.integers(0, c + 1, next_n)
            lens[b, -1] = c
    else:
        lens = np.asarray(context, np.int32)
    max_context_len = max(context) + extra_columns
    out = np.full((B * next_n, max_context_len + row_pad), np.nan, np.float32)[:, :max_context_len]
    return PagedCase(q, kv_cache, weights, lens, block_table, max_context_len, out)
