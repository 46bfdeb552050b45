"""The sm_90a decode default ("auto") runs the "tma" design at block size 64, whose plan encodes the cache's
CUtensorMap on the host (cuTensorMapEncodeTiled, which needs a CUDA driver): on the CPU a fake encoder stands in,
128 bytes naming its inputs. Test modules import the autouse fixture (tests that check the map install their own)."""
from __future__ import annotations

import pytest

from rawindexer.dispatch import sm90_tensor_map


@pytest.fixture(autouse=True)
def fake_tensor_map_encoder():
    """Its own MonkeyPatch: a test's ``monkeypatch.undo()`` leaves it in place."""
    def encode(ptr: int, n: int, head_dim: int, block_size: int = 0) -> bytes:
        return b"".join(v.to_bytes(8, "little") for v in (ptr, n, head_dim, block_size)) + bytes(96)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sm90_tensor_map, "encoder", encode)
        yield
