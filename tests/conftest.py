"""Shared fixtures. The suite tests the *installed* package: `import rawindexer` resolves to whatever pip
installed (the wheel in a fresh environment in CI, the editable checkout under `make test`). Files of the
repository that are not part of the package -- build.py, the intermediates `make` leaves in build/ -- are
located explicitly from REPO, never by putting the repository on sys.path."""
import importlib.util
import os
import secrets
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
#: intermediates of `make` (the gfx950 assembly, the ptxas report): static tests read them from the checkout
BUILD = REPO / "build"
#: CI sets this to 1: the suite then refuses to run against the source tree instead of the installed wheel
INSTALLED_ONLY_ENV = "RAWINDEXER_TEST_INSTALLED"


def _load_repo_script(name: str) -> None:
    """Import REPO/<name>.py as module ``name`` (build.py would otherwise also find PyPA's `build`)."""
    spec = importlib.util.spec_from_file_location(name, REPO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_load_repo_script("build")


def pytest_report_header(config):
    import rawindexer
    from rawindexer.kernel_files import kernel_dir, kernel_source

    return [f"rawindexer {rawindexer.__version__} imported from {Path(rawindexer.__file__).parent}",
            f"kernels: {kernel_dir()} ({kernel_source()})"]


def pytest_sessionstart(session):
    import rawindexer

    package = Path(rawindexer.__file__).resolve().parent
    if os.environ.get(INSTALLED_ONLY_ENV) == "1" and REPO in package.parents:
        raise pytest.UsageError(f"{INSTALLED_ONLY_ENV}=1 but rawindexer was imported from the checkout ({package}): "
                                "run pytest from outside the repository with the installed package")


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Fresh random inputs every run; the seed is printed so a failure can be replayed."""
    seed = secrets.randbits(63)
    print(f"[{request.node.name}] rng seed = {seed}")
    return np.random.default_rng(seed)


def pytest_configure(config):
    # pyproject.toml declares the other markers; this one belongs to tests/gpu/test_two_gpus.py
    config.addinivalue_line("markers", "two_gpus: needs two CUDA GPUs of one host (run on nvidia-h200-x2)")
