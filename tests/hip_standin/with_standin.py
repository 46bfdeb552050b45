"""Run a Python script with the hip stand-in installed in its process:

    python tests/hip_standin/with_standin.py run.py --device hip --M 16 --N 128 --iters 1

The stand-in is loaded before the script's first HIP call, so hip-python binds to it (see runtime.py)."""
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `hip_standin`
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `rawindexer`

from hip_standin import runtime  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runtime.install()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
