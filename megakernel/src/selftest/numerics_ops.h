// One numerics.h operation applied to a 32-bit input pattern, for the host/device bit-for-bit test: the kernel
// (selftest/numerics_kernels.cu) and the test (tests/megakernel/test_numerics_gpu.cpp) both call this same
// function, so the only difference between the two sides is the compiler and the processor.
#pragma once

#include <cstdint>

#include "calico/megakernel.h"
#include "calico/numerics.h"

namespace calico::gpu {

CALICO_HD uint32_t numerics_apply(NumericsOp op, uint32_t x) {
  const float f = bits_f32(x);
  switch (op) {
    case NumericsOp::bf16_to_f32: return f32_bits(bf16_to_f32(static_cast<uint16_t>(x)));
    case NumericsOp::f32_to_bf16: return f32_to_bf16(f);
    case NumericsOp::round_bf16: return f32_bits(round_bf16(f));
    case NumericsOp::e4m3_to_f32: return f32_bits(fp8_to_f32(static_cast<uint8_t>(x), Fp8Kind::e4m3));
    case NumericsOp::e5m2_to_f32: return f32_bits(fp8_to_f32(static_cast<uint8_t>(x), Fp8Kind::e5m2));
    case NumericsOp::f32_to_e4m3_sat: return f32_to_fp8(f, Fp8Kind::e4m3, true);
    case NumericsOp::f32_to_e4m3_nosat: return f32_to_fp8(f, Fp8Kind::e4m3, false);
    case NumericsOp::f32_to_e5m2_sat: return f32_to_fp8(f, Fp8Kind::e5m2, true);
    case NumericsOp::f32_to_e5m2_nosat: return f32_to_fp8(f, Fp8Kind::e5m2, false);
    case NumericsOp::exp: return f32_bits(calico_exp(f));
    case NumericsOp::sigmoid: return f32_bits(calico_sigmoid(f));
    case NumericsOp::silu: return f32_bits(calico_silu(f));
    case NumericsOp::silu_grad: return f32_bits(calico_silu_grad(f));
    case NumericsOp::floor_log2: return static_cast<uint32_t>(f32_floor_log2(f));
    case NumericsOp::significand: return f32_significand(f);
    case NumericsOp::mx_scale_e4m3_rceil:
      return static_cast<uint32_t>(mx_scale_exponent(f, Fp8Kind::e4m3, MxScaleRule::rceil));
    case NumericsOp::mx_scale_e4m3_ocp:
      return static_cast<uint32_t>(mx_scale_exponent(f, Fp8Kind::e4m3, MxScaleRule::ocp_floor));
    case NumericsOp::mx_scale_e5m2_rceil:
      return static_cast<uint32_t>(mx_scale_exponent(f, Fp8Kind::e5m2, MxScaleRule::rceil));
    case NumericsOp::mx_scale_e5m2_ocp:
      return static_cast<uint32_t>(mx_scale_exponent(f, Fp8Kind::e5m2, MxScaleRule::ocp_floor));
    case NumericsOp::mx_dequant_e4m3:
      return mx_dequantize_to_bf16(static_cast<uint8_t>(x), static_cast<uint8_t>(x >> 8), Fp8Kind::e4m3);
    case NumericsOp::mx_dequant_e5m2:
      return mx_dequantize_to_bf16(static_cast<uint8_t>(x), static_cast<uint8_t>(x >> 8), Fp8Kind::e5m2);
    case NumericsOp::count: break;
  }
  return 0xDEADBEEFu;
}

}  // namespace calico::gpu
