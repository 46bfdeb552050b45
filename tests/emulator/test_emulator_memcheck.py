"""memcheck: accesses outside the registered spans and stores into read-only spans raise, naming lane and address."""
import numpy as np
import pytest

from rawindexer.backends.base import BufferSpan
from rawindexer.backends.emulator import EmulatorBackend
from rawindexer.emulator import MemoryFault, pack_kernargs

from emulator_kernels.harness import compiled, launch


def test_out_of_bounds_store_names_lane_and_address():
    out = np.zeros(64, np.int32)
    with pytest.raises(MemoryFault) as err:
        launch("mem", "store_at", (1, 1, 1), (64, 1, 1), [out, 16], writable=[out])
    e = err.value
    assert e.lane == 48 and e.address == out.ctypes.data + 4 * 64
    assert "lane 48" in str(e) and f"0x{e.address:x}" in str(e) and "global_store_dword" in str(e)
    assert (out == 0).all()  # nothing was written: the check happens before the store


def test_in_bounds_store_passes():
    out = np.zeros(64, np.int32)
    launch("mem", "store_at", (1, 1, 1), (64, 1, 1), [out, 0], writable=[out])
    assert out.tolist() == list(range(64))


def test_store_into_read_only_span_raises():
    out = np.zeros(64, np.int32)
    with pytest.raises(MemoryFault, match="read-only"):
        launch("mem", "store_at", (1, 1, 1), (64, 1, 1), [out, 0], readonly=[out])


def test_unregistered_load_raises():
    inp = np.zeros(4096, np.uint8)
    out = np.zeros(4096, np.uint8)
    with pytest.raises(MemoryFault, match="outside every registered span"):
        launch("mem", "global_widths", (1, 1, 1), (64, 1, 1), [inp, out], writable=[out])


def test_backend_registers_only_listed_buffers_and_allocations():
    be = EmulatorBackend()
    mod = be.load_module(compiled("mem")[0])
    fn = be.get_function(mod, "store_at")
    info = mod.code.kernels["store_at"]
    alloc = be.alloc(64 * 4)
    args = pack_kernargs(info, [alloc.ptr, 0], (1, 1, 1), (64, 1, 1))
    be.launch(fn, (1, 1, 1), (64, 1, 1), args)  # alloc'd memory is always accessible
    be.synchronize()
    assert be.host_array(alloc).view(np.int32).tolist() == list(range(64))
    assert be.last_stats.per_opcode["global_store_dword"] == 1
    out = np.zeros(64, np.int32)
    args = pack_kernargs(info, [out, 0], (1, 1, 1), (64, 1, 1))
    with pytest.raises(MemoryFault):
        be.launch(fn, (1, 1, 1), (64, 1, 1), args)  # not listed in buffers
    be.launch(fn, (1, 1, 1), (64, 1, 1), args, buffers=[BufferSpan(out.ctypes.data, out.nbytes, True)])
    assert out.tolist() == list(range(64))
    alloc.free()
    assert be.compute_units() == 256 and be.name == "emulator" and be.dlpack_device_type == 1 and be.arch == "gfx950"
