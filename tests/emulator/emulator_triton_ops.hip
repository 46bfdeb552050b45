// Micro-kernels for the instruction families that Triton's gfx950 output needed and the emulator
// lacked (tests/emulator/test_emulator_triton_ops.py): LDS transpose loads, DPP, the f32 division helpers and
// 16-bit integer VALU ops. Inline asm pins the exact instruction; LLVM encodes it.
#include "common.h"

// ds_read_b64_tr_b{16,8,4}: LDS holds the wave's 64 x 8 bytes in lane order; each lane reads at its
// own address (`addr[l]`), the result is written in lane order to out (2 dwords per lane, 3 results).
KERNEL void tr_loads(const u32* __restrict__ src, const u32* __restrict__ addr, u32* __restrict__ out) {
  static SHARED u32 lds[1024];
  const int l = tid();
  for (int k = 0; k < 16; ++k) lds[64 * k + l] = src[64 * k + l];
  sync();
  const u32 a = (u32)(unsigned long)(&lds[0]) + addr[l];
  v2u r16, r8, r4;
  asm volatile("ds_read_b64_tr_b16 %0, %1\n\ts_waitcnt lgkmcnt(0)" : "=v"(r16) : "v"(a) : "memory");
  asm volatile("ds_read_b64_tr_b8 %0, %1 offset:8\n\ts_waitcnt lgkmcnt(0)" : "=v"(r8) : "v"(a) : "memory");
  asm volatile("ds_read_b64_tr_b4 %0, %1 offset:16\n\ts_waitcnt lgkmcnt(0)" : "=v"(r4) : "v"(a) : "memory");
  u32 x0 = r16.x, x1 = r16.y, y0 = r8.x, y1 = r8.y, z0 = r4.x, z1 = r4.y;
  out[2 * l] = x0; out[2 * l + 1] = x1;
  out[128 + 2 * l] = y0; out[128 + 2 * l + 1] = y1;
  out[256 + 2 * l] = z0; out[256 + 2 * l + 1] = z1;
}

// DPP: one result per form, 64 lanes each. `old` is the destination's previous value (kept where the
// DPP lane is not written). EXEC: lanes with x[l] & 1 == 0 for the masked forms.
#define DPP_MOV(K, CTRL)                                                                          \
  { u32 d = o;                                                                                   \
    asm volatile("v_mov_b32_dpp %0, %1 " CTRL : "+v"(d) : "v"(x));                              \
    out[64 * (K) + l] = d; }
#define DPP_ADD(K, CTRL)                                                                          \
  { float d = __builtin_bit_cast(float, o);                                                      \
    asm volatile("v_add_f32_dpp %0, %1, %2 " CTRL : "+v"(d) : "v"(xf), "v"(yf));                 \
    out[64 * (K) + l] = __builtin_bit_cast(u32, d); }

KERNEL void dpp_forms(const u32* __restrict__ xs, const u32* __restrict__ ys, const u32* __restrict__ olds,
                      u32* __restrict__ out) {
  const int l = tid();
  const u32 x = xs[l], o = olds[l];
  const float xf = __builtin_bit_cast(float, x), yf = __builtin_bit_cast(float, ys[l]);
  DPP_MOV(0, "quad_perm:[2,3,0,1] row_mask:0xf bank_mask:0xf")
  DPP_MOV(1, "row_shr:3 row_mask:0xf bank_mask:0xf bound_ctrl:1")
  DPP_MOV(2, "row_shr:3 row_mask:0xf bank_mask:0xf")
  DPP_MOV(3, "row_shl:5 row_mask:0xf bank_mask:0xf")
  DPP_MOV(4, "row_ror:7 row_mask:0xf bank_mask:0xf")
  DPP_MOV(5, "row_bcast:15 row_mask:0xa bank_mask:0xf")
  DPP_MOV(6, "row_bcast:31 row_mask:0xc bank_mask:0xf")
  DPP_MOV(7, "row_mirror row_mask:0x5 bank_mask:0x6")
  DPP_MOV(8, "row_half_mirror row_mask:0xf bank_mask:0xf")
  DPP_MOV(9, "wave_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1")
  DPP_MOV(10, "wave_rol:1 row_mask:0xf bank_mask:0xf")
  DPP_ADD(11, "row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1")
  DPP_ADD(12, "quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf")
  if (x & 1) {  // partial EXEC: inactive source lanes count as invalid
    DPP_MOV(13, "row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1")
    DPP_MOV(14, "row_shr:1 row_mask:0xf bank_mask:0xf")
  }
}

// v_div_scale_f32 (both forms the compiler emits), v_div_fmas_f32 under a VCC mask, v_div_fixup_f32.
KERNEL void div_ops(const float* __restrict__ n, const float* __restrict__ d, const float* __restrict__ q,
                    const u32* __restrict__ vmask, float* __restrict__ out, u32* __restrict__ flags) {
  const int l = tid();
  const float a = n[l], b = d[l], c = q[l];
  float den, num, fm, fx;
  u32 fden, fnum;
  asm volatile("v_div_scale_f32 %0, vcc, %2, %2, %3\n\tv_cndmask_b32 %1, 0, 1, vcc"
               : "=v"(den), "=v"(fden) : "v"(b), "v"(a) : "vcc");
  asm volatile("v_div_scale_f32 %0, vcc, %2, %3, %2\n\tv_cndmask_b32 %1, 0, 1, vcc"
               : "=v"(num), "=v"(fnum) : "v"(a), "v"(b) : "vcc");
  asm volatile("v_cmp_ne_u32 vcc, 0, %4\n\tv_div_fmas_f32 %0, %1, %2, %3"
               : "=v"(fm) : "v"(a), "v"(b), "v"(c), "v"(vmask[l]) : "vcc");
  asm volatile("v_div_fixup_f32 %0, %1, %2, %3" : "=v"(fx) : "v"(c), "v"(b), "v"(a));
  out[l] = den; out[64 + l] = num; out[128 + l] = fm; out[192 + l] = fx;
  flags[l] = fden; flags[64 + l] = fnum;
}

// 16-bit integer VALU ops: the destination starts as `o` (high bits set) to show the high half is zeroed.
#define OP16(K, INSN)                                                                             \
  { u32 d = o;                                                                                   \
    asm volatile(INSN " %0, %1, %2" : "+v"(d) : "v"(x), "v"(y));                                 \
    out[64 * (K) + l] = d; }

KERNEL void int16_ops(const u32* __restrict__ xs, const u32* __restrict__ ys, u32* __restrict__ out) {
  const int l = tid();
  const u32 x = xs[l], y = ys[l], o = 0xDEAD0000u | (u32)l;
  OP16(0, "v_lshlrev_b16_e32")
  OP16(1, "v_lshrrev_b16_e32")
  OP16(2, "v_ashrrev_i16_e32")
  OP16(3, "v_add_u16_e32")
  OP16(4, "v_sub_u16_e32")
  OP16(5, "v_subrev_u16_e32")
  OP16(6, "v_mul_lo_u16_e32")
  OP16(7, "v_max_i16_e32")
  OP16(8, "v_min_u16_e32")
  OP16(9, "v_lshlrev_b16_e64")
}
