"""LDS (DS encoding): reads, writes, two-address forms, atomics and cross-lane permutes.

The workgroup's LDS is one numpy byte array shared by its waves; every access is bounds-checked
against its size (an out-of-range access raises :class:`MemoryFault` naming lane and address).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .decoder import Instruction
from .errors import DecodeError, ExecMaskError, MemoryFault
from .ops_vmem import _atomic_fn
from .stats import C_LDS_READ, C_LDS_WRITE

_AR = {n: np.arange(n, dtype=np.intp) for n in (1, 2, 4, 8, 12, 16)}
ALL = np.arange(64, dtype=np.int64)

_READ = {"ds_read_b32": (4, 0), "ds_read_b64": (8, 0), "ds_read_b96": (12, 0), "ds_read_b128": (16, 0),
         "ds_read_u8": (1, 0), "ds_read_i8": (1, 8), "ds_read_u16": (2, 0), "ds_read_i16": (2, 16)}
# gfx950 transpose loads: element bits -> elements per lane (each lane reads 64 bits)
_READ_TR = {"ds_read_b64_tr_b4": 4, "ds_read_b64_tr_b8": 8, "ds_read_b64_tr_b16": 16}
_WRITE = {"ds_write_b32": 4, "ds_write_b64": 8, "ds_write_b96": 12, "ds_write_b128": 16, "ds_write_b8": 1,
          "ds_write_b16": 2}
_READ2 = {"ds_read2_b32": (4, 4), "ds_read2st64_b32": (4, 256), "ds_read2_b64": (8, 8), "ds_read2st64_b64": (8, 512)}
_WRITE2 = {"ds_write2_b32": (4, 4), "ds_write2st64_b32": (4, 256), "ds_write2_b64": (8, 8),
           "ds_write2st64_b64": (8, 512)}


def _lanes(w) -> np.ndarray:
    return ALL if w.exec_full else np.flatnonzero(w.exec_mask)


def _check(w, inst: Instruction, lanes: np.ndarray, addrs: np.ndarray, size: int, write: bool) -> None:
    n = w.lds.size
    bad = addrs + size > n
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise MemoryFault(
            f"memcheck: {inst.name} at pc 0x{inst.address:x}: lane {int(lanes[k])} "
            f"{'writes' if write else 'reads'} {size} bytes at LDS address 0x{int(addrs[k]):x}, "
            f"outside the workgroup's {n} bytes of LDS",
            address=int(addrs[k]), lane=int(lanes[k]), pc=inst.address, mnemonic=inst.name)


def build_ds(inst: Instruction, ctx) -> Callable:
    name = inst.name
    f = inst.fields
    if f["gds"]:
        raise DecodeError(f"unimplemented (GDS) {inst}")
    acc = ctx.accum_offset if f.get("acc") else 0
    a_reg, d0, d1, vd = f["addr"], f["data0"] + acc, f["data1"] + acc, f["vdst"] + acc
    off = f["offset0"] | (f["offset1"] << 8)

    def addresses(w, extra=0):
        lanes = _lanes(w)
        # LDS addresses are 32-bit: the compiler folds negative offsets into the VGPR and relies on wrap
        return lanes, (w.v[lanes, a_reg].astype(np.int64) + (off + extra)) & 0xFFFFFFFF

    if name in _READ:
        size, sext = _READ[name]
        ndw = max(1, size // 4)

        def run(w):
            lanes, a = addresses(w)
            _check(w, inst, lanes, a, size, False)
            data = w.lds[a[:, None] + _AR[size]]
            w.counters[C_LDS_READ] += data.size
            if size >= 4:
                vals = data.view("<u4")
            else:
                vals = (data.view("<u2") if size == 2 else data).astype(np.uint32)
                if sext:
                    vals = (vals.view(np.int32) << (32 - sext) >> (32 - sext)).view(np.uint32)
            w.v[lanes, vd:vd + ndw] = vals
        return run
    if name in _READ_TR:
        return _read_tr(inst, _READ_TR[name], a_reg, off, vd)
    if name in _WRITE:
        size = _WRITE[name]
        ndw = max(1, size // 4)

        def run(w):
            lanes, a = addresses(w)
            _check(w, inst, lanes, a, size, True)
            data = np.ascontiguousarray(w.v[lanes, d0:d0 + ndw]).view(np.uint8).reshape(lanes.size, 4 * ndw)[:, :size]
            w.lds[a[:, None] + _AR[size]] = data
            w.counters[C_LDS_WRITE] += data.size
        return run
    if name in _READ2 or name in _WRITE2:
        size, stride = _READ2.get(name) or _WRITE2[name]
        o0, o1 = f["offset0"] * stride, f["offset1"] * stride
        ndw = size // 4
        write = name in _WRITE2

        def run(w):
            lanes = _lanes(w)
            base = w.v[lanes, a_reg].astype(np.int64)
            for k, o in enumerate((o0, o1)):
                a = (base + o) & 0xFFFFFFFF
                _check(w, inst, lanes, a, size, write)
                if write:
                    src = d0 if k == 0 else d1
                    data = np.ascontiguousarray(w.v[lanes, src:src + ndw]).view(np.uint8).reshape(lanes.size, size)
                    w.lds[a[:, None] + _AR[size]] = data
                    w.counters[C_LDS_WRITE] += data.size
                else:
                    data = w.lds[a[:, None] + _AR[size]]
                    w.v[lanes, vd + k * ndw:vd + (k + 1) * ndw] = data.view("<u4")
                    w.counters[C_LDS_READ] += data.size
        return run
    if name in ("ds_bpermute_b32", "ds_permute_b32"):
        back = name == "ds_bpermute_b32"

        def run(w):
            addr = ((w.v[:, a_reg].astype(np.int64) + off) // 4) % 64
            src = w.v[:, d0]
            m = w.exec_mask
            if back:
                # dst lane i reads src lane addr[i] (0 where that lane is inactive)
                vals = np.where(m[addr], src[addr], 0).astype(np.uint32)
            else:
                # src lane i writes dst lane addr[i]; later lanes win
                vals = np.zeros(64, np.uint32)
                lanes = np.flatnonzero(m)
                vals[addr[lanes]] = src[lanes]
            if w.exec_full:
                w.v[:, vd] = vals
            else:
                w.v[m, vd] = vals[m]
        return run
    if name == "ds_nop":
        return lambda w: None
    # atomics: ds_<op>[_rtn]_<type>
    rtn = "_rtn_" in name
    core = name[3:].replace("_rtn", "")
    mapping = {"add_u32": "add", "sub_u32": "sub", "inc_u32": "inc", "dec_u32": "dec", "min_i32": "smin",
               "max_i32": "smax", "min_u32": "umin", "max_u32": "umax", "and_b32": "and", "or_b32": "or",
               "xor_b32": "xor", "add_f32": "add_f32", "wrxchg_b32": "swap", "add_u64": "add_x2"}
    if core == "rsub_u32":
        _, fn = 1, (lambda o, s, c: (s - o) & 0xFFFFFFFF)
        ndw = 1
    elif core in mapping:
        ndw, fn = _atomic_fn(mapping[core])
    elif core in ("cmpst_b32",):
        ndw, fn = 1, (lambda o, s, c: c if o == s else o)  # ds_cmpst: data0 = compare, data1 = new
    else:
        raise DecodeError(f"unimplemented {inst}")
    size = 4 * ndw

    def run(w):
        lanes, a = addresses(w)
        _check(w, inst, lanes, a, size, True)
        olds = np.zeros(lanes.size, np.uint64)
        view = w.lds
        for k, (lane, addr) in enumerate(zip(lanes.tolist(), a.tolist())):
            cell = view[addr:addr + size].view("<u4" if ndw == 1 else "<u8")
            old = int(cell[0])
            s0 = int(w.v[lane, d0]) if ndw == 1 else int(w.v[lane, d0]) | int(w.v[lane, d0 + 1]) << 32
            s1 = int(w.v[lane, d1]) if ndw == 1 else 0
            cell[0] = fn(old, s0, s1)
            olds[k] = old
        w.counters[C_LDS_READ] += size * lanes.size
        w.counters[C_LDS_WRITE] += size * lanes.size
        if rtn:
            w.v[lanes, vd] = (olds & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            if ndw == 2:
                w.v[lanes, vd + 1] = (olds >> np.uint64(32)).astype(np.uint32)
    return run


def _transpose_index(n: int) -> np.ndarray:
    """Source (lane, element) of each destination (lane, element) of a transpose load with ``n``
    elements per lane, as flat indices into a (64 lanes x n elements) array.

    CDNA4 ISA 11.4 "MFMA Transpose Load from LDS": the wave works in four groups of 16 lanes. The
    group's 16 x 64 bits are a matrix of n rows x 16 columns, row r held by lanes k*r .. k*r + k - 1
    (k = 16 / n lanes of n elements each); destination lane j of the group gets column j, i.e. its
    element e is element j % n of source lane k*e + j // n. (For b16: 4 rows of 16 halves, lanes
    4r..4r+3; for b8: 8 rows of 16 bytes, two lanes per row -- two interleaved 8x8 byte transposes.)
    """
    k = 16 // n
    g, j, e = np.meshgrid(np.arange(4), np.arange(16), np.arange(n), indexing="ij")
    src_lane = 16 * g + k * e + j // n
    return (src_lane * n + j % n).reshape(64, n)


def _read_tr(inst: Instruction, bits: int, a_reg: int, off: int, vd: int) -> Callable:
    n = 64 // bits
    idx = _transpose_index(n)

    def run(w):
        if not w.exec_full:
            raise ExecMaskError(f"{inst.name} at pc 0x{inst.address:x} needs EXEC all ones (ISA 11.4), "
                                f"EXEC = 0x{w.exec_bits:016x}")
        a = (w.v[:, a_reg].astype(np.int64) + off) & 0xFFFFFFFF
        _check(w, inst, ALL, a, 8, False)
        data = w.lds[a[:, None] + _AR[8]]                      # (64, 8) bytes, each lane's own 64 bits
        w.counters[C_LDS_READ] += data.size
        if bits == 16:
            elems = data.view("<u2")
        elif bits == 8:
            elems = data
        else:  # 4-bit: element m is nibble m, low nibble first
            elems = np.stack([data & 0xF, data >> 4], axis=-1).reshape(64, 16)
        out = elems.reshape(-1)[idx]
        if bits == 4:
            out = (out[:, 0::2] | (out[:, 1::2] << 4)).astype(np.uint8)
        w.v[:, vd:vd + 2] = np.ascontiguousarray(out).view("<u4")
    return run
