"""Where the shipped kernels live: code objects + ``manifest.json``, as package data.

The build (``make``, i.e. ``build.py``) writes them into ``rawindexer/_kernels/``; a wheel carries
that folder, so an installed package finds its kernels through ``importlib.resources`` and never
looks at a source checkout. A developer points at another build with an explicit directory
(argument) or the ``RAWINDEXER_KERNEL_DIR`` environment variable, in that order of precedence.
"""
from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from .errors import KernelNotBuiltError  # noqa: F401  (re-exported: raised here)

#: environment variable naming a directory that holds manifest.json and the code objects it lists
KERNEL_DIR_ENV = "RAWINDEXER_KERNEL_DIR"
#: the package-data folder (relative to the ``rawindexer`` package)
PACKAGE_KERNEL_DIR = "_kernels"
MANIFEST = "manifest.json"


@lru_cache(maxsize=1)  # the package does not move while imported; resources.files costs ~25 us a call
def package_kernel_dir() -> Path:
    """``rawindexer/_kernels`` of the imported package (a folder: wheels are installed unpacked)."""
    folder = resources.files("rawindexer").joinpath(PACKAGE_KERNEL_DIR)
    if not isinstance(folder, Path):  # a zipped import: code objects must be files for the loaders
        raise KernelNotBuiltError(f"rawindexer is imported from an archive ({folder}); install the wheel "
                                  "with pip so its kernels are files")
    return folder


def kernel_dir(override: str | os.PathLike | None = None) -> Path:
    """The directory to load kernels from: ``override``, else ``$RAWINDEXER_KERNEL_DIR``, else the
    package's own ``_kernels``. Not checked for existence here (see :func:`manifest_path`)."""
    if override is not None:
        return Path(override)
    env = os.environ.get(KERNEL_DIR_ENV)
    if env:
        return Path(env)
    return package_kernel_dir()


def kernel_source(override: str | os.PathLike | None = None) -> str:
    """Which rule picked the directory, in words: "argument", "$RAWINDEXER_KERNEL_DIR" or "package"."""
    if override is not None:
        return "argument"
    return f"${KERNEL_DIR_ENV}" if os.environ.get(KERNEL_DIR_ENV) else "package"


def manifest_path(override: str | os.PathLike | None = None) -> Path:
    """``manifest.json`` of :func:`kernel_dir`; a :class:`KernelNotBuiltError` that says what to do when
    it is missing."""
    folder = kernel_dir(override)
    path = folder / MANIFEST
    if path.is_file():
        return path
    source = kernel_source(override)
    if source == "package":
        hint = ("a source checkout: run `make` (builds both targets into rawindexer/_kernels); "
                "an install: reinstall the wheel (`pip install rawindexer`), which ships them")
    elif source == "argument":
        hint = "the kernel directory passed in has no build: point it at a folder `make` wrote"
    else:
        hint = f"unset {KERNEL_DIR_ENV} to use the shipped kernels, or point it at a folder `make` wrote"
    raise KernelNotBuiltError(f"{path} not found ({source}): {hint}")


@lru_cache(maxsize=16)
def _manifest_location(override: str | os.PathLike | None, env: str | None) -> str:
    return str(kernel_dir(override) / MANIFEST)


def manifest_mtime(override: str | os.PathLike | None = None) -> tuple[str, float]:
    """(manifest path, its mtime) in one stat: the per-call path of the dispatch (a few us, where
    :func:`manifest_path` costs tens); raises like :func:`manifest_path` when it is missing."""
    path = _manifest_location(override, os.environ.get(KERNEL_DIR_ENV))
    try:
        return path, os.stat(path).st_mtime
    except (FileNotFoundError, NotADirectoryError):
        manifest_path(override)  # raises the explanatory error
        raise


def kernel_path(name: str, override: str | os.PathLike | None = None) -> Path:
    """A file the manifest names (e.g. a code object), in the same directory as the manifest."""
    return manifest_path(override).parent / name
