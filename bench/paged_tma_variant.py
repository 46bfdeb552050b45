"""Build a measurement variant of the sm_90a decode kernels into its own kernel directory (for bench/paged_ab.py):
the cubin of kernels/fp8_paged_mqa_logits_sm90.cu with extra -D macros (the experiment macros of
kernels/sm90/paged_tma.cuh), only the instances the A/B times (D = 128, block size 64, H 32, 64, 128).

    python bench/paged_tma_variant.py DST [SRC=rawindexer/_kernels] [--all] [-DNAME=VALUE ...]

DST starts as a copy of SRC (a full kernel directory: the other ops' code objects and manifest sections); the decode
section is rebuilt (--all: every instance of the shipped list, D = 64 too, as the GPU sweep needs).
-DPAGED_TMA_PERSISTENT=1 (the persistent grid) and -DPAGED_TMA_WG4=1 (its four-warpgroup form) add the kernels'
`batch` argument to the design's declared list, so the build's argument check and the host's is_persistent see it.
Prints each tma kernel's registers and spills per next_n. Intermediate files: /tmp/varbuild/DST.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import build  # noqa: E402
from rawindexer import paged_kernels as pk  # noqa: E402


def main(argv: list[str]) -> None:
    defines = [a for a in argv if a.startswith("-D")]
    paths = [a for a in argv if not a.startswith("-")]
    dst = Path(paths[0])
    src = Path(paths[1]) if len(paths) > 1 else ROOT / "rawindexer" / "_kernels"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    target = pk.TARGETS["sm_90a"]
    if "--all" not in argv:
        target = dataclasses.replace(target, instances=tuple(pk.PagedInstance(h, 128, 64) for h in (32, 64, 128)))
    persistent = ("-DPAGED_TMA_PERSISTENT=1", "-DPAGED_TMA_PERSISTENT", "-DPAGED_TMA_WG4=1", "-DPAGED_TMA_WG4")
    if any(d.replace(" ", "") in persistent for d in defines):
        extra = dict(target.design_extra_args or {})
        extra["tma"] = (*extra.get("tma", ()), ("batch", 4))
        target = dataclasses.replace(target, design_extra_args=extra)
    pk.TARGETS["sm_90a"] = target
    tools = build.cuda_toolchain()
    tools = dataclasses.replace(tools, extra_flags=(*tools.extra_flags, *defines))
    path = build.build_paged_sm90(Path("/tmp/varbuild") / dst.name, dst, tools)
    kernels = json.loads(path.read_text())["ops"][pk.OP]["sm_90a"]["kernels"]
    for name, k in kernels.items():
        if k["params"]["design"] == "tma":
            regs = {n: (r["registers"], r["spill_stores"] + r["spill_loads"]) for n, r in k["resources_by_next_n"].items()}
            print(f"{dst.name} {name}: (registers, spills) by next_n {regs}")


if __name__ == "__main__":
    main(sys.argv[1:])
