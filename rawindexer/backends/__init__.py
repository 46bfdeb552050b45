"""Runtime backends behind one interface (base.Backend). Adding one is one new file plus a line here.

Which backend runs a call follows the DLPack device of its arrays: CPU arrays go to the gfx950
emulator, ROCm arrays to hip (hip-python), CUDA arrays to the sm_90a twin (cuda-bindings).
"""
from __future__ import annotations

import importlib

from .base import Backend, BufferSpan, DeviceAllocation

#: backend name -> (module, class); imported only when first used
BACKENDS: dict[str, tuple[str, str]] = {
    "emulator": ("rawindexer.backends.emulator", "EmulatorBackend"),
    "hip": ("rawindexer.backends.hip", "HipBackend"),
    "cuda": ("rawindexer.backends.cuda", "CudaBackend"),
}

#: DLPack device type -> backend name (kDLCPU=1, kDLCUDA=2, kDLROCM=10)
BACKEND_FOR_DEVICE_TYPE: dict[int, str] = {1: "emulator", 2: "cuda", 10: "hip"}

_instances: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The process-wide instance of backend ``name``."""
    if name not in BACKENDS:
        raise ValueError(f"device: expected one of {sorted(BACKENDS)}, got {name!r}")
    if name not in _instances:
        module, cls = BACKENDS[name]
        _instances[name] = getattr(importlib.import_module(module), cls)()
    return _instances[name]


def forget_devices(name: str | None = None) -> None:
    """Drop what the instantiated backend ``name`` (or every one) remembers about its devices (their targets);
    backends not made yet hold nothing."""
    for backend_name, instance in list(_instances.items()):
        if name is None or backend_name == name:
            instance.forget_devices()


def backend_for_device_type(device_type: int) -> Backend:
    if device_type not in BACKEND_FOR_DEVICE_TYPE:
        raise ValueError(f"arrays live on DLPack device type {device_type}; supported: "
                         f"{ {v: k for k, v in BACKEND_FOR_DEVICE_TYPE.items()} }")
    return get_backend(BACKEND_FOR_DEVICE_TYPE[device_type])


__all__ = ["Backend", "BufferSpan", "DeviceAllocation", "BACKENDS", "get_backend", "backend_for_device_type", "forget_devices"]
