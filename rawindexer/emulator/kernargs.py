"""Pack a kernarg segment from the code object's own argument metadata (code object v5/v6).

For running kernels we did not write (e.g. Triton output) without hand-computing offsets: explicit
arguments come from ``values`` in order; hidden arguments the kernel declares (block counts, group
sizes, remainders, grid dims) are filled from ``grid`` and ``block``; other hidden ones are zero.
"""
from __future__ import annotations

import struct
from typing import Any, Sequence

import numpy as np

from ..codeobject import KernelInfo


def pointer_of(value: Any) -> int:
    """Device address of an array-like (numpy, torch CPU, anything with __array_interface__), or int."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    if hasattr(value, "data_ptr"):
        return int(value.data_ptr())
    if hasattr(value, "__array_interface__"):
        return int(value.__array_interface__["data"][0])
    raise TypeError(f"cannot take the address of {type(value).__name__}")


def pack_kernargs(info: KernelInfo, values: Sequence[Any], grid: Sequence[int], block: Sequence[int]) -> bytes:
    """Kernarg bytes for ``info`` (from ``CodeObject.kernels[name]``)."""
    args = info.args
    size = max(info.metadata.get(".kernarg_segment_size", 0), info.descriptor.kernarg_size)
    buf = bytearray(size)
    grid = (tuple(grid) + (1, 1))[:3]
    block = (tuple(block) + (1, 1))[:3]
    explicit = [a for a in args if not a.get(".value_kind", "").startswith("hidden_")]
    if len(values) != len(explicit):
        raise ValueError(f"{info.name} takes {len(explicit)} explicit arguments, got {len(values)}")
    for a, v in zip(explicit, values):
        off, n, kind = a[".offset"], a[".size"], a.get(".value_kind", "by_value")
        if kind in ("global_buffer", "dynamic_shared_pointer") or (n == 8 and not isinstance(v, float)
                                                                    and not isinstance(v, (int, np.integer))):
            struct.pack_into("<Q", buf, off, pointer_of(v))
        elif isinstance(v, (float, np.floating)):
            struct.pack_into("<f" if n == 4 else "<d", buf, off, float(v))
        else:
            iv = int(v) & ((1 << (8 * n)) - 1)
            buf[off:off + n] = iv.to_bytes(n, "little")
    hidden = {
        "hidden_block_count_x": (grid[0], 4), "hidden_block_count_y": (grid[1], 4),
        "hidden_block_count_z": (grid[2], 4), "hidden_group_size_x": (block[0], 2),
        "hidden_group_size_y": (block[1], 2), "hidden_group_size_z": (block[2], 2),
        "hidden_remainder_x": (0, 2), "hidden_remainder_y": (0, 2), "hidden_remainder_z": (0, 2),
        "hidden_grid_dims": (sum(1 for g, b in zip(grid, block) if g * b > 1) or 1, 2),
    }
    for a in args:
        kind = a.get(".value_kind", "")
        if kind in hidden:
            val, n = hidden[kind]
            buf[a[".offset"]:a[".offset"] + n] = int(val).to_bytes(n, "little")
    return bytes(buf)
