"""Host-side API without executing a kernel: validation errors, the heuristic, kernarg packing, and the
hip backend's call sequence against a fake of hip-python's `hip` module."""
import ctypes
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import rawindexer
from rawindexer import dlpack
from rawindexer.backends.hip import HipBackend
from rawindexer.dispatch import family_for
from rawindexer.dispatch.base import Pointers, Problem, Tunables, pack_kernargs
from rawindexer.fp8 import random_e4m3fn
from rawindexer.validation import ValidationError, validate


def operands(rng, M=8, N=40, H=32, D=128):
    return {
        "q_fp8": random_e4m3fn(rng, (M, H, D)),
        "k_fp8": random_e4m3fn(rng, (N, D)),
        "kv_scale": rng.uniform(0, 1, N).astype(np.float32),
        "weights": rng.standard_normal((M, H)).astype(np.float32),
        "cu_seqlen_ks": np.zeros(M, np.int32),
        "cu_seqlen_ke": np.arange(M, dtype=np.int32) + N - M,
    }


def views(ops, out=None):
    v = [dlpack.from_dlpack(a, name=n) for n, a in ops.items()]
    return v + [dlpack.from_dlpack(out, name="out") if out is not None else None]


def test_valid_operands_pass_and_give_the_dims(rng):
    ops = operands(rng)
    d = validate(*views(ops, np.empty((8, 48), np.float32)[:, :40]))
    assert (d.M, d.N, d.heads, d.head_dim) == (8, 40, 32, 128)


@pytest.mark.parametrize("name,bad,message", [
    ("q_fp8", lambda o: o["q_fp8"].astype(np.float32), "q_fp8: expected float8_e4m3fn or float8_e4m3fnuz or uint8"),
    ("q_fp8", lambda o: o["q_fp8"][:, :, 0], "q_fp8: expected a 3-d"),
    ("q_fp8", lambda o: o["q_fp8"][:, ::2], "q_fp8: expected a contiguous"),
    ("k_fp8", lambda o: o["k_fp8"][:, :64], "k_fp8: expected shape (40, 128)"),
    ("k_fp8", lambda o: o["k_fp8"].view(np.int8), "k_fp8: expected float8_e4m3fn or float8_e4m3fnuz or uint8"),
    ("kv_scale", lambda o: o["kv_scale"].astype(np.float64), "kv_scale: expected float32"),
    ("kv_scale", lambda o: o["kv_scale"][:-1], "kv_scale: expected shape (40,)"),
    ("weights", lambda o: np.asfortranarray(o["weights"]), "weights: expected a contiguous"),
    ("weights", lambda o: o["weights"][:, :16], "weights: expected shape (8, 32)"),
    ("cu_seqlen_ks", lambda o: o["cu_seqlen_ks"].astype(np.int64), "cu_seqlen_ks: expected int32"),
    ("cu_seqlen_ke", lambda o: o["cu_seqlen_ke"][:4], "cu_seqlen_ke: expected shape (8,)"),
])
def test_each_bad_operand_is_named(rng, name, bad, message):
    ops = operands(rng)
    ops[name] = bad(ops)
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(*views(ops))


@pytest.mark.parametrize("out,message", [
    (lambda: np.empty((8, 41), np.float32), r"out: expected shape \(8, 40\)"),
    (lambda: np.empty((8, 40), np.float64), "out: expected float32"),
    (lambda: np.empty((8, 80), np.float32)[:, ::2], "out: expected row stride >= N=40 and column stride 1"),
    (lambda: np.empty((8, 40), np.float32)[::-1], "out: expected row stride >= N=40 and column stride 1"),
])
def test_bad_out_is_named(rng, out, message):
    with pytest.raises(ValidationError, match=message):
        validate(*views(operands(rng), out()))


def test_read_only_out_is_rejected(rng):
    out = np.empty((8, 40), np.float32)
    out.setflags(write=False)
    with pytest.raises((ValidationError, dlpack.DLPackError), match="out"):
        validate(*views(operands(rng), out))


def test_non_array_input_is_named(rng):
    ops = operands(rng)
    ops["weights"] = [[1.0] * 32] * 8
    with pytest.raises(dlpack.DLPackError, match="weights"):
        rawindexer.fp8_mqa_logits(**ops)


def test_is_supported_gates_on_built_shapes():
    for h in (32, 64, 128):
        for d in (64, 128):
            assert rawindexer.is_supported(h, d)
    assert not rawindexer.is_supported(16, 128) and not rawindexer.is_supported(32, 96)


def test_heuristic_follows_the_seed():
    fam = family_for("gfx950")
    pick = lambda M, N, H=32, D=128, **t: fam.choose(Problem(M, N, H, D, N, True), Tunables(**t), 256)
    assert pick(4096, 32768)["block_m"] == 4  # the seed's BLOCK_M at H=32, D=128
    assert pick(4096, 32768)["reverse_rows"] and not pick(1024, 1024)["reverse_rows"]
    assert pick(128, 32768)["split_n"] > 1  # small M, long N: SplitN fills the device
    assert pick(8192, 8192)["split_n"] == 1  # the row grid already fills it
    assert pick(64, 100)["num_warps"] == 1 and pick(4096, 32768)["num_warps"] == 4
    assert pick(4096, 32768, block_m=2, split_n=3, num_warps=5, unroll2=True, reverse_rows=False) == {
        "block_m": 2, "num_warps": 5, "split_n": 3, "unroll2": True, "reverse_rows": False}


@pytest.mark.parametrize("tunables,message", [
    (dict(block_m=5), "block_m: expected 0 .* one of"), (dict(num_warps=9), "num_warps"),
    (dict(split_n=-1), "split_n"), (dict(unroll2=True, variant="mrp"), "unroll2: expected None or False"),
    (dict(variant="fast"), "variant: expected None or one of"),
])
def test_bad_tunables_are_named(tunables, message):
    fam = family_for("gfx950")
    with pytest.raises(ValueError, match=message):
        fam.plan(Problem(64, 64, 32, 128, 64, True), Tunables(**tunables), Pointers(*range(1, 8)), 256)
    with pytest.raises(ValueError, match=r"\(num_heads, head_dim\)"):
        fam.plan(Problem(64, 64, 48, 128, 64, True), Tunables(), Pointers(*range(1, 8)), 256)


def test_pack_kernargs_follows_the_layout():
    layout = [{"name": "p", "offset": 0, "size": 8}, {"name": "s", "offset": 8, "size": 8},
              {"name": "n", "offset": 16, "size": 4}]
    raw = pack_kernargs(layout, {"p": 2**63 + 5, "s": -3, "n": 7}, 24)
    assert struct.unpack("<Qqi4x", raw) == (2**63 + 5, -3, 7)
    with pytest.raises(KeyError, match="'n'"):
        pack_kernargs(layout, {"p": 1, "s": 2}, 24)


class FakeHip:
    """Just enough of hip-python's `hip` module: returns (hipError_t, value) tuples and records calls."""

    def __init__(self):
        self.calls = []
        self.hipError_t = SimpleNamespace(hipSuccess=0)
        self.hipDeviceAttribute_t = SimpleNamespace(hipDeviceAttributeMultiprocessorCount=63)
        self.hipMemcpyKind = SimpleNamespace(hipMemcpyHostToDevice=1, hipMemcpyDeviceToHost=2)
        self.launched = None
        self.current = 0

    def _ok(self, name, *args, value=None):
        self.calls.append((name, args))
        return (0, value) if value is not None else (0,)

    def hipGetErrorString(self, err):
        return f"error {err}"

    def hipSetDevice(self, d):
        self.current = d
        return self._ok("hipSetDevice", d)

    def hipGetDevice(self):
        return self._ok("hipGetDevice", value=self.current) if self.current else (self.calls.append(("hipGetDevice", ())) or (0, 0))

    def hipModuleLoadData(self, image):
        return self._ok("hipModuleLoadData", len(image), value="module")

    def hipModuleGetFunction(self, module, name):
        return self._ok("hipModuleGetFunction", module, name, value=("function", name))

    def hipDeviceGetAttribute(self, attr, dev):
        return self._ok("hipDeviceGetAttribute", attr, dev, value=256)

    def hipDeviceProp_t(self):
        return SimpleNamespace(gcnArchName=b"gfx950:sramecc+:xnack-\0")

    def hipGetDeviceProperties(self, props, dev):
        return self._ok("hipGetDeviceProperties", dev)

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        # Read the packed kernargs through the `extra` array, as the HIP runtime would, during the call.
        words = (ctypes.c_void_p * 5).from_address(extra)
        assert (words[0], words[2], words[4]) == (1, 2, 3)
        size = ctypes.c_size_t.from_address(words[3]).value
        self.launched = ctypes.string_at(words[1], size)
        return self._ok("hipModuleLaunchKernel", f, (gx, gy, gz), (bx, by, bz), shared, stream, params)

    def hipModuleLaunchKernel_failing(self, *a):
        return (700,)


def test_hip_backend_call_sequence_and_kernargs(monkeypatch):
    import rawindexer.api as api
    fake = FakeHip()
    backend = HipBackend(fake)
    monkeypatch.setattr(api, "get_backend", lambda name: backend)
    api._RAW.clear()
    M, N = 100, 5000
    template = rawindexer.launch(0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, M=M, N=N, num_heads=64,
                             head_dim=128, out_row_stride=5120, stream=0xABC, device="hip", device_id=0)
    plan = template.plan((0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000))
    names = [c[0] for c in fake.calls]
    # device 0 is current already: hipGetDevice says so and nothing is set
    assert names == ["hipGetDeviceProperties", "hipDeviceGetAttribute", "hipGetDevice", "hipModuleLoadData",
                     "hipModuleGetFunction", "hipGetDevice", "hipModuleLaunchKernel"]
    launch = fake.calls[-1][1]
    assert launch[0] == ("function", plan.symbol.encode())
    assert launch[1] == plan.grid and launch[2] == plan.block and launch[4] == 0xABC and launch[5] is None
    assert fake.launched == plan.kernargs
    entry = family_for("gfx950").target["kernels"][plan.symbol]
    fields = {a["name"]: int.from_bytes(plan.kernargs[a["offset"]:a["offset"] + a["size"]], "little", signed=True)
              for a in entry["args"]}
    assert fields["q"] == 0x1000 and fields["out"] == 0x7000 and fields["out_row_stride"] == 5120
    assert (fields["M"], fields["N"]) == (M, N)
    assert fields["split_n"] == plan.grid[1] and fields["num_warps"] * 64 == plan.block[0]
    assert fields["flags"] & 1 and bool(fields["flags"] & 2) == plan.config["reverse_rows"]
    # A second launch reuses the loaded module and function.
    rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=M, N=N, num_heads=64, head_dim=128, device="hip")
    assert [c[0] for c in fake.calls].count("hipModuleLoadData") == 1
    # Device 1's pointers: hipSetDevice(1) for the load and the launch, device 0 restored after each.
    n = len(fake.calls)
    rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=M, N=N, num_heads=64, head_dim=128, device="hip", device_id=1)
    assert [c for c in fake.calls[n:] if c[0] in ("hipSetDevice", "hipModuleLoadData", "hipModuleLaunchKernel")] \
        == [("hipSetDevice", (1,)), ("hipModuleLoadData", fake.calls[n + 4][1]), ("hipSetDevice", (0,)),
            ("hipSetDevice", (1,)), fake.calls[-2], ("hipSetDevice", (0,))]
    assert fake.current == 0
    # Errors carry HIP's message.
    fake.hipModuleLaunchKernel = fake.hipModuleLaunchKernel_failing
    with pytest.raises(RuntimeError, match="hipModuleLaunchKernel failed: 'error 700'"):
        rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=M, N=N, num_heads=64, head_dim=128, device="hip")
    api._RAW.clear()


def test_raw_launch_rejects_bad_geometry():
    with pytest.raises(ValueError, match="out_row_stride: expected >= N=64"):
        rawindexer.launch(1, 2, 3, 4, 5, 6, 7, M=4, N=64, num_heads=32, head_dim=128, out_row_stride=32,
                          device="hip")


def test_mixed_devices_are_rejected(rng):
    ops = operands(rng)
    fake_gpu = dlpack.DLPackArray(ops["weights"].ctypes.data, ops["weights"].shape, "float32", (dlpack.DL_CUDA, 0),
                                  owner=ops["weights"])
    v = views(ops)
    v[3] = dlpack.from_dlpack(fake_gpu, name="weights", stream=1)
    with pytest.raises(ValidationError, match=r"weights: expected every array on q_fp8's device \(1, 0\), "
                                              r"got weights on \(2, 0\) \(mixed devices\)"):
        validate(*v)


def test_hip_order_after_uses_an_event():
    fake = FakeHip()
    fake.hipEventDisableTiming = 2
    fake.hipEventCreateWithFlags = lambda flags: fake._ok("hipEventCreateWithFlags", flags, value="event")
    fake.hipEventRecord = lambda e, s: fake._ok("hipEventRecord", e, s)
    fake.hipStreamWaitEvent = lambda s, e, f: fake._ok("hipStreamWaitEvent", s, e, f)
    fake.hipEventDestroy = lambda e: fake._ok("hipEventDestroy", e)
    HipBackend(fake).order_after(0x55, 0x66)
    assert fake.calls == [("hipEventCreateWithFlags", (2,)), ("hipEventRecord", ("event", 0x66)),
                          ("hipStreamWaitEvent", (0x55, "event", 0)), ("hipEventDestroy", ("event",))]
