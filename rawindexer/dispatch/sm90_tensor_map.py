"""The TMA tensor map of the keys for the sm_90a designs that read them through the bulk tensor copy engine: prefill's
"tmas", "tma" (kernels/sm90/prefill_tma.cuh, docs/PERFORMANCE.md v8; K as uint8 [N, D]) and decode's "tma"
(kernels/sm90/paged_tma.cuh, docs/PAGED.md; the fused paged cache, uint8 [num_blocks, block_size * (D + 4)]).
One mechanism for both: a map keyed by (key pointer, N or num_blocks, D, block_size), block_size 0 meaning prefill's
2-D map of K rows.

Those kernels take the common argument list plus one ``const __grid_constant__`` CUtensorMap of K (128 opaque
bytes; the cubin gives its slot, ``k_map``: offset 112 at sm_90a, where the parameter bank address is 64-byte
aligned). The map holds K's address, so a plan's kernargs are only right for the K pointer they were encoded for:

* :func:`pack_tensor_map_kernargs` packs a plan's kernargs with the map of ``pointers.k`` written into its slot and
  records the slot in ``config["k_tensor_map"]``;
* :class:`PerKPointerLaunch` is the prepared launch of such a template: one backend-bound launch per distinct K
  pointer (the map re-encoded only when the K pointer changes; a serving loop over one K buffer encodes once).

"tmas" and "tmaq" (kernels/sm90/prefill_tma.cuh, prefill_tma_qshared.cuh; v19) take a second map, of Q viewed as
[M * H, D] rows with a box of 128 rows (one consumer's Q, or one "tmaq" row block), in their ``q_map`` slot:
:func:`encode_q` / :func:`pack_q_map_kernargs`, recorded in ``config["q_tensor_map"]``; their prepared launch is
bound per distinct (K, Q) pointer pair.

Encoding is ``cuTensorMapEncodeTiled`` (driver API, host-only, no device work) through cuda-bindings, cached by
(pointer, rows, D, block_size, box rows); :data:`encoder` can be replaced (tests use a fake driver without it); it is
called ``encoder(k_ptr, n, head_dim)`` for prefill's K map, ``encoder(k_ptr, num_blocks, head_dim, block_size)`` for
the paged cache's and ``encoder(q_ptr, M * H, head_dim, 0, 128)`` for Q's.
"""
from __future__ import annotations

import struct
import threading
from functools import lru_cache
from typing import Any, Callable

#: kernels/sm90/prefill_tma.cuh: TMA_STAGES, TMA_TILE, TMA_SMEM_ALIGN
TMA_STAGES = 8
TMA_TILE = 64
TMA_SMEM_ALIGN = 1024
#: the kernel argument that holds the map, and its size
K_MAP_ARG = "k_map"
K_MAP_BYTES = 128
#: K's index in a call's pointer tuple (Pointers order: q, k, kv_scale, weights, ks, ke, out; the paged op's
#: PagedPointers order q, kv_cache, weights, context_lens, block_table, out has the cache at the same index)
K_POINTER_INDEX = 1
#: and Q's (prefill's Pointers)
Q_POINTER_INDEX = 0
#: bytes of a token's float32 scale after its key bytes in the paged cache (paged_kernels.SCALE_BYTES)
PAGED_SCALE_BYTES = 4
#: distinct K pointers one prepared launch keeps bound before it starts over
MAX_BOUND_K_POINTERS = 64


def shared_mem(block_m: int, heads: int, head_dim: int, consumers: int, q_map: bool = False) -> int:
    """Dynamic shared memory of one block: Q, the K ring, weights, windows, mbarriers (with ``q_map``: one more,
    "Q full" of Q's TMA boxes, v19) and the alignment slack (the kernel aligns its buffers to TMA_SMEM_ALIGN
    itself)."""
    nq = block_m // consumers * heads
    return (consumers * nq * head_dim + TMA_STAGES * TMA_TILE * head_dim + consumers * nq * 4 + block_m * 8
            + (2 * TMA_STAGES + q_map) * 8 + TMA_SMEM_ALIGN)


#: "tmaq" (kernels/sm90/prefill_tma_qshared.cuh): Q / weights / windows buffers (two mbarriers each), K ring depth
TMAQ_QBUF = 2
TMAQ_STAGES = 16


def q_shared_mem(block_m: int, heads: int, head_dim: int) -> int:
    """Dynamic shared memory of one "tmaq" block: TMAQ_QBUF copies of one row block's Q (block_m * heads columns),
    weights and windows, the K ring, the ring's and the Q buffers' mbarriers, and the alignment slack."""
    nq = block_m * heads
    return (TMAQ_QBUF * (nq * head_dim + nq * 4 + block_m * 8) + TMAQ_STAGES * TMA_TILE * head_dim
            + (2 * TMAQ_STAGES + 2 * TMAQ_QBUF) * 8 + TMA_SMEM_ALIGN)


def map_geometry(n: int, head_dim: int, block_size: int = 0,
                 box_rows: int = TMA_TILE) -> tuple[list[int], list[int], list[int]]:
    """(dims, byte strides of dims 1.., box) of the uint8 map, innermost first. block_size 0: n rows of head_dim
    bytes (prefill's K [n, D], or Q as [M * H, D]), box {D, box_rows}. block_size > 0: the paged cache of ``n``
    blocks of ``block_size * (D + 4)`` bytes, its key bytes [block_size, D] first: dims {D, block_size, n}, strides {D, block_size * (D + 4)}, box {D, block_size, 1}
    (one whole block; block_size must be TMA_TILE = the kernel's tile)."""
    if not block_size:
        return [head_dim, n], [head_dim], [head_dim, box_rows]
    if block_size != TMA_TILE:
        raise ValueError(f"block_size: the paged TMA map takes whole {TMA_TILE}-token blocks, got {block_size}")
    return ([head_dim, block_size, n], [head_dim, block_size * (head_dim + PAGED_SCALE_BYTES)],
            [head_dim, block_size, 1])


@lru_cache(maxsize=256)
def encode_with_cuda_bindings(k_ptr: int, n: int, head_dim: int, block_size: int = 0,
                              box_rows: int = TMA_TILE) -> bytes:
    """The 128 bytes of a CUtensorMap over the keys (:func:`map_geometry`), 128-byte swizzle at head_dim 128
    (64-byte at 64), zeros outside the tensor, L2 promotion 256 B."""
    import ctypes

    from cuda.bindings import driver as cu

    swizzle = {128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
               64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B}[head_dim]
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    dims, strides, box = map_geometry(n, head_dim, block_size, box_rows)
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8, len(dims), k_ptr, [u64(d) for d in dims],
        [u64(s) for s in strides], [u32(b) for b in box], [u32(1)] * len(dims),
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle, cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled(k=0x{k_ptr:x}, n={n}, head_dim={head_dim}, "
                           f"block_size={block_size}) failed: {err}")
    return ctypes.string_at(tmap.getPtr(), K_MAP_BYTES)


#: (k_ptr, n, head_dim[, block_size]) -> the map's 128 bytes; replaceable (tests)
encoder: Callable[..., bytes] = encode_with_cuda_bindings


def k_map_slot(args: list[dict], name: str = K_MAP_ARG) -> dict | None:
    """The manifest's tensor-map argument ``name`` of a kernel (prefill: ``k_map``, decode: ``kv_map``), None for
    kernels without one."""
    return next((a for a in args if a["name"] == name), None)


def encode(k_ptr: int, n: int, head_dim: int, block_size: int = 0) -> bytes:
    if k_ptr % 16 or head_dim not in (64, 128):
        raise ValueError(f"k: the TMA designs need K 16-byte aligned and head_dim 64 or 128, got "
                         f"k % 16 = {k_ptr % 16}, head_dim = {head_dim}")
    data = encoder(k_ptr, n, head_dim, block_size) if block_size else encoder(k_ptr, n, head_dim)
    if len(data) != K_MAP_BYTES:
        raise RuntimeError(f"tensor map encoder returned {len(data)} bytes, expected {K_MAP_BYTES}")
    return data


#: "tmas" / "tmaq" (v19): Q's map argument, and its box (128 rows of Q as [M * H, D]: one consumer's wgmma N)
Q_MAP_ARG = "q_map"
Q_MAP_BOX_ROWS = 128


def encode_q(q_ptr: int, rows: int, head_dim: int) -> bytes:
    """The map of Q viewed as ``rows`` = M * H rows of head_dim bytes, box Q_MAP_BOX_ROWS rows."""
    if q_ptr % 16 or head_dim not in (64, 128):
        raise ValueError(f"q: the Q tensor map needs Q 16-byte aligned and head_dim 64 or 128, got "
                         f"q % 16 = {q_ptr % 16}, head_dim = {head_dim}")
    data = encoder(q_ptr, rows, head_dim, 0, Q_MAP_BOX_ROWS)
    if len(data) != K_MAP_BYTES:
        raise RuntimeError(f"tensor map encoder returned {len(data)} bytes, expected {K_MAP_BYTES}")
    return data


def pack_q_map_kernargs(kernargs: bytes, q_map: dict, q_ptr: int) -> bytes:
    """``kernargs`` with the map of Q at ``q_ptr`` written into ``q_map["slot"]`` (q_map: {slot, rows, head_dim},
    the plan's ``config["q_tensor_map"]``)."""
    slot = q_map["slot"]
    if slot["size"] != K_MAP_BYTES or slot["offset"] + K_MAP_BYTES > len(kernargs):
        raise RuntimeError(f"q_map slot {slot} does not fit a {K_MAP_BYTES}-byte map in {len(kernargs)} bytes")
    buf = bytearray(kernargs)
    buf[slot["offset"]:slot["offset"] + K_MAP_BYTES] = encode_q(q_ptr, q_map["rows"], q_map["head_dim"])
    return bytes(buf)


def pack_tensor_map_kernargs(kernargs: bytes, slot: dict, k_ptr: int, n: int, head_dim: int,
                             block_size: int = 0) -> bytes:
    """``kernargs`` (packed without the map) with the map of the keys at ``k_ptr`` written into ``slot``."""
    if slot["size"] != K_MAP_BYTES or slot["offset"] + K_MAP_BYTES > len(kernargs):
        raise RuntimeError(f"k_map slot {slot} does not fit a {K_MAP_BYTES}-byte map in {len(kernargs)} bytes")
    buf = bytearray(kernargs)
    buf[slot["offset"]:slot["offset"] + K_MAP_BYTES] = encode(k_ptr, n, head_dim, block_size)
    return bytes(buf)


class PerKPointerLaunch:
    """The prepared launch ``go(stream, *pointers)`` of a template whose kernargs hold K's tensor map: one launch
    bound by ``bind(kernargs)`` per distinct K pointer, each with the map of that pointer in its kernargs. With
    ``q_map`` ({slot, rows, head_dim}: "tmas", "tmaq") the kernargs hold Q's map too, and a launch is bound per distinct
    (K, Q) pointer pair."""

    __slots__ = ("_bind", "_kernargs", "_slot", "_n", "_head_dim", "_block_size", "_q_map", "_bound", "_lock")

    def __init__(self, bind: Callable[[bytes], Callable[..., None]], kernargs: bytes, slot: dict, n: int,
                 head_dim: int, block_size: int = 0, q_map: dict | None = None) -> None:
        self._bind, self._kernargs, self._slot = bind, kernargs, slot
        self._n, self._head_dim, self._block_size = n, head_dim, block_size
        self._q_map = q_map
        self._bound: dict[Any, Callable[..., None]] = {}
        self._lock = threading.Lock()

    def __call__(self, stream: Any, *pointers: int) -> None:
        k_ptr = pointers[K_POINTER_INDEX]
        key = k_ptr if self._q_map is None else (k_ptr, pointers[Q_POINTER_INDEX])
        go = self._bound.get(key)
        if go is None:
            go = self._bind(self._kernargs_for(pointers))
            with self._lock:
                if len(self._bound) >= MAX_BOUND_K_POINTERS:
                    self._bound.clear()
                self._bound[key] = go
        go(stream, *pointers)

    def _kernargs_for(self, pointers: tuple) -> bytes:
        kernargs = pack_tensor_map_kernargs(self._kernargs, self._slot, _address("k", pointers[K_POINTER_INDEX]),
                                            self._n, self._head_dim, self._block_size)
        if self._q_map is None:
            return kernargs
        return pack_q_map_kernargs(kernargs, self._q_map, _address("q", pointers[Q_POINTER_INDEX]))


def _address(name: str, value: Any) -> int:
    """A pointer argument of a launch, which must be an int (the bound launch packs it as one)."""
    if not isinstance(value, int):
        raise struct.error(f"{name}: expected an int address, got {type(value).__name__}")
    return value
