"""Packaging: kernels found as package data (and through the override), the sm_90a toolchain choice, the
wheel's contents, and (slow) the wheel installed into a fresh virtual environment."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import build  # conftest loads the repository's build.py under this name
import rawindexer
from conftest import REPO
from rawindexer.dispatch.base import load_target
from rawindexer.dispatch.gfx950 import Gfx950Family
from rawindexer.dispatch.sm90 import Sm90Family
from rawindexer.kernel_files import (KERNEL_DIR_ENV, KernelNotBuiltError, kernel_dir, kernel_source,
                                     manifest_path, package_kernel_dir)

TARGETS = {"gfx950": "fp8_mqa_logits.gfx950.hsaco", "gfx942": "fp8_mqa_logits.gfx942.hsaco",
           "sm_90a": "fp8_mqa_logits.sm90a.cubin"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------
# Kernel lookup
# ---------------------------------------------------------------------------------------------------
def test_kernels_come_from_the_imported_package(monkeypatch):
    monkeypatch.delenv(KERNEL_DIR_ENV, raising=False)
    package = Path(rawindexer.__file__).resolve().parent
    assert package_kernel_dir().resolve() == package / "_kernels"
    assert kernel_dir() == package_kernel_dir() and kernel_source() == "package"
    manifest = json.loads(manifest_path().read_text())
    assert set(manifest["targets"]) == set(TARGETS)
    for arch, name in TARGETS.items():
        assert manifest["targets"][arch]["code_object"] == name
        assert (package / "_kernels" / name).stat().st_size > 10_000
    # families built with no directory read the package's files
    assert Gfx950Family().code_object() == (package / "_kernels" / TARGETS["gfx950"]).read_bytes()
    assert Sm90Family().code_object() == (package / "_kernels" / TARGETS["sm_90a"]).read_bytes()


def _fake_build(folder: Path, marker: str) -> Path:
    """A kernel folder whose manifest and code objects are tagged, so the test can tell which one was read."""
    folder.mkdir(parents=True)
    manifest = json.loads(manifest_path().read_text())
    for arch, target in manifest["targets"].items():
        target["marker"] = marker
        (folder / target["code_object"]).write_bytes(f"{marker}:{arch}".encode())
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_environment_override_points_at_another_build(tmp_path, monkeypatch):
    other = _fake_build(tmp_path / "fresh", "from-env")
    monkeypatch.setenv(KERNEL_DIR_ENV, str(other))
    assert kernel_dir() == other and kernel_source() == f"${KERNEL_DIR_ENV}"
    assert load_target("gfx950")["marker"] == "from-env"
    # resolved at each use: a family made before the variable was set follows it too
    assert Gfx950Family().code_object() == b"from-env:gfx950"
    assert Sm90Family().code_object() == b"from-env:sm_90a"


def test_argument_beats_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(KERNEL_DIR_ENV, str(_fake_build(tmp_path / "env", "from-env")))
    arg = _fake_build(tmp_path / "arg", "from-arg")
    assert kernel_source(arg) == "argument"
    assert load_target("sm_90a", arg)["marker"] == "from-arg"
    assert Gfx950Family(arg).code_object() == b"from-arg:gfx950"


def test_missing_kernels_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(KERNEL_DIR_ENV, str(tmp_path / "nothing"))
    with pytest.raises(KernelNotBuiltError, match=f"unset {KERNEL_DIR_ENV}"):
        load_target("gfx950")
    with pytest.raises(KernelNotBuiltError, match="has no build"):
        load_target("gfx950", tmp_path / "nothing")
    half = tmp_path / "half"
    half.mkdir()
    (half / "manifest.json").write_text(json.dumps({"targets": {"gfx950": {}}}))
    with pytest.raises(KernelNotBuiltError, match="no 'sm_90a' target"):
        load_target("sm_90a", half)


def test_package_does_not_read_the_checkouts_build_folder(tmp_path, monkeypatch):
    """Nothing at run time may depend on build/ (the wheel has none): hide it and load both targets."""
    monkeypatch.delenv(KERNEL_DIR_ENV, raising=False)
    code = ("import rawindexer; from rawindexer.dispatch import family_for; "
            "print(len(family_for('gfx950').code_object()), len(family_for('sm_90a').code_object()), "
            "rawindexer.is_supported(64, 128))")
    env = {**os.environ, "PYTHONPATH": str(Path(rawindexer.__file__).resolve().parents[1])}
    env.pop(KERNEL_DIR_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    sizes = out.stdout.split()
    assert int(sizes[0]) > 10_000 and int(sizes[1]) > 10_000 and sizes[2] == "True"


# ---------------------------------------------------------------------------------------------------
# sm_90a toolchain choice
# ---------------------------------------------------------------------------------------------------
def _fake_pypi_toolkit(site: Path) -> Path:
    root = site / build.CUDA_PYPI_SUBDIR
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return root


def test_nvcc_on_path_wins_unless_forced(tmp_path):
    root = _fake_pypi_toolkit(tmp_path)
    chosen = build.select_cuda_toolchain("/usr/local/cuda/bin/nvcc", root, force_pypi=False)
    assert (chosen.nvcc, chosen.origin, chosen.extra_flags) == ("/usr/local/cuda/bin/nvcc", "PATH", ())
    forced = build.select_cuda_toolchain("/usr/local/cuda/bin/nvcc", root, force_pypi=True)
    assert forced.origin == "PyPI" and forced.nvcc == str(root / "bin" / "nvcc")
    assert forced.extra_flags == (f"-I{root / 'include'}",)  # the wheels' headers are not where nvcc.profile looks


def test_pypi_toolkit_without_nvcc_on_path_and_install_when_absent(tmp_path):
    root = _fake_pypi_toolkit(tmp_path / "site")
    assert build.select_cuda_toolchain(None, root, force_pypi=False).origin == "PyPI"
    assert build.select_cuda_toolchain(None, None, force_pypi=False) is None  # -> install the pins
    assert build.select_cuda_toolchain("/x/nvcc", None, force_pypi=True) is None
    assert build.pypi_cuda_root([str(tmp_path / "elsewhere"), str(tmp_path / "site")]) == root
    assert build.pypi_cuda_root([str(tmp_path / "elsewhere")]) is None


def test_force_variable_selects_the_pypi_toolkit(tmp_path, monkeypatch):
    root = _fake_pypi_toolkit(tmp_path)
    monkeypatch.setattr(build, "_pypi_pins_installed", lambda: True)
    monkeypatch.setattr(build, "pypi_cuda_root", lambda search_paths=None: root)
    monkeypatch.setattr(build.shutil, "which", lambda name: "/opt/cuda/bin/nvcc" if name == "nvcc" else None)
    monkeypatch.delenv(build.FORCE_PYPI_NVCC_ENV, raising=False)
    assert build.cuda_toolchain().origin == "PATH"
    monkeypatch.setenv(build.FORCE_PYPI_NVCC_ENV, "1")
    assert build.cuda_toolchain().nvcc == str(root / "bin" / "nvcc")
    monkeypatch.setenv(build.FORCE_PYPI_NVCC_ENV, "0")
    assert build.cuda_toolchain().origin == "PATH"


def test_pins_agree_between_build_script_and_pyproject():
    text = (REPO / "pyproject.toml").read_text()
    extra = re.search(r"^build-cuda = \[(.*?)\]", text, re.M | re.S).group(1)
    assert sorted(re.findall(r'"([^"]+)"', extra)) == sorted(build.CUDA_PYPI_PINS)
    assert all(pin.endswith(f"=={build.CUDA_PYPI_VERSION}") for pin in build.CUDA_PYPI_PINS)
    assert f'build = ["{build.ZIGLANG_PIN}"]' in text


def test_manifest_records_the_toolchain_and_cuda_version():
    targets = json.loads(manifest_path().read_text())["targets"]
    assert targets["gfx950"]["toolchain"] in ("hipcc", build.ZIGLANG_PIN)
    sm90 = targets["sm_90a"]
    assert re.fullmatch(r"nvcc (\d+\.\d+\.\d+) \(.+\)", sm90["toolchain"]), sm90["toolchain"]
    assert sm90["toolchain"].split()[1].startswith(sm90["cuda_version"] + ".")


# ---------------------------------------------------------------------------------------------------
# The wheel
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """$RAWINDEXER_WHEEL (CI: the artifact it installed), else a wheel built here from a copy of the package."""
    given = os.environ.get("RAWINDEXER_WHEEL")
    if given:
        return Path(given)
    pytest.importorskip("setuptools", minversion="61")
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(Path(rawindexer.__file__).resolve().parent, src / "rawindexer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(src)], check=True)
    (path,) = dist.glob("rawindexer-*.whl")
    return path


def test_wheel_is_pure_python_and_carries_both_targets(wheel):
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("rawindexer/_kernels/manifest.json"))
        assert set(manifest["targets"]) == set(TARGETS)
        for arch, target in manifest["targets"].items():
            data = z.read(f"rawindexer/_kernels/{target['code_object']}")
            assert len(data) > 10_000 and data[:4] == b"\x7fELF", arch
            # the kernels under test are the wheel's (CI installed it) or the same build's (checkout)
            assert _sha(data) == _sha((kernel_dir() / target["code_object"]).read_bytes()), arch
        wheel_meta = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        assert "Root-Is-Purelib: true" in z.read(wheel_meta).decode()
        assert z.read("rawindexer/_kernels/libri_cuda_launch.so")[:4] == b"\x7fELF"
        launcher_ext = "rawindexer/_kernels/_ri_cuda_launch.abi3.so"
        built_ext = (kernel_dir() / "_ri_cuda_launch.abi3.so").exists()
        if built_ext:  # built where Python.h exists; the wheel carries what the build made
            assert z.read(launcher_ext)[:4] == b"\x7fELF"
    # no importable extension modules, no intermediates; the shared objects are the CUDA backend's optional C
    # launcher (loaded through ctypes) and the same launcher as a stable-ABI extension loaded by path from the
    # kernel folder (x86_64 builds: elsewhere the backend falls back to plain ctypes calls)
    assert sorted(n for n in names if n.endswith((".so", ".pyd", ".s", ".ptxas.txt"))) == sorted(
        ["rawindexer/_kernels/libri_cuda_launch.so"] + [launcher_ext] * built_ext)
    assert {"rawindexer/__main__.py", "rawindexer/cli.py", "rawindexer/emulator/launcher.py"} <= names
    assert not [n for n in names if n.startswith(("tests/", "build/", "kernels/"))]


@pytest.mark.slow
def test_wheel_in_a_fresh_virtual_environment(wheel, tmp_path):
    """What a user does: pip install the wheel into a new environment, then run from an unrelated folder."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", KERNEL_DIR_ENV)}
    work = tmp_path / "elsewhere"
    work.mkdir()
    info = subprocess.run([str(python), "-m", "rawindexer", "info"], cwd=work, env=env, capture_output=True, text=True)
    assert info.returncode == 0, info.stdout + info.stderr
    assert str(env_dir) in info.stdout and "Traceback" not in info.stderr
    run = subprocess.run([str(python), "-m", "rawindexer", "run", "--device", "emulator", "--M", "16", "--N", "160"],
                         cwd=work, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^result\s+PASS$", run.stdout, re.M), run.stdout
