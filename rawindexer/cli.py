"""The command line: ``python -m rawindexer {info,run,bench,profile}`` (also installed as ``rawindexer``).

* ``info``    -- version, kernels shipped per target, backends usable here and why not (one table)
* ``run``     -- one packed vLLM-style chunk on the best device here, graded (what ``run.py`` runs)
* ``bench``   -- the H200 benchmark (rawindexer.bench; needs torch + a CUDA GPU)
* ``profile`` -- the static profile of the gfx950 binary (rawindexer.profile; reads build/ of a checkout)

Expected conditions -- no GPU, bindings missing, a version mismatch, no kernels -- print one line that says
what to do and exit with a non-zero status, never a traceback. Exit codes: 0 ok, 1 a check failed
(``run`` graded FAIL, ``info`` found the package's kernels broken), 2 an expected condition stopped it.
"""
from __future__ import annotations

import argparse
import sys

from . import chunk
from .kernel_files import KernelNotBuiltError

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE = 0, 1, 2


class Unavailable(Exception):
    """An expected condition of this machine; its message is the one line the user sees."""


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def cmd_info(args: argparse.Namespace) -> int:
    from .info import info_rows

    rows = info_rows()
    print_table([(r.name, r.value) for r in rows])
    return EXIT_OK if all(r.ok for r in rows) else EXIT_FAILED


def _require_backend(device: str) -> None:
    """Turn 'this backend cannot run here' into one line before any buffer is allocated."""
    if device == "emulator":
        return
    from .info import backend_state
    from .runtime_versions import cuda_verdict, hip_verdict

    ready, line = backend_state(device, hip_verdict() if device == "hip" else cuda_verdict())
    if not ready:
        raise Unavailable(f"--device {device}: {line}")


def cmd_run(args: argparse.Namespace) -> int:
    if args.device:
        _require_backend(args.device)
    try:
        return chunk.main(args)
    except ValueError as exc:  # a shape or window the kernels do not serve: the message names the argument
        raise Unavailable(str(exc).splitlines()[0]) from None


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401  (the benchmark times against torch and Triton on a CUDA GPU)
    except ImportError:
        raise Unavailable("bench needs torch with CUDA and an NVIDIA GPU: pip install torch triton") from None
    from . import bench

    return bench.main(args.passthrough) or EXIT_OK  # `bench --paged` returns the decode benchmark's status


def cmd_profile(args: argparse.Namespace) -> int:
    from . import profile

    try:
        profile.main(args.passthrough)
    except FileNotFoundError as exc:
        raise Unavailable(str(exc)) from None
    return EXIT_OK


#: commands whose arguments belong to the module they delegate to
PASSTHROUGH = ("bench", "profile")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m rawindexer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{info,run,bench,profile}")
    sub.add_parser("info", help="version, shipped kernels, backends usable here").set_defaults(func=cmd_info)
    run = sub.add_parser("run", help="one packed prefill chunk on the best device here, graded",
                         description=chunk.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    chunk.add_arguments(run)
    run.set_defaults(func=cmd_run)
    for name, func, what in (("bench", cmd_bench, "rawindexer.bench (H200 benchmark)"),
                             ("profile", cmd_profile, "rawindexer.profile (static gfx950 profile)")):
        # add_help=False: `bench --help` is bench's own help (its arguments pass through)
        sub.add_parser(name, help=f"{what}; arguments pass through", add_help=False).set_defaults(func=func)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args, rest = ap.parse_known_args(argv)
    if args.command in PASSTHROUGH:
        args.passthrough = rest
    elif rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return args.func(args)
    except (Unavailable, KernelNotBuiltError) as exc:
        print(f"rawindexer {args.command}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
