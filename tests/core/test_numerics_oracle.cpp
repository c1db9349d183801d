// An independent oracle for the MMA models (DESIGN 2.5 rules: zero terms at -133 in every row), and for the
// old -126 zero rule the probe keeps as its negative control (MmaZeroRule::legacy_minus_126).
//
// numerics.h works on integer significands, shifts and clz. The oracle re-derives each step from the rules
// with different machinery: operand values decoded by their format formulas into doubles, frexp/ldexp
// significand-exponent pairs, std::trunc for each aligned term, a double sum (exact: integers below 2^33),
// and the special values from the float64 sum of the products and c, as MMA-Sim does. It must agree bit
// for bit on >= 1e5 random steps per row, drawn with wide exponent spread, subnormals, NaN/inf, zeros and
// heavy cancellation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "calico/numerics.h"

namespace calico {
namespace {

struct Row {
  MmaModel model;
  int F;
  int out_bits;
  bool legacy_zeros;  // the old rule: zero operand / zero c at exponent -126 (negative control, not a model row)
};

struct SigExp {
  double s;  // in [1, 2) for normals, below 1 for subnormals, 0 for zero
  int e;
};

SigExp sig_exp(double x, int emin) {
  if (x == 0) return {0.0, emin};
  int e;
  double m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  m *= 2;
  e -= 1;
  if (e < emin) { m = std::ldexp(m, e - emin); e = emin; }
  return {m, e};
}

// Values of the operands by their format definitions (NaN -> quiet NaN, inf -> inf).
double bf16_value(uint16_t v) {
  const int field = (v >> 7) & 0xFF, frac = v & 0x7F;
  const double sign = (v & 0x8000) ? -1.0 : 1.0;
  if (field == 0xFF) return frac ? NAN : sign * INFINITY;
  return sign * (field == 0 ? std::ldexp(frac, -133) : std::ldexp(128 + frac, field - 134));
}
double fp8_value(uint8_t v, Fp8Kind k) {
  const double sign = (v & 0x80) ? -1.0 : 1.0;
  if (k == Fp8Kind::e4m3) {
    if ((v & 0x7F) == 0x7F) return NAN;
    const int e = (v >> 3) & 0xF, f = v & 7;
    return sign * (e == 0 ? std::ldexp(f, -9) : std::ldexp(8 + f, e - 10));
  }
  const int e = (v >> 2) & 0x1F, f = v & 3;
  if (e == 31) return f ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(f, -16) : std::ldexp(4 + f, e - 17));
}

float as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
uint32_t as_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// The fused step from the rules. a, b: operand values; emin_*: their formats' minimum normal exponents;
// scale: the sum of the two block-scale exponents (nan_scale: an E8M0 NaN scale).
float oracle_step(const std::vector<double>& a, const std::vector<double>& b, int emin_a, int emin_b, float c,
                  int scale, bool nan_scale, const Row& row) {
  // Rule 1 via float64: no finite product or sum overflows a double here, so NaN/inf come only from inputs.
  double check = static_cast<double>(c);
  for (size_t i = 0; i < a.size(); ++i) check += a[i] * b[i] * std::ldexp(1.0, scale);
  if (nan_scale || std::isnan(check)) return as_float(0x7FFFFFFFu);
  if (std::isinf(check)) return static_cast<float>(check);

  std::vector<SigExp> terms;
  const int zero_e = row.legacy_zeros ? -126 : -133;
  const SigExp tc = sig_exp(c, -126);
  terms.push_back(c == 0 ? SigExp{0.0, zero_e} : tc);
  for (size_t i = 0; i < a.size(); ++i) {
    SigExp sa = sig_exp(a[i], emin_a), sb = sig_exp(b[i], emin_b);
    const bool zero = a[i] == 0 || b[i] == 0;
    if (zero && !row.legacy_zeros) {
      terms.push_back({0.0, -133});
    } else {
      if (a[i] == 0) sa.e = -126;
      if (b[i] == 0) sb.e = -126;
      terms.push_back({sa.s * sb.s, sa.e + sb.e + scale});
    }
  }
  int emax = terms[0].e;
  for (const SigExp& t : terms) emax = std::max(emax, t.e);
  double sum = 0;  // exact: every addend is an integer below 2^28
  for (size_t i = 0; i < terms.size(); ++i) {
    const double sign = i == 0 ? (std::signbit(c) ? -1.0 : 1.0)
                               : ((std::signbit(a[i - 1]) != std::signbit(b[i - 1])) ? -1.0 : 1.0);
    sum += sign * std::trunc(std::ldexp(terms[i].s, row.F + terms[i].e - emax));
  }
  if (sum == 0) return 0.0f;  // an exact zero is +0 (measured on the H200)
  const int e = std::ilogb(sum) + emax - row.F;  // floor(log2 |result|)
  if (e >= 128) return sum < 0 ? -INFINITY : INFINITY;
  const int lsb = std::max(e, -126) - row.out_bits;
  const double kept = std::trunc(std::ldexp(sum, emax - row.F - lsb));
  if (kept == 0) return 0.0f;  // a nonzero sum that truncates to zero is +0 too
  return static_cast<float>(std::ldexp(kept, lsb));  // exact by construction
}

// ---- random inputs ----------------------------------------------------------------------------------------
struct Gen {
  std::mt19937_64 rng;
  uint32_t u() { return static_cast<uint32_t>(rng()); }
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
};

uint16_t gen_bf16(Gen& g, int mode) {
  const uint16_t sign = (g.u() & 1) ? 0x8000 : 0, frac = g.u() & 0x7F;
  int field;
  switch (mode) {
    case 0: return static_cast<uint16_t>(g.u());                   // any pattern: NaN/inf/subnormal
    case 1: field = g.pick(255); break;                             // wide spread incl. subnormals
    case 2: field = 127 - 3 + g.pick(6); break;                     // cancellation-friendly narrow range
    case 3: field = g.pick(12); break;                              // near underflow
    case 4: if (g.pick(3) == 0) return sign; field = 200 + g.pick(54); break;  // zeros next to big factors
    case 6: field = g.pick(2) ? 127 - 60 + g.pick(10) : 127 - 100 + g.pick(30); break;  // E in [-160, -102]
    default: field = 127 - 20 + g.pick(30); break;
  }
  return static_cast<uint16_t>(sign | (field << 7) | frac);
}

float gen_c(Gen& g, double exact_sum_hint) {
  switch (g.pick(9)) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return as_float(g.u());
    case 3: return as_float((g.u() & 0x807FFFFFu) | (static_cast<uint32_t>(g.pick(8)) << 23));  // tiny
    case 4: case 5: return static_cast<float>(-exact_sum_hint);  // cancels the products
    default: return as_float((g.u() & 0x807FFFFFu) | (static_cast<uint32_t>(1 + g.pick(254)) << 23));
  }
}

TEST(NumericsOracle, Bf16RowsMatchIndependentDerivation) {
  Gen g{std::mt19937_64(2026)};
  const Row rows[] = {{MmaModel::hopper_bf16, 25, 23, false}, {MmaModel::blackwell_bf16, 25, 23, false}};
  int64_t checked = 0, nan_count = 0, inf_count = 0, zero_count = 0;
  for (int t = 0; t < 150000; ++t) {
    const Row& row = rows[t % 5 == 0 ? 1 : 0];
    const int mode = g.pick(7);
    uint16_t a[16], b[16];
    std::vector<double> av(16), bv(16);
    double hint = 0;
    for (int i = 0; i < 16; ++i) {
      a[i] = gen_bf16(g, mode);
      b[i] = gen_bf16(g, mode);
      if (mode == 2 && i % 2 == 1 && g.pick(2)) { a[i] = a[i - 1] ^ 0x8000; b[i] = b[i - 1] ^ (g.u() & 1); }
      av[i] = bf16_value(a[i]);
      bv[i] = bf16_value(b[i]);
      hint += av[i] * bv[i];
    }
    // Mode 6 keeps c = 0 half the time: then only the zero term's exponent bounds Emax from below.
    const float c = (mode == 6 && g.pick(2)) ? 0.0f : gen_c(g, std::isfinite(hint) ? hint : 0.0);
    const float want = oracle_step(av, bv, -126, -126, c, 0, false, row);
    const float got = mma_step_bf16(a, b, c, row.model);
    ASSERT_EQ(as_bits(got), as_bits(want)) << "case " << t << " mode " << mode << " c=0x" << std::hex
                                           << as_bits(c) << " a0=0x" << a[0] << " b0=0x" << b[0];
    ++checked;
    nan_count += std::isnan(want);
    inf_count += std::isinf(want);
    zero_count += want == 0;
  }
  EXPECT_GE(checked, 100000);
  EXPECT_GT(nan_count, 100);  // the mix really covers the special cases
  EXPECT_GT(inf_count, 100);
  EXPECT_GT(zero_count, 100);
}

uint8_t gen_fp8(Gen& g, int mode, Fp8Kind k) {
  const uint8_t sign = (g.u() & 1) ? 0x80 : 0;
  switch (mode) {
    case 0: return static_cast<uint8_t>(g.u());
    case 1: return g.pick(4) == 0 ? sign : static_cast<uint8_t>(sign | g.pick(0x7B));  // many zeros
    case 2: return static_cast<uint8_t>(sign | (k == Fp8Kind::e4m3 ? 0x30 + g.pick(24) : 0x38 + g.pick(12)));
    default: return static_cast<uint8_t>(sign | g.pick(16));  // subnormal / tiny
  }
}

TEST(NumericsOracle, Fp8RowsMatchIndependentDerivation) {
  Gen g{std::mt19937_64(1130)};
  const Row hopper{MmaModel::hopper_fp8, 13, 13, false}, mx{MmaModel::blackwell_mxfp8, 25, 23, false};
  int64_t checked = 0, rules_differ = 0;
  for (int t = 0; t < 200000; ++t) {
    const bool is_mx = t % 2 == 1;
    const Row& row = is_mx ? mx : hopper;
    const Fp8Kind ka = g.pick(2) ? Fp8Kind::e4m3 : Fp8Kind::e5m2, kb = g.pick(2) ? Fp8Kind::e4m3 : Fp8Kind::e5m2;
    const int mode = g.pick(4);
    uint8_t a[32], b[32];
    std::vector<double> av(32), bv(32);
    uint8_t sa = 127, sb = 127;
    if (is_mx) {
      const int r = g.pick(10);
      sa = r == 0 ? static_cast<uint8_t>(g.u()) : static_cast<uint8_t>(127 - 40 + g.pick(80));
      sb = r == 1 ? static_cast<uint8_t>(g.u()) : static_cast<uint8_t>(127 - 40 + g.pick(80));
      if (g.pick(500) == 0) sa = kE8m0NaN;
    }
    const int scale = (sa == kE8m0NaN || sb == kE8m0NaN) ? 0 : (sa - 127) + (sb - 127);
    // One step in 8: A all +-0 (issue 10: all 32 products zero), half of those with a tiny c.
    const bool zero_row = g.pick(8) == 0, tiny_c = g.pick(2) == 0;
    double hint = 0;
    for (int i = 0; i < 32; ++i) {
      a[i] = gen_fp8(g, mode, ka);
      if (zero_row) a[i] &= 0x80;
      b[i] = gen_fp8(g, mode, kb);
      if (mode == 2 && i % 2 == 1 && g.pick(2)) { a[i] = a[i - 1] ^ 0x80; b[i] = b[i - 1]; }
      if (ka != kb && mode == 2 && i % 2 == 1) b[i] = b[i - 1];
      av[i] = fp8_value(a[i], ka);
      bv[i] = fp8_value(b[i], kb);
      hint += av[i] * bv[i] * std::ldexp(1.0, scale);
    }
    float c = gen_c(g, std::isfinite(hint) ? hint : 0.0);
    if (zero_row && tiny_c) c = as_float((g.u() & 0x80FFFFFFu) | (static_cast<uint32_t>(g.pick(12)) << 23));
    const int emin_a = ka == Fp8Kind::e4m3 ? -6 : -14, emin_b = kb == Fp8Kind::e4m3 ? -6 : -14;
    const bool nan_scale = sa == kE8m0NaN || sb == kE8m0NaN;
    const float want = oracle_step(av, bv, emin_a, emin_b, c, scale, nan_scale, row);
    const float got = mma_step_fp8(a, ka, sa, b, kb, sb, c, row.model);
    ASSERT_EQ(as_bits(got), as_bits(want)) << "case " << t << " mx " << is_mx << " mode " << mode
                                           << " c=0x" << std::hex << as_bits(c) << " scales " << int(sa) << ","
                                           << int(sb);
    // The old -126 rule (the probe's --compare-model old-zero-rule) against the oracle with that rule.
    Row legacy_row = row;
    legacy_row.legacy_zeros = true;
    MmaModelParams legacy = mma_model_params(row.model);
    legacy.zero_rule = MmaZeroRule::legacy_minus_126;
    const float want_old = oracle_step(av, bv, emin_a, emin_b, c, scale, nan_scale, legacy_row);
    const float got_old = mma_step_fp8_with(a, ka, sa, b, kb, sb, c, legacy);
    ASSERT_EQ(as_bits(got_old), as_bits(want_old)) << "old rule, case " << t;
    rules_differ += as_bits(got_old) != as_bits(got);
    ++checked;
  }
  EXPECT_GE(checked, 100000);
  EXPECT_GT(rules_differ, 100);  // the generator reaches the cases where the two zero rules disagree
  RecordProperty("fp8_steps_where_old_and_new_zero_rules_differ", std::to_string(rules_differ));
}

}  // namespace
}  // namespace calico
