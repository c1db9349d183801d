// Element-wise epilogue arithmetic of the GEMM tiles, written once in the order of calico/reference.h
// ("THE BACKWARD CONTRACT"): the SwiGLU clamp, h = bf16(silu(g') * u'), and the SwiGLU backward.
#pragma once

#include <cstdint>

#include "calico/numerics.h"

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

struct Clamp {
  int on = 0;
  float limit = 0.0f;
  // g' = min(g, L), u' = clamp(u, -L, L); a NaN passes through.
  __device__ __forceinline__ float gate(float g) const { return (on && g > limit) ? limit : g; }
  __device__ __forceinline__ float up(float u) const {
    if (!on) return u;
    return u > limit ? limit : (u < -limit ? -limit : u);
  }
};

// SiLU and its derivative of every bf16 input, computed once per layer on the device by numerics.h's own
// calico_silu / calico_silu_grad (build_silu_tables, moe/layer.cu): the gate input of both is always a bf16
// value (the saved g) or the clamp limit, so a lookup gives the very bits the ~100-instruction functions give
// (test_megakernel_gpu checks all 65536 entries against the host), and the epilogues that were instruction
// bound on them (the forward's gate/up, the backward's d_h) become a few loads per element.
// NOTE: a warp's lookups are scattered gathers whose cost is per cache line touched: the d_h epilogue reads
// one table of (silu, grad) pairs (it needs both of the same input), the forward a table of silu alone (twice
// the entries per line, so fewer lines per warp).
constexpr int kSiluTableLimit = 65536;  // entry of the clamp limit L (silu only: d_g of a cut value is 0)
constexpr int kSiluTableSize = 65537;
struct SiluTables {
  const float2* entries = nullptr;  // [kSiluTableSize]: x = silu, y = silu_grad (the backward)
  const float* silu = nullptr;      // [kSiluTableSize]: the same silu values (the forward)
};
// silu(g') with g' = min(g, L) (Clamp::gate) of a bf16 g.
__device__ __forceinline__ float silu_of_gate(uint16_t g_bits, const Clamp& c, const SiluTables& t) {
  const bool cut = c.on && bf16_to_f32(g_bits) > c.limit;
  return __ldg(&t.silu[cut ? kSiluTableLimit : g_bits]);
}

// Forward, two adjacent columns: from the fp32 GEMM results, the saved bf16 g, u and h as bf16x2 words (lo:
// the first column).
struct SwigluOut2 {
  uint32_t g, u, h;
};
__device__ __forceinline__ SwigluOut2 swiglu_forward2(float acc_g0, float acc_g1, float acc_u0, float acc_u1,
                                                      const Clamp& c, const SiluTables& t) {
  const uint32_t g = bf16x2_from_f32(acc_g0, acc_g1), u = bf16x2_from_f32(acc_u0, acc_u1);
  const float h0 = __fmul_rn(silu_of_gate(static_cast<uint16_t>(g & 0xFFFFu), c, t), c.up(bf16x2_lo(u)));
  const float h1 = __fmul_rn(silu_of_gate(static_cast<uint16_t>(g >> 16), c, t), c.up(bf16x2_hi(u)));
  return {g, u, bf16x2_from_f32(h0, h1)};
}

// Backward, two adjacent columns: d_h (fp32 GEMM results, rounded to bf16 first), saved bf16 g, u as bf16x2
// words -> bf16 d_g, d_u words.
struct SwigluGrad2 {
  uint32_t dg, du;
};
__device__ __forceinline__ SwigluGrad2 swiglu_backward2(float acc_dh0, float acc_dh1, uint32_t g_saved,
                                                        uint32_t u_saved, const Clamp& c, const SiluTables& t) {
  const uint32_t dh2 = bf16x2_from_f32(acc_dh0, acc_dh1);
  float dg[2], du[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint16_t gbits = static_cast<uint16_t>(h ? g_saved >> 16 : g_saved & 0xFFFFu);
    const float graw = bf16_to_f32(gbits), uraw = h ? bf16x2_hi(u_saved) : bf16x2_lo(u_saved);
    const float u = c.up(uraw), dh = h ? bf16x2_hi(dh2) : bf16x2_lo(dh2);
    const bool g_cut = c.on && graw > c.limit, u_cut = c.on && (uraw > c.limit || uraw < -c.limit);
    // NOTE: a cut value becomes +0 after the conversion (the conversion of +0 is +0). silu_grad(g') is needed
    // only where g was not cut, so g' = g there; silu(g') is silu(L) where it was.
    const float2 e = __ldg(&t.entries[g_cut ? kSiluTableLimit : gbits]);  // .y is read only where g_cut is false
    dg[h] = g_cut ? 0.0f : __fmul_rn(__fmul_rn(dh, u), e.y);
    du[h] = u_cut ? 0.0f : __fmul_rn(dh, e.x);
  }
  return {bf16x2_from_f32(dg[0], dg[1]), bf16x2_from_f32(du[0], du[1])};
}

__device__ __forceinline__ void store_u32(uint16_t* p, uint32_t w) { *reinterpret_cast<uint32_t*>(p) = w; }

__device__ __forceinline__ void store_bf16x2(uint16_t* p, uint16_t a, uint16_t b) {
  *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}

}  // namespace calico::gpu::mk
