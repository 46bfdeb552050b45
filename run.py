#!/usr/bin/env python3
"""The README's entry: ``make && python run.py [--device hip|cuda|emulator] [--M 2048 --N 65536] [--heads 32]``.

Runs one realistic vLLM-style prefill chunk through rawindexer and grades it: the same as
``python -m rawindexer run`` (rawindexer/chunk.py says what it does), from this checkout. Builds the kernels
first (``make``) when this checkout has none yet.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
KERNELS = ROOT / "rawindexer" / "_kernels" / "manifest.json"


def main() -> int:
    if not KERNELS.exists():
        print("rawindexer/_kernels is empty: running make", file=sys.stderr)
        subprocess.check_call(["make", "-C", str(ROOT), f"PYTHON={sys.executable}"])
    from rawindexer.cli import main as cli_main  # this checkout's package: run.py's folder leads sys.path

    return cli_main(["run", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
