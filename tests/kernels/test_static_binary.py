"""Static checks of the shipped gfx950 binary, read from its metadata and the assembly of the same
compile: no scratch or spills anywhere, occupancy of the default, and the seed's design points in the
steady-state loop."""
import json
import re
from pathlib import Path

import pytest

import build
from rawindexer import asm, registry
from rawindexer.codeobject import CodeObject
from rawindexer.dispatch.base import Pointers, Problem, Tunables
from rawindexer.dispatch.gfx950 import Gfx950Family

from conftest import BUILD  # the assembly: an intermediate of `make`, in the checkout
from rawindexer.kernel_files import kernel_dir, manifest_path

KERNELS = kernel_dir()  # code objects + manifest: the installed package's


@pytest.fixture(scope="module")
def manifest():
    return json.loads(manifest_path().read_text())["targets"]["gfx950"]


@pytest.fixture(scope="module")
def functions(manifest):
    return asm.split_functions((BUILD / manifest["assembly"]).read_text())


def test_every_declared_variant_is_in_the_code_object(manifest):
    co = CodeObject((KERNELS / manifest["code_object"]).read_bytes())
    assert co.target.endswith("gfx950")
    assert set(manifest["kernels"]) == {v.symbol for v in registry.GFX950_INSTANCES} <= set(co.kernels)
    covered = {(v.heads, v.head_dim) for v in registry.GFX950_INSTANCES}
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
    family = Gfx950Family(KERNELS)
    plan = family.plan(Problem(4096, 32768, heads, head_dim, 32768, True), Tunables(), Pointers(*range(1, 8)), 256)
    # H=128, D=128: 2 on every accurate design (Q alone is 64 VGPRs per row; mrf 176 VGPRs at BLOCK_M 1).
    need = 2 if plan.config["design"] == "seed" or (heads, head_dim) == (128, 128) else 3
    assert manifest["kernels"][plan.symbol]["resources"]["waves_per_simd"] >= need, plan.symbol


@pytest.mark.parametrize("symbol", [v.symbol for v in registry.GFX950_INSTANCES if v.design == "seed"])
def test_steady_state_loop_has_the_design_points(functions, symbol):
    v = next(v for v in registry.GFX950_INSTANCES if v.symbol == symbol)
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
    # The weight FMA is packed (fp32, issue 15): 8 v_pk_fma_f32 per chain of 16 values, of which clang turns
    # a few back into two scalar FMAs (where the accumulator starts at zero).
    assert 5 * chains <= names.count("v_pk_fma_f32") <= 8 * chains, (names.count("v_pk_fma_f32"), chains)


# ---- the MFMA-reduce designs (symbols _mr / _mrp): the levers, read from the binary ----
MR = [v for v in registry.GFX950_INSTANCES if v.design in ("mr", "mrp")]


@pytest.mark.parametrize("symbol", [v.symbol for v in MR])
def test_mfma_reduce_loop_shape(functions, manifest, symbol):
    v = next(v for v in MR if v.symbol == symbol)
    loop = asm.steady_state(functions[symbol])
    names = [i.mnemonic for i in loop]
    score = "v_mfma_f32_16x16x128_f8f6f4" if v.head_dim == 128 else "v_mfma_f32_16x16x32_fp8_fp8"
    assert set(n for n in names if "mfma" in n) == {score, "v_mfma_f32_16x16x32_bf16"}
    assert not any("permlane" in n for n in names), "the head reduce is an MFMA in this design"
    assert not any(n.startswith("v_max_f32") for n in names), "no f32 ReLU in this design"
    relu = "v_pk_max_i16" if v.design == "mrp" else "v_and_b32"
    assert any(n.startswith(relu) for n in names) and "v_cvt_pk_bf16_f32" in names
    tp = asm.tile_profile(functions[symbol], v.heads, v.head_dim, v.block_m)
    assert tp.tiles_in_loop == 2, "the ping-pong loop walks two tiles"
    # bf16 packing: H*32/64/2 = H/4 cvt_pk per row per 32-key tile (two values each), two tiles.
    assert names.count("v_cvt_pk_bf16_f32") == 2 * v.block_m * v.heads // 4
    assert any(asm.EDGE_MARKER in ln for ln in functions[symbol]), "edge tiles must be marked"
    # K bytes read per output row: once per BLOCK_M rows, as the seed.
    r = manifest["kernels"][symbol]["resources"]
    assert r["lds"] == 0 and r["scratch"] == 0


def test_mfma_reduce_meets_the_levers_at_h32_d128(functions, manifest):
    """H=32, D=128, BLOCK_M=4 (the shipped GLM-5 shape at the seed's BLOCK_M), both MFMA-reduce designs."""
    for symbol, passes in (("fp8_mqa_logits_h32_d128_bm4_mr", 1.5), ("fp8_mqa_logits_h32_d128_bm4_mrp", 1.25)):
        r = manifest["kernels"][symbol]["resources"]
        assert r["waves_per_simd"] >= 3 and r["vgpr"] + r["agpr"] <= 168 and r["vgpr_spill"] == 0, r
        tp = asm.tile_profile(functions[symbol], 32, 128, 4)
        assert tp.valu_per_row_token <= 0.6, tp.valu_per_row_token
        assert tp.mfma_passes_per_row_token == pytest.approx(passes), tp.mfma_passes_per_row_token
        # The next tile's K (4 x 16 B) and kv_scale (2 x 4 B) loads are still in flight when the
        # current tile's first MFMA issues: register double buffering.
        assert tp.loads_in_flight_at_first_mfma >= 6, tp.loads_in_flight_at_first_mfma
        # Issue target <= 8 wait states per tile (s_nop). Reached by rotating the unit pipeline across
        # tiles (no fill per tile) and, for mr, one accumulator chain per reduce MFMA of a unit:
        # mr 4.0, mrp 7.5 with the pinned clang 22 (docs/PROFILE.md, "Path taken").
        assert tp.wait_states_per_tile <= 8, (symbol, tp.wait_states_per_tile)
    seed = asm.tile_profile(functions["fp8_mqa_logits_h32_d128_bm4_u1"], 32, 128, 4)
    mr = asm.tile_profile(functions["fp8_mqa_logits_h32_d128_bm4_mr"], 32, 128, 4)
    # (the seed design packs its weight FMA since issue 15: ~1.0 VALU per row-token at BLOCK_M 4, mr ~0.55)
    assert mr.wait_states_per_tile < seed.wait_states_per_tile and mr.valu_per_row_token < seed.valu_per_row_token * 0.6


ALL_SHAPES = [(h, d) for h in (32, 64, 128) for d in (64, 128)]


def _plan(heads, head_dim, variant=None):
    return Gfx950Family(KERNELS).plan(Problem(4096, 32768, heads, head_dim, 32768, True), Tunables(variant=variant),
                                    Pointers(*range(1, 8)), 256)


@pytest.mark.parametrize("heads,head_dim", ALL_SHAPES)
def test_mfma_reduce_designs_meet_the_levers_at_every_shape(functions, manifest, heads, head_dim):
    """The MFMA-reduce designs (bf16 terms, not the default since issue 15) at the BLOCK_M the heuristic
    picks for each (H, D): the issue's levers, scaled to H/32 head groups (VALU and MFMA work per row-token
    grow with the heads; the targets are per 32 heads)."""
    for variant in ("mr", "mrp"):
        plan = _plan(heads, head_dim, variant)
        p = manifest["kernels"][plan.symbol]["params"]
        r = manifest["kernels"][plan.symbol]["resources"]
        assert r["waves_per_simd"] >= 3 and r["vgpr"] + r["agpr"] <= 168, r
        assert r["vgpr_spill"] == r["sgpr_spill"] == r["scratch"] == 0, r
        tp = asm.tile_profile(functions[plan.symbol], heads, head_dim, p["block_m"])
        groups = heads / 32
        assert tp.valu_per_row_token / groups <= 0.6, tp.valu_per_row_token
        assert tp.mfma_passes_per_row_token / groups <= 1.5, tp.mfma_passes_per_row_token
        assert tp.wait_states_per_tile <= 8, tp.wait_states_per_tile
        # Every load of the next tile (K: 2 per 16-token half, kv_scale: 1 per half) is issued before this
        # tile's first MFMA and none of them is waited for there.
        assert tp.loads_before_first_mfma == (6 if head_dim == 128 else 4), tp.loads_before_first_mfma
        assert tp.loads_in_flight_at_first_mfma == tp.loads_before_first_mfma, tp.loads_in_flight_at_first_mfma


MRF = [v for v in registry.GFX950_INSTANCES if v.design == "mrf"]


@pytest.mark.parametrize("symbol", [v.symbol for v in MRF])
def test_fp32_reduce_loop_shape(functions, manifest, symbol):
    """mrf: the MFMA-score pipeline with the fp32 VALU reduce. No bf16 anywhere in the loop; one v_max_f32
    per score value, the weight FMA packed; the 4 lane groups summed by permlane swaps; pipelined."""
    v = next(v for v in MRF if v.symbol == symbol)
    loop = asm.steady_state(functions[symbol])
    names = [i.mnemonic for i in loop]
    score = "v_mfma_f32_16x16x128_f8f6f4" if v.head_dim == 128 else "v_mfma_f32_16x16x32_fp8_fp8"
    assert {n for n in names if "mfma" in n} == {score}, "only the score MFMA: the reduce is fp32 on the VALU"
    assert not any("bf16" in n or "pk_max_i16" in n for n in names)
    tp = asm.tile_profile(functions[symbol], v.heads, v.head_dim, v.block_m)
    assert tp.tiles_in_loop == 2
    # Per tile: 32 tokens x H heads per row = H/2 score values per lane per row, one ReLU each.
    relus = [i for i in loop if i.mnemonic.startswith("v_max_f32")]
    assert len(relus) == 2 * v.block_m * v.heads // 2, len(relus)
    for i in relus:
        ops = [o.strip() for o in i.operands.split(",")]
        assert "0" in ops[1:], f"non-ReLU v_max_f32 {i.operands}"
    pk = names.count("v_pk_fma_f32")
    ideal = 2 * v.block_m * v.heads // 4  # one per two values; clang splits some into scalar FMAs
    assert 0.75 * ideal <= pk <= ideal, (pk, ideal)
    assert "v_permlane32_swap_b32_e32" in names and "v_permlane16_swap_b32_e32" in names
    assert tp.wait_states_per_tile <= 8, tp.wait_states_per_tile
    assert tp.loads_in_flight_at_first_mfma == tp.loads_before_first_mfma == (6 if v.head_dim == 128 else 4)
    r = manifest["kernels"][symbol]["resources"]
    assert r["lds"] == 0 and r["scratch"] == 0


@pytest.mark.parametrize("heads,head_dim", ALL_SHAPES)
def test_default_kernel_is_exact_class_and_fills_three_waves(functions, manifest, heads, head_dim):
    """The default design is chosen by accuracy first (per-logit eps <= 1e-5), then by the static levers.
    What it keeps of the issue's lever targets is asserted here; what it costs is in docs/PROFILE.md."""
    from rawindexer.dispatch.gfx950 import LOGIT_EPS

    plan = _plan(heads, head_dim)
    assert LOGIT_EPS[plan.config["design"]] <= 1e-5, plan.symbol
    p = manifest["kernels"][plan.symbol]["params"]
    r = manifest["kernels"][plan.symbol]["resources"]
    assert r["vgpr_spill"] == r["sgpr_spill"] == r["scratch"] == 0, r
    # 3 waves/SIMD wherever the register file allows it; H=128, D=128 reaches 2 (176 VGPRs at BLOCK_M 1).
    assert r["waves_per_simd"] >= (2 if (heads, head_dim) == (128, 128) else 3), (plan.symbol, r)
    tp = asm.tile_profile(functions[plan.symbol], heads, head_dim, p["block_m"])
    groups = heads / 32
    assert tp.mfma_passes_per_row_token / groups <= 1.5, tp.mfma_passes_per_row_token
    assert tp.wait_states_per_tile <= 8, tp.wait_states_per_tile
    # VALU: the 0.6 per 32 heads is out of reach of an fp32 reduce on gfx950 (one v_max_f32 per
    # value + half a v_pk_fma_f32 = 0.75); docs/PROFILE.md states the cost. Held to what it is now.
    assert tp.valu_per_row_token / groups <= 1.1, tp.valu_per_row_token
