"""DLPack interchange implemented with ctypes: import any ``__dlpack__`` producer zero-copy and
export raw device memory so that numpy / torch / JAX / CuPy can import it zero-copy.

No framework is imported at module import time; numpy is the only hard dependency.

Layouts follow ``dlpack.h`` v1.1 (DLDevice, DLDataType, DLTensor, DLManagedTensor,
DLManagedTensorVersioned). Capsule protocol:

* producer returns a capsule named ``dltensor`` (legacy) or ``dltensor_versioned`` (>= 1.0);
* a consumer renames it to ``used_dltensor`` / ``used_dltensor_versioned`` and from then on owns the
  managed tensor: it calls the managed tensor's ``deleter`` exactly once when done;
* a capsule that is dropped unconsumed calls the deleter from its own destructor.

Lifetime of exported memory (why it is built the way it is):

A ctypes callback is Python code. When a C consumer such as numpy rejects a capsule (numpy and
CuPy reject fp8 codes) it sets an exception and then drops the capsule; a *Python* capsule
destructor running at that moment makes CPython replace the pending exception with a confusing
``SystemError`` (observed with numpy 2.4; tests/interop/test_dlpack.py guards against it).
So on the normal path no Python code runs from C at all: the capsule destructor and the managed
tensor deleter are numpy's own C functions (pointers taken from a probe capsule that numpy exports
at import time). Their contract, read from numpy's ``dlpack.c`` and re-checked here at import time
with a reference-count probe, is: ``PyMem_Free(self); Py_XDECREF(self->manager_ctx)`` (with
``PyGILState_Ensure`` and a ``Py_IsInitialized`` guard). We therefore allocate each managed tensor
(struct + shape + strides) with ``PyMem_Malloc`` and point ``manager_ctx`` at a small
``_ExportRecord`` whose ``__del__`` drops the Python owner from the owner registry ``_OWNERS``
(``__del__`` runs through CPython's finalizer machinery, which saves and restores a pending
exception, unlike a ctypes callback). If numpy is not 2.x or the probe fails, module-level ctypes
callbacks with the same contract are used instead (``_BACKEND == "ctypes"``).
"""
from __future__ import annotations

import ctypes
import itertools
import struct
import sys
from dataclasses import dataclass, field
from typing import Any, Callable
from collections.abc import Sequence

import numpy as np
from .errors import DLPackError  # noqa: F401  (re-exported: raised here)

__all__ = [
    "DL_CPU", "DL_CUDA", "DL_ROCM", "DL_CUDA_HOST", "DL_ROCM_HOST",
    "DType", "DLPackError", "TensorView", "DLPackArray",
    "dtype_from_name", "dtype_from_code", "from_dlpack", "to_dlpack_capsule",
    "framework_of", "import_into", "live_exports", "is_compact",
    "BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
    "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16", "COMPLEX64", "COMPLEX128",
    "FLOAT8_E3M4", "FLOAT8_E4M3", "FLOAT8_E4M3B11FNUZ", "FLOAT8_E4M3FN", "FLOAT8_E4M3FNUZ",
    "FLOAT8_E5M2", "FLOAT8_E5M2FNUZ", "FLOAT8_E8M0FNU",
]

# ---------------------------------------------------------------------------------------------
# Device and dtype codes (dlpack.h v1.1)
# ---------------------------------------------------------------------------------------------
DL_CPU, DL_CUDA, DL_ROCM = 1, 2, 10
DL_CUDA_HOST, DL_ROCM_HOST = 3, 11
# Memory a CPU pointer may dereference directly (pinned host memory included).
_HOST_DEVICES = frozenset({DL_CPU, DL_CUDA_HOST, DL_ROCM_HOST})
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                 9: "vpi", 10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed",
                 14: "oneapi", 15: "webgpu", 16: "hexagon", 17: "maia", 18: "trn"}

DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL = 0, 1, 2, 4, 5, 6

_FLAG_READ_ONLY = 1 << 0
_FLAG_IS_COPIED = 1 << 1

# The newest DLPack version whose layout and codes this module understands.
_MAX_VERSION = (1, 1)


@dataclass(frozen=True)
class DType:
    """A DLPack element type: ``code`` (DLDataTypeCode), ``bits`` per lane, ``lanes`` per element."""

    name: str
    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes per element (rounded up, as dlpack.h's GetDataSize does)."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def is_float8(self) -> bool:
        return self.name.startswith("float8_")

    def __str__(self) -> str:
        return self.name


_DTYPE_TABLE: tuple[tuple[str, int, int], ...] = (
    ("bool", DL_BOOL, 8),
    ("int8", DL_INT, 8), ("int16", DL_INT, 16), ("int32", DL_INT, 32), ("int64", DL_INT, 64),
    ("uint8", DL_UINT, 8), ("uint16", DL_UINT, 16), ("uint32", DL_UINT, 32), ("uint64", DL_UINT, 64),
    ("float16", DL_FLOAT, 16), ("float32", DL_FLOAT, 32), ("float64", DL_FLOAT, 64),
    ("bfloat16", DL_BFLOAT, 16),
    ("complex64", DL_COMPLEX, 64), ("complex128", DL_COMPLEX, 128),
    ("float8_e3m4", 7, 8), ("float8_e4m3", 8, 8), ("float8_e4m3b11fnuz", 9, 8),
    ("float8_e4m3fn", 10, 8), ("float8_e4m3fnuz", 11, 8), ("float8_e5m2", 12, 8),
    ("float8_e5m2fnuz", 13, 8), ("float8_e8m0fnu", 14, 8),
)
_BY_NAME: dict[str, DType] = {n: DType(n, c, b) for n, c, b in _DTYPE_TABLE}
_BY_CODE: dict[tuple[int, int], DType] = {(d.code, d.bits): d for d in _BY_NAME.values()}

BOOL = _BY_NAME["bool"]
INT8, INT16, INT32, INT64 = (_BY_NAME[n] for n in ("int8", "int16", "int32", "int64"))
UINT8, UINT16, UINT32, UINT64 = (_BY_NAME[n] for n in ("uint8", "uint16", "uint32", "uint64"))
FLOAT16, FLOAT32, FLOAT64 = (_BY_NAME[n] for n in ("float16", "float32", "float64"))
BFLOAT16 = _BY_NAME["bfloat16"]
COMPLEX64, COMPLEX128 = _BY_NAME["complex64"], _BY_NAME["complex128"]
FLOAT8_E3M4 = _BY_NAME["float8_e3m4"]
FLOAT8_E4M3 = _BY_NAME["float8_e4m3"]
FLOAT8_E4M3B11FNUZ = _BY_NAME["float8_e4m3b11fnuz"]
FLOAT8_E4M3FN = _BY_NAME["float8_e4m3fn"]
FLOAT8_E4M3FNUZ = _BY_NAME["float8_e4m3fnuz"]
FLOAT8_E5M2 = _BY_NAME["float8_e5m2"]
FLOAT8_E5M2FNUZ = _BY_NAME["float8_e5m2fnuz"]
FLOAT8_E8M0FNU = _BY_NAME["float8_e8m0fnu"]

_ALIASES = {
    "bool_": "bool", "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32",
    "double": "float64", "fp64": "float64", "bf16": "bfloat16", "int": "int32", "long": "int64",
    "byte": "uint8", "cfloat": "complex64", "cdouble": "complex128",
    "fp8_e4m3fn": "float8_e4m3fn", "fp8_e4m3fnuz": "float8_e4m3fnuz",
    "fp8_e5m2": "float8_e5m2", "fp8_e5m2fnuz": "float8_e5m2fnuz",
}


def dtype_from_name(name: Any, *, arg: str = "dtype") -> DType:
    """Resolve a dtype given as a name (``"float32"``, ``"float8_e4m3fn"``, ``"bf16"``), a ``DType``,
    a numpy / ml_dtypes dtype or scalar type, or a torch dtype (via ``str``: no torch import).

    Raises DLPackError naming ``arg`` for anything unknown.
    """
    if isinstance(name, DType):
        return name
    text = name if isinstance(name, str) else str(name)
    if text.startswith("torch."):
        text = text[len("torch."):]
    key = _ALIASES.get(text.strip().lower(), text.strip().lower())
    if key in _BY_NAME:
        return _BY_NAME[key]
    try:
        # numpy spellings ("f4", "<i8", np.float32) and ml_dtypes/JAX dtypes ("float8_e4m3fn").
        key = np.dtype(name).name
    except Exception:
        key = ""
    if key in _BY_NAME:
        return _BY_NAME[key]
    raise DLPackError(f"{arg}: unknown dtype {name!r}; expected one of {sorted(_BY_NAME)}")


def dtype_from_code(code: int, bits: int, lanes: int = 1, *, arg: str = "dtype") -> DType:
    """The DType for a DLDataType triple. Only ``lanes == 1`` and byte-sized types are supported
    (sub-byte fp6/fp4 and vector types raise DLPackError naming ``arg``)."""
    d = _BY_CODE.get((int(code), int(bits)))
    if d is None or lanes != 1:
        raise DLPackError(
            f"{arg}: unsupported DLPack dtype (code={code}, bits={bits}, lanes={lanes}); expected "
            f"lanes=1 and one of " + ", ".join(f"{d.name}=({d.code},{d.bits})" for d in _BY_NAME.values()))
    return d


def _numpy_storage_dtype(dtype: DType) -> np.dtype:
    # numpy has no fp8 / bfloat16: expose their bit patterns as same-sized unsigned integers.
    if dtype.is_float8:
        return np.dtype(np.uint8)
    if dtype is BFLOAT16 or dtype.name == "bfloat16":
        return np.dtype(np.uint16)
    return np.dtype(dtype.name)


# ---------------------------------------------------------------------------------------------
# C structures (dlpack.h). shape/strides/deleter are kept as raw addresses for pointer arithmetic.
# ---------------------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.c_void_p),      # int64_t*
        ("strides", ctypes.c_void_p),    # int64_t*, NULL = compact row-major
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


assert ctypes.sizeof(_DLTensor) == 48
assert ctypes.sizeof(_DLManagedTensor) == 64
assert ctypes.sizeof(_DLManagedTensorVersioned) == 80

# The same layouts as flat struct formats ("=": native byte order, no implicit padding; the C
# structs have none). Filling or reading a managed tensor is then one pack/unpack plus one memmove
# instead of a dozen ctypes attribute accesses, which matters for per-call overhead.
# DLTensor: data, device_type, device_id, ndim, code, bits, lanes, shape, strides, byte_offset
_TENSOR_FMT = "QiiiBBHQQQ"
_LEGACY = struct.Struct("=" + _TENSOR_FMT + "QQ")  # + manager_ctx, deleter
_VERSIONED = struct.Struct("=IIQQQ" + _TENSOR_FMT)  # major, minor, ctx, deleter, flags + DLTensor
assert _LEGACY.size == ctypes.sizeof(_DLManagedTensor)
assert _VERSIONED.size == ctypes.sizeof(_DLManagedTensorVersioned)

_CAPSULE_NAME = {False: b"dltensor", True: b"dltensor_versioned"}
_USED_NAME = {False: b"used_dltensor", True: b"used_dltensor_versioned"}
# PyCapsule_New / PyCapsule_SetName keep the name *pointer*: these buffers live as long as the
# process (module globals are never freed before the capsules that could point at them).
_NAME_BUFFERS = {n: ctypes.create_string_buffer(n)
                 for n in (*_CAPSULE_NAME.values(), *_USED_NAME.values())}

# ---------------------------------------------------------------------------------------------
# Python C-API through ctypes. PYFUNCTYPE keeps the GIL and turns a set Python error into an
# exception, which is what we want for every call made from Python code.
# ---------------------------------------------------------------------------------------------
_py = ctypes.pythonapi


def _capi(name: str, restype: Any, *argtypes: Any) -> Any:
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, _py))


_PyCapsule_New = _capi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p)
_PyCapsule_GetPointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                              ctypes.c_char_p)
_PyCapsule_IsValid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_PyCapsule_SetName = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_PyCapsule_GetName = _capi("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_PyCapsule_GetDestructor = _capi("PyCapsule_GetDestructor", ctypes.c_void_p, ctypes.py_object)
_PyMem_Malloc = _capi("PyMem_Malloc", ctypes.c_void_p, ctypes.c_size_t)
_PyMem_Free = _capi("PyMem_Free", None, ctypes.c_void_p)
_Py_IncRef = _capi("Py_IncRef", None, ctypes.py_object)
# Raw-pointer variants for the fallback callbacks, which receive objects that may be mid-destruction
# (turning those into py_object would resurrect them).
_Py_DecRef_raw = _capi("Py_DecRef", None, ctypes.c_void_p)
_PyCapsule_IsValid_raw = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_PyCapsule_GetPointer_raw = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_char_p)

_CapsuleType = type(_PyCapsule_New(ctypes.addressof(_NAME_BUFFERS[b"dltensor"]),
                                   ctypes.addressof(_NAME_BUFFERS[b"dltensor"]), None))

# Calling a producer's deleter: GIL held, since not every producer's deleter takes it itself.
_DELETER_CALL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
# Signature of C-level callbacks we hand out (void f(void*)); ctypes takes the GIL on entry.
_C_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


_DELETER_FNS: dict[int, Any] = {}


def _invoke_deleter(deleter: int, managed: int) -> None:
    if not deleter:
        return  # the spec allows a NULL deleter: nothing to release
    fn = _DELETER_FNS.get(deleter)
    if fn is None:
        fn = _DELETER_CALL(deleter)
        if len(_DELETER_FNS) < 64:  # producers have a handful of deleters; stay bounded anyway
            _DELETER_FNS[deleter] = fn
    fn(managed)


# ---------------------------------------------------------------------------------------------
# Owner registry
# ---------------------------------------------------------------------------------------------
# managed-tensor address -> (serial, owner). An entry lives exactly as long as the managed tensor:
# it is removed when the deleter drops the last reference to the tensor's _ExportRecord.
_OWNERS: dict[int, tuple[int, Any]] = {}
_SERIALS = itertools.count(1)


class _ExportRecord:
    """Target of ``manager_ctx``: one strong reference held by the managed tensor itself."""

    __slots__ = ("key", "serial")

    def __init__(self, key: int, serial: int) -> None:
        self.key = key
        self.serial = serial

    def __del__(self) -> None:
        # The serial check guards against a freed block address being reused by a newer export.
        try:
            entry = _OWNERS.get(self.key)
            if entry is not None and entry[0] == self.serial:
                del _OWNERS[self.key]
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def live_exports() -> int:
    """Number of exported managed tensors whose deleter has not run yet (owner registry size)."""
    return len(_OWNERS)


# ---------------------------------------------------------------------------------------------
# Deleters: numpy's C functions when verified, else ctypes callbacks with the same contract
# ---------------------------------------------------------------------------------------------
_CTX_OFFSET = {False: _DLManagedTensor.manager_ctx.offset,
               True: _DLManagedTensorVersioned.manager_ctx.offset}
_DELETER_OFFSET = {False: _DLManagedTensor.deleter.offset,
                   True: _DLManagedTensorVersioned.deleter.offset}


def _make_py_deleter(versioned: bool) -> Any:
    ctx_offset = _CTX_OFFSET[versioned]

    def deleter(managed: int) -> None:
        ctx = ctypes.c_void_p.from_address(managed + ctx_offset).value
        _PyMem_Free(managed)
        if ctx:
            _Py_DecRef_raw(ctx)

    return _C_CALLBACK(deleter)


def _make_py_capsule_destructor(versioned: bool) -> Any:
    name, used = _CAPSULE_NAME[versioned], _USED_NAME[versioned]
    deleter_offset = _DELETER_OFFSET[versioned]

    def destructor(capsule: int) -> None:
        if _PyCapsule_IsValid_raw(capsule, used) or not _PyCapsule_IsValid_raw(capsule, name):
            return
        managed = _PyCapsule_GetPointer_raw(capsule, name)
        _invoke_deleter(ctypes.c_void_p.from_address(managed + deleter_offset).value or 0, managed)

    return _C_CALLBACK(destructor)


# Kept alive for the life of the process: C code may call them at any time.
_PY_DELETERS = {v: _make_py_deleter(v) for v in (False, True)}
_PY_DESTRUCTORS = {v: _make_py_capsule_destructor(v) for v in (False, True)}


def _probe_numpy_functions() -> dict[bool, tuple[int, int]]:
    """{versioned: (capsule destructor address, deleter address)} taken from numpy-exported capsules,
    kept only where numpy is 2.x and a reference-count probe confirms the deleter contract."""
    found: dict[bool, tuple[int, int]] = {}
    try:
        major = int(np.__version__.split(".")[0])
    except ValueError:
        return found
    if major != 2:
        return found
    arr = np.zeros(1, np.uint8)
    for versioned in (False, True):
        cls = _DLManagedTensorVersioned if versioned else _DLManagedTensor
        try:
            cap = arr.__dlpack__(max_version=(1, 0)) if versioned else arr.__dlpack__()
        except (TypeError, BufferError):
            continue
        if not _PyCapsule_IsValid(cap, _CAPSULE_NAME[versioned]):
            continue
        destructor = _PyCapsule_GetDestructor(cap) or 0
        deleter = cls.from_address(_PyCapsule_GetPointer(cap, _CAPSULE_NAME[versioned])).deleter or 0
        del cap  # numpy's own destructor releases its export
        if not (destructor and deleter):
            continue
        sentinel = object()
        before = sys.getrefcount(sentinel)
        block = _PyMem_Malloc(ctypes.sizeof(cls))
        if not block:
            continue
        ctypes.memset(block, 0, ctypes.sizeof(cls))
        _Py_IncRef(sentinel)
        cls.from_address(block).manager_ctx = id(sentinel)
        _invoke_deleter(deleter, block)
        if sys.getrefcount(sentinel) == before:
            found[versioned] = (destructor, deleter)
        else:  # pragma: no cover - contract changed; leak the probe rather than guess
            break
    return found


_NUMPY_FUNCTIONS = _probe_numpy_functions()
#: "numpy-c" when both capsule kinds use numpy's C destructor/deleter, else "ctypes" (fallback).
_BACKEND = "numpy-c" if len(_NUMPY_FUNCTIONS) == 2 else "ctypes"


def _functions_for(versioned: bool) -> tuple[int, int]:
    if _BACKEND == "numpy-c" and versioned in _NUMPY_FUNCTIONS:
        return _NUMPY_FUNCTIONS[versioned]
    return (ctypes.cast(_PY_DESTRUCTORS[versioned], ctypes.c_void_p).value or 0,
            ctypes.cast(_PY_DELETERS[versioned], ctypes.c_void_p).value or 0)


# ---------------------------------------------------------------------------------------------
# Shape helpers
# ---------------------------------------------------------------------------------------------
def _compact_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def _normalize_shape(shape: Any, arg: str) -> tuple[int, ...]:
    try:
        out = tuple(int(n) for n in shape)
    except TypeError:
        raise DLPackError(f"{arg}: shape must be a sequence of ints, got {shape!r}") from None
    if any(n < 0 for n in out):
        raise DLPackError(f"{arg}: shape must be non-negative, got {out}")
    return out


def _normalize_strides(strides: Any, shape: tuple[int, ...], arg: str) -> tuple[int, ...]:
    if strides is None:
        return _compact_strides(shape)
    try:
        out = tuple(int(s) for s in strides)
    except TypeError:
        raise DLPackError(f"{arg}: strides must be a sequence of ints (elements), got {strides!r}") from None
    if len(out) != len(shape):
        raise DLPackError(f"{arg}: strides {out} must have one entry per dimension of shape {shape}")
    return out


def _normalize_device(device: Any, arg: str) -> tuple[int, int]:
    if isinstance(device, int):
        return (int(device), 0)
    try:
        dev_type, dev_id = device
        return (int(dev_type), int(dev_id))
    except (TypeError, ValueError):
        raise DLPackError(f"{arg}: device must be (device_type, device_id), e.g. (1, 0) for CPU; "
                          f"got {device!r}") from None


def _span_elements(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=False) if s > 0)


def is_compact(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Compact row-major; dims of size 1 ignore their stride; empty tensors count as compact."""
    return _is_compact(shape, strides)


def _is_compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    if any(n == 0 for n in shape):
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=False):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------
def to_dlpack_capsule(ptr: int, shape: Sequence[int], dtype: DType | str, device: tuple[int, int],
                      *, strides: Sequence[int] | None = None, owner: Any = None, versioned: bool,
                      readonly: bool = False, copied: bool = False,
                      version: tuple[int, int] = _MAX_VERSION) -> Any:
    """Wrap memory at ``ptr`` (``shape``, ``strides`` in elements or None = compact row-major,
    ``dtype``, ``device = (device_type, device_id)``) in a new, unconsumed DLPack capsule.

    ``owner`` is kept alive (in the owner registry) until the consumer calls the deleter, or until
    the capsule is dropped unconsumed. ``versioned`` selects ``dltensor_versioned`` (with ``version``,
    READ_ONLY / IS_COPIED flags) or the legacy ``dltensor``, which cannot say read-only and is
    therefore refused for ``readonly=True``. Strides are always written out (never NULL), since
    DLPack 1.1 no longer allows NULL strides for ndim > 0.
    """
    dt = dtype_from_name(dtype)
    shape_t = _normalize_shape(shape, "shape")
    strides_t = _normalize_strides(strides, shape_t, "strides")
    dev = _normalize_device(device, "device")
    ptr = int(ptr)
    if ptr < 0:
        raise DLPackError(f"ptr: must be a non-negative address, got {ptr}")
    if ptr == 0 and _span_elements(shape_t, strides_t) > 0:
        raise DLPackError(f"ptr: NULL data pointer for a non-empty tensor of shape {shape_t}")
    if readonly and not versioned:
        raise DLPackError("readonly: a legacy (unversioned) DLPack capsule cannot mark memory "
                          "read-only; use versioned=True")
    major, minor = (int(v) for v in version)
    if not (0 <= major < 2**32 and 0 <= minor < 2**32):
        raise DLPackError(f"version: expected (major, minor) of uint32, got {version!r}")
    return _export(ptr, shape_t, strides_t, dt, dev, owner, bool(versioned), bool(readonly),
                   bool(copied), (major, minor))


def _export(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], dt: DType,
            dev: tuple[int, int], owner: Any, versioned: bool, readonly: bool, copied: bool,
            version: tuple[int, int]) -> Any:
    """to_dlpack_capsule without argument checking (arguments already normalized)."""
    layout = _VERSIONED if versioned else _LEGACY
    ndim = len(shape)
    head = layout.size  # a multiple of 8, so the int64 arrays that follow are aligned
    size = head + 16 * ndim
    block = _PyMem_Malloc(size or 8)
    if not block:
        raise MemoryError("PyMem_Malloc failed for a DLPack managed tensor")
    destructor, deleter = _functions_for(versioned)
    serial = next(_SERIALS)
    record = _ExportRecord(block, serial)
    tensor = (ptr, dev[0], dev[1], ndim, dt.code, dt.bits, dt.lanes,
              block + head, block + head + 8 * ndim, 0)
    if versioned:
        flags = (_FLAG_READ_ONLY if readonly else 0) | (_FLAG_IS_COPIED if copied else 0)
        packed = layout.pack(version[0], version[1], id(record), deleter, flags, *tensor)
    else:
        packed = layout.pack(*tensor, id(record), deleter)
    if ndim:
        packed += struct.pack(f"={2 * ndim}q", *shape, *strides)
    try:
        ctypes.memmove(block, packed, size)
        _OWNERS[block] = (serial, owner)
        capsule = _PyCapsule_New(block, ctypes.addressof(_NAME_BUFFERS[_CAPSULE_NAME[versioned]]),
                                 destructor)
    except BaseException:
        _OWNERS.pop(block, None)
        _PyMem_Free(block)
        raise
    # The managed tensor's reference to its record (manager_ctx) is taken only once the capsule
    # exists; from here the deleter is the only way to drop it.
    _Py_IncRef(record)
    return capsule


def _np_data_ptr(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _copy_to_numpy(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
                   dtype: DType) -> np.ndarray:
    storage = _numpy_storage_dtype(dtype)
    if _span_elements(shape, strides) == 0:
        return np.empty(shape, storage)
    # order="C": the copy is exported without strides, i.e. as compact row-major.
    return np.array(_numpy_from_pointer(ptr, shape, strides, storage, True, None), copy=True,
                    order="C")


class DLPackArray:
    """A minimal DLPack exporter for raw memory: ``ptr`` with ``shape``, ``strides`` (elements,
    None = compact row-major), ``dtype`` and ``device = (device_type, device_id)``, kept alive by
    ``owner`` for as long as any export of it is alive.

    ``__dlpack__`` returns a versioned capsule (DLPack 1.x) when the consumer passes
    ``max_version >= (1, 0)``, else a legacy one. ``ready``, when given, is called with the consumer's
    ``stream`` argument before each export and must make that stream wait until the memory is ready
    (the DLPack stream handshake); without it the memory must already be ready when it is exported.
    """

    def __init__(self, ptr: int, shape: Sequence[int], dtype: DType | str, device: tuple[int, int],
                 *, strides: Sequence[int] | None = None, owner: Any = None,
                 readonly: bool = False, ready: Callable[[int | None], None] | None = None) -> None:
        self.dtype = dtype_from_name(dtype)
        self.shape = _normalize_shape(shape, "shape")
        self.strides = _normalize_strides(strides, self.shape, "strides")
        self.device = _normalize_device(device, "device")
        self.ptr = int(ptr)
        if self.ptr == 0 and _span_elements(self.shape, self.strides) > 0:
            raise DLPackError(f"ptr: NULL data pointer for a non-empty tensor of shape {self.shape}")
        self.owner = owner
        self.readonly = bool(readonly)
        self.ready = ready

    @classmethod
    def from_numpy(cls, array: np.ndarray, *, dtype: DType | str | None = None) -> DLPackArray:
        """Wrap a numpy array's memory (kept alive by the wrapper). ``dtype`` may reinterpret
        same-sized elements, e.g. a uint8 buffer as ``"float8_e4m3fn"``."""
        if not isinstance(array, np.ndarray):
            raise DLPackError(f"array: expected numpy.ndarray, got {type(array).__name__}")
        dt = dtype_from_name(array.dtype if dtype is None else dtype, arg="dtype")
        if dt.itemsize != array.itemsize:
            raise DLPackError(f"dtype: {dt.name} is {dt.itemsize} bytes per element but the array "
                              f"holds {array.dtype} ({array.itemsize} bytes)")
        if any(s % array.itemsize for s in array.strides):
            raise DLPackError("array: byte strides must be multiples of the itemsize")
        return cls(_np_data_ptr(array), array.shape, dt, (DL_CPU, 0),
                   strides=[s // array.itemsize for s in array.strides], owner=array,
                   readonly=not array.flags.writeable)

    def view(self, dtype: DType | str) -> DLPackArray:
        """Reinterpret the same memory with a same-sized dtype (e.g. fp8 -> uint8 for consumers
        that reject fp8 codes)."""
        dt = dtype_from_name(dtype)
        if dt.itemsize != self.dtype.itemsize:
            raise DLPackError(f"dtype: {dt.name} ({dt.itemsize} B) cannot view {self.dtype.name} "
                              f"({self.dtype.itemsize} B) elements")
        return DLPackArray(self.ptr, self.shape, dt, self.device, strides=self.strides,
                           owner=self, readonly=self.readonly)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(device_type, device_id), e.g. (1, 0) for CPU memory."""
        return self.device

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A new capsule over this memory (array API ``__dlpack__`` semantics).

        ``stream`` is handed to the ``ready`` hook, if any (see the class docstring).
        ``max_version >= (1, 0)`` gives ``dltensor_versioned`` announcing
        ``min(max_version, (1, 1))``; otherwise ``dltensor``, refused with BufferError for
        read-only memory. ``copy=True`` (host memory only) exports a compact copy flagged
        IS_COPIED; a ``dl_device`` other than our own is only served as such a copy to the CPU.
        """
        if stream is not None and not isinstance(stream, int):
            raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
        if self.ready is not None:
            self.ready(stream)
        versioned = False
        version = _MAX_VERSION
        if max_version is not None:
            major, minor = (int(v) for v in max_version)
            versioned = major >= 1
            if major == 1:
                version = (1, min(minor, _MAX_VERSION[1]))
        if dl_device is not None and tuple(int(v) for v in dl_device) != self.device:
            if not (copy is not False and int(dl_device[0]) == DL_CPU and self.device[0] in _HOST_DEVICES):
                raise BufferError(f"cannot export memory on device {self.device} to {tuple(dl_device)}")
            copy = True
        if copy:
            if self.device[0] not in _HOST_DEVICES:
                raise BufferError("copy=True is only supported for host memory")
            data = _copy_to_numpy(self.ptr, self.shape, self.strides, self.dtype)
            return _export(_np_data_ptr(data), data.shape, _compact_strides(data.shape), self.dtype,
                           (DL_CPU, 0), data, versioned, False, versioned, version)
        if self.readonly and not versioned:
            # Same policy as numpy: without DLPack >= 1.0 a consumer could not know not to write.
            raise BufferError("cannot export read-only memory through a legacy (unversioned) "
                              "DLPack capsule; the consumer must pass max_version >= (1, 0)")
        return _export(self.ptr, self.shape, self.strides, self.dtype, self.device,
                       (self.owner, self), versioned, self.readonly, False, version)

    def __repr__(self) -> str:
        return (f"DLPackArray(ptr=0x{self.ptr:x}, shape={self.shape}, strides={self.strides}, "
                f"dtype={self.dtype.name}, device={self.device}, readonly={self.readonly})")


# ---------------------------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------------------------
class _ArrayInterface:
    """Carrier of ``__array_interface__`` that also keeps the borrowed tensor alive as the base."""

    __slots__ = ("__array_interface__", "keepalive")

    def __init__(self, interface: dict, keepalive: Any) -> None:
        self.__array_interface__ = interface
        self.keepalive = keepalive


def _numpy_from_pointer(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
                        storage: np.dtype, readonly: bool, keepalive: Any) -> np.ndarray:
    interface = {
        "version": 3,
        "shape": shape,
        "typestr": storage.str,
        "data": (ptr, bool(readonly)),
        "strides": tuple(s * storage.itemsize for s in strides),
    }
    return np.asarray(_ArrayInterface(interface, keepalive))


@dataclass(eq=False)
class TensorView:
    """A borrowed, zero-copy view of a DLPack-exported tensor.

    Holds the consumed managed tensor and calls its deleter exactly once, on ``release()`` or
    when the view is garbage-collected. ``strides`` are in elements (computed compact row-major
    when the producer passed NULL); ``ptr`` already includes the producer's ``byte_offset``.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType
    device: tuple[int, int]
    readonly: bool
    source: object = field(repr=False)
    copied: bool = False          # producer set DLPACK_FLAG_BITMASK_IS_COPIED
    version: tuple[int, int] | None = None  # None for a legacy capsule
    # [(deleter, managed)] until released (None: a view built by hand, owning nothing);
    # list.pop makes "call the deleter once" atomic under the GIL.
    _handle: list | None = field(default=None, repr=False)

    def release(self) -> None:
        """Call the producer's deleter (once; later calls do nothing). Any numpy view obtained
        from ``numpy()`` must not be used afterwards."""
        try:
            deleter, managed = self._handle.pop()  # type: ignore[union-attr]
        except (IndexError, AttributeError):
            return
        _invoke_deleter(deleter, managed)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # pragma: no cover - interpreter shutdown; nothing left to report to
            pass

    @property
    def released(self) -> bool:
        """True once ``release()`` ran (or the deleter was otherwise called) on an owned view."""
        return self._handle is not None and not self._handle

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes_span(self) -> int:
        """Bytes from ``ptr`` to one past the last addressable element (0 if any dim is 0).
        Elements reached through negative strides lie before ``ptr`` and are not counted."""
        return _span_elements(self.shape, self.strides) * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        """Compact row-major; dims of size 1 ignore their stride; empty tensors count as compact."""
        return _is_compact(self.shape, self.strides)

    def numpy(self) -> np.ndarray:
        """Zero-copy numpy view of host memory (fp8 as uint8, bfloat16 as uint16 bit patterns).
        The array keeps this view, and so the producer's memory, alive."""
        if self.device[0] not in _HOST_DEVICES:
            raise DLPackError(f"tensor: numpy() needs host memory, but the tensor lives on "
                              f"{_DEVICE_NAMES.get(self.device[0], self.device[0])}:{self.device[1]}")
        if self.released:
            raise DLPackError("tensor: numpy() called after release()")
        storage = _numpy_storage_dtype(self.dtype)
        if _span_elements(self.shape, self.strides) == 0:
            return np.empty(self.shape, storage)
        return _numpy_from_pointer(self.ptr, self.shape, self.strides, storage, self.readonly, self)


def _check_stream(stream: Any, device_type: int, name: str) -> None:
    if stream is None:
        return
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise DLPackError(f"{name}: stream must be None or an int, got {type(stream).__name__}")
    if stream < -1:
        raise DLPackError(f"{name}: stream must be None, -1 or a stream handle, got {stream}")
    if device_type == DL_CUDA and stream == 0:
        raise DLPackError(f"{name}: stream=0 is ambiguous for CUDA; use None or 1 (legacy default "
                          f"stream), 2 (per-thread default stream), -1 (no sync) or a stream handle")
    if device_type == DL_ROCM and stream in (1, 2):
        raise DLPackError(f"{name}: stream={stream} is not allowed for ROCm; use None or 0 "
                          f"(default stream), -1 (no sync) or a stream handle")


def _consume_capsule(capsule: Any, source: Any, name: str) -> TensorView:
    if _PyCapsule_IsValid(capsule, _CAPSULE_NAME[True]):
        versioned = True
    elif _PyCapsule_IsValid(capsule, _CAPSULE_NAME[False]):
        versioned = False
    else:
        try:
            cap_name = _PyCapsule_GetName(capsule)
        except Exception:
            cap_name = None
        if cap_name in _USED_NAME.values():
            raise DLPackError(f"{name}: DLPack capsule was already consumed (named {cap_name.decode()!r})")
        raise DLPackError(f"{name}: expected a capsule named 'dltensor' or 'dltensor_versioned', "
                          f"got {cap_name!r}")
    managed = _PyCapsule_GetPointer(capsule, _CAPSULE_NAME[versioned])
    if not managed:
        raise DLPackError(f"{name}: DLPack capsule holds a NULL managed tensor")
    version: tuple[int, int] | None = None
    flags = 0
    if versioned:
        # Read the ABI-stable prefix first: on a major mismatch nothing past it may be touched.
        major, minor, _ctx, deleter = struct.unpack("=IIQQ", ctypes.string_at(managed, 24))
        version = (major, minor)
        if major != _MAX_VERSION[0]:
            # The spec: the consumer must still call the deleter.
            _PyCapsule_SetName(capsule, ctypes.addressof(_NAME_BUFFERS[_USED_NAME[True]]))
            _invoke_deleter(deleter, managed)
            raise DLPackError(f"{name}: DLPack major version {major} is not supported; "
                              f"expected {_MAX_VERSION[0]}.x")
        (_, _, _, deleter, flags, data, dev_type, dev_id, ndim, code, bits, lanes, shape_p,
         strides_p, byte_offset) = _VERSIONED.unpack(ctypes.string_at(managed, _VERSIONED.size))
    else:
        (data, dev_type, dev_id, ndim, code, bits, lanes, shape_p, strides_p, byte_offset, _,
         deleter) = _LEGACY.unpack(ctypes.string_at(managed, _LEGACY.size))
    # Validate before consuming: a rejected capsule stays unconsumed and its own destructor
    # releases the producer's memory.
    dtype = dtype_from_code(code, bits, lanes, arg=name)
    if ndim < 0:
        raise DLPackError(f"{name}: negative ndim {ndim} in DLPack tensor")
    if ndim and not shape_p:
        raise DLPackError(f"{name}: NULL shape pointer for a {ndim}-d DLPack tensor")
    if ndim:
        shape = struct.unpack(f"={ndim}q", ctypes.string_at(shape_p, 8 * ndim))
        if any(n < 0 for n in shape):
            raise DLPackError(f"{name}: negative extent in DLPack shape {shape}")
    else:
        shape = ()
    if ndim and strides_p:
        strides = struct.unpack(f"={ndim}q", ctypes.string_at(strides_p, 8 * ndim))
    else:
        strides = _compact_strides(shape)  # NULL strides: compact row-major (DLPack < 1.1)
    if data == 0 and _span_elements(shape, strides) > 0:
        raise DLPackError(f"{name}: NULL data pointer for a non-empty DLPack tensor of shape {shape}")

    _PyCapsule_SetName(capsule, ctypes.addressof(_NAME_BUFFERS[_USED_NAME[versioned]]))
    return TensorView(ptr=data + byte_offset if data else 0, shape=shape, strides=strides,
                      dtype=dtype, device=(dev_type, dev_id),
                      readonly=bool(flags & _FLAG_READ_ONLY), source=source,
                      copied=bool(flags & _FLAG_IS_COPIED), version=version,
                      _handle=[(deleter, managed)])


def from_dlpack(obj: Any, *, name: str = "tensor", stream: int | None = None) -> TensorView:
    """Borrow ``obj``'s memory through DLPack, zero-copy.

    ``obj`` is any producer (numpy / torch / JAX / CuPy array, a DLPackArray) or a raw, unconsumed
    DLPack capsule. The producer is asked for a versioned capsule (``max_version=(1, 1)``) and asked
    again without ``max_version`` if it raises TypeError for it; either capsule kind is accepted.
    ``stream`` is passed through for CUDA/ROCm producers (CUDA: None/1 legacy default, 2
    per-thread, -1 no sync; ROCm: None/0 default, -1 no sync) and is never passed to CPU
    producers. Every failure raises DLPackError whose message starts with ``name``.
    """
    if isinstance(obj, _CapsuleType):
        return _consume_capsule(obj, obj, name)
    export = getattr(obj, "__dlpack__", None)
    if export is None:
        raise DLPackError(f"{name}: expected an object implementing the DLPack protocol "
                          f"(__dlpack__), such as a numpy/torch/jax/cupy array; got "
                          f"{type(obj).__module__}.{type(obj).__qualname__}")
    device_type: int | None = None
    get_device = getattr(obj, "__dlpack_device__", None)
    if get_device is not None:
        try:
            device_type = int(get_device()[0])
        except Exception as exc:
            raise DLPackError(f"{name}: __dlpack_device__() failed: {exc}") from exc
    if device_type in _HOST_DEVICES or device_type is None:
        # Host memory has no stream; the protocol requires None here.
        stream = None
    else:
        _check_stream(stream, device_type, name)
    try:
        try:
            capsule = export(stream=stream, max_version=_MAX_VERSION)
        except TypeError:
            capsule = export(stream=stream)
    except Exception as exc:
        raise DLPackError(f"{name}: {type(obj).__name__}.__dlpack__() failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(capsule, _CapsuleType):
        raise DLPackError(f"{name}: __dlpack__() returned {type(capsule).__name__}, expected a "
                          f"PyCapsule")
    return _consume_capsule(capsule, obj, name)


# ---------------------------------------------------------------------------------------------
# Frameworks
# ---------------------------------------------------------------------------------------------
_FRAMEWORK_OF_MODULE = {"torch": "torch", "jax": "jax", "jaxlib": "jax", "cupy": "cupy",
                        "numpy": "numpy"}


def framework_of(obj: Any) -> str:
    """"torch" | "jax" | "cupy" | "numpy" | "unknown", from the defining modules of ``obj``'s
    type and its bases (so subclasses in user modules are recognized); imports nothing."""
    for cls in type(obj).__mro__:
        top = (getattr(cls, "__module__", "") or "").split(".", 1)[0]
        if top in _FRAMEWORK_OF_MODULE:
            return _FRAMEWORK_OF_MODULE[top]
    return "unknown"


def import_into(framework: str, array: DLPackArray) -> Any:
    """Import ``array`` into ``framework`` through its ``from_dlpack`` (imported lazily).

    "numpy"/"unknown" give a numpy array; fp8 (and for numpy, bfloat16) become uint8 (uint16) views
    for numpy and CuPy, which reject those DLPack codes.
    """
    if not isinstance(array, DLPackArray):
        raise DLPackError(f"array: expected DLPackArray, got {type(array).__name__}")
    if framework in ("numpy", "unknown"):
        if array.dtype.is_float8 or array.dtype.name == "bfloat16":
            array = array.view(UINT8 if array.dtype.is_float8 else UINT16)
        return np.from_dlpack(array)
    if framework == "torch":
        import torch

        return torch.from_dlpack(array)
    if framework == "jax":
        import jax.dlpack

        return jax.dlpack.from_dlpack(array)
    if framework == "cupy":
        import cupy

        if array.dtype.is_float8:
            array = array.view(UINT8)
        return cupy.from_dlpack(array)
    raise DLPackError(f"framework: expected 'torch', 'jax', 'cupy', 'numpy' or 'unknown', got "
                      f"{framework!r}")
