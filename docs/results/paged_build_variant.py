"""Build a measurement variant of the sm_90a decode kernel into its own kernel directory (for
docs/results/paged_variants.py): only the instances the harness times (D = 128, block size 64, H 32 and 64).

    python docs/results/paged_build_variant.py .carry/var_NAME rawindexer/_kernels

The directory starts as a copy of the second argument (a full kernel directory: the other ops' code objects and
manifest sections), then gets the decode cubin of the kernel source as it is now (edit PAGED_PIPELINE,
PAGED_PIPE_MAX_N or STAGES in kernels/fp8_paged_mqa_logits_sm90.cu first, restore after). Intermediate files go
to /tmp/varbuild/NAME.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import build  # noqa: E402
from rawindexer import paged_kernels as pk  # noqa: E402


def main(dst: Path, src: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    target = pk.TARGETS["sm_90a"]
    pk.TARGETS["sm_90a"] = dataclasses.replace(
        target, instances=tuple(pk.PagedInstance(h, 128, 64) for h in (32, 64)))
    build.build_paged_sm90(Path("/tmp/varbuild") / dst.name, dst)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
