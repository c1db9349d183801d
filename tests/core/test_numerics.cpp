// The numerical contract's scalar pieces (core/include/calico/numerics.h, DESIGN 2.5/2.6): bf16, e4m3, e5m2,
// e8m0, MX block quantisation, the portable exp/SiLU, and the MMA models' published vectors and NaN/inf rules.
// Expected values come from the formats' definitions (written here with ldexp/double), not from the header.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "calico/numerics.h"

namespace calico {
namespace {

// ---- bf16 ------------------------------------------------------------------------------------------------
TEST(NumericsBf16, RoundToNearestEvenTies) {
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F808000u)), 0x3F80);  // 1 + 2^-8: tie, keep even 0x3F80
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F818000u)), 0x3F82);  // tie above odd 0x3F81: up to even
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F807FFFu)), 0x3F80);  // just below
  EXPECT_EQ(f32_to_bf16(bits_f32(0xBF808000u)), 0xBF80);  // sign symmetric
  EXPECT_EQ(f32_to_bf16(bits_f32(0x00008000u)), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(f32_to_bf16(bits_f32(0x00018000u)), 0x0002);
}

TEST(NumericsBf16, OverflowInfAndCanonicalNaN) {
  EXPECT_EQ(f32_to_bf16(bits_f32(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds past bf16 max: inf
  EXPECT_EQ(f32_to_bf16(bits_f32(0x7F7F7FFFu)), 0x7F7F);  // below the tie: bf16 max
  EXPECT_EQ(f32_to_bf16(bits_f32(0x7F7F8000u)), 0x7F80);  // the tie above odd 0x7F7F: inf
  EXPECT_EQ(f32_to_bf16(bits_f32(0xFF7FFFFFu)), 0xFF80);
  EXPECT_EQ(f32_to_bf16(bits_f32(0x7F800000u)), 0x7F80);
  EXPECT_EQ(f32_to_bf16(bits_f32(0xFF800000u)), 0xFF80);
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0xFF800001u, 0x7FFFFFFFu})
    EXPECT_EQ(f32_to_bf16(bits_f32(nan)), kBf16CanonicalNaN) << std::hex << nan;
}

// Independent RNE to 8 significant bits in double (frexp/nearbyint), for finite non-overflowing floats.
uint16_t bf16_reference(float x) {
  if (x == 0.0f) return std::signbit(x) ? 0x8000 : 0x0000;
  int e;
  std::frexp(static_cast<double>(x), &e);         // |x| in [2^(e-1), 2^e)
  const int q = std::max(e - 1, -126) - 7;        // bf16 quantum at x
  const double r = std::nearbyint(std::ldexp(static_cast<double>(x), -q));  // ties to even (default mode)
  const float rounded = static_cast<float>(std::ldexp(r, q));
  uint32_t u;
  std::memcpy(&u, &rounded, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(NumericsBf16, MatchesDoubleRneOnRandomFloats) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    const float x = bits_f32(u);
    if (!f32_is_finite(x) || std::fabs(x) >= 3.3e38f) continue;
    ASSERT_EQ(f32_to_bf16(x), bf16_reference(x)) << std::hex << u;
  }
}

// ---- FP8 -------------------------------------------------------------------------------------------------
double e4m3_value(uint8_t v) {  // OCP E4M3FN from its definition; NaN codes excluded by the caller
  const int e = (v >> 3) & 0xF, f = v & 7;
  const double mag = e == 0 ? std::ldexp(f, -9) : std::ldexp(8 + f, e - 7 - 3);
  return (v & 0x80) ? -mag : mag;
}
double e5m2_value(uint8_t v) {
  const int e = (v >> 2) & 0x1F, f = v & 3;
  const double mag = e == 0 ? std::ldexp(f, -16) : std::ldexp(4 + f, e - 15 - 2);
  return (v & 0x80) ? -mag : mag;
}

TEST(NumericsFp8, E4m3DecodeAndRoundTripAllCodes) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t v = static_cast<uint8_t>(c);
    if ((v & 0x7F) == 0x7F) {
      EXPECT_TRUE(f32_is_nan(fp8_to_f32(v, Fp8Kind::e4m3)));
      continue;
    }
    const float x = fp8_to_f32(v, Fp8Kind::e4m3);
    EXPECT_EQ(static_cast<double>(x), e4m3_value(v)) << c;
    EXPECT_EQ(f32_to_fp8(x, Fp8Kind::e4m3, true), v) << c;
    EXPECT_EQ(f32_to_fp8(x, Fp8Kind::e4m3, false), v) << c;
  }
}

TEST(NumericsFp8, E4m3Boundaries) {
  const auto enc = [](float x, bool sat) { return f32_to_fp8(x, Fp8Kind::e4m3, sat); };
  EXPECT_EQ(enc(448.0f, true), 0x7E);
  EXPECT_EQ(enc(464.0f, true), 0x7E);    // halfway 448..480: ties to even mantissa (448 = 1.110b)
  EXPECT_EQ(enc(464.0f, false), 0x7E);   // rounds to a finite value, so no overflow either
  EXPECT_EQ(enc(464.01f, true), 0x7E);   // above the tie: saturates
  EXPECT_EQ(enc(464.01f, false), kE4m3NaN);  // overflow without saturation: NaN (no inf in E4M3FN)
  EXPECT_EQ(enc(480.0f, true), 0x7E);
  EXPECT_EQ(enc(480.0f, false), kE4m3NaN);
  EXPECT_EQ(enc(-480.0f, true), 0xFE);
  EXPECT_EQ(enc(INFINITY, true), 0x7E);
  EXPECT_EQ(enc(-INFINITY, false), 0xFF);
  EXPECT_EQ(enc(NAN, true), kE4m3NaN);
  EXPECT_EQ(enc(std::ldexp(1.0f, -9), true), 0x01);    // smallest subnormal
  EXPECT_EQ(enc(std::ldexp(1.0f, -10), true), 0x00);   // half of it: tie to even zero
  EXPECT_EQ(enc(-std::ldexp(1.0f, -10), true), 0x80);  // signed zero kept
  EXPECT_EQ(enc(std::ldexp(1.5f, -10), true), 0x01);   // above the tie
  EXPECT_EQ(enc(std::ldexp(3.0f, -10), true), 0x02);   // 1.5 quanta: tie to even 2
  EXPECT_EQ(enc(std::ldexp(1.0f, -6), true), 0x08);    // smallest normal
  EXPECT_EQ(enc(std::ldexp(15.0f, -10), true), 0x08);  // 7.5 quanta of 2^-9: tie to even 8 = 2^-6
}

TEST(NumericsFp8, E4m3MatchesNearestEvenOnRandomFloats) {
  // Nearest representable by search over the finite codes, ties to the even code (an independent rule).
  std::vector<double> grid;
  for (int c = 0; c <= 0x7E; ++c) grid.push_back(e4m3_value(static_cast<uint8_t>(c)));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(0.0f, 1.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), static_cast<int>(rng() % 22) - 12);
    int best = 0;
    for (int c = 1; c <= 0x7E; ++c) {
      const double dc = std::fabs(grid[c] - x), db = std::fabs(grid[best] - x);
      if (dc < db || (dc == db && (c & 1) == 0)) best = c;
    }
    if (x > 464.0f) best = 0x7E;  // saturation
    ASSERT_EQ(f32_to_fp8(x, Fp8Kind::e4m3, true), best) << x;
  }
}

TEST(NumericsFp8, E5m2) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t v = static_cast<uint8_t>(c);
    const float x = fp8_to_f32(v, Fp8Kind::e5m2);
    if ((v & 0x7F) > 0x7C) { EXPECT_TRUE(f32_is_nan(x)); continue; }
    if ((v & 0x7F) == 0x7C) { EXPECT_TRUE(f32_is_inf(x)); EXPECT_EQ(x < 0, (v & 0x80) != 0); continue; }
    EXPECT_EQ(static_cast<double>(x), e5m2_value(v)) << c;
    EXPECT_EQ(f32_to_fp8(x, Fp8Kind::e5m2), v) << c;
  }
  const auto enc = [](float x, bool sat) { return f32_to_fp8(x, Fp8Kind::e5m2, sat); };
  EXPECT_EQ(enc(57344.0f, true), 0x7B);
  EXPECT_EQ(enc(61440.0f, true), 0x7B);     // tie 57344 (odd 1.11b) / 65536 (even): overflows, saturates
  EXPECT_EQ(enc(61440.0f, false), kE5m2Inf);
  EXPECT_EQ(enc(61439.0f, false), 0x7B);
  EXPECT_EQ(enc(INFINITY, false), kE5m2Inf);
  EXPECT_EQ(enc(-INFINITY, false), 0xFC);
  EXPECT_EQ(enc(INFINITY, true), 0x7B);
  EXPECT_EQ(enc(std::ldexp(1.0f, -16), true), 0x01);
  EXPECT_EQ(enc(std::ldexp(1.0f, -17), true), 0x00);
  EXPECT_EQ(enc(NAN, false), kE5m2NaN);
}

// ---- E8M0 and MX ------------------------------------------------------------------------------------------
TEST(NumericsMx, E8m0) {
  EXPECT_EQ(e8m0_from_exponent(0), 127);
  EXPECT_EQ(e8m0_from_exponent(-127), 0);
  EXPECT_EQ(e8m0_from_exponent(127), 254);
  for (int s = -127; s <= 127; ++s) EXPECT_EQ(e8m0_exponent(e8m0_from_exponent(s)), s);
  EXPECT_TRUE(e8m0_is_nan(0xFF));
  EXPECT_FALSE(e8m0_is_nan(0xFE));
}

TEST(NumericsMx, RceilNeverSaturatesAndIsSmallest) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int t = 0; t < 5000; ++t) {
    float x[kMxBlock];
    const int e = static_cast<int>(rng() % 200) - 100;
    for (float& v : x) v = std::ldexp(u(rng), e - static_cast<int>(rng() % 12));
    uint8_t q[kMxBlock];
    const uint8_t scale = mx_quantize_block(x, kMxBlock, Fp8Kind::e4m3, MxScaleRule::rceil, q);
    const int s = e8m0_exponent(scale);
    double amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
    ASSERT_LE(amax, std::ldexp(448.0, s)) << "RCEIL scale too small";       // never saturates
    ASSERT_GT(amax, std::ldexp(448.0, s - 1)) << "RCEIL scale not minimal";  // smallest such scale
    for (int i = 0; i < kMxBlock; ++i) {
      ASSERT_NE(q[i] & 0x7F, 0x7F);
      // Element = x / 2^s rounded to nearest: error at most half an e4m3 quantum of the scaled value.
      const double scaled = std::ldexp(static_cast<double>(x[i]), -s);
      ASSERT_LE(std::fabs(e4m3_value(q[i]) - scaled), std::ldexp(1.0, std::max(std::ilogb(scaled), -6) - 4) + 0.0)
          << i;
    }
  }
}

TEST(NumericsMx, OcpFloorMaySaturate) {
  float x[kMxBlock] = {};
  x[0] = std::ldexp(1.9f, 5);  // amax = 1.9 * 2^5: floor rule gives s = 5 - 8 = -3, 1.9 * 2^8 = 486.4 > 448
  x[1] = 0.25f;
  uint8_t q[kMxBlock];
  const uint8_t s_floor = mx_quantize_block(x, kMxBlock, Fp8Kind::e4m3, MxScaleRule::ocp_floor, q);
  EXPECT_EQ(e8m0_exponent(s_floor), -3);
  EXPECT_EQ(q[0], 0x7E);  // saturated to 448
  EXPECT_EQ(e4m3_value(q[1]), 2.0);
  const uint8_t s_rceil = mx_quantize_block(x, kMxBlock, Fp8Kind::e4m3, MxScaleRule::rceil, q);
  EXPECT_EQ(e8m0_exponent(s_rceil), -2);  // 2^ceil(log2(60.8/448)) = 2^-2
  EXPECT_EQ(e4m3_value(q[0]), 240.0);     // 243.2 -> 240 (quantum 16)
}

TEST(NumericsMx, AllZeroAndNonFiniteBlocks) {
  float x[kMxBlock];
  for (int i = 0; i < kMxBlock; ++i) x[i] = (i % 2) ? -0.0f : 0.0f;
  uint8_t q[kMxBlock];
  EXPECT_EQ(mx_quantize_block(x, kMxBlock, Fp8Kind::e4m3, MxScaleRule::rceil, q), 127);
  for (int i = 0; i < kMxBlock; ++i) EXPECT_EQ(q[i], (i % 2) ? 0x80 : 0x00);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (int i = 0; i < kMxBlock; ++i) x[i] = 1.0f;
    x[7] = bad;
    const uint8_t scale = mx_quantize_block(x, kMxBlock, Fp8Kind::e4m3, MxScaleRule::rceil, q);
    EXPECT_EQ(scale, kE8m0NaN);
    for (int i = 0; i < kMxBlock; ++i) {
      EXPECT_EQ(q[i], kE4m3NaN);
      EXPECT_EQ(mx_dequantize_to_bf16(q[i], scale, Fp8Kind::e4m3), kBf16CanonicalNaN);
    }
  }
}

TEST(NumericsMx, DequantiseToBf16IsExact) {
  EXPECT_EQ(mx_dequantize_to_bf16(0x7E, e8m0_from_exponent(127), Fp8Kind::e4m3), 0x7F80);  // 448 * 2^127: inf
  // 448 * 2^119 < 2^128 and 2^-9 * 2^-120 >= 2^-133 (bf16's smallest subnormal): the exact range.
  for (int s = -120; s <= 119; ++s) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t v = static_cast<uint8_t>(c);
      if ((v & 0x7F) == 0x7F) continue;
      const uint16_t h = mx_dequantize_to_bf16(v, e8m0_from_exponent(s), Fp8Kind::e4m3);
      ASSERT_EQ(static_cast<double>(bf16_to_f32(h)), std::ldexp(e4m3_value(v), s)) << c << " s=" << s;
    }
  }
}

// ---- exp / SiLU -------------------------------------------------------------------------------------------
double ulp_of(double y) { return std::ldexp(1.0, std::max(std::ilogb(y), -126) - 23); }  // float ulp at |y|

// Bound: the Cephes polynomial's own error on [-ln2/2, ln2/2] is below 2^-24 relative; the reduction
// r = x - n*ln2 (hi part exact, lo part one rounding, n <= 150) adds under 0.5 ulp(r) ~ 2^-25 relative to
// exp; the Horner steps and the final "+1" add at most ~1 ulp; the scaling by 2^n is exact for normal results.
// Total < 2 ulp.
TEST(NumericsExp, WithinTwoUlpOverTheNormalRange) {
  std::mt19937 rng(13);
  const float lo = -87.33f, hi = 88.72f;  // exp(lo) > 2^-126 (normal), exp(hi) < FLT_MAX
  std::uniform_real_distribution<float> u(lo, hi), small(-1.0f, 1.0f);
  double worst = 0;
  for (int i = 0; i < 400000; ++i) {
    const float x = (i % 4 == 0) ? std::ldexp(small(rng), -static_cast<int>(rng() % 30)) : u(rng);
    const double want = std::exp(static_cast<double>(x));
    const double err = std::fabs(calico_exp(x) - want) / ulp_of(want);
    worst = std::max(worst, err);
    ASSERT_LE(err, 2.0) << "x=" << x;
  }
  RecordProperty("max_ulp", std::to_string(worst));
  EXPECT_EQ(calico_exp(0.0f), 1.0f);
  EXPECT_TRUE(f32_is_inf(calico_exp(89.0f)));
  EXPECT_EQ(calico_exp(-104.0f), 0.0f);
  EXPECT_TRUE(f32_is_nan(calico_exp(NAN)));
  EXPECT_EQ(calico_exp(-INFINITY), 0.0f);
}

// silu = g / (1 + e), e = exp(-g): e within 2 ulp, "1 + e" and the division each add 0.5 ulp, and
// d(1+e)/(1+e) <= de/e. So the relative error is below 2 + 0.5 + 0.5 + (second order) ulp: bound 4 ulp.
TEST(NumericsSilu, SiluWithinFourUlp) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-85.0f, 85.0f);
  for (int i = 0; i < 300000; ++i) {
    const float g = (i % 3 == 0) ? u(rng) / 16.0f : u(rng);
    const double gd = g, want = gd / (1.0 + std::exp(-gd));
    if (want == 0.0) continue;
    ASSERT_LE(std::fabs(calico_silu(g) - want), 4.0 * ulp_of(std::fabs(want))) << "g=" << g;
  }
  EXPECT_EQ(calico_silu(0.0f), 0.0f);
  EXPECT_EQ(calico_silu(INFINITY), INFINITY);
  EXPECT_TRUE(f32_is_nan(calico_silu(NAN)));
}

// silu' = s (1 + g (1 - s)). s has relative error <= 3 eps (eps = 2^-24, as for silu); 1 - s is exact
// (Sterbenz for s >= 1/2, one rounding otherwise) so its absolute error is <= 4 eps s; times |g|, plus one
// rounding each for the product, the "+1" and the final multiply. Absolute error bound:
// eps * s * (8 + 6 |g|), with s, g the exact values (checked with the double-precision s).
TEST(NumericsSilu, SiluGradWithinDerivedBound) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> u(-40.0f, 40.0f);
  const double eps = std::ldexp(1.0, -24);
  for (int i = 0; i < 300000; ++i) {
    const float g = (i % 3 == 0) ? u(rng) / 8.0f : u(rng);
    const double gd = g, s = 1.0 / (1.0 + std::exp(-gd)), want = s * (1.0 + gd * (1.0 - s));
    const double bound = eps * s * (8.0 + 6.0 * std::fabs(gd)) + std::ldexp(1.0, -149);
    ASSERT_LE(std::fabs(calico_silu_grad(g) - want), bound) << "g=" << g;
  }
}

// ---- MMA models: published vector and special values -------------------------------------------------------
uint16_t bf(float x) { return f32_to_bf16(x); }

TEST(NumericsMma, PublishedVectorHopperBf16) {
  // 2^23 + (-2^23) - 0.5 - 0.25 - 0.125: Emax = 23, grid 2^(23-25) = 0.25, so -0.125 truncates away.
  uint16_t a[16] = {}, b[16] = {};
  const float terms[5] = {std::ldexp(1.0f, 23), -std::ldexp(1.0f, 23), -0.5f, -0.25f, -0.125f};
  for (int i = 0; i < 5; ++i) { a[i] = bf(terms[i]); b[i] = bf(1.0f); }
  EXPECT_EQ(mma_step_bf16(a, b, 0.0f, MmaModel::hopper_bf16), -0.75f);
  EXPECT_EQ(mma_step_bf16(a, b, 0.0f, MmaModel::blackwell_bf16), -0.75f);
}

TEST(NumericsMma, PublishedVectorHopperFp8) {
  // Same sum with e5m2 factors: 2^12 * 2^11 = 2^23. F = 13: grid 2^10, all three small terms truncate: 0.
  uint8_t a[32] = {}, b[32] = {};
  const float av[5] = {std::ldexp(1.0f, 12), -std::ldexp(1.0f, 12), -0.5f, -0.25f, -0.125f};
  const float bv[5] = {std::ldexp(1.0f, 11), std::ldexp(1.0f, 11), 1.0f, 1.0f, 1.0f};
  for (int i = 0; i < 5; ++i) {
    a[i] = f32_to_fp8(av[i], Fp8Kind::e5m2);
    b[i] = f32_to_fp8(bv[i], Fp8Kind::e5m2);
    ASSERT_EQ(fp8_to_f32(a[i], Fp8Kind::e5m2), av[i]);
    ASSERT_EQ(fp8_to_f32(b[i], Fp8Kind::e5m2), bv[i]);
  }
  const float out = mma_step_hopper_fp8(a, Fp8Kind::e5m2, b, Fp8Kind::e5m2, 0.0f);
  EXPECT_EQ(f32_bits(out), 0u);  // +0
  // Blackwell MXFP8 (F = 25) keeps -0.75 like BF16.
  EXPECT_EQ(mma_step_blackwell_mxfp8(a, Fp8Kind::e5m2, 127, b, Fp8Kind::e5m2, 127, 0.0f), -0.75f);
}

TEST(NumericsMma, HopperFp8KeepsThirteenFractionBits) {
  // One product 1*1 and c = 1 + 2^-13 + 2^-14: F = 13 truncates c to 1 + 2^-13 (grid 2^-13); the sum
  // 2 + 2^-13 keeps 13 fraction bits below 2^1, so it truncates to 2. An fp32 (23-bit) rule would keep it.
  uint8_t a[32] = {}, b[32] = {};
  a[0] = f32_to_fp8(1.0f, Fp8Kind::e4m3); b[0] = a[0];
  const float c = 1.0f + std::ldexp(1.0f, -13) + std::ldexp(1.0f, -14);
  EXPECT_EQ(mma_step_hopper_fp8(a, Fp8Kind::e4m3, b, Fp8Kind::e4m3, c), 2.0f);
  const float c2 = std::ldexp(1.0f, -12) + std::ldexp(1.0f, -13);
  EXPECT_EQ(mma_step_hopper_fp8(a, Fp8Kind::e4m3, b, Fp8Kind::e4m3, c2), 1.0f + c2);  // 13 bits fit whole
  // c below 2^-126: c's exponent clamps at -126, so Emax = -126 and the alignment grid is 2^-139 (also the
  // e8m13 output grid there): 1.5 * 2^-130 + 2^-139 survives, the 2^-140 bit drops.
  const float tiny = std::ldexp(1.5f, -130) + std::ldexp(1.0f, -139) + std::ldexp(1.0f, -140);
  uint8_t z[32] = {};
  EXPECT_EQ(mma_step_hopper_fp8(z, Fp8Kind::e4m3, z, Fp8Kind::e4m3, tiny),
            std::ldexp(1.5f, -130) + std::ldexp(1.0f, -139));
}

TEST(NumericsMma, NanAndInfRules) {
  const uint16_t kInf = 0x7F80, kNegInf = 0xFF80, kNaN = 0x7FC0, one = bf(1.0f), zero = 0;
  const auto step = [](std::initializer_list<uint16_t> av, std::initializer_list<uint16_t> bv, float c) {
    uint16_t a[16] = {}, b[16] = {};
    std::copy(av.begin(), av.end(), a);
    std::copy(bv.begin(), bv.end(), b);
    return f32_bits(mma_step_bf16(a, b, c));
  };
  EXPECT_EQ(step({kNaN}, {one}, 1.0f), kF32CanonicalNaN);                       // NaN in
  EXPECT_EQ(step({one}, {one}, bits_f32(0xFFC00001u)), kF32CanonicalNaN);       // NaN accumulator
  EXPECT_EQ(step({kInf}, {zero}, 1.0f), kF32CanonicalNaN);                      // inf * 0
  EXPECT_EQ(step({zero}, {kNegInf}, 1.0f), kF32CanonicalNaN);                   // 0 * -inf
  EXPECT_EQ(step({kInf, kInf}, {one, bf(-1.0f)}, 1.0f), kF32CanonicalNaN);     // +inf with -inf
  EXPECT_EQ(step({kInf}, {one}, -INFINITY), kF32CanonicalNaN);                  // product +inf, c -inf
  EXPECT_EQ(step({kInf}, {bf(-2.0f)}, 5.0f), 0xFF800000u);                      // lone inf propagates
  EXPECT_EQ(step({one}, {one}, INFINITY), 0x7F800000u);                         // inf accumulator
  EXPECT_EQ(step({kInf, kInf}, {one, one}, INFINITY), 0x7F800000u);             // same-sign infs
  EXPECT_EQ(step({bf(3e38f), bf(3e38f)}, {bf(2.0f), bf(2.0f)}, 0.0f), 0x7F800000u);  // overflow -> inf

  uint8_t a[32] = {}, b[32] = {};
  a[0] = kE5m2Inf; b[0] = f32_to_fp8(1.0f, Fp8Kind::e5m2);
  EXPECT_EQ(f32_bits(mma_step_hopper_fp8(a, Fp8Kind::e5m2, b, Fp8Kind::e5m2, 0.0f)), 0x7F800000u);
  b[0] = 0;
  EXPECT_EQ(f32_bits(mma_step_hopper_fp8(a, Fp8Kind::e5m2, b, Fp8Kind::e5m2, 0.0f)), kF32CanonicalNaN);
  a[0] = kE4m3NaN; b[0] = f32_to_fp8(1.0f, Fp8Kind::e4m3);
  EXPECT_EQ(f32_bits(mma_step_hopper_fp8(a, Fp8Kind::e4m3, b, Fp8Kind::e4m3, 0.0f)), kF32CanonicalNaN);
  a[0] = f32_to_fp8(1.0f, Fp8Kind::e4m3);
  EXPECT_EQ(f32_bits(mma_step_blackwell_mxfp8(a, Fp8Kind::e4m3, kE8m0NaN, b, Fp8Kind::e4m3, 127, 0.0f)),
            kF32CanonicalNaN);  // NaN block scale
}

TEST(NumericsMma, ZeroTermRules) {
  // BF16: zero terms sit at -133, whatever the other factor: 0 * 2^120 does not raise Emax above c's, so
  // c = 2^-40 (1 + 2^-23) survives whole (MMA-Sim's exponent rule would put that term at -6 and truncate c).
  uint16_t a[16] = {}, b[16] = {};
  b[0] = bf(std::ldexp(1.0f, 120));
  const float c = std::ldexp(1.0f + std::ldexp(1.0f, -23), -40);
  EXPECT_EQ(mma_step_bf16(a, b, c), c);
  b[0] = 0;
  // c = +0 (E = -133) and products 2^-140, -2^-155: Emax = -133, grid 2^-158 keeps -2^-155, and the RZ
  // result is 2^-140 - 2^-149. (A zero c at -126 would give grid 2^-151 and exactly 2^-140.)
  a[0] = bf(std::ldexp(1.0f, -70)); b[0] = bf(std::ldexp(1.0f, -70));
  a[1] = bf(-std::ldexp(1.0f, -77)); b[1] = bf(std::ldexp(1.0f, -78));
  EXPECT_EQ(mma_step_bf16(a, b, 0.0f), std::ldexp(1.0f, -140) - std::ldexp(1.0f, -149));
  a[0] = a[1] = b[0] = b[1] = 0;
  // An exact zero result is +0 even when every term is -0 (seen on the H200, megakernel/PROBE.md).
  for (uint16_t& v : a) v = 0x8000;
  EXPECT_EQ(f32_bits(mma_step_bf16(a, b, -0.0f)), 0u);
  EXPECT_EQ(f32_bits(mma_step_bf16(a, b, 0.0f)), 0u);
  // FP8 rows: the same -133 rule (issue 10, measured on the H200): 0 * 2^15 is a zero term at -133, so
  // c = 2^-125 is E_max and survives whole. (The old -126 rule put that term at -111, grid 2^-124: c gone.)
  uint8_t fa[32] = {}, fb[32] = {};
  fb[0] = f32_to_fp8(32768.0f, Fp8Kind::e5m2);
  EXPECT_EQ(mma_step_hopper_fp8(fa, Fp8Kind::e5m2, fb, Fp8Kind::e5m2, std::ldexp(1.0f, -125)), std::ldexp(1.0f, -125));
  MmaModelParams legacy = mma_model_params(MmaModel::hopper_fp8);
  legacy.zero_rule = MmaZeroRule::legacy_minus_126;
  EXPECT_EQ(mma_step_fp8_with(fa, Fp8Kind::e5m2, 127, fb, Fp8Kind::e5m2, 127, std::ldexp(1.0f, -125), legacy), 0.0f);
  fb[0] = 0;  // 0 * 0: c's own -125 is Emax and survives under either rule
  EXPECT_EQ(mma_step_hopper_fp8(fa, Fp8Kind::e5m2, fb, Fp8Kind::e5m2, std::ldexp(1.0f, -125)),
            std::ldexp(1.0f, -125));
  // Blackwell MXFP8: a zero term carries no scale exponents. Scales 2^127 * 2^127 with a zero operand next to
  // 2^8 and c = 2^-120 (1 + 2^-22): c is E_max and is kept whole (F = 25, 23 fraction bits).
  uint8_t ma[32] = {}, mb[32] = {};
  mb[0] = 0x78;  // e4m3 256
  const float cm = std::ldexp(1.0f + std::ldexp(1.0f, -22), -120);
  EXPECT_EQ(mma_step_blackwell_mxfp8(ma, Fp8Kind::e4m3, 254, mb, Fp8Kind::e4m3, 254, cm), cm);
  MmaModelParams legacy_mx = mma_model_params(MmaModel::blackwell_mxfp8);
  legacy_mx.zero_rule = MmaZeroRule::legacy_minus_126;  // old: E = -126 + 8 + 254 = 136 wipes c
  EXPECT_EQ(f32_bits(mma_step_fp8_with(ma, Fp8Kind::e4m3, 254, mb, Fp8Kind::e4m3, 254, cm, legacy_mx)), 0u);
  // A zero sum is +0 in the FP8 rows even when every term is -0.
  for (uint8_t& v : fa) v = 0x80;
  EXPECT_EQ(f32_bits(mma_step_hopper_fp8(fa, Fp8Kind::e4m3, fb, Fp8Kind::e4m3, -0.0f)), 0u);
}


// ---- Issue 10: the FP8 zero rule, outputs measured on the H200 ---------------------------------------------
// Source of every expected value: the H200 measurement quoted in issue 10 (wgmma m64n8k32 FP8, 4,096 tiles, a
// third of the A rows all +-0; the H200 result is the "expected", the old -126 rule's result is the "old").
// Bytes in K order as hex, exactly as the issue gives them.
std::vector<uint8_t> hex_bytes(const char* h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; h[i] && h[i + 1]; i += 2) out.push_back(static_cast<uint8_t>(std::stoul(std::string(h + i, 2), nullptr, 16)));
  return out;
}

TEST(NumericsMma, Fp8ZeroRuleMeasuredOnH200) {
  struct Measured {
    const char* what;
    Fp8Kind kind;
    const char* a;  // 32 bytes, K order
    const char* b;
    uint32_t c, h200, old_rule;
  };
  const char* zeros_case1 = "0000008000000000000000808000000000000000800000808000008080000000";  // all +-0
  const char* all_plus_zero = "0000000000000000000000000000000000000000000000000000000000000000";
  const char* b_pow2_first = "7800000000000000000000000000000000000000000000000000000000000000";  // b0 = 0x78
  const Measured cases[] = {
      {"e5m2, A all +-0 (issue case 1)", Fp8Kind::e5m2, zeros_case1,
       "06d992fb5b3f4ec0cc501f74aabfb7a2b6eb2b453ce3292143e339a74ec1b25b", 0x80f0deabu, 0x80f0dc00u, 0x00000000u},
      {"e4m3, same bytes (issue case 1)", Fp8Kind::e4m3, zeros_case1,
       "06d992fb5b3f4ec0cc501f74aabfb7a2b6eb2b453ce3292143e339a74ec1b25b", 0x80f0deabu, 0x80f0dc00u, 0x80f00000u},
      // The issue states "a all +-0" without the bytes: the result cannot depend on the zeros' signs (c is
      // nonzero), so both the +0 pattern and case 1's signed pattern must give the H200's bits.
      {"e4m3, A all +0 (issue case 2)", Fp8Kind::e4m3, all_plus_zero,
       "c94e6a4fcbe176186d3e239fbb583d8cdc4aad58bc2db7a2b80129791971777b", 0x00032005u, 0x00032000u, 0x00000000u},
      {"e4m3, A all +-0 (issue case 2)", Fp8Kind::e4m3, zeros_case1,
       "c94e6a4fcbe176186d3e239fbb583d8cdc4aad58bc2db7a2b80129791971777b", 0x00032005u, 0x00032000u, 0x00000000u},
      {"e5m2, A = 0, b0 = 2^15, c = 2^-125", Fp8Kind::e5m2, all_plus_zero, b_pow2_first, 0x01000000u, 0x01000000u,
       0x00000000u},
      {"e4m3, A = 0, b0 = 256, c = 0x03c00800", Fp8Kind::e4m3, all_plus_zero, b_pow2_first, 0x03c00800u, 0x03c00800u,
       0x03c00000u},
  };
  MmaModelParams legacy = mma_model_params(MmaModel::hopper_fp8);
  legacy.zero_rule = MmaZeroRule::legacy_minus_126;
  for (const Measured& m : cases) {
    const auto a = hex_bytes(m.a), b = hex_bytes(m.b);
    ASSERT_EQ(a.size(), 32u) << m.what;
    ASSERT_EQ(b.size(), 32u) << m.what;
    for (uint8_t v : a) ASSERT_EQ(v & 0x7F, 0) << m.what << ": A must be all +-0";
    EXPECT_EQ(f32_bits(mma_step_hopper_fp8(a.data(), m.kind, b.data(), m.kind, bits_f32(m.c))), m.h200) << m.what;
    // The negative control: the old -126 rule gives what the issue reports for the old model.
    EXPECT_EQ(f32_bits(mma_step_fp8_with(a.data(), m.kind, 127, b.data(), m.kind, 127, bits_f32(m.c), legacy)),
              m.old_rule)
        << m.what;
  }
}

}  // namespace
}  // namespace calico
