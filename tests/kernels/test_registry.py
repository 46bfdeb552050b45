"""rawindexer.registry is the only declaration of the kernels: what the build shipped (the manifest and the
code objects) is exactly what it declares, and the dispatch answers from it."""
import json

import pytest

import rawindexer
from rawindexer import paged_kernels, registry
from rawindexer.codeobject import CodeObject
from rawindexer.kernel_files import kernel_dir, manifest_path

MANIFEST = json.loads(manifest_path().read_text())
def _gfx_params(i):
    return {"heads": i.heads, "head_dim": i.head_dim, "block_m": i.block_m, "unroll": i.unroll, "design": i.design,
            "fp8_format": i.fp8_format}


PREFILL_PARAMS = {
    registry.GFX950: _gfx_params,
    registry.GFX942: _gfx_params,
    registry.SM90: lambda i: {"heads": i.heads, "head_dim": i.head_dim, "block_m": i.block_m, "design": i.design},
}


@pytest.mark.parametrize("target", [registry.GFX950, registry.GFX942, registry.SM90])
def test_prefill_manifest_is_the_registry(target):
    shipped = MANIFEST["targets"][target]["kernels"]
    declared = {i.symbol: PREFILL_PARAMS[target](i) for i in registry.INSTANCES[registry.PREFILL][target]}
    assert {s: e["params"] for s, e in shipped.items()} == declared
    assert all(not registry.DESIGNS[registry.PREFILL][target][i.design].experiment
               for i in registry.INSTANCES[registry.PREFILL][target]), "an experiment is shipped"


@pytest.mark.parametrize("target", [registry.GFX950, registry.GFX942])
def test_gfx_code_object_holds_every_declared_symbol(target):
    co = CodeObject((kernel_dir() / MANIFEST["targets"][target]["code_object"]).read_bytes())
    assert co.target.endswith(target)
    assert {i.symbol for i in registry.INSTANCES[registry.PREFILL][target]} <= set(co.kernels)


@pytest.mark.parametrize("target", sorted(paged_kernels.TARGETS))
def test_paged_manifest_is_the_registry(target):
    spec = paged_kernels.TARGETS[target]
    shipped = set(MANIFEST["ops"][registry.PAGED][target]["kernels"])
    assert shipped == {spec.symbol(inst, v) for inst, v in registry.INSTANCES[registry.PAGED][target]}


@pytest.mark.parametrize("target", [registry.GFX950, registry.GFX942, registry.SM90])
def test_every_shipped_design_has_instances_and_defaults_cover_every_shape(target):
    instances = registry.INSTANCES[registry.PREFILL][target]
    for design in registry.designs(registry.PREFILL, target):
        assert any(i.design == design for i in instances), design
    shapes = {(i.heads, i.head_dim) for i in instances}
    default = registry.default_designs(registry.PREFILL, target)[0]
    assert shapes == {(i.heads, i.head_dim) for i in instances if i.design == default}
    for heads in (16, 32, 64, 96, 128, 256):
        for head_dim in (32, 64, 128, 256):
            assert rawindexer.is_supported(heads, head_dim, target) == ((heads, head_dim) in shapes), (heads, head_dim)


def test_every_design_declares_its_gate_and_one_default_leads():
    for op in (registry.PREFILL,):
        for target, designs in registry.DESIGNS[op].items():
            shipped = [d for d in designs.values() if not d.experiment]
            assert all(d.logit_eps is not None for d in shipped), target
            assert [d.default_rank for d in shipped if d.default_rank is not None].count(0) == 1, target


def test_design_env_names_a_design_and_the_old_name_still_works(monkeypatch):
    """RAWINDEXER_GFX950_DESIGN picks the gfx950 design; RAWINDEXER_GFX950_PATH, its older name, still does (with a
    DeprecationWarning) while the new one is unset; a name the registry does not declare is refused, named."""
    from rawindexer.dispatch.gfx950 import Gfx950Family

    family = Gfx950Family()
    monkeypatch.delenv("RAWINDEXER_GFX950_DESIGN", raising=False)
    monkeypatch.delenv("RAWINDEXER_GFX950_PATH", raising=False)
    assert family.design() == registry.default_designs(registry.PREFILL, registry.GFX950)[0]
    monkeypatch.setenv("RAWINDEXER_GFX950_DESIGN", "seed")
    assert family.design() == "seed"
    monkeypatch.delenv("RAWINDEXER_GFX950_DESIGN")
    monkeypatch.setenv("RAWINDEXER_GFX950_PATH", "mr")
    with pytest.warns(DeprecationWarning, match="RAWINDEXER_GFX950_DESIGN"):
        assert family.design() == "mr"
    monkeypatch.setenv("RAWINDEXER_GFX950_DESIGN", "nope")
    with pytest.raises(ValueError, match="RAWINDEXER_GFX950_DESIGN: expected one of"):
        family.design()


def test_a_manifest_with_the_older_design_keys_still_loads(tmp_path):
    """Kernel folders built before the manifest said params.design (gfx: "path", sm_90a: "impl") load with the
    design read from the older key, so RAWINDEXER_KERNEL_DIR may point at one."""
    from rawindexer.dispatch.base import load_target

    old = {"targets": {t: {"kernels": {s: {**e, "params": {**{k: v for k, v in e["params"].items() if k != "design"},
                                                          "path" if t != registry.SM90 else "impl": e["params"]["design"]}}
                                       for s, e in MANIFEST["targets"][t]["kernels"].items()}}
                       for t in (registry.GFX950, registry.SM90)}}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    for t in (registry.GFX950, registry.SM90):
        loaded = load_target(t, tmp_path)["kernels"]
        assert {s: e["params"]["design"] for s, e in loaded.items()} == \
            {s: e["params"]["design"] for s, e in MANIFEST["targets"][t]["kernels"].items()}


def test_a_decode_manifest_with_the_older_design_key_still_loads(tmp_path):
    """Kernel folders built before the decode manifest said params.design (it said params.variant) load with the
    design read from the older key, and the dispatch still finds each design's kernel in them."""
    from rawindexer.dispatch.paged_gfx942 import PagedGfx942Family
    from rawindexer.dispatch.paged_gfx950 import PagedGfx950Family
    from rawindexer.dispatch.paged_sm90 import PagedSm90Family

    shipped = MANIFEST["ops"][registry.PAGED]
    old = {"ops": {registry.PAGED: {t: {**target, "kernels": {
        s: {**e, "params": {("variant" if k == "design" else k): v for k, v in e["params"].items()}}
        for s, e in target["kernels"].items()}} for t, target in shipped.items()}}}
    assert all("variant" in e["params"] and "design" not in e["params"]
               for target in old["ops"][registry.PAGED].values() for e in target["kernels"].values())
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    for family in (PagedGfx950Family(tmp_path), PagedGfx942Family(tmp_path), PagedSm90Family(tmp_path)):
        loaded = family.target["kernels"]
        assert {s: e["params"]["design"] for s, e in loaded.items()} == \
            {s: e["params"]["design"] for s, e in shipped[family.arch]["kernels"].items()}
        spec = paged_kernels.TARGETS[family.arch]
        for inst, design in registry.INSTANCES[registry.PAGED][family.arch]:
            entry = family.entry(inst.heads, inst.head_dim, inst.block_size, design)
            assert entry["symbol"] == spec.symbol(inst, design) and entry["params"]["design"] == design
