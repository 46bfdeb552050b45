"""Correctness of the sm_90a kernel on a real Hopper GPU (marked ``gpu``: never runs in CI).

The seed's sweep: shapes x heads {32, 64, 128} x head_dim {64, 128} x clean_logits {0, 1} x the six window
modes of rawindexer.testing.windows, through the public API on torch CUDA tensors. Graded on the GPU against the
plain-torch implementation (rawindexer.testing.torch_reference.torch_fp8_mqa_logits: f32 scores of the same fp8 inputs,
exact products) with the gates of rawindexer.testing.grading, computed in torch so the 134M-element chunks stay fast:
NaN-poisoned output, exact -inf mask equality, calc_diff < 1e-3 in float64 on finite entries, and for
clean_logits=False every position outside the window still holding the poison; and the per-logit gate of
rawindexer.testing.grading (issue 15): every in-window |out - ref| <= 1e-5 * T against the float64 result of the
same fp8 inputs, T = kv_scale[n] * sum_h |relu(<q, k>) * w| (computed in float64 on the GPU, by row chunks).
Cases dropped for lack of memory are listed by name. The NaN/Inf contract (docs/NUMERICS.md) has its own
tests below: a non-finite value in one row's q or weights changes no other row, bitwise.

Also runnable as a script (what the device runs): ``python tests/gpu/test_cuda_gpu.py [--quick|--full]
[--sanitizer-subset] [--racecheck-subset [--racecheck-heads 32,64]] [--designs a,b] [--log FILE]``.
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
LOGIT_EPS = 1e-5  # rawindexer.testing.grading.LOGIT_EPS: the per-logit gate of the default designs


def sm90_logit_eps(design: str) -> float:
    """The per-logit gate of an sm_90a design ("api" = the one the public API runs: RAWINDEXER_SM90_DESIGN, else
    the default): Sm90Family's LOGIT_EPS."""
    from rawindexer.dispatch.base import design_from_env
    from rawindexer.dispatch.sm90 import DEFAULT_DESIGN, Sm90Family
    from rawindexer.dispatch.sm90 import LOGIT_EPS as SM90_EPS

    if design == "api":
        design = design_from_env(Sm90Family.design_env, tuple(SM90_EPS), Sm90Family.deprecated_design_env) or DEFAULT_DESIGN
    return SM90_EPS[design]


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


def logit_gate_gpu(out, q, k, kv_scale, weights, ks, ke, eps: float = LOGIT_EPS) -> tuple[bool, float, str]:
    """rawindexer.testing.grading.logit_gate in torch on the GPU, float64, by row chunks of ~1 GiB of scores:
    (ok, worst |out - ref| / T over in-window logits, message). T == 0 demands out == ref exactly."""
    import torch

    M, H, D = q.shape
    N = k.shape[0]
    kf = k.to(torch.float64)
    s_all = ks.to(torch.int64).clamp(0, N)
    e_all = torch.maximum(ke.to(torch.int64).clamp(0, N), s_all)
    rows = max(1, (1 << 30) // max(1, H * N * 8))
    worst, failing, where = 0.0, 0, None
    cols = torch.arange(N, device=q.device)
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        scores = torch.einsum("mhd,nd->mhn", q[m0:m1].to(torch.float64), kf).clamp_min_(0)
        w = weights[m0:m1].to(torch.float64)
        scale = kv_scale.to(torch.float64)
        ref = torch.einsum("mhn,mh->mn", scores, w) * scale
        total = torch.einsum("mhn,mh->mn", scores, w.abs()) * scale
        del scores
        inside = (cols[None, :] >= s_all[m0:m1, None]) & (cols[None, :] < e_all[m0:m1, None])
        got = out[m0:m1].to(torch.float64)
        err = (got - ref).abs()
        rel = torch.where(total > 0, err / torch.where(total > 0, total, torch.ones_like(total)),
                          torch.where(err == 0, torch.zeros_like(err), torch.full_like(err, float("inf"))))
        rel = torch.where(torch.isfinite(got) | ~torch.isfinite(ref), rel, torch.full_like(rel, float("inf")))
        rel = torch.where(inside, rel, torch.zeros_like(rel))
        failing += int((rel > eps).sum())
        chunk_worst = float(rel.max()) if rel.numel() else 0.0
        if chunk_worst > worst:
            idx = int(rel.argmax())
            worst, where = chunk_worst, (m0 + idx // N, idx % N)
    ok = failing == 0
    return ok, worst, f"logit gate eps {eps:.0e}: worst {worst:.2e} at {where}, failing {failing}"


def run_case(M: int, N: int, H: int, D: int, mode: str, seed: int, stride_pad: int = 0,
             repeat_check: bool = False, design: str = "api") -> list[tuple[bool, str]]:
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
        if design == "api":
            rawindexer.fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits=clean, out=out)
        else:
            launch_direct(design, q, k, kv_scale, weights, ks, ke, out, clean)
        torch.cuda.synchronize()
        ok, msg = grade_gpu(out, ref, ks, ke, clean)
        gate_ok, _, gate_msg = logit_gate_gpu(out, q, k, kv_scale, weights, ks, ke, eps=sm90_logit_eps(design))
        ok, msg = ok and gate_ok, f"{msg} | {gate_msg}"
        if stride_pad and not torch.isnan(big[:, N:]).all():
            ok, msg = False, msg + " | wrote into the row padding"
        if repeat_check and ok:
            again = torch.full_like(out, float("nan"))
            if design == "api":
                rawindexer.fp8_mqa_logits(q, k, kv_scale, weights, ks, ke, clean_logits=clean, out=again)
            else:
                launch_direct(design, q, k, kv_scale, weights, ks, ke, again, clean)
            torch.cuda.synchronize()
            same = torch.equal(torch.nan_to_num(again, nan=1.0), torch.nan_to_num(out.contiguous(), nan=1.0))
            if not same:
                ok, msg = False, msg + " | NOT bitwise repeatable"
        results.append((ok, msg))
    return results


_direct: dict = {}


def launch_direct(design: str, q, k, kv_scale, weights, ks, ke, out, clean: bool) -> None:
    """Launch one design ("wg" or "mma") without the public API: CudaBackend + Sm90Family."""
    import torch

    from rawindexer.backends.cuda import CudaBackend
    from rawindexer.dispatch.base import Pointers, Problem, Tunables
    from rawindexer.dispatch.sm90 import Sm90Family

    if design not in _direct:
        backend = _direct.setdefault("backend", CudaBackend())
        family = Sm90Family(design=design)
        _direct[design] = (family, backend.load_module(family.code_object()))
    backend = _direct["backend"]
    family, module = _direct[design]
    M, H, D = q.shape
    N = k.shape[0]
    plan = family.plan(Problem(M, N, H, D, out.stride(0), clean), Tunables(),
                       Pointers(q.data_ptr(), k.data_ptr(), kv_scale.data_ptr(), weights.data_ptr(),
                                ks.data_ptr(), ke.data_ptr(), out.data_ptr()), backend.compute_units())
    backend.launch(backend.get_function(module, plan.symbol), plan.grid, plan.block, plan.kernargs,
                   stream=torch.cuda.current_stream().cuda_stream, shared_mem=plan.shared_mem)


def sweep(shapes, heads, dims, modes, log, design: str = "api") -> tuple[int, int, list[str], list[str]]:
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
                    name = f"{design} M={M} N={N} H={H} D={D} {mode}"
                    t0 = time.time()
                    try:
                        res = run_case(M, N, H, D, mode, seed=M * 7 + N + H + D, stride_pad=37 if M < 2048 else 0,
                                       repeat_check=(M, N) == (1024, 1560), design=design)
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
def run_checks(fns, title: str) -> int:
    """Script mode of the GPU files: run each check function (a list of (ok, message) each), print PASS/FAIL
    lines and a count; exit status 1 when any failed."""
    fails = 0
    for fn in fns:
        try:
            res = fn()
        except Exception as exc:  # noqa: BLE001
            res = [(False, f"{fn.__name__}: {type(exc).__name__}: {exc}")]
        for ok, msg in res:
            fails += not ok
            print(f"{'PASS' if ok else 'FAIL'} {msg}", flush=True)
    print(f"{title}: {fails} failing check(s)")
    return 1 if fails else 0


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
def test_row_block_pairs_small():
    """"wgpr" (row-block pairs): odd and even row-block counts, a pair's partner past M, and the 1024^2 grid auto
    gives it at H = 64."""
    _need_gpu()
    passed, total, failures, _ = sweep([(17, 76), (61, 1024), (1024, 1560), (1024, 1024), (5, 300)], HEADS, DIMS,
                                       MODES, log=lambda s: None, design="wgpr")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.gpu
def test_mma_path_small():
    _need_gpu()
    passed, total, failures, _ = sweep([(17, 76), (61, 1024), (1024, 1560)], HEADS, DIMS, MODES,
                                       log=lambda s: None, design="mma")
    assert not failures, "\n".join(failures[:20])


# ---------------------------------------------------------------------------------------------------
# NaN/Inf contract (docs/NUMERICS.md) on the sm_90a twin: a NaN fp8 byte in one row's q or a NaN weight in
# one row changes no other row (bitwise); a NaN K byte at key n or a NaN kv_scale[n] changes column n only.
# The poisoned row itself: a NaN score is dropped by the ReLU (fmaxf(NaN, 0) = 0), i.e. the row equals a
# clean run with that head's weight set to 0; a NaN weight makes the row's in-window logits NaN.
# ---------------------------------------------------------------------------------------------------
def nan_contract_case(M: int, N: int, H: int, D: int, seed: int, design: str = "api") -> tuple[bool, str]:
    import torch

    g = np.random.default_rng(seed)
    ks_np = g.integers(-3, 5, M).astype(np.int32)
    ke_np = g.integers(N - 5, N + 3, M).astype(np.int32)
    from rawindexer.bench import make_inputs

    q, k, kv_scale, weights, ks, ke = make_inputs(M, N, H, D, ks_np, ke_np, seed)
    r_q, r_w = (int(x) for x in g.choice(M, 2, replace=False))
    n_k, n_s = (int(x) for x in g.choice(N, 2, replace=False))
    h = int(g.integers(H))
    qb, kb = q.view(torch.uint8).clone(), k.view(torch.uint8).clone()
    qb[r_q, h, int(g.integers(D))] = int(g.choice([0x7F, 0xFF]))
    kb[n_k, int(g.integers(D))] = int(g.choice([0x7F, 0xFF]))
    bad_w, bad_s = weights.clone(), kv_scale.clone()
    bad_w[r_w, int(g.integers(H))] = float("nan")
    bad_s[n_s] = float("nan")
    dropped_w = weights.clone()
    dropped_w[r_q, h] = 0.0  # the clean run: the poisoned head of row r_q contributes nothing

    def launch(qq, kk, ss, ww, clean):
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
        if design == "api":
            import rawindexer
            rawindexer.fp8_mqa_logits(qq.view(torch.float8_e4m3fn), kk.view(torch.float8_e4m3fn), ss, ww, ks, ke,
                                      clean_logits=clean, out=out)
        else:
            launch_direct(design, qq.view(torch.float8_e4m3fn), kk.view(torch.float8_e4m3fn), ss, ww, ks, ke, out, clean)
        torch.cuda.synchronize()
        return out

    msgs = []
    for clean in (True, False):
        got = launch(qb, kb, bad_s, bad_w, clean)
        ref = launch(q.view(torch.uint8), k.view(torch.uint8), kv_scale, dropped_w, clean)
        cols = torch.ones(N, dtype=torch.bool, device="cuda")
        cols[[n_k, n_s]] = False
        rows = torch.ones(M, dtype=torch.bool, device="cuda")
        rows[r_w] = False
        a, b = got[rows][:, cols], ref[rows][:, cols]
        if not torch.equal(torch.nan_to_num(a, nan=7.0), torch.nan_to_num(b, nan=7.0)) or \
                not torch.equal(torch.isnan(a), torch.isnan(b)):
            bad = (torch.nan_to_num(a, nan=7.0) != torch.nan_to_num(b, nan=7.0)).nonzero()[:5].tolist()
            msgs.append(f"clean={clean}: values outside the poisoned row/columns changed (first at {bad})")
        lo, hi = max(0, int(ks_np[r_w])), min(N, int(ke_np[r_w]))
        if not torch.isnan(got[r_w, lo:hi]).all():
            msgs.append(f"clean={clean}: a NaN weight left finite logits in its row {r_w}")
        inside = torch.from_numpy((ks_np <= n_s) & (n_s < ke_np)).cuda()
        if not torch.isnan(got[inside, n_s]).all():
            msgs.append(f"clean={clean}: a NaN kv_scale[{n_s}] left finite logits in its column")
    label = f"{design} M={M} N={N} H={H} D={D} q-row {r_q} w-row {r_w} K key {n_k} scale key {n_s}"
    return (not msgs), f"{label}: " + ("; ".join(msgs) if msgs else "ok")


# (1100, 256): more row blocks than SMs, so the persistent designs ("tmaq") take several per block and reuse buffers
NAN_CASES = [(M, N, H, D) for (M, N) in ((7, 100), (64, 333), (1100, 256)) for H in HEADS for D in DIMS]


@pytest.mark.gpu
@pytest.mark.parametrize("design", ["api", "mma", "wg", "tmas", "tmasb4", "wgpr", "tmaq"])
def test_nan_contract_sm90(design):
    _need_gpu()
    results = [nan_contract_case(M, N, H, D, seed=M + N + H + D, design=design) for M, N, H, D in NAN_CASES]
    assert all(ok for ok, _ in results), "\n".join(m for ok, m in results if not ok)


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
    parser.add_argument("--mma", action="store_true", help="also the mma.sync path on small shapes (= --designs mma)")
    parser.add_argument("--designs", default="", help="comma-separated sm_90a designs (e.g. wg,tmas,mma) also swept "
                                                      "on small shapes through the family directly, whatever the "
                                                      "default would pick there")
    parser.add_argument("--interop", action="store_true", help="only the torch / CuPy / JAX interop checks")
    parser.add_argument("--nan", action="store_true", help="only the NaN/Inf contract checks (api, mma, wg, tmas, tmasb4, wgpr, tmaq; "
                        "with --designs: api and those)")
    parser.add_argument("--sanitizer-subset", action="store_true", help="tiny subset for compute-sanitizer")
    parser.add_argument("--racecheck-subset", action="store_true",
                        help="smaller still, for compute-sanitizer's racecheck (two shapes, H 32, D 128, two windows)")
    parser.add_argument("--racecheck-shapes", default="17x76,128x1024",
                        help="comma-separated MxN shapes of the racecheck subset (a persistent design needs more row "
                        "blocks than SMs before a block reuses its buffers: e.g. 1100x256 at H 64)")
    parser.add_argument("--racecheck-heads", default="32",
                        help="comma-separated head counts of the racecheck subset (tmas keeps weights in registers "
                             "from H = 64: a different kernel body)")
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    logf = open(args.log, "w") if args.log else None

    def log(s: str) -> None:
        print(s, flush=True) if ("FAIL" in s or "DROP" in s or not s.startswith("PASS")) else None
        if logf:
            logf.write(s + "\n")
            logf.flush()

    if args.nan:
        fails = 0
        # "auto" picks wg or tmas by shape: both, whatever the shape; --designs names others (with api) instead
        nan_designs = (("api", *[d for d in args.designs.split(",") if d]) if args.designs
                       else ("api", "mma", "wg", "tmas", "tmasb4", "wgpr", "tmaq"))
        for design in nan_designs:
            for M, N, H, D in NAN_CASES:
                ok, msg = nan_contract_case(M, N, H, D, seed=M + N + H + D, design=design)
                fails += not ok
                log(f"{'PASS' if ok else 'FAIL'} nan contract {msg}")
        log(f"nan contract: {fails} failing case(s)")
        return 1 if fails else 0
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
    # (shapes, heads, dims, modes) of the default's run, and of each design named by --designs / --mma
    designs_small = ([(17, 76), (61, 1024), (1024, 1560), (128, 1024)], HEADS, DIMS, MODES)
    if args.racecheck_subset:
        heads = tuple(int(h) for h in args.racecheck_heads.split(","))
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.racecheck_shapes.split(",")]
        default = designs_small = (shapes, heads, (128,), ("causal", "multi_req"))
    elif args.sanitizer_subset:
        default = designs_small = ([(17, 76), (61, 1024), (128, 64)], (32, 64), DIMS, MODES)
    elif args.full:
        default = (SHAPES, HEADS, DIMS, MODES)
    else:
        default = ([s for s in SHAPES if s[0] * s[1] <= 2_000_000], HEADS, DIMS, MODES)
    designs = [d for d in args.designs.split(",") if d] + (["mma"] if args.mma and "mma" not in args.designs else [])
    runs = [(*default, "api")] + [(*designs_small, design) for design in designs]
    all_failures: list[str] = []
    summary = []
    for shapes, heads, dims, modes, design in runs:
        passed, total, failures, dropped = sweep(shapes, heads, dims, modes, log, design)
        all_failures += failures
        summary.append(f"{design}: {passed}/{total} passed over {len(shapes)} shapes; dropped for memory: "
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
