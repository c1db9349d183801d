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
// silu and sigmoid divide by d = 1 + exp(-g). CUDA's division calls a slow-path subroutine now and then, and
// the call sites in the unrolled SwiGLU epilogues keep the compiler from overlapping one element's exp and
// division with the next one's. a / d below gives the same bits without a call, for every float g
// (tests/megakernel/test_numerics_gpu.cpp checks silu, sigmoid and silu_grad over all 2^32 inputs on the
// device). d is 1 (q = a), +inf (q = a * 0), NaN, 2 for |g| < 2^-100 (q = a * 0.5: exact, like the division),
// or in (1, 2^128). There q is the division's own fast path (reciprocal, one Newton step, quotient, FMA
// residual, correction), with both operands scaled by 2^-64 when d >= 2^64 so the reciprocal and the
// residual stay normal (a power-of-two scaling does not change the quotient); for d >= 2^126, where
// 1 / d is subnormal, a double reciprocal refined twice is rounded once (the quotient of two floats is never
// within 2^-52 of a rounding boundary, relative, without being on it). kNewtonSteps = 0 is the test's
// negative control.
template <int kNewtonSteps = 1>
__device__ __forceinline__ float divide_by_one_plus_exp(float a, float d, float g) {
  constexpr float k2p64 = 18446744073709551616.0f, k2m64 = 5.42101086242752217e-20f;
  constexpr float k2p126 = 8.50705917302346159e37f, k2m100 = 7.88860905221011805e-31f;
  const bool big = d >= k2p64;
  const float an = big ? __fmul_rn(a, k2m64) : a, bn = big ? __fmul_rn(d, k2m64) : d;
  float r;
  asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(bn));
  for (int i = 0; i < kNewtonSteps; ++i) r = __fmaf_rn(r, __fmaf_rn(-bn, r, 1.0f), r);
  float q = __fmul_rn(an, r);
  q = __fmaf_rn(r, __fmaf_rn(-bn, q, an), q);
  if (d >= k2p126 && !isinf(d)) {  // rare (g < -87.3): a divergent branch, not a call
    const double dd = d;
    double rd;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(rd) : "d"(dd));
    rd = __fma_rn(rd, __fma_rn(-dd, rd, 1.0), rd);
    rd = __fma_rn(rd, __fma_rn(-dd, rd, 1.0), rd);
    q = __double2float_rn(__dmul_rn(static_cast<double>(a), rd));
  }
  if (fabsf(g) < k2m100) q = __fmul_rn(a, 0.5f);
  if (d == 1.0f) q = a;
  if (isinf(d)) q = __fmul_rn(a, 0.0f);
  return q;
}
// calico_silu, calico_sigmoid and calico_silu_grad (calico/numerics.h) in the same order, the division above.
template <int kNewtonSteps = 1>
__device__ __forceinline__ float silu_without_call(float g) {
  return canonical_nan(divide_by_one_plus_exp<kNewtonSteps>(g, __fadd_rn(1.0f, calico_exp(-g)), g));
}
__device__ __forceinline__ float sigmoid_without_call(float g) {
  return canonical_nan(divide_by_one_plus_exp(1.0f, __fadd_rn(1.0f, calico_exp(-g)), g));
}
__device__ __forceinline__ float silu_grad_without_call(float g) {
  const float s = sigmoid_without_call(g);
  return canonical_nan(__fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s)))));
}

__device__ __forceinline__ SwigluOut swiglu_forward(float acc_g, float acc_u, const Clamp& c) {
  const uint16_t g = f32_to_bf16(acc_g), u = f32_to_bf16(acc_u);
  const float gc = c.gate(bf16_to_f32(g)), uc = c.up(bf16_to_f32(u));
  return {g, u, f32_to_bf16(__fmul_rn(silu_without_call(gc), uc))};
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
  r.dg = g_cut ? uint16_t(0) : f32_to_bf16(__fmul_rn(__fmul_rn(dh, u), silu_grad_without_call(g)));
  r.du = u_cut ? uint16_t(0) : f32_to_bf16(__fmul_rn(dh, silu_without_call(g)));
  return r;
}

__device__ __forceinline__ void store_bf16x2(uint16_t* p, uint16_t a, uint16_t b) {
  *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}

}  // namespace calico::gpu::mk
