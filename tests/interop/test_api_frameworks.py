"""The public API end to end through the emulator with each framework's CPU arrays: results come back in
the caller's framework, `out=` is written in place (pointer identity), fp8 arrives as the framework's
float8_e4m3fn dtype or as uint8 bytes."""
import numpy as np
import pytest

import rawindexer
from rawindexer.testing.inputs import check_logits as check
from rawindexer.testing.inputs import random_inputs
from rawindexer.testing.windows import make_windows

M, N, H, D = 11, 90, 32, 128


def host_inputs(rng):
    return random_inputs(rng, M, N, H, D, *make_windows("multi_req", M, N, rng))


def test_numpy_in_numpy_out(rng):
    host = host_inputs(rng)
    out = rawindexer.fp8_mqa_logits(**host)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (M, N)
    check(host, out)


@pytest.mark.parametrize("fp8_as", ["float8_e4m3fn", "uint8"])
def test_torch_cpu_tensors(rng, fp8_as):
    torch = pytest.importorskip("torch")
    host = host_inputs(rng)
    t = {k: torch.from_numpy(v) for k, v in host.items()}
    if fp8_as == "float8_e4m3fn":
        t["q_fp8"] = t["q_fp8"].view(torch.float8_e4m3fn)
        t["k_fp8"] = t["k_fp8"].view(torch.float8_e4m3fn)
    result = rawindexer.fp8_mqa_logits(**t)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
    check(host, result.numpy())
    out = torch.full((M, N + 7), float("nan"))[:, :N]  # padded rows, written in place
    same = rawindexer.fp8_mqa_logits(**t, out=out, clean_logits=False)
    assert same is out and same.data_ptr() == out.data_ptr()
    check(host, out.numpy(), clean=False)


def test_jax_cpu_arrays(rng):
    jnp = pytest.importorskip("jax.numpy")
    host = host_inputs(rng)
    j = {k: jnp.asarray(v) for k, v in host.items()}
    j["q_fp8"] = j["q_fp8"].view(jnp.float8_e4m3fn)
    j["k_fp8"] = j["k_fp8"].view(jnp.float8_e4m3fn)
    result = rawindexer.fp8_mqa_logits(**j)
    assert type(result).__module__.split(".")[0] in ("jax", "jaxlib")
    check(host, np.asarray(result))


def test_inputs_are_read_in_place(rng):
    # Zero-copy in: the emulator's memcheck only admits the callers' own buffers, so a launch that read
    # a copy would fault; and writing through `out` changes the caller's array.
    torch = pytest.importorskip("torch")
    host = host_inputs(rng)
    out = np.full((M, N), np.nan, np.float32)
    rawindexer.fp8_mqa_logits(**{k: torch.from_numpy(v) for k, v in host.items()}, out=torch.from_numpy(out))
    check(host, out)


def test_mixed_devices_and_frameworks_are_rejected_or_accepted(rng):
    torch = pytest.importorskip("torch")
    host = host_inputs(rng)
    mixed = dict(host, weights=torch.from_numpy(host["weights"]))  # same device (CPU): fine
    check(host, rawindexer.fp8_mqa_logits(**mixed))
