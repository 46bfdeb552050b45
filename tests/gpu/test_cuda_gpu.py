"""Correctness of the sm_90a kernel on a real Hopper GPU (marked ``gpu``: never runs in CI).

The seed's sweep: shapes x heads {32, 64, 128} x head_dim {64, 128} x clean_logits {0, 1} x the six window
modes of rawindexer.testing.windows, through the public API on torch CUDA tensors. Graded on the GPU against the
plain-torch implementation (rawindexer.testing.torch_reference.torch_fp8_mqa_logits: f32 scores of the same fp8 inputs,
exact products) with the gates of rawindexer.testing.grading, computed in torch so the 134M-element chunks stay fast:
NaN-poisoned output, exact -inf mask equality, calc_diff < 1e-3 in float64 on finite entries, and for
clean_logits=False every position outside the window still holding the poison. Cases dropped for lack of
memory are listed by name.

Also runnable as a script (what the device runs): ``python tests/gpu/test_cuda_gpu.py [--quick|--full]
[--sanitizer-subset] [--log FILE]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

SHAPES = [(1, 1), (1, 113), (17, 76), (61, 1024), (128, 1024), (1024, 1024), (1024, 1560), (64, 2048),
          (64, 8192), (128, 64), (1024, 1000), (4096, 32768), (2048, 65536), (1024, 131072)]
HEADS = (32, 64, 128)
DIMS = (64, 128)
MODES = ("causal", "cp", "misaligned", "empty", "past_end", "multi_req")
TOL = 1e-3


def _windows(mode: str, M: int, N: int, seed: int):
    """rawindexer.testing.windows when present (it is, in this checkout); raises WindowNotApplicable to skip."""
    from rawindexer.testing.windows import make_windows
    return make_windows(mode, M, N, np.random.default_rng(seed))


def grade_gpu(out, ref, ks, ke, clean: bool) -> tuple[bool, str]:
    """The gates of rawindexer.testing.grading.grade, in torch on the GPU. ``out`` was NaN-poisoned before the launch."""
    import torch

    M, N = ref.shape
    cols = torch.arange(N, device=ref.device)
    s = ks.to(torch.int64).clamp(0, N)
    e = torch.maximum(ke.to(torch.int64).clamp(0, N), s)
    inside = (cols[None, :] >= s[:, None]) & (cols[None, :] < e[:, None])
    if clean:
        unwritten = int(torch.isnan(out).sum())
        overwritten = 0
        got = out
    else:
        unwritten = int((torch.isnan(out) & inside).sum())
        overwritten = int((~torch.isnan(out) & ~inside).sum())
        got = torch.where(inside, out, float("-inf"))
        ref = torch.where(inside, ref, float("-inf"))
    mask_ok = bool(torch.equal(torch.isneginf(got), torch.isneginf(ref)))
    finite = torch.isfinite(got) & torch.isfinite(ref)
    x, y = got[finite].double(), ref[finite].double()
    den = float((x * x + y * y).sum())
    diff = 0.0 if den == 0 else 1.0 - 2.0 * float((x * y).sum()) / den
    ok = mask_ok and unwritten == 0 and overwritten == 0 and diff < TOL
    return ok, (f"mask {'ok' if mask_ok else 'MISMATCH'} diff {diff:.2e} unwritten {unwritten} "
                f"written-outside {overwritten}")


def run_case(M: int, N: int, H: int, D: int, mode: str, seed: int, stride_pad: int = 0,
             repeat_check: bool = False, impl: str = "api") -> list[tuple[bool, str]]:
    """Both clean_logits settings of one (shape, heads, dim, mode); returns [(ok, message)] per setting."""
    import torch

    import rawindexer
    from rawindexer.testing.torch_reference import make_inputs, torch_fp8_mqa_logits

    ks_np, ke_np = _windows(mode, M, N, seed)
    q, k, kv_scale, weights, ks, ke = make_inputs(M, N, H, D, ks_np, ke_np, seed)
    ref = torch_fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits=True)
    results = []
    for clean in (True, False):
        big = torch.full((M, N + stride_pad), float("nan"), device="cuda", dtype=torch.float32)
        out = big[:, :N]
        if impl == "api":
            rawindexer.fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits=clean, out=out)
        else:
            launch_direct(impl, q, k, kv_scale, weights, ks, ke, out, clean)
        torch.cuda.synchronize()
        ok, msg = grade_gpu(out, ref, ks, ke, clean)
        if stride_pad and not torch.isnan(big[:, N:]).all():
            ok, msg = False, msg + " | wrote into the row padding"
        if repeat_check and ok:
            again = torch.full_like(out, float("nan"))
            if impl == "api":
                rawindexer.fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits=clean, out=again)
            else:
                launch_direct(impl, q, k, kv_scale, weights, ks, ke, again, clean)
            torch.cuda.synchronize()
            same = torch.equal(torch.nan_to_num(again, nan=1.0), torch.nan_to_num(out.contiguous(), nan=1.0))
            if not same:
                ok, msg = False, msg + " | NOT bitwise repeatable"
        results.append((ok, msg))
    return results


_direct: dict = {}


def launch_direct(impl: str, q, k, kv_scale, weights, ks, ke, out, clean: bool) -> None:
    """Launch one implementation ("wg" or "mma") without the public API: CudaBackend + Sm90Family."""
    import torch

    from rawindexer.backends.cuda import CudaBackend
    from rawindexer.dispatch.base import Pointers, Problem, Tunables
    from rawindexer.dispatch.sm90 import Sm90Family

    if impl not in _direct:
        backend = _direct.setdefault("backend", CudaBackend())
        family = Sm90Family(impl=impl)
        _direct[impl] = (family, backend.load_module(family.code_object()))
    backend = _direct["backend"]
    family, module = _direct[impl]
    M, H, D = q.shape
    N = k.shape[0]
    plan = family.plan(Problem(M, N, H, D, out.stride(0), clean), Tunables(),
                       Pointers(q.data_ptr(), k.data_ptr(), kv_scale.data_ptr(), weights.data_ptr(),
                                ks.data_ptr(), ke.data_ptr(), out.data_ptr()), backend.compute_units())
    backend.launch(backend.get_function(module, plan.symbol), plan.grid, plan.block, plan.kernargs,
                   stream=torch.cuda.current_stream().cuda_stream)


def sweep(shapes, heads, dims, modes, log, impl: str = "api") -> tuple[int, int, list[str], list[str]]:
    """Run the cartesian product; returns (passed, total, failures, dropped-for-memory)."""
    import torch

    from rawindexer.testing.windows import WindowNotApplicable

    passed = total = 0
    failures: list[str] = []
    dropped: list[str] = []
    for (M, N) in shapes:
        for H in heads:
            for D in dims:
                for mode in modes:
                    name = f"{impl} M={M} N={N} H={H} D={D} {mode}"
                    t0 = time.time()
                    try:
                        res = run_case(M, N, H, D, mode, seed=M * 7 + N + H + D, stride_pad=37 if M < 2048 else 0,
                                       repeat_check=(M, N) == (1024, 1560), impl=impl)
                    except WindowNotApplicable:
                        continue
                    except torch.cuda.OutOfMemoryError:
                        dropped.append(name)
                        log(f"DROPPED (out of memory): {name}")
                        torch.cuda.empty_cache()
                        continue
                    for clean, (ok, msg) in zip((1, 0), res):
                        total += 1
                        passed += ok
                        line = f"{'PASS' if ok else 'FAIL'} {name} clean={clean}: {msg}"
                        if not ok:
                            failures.append(line)
                        log(line + f" ({time.time() - t0:.2f}s)")
                    torch.cuda.empty_cache()
    return passed, total, failures, dropped


# ---------------------------------------------------------------------------------------------------
# pytest entry points (gpu marker: deselected in CI)
# ---------------------------------------------------------------------------------------------------
def _need_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper (sm_90) GPU")


@pytest.mark.gpu
def test_sweep_small_shapes():
    _need_gpu()
    small = [s for s in SHAPES if s[0] * s[1] <= 2_000_000]
    passed, total, failures, _ = sweep(small, HEADS, DIMS, MODES, log=lambda s: None)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.gpu
@pytest.mark.slow
def test_sweep_chunk_shapes():
    _need_gpu()
    big = [s for s in SHAPES if s[0] * s[1] > 2_000_000]
    passed, total, failures, dropped = sweep(big, HEADS, DIMS, MODES, log=lambda s: None)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.gpu
def test_mma_path_small():
    _need_gpu()
    passed, total, failures, _ = sweep([(17, 76), (61, 1024), (1024, 1560)], HEADS, DIMS, MODES,
                                       log=lambda s: None, impl="mma")
    assert not failures, "\n".join(failures[:20])


# ---------------------------------------------------------------------------------------------------
# GPU interop through the public API: torch, CuPy and JAX arrays in, the caller's framework out, zero-copy
# `out=`, and the launch on the caller's current stream
# ---------------------------------------------------------------------------------------------------
INTEROP_SHAPE = (1024, 4096, 32, 128)  # M, N, H, D: long enough (~tens of us) that a misordered launch shows


def _interop_inputs(seed: int = 5):
    import torch

    from rawindexer.testing.torch_reference import make_inputs, torch_fp8_mqa_logits

    M, N, H, D = INTEROP_SHAPE
    ks_np, ke_np = _windows("causal", M, N, seed)
    args = make_inputs(M, N, H, D, ks_np, ke_np, seed)
    ref = torch_fp8_mqa_logits(*args, clean_logits=True)
    torch.cuda.synchronize()
    return args, ref


def interop_torch() -> list[tuple[bool, str]]:
    """torch CUDA tensors (float8_e4m3fn and uint8 views) in -> torch out; out= zero-copy; caller's stream."""
    import torch

    import rawindexer

    (q, k, kv, w, ks, ke), ref = _interop_inputs()
    M, N = ref.shape
    results = []
    for label, qq, kk in (("fp8", q, k), ("uint8 view", q.view(torch.uint8), k.view(torch.uint8))):
        got = rawindexer.fp8_mqa_logits(qq, kk, kv, w, ks, ke, clean_logits=True)
        torch.cuda.synchronize()
        ok, msg = grade_gpu(got, ref, ks, ke, True)
        ok = ok and isinstance(got, torch.Tensor) and got.is_cuda and got.shape == (M, N)
        results.append((ok, f"torch {label} in, torch out: {msg}"))
    # out= on a non-default stream: poison queued on that stream behind ~20 ms of busy-wait, then our launch.
    # Launched anywhere but that stream, the kernel would run before the poison lands and the result be NaN.
    s = torch.cuda.Stream()
    out = torch.empty((M, N), device="cuda", dtype=torch.float32)
    ptr = out.data_ptr()
    with torch.cuda.stream(s):
        torch.cuda._sleep(40_000_000)
        out.fill_(float("nan"))
        got = rawindexer.fp8_mqa_logits(q, k, kv, w, ks, ke, clean_logits=True, out=out)
    s.synchronize()
    ok, msg = grade_gpu(out, ref, ks, ke, True)
    same = got is out and got.data_ptr() == ptr
    results.append((ok and same, f"torch out= on a side stream (after its synchronize): {msg}; "
                                 f"same tensor/data_ptr: {same}"))
    return results


def interop_cupy() -> list[tuple[bool, str]]:
    """CuPy arrays (uint8 fp8 codes) in -> CuPy out; out= zero-copy (.data.ptr); CuPy's current stream."""
    import cupy
    import torch

    import rawindexer

    (q, k, kv, w, ks, ke), ref = _interop_inputs()
    M, N = ref.shape
    cq, ck = cupy.from_dlpack(q.view(torch.uint8)), cupy.from_dlpack(k.view(torch.uint8))
    ckv, cw, cks, cke = (cupy.from_dlpack(x) for x in (kv, w, ks, ke))
    results = []
    got = rawindexer.fp8_mqa_logits(cq, ck, ckv, cw, cks, cke, clean_logits=True)
    cupy.cuda.Device().synchronize()
    ok, msg = grade_gpu(torch.from_dlpack(got), ref, ks, ke, True)
    ok = ok and isinstance(got, cupy.ndarray) and got.shape == (M, N)
    results.append((ok, f"cupy uint8 in, cupy out: {msg}"))
    s = cupy.cuda.Stream(non_blocking=True)
    out = cupy.empty((M, N), dtype=cupy.float32)
    ptr = out.data.ptr
    with s:
        # the busy-wait goes on CuPy's stream through torch's ExternalStream
        with torch.cuda.stream(torch.cuda.ExternalStream(s.ptr)):
            torch.cuda._sleep(40_000_000)
        out.fill(cupy.nan)
        got = rawindexer.fp8_mqa_logits(cq, ck, ckv, cw, cks, cke, clean_logits=True, out=out)
    s.synchronize()
    ok, msg = grade_gpu(torch.from_dlpack(out), ref, ks, ke, True)
    same = got is out and got.data.ptr == ptr
    results.append((ok and same, f"cupy out= on a non-blocking stream (after its synchronize): {msg}; "
                                 f"same array/.data.ptr: {same}"))
    return results


def interop_jax() -> list[tuple[bool, str]]:
    """JAX GPU arrays (uint8 fp8 codes) in -> JAX out; out= zero-copy (unsafe_buffer_pointer)."""
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import torch

    import rawindexer

    (q, k, kv, w, ks, ke), ref = _interop_inputs()
    M, N = ref.shape
    gpu = jax.devices("gpu")[0]
    host = [x.view(torch.uint8).cpu().numpy() if x.dtype == torch.float8_e4m3fn else x.cpu().numpy()
            for x in (q, k, kv, w, ks, ke)]
    jq, jk, jkv, jw, jks, jke = (jax.device_put(x, gpu) for x in host)
    results = []
    # The result is read right away: torch busy-waits on the legacy default stream first, so a JAX read that
    # does not wait for our launch sees unwritten memory.
    torch.cuda._sleep(40_000_000)
    got = rawindexer.fp8_mqa_logits(jq, jk, jkv, jw, jks, jke, clean_logits=True)
    isjax = isinstance(got, jax.Array) and got.shape == (M, N)
    early = torch.from_numpy(np.asarray(got)).cuda()
    ok, msg = grade_gpu(early, ref, ks, ke, True)
    results.append((ok and isjax, f"jax uint8 in, jax out, read with no explicit sync: {msg}"))
    torch.cuda.synchronize()
    ok, msg = grade_gpu(torch.from_numpy(np.asarray(got)).cuda(), ref, ks, ke, True)
    results.append((ok and isjax, f"jax uint8 in, jax out, read after a device synchronize: {msg}"))
    # JAX arrays are immutable: out= is refused with a clear error and nothing is written
    out = jnp.full((M, N), jnp.nan, dtype=jnp.float32, device=gpu)
    out.block_until_ready()
    try:
        rawindexer.fp8_mqa_logits(jq, jk, jkv, jw, jks, jke, clean_logits=True, out=out)
        refused = False
    except ValueError as exc:
        refused = "JAX array" in str(exc)
    torch.cuda.synchronize()
    untouched = bool(np.isnan(np.asarray(out)).all())
    results.append((refused and untouched, f"jax out= refused: {refused}; the array left as it was: {untouched}"))
    return results


@pytest.mark.gpu
def test_interop_torch():
    _need_gpu()
    res = interop_torch()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


@pytest.mark.gpu
def test_interop_cupy():
    _need_gpu()
    pytest.importorskip("cupy")
    res = interop_cupy()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)


@pytest.mark.gpu
def test_interop_jax():
    _need_gpu()
    pytest.importorskip("jax")
    res = interop_jax()
    assert all(ok for ok, _ in res), "\n".join(m for _, m in res)



def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small shapes, all heads/dims/modes")
    parser.add_argument("--full", action="store_true", help="all 14 shapes")
    parser.add_argument("--mma", action="store_true", help="also the mma.sync path on small shapes")
    parser.add_argument("--interop", action="store_true", help="only the torch / CuPy / JAX interop checks")
    parser.add_argument("--sanitizer-subset", action="store_true", help="tiny subset for compute-sanitizer")
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    logf = open(args.log, "w") if args.log else None

    def log(s: str) -> None:
        print(s, flush=True) if ("FAIL" in s or "DROP" in s or not s.startswith("PASS")) else None
        if logf:
            logf.write(s + "\n")
            logf.flush()

    if args.interop:
        fails = 0
        for fn in (interop_torch, interop_cupy, interop_jax):
            try:
                res = fn()
            except Exception as exc:  # report and go on to the next framework
                res = [(False, f"{fn.__name__}: {type(exc).__name__}: {exc}")]
            for ok, msg in res:
                fails += not ok
                log(f"{'PASS' if ok else 'FAIL'} {msg}")
        log(f"interop: {fails} failing check(s)")
        return 1 if fails else 0
    if args.sanitizer_subset:
        runs = [([(17, 76), (61, 1024), (128, 64)], (32, 64), DIMS, MODES, "api")]
    elif args.full:
        runs = [(SHAPES, HEADS, DIMS, MODES, "api")]
    else:
        runs = [([s for s in SHAPES if s[0] * s[1] <= 2_000_000], HEADS, DIMS, MODES, "api")]
    if args.mma:
        runs.append(([(17, 76), (61, 1024), (1024, 1560), (128, 1024)], HEADS, DIMS, MODES, "mma"))
    all_failures: list[str] = []
    summary = []
    for shapes, heads, dims, modes, impl in runs:
        passed, total, failures, dropped = sweep(shapes, heads, dims, modes, log, impl)
        all_failures += failures
        summary.append(f"{impl}: {passed}/{total} passed over {len(shapes)} shapes; dropped for memory: "
                       f"{dropped if dropped else 'none'}")
    for line in summary:
        log(line)
        print(line)
    return 1 if all_failures else 0


if __name__ == "__main__":
    # As a script on the device (no install there): the checkout's package and the kernels `make` put in
    # it, or those named by $RAWINDEXER_KERNEL_DIR. Under pytest the installed package is tested instead.
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
