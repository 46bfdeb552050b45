#!/usr/bin/env python3
"""Build the kernels of rawindexer (gfx950 and gfx942 code objects, sm_90a cubin) and their manifest.

    python build.py [--target gfx950|gfx942|sm_90a] [--out build] [--kernels rawindexer/_kernels]

What the package loads goes into ``--kernels`` (package data, shipped in the wheel; default
``rawindexer/_kernels``); intermediate files go into ``--out`` (default ``build/``, never needed at
run time):

* kernels: ``fp8_mqa_logits.gfx950.hsaco`` (one symbol per instance), ``fp8_mqa_logits.gfx942.hsaco`` (the
  same source for MI300X / MI325X through kernels/target.h: the seed design, each instance for e4m3fnuz
  inputs and for e4m3fn inputs read in place, symbol suffix _fn), ``fp8_mqa_logits.sm90a.cubin``,
  ``manifest.json`` (per symbol: template parameters, kernarg layout, launch bounds and the resources
  read back from the binary itself; per target: the toolchain that built it)
* build/: ``fp8_mqa_logits.gfx950.s`` (the assembly of that same compile, -save-temps; the static
  profile and tests read it), ``fp8_mqa_logits.sm90a.ptxas.txt`` (the -Xptxas -v report), the lld shim.

Toolchains, all from PyPI on a CPU-only machine:
* gfx950: ``hipcc`` when it is on PATH (a ROCm machine); otherwise clang 22 from the pinned ``ziglang``
  package, which carries the AMDGPU backend and lld. Same source, same flags.
* sm_90a: ``nvcc`` when it is on PATH; otherwise the pinned NVIDIA PyPI wheels (``CUDA_PYPI_PINS``:
  nvcc + cudafe++ + ptxas, cicc, the crt and runtime headers), installed into this Python when missing.
  ``RAWINDEXER_FORCE_PYPI_NVCC=1`` takes the PyPI toolkit even where nvcc is on PATH (to test it);
  the host compiler nvcc preprocesses with (gcc/g++) must be on PATH either way.

The Makefile calls this only when a kernel source or this file changed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rawindexer import registry

ROOT = Path(__file__).resolve().parent
KERNEL_SOURCE = ROOT / "kernels" / "fp8_mqa_logits.hip"
ARCH = "gfx950"
ZIGLANG_PIN = "ziglang==0.17.1"

# Common flags; -fno-honor-nans makes ReLU a single v_max_f32 (the seed measured the IEEE
# canonicalize it otherwise needs at ~27% of the kernel's VALU).
HIP_FLAGS = [
    "-x", "hip", f"--offload-arch={ARCH}", "--offload-device-only", "--no-gpu-bundle-output",
    "-nogpulib", "-nogpuinc", "-O3", "-std=c++17", "-fno-honor-nans",
]


# The gfx instances: declared once, in rawindexer/registry.py (design x (heads, head_dim, block_m, unroll) x
# input format).
GfxInstance = registry.GfxInstance
MRF_3_WAVES = registry.MRF_3_WAVES
#: the gfx kernel's targets: the instances each builds from kernels/fp8_mqa_logits.hip
GFX_TARGETS: dict[str, tuple[GfxInstance, ...]] = {"gfx950": registry.GFX950_INSTANCES,
                                                   "gfx942": registry.GFX942_INSTANCES}

# Explicit kernel arguments, in order (must match INSTANTIATE in the source). The manifest takes the
# offsets and sizes from the code object and checks them against these names and sizes.
KERNEL_ARGS = [
    ("q", 8), ("k", 8), ("kv_scale", 8), ("weights", 8), ("cu_seqlen_ks", 8), ("cu_seqlen_ke", 8),
    ("out", 8), ("out_row_stride", 8), ("M", 4), ("N", 4), ("split_n", 4), ("num_warps", 4), ("flags", 4),
]


# ---------------------------------------------------------------------------------------------------
# Toolchain
# ---------------------------------------------------------------------------------------------------
def _ensure_ziglang() -> None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", ZIGLANG_PIN])


def _lld_shim(tool_dir: Path) -> Path:
    """clang's HIP driver calls `lld -flavor gnu ...`; ziglang ships it as `python -m ziglang ld.lld`."""
    tool_dir.mkdir(parents=True, exist_ok=True)
    shim = tool_dir / "lld"
    text = f'#!/bin/sh\nif [ "$1" = "-flavor" ]; then shift 2; fi\nexec "{sys.executable}" -m ziglang ld.lld "$@"\n'
    if not shim.exists() or shim.read_text() != text:
        shim.write_text(text)
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return tool_dir


def toolchain(tool_dir: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """(compiler command prefix, environment). hipcc if present, else the ziglang clang."""
    env = dict(os.environ)
    hipcc = shutil.which("hipcc")
    if hipcc and not os.environ.get("RAWINDEXER_FORCE_ZIGLANG"):
        return [hipcc], env
    _ensure_ziglang()
    shim_dir = _lld_shim(tool_dir or ROOT / "build" / "toolchain")
    env["PATH"] = f"{shim_dir}{os.pathsep}{env.get('PATH', '')}"
    return [sys.executable, "-m", "ziglang", "clang"], env


def hip_flags(arch: str = ARCH) -> list[str]:
    """HIP_FLAGS for ``arch`` (the same flags, another --offload-arch)."""
    return [f"--offload-arch={arch}" if f.startswith("--offload-arch=") else f for f in HIP_FLAGS]


def compile_hip(source: Path, out: Path, defines: list[str] = (), asm: Path | None = None,
                extra_flags: list[str] = (), arch: str = ARCH) -> None:
    """Compile one HIP source to a code object ``out`` for ``arch`` (and its assembly ``asm``)."""
    cc, env = toolchain()
    out.parent.mkdir(parents=True, exist_ok=True)
    if asm is not None:
        asm.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rawindexer-build-") as tmp:
        cmd = [*cc, *hip_flags(arch), *extra_flags, *[f"-D{d}" for d in defines],
               f"-save-temps={'obj'}", "-o", str(Path(tmp) / out.name), str(source)]
        subprocess.run(cmd, check=True, env=env, cwd=tmp)
        shutil.move(str(Path(tmp) / out.name), out)
        if asm is not None:
            (s_file,) = Path(tmp).glob(f"*{arch}*.s")
            shutil.move(str(s_file), asm)


# ---------------------------------------------------------------------------------------------------
# Manifest
# ---------------------------------------------------------------------------------------------------
def waves_per_simd(vgprs: int, agprs: int, accum_offset: int) -> int:
    """Occupancy limit from the unified 512-entry register file of gfx90a+ (granule 8)."""
    total = (accum_offset + agprs) if agprs else vgprs
    total = max(8, -(-total // 8) * 8)
    return min(8, 512 // total)


def gfx_kernel_entry(symbol: str, kernel, kernel_args: list[tuple[str, int]], params: dict,
                     wavefront_size: bool = True) -> dict:
    """A gfx kernel's manifest entry: ``params``, then the kernarg layout (checked against the names and sizes
    the host packs) and the resources, all read from the code object's own metadata."""
    meta, args = kernel.metadata, kernel.args
    if len(args) != len(kernel_args) or any(a[".size"] != size for a, (_, size) in zip(args, kernel_args)):
        raise RuntimeError(f"{symbol}: kernarg layout in the code object does not match the host's argument list")
    vgpr, agpr = meta[".vgpr_count"], meta.get(".agpr_count", 0)
    entry = {
        "params": params,
        "args": [{"name": name, "offset": a[".offset"], "size": a[".size"]} for (name, _), a in zip(kernel_args, args)],
        "kernarg_size": meta[".kernarg_segment_size"],
        "kernarg_align": meta[".kernarg_segment_align"],
        "max_flat_workgroup_size": meta[".max_flat_workgroup_size"],
    }
    if wavefront_size:
        entry["wavefront_size"] = meta[".wavefront_size"]
    entry["resources"] = {
        "vgpr": vgpr, "agpr": agpr, "sgpr": meta[".sgpr_count"],
        "vgpr_spill": meta.get(".vgpr_spill_count", 0), "sgpr_spill": meta.get(".sgpr_spill_count", 0),
        "lds": meta[".group_segment_fixed_size"], "scratch": meta[".private_segment_fixed_size"],
        "waves_per_simd": waves_per_simd(vgpr, agpr, kernel.descriptor.accum_offset),
    }
    return entry


def manifest_entry(instance: GfxInstance, kernel) -> dict:
    return gfx_kernel_entry(instance.symbol, kernel, KERNEL_ARGS, {
        "heads": instance.heads, "head_dim": instance.head_dim, "block_m": instance.block_m, "unroll": instance.unroll,
        "design": instance.design, "fp8_format": instance.fp8_format})


def build(out_dir: Path, instances: Sequence[GfxInstance] | None = None, kernel_dir: Path | None = None,
          arch: str = ARCH) -> Path:
    """Compile ``instances`` (default: the target's list in GFX_TARGETS) for ``arch``: code object + manifest
    into ``kernel_dir`` (default: ``out_dir``), the assembly into ``out_dir``. Returns the manifest's path."""
    from rawindexer.codeobject import CodeObject

    instances = GFX_TARGETS[arch] if instances is None else instances
    kernel_dir = kernel_dir or out_dir
    hsaco = kernel_dir / f"fp8_mqa_logits.{arch}.hsaco"
    asm = out_dir / f"fp8_mqa_logits.{arch}.s"

    def table(design: str, fn: bool = False, three_waves: bool | None = None) -> str:
        """X(H, D, BLOCK_M[, UNROLL]) of the instances of ``design``; ``three_waves``: mrf's attribute split."""
        chosen = [v for v in instances if v.design == design and v.fn_on_fnuz == fn and
                  (three_waves is None or ((v.heads, v.head_dim, v.block_m) in MRF_3_WAVES) == three_waves)]
        args = ((v.heads, v.head_dim, v.block_m) + ((v.unroll,) if design == "seed" else ()) for v in chosen)
        return " ".join(f"X({','.join(map(str, a))})" for a in args)

    compile_hip(KERNEL_SOURCE, hsaco, asm=asm, arch=arch, defines=[
        f"SEED_INSTANCES(X)={table('seed')}", f"SEED_FN_INSTANCES(X)={table('seed', True)}",
        f"MR_INSTANCES(X)={table('mr')}", f"MRP_INSTANCES(X)={table('mrp')}",
        f"MRF_INSTANCES(X)={table('mrf', three_waves=False)}", f"MRF3_INSTANCES(X)={table('mrf', three_waves=True)}"])

    co = CodeObject(hsaco.read_bytes())
    target = {
        "code_object": hsaco.name,
        "assembly": asm.name,  # an intermediate: in build/ of the checkout that built it, not shipped
        "toolchain": "hipcc" if toolchain()[0][0].endswith("hipcc") else ZIGLANG_PIN,
        "flags": hip_flags(arch),
        "kernels": {v.symbol: manifest_entry(v, co.kernels[v.symbol]) for v in instances},
    }
    return write_manifest(kernel_dir, arch, target)


def write_manifest(out_dir: Path, arch: str, target: dict) -> Path:
    """Merge one target's entry into ``out_dir``/manifest.json: {"targets": {arch: {...}}}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest.setdefault("targets", {})[arch] = target
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path


# ===================================================================================================
# sm_90a (Hopper) -- the CUDA twin, kernels/fp8_mqa_logits_sm90.cu. Separate from the gfx950 code above:
# built by `python build.py --target sm_90a` (the Makefile always does: nvcc from PATH or from PyPI).
# Outputs: <kernels>/fp8_mqa_logits.sm90a.cubin, the manifest's "sm_90a" target, and
# build/fp8_mqa_logits.sm90a.ptxas.txt (the -Xptxas -v report). Kernarg offsets and sizes are read back from the cubin's
# .nv.info (EIATTR_KPARAM_INFO), registers / spills / stack / shared memory from ptxas -v.
# ===================================================================================================
SM90_ARCH = "sm_90a"
SM90_SOURCE = ROOT / "kernels" / "fp8_mqa_logits_sm90.cu"
SM90_CUBIN = "fp8_mqa_logits.sm90a.cubin"
SM90_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-cubin", "-Xptxas", "-v"]
SM90_MAX_THREADS = 256  # __launch_bounds__ in the source


# The sm_90a instances: declared once, in rawindexer/registry.py (SM90_INSTANCES); bench/exp_sm90.py and
# bench/race_sm90.py build registry.Sm90Instance lists of experiment designs on request.
#: designs whose kernels take K's CUtensorMap (128 opaque bytes, 64-byte aligned) after KERNEL_ARGS
SM90_TENSOR_MAP_ARGS = [("k_map", 128)]
#: and those that also take Q's (after K's)
SM90_Q_TENSOR_MAP_ARGS = [("q_map", 128)]


def sm90_kernel_args(design: str) -> list[tuple[str, int]]:
    """The (name, size) parameter list of an sm_90a design's kernels, in order."""
    params = registry.SM90_DESIGNS[design].params
    return (KERNEL_ARGS + (SM90_TENSOR_MAP_ARGS if params.get("k_tensor_map") else [])
            + (SM90_Q_TENSOR_MAP_ARGS if params.get("q_tensor_map") else []))


# ---------------------------------------------------------------------------------------------------
# sm_90a toolchain: nvcc on PATH, else NVIDIA's PyPI wheels
# ---------------------------------------------------------------------------------------------------
#: 13.0.88 is the toolkit of the H200 this project measures on (driver: CUDA 13.0), so a cubin built
#: from these wheels needs no newer driver than that and is byte-identical to that toolkit's build
#: (checked on this machine against /usr/local/bin/nvcc 13.0.88). Download ~101 MB (nvcc 37 MB, nvvm
#: 62 MB, runtime 2.2 MB, crt 0.1 MB), ~253 MB installed. Keep pyproject.toml's `build` extra equal.
CUDA_PYPI_VERSION = "13.0.88"
CUDA_PYPI_PINS = [f"{name}=={CUDA_PYPI_VERSION}" for name in
                  ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime")]
FORCE_PYPI_NVCC_ENV = "RAWINDEXER_FORCE_PYPI_NVCC"
#: where the wheels put the toolkit, relative to site-packages: bin/nvcc, nvvm/bin/cicc, include/
CUDA_PYPI_SUBDIR = Path("nvidia") / "cu13"


@dataclass(frozen=True)
class CudaToolchain:
    """How to run nvcc: the executable, extra flags (include dirs the wheel layout needs) and where it
    came from ("PATH" or "PyPI"), for the manifest."""

    nvcc: str
    extra_flags: tuple[str, ...]
    origin: str


def pypi_cuda_root(search_paths: list[str] | None = None) -> Path | None:
    """The toolkit folder the NVIDIA wheels installed (``site-packages/nvidia/cu13``) if it holds nvcc."""
    for base in search_paths if search_paths is not None else sys.path:
        root = Path(base or ".") / CUDA_PYPI_SUBDIR
        if (root / "bin" / "nvcc").is_file():
            return root
    return None


def select_cuda_toolchain(path_nvcc: str | None, pypi_root: Path | None, force_pypi: bool) -> CudaToolchain | None:
    """The choice alone (no side effects): nvcc on PATH wins unless ``force_pypi``; otherwise the PyPI
    toolkit when installed; None means "install the PyPI pins, then ask again"."""
    if path_nvcc and not force_pypi:
        return CudaToolchain(path_nvcc, (), "PATH")
    if pypi_root is not None:
        # nvcc.profile looks for headers under targets/<arch>/include, which the wheels do not have
        return CudaToolchain(str(pypi_root / "bin" / "nvcc"), (f"-I{pypi_root / 'include'}",), "PyPI")
    return None


def _pypi_pins_installed() -> bool:
    from importlib import metadata

    try:
        return all(metadata.version(pin.split("==")[0]) == pin.split("==")[1] for pin in CUDA_PYPI_PINS)
    except metadata.PackageNotFoundError:
        return False


def cuda_toolchain() -> CudaToolchain:
    """nvcc from PATH, else the pinned PyPI toolkit (installed into this Python when missing or at
    another version)."""
    force = os.environ.get(FORCE_PYPI_NVCC_ENV, "") not in ("", "0")
    path_nvcc = shutil.which("nvcc")
    chosen = select_cuda_toolchain(path_nvcc, pypi_cuda_root() if _pypi_pins_installed() else None, force)
    if chosen is None:
        print(f"nvcc {'ignored (' + FORCE_PYPI_NVCC_ENV + ')' if path_nvcc else 'not on PATH'}: installing "
              f"{' '.join(CUDA_PYPI_PINS)} into {sys.executable}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *CUDA_PYPI_PINS])
        import importlib
        importlib.invalidate_caches()
        chosen = select_cuda_toolchain(path_nvcc, pypi_cuda_root(), force)
        if chosen is None:
            raise RuntimeError(f"installed {CUDA_PYPI_PINS} but found no {CUDA_PYPI_SUBDIR}/bin/nvcc on sys.path")
    return chosen


def nvcc_release(nvcc: str) -> str:
    """The toolkit version, e.g. "13.0.88", from `nvcc --version` ("... release 13.0, V13.0.88")."""
    import re

    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release [\d.]+, V([\d.]+)", text)
    if not m:
        raise RuntimeError(f"{nvcc} --version: no release line in {text!r}")
    return m.group(1)


def parse_ptxas_report(text: str) -> dict[str, dict]:
    """Per kernel: registers, spill stores/loads, stack frame and static shared memory from -Xptxas -v."""
    import re

    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            current["smem"] = int(sm.group(1)) if sm else 0
            lm = re.search(r"(\d+) bytes lmem", line)
            current["lmem"] = int(lm.group(1)) if lm else 0
    return out


def cubin_kernel_params(image: bytes) -> dict[str, dict]:
    """Per kernel symbol: {"args": [(offset, size) by ordinal], "kernarg_size", "max_threads"} from the ELF's
    .nv.info.<sym> ("max_threads": __launch_bounds__'s threads per block, EIATTR_MAX_THREADS x * y * z; None where
    the kernel declares none)."""
    import struct

    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    strtab = sections[shstrndx][4]

    def name_of(off: int) -> str:
        end = image.index(b"\0", strtab + off)
        return image[strtab + off:end].decode()

    EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
    EIATTR_KPARAM_INFO, EIATTR_PARAM_CBANK, EIATTR_MAX_THREADS = 0x17, 0x0A, 0x05
    result: dict[str, dict] = {}
    for sh in sections:
        name = name_of(sh[0])
        if not name.startswith(".nv.info."):
            continue
        sym, off, size = name[len(".nv.info."):], sh[4], sh[5]
        params: dict[int, tuple[int, int]] = {}
        total = max_threads = None
        p = off
        while p < off + size:
            fmt, attr = image[p], image[p + 1]
            if fmt == EIFMT_SVAL:
                n = struct.unpack_from("<H", image, p + 2)[0]
                val, p = image[p + 4:p + 4 + n], p + 4 + n
            elif fmt == EIFMT_HVAL:
                val, p = image[p + 2:p + 4], p + 4
            elif fmt == EIFMT_BVAL:
                val, p = image[p + 2:p + 4], p + 4
            else:
                val, p = b"", p + 2
            if attr == EIATTR_KPARAM_INFO:
                _, ordinal, offset, flags = struct.unpack("<IHHI", val)
                params[ordinal] = (offset, (flags >> 18) & 0x3FFF)
            elif attr == EIATTR_PARAM_CBANK:
                total = struct.unpack("<IHH", val)[2]
            elif attr == EIATTR_MAX_THREADS:
                x, y, z = struct.unpack("<III", val)
                max_threads = x * y * z
        if params:
            result[sym] = {"args": [params[i] for i in sorted(params)], "kernarg_size": total,
                           "max_threads": max_threads}
    return result


def nvcc_cubin(tools: "CudaToolchain", source: Path | str, macros: dict[str, str], cubin: Path) -> str:
    """Compile ``source`` for sm_90a into ``cubin`` with each ``name(X)`` of ``macros`` defined as its instance list;
    returns nvcc's report (ptxas -v). nvcc splits -D values on commas, so the lists travel in a wrapper source."""
    if shutil.which("g++") is None:  # ziglang's clang++ is no substitute: CUDA's headers reject its libc++
        raise RuntimeError("nvcc needs a host C++ compiler on PATH for its preprocessing: install g++ "
                           "(e.g. apt-get install g++)")
    with tempfile.TemporaryDirectory(prefix="rawindexer-sm90-") as tmp:
        wrapper = Path(tmp) / "instances.cu"
        defines = "".join(f"#define {name}(X) {table}\n" for name, table in macros.items())
        wrapper.write_text(f"{defines}#include \"{source}\"\n")
        tmp_cubin = Path(tmp) / cubin.name
        proc = subprocess.run([tools.nvcc, *tools.extra_flags, *SM90_FLAGS, "-o", str(tmp_cubin), str(wrapper)],
                              capture_output=True, text=True)
        report = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed:\n{report}")
        shutil.move(str(tmp_cubin), cubin)
    return report


def build_sm90(out_dir: Path, instances: Sequence[registry.Sm90Instance] = registry.SM90_INSTANCES,
               kernel_dir: Path | None = None, tools: CudaToolchain | None = None, source: Path = SM90_SOURCE) -> Path:
    """Compile every sm_90a instance into one cubin (into ``kernel_dir``, default ``out_dir``) and merge
    its manifest target; the ptxas report goes into ``out_dir``. Returns the manifest's path. ``source``:
    the shipped kernels by default; bench/exp_sm90.py passes the experiments' source (built on request)."""
    tools = tools or cuda_toolchain()
    kernel_dir = kernel_dir or out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    kernel_dir.mkdir(parents=True, exist_ok=True)
    cubin = kernel_dir / SM90_CUBIN
    table = " ".join(f"X({v.heads},{v.head_dim},{v.block_m},{v.design})" for v in instances)
    report = nvcc_cubin(tools, source, {"INSTANCES": table}, cubin)
    (out_dir / "fp8_mqa_logits.sm90a.ptxas.txt").write_text(report)
    resources = parse_ptxas_report(report)
    params = cubin_kernel_params(cubin.read_bytes())
    release = nvcc_release(tools.nvcc)

    kernels = {}
    for v in instances:
        layout = params[v.symbol]
        args = sm90_kernel_args(v.design)
        if len(layout["args"]) != len(args) or any(
                size != want for (_, size), (_, want) in zip(layout["args"], args)):
            raise RuntimeError(f"{v.symbol}: parameter layout in the cubin does not match {args}")
        kernels[v.symbol] = {
            "params": {"heads": v.heads, "head_dim": v.head_dim, "block_m": v.block_m, "design": v.design},
            "args": [{"name": name, "offset": off, "size": size}
                     for (name, _), (off, size) in zip(args, layout["args"])],
            "kernarg_size": layout["kernarg_size"],
            "kernarg_align": 8,
            "max_threads": SM90_MAX_THREADS,
            "warp_size": 32,
            "resources": resources[v.symbol],
        }
    origin = "PyPI nvidia-cuda-nvcc" if tools.origin == "PyPI" else tools.nvcc
    target = {"code_object": cubin.name,
              "ptxas_report": "fp8_mqa_logits.sm90a.ptxas.txt",  # an intermediate, in build/
              "toolchain": f"nvcc {release} ({origin})",
              # a cubin runs on drivers of the same CUDA major at or above this (minor-version compatibility)
              "cuda_version": ".".join(release.split(".")[:2]),
              "flags": SM90_FLAGS, "kernels": kernels}
    return write_manifest(kernel_dir, SM90_ARCH, target)


def main_sm90(out_dir: Path, kernel_dir: Path) -> None:
    path = build_sm90(out_dir, kernel_dir=kernel_dir)
    target = json.loads(path.read_text())["targets"][SM90_ARCH]
    kernels = target["kernels"]
    print(f"built {len(kernels)} sm_90a kernels with {target['toolchain']} -> {path.parent}")
    for name, k in kernels.items():
        r = k["resources"]
        print(f"  {name:40s} regs={r['registers']:3d} spill={r['spill_stores'] + r['spill_loads']} "
              f"stack={r['stack_frame']} smem={r['smem']}")


# ===================================================================================================
# fp8_paged_mqa_logits (decode) -- its own code object per target and its own manifest section
# {"ops": {"fp8_paged_mqa_logits": {arch: {...}}}}; what is built is declared in rawindexer/paged_kernels.py.
# `python build.py --op fp8_paged_mqa_logits [--target gfx950]`.
# ===================================================================================================
def write_op_manifest(out_dir: Path, op: str, arch: str, target: dict) -> Path:
    """Merge one op's target into build/manifest.json without touching the prefill targets."""
    path = out_dir / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest.setdefault("ops", {}).setdefault(op, {})[arch] = target
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path


def build_paged_gfx950(out_dir: Path, kernel_dir: Path, arch: str = ARCH) -> Path:
    """The paged kernel for a gfx target (gfx950, gfx942): every instance of each of the target's designs."""
    sys.path.insert(0, str(ROOT))
    from rawindexer import paged_kernels as pk
    from rawindexer.codeobject import CodeObject

    spec = pk.TARGETS[arch]
    kernel_dir.mkdir(parents=True, exist_ok=True)
    hsaco = kernel_dir / spec.code_object
    asm = out_dir / (Path(spec.code_object).stem + ".s")
    table = " ".join(f"X({i.heads},{i.head_dim},{i.block_size})" for i in spec.instances)
    defines = [f"{spec.instance_macro}(X)={table}"]
    if "fn" in spec.designs:
        defines.append(f"{spec.fn_instance_macro}(X)={table}")
    compile_hip(spec.source, hsaco, asm=asm, defines=defines, arch=arch)
    co = CodeObject(hsaco.read_bytes())
    kernels = {}
    for inst, design in ((i, d) for d in spec.designs for i in spec.instances):
        symbol = spec.symbol(inst, design)
        kernels[symbol] = gfx_kernel_entry(symbol, co.kernels[symbol], pk.KERNEL_ARGS, {
            **inst.params, "design": design,
            "fp8_format": next((f for f, d in (spec.format_designs or {"e4m3fn": design}).items() if d == design),
                               "e4m3fn")}, wavefront_size=False)
    target = {"code_object": hsaco.name, "assembly": asm.name, "design": spec.summary,
              "toolchain": "hipcc" if toolchain()[0][0].endswith("hipcc") else ZIGLANG_PIN, "flags": hip_flags(arch),
              "kernels": kernels}
    return write_op_manifest(kernel_dir, pk.OP, arch, target)


def build_paged_sm90(out_dir: Path, kernel_dir: Path, tools: CudaToolchain | None = None) -> Path:
    """The sm_90a twin into its own cubin (nvcc), resources from ptxas -v, kernarg layout from .nv.info."""
    sys.path.insert(0, str(ROOT))
    from rawindexer import paged_kernels as pk

    tools = tools or cuda_toolchain()
    spec = pk.TARGETS[SM90_ARCH]
    out_dir.mkdir(parents=True, exist_ok=True)
    kernel_dir.mkdir(parents=True, exist_ok=True)
    cubin = kernel_dir / spec.code_object
    report_name = Path(spec.code_object).stem + ".ptxas.txt"
    table = " ".join(f"X({i.heads},{i.head_dim},{i.block_size})" for i in spec.instances)
    # designs with their own instance macro (X(H, D) of the block sizes they are built for, e.g. decode "tma")
    macros = {spec.instance_macro: table}
    macros.update({macro: " ".join(f"X({i.heads},{i.head_dim})" for i in spec.instances_of(d))
                   for d, macro in (spec.design_instance_macros or {}).items()})
    report = nvcc_cubin(tools, spec.source, macros, cubin)
    (out_dir / report_name).write_text(report)
    resources = parse_ptxas_report(report)
    params = cubin_kernel_params(cubin.read_bytes())
    version = f"nvcc {nvcc_release(tools.nvcc)}"
    kernels = {}
    for inst, design in ((i, d) for i in spec.instances for d in spec.designs if i in spec.instances_of(d)):
        symbol = spec.symbol(inst, design)
        # per_next_n: the cubin holds symbol_n1.._n4; the entry reports the largest resources and each one's
        by_next_n = {n: resources[spec.launch_symbol(symbol, n)] for n in range(1, pk.MAX_NEXT_N + 1)}
        # threads per block of each next_n's kernel: its __launch_bounds__ (a design may give next_n kernels their
        # own block size; session 6's register split took 256 threads), else the design's
        for n, r in by_next_n.items():
            r["max_threads"] = params[spec.launch_symbol(symbol, n)]["max_threads"] or spec.threads(design)
        layout = params[spec.launch_symbol(symbol, 1)]
        want_args = spec.kernel_args(design)
        if len(layout["args"]) != len(want_args) or any(
                size != want for (_, size), (_, want) in zip(layout["args"], want_args)):
            raise RuntimeError(f"{symbol}: parameter layout in the cubin does not match paged_kernels.KERNEL_ARGS "
                               f"(+ the design's extra arguments)")
        kernels[symbol] = {
            "params": {**inst.params, "design": design},
            "args": [{"name": name, "offset": off, "size": size}
                     for (name, _), (off, size) in zip(want_args, layout["args"])],
            "kernarg_size": layout["kernarg_size"], "kernarg_align": 8, "max_threads": spec.threads(design),
            "warp_size": 32,
            "resources": {k: max(r[k] for r in by_next_n.values()) for k in by_next_n[1]},
        }
        if spec.per_next_n:
            kernels[symbol]["resources_by_next_n"] = {str(n): r for n, r in by_next_n.items()}
    target = {"code_object": cubin.name, "ptxas_report": report_name, "design": spec.summary, "toolchain": version,
              "flags": SM90_FLAGS, "kernels": kernels}
    return write_op_manifest(kernel_dir, pk.OP, SM90_ARCH, target)


def main_paged(out_dir: Path, kernel_dir: Path, target: str) -> None:
    if target == SM90_ARCH:
        path = build_paged_sm90(out_dir, kernel_dir)
        kernels = json.loads(path.read_text())["ops"]["fp8_paged_mqa_logits"][SM90_ARCH]["kernels"]
        print(f"built {len(kernels)} sm_90a fp8_paged_mqa_logits kernels -> {path.parent}")
        for name, k in kernels.items():
            r = k["resources"]
            print(f"  {name:45s} regs={r['registers']:3d} spill={r['spill_stores'] + r['spill_loads']} "
                  f"stack={r['stack_frame']}")
        return
    path = build_paged_gfx950(out_dir, kernel_dir, target)
    kernels = json.loads(path.read_text())["ops"]["fp8_paged_mqa_logits"][target]["kernels"]
    print(f"built {len(kernels)} {target} fp8_paged_mqa_logits kernels -> {path.parent}")
    for name, k in kernels.items():
        r = k["resources"]
        print(f"  {name:40s} vgpr={r['vgpr']:3d} agpr={r['agpr']:3d} sgpr={r['sgpr']:3d} "
              f"spill={r['vgpr_spill'] + r['sgpr_spill']} scratch={r['scratch']} waves/simd={r['waves_per_simd']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build", help="intermediate files (default: build/)")
    parser.add_argument("--kernels", type=Path, default=ROOT / "rawindexer" / "_kernels",
                        help="code objects + manifest.json, shipped as package data (default: rawindexer/_kernels)")
    parser.add_argument("--target", choices=[*GFX_TARGETS, SM90_ARCH], default=ARCH)
    parser.add_argument("--op", choices=["fp8_mqa_logits", "fp8_paged_mqa_logits"], default="fp8_mqa_logits")
    args = parser.parse_args()
    if args.op == "fp8_paged_mqa_logits":
        return main_paged(args.out, args.kernels, args.target)
    if args.target == SM90_ARCH:
        return main_sm90(args.out, args.kernels)
    path = build(args.out, kernel_dir=args.kernels, arch=args.target)
    kernels = json.loads(path.read_text())["targets"][args.target]["kernels"]
    print(f"built {len(kernels)} {args.target} kernels -> {path.parent}")
    for name, k in kernels.items():
        r = k["resources"]
        print(f"  {name:36s} vgpr={r['vgpr']:3d} agpr={r['agpr']:3d} sgpr={r['sgpr']:3d} "
              f"spill={r['vgpr_spill'] + r['sgpr_spill']} scratch={r['scratch']} waves/simd={r['waves_per_simd']}")


if __name__ == "__main__":
    main()
