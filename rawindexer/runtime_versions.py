"""Which runtime bindings match which driver: hip-python against ROCm, cuda-bindings against the CUDA driver.

hip-python's releases follow ROCm's: hip-python X.Y.* wraps the HIP API of ROCm X.Y (its version starts
with the ROCm version it was generated from). cuda-bindings X.* needs a driver of CUDA >= X.0; the
shipped sm_90a cubin needs a driver of at least the CUDA version that built it (same major: minor-version
compatibility). Everything here is read without initialising a GPU: files, ``importlib.metadata`` and
the drivers' version calls through ctypes, so ``python -m rawindexer info`` can say what is wrong before
a launch fails. Kept in step with pyproject.toml's ``hip`` / ``rocmXY`` / ``cuda`` extras.
"""
from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

#: ROCm (major, minor) -> the extra that installs the matching hip-python (pyproject.toml)
HIP_PYTHON_EXTRAS: dict[tuple[int, int], str] = {(7, 0): "rocm70", (7, 1): "rocm71", (7, 2): "rocm72"}
#: gfx950 (MI350X / MI355X) is a supported target from ROCm 7.0 on
MIN_ROCM = (7, 0)
#: cuda-bindings the `cuda` extra installs
CUDA_BINDINGS_SPEC = "cuda-bindings~=13.0"

Version = tuple[int, ...]


def parse_version(text: str | None) -> Version | None:
    """(7, 2, 2) from "7.2.2.562.43" or "7.2.2-123"; None when there is no leading number."""
    if not text:
        return None
    m = re.match(r"(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def show(version: Version | None) -> str:
    return ".".join(map(str, version)) if version else "?"


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------------------
# What is installed
# ---------------------------------------------------------------------------------------------------
def rocm_version() -> Version | None:
    """ROCm's version from its install tree ($ROCM_PATH or /opt/rocm: .info/version), else from
    libamdhip64's hipRuntimeGetVersion; None when no ROCm is found."""
    for root in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if root:
            info = Path(root) / ".info" / "version"
            if info.is_file():
                return parse_version(info.read_text())
    try:
        lib = ctypes.CDLL("libamdhip64.so")
        value = ctypes.c_int(0)
        if lib.hipRuntimeGetVersion(ctypes.byref(value)) != 0 or value.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    v = value.value  # HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch
    return (v // 10_000_000, v // 100_000 % 100, v % 100_000)


def cuda_driver_version() -> Version | None:
    """(major, minor) of the CUDA version the installed NVIDIA driver supports (cuDriverGetVersion, no
    cuInit); None when there is no driver."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(value)) != 0 or value.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return (value.value // 1000, value.value % 1000 // 10)


# ---------------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One runtime's state in words. ``ok``: True = bindings and driver match; False = something to
    install or update (``advice`` says what, in one line); None = no driver here (nothing to match)."""

    bindings: str | None
    driver: str | None
    ok: bool | None
    advice: str


def hip_python_advice(rocm: Version | None) -> str:
    """What to install for the hip backend, in one line, given the ROCm found (None: not found)."""
    if rocm is None:
        table = ", ".join(f"ROCm {a}.{b}: rawindexer[{e}]" for (a, b), e in sorted(HIP_PYTHON_EXTRAS.items()))
        return f"hip-python X.Y matches ROCm X.Y; install the extra of your ROCm ({table})"
    if rocm[:2] < MIN_ROCM:
        return f"ROCm {show(rocm)} predates gfx950 support: install ROCm >= {show(MIN_ROCM)}"
    extra = HIP_PYTHON_EXTRAS.get(rocm[:2])
    pin = f"hip-python~={rocm[0]}.{rocm[1]}.0"
    return f"pip install 'rawindexer[{extra}]' ({pin})" if extra else f"pip install '{pin}'"


def check_hip(rocm: Version | None, hip_python: str | None) -> Verdict:
    """hip-python X.Y.* against ROCm X.Y (major and minor must agree: the HIP API moves with minors)."""
    driver = f"ROCm {show(rocm)}" if rocm else None
    if rocm is None:
        return Verdict(hip_python, None, None, "no ROCm found (needs ROCm >= 7.0 and an MI350X / MI355X)")
    if rocm[:2] < MIN_ROCM:
        return Verdict(hip_python, driver, False, hip_python_advice(rocm))
    if hip_python is None:
        return Verdict(None, driver, False, f"hip-python missing: {hip_python_advice(rocm)}")
    have = parse_version(hip_python)
    if have is None or have[:2] != rocm[:2]:
        return Verdict(hip_python, driver, False,
                       f"hip-python {hip_python} wraps ROCm {show(have[:2] if have else None)}, "
                       f"not {show(rocm[:2])}: {hip_python_advice(rocm)}")
    return Verdict(hip_python, driver, True, "")


def check_cuda(driver_cuda: Version | None, bindings: str | None, cubin_cuda: Version | None) -> Verdict:
    """cuda-bindings X.* needs a driver of CUDA >= X.0; the cubin needs a driver of the CUDA major that built it
    or newer (a cubin holds SASS, no PTX to JIT, so minor-version compatibility covers older minors)."""
    driver = f"driver CUDA {show(driver_cuda)}" if driver_cuda else None
    if driver_cuda is None:
        return Verdict(bindings, None, None, "no NVIDIA driver found")
    if cubin_cuda and driver_cuda[0] < cubin_cuda[0]:  # same major suffices: minor-version compatibility
        return Verdict(bindings, driver, False,
                       f"the shipped cubin was built by CUDA {show(cubin_cuda)}: update the NVIDIA driver "
                       f"to CUDA >= {cubin_cuda[0]}.0")
    if bindings is None:
        return Verdict(None, driver, False, f"cuda-bindings missing: pip install 'rawindexer[cuda]' ({CUDA_BINDINGS_SPEC})")
    have = parse_version(bindings)
    if have is None or have[0] > driver_cuda[0]:
        return Verdict(bindings, driver, False,
                       f"cuda-bindings {bindings} needs a CUDA {show(have[:1] if have else None)} driver: "
                       f"pip install 'cuda-bindings~={driver_cuda[0]}.0' or update the driver")
    return Verdict(bindings, driver, True, "")


def hip_verdict() -> Verdict:
    return check_hip(rocm_version(), package_version("hip-python"))


def cuda_verdict(cubin_cuda: Version | None = None) -> Verdict:
    return check_cuda(cuda_driver_version(), package_version("cuda-bindings"), cubin_cuda)
