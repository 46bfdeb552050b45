"""Python side of the hip stand-in: load ``build/hip_standin/libamdhip64.so`` into this process so that
hip-python binds to it, and run the launches it queues on the gfx950 emulator.

hip-python opens its runtime with ``dlopen("libamdhip64.so", RTLD_NOW)`` at its first HIP call. glibc
answers a bare name with an already loaded library whose SONAME matches, so loading the stand-in by
its absolute path first (``install()``) is enough: no LD_LIBRARY_PATH, and no ROCm library is ever
consulted. (LD_LIBRARY_PATH set before the process starts works too, but a test cannot set it for
itself.) Once hip-python has bound a library it keeps it for the life of the process, so ``install``
checks that the library answering is the stand-in.

Memcheck: the emulator may touch the live stand-in allocations (each exactly its requested size; the
red zone behind every block is never registered) and the launch's kernargs. That is the GPU's view
(any allocation is reachable), coarser than the emulator backend, which registers exactly each
operand and marks inputs read-only.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "build" / "hip_standin" / "libamdhip64.so"
OTHER_TARGET_CODE_OBJECT = ROOT / "build" / "hip_standin" / "other_target.gfx942.hsaco"

# EF_AMDGPU_MACH values (the low byte of a code object's e_flags)
MACH_GFX950 = 0x04F
MACH_GFX942 = 0x04C
DEFAULTS = dict(devices=1, mach=MACH_GFX950, compute_units=256, memory_limit=8 << 30)

# hipError_t values the runner returns
HIP_SUCCESS = 0
HIP_ERROR_ILLEGAL_ADDRESS = 700
HIP_ERROR_LAUNCH_FAILURE = 719


class _Allocation(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_uint64), ("size", ctypes.c_uint64)]


class _Launch(ctypes.Structure):
    """struct standin_launch in hip_standin.c."""

    _fields_ = [
        ("image", ctypes.c_void_p), ("image_size", ctypes.c_uint64), ("kernel", ctypes.c_char_p),
        ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("shared_mem", ctypes.c_uint32),
        ("kernarg_size", ctypes.c_uint32), ("kernargs", ctypes.c_void_p), ("allocations", ctypes.c_void_p),
        ("n_allocations", ctypes.c_uint64), ("stream", ctypes.c_uint64), ("message", ctypes.c_void_p),
        ("message_size", ctypes.c_uint64),
    ]


_RUNNER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Launch))


def build() -> None:
    """``make hip-standin``: the stand-in library and the gfx942 code object of the negative test."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "hip-standin", f"PYTHON={sys.executable}"], check=True)


class StandIn:
    """The loaded stand-in: its control interface and the emulator runner behind its launches."""

    def __init__(self, library: Path = LIBRARY) -> None:
        self.lib = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        self.lib.standin_configure.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint64]
        self.lib.standin_last_fault.restype = ctypes.c_char_p
        self.lib.standin_launches_run.restype = ctypes.c_uint64
        self.lib.standin_allocated_bytes.restype = ctypes.c_uint64
        self.lib.standin_live_allocations.restype = ctypes.c_uint64
        self.lib.standin_pending.argtypes = [ctypes.c_void_p]
        self.lib.standin_pending.restype = ctypes.c_int64
        self.lib.hipGetErrorName.restype = ctypes.c_char_p
        self._emulators: dict[bytes, object] = {}
        self._runner = _RUNNER(self._run)  # kept referenced: the library calls it
        self.lib.standin_set_runner(self._runner)
        self.configure()

    # -- control --------------------------------------------------------------------------------------
    def configure(self, devices: int = DEFAULTS["devices"], mach: int = DEFAULTS["mach"],
                  compute_units: int = DEFAULTS["compute_units"],
                  memory_limit: int = DEFAULTS["memory_limit"]) -> None:
        """Describe the device(s): how many (0 = none), gfx target, CUs, device-memory limit in bytes."""
        self.lib.standin_configure(devices, mach, compute_units, memory_limit)

    @contextmanager
    def configured(self, **settings) -> Iterator["StandIn"]:
        """``configure(**settings)`` for the duration of a ``with`` block, then the defaults again."""
        self.configure(**{**DEFAULTS, **settings})
        try:
            yield self
        finally:
            self.configure()

    @property
    def last_fault(self) -> str:
        """The runner's message for the last failed launch ('' when it succeeded)."""
        return self.lib.standin_last_fault().decode()

    @property
    def launches_run(self) -> int:
        return int(self.lib.standin_launches_run())

    @property
    def live_allocations(self) -> int:
        return int(self.lib.standin_live_allocations())

    def pending(self, stream: int | None = None) -> int:
        """Commands still queued on ``stream`` (None / 0 = the null stream)."""
        n = int(self.lib.standin_pending(stream or None))
        if n < 0:
            raise ValueError(f"stream: 0x{stream:x} is not a live stand-in stream")
        return n

    def error_name(self, code: int) -> str:
        return self.lib.hipGetErrorName(code).decode()

    # -- the runner -----------------------------------------------------------------------------------
    def _emulator(self, image: bytes):
        from rawindexer.emulator import Emulator

        emu = self._emulators.get(image)
        if emu is None:
            emu = self._emulators[image] = Emulator(image)
        return emu

    def _run(self, launch_ptr) -> int:
        """Called by the stand-in when a queued launch executes; never raises into C."""
        launch = launch_ptr.contents
        try:
            from rawindexer.emulator import EmulatorError, MemoryFault

            image = ctypes.string_at(launch.image, launch.image_size)
            allocations = (_Allocation * launch.n_allocations).from_address(launch.allocations) \
                if launch.n_allocations else []
            spans = [(a.ptr, a.size, True) for a in allocations]
            kernargs = ctypes.string_at(launch.kernargs, launch.kernarg_size)
            try:
                self._emulator(image).launch(launch.kernel.decode(), tuple(launch.grid), tuple(launch.block),
                                             kernargs, buffers=spans, shared_mem=launch.shared_mem)
                return HIP_SUCCESS
            except MemoryFault as exc:
                self._report(launch, f"MemoryFault: {exc}")
                return HIP_ERROR_ILLEGAL_ADDRESS
            except EmulatorError as exc:
                self._report(launch, f"{type(exc).__name__}: {exc}")
                return HIP_ERROR_LAUNCH_FAILURE
        except BaseException as exc:  # noqa: BLE001 -- an exception must not unwind through C
            self._report(launch, f"runner failed: {type(exc).__name__}: {exc}")
            return HIP_ERROR_LAUNCH_FAILURE

    @staticmethod
    def _report(launch, text: str) -> None:
        data = text.encode(errors="replace")[: launch.message_size - 1] + b"\0"
        ctypes.memmove(launch.message, data, len(data))


_instance: StandIn | None = None


def install() -> StandIn:
    """Load the stand-in (building it when missing) and check that hip-python talks to it."""
    global _instance
    if _instance is not None:
        return _instance
    if not LIBRARY.exists() or not OTHER_TARGET_CODE_OBJECT.exists():
        build()
    standin = StandIn()
    from hip import hip

    err, name = hip.hipDeviceGetName(256, 0)
    name = bytes(name).split(b"\0", 1)[0].decode(errors="replace") if name is not None else ""
    if int(err) != 0 or not name.startswith("HIP stand-in"):
        raise RuntimeError(f"hip-python is bound to another libamdhip64.so in this process (device name "
                           f"{name!r}, {err!r}); the stand-in must be loaded before the first HIP call")
    _instance = standin
    return standin
