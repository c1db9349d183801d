// numerics.h computed on the GPU (kernels built with --fmad=false) equals the host bit for bit: every bf16
// and fp8 code, edge cases and random bit patterns for the conversions, exp/sigmoid/silu/silu_grad, the MX
// scale rules, quantise/dequantise, and each MMA model step. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calico/megakernel.h"
#include "calico/numerics.h"
#include "selftest/numerics_ops.h"

namespace calico {
namespace {

class NumericsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no GPU: " << gpu::device_description();
  }
};

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Edge cases plus random bit patterns plus random values with exponents in [-40, 40] (where exp/silu live).
std::vector<uint32_t> f32_inputs(size_t random_count) {
  std::vector<uint32_t> v = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u,
                             0x3F800000u, 0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                             0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x3F808000u, 0x3F818000u, 0x43E00000u,
                             0x43E80000u, 0x47600000u, 0x47700000u, 0x42B17218u, 0x42B17217u, 0xC2CFF1B5u,
                             0xC2CFF1B4u, 0xC2AEAC50u, 0x3F317218u, 0xBF317218u};
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t m : {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0x10000u, 0x7FFFFFu, 0x400000u}) {
      v.push_back((e << 23) | m);
      v.push_back(0x80000000u | (e << 23) | m);
    }
  uint64_t s = 12345;
  for (size_t i = 0; i < random_count; ++i) v.push_back(static_cast<uint32_t>(splitmix(s)));
  for (size_t i = 0; i < random_count; ++i) {
    const uint64_t r = splitmix(s);
    const uint32_t e = 127 - 40 + static_cast<uint32_t>(r % 81);
    v.push_back((static_cast<uint32_t>(r >> 8) & 0x807FFFFFu) | (e << 23));
  }
  return v;
}

uint32_t host_apply(gpu::NumericsOp op, uint32_t x) { return gpu::numerics_apply(op, x); }

void expect_same(gpu::NumericsOp op, const std::vector<uint32_t>& in) {
  const std::vector<uint32_t> dev = gpu::numerics_on_device(op, in);
  ASSERT_EQ(dev.size(), in.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (dev[i] != host_apply(op, in[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << gpu::numerics_op_name(op) << ": " << bad << " of " << in.size() << " differ; first input 0x"
                     << fmt::format("{:08X}: device 0x{:08X} host 0x{:08X}", in[first], dev[first],
                                    host_apply(op, in[first]));
}

std::vector<uint32_t> all_codes(uint32_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST_F(NumericsGpu, DecodeEveryCode) {
  expect_same(gpu::NumericsOp::bf16_to_f32, all_codes(65536));
  expect_same(gpu::NumericsOp::e4m3_to_f32, all_codes(256));
  expect_same(gpu::NumericsOp::e5m2_to_f32, all_codes(256));
}

TEST_F(NumericsGpu, EncodeAndRound) {
  std::vector<uint32_t> in = f32_inputs(1 << 20);
  // Every bf16 and fp8 value, and the midpoints just around them, as f32 inputs.
  for (uint32_t h = 0; h < 65536; ++h)
    for (uint32_t d : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u}) in.push_back((h << 16) | d);
  for (gpu::NumericsOp op : {gpu::NumericsOp::f32_to_bf16, gpu::NumericsOp::round_bf16, gpu::NumericsOp::f32_to_e4m3_sat,
                             gpu::NumericsOp::f32_to_e4m3_nosat, gpu::NumericsOp::f32_to_e5m2_sat,
                             gpu::NumericsOp::f32_to_e5m2_nosat})
    expect_same(op, in);
}

TEST_F(NumericsGpu, ExpAndSilu) {
  const std::vector<uint32_t> in = f32_inputs(1 << 20);
  for (gpu::NumericsOp op : {gpu::NumericsOp::exp, gpu::NumericsOp::sigmoid, gpu::NumericsOp::silu,
                             gpu::NumericsOp::silu_grad})
    expect_same(op, in);
}

// The epilogues' one-instruction bf16x2 conversion equals numerics.h's f32_to_bf16 for every float in both
// halves (checked on the device over all 2^32 patterns); the round-toward-zero form must not (the check can fail).
TEST_F(NumericsGpu, EpilogueBf16x2ConversionEqualsNumericsForEveryFloat) {
  const gpu::ConversionCheck rn = gpu::check_bf16x2_conversion(false);
  EXPECT_EQ(rn.mismatches, 0u) << fmt::format("first differing input 0x{:08X}", rn.first_input);
  const gpu::ConversionCheck rz = gpu::check_bf16x2_conversion(true);
  EXPECT_GT(rz.mismatches, 0u) << "negative control: round toward zero should differ from round to nearest even";
}

TEST_F(NumericsGpu, BitHelpersAndMxScales) {
  std::vector<uint32_t> finite_nonzero, positive;
  for (uint32_t x : f32_inputs(1 << 18)) {
    if (!f32_is_finite(bits_f32(x)) || (x & 0x7FFFFFFFu) == 0) continue;
    finite_nonzero.push_back(x);
    positive.push_back(x & 0x7FFFFFFFu);
  }
  expect_same(gpu::NumericsOp::floor_log2, finite_nonzero);
  expect_same(gpu::NumericsOp::significand, finite_nonzero);
  for (gpu::NumericsOp op : {gpu::NumericsOp::mx_scale_e4m3_rceil, gpu::NumericsOp::mx_scale_e4m3_ocp,
                             gpu::NumericsOp::mx_scale_e5m2_rceil, gpu::NumericsOp::mx_scale_e5m2_ocp})
    expect_same(op, positive);
}

TEST_F(NumericsGpu, MxDequantiseEveryElementAndScale) {
  expect_same(gpu::NumericsOp::mx_dequant_e4m3, all_codes(65536));  // element | scale << 8
  expect_same(gpu::NumericsOp::mx_dequant_e5m2, all_codes(65536));
}

TEST_F(NumericsGpu, MxQuantiseBlocks) {
  uint64_t s = 777;
  for (int block : {32, 7}) {
    std::vector<float> x;
    for (int b = 0; b < 8192; ++b) {
      const int kind = b % 8;  // 0 all zero, 1 one NaN, 2 one inf, 3 tiny, 4 huge, else wide random
      for (int i = 0; i < block; ++i) {
        const uint64_t r = splitmix(s);
        uint32_t e = 127 - 30 + static_cast<uint32_t>(r % 61);
        if (kind == 3) e = static_cast<uint32_t>(r % 20);
        if (kind == 4) e = 230 + static_cast<uint32_t>(r % 25);
        float v = bits_f32((static_cast<uint32_t>(r >> 8) & 0x807FFFFFu) | (e << 23));
        if (kind == 0) v = (r & 1) ? -0.0f : 0.0f;
        if (kind == 1 && i == block / 2) v = bits_f32(0x7FC00000u);
        if (kind == 2 && i == 0) v = bits_f32(0xFF800000u);
        x.push_back(v);
      }
    }
    for (Fp8Kind kind : {Fp8Kind::e4m3, Fp8Kind::e5m2})
      for (MxScaleRule rule : {MxScaleRule::rceil, MxScaleRule::ocp_floor}) {
        const std::vector<uint8_t> dev = gpu::mx_quantize_on_device(x, block, kind, rule);
        const size_t blocks = x.size() / block;
        ASSERT_EQ(dev.size(), blocks * 33);
        size_t bad = 0;
        for (size_t i = 0; i < blocks; ++i) {
          uint8_t el[kMxBlock] = {};
          const uint8_t scale = mx_quantize_block(x.data() + i * block, block, kind, rule, el);
          bool same = dev[i * 33 + 32] == scale;
          for (int j = 0; j < kMxBlock; ++j) same = same && dev[i * 33 + j] == el[j];
          if (!same) ++bad;
        }
        EXPECT_EQ(bad, 0u) << "block " << block << " kind " << static_cast<int>(kind) << " rule " << static_cast<int>(rule);
      }
  }
}

// Random steps: raw bit patterns (NaN, inf, subnormals) and normals with a wide exponent spread.
TEST_F(NumericsGpu, MmaStepBf16) {
  const size_t n = 1 << 18;
  std::vector<uint16_t> a(n * 16), b(n * 16);
  std::vector<float> c(n);
  uint64_t s = 4242;
  for (size_t i = 0; i < n; ++i) {
    const bool raw = i % 2 == 0;
    for (int k = 0; k < 16; ++k) {
      const uint64_t r = splitmix(s);
      if (raw) {
        a[i * 16 + k] = static_cast<uint16_t>(r);
        b[i * 16 + k] = static_cast<uint16_t>(r >> 16);
      } else {
        a[i * 16 + k] = static_cast<uint16_t>(((r & 0x807F) | ((100 + (r >> 8) % 56) << 7)) & 0xFFFF);
        b[i * 16 + k] = static_cast<uint16_t>((((r >> 16) & 0x807F) | ((100 + (r >> 24) % 56) << 7)) & 0xFFFF);
      }
    }
    const uint64_t r = splitmix(s);
    c[i] = bits_f32(i % 4 == 1 ? static_cast<uint32_t>(r & 0x80000000u) : static_cast<uint32_t>(r));
  }
  for (MmaModel model : {MmaModel::hopper_bf16, MmaModel::blackwell_bf16}) {
    const std::vector<float> dev = gpu::mma_step_bf16_on_device(a, b, c, model);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      if (f32_bits(dev[i]) != f32_bits(mma_step_bf16(&a[i * 16], &b[i * 16], c[i], model))) ++bad;
    EXPECT_EQ(bad, 0u) << "model " << static_cast<int>(model);
  }
}

TEST_F(NumericsGpu, MmaStepFp8) {
  const size_t n = 1 << 17;
  std::vector<uint8_t> a(n * 32), b(n * 32), sa(n), sb(n);
  std::vector<float> c(n);
  uint64_t s = 99;
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 32; ++k) {
      const uint64_t r = splitmix(s);
      a[i * 32 + k] = static_cast<uint8_t>(r);
      b[i * 32 + k] = static_cast<uint8_t>(r >> 8);
    }
    const uint64_t r = splitmix(s);
    sa[i] = static_cast<uint8_t>(r % 7 == 0 ? 0xFF : 100 + (r >> 8) % 60);
    sb[i] = static_cast<uint8_t>(r % 11 == 0 ? (r >> 16) : 100 + (r >> 24) % 60);
    c[i] = bits_f32(i % 4 == 1 ? 0u : static_cast<uint32_t>(r >> 32));
  }
  for (Fp8Kind ka : {Fp8Kind::e4m3, Fp8Kind::e5m2})
    for (Fp8Kind kb : {Fp8Kind::e4m3, Fp8Kind::e5m2})
      for (MmaModel model : {MmaModel::hopper_fp8, MmaModel::blackwell_mxfp8}) {
        const std::vector<float> dev = gpu::mma_step_fp8_on_device(a, ka, sa, b, kb, sb, c, model);
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i)
          if (f32_bits(dev[i]) != f32_bits(mma_step_fp8(&a[i * 32], ka, sa[i], &b[i * 32], kb, sb[i], c[i], model))) ++bad;
        EXPECT_EQ(bad, 0u) << "kinds " << static_cast<int>(ka) << static_cast<int>(kb) << " model " << static_cast<int>(model);
      }
}

}  // namespace
}  // namespace calico
