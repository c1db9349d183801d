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
// calico_silu(g) = g / (1 + exp(-g)) without CUDA's division subroutine: a call inside a wgmma pipeline
// makes ptxas serialise every wgmma of the kernel (C7510), and the forward runs SwiGLU beside the next tile's
// wgmma. The same bits as calico_silu for every float input (tests/megakernel/test_numerics_gpu.cpp checks
// all 2^32): d = 1 + exp(-g) is 1 (g / 1 = g), +inf (g / inf = g * 0), NaN, or in (1, 2^128), where the quotient
// is g times a double reciprocal of d refined by kNewtonSteps steps. Why that rounds like the division: a
// quotient of two floats is never a rounding midpoint, and is at least 2^-49 of its size away from one (and at
// least 2^-174 away below 2^-126), while the double product is within ~2^-51 of the quotient (2 steps); so
// rounding it to float gives the correctly rounded quotient. One step (~2^-44) is the test's negative control.
template <int kNewtonSteps = 2>
__device__ __forceinline__ float silu_without_call(float g) {
  const float d = 1.0f + calico_exp(-g);
  const double dd = d;
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(dd));
  for (int i = 0; i < kNewtonSteps; ++i) r = __fma_rn(r, __fma_rn(-dd, r, 1.0), r);
  const float q = __double2float_rn(__dmul_rn(static_cast<double>(g), r));
  return canonical_nan(d == 1.0f ? g : (isinf(d) ? __fmul_rn(g, 0.0f) : q));
}

// h from the saved (bf16) g and u.
__device__ __forceinline__ uint16_t swiglu_h(uint16_t g, uint16_t u, const Clamp& c) {
  const float gc = c.gate(bf16_to_f32(g)), uc = c.up(bf16_to_f32(u));
  return f32_to_bf16(__fmul_rn(silu_without_call(gc), uc));
}
__device__ __forceinline__ SwigluOut swiglu_forward(float acc_g, float acc_u, const Clamp& c) {
  const uint16_t g = f32_to_bf16(acc_g), u = f32_to_bf16(acc_u);
  return {g, u, swiglu_h(g, u, c)};
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

__device__ __forceinline__ uint32_t pack_bf16x2(uint16_t a, uint16_t b) {
  return static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}
__device__ __forceinline__ uint16_t low_bf16(uint32_t v) { return static_cast<uint16_t>(v & 0xFFFFu); }
__device__ __forceinline__ uint16_t high_bf16(uint32_t v) { return static_cast<uint16_t>(v >> 16); }
__device__ __forceinline__ void store_bf16x2(uint16_t* p, uint16_t a, uint16_t b) {
  *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(a, b);
}

}  // namespace calico::gpu::mk
