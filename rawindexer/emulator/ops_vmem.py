"""Vector memory: GLOBAL / FLAT and MUBUF (buffer) loads, stores and atomics, through memcheck.

Addresses are computed for all 64 lanes with uint64 numpy arithmetic, reduced to the active lanes,
checked against the registered spans (:mod:`.memory`) and then gathered/scattered in one numpy
fancy-index per instruction.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .decoder import Instruction
from .errors import DecodeError, MemoryFault
from .operands import M32, SHARED_BASE_HI, sreader
from .stats import C_VLOAD, C_VSTORE

ALL_LANES = np.arange(64, dtype=np.int64)

# access: name suffix -> (bytes, dwords written to / read from VGPRs, sign-extend bits or 0)
_LOADS = {"load_ubyte": (1, 1, 0), "load_sbyte": (1, 1, 8), "load_ushort": (2, 1, 0), "load_sshort": (2, 1, 16),
          "load_dword": (4, 1, 0), "load_dwordx2": (8, 2, 0), "load_dwordx3": (12, 3, 0), "load_dwordx4": (16, 4, 0)}
_STORES = {"store_byte": (1, 1), "store_short": (2, 1), "store_dword": (4, 1), "store_dwordx2": (8, 2),
           "store_dwordx3": (12, 3), "store_dwordx4": (16, 4), "store_byte_d16_hi": (1, 1),
           "store_short_d16_hi": (2, 1)}
_D16_LOADS = {"load_ubyte_d16": (1, 0, False), "load_ubyte_d16_hi": (1, 0, True), "load_sbyte_d16": (1, 8, False),
              "load_sbyte_d16_hi": (1, 8, True), "load_short_d16": (2, 0, False), "load_short_d16_hi": (2, 0, True)}


def _atomic_fn(op: str) -> tuple[int, Callable]:
    """(operand dwords, f(old, src, cmp) -> new) of an atomic; values are Python ints of the width."""
    x2 = op.endswith("_x2")
    base = op[:-3] if x2 else op
    bits = 64 if x2 else 32
    m = (1 << bits) - 1

    def sx(v):
        return v - ((v >> (bits - 1) & 1) << bits)

    import struct
    f = {
        "swap": lambda o, s, c: s, "cmpswap": lambda o, s, c: s if o == c else o,
        "add": lambda o, s, c: (o + s) & m, "sub": lambda o, s, c: (o - s) & m,
        "smin": lambda o, s, c: o if sx(o) <= sx(s) else s, "umin": lambda o, s, c: min(o, s),
        "smax": lambda o, s, c: o if sx(o) >= sx(s) else s, "umax": lambda o, s, c: max(o, s),
        "and": lambda o, s, c: o & s, "or": lambda o, s, c: o | s, "xor": lambda o, s, c: o ^ s,
        "inc": lambda o, s, c: 0 if o >= s else o + 1, "dec": lambda o, s, c: s if (o == 0 or o > s) else o - 1,
        "add_f32": lambda o, s, c: struct.unpack("<I", struct.pack("<f", np.float32(
            np.uint32(o).view(np.float32) + np.uint32(s).view(np.float32))))[0],
    }.get(base)
    if f is None:
        raise KeyError(op)
    return (2 if x2 else 1), f


class _Where:
    """(pc, mnemonic) for memcheck messages."""

    def __init__(self, inst: Instruction) -> None:
        self.pc, self.mnemonic = inst.address, inst.name

    def __iter__(self):
        return iter((self.pc, self.mnemonic))


def _active(w, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if w.exec_full:
        return ALL_LANES, addrs
    lanes = np.flatnonzero(w.exec_mask)
    return lanes, addrs[lanes]


def _global_address(inst: Instruction, ctx) -> Callable:
    f = inst.fields
    off = np.uint64(f["offset"] & ((1 << 64) - 1))
    saddr, vaddr = f["saddr"], f["addr"]
    if inst.fmt == "FLAT" or saddr == 0x7F:
        return lambda w: w.v[:, vaddr:vaddr + 2].view(np.uint64)[:, 0] + off
    sb = sreader(saddr, inst, 64)
    return lambda w: w.v[:, vaddr].astype(np.uint64) + np.uint64(sb(w)) + off


def _buffer_address(inst: Instruction, ctx) -> Callable:
    """MUBUF: (address per lane, in-range mask per lane). Range check of raw buffers (stride 0 or no
    index): offset + size <= num_records; of structured ones: index < num_records."""
    f = inst.fields
    rs = f["srsrc"]
    soff = sreader(f["soffset"], inst)
    inst_off = f["offset"]
    offen, idxen, va = f["offen"], f["idxen"], f["vaddr"]

    def addr(w, size):
        s = w.s
        base = s[rs] | ((s[rs + 1] & 0xFFFF) << 32)
        stride = (s[rs + 1] >> 16) & 0x3FFF
        num = s[rs + 2]
        vidx = w.v[:, va].astype(np.uint64) if idxen else np.uint64(0)
        voff = w.v[:, va + idxen].astype(np.uint64) if offen else np.uint64(0)
        offset = voff + np.uint64(inst_off)
        a = np.uint64(base) + np.uint64(soff(w)) + offset + vidx * np.uint64(stride)
        if stride == 0 or not idxen:
            ok = offset + np.uint64(size) <= np.uint64(num)
        else:
            ok = vidx < np.uint64(num)
        return np.broadcast_to(a, (64,)), np.broadcast_to(ok, (64,))
    return addr


def build_vmem(inst: Instruction, ctx) -> Callable:
    """GLOBAL / FLAT / MUBUF instruction -> closure."""
    name = inst.name
    fmt = inst.fmt
    if fmt == "SCRATCH":
        raise DecodeError(f"unimplemented (scratch memory) {inst}")
    op = name.split("_", 1)[1]
    f = inst.fields
    acc = ctx.accum_offset if f.get("acc") else 0
    mem = ctx.memory
    where = tuple(_Where(inst))
    if fmt == "MUBUF":
        if f["lds"]:
            raise DecodeError(f"unimplemented (buffer load to LDS) {inst}")
        baddr = _buffer_address(inst, ctx)
        dreg = f["vdata"] + acc

        def lanes_addrs(w, size):
            a, ok = baddr(w, size)
            m = ok if w.exec_full else (ok & w.exec_mask)
            lanes = np.flatnonzero(m)
            return lanes, a[lanes], (None if m.all() else m)
    else:
        gaddr = _global_address(inst, ctx)
        dreg = (f["vdst"] if "load" in op else f["data"]) + acc
        flat = fmt == "FLAT"

        def lanes_addrs(w, size):
            lanes, a = _active(w, gaddr(w))
            if flat and lanes.size and (a >> np.uint64(32) == np.uint64(SHARED_BASE_HI)).any():
                raise DecodeError(f"unimplemented: flat access to the LDS aperture by {inst}")
            return lanes, a, None

    if op in _LOADS:
        size, ndw, sext = _LOADS[op]

        def run(w):
            lanes, a, inrange = lanes_addrs(w, size)
            if inrange is not None:  # buffer lanes out of range read 0
                active = np.flatnonzero(w.exec_mask)
                w.v[active, dreg:dreg + ndw] = 0
            if lanes.size == 0:
                return
            data = mem.gather(a, size, lanes, where)
            w.counters[C_VLOAD] += data.size
            if size >= 4:
                vals = data.view("<u4")
            elif size == 2:
                vals = data.view("<u2").astype(np.uint32)
                if sext:
                    vals = vals.view(np.int32) << 16 >> 16
            else:
                vals = data.astype(np.uint32)
                if sext:
                    vals = vals.view(np.int32) << 24 >> 24
            if lanes.size == 64:
                w.v[:, dreg:dreg + ndw] = vals
            else:
                w.v[lanes, dreg:dreg + ndw] = vals
        return run
    if op in _D16_LOADS:
        size, sext, hi = _D16_LOADS[op]

        def run(w):
            lanes, a, _ = lanes_addrs(w, size)
            if lanes.size == 0:
                return
            data = mem.gather(a, size, lanes, where)
            w.counters[C_VLOAD] += data.size
            v = data.view("<u2")[:, 0].astype(np.uint32) if size == 2 else data[:, 0].astype(np.uint32)
            if sext:
                v = (v.view(np.int32) << 24 >> 24).view(np.uint32) & np.uint32(0xFFFF)
            old = w.v[lanes, dreg]
            w.v[lanes, dreg] = ((old & np.uint32(0xFFFF)) | (v << np.uint32(16))) if hi else \
                ((old & np.uint32(0xFFFF0000)) | v)
        return run
    if op in _STORES:
        size, ndw = _STORES[op]
        hi_shift = 2 if op == "store_byte_d16_hi" else (2 if op == "store_short_d16_hi" else 0)

        def run(w):
            lanes, a, _ = lanes_addrs(w, size)
            if lanes.size == 0:
                return
            vals = w.v[lanes, dreg:dreg + ndw]
            data = np.ascontiguousarray(vals).view(np.uint8).reshape(lanes.size, 4 * ndw)
            data = data[:, hi_shift:hi_shift + size] if size < 4 else data[:, :size]
            mem.scatter(a, np.ascontiguousarray(data), lanes, where)
            w.counters[C_VSTORE] += data.size
        return run
    if op.startswith("atomic_"):
        try:
            ndw, fn = _atomic_fn(op[len("atomic_"):])
        except KeyError:
            raise DecodeError(f"unimplemented {inst}") from None
        size = 4 * ndw
        glc = f.get("sc0", 0)
        vdst = f.get("vdst") if fmt != "MUBUF" else f["vdata"]
        cmp = op.startswith("atomic_cmpswap")
        ddw = 2 * ndw if cmp else ndw

        def run(w):
            lanes, a, _ = lanes_addrs(w, size)
            if lanes.size == 0:
                return
            mem.gather(a, size, lanes, where)  # memcheck (loads)
            mem.scatter(a, mem.gather(a, size, lanes, where), lanes, where)  # memcheck (writable)
            vals = w.v[lanes, dreg:dreg + ddw].astype(np.uint64)
            olds = np.zeros(lanes.size, np.uint64)
            for k, (addr, lane) in enumerate(zip(a.tolist(), lanes.tolist())):
                sp = mem.find(addr)
                o = addr - sp.ptr
                cell = sp.view[o:o + size].view("<u4" if ndw == 1 else "<u8")
                old = int(cell[0])
                row = [int(x) for x in vals[k]]
                src = row[0] if ndw == 1 else row[0] | row[1] << 32
                cmpv = 0
                if cmp:
                    src, cmpv = (row[0], row[1]) if ndw == 1 else (row[0] | row[1] << 32, row[2] | row[3] << 32)
                cell[0] = fn(old, src, cmpv)
                olds[k] = old
            w.counters[C_VLOAD] += size * lanes.size
            w.counters[C_VSTORE] += size * lanes.size
            if glc:
                if ndw == 1:
                    w.v[lanes, vdst] = olds.astype(np.uint32)
                else:
                    w.v[lanes, vdst] = (olds & np.uint64(M32)).astype(np.uint32)
                    w.v[lanes, vdst + 1] = (olds >> np.uint64(32)).astype(np.uint32)
        return run
    if op in ("wbl2", "inv"):
        return lambda w: None
    raise DecodeError(f"unimplemented {inst}")


def build_smem(inst: Instruction, ctx) -> Callable:
    """Scalar memory: s_load / s_buffer_load / s_store, cache maintenance no-ops, s_memtime."""
    from .operands import swriter
    name = inst.name
    f = inst.fields
    mem = ctx.memory
    where = (inst.address, name)
    sbase, sdata = f["sbase"], f["sdata"]
    if f["imm"]:
        off = f["offset"] - ((f["offset"] & 0x100000) << 1)  # 21-bit signed
        offr = lambda w: off  # noqa: E731
    else:
        oreg = f["offset"] & 0x7F
        offr = lambda w: w.s[oreg]  # noqa: E731
    if f["soffset_en"]:
        so = f["soffset"]
        offr0 = offr
        offr = lambda w: offr0(w) + w.s[so]  # noqa: E731
    if name in ("s_dcache_inv", "s_dcache_wb", "s_dcache_inv_vol", "s_dcache_wb_vol"):
        return lambda w: None
    if name in ("s_memtime", "s_memrealtime"):
        wr = swriter(sdata, inst, 64)
        return lambda w: wr(w, w.executed)
    ndw = {"dword": 1, "dwordx2": 2, "dwordx4": 4, "dwordx8": 8, "dwordx16": 16}[name.rsplit("_", 1)[1]]
    if name.startswith("s_load_"):
        def run(w):
            s = w.s
            addr = ((s[sbase] | s[sbase + 1] << 32) + offr(w)) & ~3
            s[sdata:sdata + ndw] = mem.read_dwords(addr, ndw, where)
            w.counters[C_SLOAD] += 4 * ndw
        return run
    if name.startswith("s_buffer_load_"):
        def run(w):
            s = w.s
            base = s[sbase] | ((s[sbase + 1] & 0xFFFF) << 32)
            num = s[sbase + 2]
            o = offr(w) & ~3
            vals = []
            for k in range(ndw):
                if o + 4 * k + 4 <= num:
                    vals += mem.read_dwords(base + o + 4 * k, 1, where)
                else:
                    vals.append(0)
            s[sdata:sdata + ndw] = vals
            w.counters[C_SLOAD] += 4 * ndw
        return run
    if name.startswith("s_store_"):
        def run(w):
            s = w.s
            addr = ((s[sbase] | s[sbase + 1] << 32) + offr(w)) & ~3
            mem.write_dwords(addr, s[sdata:sdata + ndw], where)
        return run
    raise DecodeError(f"unimplemented {inst}")


from .stats import C_SLOAD  # noqa: E402  (after the builders: stats imports nothing from here)

__all__ = ["build_vmem", "build_smem", "MemoryFault"]
