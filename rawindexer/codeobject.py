"""Read an AMDGPU code object (ELF64, code object v5/v6) without any ROCm library.

Used by the build (to write the manifest from the binary's own metadata), by the static checks and
by the emulator (to find each kernel's descriptor and machine code). Only what those need is parsed:
section headers, the symbol table, the NT_AMDGPU_METADATA note (MessagePack) and kernel descriptors.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any
from .errors import CodeObjectError  # noqa: F401  (re-exported: raised here)

SHT_SYMTAB = 2
SHT_NOTE = 7
NT_AMDGPU_METADATA = 32
EM_AMDGPU = 224


# --------------------------------------------------------------------------------------------------
# MessagePack: the subset the AMDGPU metadata note uses (maps, arrays, strings, ints, bools, floats).
# --------------------------------------------------------------------------------------------------
def unpack_msgpack(data: bytes) -> Any:
    value, end = _unpack(data, 0)
    return value


def _unpack(b: bytes, i: int) -> tuple[Any, int]:
    t = b[i]
    i += 1
    if t <= 0x7F:
        return t, i
    if t >= 0xE0:
        return t - 0x100, i
    if 0x80 <= t <= 0x8F:
        return _unpack_map(b, i, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _unpack_array(b, i, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i : i + n].decode(), i + n
    fixed = {
        0xC0: (None, 0), 0xC2: (False, 0), 0xC3: (True, 0),
    }
    if t in fixed:
        return fixed[t][0], i
    ints = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
            0xCA: ">f", 0xCB: ">d"}
    if t in ints:
        fmt = ints[t]
        n = struct.calcsize(fmt)
        return struct.unpack_from(fmt, b, i)[0], i + n
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I",
               0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I"}
    if t in lengths:
        fmt = lengths[t]
        n = struct.unpack_from(fmt, b, i)[0]
        i += struct.calcsize(fmt)
        if t in (0xD9, 0xDA, 0xDB):
            return b[i : i + n].decode(), i + n
        if t in (0xC4, 0xC5, 0xC6):
            return bytes(b[i : i + n]), i + n
        if t in (0xDC, 0xDD):
            return _unpack_array(b, i, n)
        return _unpack_map(b, i, n)
    raise CodeObjectError(f"unsupported MessagePack type byte 0x{t:02x} at offset {i - 1}")


def _unpack_map(b: bytes, i: int, n: int) -> tuple[dict, int]:
    out = {}
    for _ in range(n):
        key, i = _unpack(b, i)
        out[key], i = _unpack(b, i)
    return out, i


def _unpack_array(b: bytes, i: int, n: int) -> tuple[list, int]:
    out = []
    for _ in range(n):
        v, i = _unpack(b, i)
        out.append(v)
    return out, i


# --------------------------------------------------------------------------------------------------
# Kernel descriptor (AMDGPU ABI, 64 bytes at symbol "<kernel>.kd")
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelDescriptor:
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    kernel_code_entry_byte_offset: int
    compute_pgm_rsrc3: int
    compute_pgm_rsrc1: int
    compute_pgm_rsrc2: int
    kernel_code_properties: int
    kernarg_preload: int

    @classmethod
    def parse(cls, raw: bytes) -> "KernelDescriptor":
        if len(raw) != 64:
            raise CodeObjectError(f"kernel descriptor must be 64 bytes, got {len(raw)}")
        g, p, ka = struct.unpack_from("<III", raw, 0)
        (entry,) = struct.unpack_from("<q", raw, 16)
        r3, r1, r2 = struct.unpack_from("<III", raw, 44)
        props, preload = struct.unpack_from("<HH", raw, 56)
        return cls(g, p, ka, entry, r3, r1, r2, props, preload)

    # compute_pgm_rsrc2 fields that decide the initial SGPR/VGPR state of a wave
    @property
    def user_sgpr_count(self) -> int:
        return (self.compute_pgm_rsrc2 >> 1) & 0x1F

    @property
    def enable_sgpr_workgroup_id(self) -> tuple[bool, bool, bool]:
        r2 = self.compute_pgm_rsrc2
        return bool(r2 >> 7 & 1), bool(r2 >> 8 & 1), bool(r2 >> 9 & 1)

    @property
    def enable_vgpr_workitem_id(self) -> int:
        """0: x only, 1: x and y, 2: x, y and z (packed into v0 on gfx90a+ when 'packed' ids)."""
        return (self.compute_pgm_rsrc2 >> 11) & 0x3

    @property
    def enable_private_segment(self) -> bool:
        return bool(self.compute_pgm_rsrc2 & 1)

    # kernel_code_properties: which user SGPRs are set up, in this order
    @property
    def user_sgpr_flags(self) -> dict[str, bool]:
        names = ["private_segment_buffer", "dispatch_ptr", "queue_ptr", "kernarg_segment_ptr",
                 "dispatch_id", "flat_scratch_init", "private_segment_size"]
        return {n: bool(self.kernel_code_properties >> k & 1) for k, n in enumerate(names)}

    @property
    def float_mode(self) -> dict[str, int]:
        r1 = self.compute_pgm_rsrc1
        return {
            "round_mode_32": (r1 >> 12) & 3,
            "round_mode_16_64": (r1 >> 14) & 3,
            "denorm_mode_32": (r1 >> 16) & 3,
            "denorm_mode_16_64": (r1 >> 18) & 3,
            "dx10_clamp": (r1 >> 21) & 1,
            "ieee_mode": (r1 >> 23) & 1,
        }

    @property
    def accum_offset(self) -> int:
        """First AGPR-backed register index in the unified file (gfx90a+): (rsrc3[5:0] + 1) * 4."""
        return ((self.compute_pgm_rsrc3 & 0x3F) + 1) * 4


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    data: bytes


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    section: int
    info: int


@dataclass
class KernelInfo:
    """One kernel of a code object: its descriptor, entry address and metadata."""

    name: str
    descriptor: KernelDescriptor
    descriptor_address: int
    entry_address: int
    metadata: dict = field(default_factory=dict)

    @property
    def args(self) -> list[dict]:
        return list(self.metadata.get(".args", []))


class CodeObject:
    """A parsed gfx9 code object. ``image`` is the bytes of the ELF file."""

    def __init__(self, image: bytes) -> None:
        self.image = bytes(image)
        if self.image[:4] != b"\x7fELF" or self.image[4] != 2:
            raise CodeObjectError("not an ELF64 file")
        (self.machine,) = struct.unpack_from("<H", self.image, 18)
        if self.machine != EM_AMDGPU:
            raise CodeObjectError(f"ELF machine {self.machine} is not EM_AMDGPU ({EM_AMDGPU})")
        (self.e_flags,) = struct.unpack_from("<I", self.image, 48)
        self.sections = self._read_sections()
        self.symbols = self._read_symbols()
        self.metadata = self._read_metadata()
        self.kernels = self._read_kernels()

    # ---- ELF plumbing ----
    def _read_sections(self) -> list[Section]:
        img = self.image
        shoff, = struct.unpack_from("<Q", img, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", img, 0x3A)
        raw = []
        for k in range(shnum):
            off = shoff + k * shentsize
            name, typ, _flags, addr, offset, size = struct.unpack_from("<IIQQQQ", img, off)
            raw.append((name, typ, addr, offset, size))
        strtab_off = raw[shstrndx][3]

        def cstr(off: int) -> str:
            end = img.index(b"\0", off)
            return img[off:end].decode()

        return [
            Section(cstr(strtab_off + n), t, a, o, s, img[o : o + s] if t != 8 else b"")
            for (n, t, a, o, s) in raw
        ]

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise CodeObjectError(f"code object has no section {name!r}")

    def _read_symbols(self) -> dict[str, Symbol]:
        out: dict[str, Symbol] = {}
        for idx, sec in enumerate(self.sections):
            if sec.type != SHT_SYMTAB:
                continue
            strtab = self.sections[struct.unpack_from("<I", self._section_header(idx), 40)[0]].data
            for off in range(0, sec.size, 24):
                name, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", sec.data, off)
                if name == 0:
                    continue
                sname = strtab[name : strtab.index(b"\0", name)].decode()
                out[sname] = Symbol(sname, value, size, shndx, info)
        return out

    def _section_header(self, idx: int) -> bytes:
        shoff, = struct.unpack_from("<Q", self.image, 0x28)
        shentsize, = struct.unpack_from("<H", self.image, 0x3A)
        return self.image[shoff + idx * shentsize : shoff + (idx + 1) * shentsize]

    def _read_metadata(self) -> dict:
        for sec in self.sections:
            if sec.type != SHT_NOTE:
                continue
            off = 0
            while off + 12 <= sec.size:
                namesz, descsz, ntype = struct.unpack_from("<III", sec.data, off)
                off += 12
                name = sec.data[off : off + namesz].rstrip(b"\0").decode()
                off += (namesz + 3) & ~3
                desc = sec.data[off : off + descsz]
                off += (descsz + 3) & ~3
                if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
                    return unpack_msgpack(desc)
        raise CodeObjectError("code object has no NT_AMDGPU_METADATA note")

    def read(self, address: int, size: int) -> bytes:
        """Bytes at a virtual address of a loaded section."""
        for s in self.sections:
            if s.addr <= address and address + size <= s.addr + s.size and s.data:
                start = address - s.addr
                return s.data[start : start + size]
        raise CodeObjectError(f"address 0x{address:x}+{size} is in no loaded section")

    def _read_kernels(self) -> dict[str, KernelInfo]:
        meta_by_name = {k[".name"]: k for k in self.metadata.get("amdhsa.kernels", [])}
        kernels = {}
        for sname, sym in self.symbols.items():
            if not sname.endswith(".kd"):
                continue
            name = sname[:-3]
            kd = KernelDescriptor.parse(self.read(sym.value, 64))
            kernels[name] = KernelInfo(
                name=name,
                descriptor=kd,
                descriptor_address=sym.value,
                entry_address=sym.value + kd.kernel_code_entry_byte_offset,
                metadata=meta_by_name.get(name, {}),
            )
        return kernels

    @property
    def target(self) -> str:
        return str(self.metadata.get("amdhsa.target", ""))

    def code(self, kernel: str) -> tuple[int, bytes]:
        """(start address, machine code bytes) of ``kernel``, bounded by its function symbol's size."""
        info = self.kernels[kernel]
        sym = self.symbols.get(kernel)
        text = self.section(".text")
        if sym is not None and sym.size:
            return info.entry_address, self.read(info.entry_address, sym.size)
        start = info.entry_address - text.addr
        return info.entry_address, text.data[start:]
