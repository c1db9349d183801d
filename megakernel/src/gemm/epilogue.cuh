// Element-wise epilogue arithmetic of the GEMM tiles, written once in the order of calico/reference.h
// ("THE BACKWARD CONTRACT"): the SwiGLU clamp, h = bf16(silu(g') * u'), and the SwiGLU backward.
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::gpu::mk {

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

// Forward: from the fp32 GEMM results, the saved bf16 g, u and h.
struct SwigluOut {
  uint16_t g, u, h;
};
__device__ __forceinline__ SwigluOut swiglu_forward(float acc_g, float acc_u, const Clamp& c) {
  const uint16_t g = f32_to_bf16(acc_g), u = f32_to_bf16(acc_u);
  const float gc = c.gate(bf16_to_f32(g)), uc = c.up(bf16_to_f32(u));
  return {g, u, f32_to_bf16(__fmul_rn(calico_silu(gc), uc))};
}

// Backward: d_h (fp32 GEMM result, rounded to bf16 first), saved bf16 g, u -> bf16 d_g, d_u.
struct SwigluGrad {
  uint16_t dg, du;
};
__device__ __forceinline__ SwigluGrad swiglu_backward(float acc_dh, uint16_t g_saved, uint16_t u_saved, const Clamp& c) {
  const float graw = bf16_to_f32(g_saved), uraw = bf16_to_f32(u_saved);
  const float g = c.gate(graw), u = c.up(uraw);
  const float dh = bf16_to_f32(f32_to_bf16(acc_dh));
  const bool g_cut = c.on && graw > c.limit, u_cut = c.on && (uraw > c.limit || uraw < -c.limit);
  SwigluGrad r;
  r.dg = g_cut ? uint16_t(0) : f32_to_bf16(__fmul_rn(__fmul_rn(dh, u), calico_silu_grad(g)));
  r.du = u_cut ? uint16_t(0) : f32_to_bf16(__fmul_rn(dh, calico_silu(g)));
  return r;
}

__device__ __forceinline__ void store_bf16x2(uint16_t* p, uint16_t a, uint16_t b) {
  *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}

}  // namespace calico::gpu::mk
