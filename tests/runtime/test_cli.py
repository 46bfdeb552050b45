"""`python -m rawindexer`: output and exit codes on a machine without a GPU, and the version-matching rules
behind `info` (hip-python <-> ROCm, cuda-bindings / cubin <-> CUDA driver)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rawindexer
from rawindexer import cli
from rawindexer.kernel_files import KERNEL_DIR_ENV
from rawindexer.runtime_versions import (check_cuda, check_hip, cuda_driver_version, hip_python_advice,
                                         parse_version, rocm_version)

NO_CUDA = cuda_driver_version() is None
NO_ROCM = rocm_version() is None


def rawindexer_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as a user runs it, from an unrelated folder, against the package under test."""
    base = {k: v for k, v in os.environ.items() if k != KERNEL_DIR_ENV}
    base["PYTHONPATH"] = str(Path(rawindexer.__file__).resolve().parents[1])
    return subprocess.run([sys.executable, "-m", "rawindexer", *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=600)


def table(stdout: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+)\s{2,}(.*)$", stdout, re.M)}


def test_info_lists_version_kernels_and_backends(tmp_path):
    out = rawindexer_cli("info", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = table(out.stdout)
    assert rows["rawindexer"].startswith(rawindexer.__version__)
    for arch in ("gfx950", "sm_90a"):
        assert re.search(r"^\d+ kernels, \(H, D\) 32x64 32x128 64x64 64x128 128x64 128x128; .* built by \S+",
                         rows[arch]), rows[arch]
    assert rows["emulator"].startswith("ready")
    assert set(rows) >= {"hip", "cuda"}
    assert "Traceback" not in out.stderr and len(out.stdout.splitlines()) <= 12


@pytest.mark.skipif(not (NO_CUDA and NO_ROCM), reason="a GPU driver is present")
def test_info_without_gpu_says_why_in_one_line_each(tmp_path):
    rows = table(rawindexer_cli("info", cwd=tmp_path).stdout)
    assert rows["hip"].startswith("no ROCm found")
    assert rows["cuda"].startswith("no NVIDIA driver found")


def test_info_without_kernels_fails_with_one_line(tmp_path):
    out = rawindexer_cli("info", cwd=tmp_path, env={KERNEL_DIR_ENV: str(tmp_path / "empty")})
    assert out.returncode == cli.EXIT_FAILED
    assert "manifest.json not found" in table(out.stdout)["kernels"] and "Traceback" not in out.stderr


def test_run_on_the_emulator_passes(tmp_path):
    out = rawindexer_cli("run", "--device", "emulator", "--M", "8", "--N", "96", "--requests", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = table(out.stdout)
    assert rows["result"] == "PASS" and rows["backend"] == "emulator (gfx950)"
    assert re.search(r"^shape \(M, N, H, D\)\s+\(8, 96, 32, 128\), 2 requests", out.stdout, re.M), out.stdout


def test_run_reports_a_failed_grade_with_exit_1(monkeypatch, capsys):
    """The exit status follows the grade: a kernel whose output is off must fail the command."""
    import rawindexer.testing.grading as grading

    real = grading.grade

    def off_by_a_lot(out, ref, *args, **kwargs):
        return real(out * 2 + 1, ref, *args, **kwargs)

    monkeypatch.setattr(grading, "grade", off_by_a_lot)
    assert cli.main(["run", "--device", "emulator", "--M", "4", "--N", "64", "--requests", "2"]) == cli.EXIT_FAILED
    assert re.search(r"^result\s+FAIL$", capsys.readouterr().out, re.M)


@pytest.mark.parametrize("device", ["hip", "cuda"])
def test_run_on_a_missing_gpu_backend_is_one_line(device, tmp_path):
    if not (NO_CUDA if device == "cuda" else NO_ROCM):
        pytest.skip(f"a {device} driver is present")
    out = rawindexer_cli("run", "--device", device, cwd=tmp_path)
    assert out.returncode == cli.EXIT_UNAVAILABLE
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"rawindexer run: --device {device}: no ")


def test_run_with_arguments_it_cannot_serve_is_one_line(capsys):
    assert cli.main(["run", "--device", "emulator", "--heads", "48", "--M", "8", "--N", "64"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert err.startswith("rawindexer run: ") and "48" in err and len(err.strip().splitlines()) == 1
    assert cli.main(["run", "--device", "emulator", "--requests", "1", "--M", "8", "--N", "64"]) == cli.EXIT_UNAVAILABLE
    assert "multi_req" in capsys.readouterr().err


def test_profile_without_the_assembly_is_one_line(tmp_path):
    out = rawindexer_cli("profile", "--no-emulator", "--build", str(tmp_path), cwd=tmp_path)
    assert out.returncode == cli.EXIT_UNAVAILABLE
    assert "not shipped in the wheel" in out.stderr and "Traceback" not in out.stderr


def test_bench_without_torch_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert cli.main(["bench", "--quick"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert err.startswith("rawindexer bench: bench needs torch") and len(err.strip().splitlines()) == 1


def test_unknown_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["info", "--bogus"])
    assert exc.value.code == 2 and "--bogus" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# Version matching
# ---------------------------------------------------------------------------------------------------
def test_parse_version():
    assert parse_version("7.2.2.562.43") == (7, 2, 2, 562, 43)
    assert parse_version("6.4.3-127\n") == (6, 4, 3)
    assert parse_version("") is None and parse_version("abc") is None


@pytest.mark.parametrize("rocm, hip_python, ok, says", [
    ((7, 2, 1), "7.2.2.562.43", True, ""),
    ((7, 1, 0), "7.2.2.562.43", False, "rawindexer[rocm71]"),
    ((7, 0, 2), None, False, "hip-python~=7.0.0"),
    ((6, 4, 3), "6.4.3.555.40", False, "predates gfx950"),
    ((7, 2, 0), "10.0.0.0.1.2", False, "wraps ROCm 10.0"),
    ((7, 3, 0), "7.2.2.562.43", False, "hip-python~=7.3.0"),  # a ROCm newer than the extras: the plain pin
    (None, "7.2.2.562.43", None, "no ROCm"),
])
def test_hip_python_must_match_rocm(rocm, hip_python, ok, says):
    v = check_hip(rocm, hip_python)
    assert v.ok is ok and says in v.advice


def test_hip_advice_without_rocm_lists_every_extra():
    advice = hip_python_advice(None)
    assert all(f"rawindexer[rocm7{m}]" in advice for m in (0, 1, 2))


@pytest.mark.parametrize("driver, bindings, cubin, ok, says", [
    ((13, 0), "13.0.3", (13, 0), True, ""),
    ((13, 0), "13.5.0", (13, 0), True, ""),    # bindings of the same major: fine
    ((13, 2), "12.9.4", (13, 0), True, ""),    # older bindings on a newer driver: fine
    ((13, 0), "13.0.3", (13, 5), True, ""),    # a 13.5 cubin on a 13.0 driver: minor-version compatibility
    ((12, 8), "12.9.4", (13, 0), False, "update the NVIDIA driver to CUDA >= 13.0"),
    ((12, 8), "13.0.3", None, False, "cuda-bindings~=12.0"),
    ((13, 0), None, (13, 0), False, "rawindexer[cuda]"),
    (None, "13.0.3", (13, 0), None, "no NVIDIA driver"),
])
def test_cuda_bindings_and_cubin_must_match_the_driver(driver, bindings, cubin, ok, says):
    v = check_cuda(driver, bindings, cubin)
    assert v.ok is ok and says in v.advice
