// Element-wise epilogue arithmetic of the GEMM tiles, written once in the order of calico/reference.h
// ("THE BACKWARD CONTRACT"): the SwiGLU clamp, h = bf16(silu(g') * u'), and the SwiGLU backward.
#pragma once

#include <cstdint>

#include "calico/numerics.h"
#include "gemm/silu_lookup.h"

namespace calico::gpu::mk {

// f32_to_bf16 (calico/numerics.h) of two values in ONE instruction, cvt.rn.bf16x2.f32: round to nearest even,
// overflow to inf, every NaN to 0x7FFF, subnormals kept; lo in bits 0..15. The same bits as numerics.h for
// every float: test_numerics_gpu checks all 2^32 inputs in both halves on the device (and that the
// round-toward-zero form, the negative control, differs). numerics.h's version takes ~5 instructions per value,
// and the epilogues and the d_y scale are instruction bound.
template <bool kTowardZero = false>  // true: the test's negative control only
__device__ __forceinline__ uint32_t bf16x2_from_f32(float lo, float hi) {
  uint32_t r;
  if constexpr (kTowardZero)
    asm("cvt.rz.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float bf16x2_lo(uint32_t w) { return bf16_to_f32(static_cast<uint16_t>(w & 0xFFFFu)); }
__device__ __forceinline__ float bf16x2_hi(uint32_t w) { return bf16_to_f32(static_cast<uint16_t>(w >> 16)); }

// SiLU and its derivative of every bf16 input, computed once per layer on the device by numerics.h's own
// calico_silu / calico_silu_grad (build_silu_tables, moe/layer.cu): the gate input of both is always a bf16
// value (the saved g) or the clamp limit, so a lookup gives the very bits the ~100-instruction functions give
// (test_megakernel_gpu checks all 65536 entries against the host), and the epilogues that were instruction
// bound on them (the forward's gate/up, the backward's d_h) become a few loads per element.
// NOTE: a warp's lookups are scattered gathers whose cost is per cache line touched: the d_h epilogue reads
// one table of (silu, grad) pairs (it needs both of the same input), the forward a table of silu alone (twice
// the entries per line, so fewer lines per warp).
struct SiluTables {
  const float2* entries = nullptr;  // [kSiluTableSize]: x = silu, y = silu_grad (the backward)
  const float* silu = nullptr;      // [kSiluTableSize]: the same silu values (the forward)
};
// silu(g') with g' = min(g, L) (Clamp::gate) of a bf16 g.
__device__ __forceinline__ float silu_of_gate(uint16_t g_bits, const Clamp& c, const SiluTables& t) {
  const bool cut = c.cuts_gate(bf16_to_f32(g_bits));
  return __ldg(&t.silu[cut ? kSiluTableLimit : g_bits]);
}

// Forward, two adjacent columns, in two parts so that a batch's lookups can be issued before their use (the
// table lives in L1/L2): silu(g') of a bf16x2 g word, then h = bf16(silu(g') * u') with the u word (lo: the
// first column).
__device__ __forceinline__ float2 silu_of_gate2(uint32_t g, const Clamp& c, const SiluTables& t) {
  return make_float2(silu_of_gate(static_cast<uint16_t>(g & 0xFFFFu), c, t),
                     silu_of_gate(static_cast<uint16_t>(g >> 16), c, t));
}
__device__ __forceinline__ uint32_t swiglu_h2(float2 silu_g, uint32_t u, const Clamp& c) {
  return bf16x2_from_f32(__fmul_rn(silu_g.x, c.up(bf16x2_lo(u))), __fmul_rn(silu_g.y, c.up(bf16x2_hi(u))));
}

// The d_h epilogue's window (gemm/silu_lookup.h): 16 KB, sign 0's entries then sign 1's.
constexpr uint32_t kSiluWindowBytes = 2 * kSiluWindowHalf * sizeof(float2);
// The (silu, grad) entry of gate input g (bits), from the window at shared address `window` or the table;
// cut: g > L (the entry of the limit, whose grad is never read).
__device__ __forceinline__ float2 silu_pair(uint16_t gbits, bool cut, uint32_t window, const SiluTables& t) {
  const uint32_t w = silu_window_entry(gbits);
  const bool in_window = !cut && w != kNotInWindow;
  const uint32_t shared_addr = window + w * static_cast<uint32_t>(sizeof(float2));
  const float2* global_addr = &t.entries[cut ? kSiluTableLimit : gbits];
  // Two predicated loads, no branch: the shared one volatile (kept after the stage's full-barrier wait) but
  // without a "memory" clobber, so a batch's lookups are all issued before the first is used.
  // NOTE: one asm with both predicated loads made ptxas spill ~1 KB.
  float2 e;
  if (in_window) {
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(e.x), "=f"(e.y) : "r"(shared_addr));
  } else {
    e = __ldg(global_addr);
  }
  return e;
}

// Backward, two adjacent columns: d_h (the fp32 GEMM results rounded to bf16, pack_bf16x2), saved bf16 g, u as
// bf16x2 words and the table entries of both g (silu_pair) -> bf16 d_g, d_u words.
struct SwigluGrad2 {
  uint32_t dg, du;
};
__device__ __forceinline__ bool gate_cut(uint32_t g_saved, int h, const Clamp& c) {
  return c.cuts_gate(h ? bf16x2_hi(g_saved) : bf16x2_lo(g_saved));
}
__device__ __forceinline__ SwigluGrad2 swiglu_backward2(uint32_t dh2, uint32_t g_saved, uint32_t u_saved, float2 e0,
                                                        float2 e1, const Clamp& c) {
  float dg[2], du[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float uraw = h ? bf16x2_hi(u_saved) : bf16x2_lo(u_saved);
    const float u = c.up(uraw), dh = h ? bf16x2_hi(dh2) : bf16x2_lo(dh2);
    const bool g_cut = gate_cut(g_saved, h, c), u_cut = c.cuts_up(uraw);
    // NOTE: a cut value becomes +0 after the conversion (the conversion of +0 is +0). silu_grad(g') is needed
    // only where g was not cut, so g' = g there; silu(g') is silu(L) where it was (the entry silu_pair read).
    const float2 e = h ? e1 : e0;  // .y is read only where g_cut is false
    dg[h] = g_cut ? 0.0f : __fmul_rn(__fmul_rn(dh, u), e.y);
    du[h] = u_cut ? 0.0f : __fmul_rn(dh, e.x);
  }
  return {bf16x2_from_f32(dg[0], dg[1]), bf16x2_from_f32(du[0], du[1])};
}

// The accumulator's pairs (i, i + 1) as bf16x2 words: the d_h epilogue's first rounding (the contract rounds d_h
// to bf16 before the SwiGLU backward), done once as it starts, so the words take half the accumulator's 128
// registers and the rest of the epilogue (lookups in flight, addresses) gets the other half. (The forward's
// gate/up epilogue, which has no spills, measured slower packed: nineteenth pass.)
template <int kWords, class Acc>
__device__ __forceinline__ void pack_bf16x2(const Acc& acc, uint32_t (&words)[kWords]) {
#pragma unroll
  for (int q = 0; q < kWords; ++q) words[q] = bf16x2_from_f32(acc(2 * q), acc(2 * q + 1));
}

__device__ __forceinline__ void store_u32(uint16_t* p, uint32_t w) { *reinterpret_cast<uint32_t*>(p) = w; }

__device__ __forceinline__ void store_bf16x2(uint16_t* p, uint16_t a, uint16_t b) {
  *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}

}  // namespace calico::gpu::mk
