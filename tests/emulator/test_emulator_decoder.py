"""The decoder against the assembly listing of the same compile, and the opcode tables against tinygrad's."""
from pathlib import Path

import pytest

from rawindexer.codeobject import CodeObject
from rawindexer.emulator.decoder import decode, decode_one
from rawindexer.emulator.listing import compare_with_listing, parse_listing

from emulator_kernels.harness import compiled

from conftest import BUILD
from rawindexer.kernel_files import kernel_dir

HSACO = kernel_dir() / "fp8_mqa_logits.gfx950.hsaco"
ASM = BUILD / "fp8_mqa_logits.gfx950.s"  # the listing of the same compile: an intermediate of `make`


def test_shipped_code_object_decodes_like_the_listing():
    co = CodeObject(HSACO.read_bytes())
    assert len(co.kernels) > 0
    assert compare_with_listing(co, ASM.read_text()) == []


@pytest.mark.parametrize("source", ["salu", "valu", "mem", "lds", "xlane", "pk16", "fp8cvt"])
def test_micro_kernels_decode_like_the_listing(source):
    image, listing = compiled(source)
    co = CodeObject(image)
    assert compare_with_listing(co, listing) == []
    assert sum(len(v) for v in parse_listing(listing).values()) > 10


def test_scaled_mfma_is_one_16_byte_instruction():
    # encoding from LLVM's gfx950 MC tests: ld_scale (op 44) + MFMA (op 46) = one VOP3PX2 instruction
    words = [0xD3AC0000, 0x00026330, 0xD3AE0800, 0x04823110]
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    inst = decode_one(raw, 0, 0x100)
    assert inst.name == "v_mfma_scale_f32_32x32x64_f8f6f4" and inst.size == 16
    f = inst.fields
    assert (f["src0"], f["src1"], f["src2"], f["vdst"]) == (256 + 16, 256 + 24, 256 + 32, 0)
    assert (f["scale_src0"], f["scale_src1"]) == (256 + 48, 256 + 49)
    # a plain MFMA after an unrelated VOP3P op is not swallowed
    plain = decode(b"".join(w.to_bytes(4, "little") for w in [0xD3AE0000, 0x04823110]), 0)
    assert [i.name for i in plain] == ["v_mfma_f32_32x32x64_f8f6f4"]


def test_encoding_table_is_consistent():
    """Every row's fields fit its dwords, every opcode value lands in exactly one listed range (first
    match), and rows that share first-dword bits are ordered so the carved-out format comes first."""
    from rawindexer.emulator.encodings import ENCODINGS, opcode_field
    for enc in ENCODINGS:
        for f in enc.fields:
            assert f.word < enc.words and f.lo + f.width <= 32, (enc.name, f)
        opf = opcode_field(enc)
        covered = {op for r in enc.opcodes for op in range(r.first, r.last + 1)}
        assert set(range(1 << opf.width)) <= covered, enc.name
    for i, a in enumerate(ENCODINGS):
        for b in ENCODINGS[i + 1:]:
            # a later row whose pattern contains an earlier one's would never match
            both = a.where[0] & b.where[0]
            if a.where[1] & both == b.where[1] & both:
                assert a.where[0] != b.where[0] and a.where[0] & ~b.where[0], (a.name, b.name)


def test_sdwa_and_dpp_second_dwords_are_split_by_their_layouts():
    # v_add_u32_sdwa v1, v8, v0 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:BYTE_0, sext on both
    raw = b"".join(w.to_bytes(4, "little") for w in [0x680200F9, 0x080C0608])
    f = decode_one(raw, 0, 0).fields
    assert (f["sdwa_src0"], f["dst_sel"], f["src0_sel"], f["src0_sext"], f["src1_sel"]) == (8, 6, 4, 1, 0)
    assert f["ext"] == "sdwa" and f["ext_word"] == 0x080C0608
    # v_mov_b32_dpp v4, v3 row_ror... : dpp_ctrl in bits 16:8, row/bank masks on top
    dpp = decode_one(b"".join(w.to_bytes(4, "little") for w in [0x7E0802FA, 0xAF014203]), 0, 0)
    assert dpp.name == "v_mov_b32_dpp" and dpp.size == 8
    assert (dpp.fields["dpp_src0"], dpp.fields["dpp_ctrl"], dpp.fields["row_mask"]) == (3, 0x142, 0xA)


def test_unknown_word_decodes_to_unknown():
    inst = decode_one((0xFFFFFFFF).to_bytes(4, "little"), 0, 0x40)
    assert inst.fmt == "UNKNOWN" and inst.encoding == "ffffffff"


def _tinygrad_enum():
    try:
        from tinygrad.runtime.autogen.amd.cdna import enum  # type: ignore
        return enum
    except Exception:
        import importlib.util
        for p in [Path("/tmp/tg/x/tinygrad/runtime/autogen/amd/cdna/enum.py")]:
            if p.exists():
                src = p.read_text().replace("from tinygrad.runtime.autogen.amd.common import", "#")
                ns: dict = {}
                import enum as pyenum

                class ReprEnum(pyenum.IntEnum):
                    pass
                ns["ReprEnum"] = ReprEnum
                exec(compile(src, str(p), "exec"), ns)
                return type("E", (), ns)
        return None


# where LLVM's assembler spelling (which our listing tests check) differs from AMD's XML names
LLVM_NAMES = {"v_accvgpr_read_b32", "v_accvgpr_write_b32"}


def test_opcode_tables_match_tinygrad_cdna4_tables():
    """Cross-check our opcode numbers against the CDNA4 tables tinygrad 0.14.0 generates from AMD's XML."""
    e = _tinygrad_enum()
    if e is None:
        pytest.skip("tinygrad 0.14.0 tables not available")
    from rawindexer.emulator import opcodes as T
    pairs = [(T.SOP1, e.SOP1Op, ""), (T.SOP2, e.SOP2Op, ""), (T.SOPC, e.SOPCOp, ""), (T.SOPK, e.SOPKOp, ""),
             (T.SOPP, e.SOPPOp, ""), (T.SMEM, e.SMEMOp, ""), (T.VOP1, e.VOP1Op, "_E32"), (T.VOP2, e.VOP2Op, "_E32"),
             (T.VOPC, e.VOPCOp, "_E32"), (T.VOP3P, e.VOP3POp, ""), (T.DS, e.DSOp, ""), (T.GLOBAL, e.GLOBALOp, ""),
             (T.MUBUF, e.MUBUFOp, "")]
    checked, bad = 0, []
    for ours, theirs, sfx in pairs:
        names = {m.value: m.name for m in theirs}
        for op, name in ours.items():
            want = names.get(op)
            if want is None:
                continue
            if (name.upper() + sfx) != want and name.upper() != want and name not in LLVM_NAMES:
                bad.append((op, name, want))
            checked += 1
    vop3 = {m.value: m.name for m in e.VOP3Op}
    for op, name in T.VOP3_ONLY.items():
        if op in vop3:
            if vop3[op].replace("_E64", "") != name.upper():
                bad.append((op, name, vop3[op]))
            checked += 1
    assert bad == []
    assert checked > 500
