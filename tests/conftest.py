import secrets
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # build.py lives at the repo root


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Fresh random inputs every run; the seed is printed so a failure can be replayed."""
    seed = secrets.randbits(63)
    print(f"[{request.node.name}] rng seed = {seed}")
    return np.random.default_rng(seed)


def pytest_configure(config):
    # pyproject.toml declares the other markers; this one belongs to tests/test_two_gpus.py
    config.addinivalue_line("markers", "two_gpus: needs two CUDA GPUs of one host (run on nvidia-h200-x2)")
