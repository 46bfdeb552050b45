"""Static checks of the shipped gfx950 binary, read from its metadata and the assembly of the same
compile: no scratch or spills anywhere, occupancy of the default, and the seed's design points in the
steady-state loop."""
import json
import re
from pathlib import Path

import pytest

import build
from rawindexer import asm
from rawindexer.codeobject import CodeObject
from rawindexer.dispatch.base import Problem, Tunables
from rawindexer.dispatch.gfx950 import Gfx950Family

BUILD = Path(build.ROOT) / "build"


@pytest.fixture(scope="module")
def manifest():
    path = BUILD / "manifest.json"
    if not path.exists():
        pytest.fail("build/manifest.json missing: run `make` first")
    return json.loads(path.read_text())["targets"]["gfx950"]


@pytest.fixture(scope="module")
def functions(manifest):
    return asm.split_functions((BUILD / manifest["assembly"]).read_text())


def test_every_declared_variant_is_in_the_code_object(manifest):
    co = CodeObject((BUILD / manifest["code_object"]).read_bytes())
    assert co.target.endswith("gfx950")
    assert set(manifest["kernels"]) == {v.symbol for v in build.VARIANTS} <= set(co.kernels)
    covered = {(v.heads, v.head_dim) for v in build.VARIANTS}
    assert covered == {(h, d) for h in (32, 64, 128) for d in (64, 128)}


def test_no_variant_spills_or_uses_scratch(manifest):
    for name, k in manifest["kernels"].items():
        r = k["resources"]
        assert r["scratch"] == 0 and r["vgpr_spill"] == 0 and r["sgpr_spill"] == 0, (name, r)
        assert r["lds"] == 0, f"{name}: the design stages nothing through LDS"


def test_kernarg_layout_matches_the_source(manifest):
    names = [n for n, _ in build.KERNEL_ARGS]
    for k in manifest["kernels"].values():
        assert [a["name"] for a in k["args"]] == names
        offsets = [a["offset"] for a in k["args"]]
        assert offsets == sorted(offsets) and all(o % a["size"] == 0 for o, a in zip(offsets, k["args"]))


@pytest.mark.parametrize("heads,head_dim", [(32, 128), (64, 128), (32, 64), (128, 64), (128, 128)])
def test_default_configuration_runs_two_waves_per_simd(manifest, heads, head_dim):
    family = Gfx950Family(BUILD)
    cfg = family.choose(Problem(4096, 32768, heads, head_dim, 32768, True), Tunables(), compute_units=256)
    symbol = f"fp8_mqa_logits_h{heads}_d{head_dim}_bm{cfg['block_m']}_u{2 if cfg['unroll2'] else 1}"
    assert manifest["kernels"][symbol]["resources"]["waves_per_simd"] >= 2, symbol


@pytest.mark.parametrize("symbol", [v.symbol for v in build.VARIANTS])
def test_steady_state_loop_has_the_design_points(functions, symbol):
    v = next(v for v in build.VARIANTS if v.symbol == symbol)
    loop = asm.instructions(asm.steady_state_loop(functions[symbol]))
    names = [i.mnemonic for i in loop]
    mfmas = [n for n in names if re.fullmatch(r"v_mfma_(scale_)?f32_32x32x64_f8f6f4", n)]
    assert mfmas, "the 32x32x64 fp8 MFMA is not in the steady-state loop"
    assert all("mfma" not in n or n in mfmas for n in names), "an MFMA other than 32x32x64 fp8"
    ksteps = v.head_dim // 64
    # One MFMA chain (ksteps deep) per (row, head tile, tile in flight).
    assert len(mfmas) % ksteps == 0
    chains = len(mfmas) // ksteps
    assert "v_permlane32_swap_b32_e32" in names or "v_permlane32_swap_b32_e64" in names
    # ReLU: exactly one v_max_f32 per accumulator value, and never the IEEE canonicalize
    # (v_max_f32 x, x, x) that honouring NaNs would add.
    relus = [i for i in loop if i.mnemonic.startswith("v_max_f32")]
    assert len(relus) == 16 * chains, (len(relus), chains)
    for i in relus:
        ops = [o.strip() for o in i.operands.split(",")]
        assert ops[1] in ("0", "0.0") or ops[2] in ("0", "0.0"), f"non-ReLU v_max_f32 {i.operands}"
    assert not any("canonicalize" in n for n in names)
