"""Opcode numbers -> mnemonics of the gfx950 (CDNA4, GFX9 family) encodings the emulator decodes.
Which table an encoding's opcode field reads (and at which offset) is in :mod:`.encodings`.

Written from AMD's CDNA4 ISA opcode lists (cross-checked in tests against the machine-readable tables
of tinygrad 0.14.0 when that wheel is available). Only the formats the emulator decodes are listed;
a table may name opcodes the executor does not implement: those decode (so listings compare) and
fail loudly when executed.
"""
from __future__ import annotations


def _table(spec: str) -> dict[int, str]:
    """'0 a b 5 c' -> {0: 'a', 1: 'b', 5: 'c'}: a number restarts the running opcode."""
    out: dict[int, str] = {}
    op = 0
    for tok in spec.split():
        if tok.isdigit():
            op = int(tok)
            continue
        if tok != "-":
            out[op] = tok
        op += 1
    return out


SOP2 = _table("""
0 s_add_u32 s_sub_u32 s_add_i32 s_sub_i32 s_addc_u32 s_subb_u32 s_min_i32 s_min_u32 s_max_i32 s_max_u32
s_cselect_b32 s_cselect_b64 s_and_b32 s_and_b64 s_or_b32 s_or_b64 s_xor_b32 s_xor_b64 s_andn2_b32 s_andn2_b64
s_orn2_b32 s_orn2_b64 s_nand_b32 s_nand_b64 s_nor_b32 s_nor_b64 s_xnor_b32 s_xnor_b64 s_lshl_b32 s_lshl_b64
s_lshr_b32 s_lshr_b64 s_ashr_i32 s_ashr_i64 s_bfm_b32 s_bfm_b64 s_mul_i32 s_bfe_u32 s_bfe_i32 s_bfe_u64 s_bfe_i64
s_cbranch_g_fork s_absdiff_i32 s_rfe_restore_b64 s_mul_hi_u32 s_mul_hi_i32 s_lshl1_add_u32 s_lshl2_add_u32
s_lshl3_add_u32 s_lshl4_add_u32 s_pack_ll_b32_b16 s_pack_lh_b32_b16 s_pack_hh_b32_b16
""")

SOPK = _table("""
0 s_movk_i32 s_cmovk_i32 s_cmpk_eq_i32 s_cmpk_lg_i32 s_cmpk_gt_i32 s_cmpk_ge_i32 s_cmpk_lt_i32 s_cmpk_le_i32
s_cmpk_eq_u32 s_cmpk_lg_u32 s_cmpk_gt_u32 s_cmpk_ge_u32 s_cmpk_lt_u32 s_cmpk_le_u32 s_addk_i32 s_mulk_i32
s_cbranch_i_fork s_getreg_b32 s_setreg_b32 - s_setreg_imm32_b32 s_call_b64
""")

SOP1 = _table("""
0 s_mov_b32 s_mov_b64 s_cmov_b32 s_cmov_b64 s_not_b32 s_not_b64 s_wqm_b32 s_wqm_b64 s_brev_b32 s_brev_b64
s_bcnt0_i32_b32 s_bcnt0_i32_b64 s_bcnt1_i32_b32 s_bcnt1_i32_b64 s_ff0_i32_b32 s_ff0_i32_b64 s_ff1_i32_b32
s_ff1_i32_b64 s_flbit_i32_b32 s_flbit_i32_b64 s_flbit_i32 s_flbit_i32_i64 s_sext_i32_i8 s_sext_i32_i16
s_bitset0_b32 s_bitset0_b64 s_bitset1_b32 s_bitset1_b64 s_getpc_b64 s_setpc_b64 s_swappc_b64 s_rfe_b64
s_and_saveexec_b64 s_or_saveexec_b64 s_xor_saveexec_b64 s_andn2_saveexec_b64 s_orn2_saveexec_b64
s_nand_saveexec_b64 s_nor_saveexec_b64 s_xnor_saveexec_b64 s_quadmask_b32 s_quadmask_b64 s_movrels_b32
s_movrels_b64 s_movreld_b32 s_movreld_b64 s_cbranch_join - s_abs_i32 - s_set_gpr_idx_idx s_andn1_saveexec_b64
s_orn1_saveexec_b64 s_andn1_wrexec_b64 s_andn2_wrexec_b64 s_bitreplicate_b64_b32
""")

SOPC = _table("""
0 s_cmp_eq_i32 s_cmp_lg_i32 s_cmp_gt_i32 s_cmp_ge_i32 s_cmp_lt_i32 s_cmp_le_i32 s_cmp_eq_u32 s_cmp_lg_u32
s_cmp_gt_u32 s_cmp_ge_u32 s_cmp_lt_u32 s_cmp_le_u32 s_bitcmp0_b32 s_bitcmp1_b32 s_bitcmp0_b64 s_bitcmp1_b64
s_setvskip s_set_gpr_idx_on s_cmp_eq_u64 s_cmp_lg_u64
""")

SOPP = _table("""
0 s_nop s_endpgm s_branch s_wakeup s_cbranch_scc0 s_cbranch_scc1 s_cbranch_vccz s_cbranch_vccnz
s_cbranch_execz s_cbranch_execnz s_barrier s_setkill s_waitcnt s_sethalt s_sleep s_setprio s_sendmsg
s_sendmsghalt s_trap s_icache_inv s_incperflevel s_decperflevel s_ttracedata s_cbranch_cdbgsys
s_cbranch_cdbguser s_cbranch_cdbgsys_or_user s_cbranch_cdbgsys_and_user s_endpgm_saved s_set_gpr_idx_off
s_set_gpr_idx_mode
""")

SMEM = _table("""
0 s_load_dword s_load_dwordx2 s_load_dwordx4 s_load_dwordx8 s_load_dwordx16
8 s_buffer_load_dword s_buffer_load_dwordx2 s_buffer_load_dwordx4 s_buffer_load_dwordx8 s_buffer_load_dwordx16
16 s_store_dword s_store_dwordx2 s_store_dwordx4
24 s_buffer_store_dword s_buffer_store_dwordx2 s_buffer_store_dwordx4
32 s_dcache_inv s_dcache_wb s_dcache_inv_vol s_dcache_wb_vol s_memtime s_memrealtime
""")

VOP2 = _table("""
0 v_cndmask_b32 v_add_f32 v_sub_f32 v_subrev_f32 v_fmac_f64 v_mul_f32 v_mul_i32_i24 v_mul_hi_i32_i24
v_mul_u32_u24 v_mul_hi_u32_u24 v_min_f32 v_max_f32 v_min_i32 v_max_i32 v_min_u32 v_max_u32 v_lshrrev_b32
v_ashrrev_i32 v_lshlrev_b32 v_and_b32 v_or_b32 v_xor_b32 v_dot2c_f32_bf16 v_fmamk_f32 v_fmaak_f32
v_add_co_u32 v_sub_co_u32 v_subrev_co_u32 v_addc_co_u32 v_subb_co_u32 v_subbrev_co_u32 v_add_f16 v_sub_f16
v_subrev_f16 v_mul_f16 v_mac_f16 v_madmk_f16 v_madak_f16 v_add_u16 v_sub_u16 v_subrev_u16 v_mul_lo_u16
v_lshlrev_b16 v_lshrrev_b16 v_ashrrev_i16 v_max_f16 v_min_f16 v_max_u16 v_max_i16 v_min_u16 v_min_i16
v_ldexp_f16 v_add_u32 v_sub_u32 v_subrev_u32 v_dot2c_f32_f16 v_dot2c_i32_i16 v_dot4c_i32_i8 v_dot8c_i32_i4
v_fmac_f32 v_pk_fmac_f16 v_xnor_b32
""")

VOP1 = _table("""
0 v_nop v_mov_b32 v_readfirstlane_b32 v_cvt_i32_f64 v_cvt_f64_i32 v_cvt_f32_i32 v_cvt_f32_u32 v_cvt_u32_f32
v_cvt_i32_f32 - v_cvt_f16_f32 v_cvt_f32_f16 v_cvt_rpi_i32_f32 v_cvt_flr_i32_f32 v_cvt_off_f32_i4 v_cvt_f32_f64
v_cvt_f64_f32 v_cvt_f32_ubyte0 v_cvt_f32_ubyte1 v_cvt_f32_ubyte2 v_cvt_f32_ubyte3 v_cvt_u32_f64 v_cvt_f64_u32
v_trunc_f64 v_ceil_f64 v_rndne_f64 v_floor_f64 v_fract_f32 v_trunc_f32 v_ceil_f32 v_rndne_f32 v_floor_f32
v_exp_f32 v_log_f32 v_rcp_f32 v_rcp_iflag_f32 v_rsq_f32 v_rcp_f64 v_rsq_f64 v_sqrt_f32 v_sqrt_f64 v_sin_f32
v_cos_f32 v_not_b32 v_bfrev_b32 v_ffbh_u32 v_ffbl_b32 v_ffbh_i32 v_frexp_exp_i32_f64 v_frexp_mant_f64
v_fract_f64 v_frexp_exp_i32_f32 v_frexp_mant_f32 v_clrexcp - v_screen_partition_4se_b32 v_mov_b64
v_cvt_f16_u16 v_cvt_f16_i16 v_cvt_u16_f16 v_cvt_i16_f16 v_rcp_f16 v_sqrt_f16 v_rsq_f16 v_log_f16 v_exp_f16
v_frexp_mant_f16 v_frexp_exp_i16_f16 v_floor_f16 v_ceil_f16 v_trunc_f16 v_rndne_f16 v_fract_f16 v_sin_f16
v_cos_f16 v_exp_legacy_f32 v_log_legacy_f32 v_cvt_norm_i16_f16 v_cvt_norm_u16_f16 v_sat_pk_u8_i16 -
v_swap_b32 v_accvgpr_mov_b32 - v_cvt_f32_fp8 v_cvt_f32_bf8 v_cvt_pk_f32_fp8 v_cvt_pk_f32_bf8 v_prng_b32
v_permlane16_swap_b32 v_permlane32_swap_b32 v_cvt_f32_bf16
""")


def _vopc() -> dict[int, str]:
    out: dict[int, str] = {16: "v_cmp_class_f32", 17: "v_cmpx_class_f32", 18: "v_cmp_class_f64",
                           19: "v_cmpx_class_f64", 20: "v_cmp_class_f16", 21: "v_cmpx_class_f16"}
    fcmp = "f lt eq le gt lg ge o u nge nlg ngt nle neq nlt tru".split()
    for base, ty in ((32, "f16"), (64, "f32"), (96, "f64")):
        for k, c in enumerate(fcmp):
            out[base + k] = f"v_cmp_{c}_{ty}"
            out[base + 16 + k] = f"v_cmpx_{c}_{ty}"
    icmp = "f lt eq le gt ne ge t".split()
    for base, bits in ((160, 16), (192, 32), (224, 64)):
        for k, c in enumerate(icmp):
            out[base + k] = f"v_cmp_{c}_i{bits}"
            out[base + 8 + k] = f"v_cmp_{c}_u{bits}"
            out[base + 16 + k] = f"v_cmpx_{c}_i{bits}"
            out[base + 24 + k] = f"v_cmpx_{c}_u{bits}"
    return out


VOPC = _vopc()

# VOP3-only opcodes (the VOP3 encoding also carries VOPC at 0-255, VOP2 at 256+ and VOP1 at 320+)
VOP3_ONLY = _table("""
448 v_mad_legacy_f32 v_mad_f32 v_mad_i32_i24 v_mad_u32_u24 v_cubeid_f32 v_cubesc_f32 v_cubetc_f32 v_cubema_f32
v_bfe_u32 v_bfe_i32 v_bfi_b32 v_fma_f32 v_fma_f64 v_lerp_u8 v_alignbit_b32 v_alignbyte_b32 v_min3_f32
v_min3_i32 v_min3_u32 v_max3_f32 v_max3_i32 v_max3_u32 v_med3_f32 v_med3_i32 v_med3_u32 v_sad_u8 v_sad_hi_u8
v_sad_u16 v_sad_u32 v_cvt_pk_u8_f32 v_div_fixup_f32 v_div_fixup_f64 v_div_scale_f32 v_div_scale_f64
v_div_fmas_f32 v_div_fmas_f64 v_msad_u8 v_qsad_pk_u16_u8 v_mqsad_pk_u16_u8 v_mqsad_u32_u8 v_mad_u64_u32
v_mad_i64_i32 v_mad_legacy_f16 v_mad_legacy_u16 v_mad_legacy_i16 v_perm_b32 v_fma_legacy_f16
v_div_fixup_legacy_f16 v_cvt_pkaccum_u8_f32 v_mad_u32_u16 v_mad_i32_i16 v_xad_u32 v_min3_f16 v_min3_i16
v_min3_u16 v_max3_f16 v_max3_i16 v_max3_u16 v_med3_f16 v_med3_i16 v_med3_u16 v_lshl_add_u32 v_add_lshl_u32
v_add3_u32 v_lshl_or_b32 v_and_or_b32 v_or3_b32 v_mad_f16 v_mad_u16 v_mad_i16 v_fma_f16 v_div_fixup_f16
v_lshl_add_u64
563 v_bitop3_b16 v_bitop3_b32
613 v_ashr_pk_i8_i32 v_ashr_pk_u8_i32 v_cvt_pk_f16_f32 v_cvt_pk_bf16_f32
640 v_add_f64 v_mul_f64 v_min_f64 v_max_f64 v_ldexp_f64 v_mul_lo_u32 v_mul_hi_u32 v_mul_hi_i32 v_ldexp_f32
v_readlane_b32 v_writelane_b32 v_bcnt_u32_b32 v_mbcnt_lo_u32_b32 v_mbcnt_hi_u32_b32 - v_lshlrev_b64
v_lshrrev_b64 v_ashrrev_i64 v_trig_preop_f64 v_bfm_b32 v_cvt_pknorm_i16_f32 v_cvt_pknorm_u16_f32
v_cvt_pkrtz_f16_f32 v_cvt_pk_u16_u32 v_cvt_pk_i16_i32 v_cvt_pknorm_i16_f16 v_cvt_pknorm_u16_f16 -
v_add_i32 v_sub_i32 v_add_i16 v_sub_i16 v_pack_b32_f16 v_mul_legacy_f32 v_cvt_pk_fp8_f32 v_cvt_pk_bf8_f32
v_cvt_sr_fp8_f32 v_cvt_sr_bf8_f32 v_cvt_sr_f16_f32 v_cvt_sr_bf16_f32 v_minimum3_f32 v_maximum3_f32
""")

VOP3P = _table("""
0 v_pk_mad_i16 v_pk_mul_lo_u16 v_pk_add_i16 v_pk_sub_i16 v_pk_lshlrev_b16 v_pk_lshrrev_b16 v_pk_ashrrev_i16
v_pk_max_i16 v_pk_min_i16 v_pk_mad_u16 v_pk_add_u16 v_pk_sub_u16 v_pk_max_u16 v_pk_min_u16 v_pk_fma_f16
v_pk_add_f16 v_pk_mul_f16 v_pk_min_f16 v_pk_max_f16
26 v_dot2_f32_bf16 v_pk_minimum3_f16 v_pk_maximum3_f16
32 v_mad_mix_f32 v_mad_mixlo_f16 v_mad_mixhi_f16 v_dot2_f32_f16
38 v_dot2_i32_i16 v_dot2_u32_u16 v_dot4_i32_i8 v_dot4_u32_u8 v_dot8_i32_i4 v_dot8_u32_u4
v_mfma_ld_scale_b32 v_mfma_f32_16x16x128_f8f6f4 v_mfma_f32_32x32x64_f8f6f4
48 v_pk_fma_f32 v_pk_mul_f32 v_pk_add_f32 v_pk_mov_b32
53 v_mfma_f32_16x16x32_bf16 v_mfma_i32_16x16x64_i8 v_mfma_f32_32x32x16_bf16 v_mfma_i32_32x32x32_i8
62 v_mfma_f32_16x16x8_xf32 v_mfma_f32_32x32x4_xf32 v_mfma_f32_32x32x1_2b_f32 v_mfma_f32_16x16x1_4b_f32
v_mfma_f32_4x4x1_16b_f32 - v_mfma_f32_32x32x2_f32 v_mfma_f32_16x16x4_f32
72 v_mfma_f32_32x32x4_2b_f16 v_mfma_f32_16x16x4_4b_f16 v_mfma_f32_4x4x4_16b_f16 - v_mfma_f32_32x32x8_f16
v_mfma_f32_16x16x16_f16
80 v_mfma_i32_32x32x4_2b_i8 v_mfma_i32_16x16x4_4b_i8 v_mfma_i32_4x4x4_16b_i8 - v_mfma_f32_16x16x32_f16
v_mfma_f32_32x32x16_f16 v_mfma_i32_32x32x16_i8 v_mfma_i32_16x16x32_i8 v_accvgpr_read_b32 v_accvgpr_write_b32
93 v_mfma_f32_32x32x4_2b_bf16 v_mfma_f32_16x16x4_4b_bf16 v_mfma_f32_4x4x4_16b_bf16 v_mfma_f32_32x32x8_bf16
v_mfma_f32_16x16x16_bf16
110 v_mfma_f64_16x16x4_f64 v_mfma_f64_4x4x4_4b_f64 v_mfma_f32_16x16x32_bf8_bf8 v_mfma_f32_16x16x32_bf8_fp8
v_mfma_f32_16x16x32_fp8_bf8 v_mfma_f32_16x16x32_fp8_fp8 v_mfma_f32_32x32x16_bf8_bf8 v_mfma_f32_32x32x16_bf8_fp8
v_mfma_f32_32x32x16_fp8_bf8 v_mfma_f32_32x32x16_fp8_fp8
""")

# The 16-byte scaled MFMAs: v_mfma_ld_scale_b32 (VOP3P 44) immediately followed by one of these.
VOP3PX2 = {45: "v_mfma_scale_f32_16x16x128_f8f6f4", 46: "v_mfma_scale_f32_32x32x64_f8f6f4"}

DS = _table("""
0 ds_add_u32 ds_sub_u32 ds_rsub_u32 ds_inc_u32 ds_dec_u32 ds_min_i32 ds_max_i32 ds_min_u32 ds_max_u32
ds_and_b32 ds_or_b32 ds_xor_b32 ds_mskor_b32 ds_write_b32 ds_write2_b32 ds_write2st64_b32 ds_cmpst_b32
ds_cmpst_f32 ds_min_f32 ds_max_f32 ds_nop ds_add_f32
29 ds_write_addtid_b32 ds_write_b8 ds_write_b16 ds_add_rtn_u32 ds_sub_rtn_u32 ds_rsub_rtn_u32 ds_inc_rtn_u32
ds_dec_rtn_u32 ds_min_rtn_i32 ds_max_rtn_i32 ds_min_rtn_u32 ds_max_rtn_u32 ds_and_rtn_b32 ds_or_rtn_b32
ds_xor_rtn_b32 ds_mskor_rtn_b32 ds_wrxchg_rtn_b32 ds_wrxchg2_rtn_b32 ds_wrxchg2st64_rtn_b32 ds_cmpst_rtn_b32
ds_cmpst_rtn_f32 ds_min_rtn_f32 ds_max_rtn_f32 ds_wrap_rtn_b32 ds_add_rtn_f32 ds_read_b32 ds_read2_b32
ds_read2st64_b32 ds_read_i8 ds_read_u8 ds_read_i16 ds_read_u16 ds_swizzle_b32 ds_permute_b32 ds_bpermute_b32
64 ds_add_u64
77 ds_write_b64 ds_write2_b64 ds_write2st64_b64
84 ds_write_b8_d16_hi ds_write_b16_d16_hi ds_read_u8_d16 ds_read_u8_d16_hi ds_read_i8_d16 ds_read_i8_d16_hi
ds_read_u16_d16 ds_read_u16_d16_hi
118 ds_read_b64 ds_read2_b64 ds_read2st64_b64
222 ds_write_b96 ds_write_b128
224 ds_read_b64_tr_b4 ds_read_b96_tr_b6 ds_read_b64_tr_b8 ds_read_b64_tr_b16
254 ds_read_b96 ds_read_b128
""")

_MEM_COMMON = """
16 LOAD_UBYTE LOAD_SBYTE LOAD_USHORT LOAD_SSHORT LOAD_DWORD LOAD_DWORDX2 LOAD_DWORDX3 LOAD_DWORDX4
STORE_BYTE STORE_BYTE_D16_HI STORE_SHORT STORE_SHORT_D16_HI STORE_DWORD STORE_DWORDX2 STORE_DWORDX3 STORE_DWORDX4
LOAD_UBYTE_D16 LOAD_UBYTE_D16_HI LOAD_SBYTE_D16 LOAD_SBYTE_D16_HI LOAD_SHORT_D16 LOAD_SHORT_D16_HI
64 ATOMIC_SWAP ATOMIC_CMPSWAP ATOMIC_ADD ATOMIC_SUB ATOMIC_SMIN ATOMIC_UMIN ATOMIC_SMAX ATOMIC_UMAX ATOMIC_AND
ATOMIC_OR ATOMIC_XOR ATOMIC_INC ATOMIC_DEC ATOMIC_ADD_F32 ATOMIC_PK_ADD_F16 ATOMIC_ADD_F64 ATOMIC_MIN_F64
ATOMIC_MAX_F64 ATOMIC_PK_ADD_BF16
96 ATOMIC_SWAP_X2 ATOMIC_CMPSWAP_X2 ATOMIC_ADD_X2
"""


def _prefixed(prefix: str, spec: str) -> dict[int, str]:
    return {k: f"{prefix}_{v.lower()}" for k, v in _table(spec).items()}


FLAT = _prefixed("flat", _MEM_COMMON)
GLOBAL = _prefixed("global", _MEM_COMMON)
SCRATCH = _prefixed("scratch", _MEM_COMMON)
MUBUF = _prefixed("buffer", """
0 LOAD_FORMAT_X LOAD_FORMAT_XY LOAD_FORMAT_XYZ LOAD_FORMAT_XYZW STORE_FORMAT_X STORE_FORMAT_XY STORE_FORMAT_XYZ
STORE_FORMAT_XYZW
""" + _MEM_COMMON + """
40 WBL2 INV
""")
