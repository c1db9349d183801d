// The probe's host helpers (megakernel/src/probe/probe_model.h), on the CPU: the variant model with the
// published parameters is numerics.h's model exactly, the format constructors are exact, and the targeted
// vectors are well formed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "calico/numerics.h"
#include "probe/probe_model.h"

namespace calico::gpu::probe {
namespace {

TEST(ProbeModel, PublishedVariantIsTheModel) {
  struct Case {
    OperandFormat f;
    MmaModel model;
    int k;
  };
  for (const Case& cs : {Case{OperandFormat::bf16(), MmaModel::hopper_bf16, 16},
                         Case{OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::hopper_fp8, 32},
                         Case{OperandFormat::fp8_of(Fp8Kind::e5m2), MmaModel::hopper_fp8, 32}}) {
    const VariantParams p = VariantParams::of(cs.model, cs.k);
    const std::vector<TargetedVector> tv = targeted_vectors(cs.f, cs.k, cs.model, 1);
    Rng rng(1, 2, 3);
    std::vector<TargetedVector> all = tv;
    for (int i = 0; i < 20000; ++i) {
      TargetedVector v{"random", std::vector<uint32_t>(cs.k), std::vector<uint32_t>(cs.k), 0};
      const int lo = rng.uniform(cs.f.emin - 3, cs.f.emax), hi = rng.uniform(lo, cs.f.emax);
      for (int j = 0; j < cs.k; ++j) {
        v.a[j] = i % 3 == 0 ? rng.bits(cs.f.bytes * 8) : cs.f.random_normal(rng, lo, hi);
        v.b[j] = i % 3 == 0 ? rng.bits(cs.f.bytes * 8) : cs.f.random_normal(rng, lo, hi);
      }
      v.c = i % 5 == 0 ? 0u : random_f32(rng, 2 * lo - 10, 2 * hi + 10);
      all.push_back(v);
    }
    size_t bad = 0;
    for (const auto& v : all) {
      ASSERT_EQ(static_cast<int>(v.a.size()), cs.k) << v.name;
      ASSERT_EQ(static_cast<int>(v.b.size()), cs.k) << v.name;
      uint32_t want;
      if (!cs.f.fp8) {
        uint16_t a[16], b[16];
        for (int j = 0; j < 16; ++j) a[j] = static_cast<uint16_t>(v.a[j]), b[j] = static_cast<uint16_t>(v.b[j]);
        want = f32_bits(mma_step_bf16(a, b, bits_f32(v.c), cs.model));
      } else {
        uint8_t a[32], b[32];
        for (int j = 0; j < 32; ++j) a[j] = static_cast<uint8_t>(v.a[j]), b[j] = static_cast<uint8_t>(v.b[j]);
        want = f32_bits(mma_step_fp8(a, cs.f.kind, 127, b, cs.f.kind, 127, bits_f32(v.c), cs.model));
      }
      const uint32_t got = variant_step(cs.f, p, v.a.data(), v.b.data(), v.c, cs.k);
      if (got != want && bad++ < 3) ADD_FAILURE() << v.name << " c " << std::hex << v.c << " variant " << got << " model " << want;
    }
    EXPECT_EQ(bad, 0u) << "model " << static_cast<int>(cs.model) << " over " << all.size() << " vectors";
  }
}

TEST(ProbeModel, FormatConstructorsAreExact) {
  for (const OperandFormat& f : {OperandFormat::bf16(), OperandFormat::fp8_of(Fp8Kind::e4m3), OperandFormat::fp8_of(Fp8Kind::e5m2)}) {
    for (int e = f.min_pow2(); e <= f.emax; ++e) {
      EXPECT_EQ(f.value(f.pow2(e, false)), std::ldexp(1.0f, e)) << e;
      EXPECT_EQ(f.value(f.pow2(e, true)), -std::ldexp(1.0f, e)) << e;
    }
    EXPECT_FALSE(f.is_nan(f.max_finite(false)));
    EXPECT_TRUE(f.is_nan(f.nan()));
  }
}

TEST(ProbeModel, TargetedVectorsCoverEveryFamily) {
  const auto tv = targeted_vectors(OperandFormat::bf16(), 16, MmaModel::hopper_bf16, 1);
  std::set<std::string> names;
  for (const auto& v : tv) names.insert(v.name);
  for (const char* n : {"align", "align_c_big", "round", "carry", "zero_term", "c_subnormal", "zero_sign",
                        "zero_sign_underflow", "nan_a", "inf_minus_inf", "overflow_products", "subnormal_operand",
                        "all_values"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(ProbeModel, EdgeFamiliesAreInTheTargetedSet) {
  struct Case {
    OperandFormat f;
    MmaModel model;
    int k;
  };
  for (const Case& cs : {Case{OperandFormat::bf16(), MmaModel::hopper_bf16, 16},
                         Case{OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::hopper_fp8, 32},
                         Case{OperandFormat::fp8_of(Fp8Kind::e5m2), MmaModel::blackwell_mxfp8, 32}}) {
    const auto tv = targeted_vectors(cs.f, cs.k, cs.model, 1);
    const auto edges = edge_vectors(cs.f, cs.k, cs.model, 1);
    std::set<std::string> names;
    for (const auto& v : tv) names.insert(v.name);
    for (const auto& v : edges) {
      EXPECT_TRUE(names.count(v.name)) << v.name;
      ASSERT_EQ(static_cast<int>(v.a.size()), cs.k) << v.name;
      ASSERT_EQ(static_cast<int>(v.b.size()), cs.k) << v.name;
      if (cs.model != MmaModel::blackwell_mxfp8) {
        EXPECT_TRUE(v.sa == 127 && v.sb == 127) << v.name;
      }
    }
    for (const char* n : {"edge_zero_row_c_large", "edge_zero_row_c_small", "edge_zero_row_c_subnormal",
                          "edge_zero_col_c_large", "edge_zero_col_c_small", "edge_zero_col_c_subnormal",
                          "edge_zero_products_c_zero", "edge_underflow_c_zero", "edge_huge_and_tiny",
                          "edge_nan_lane_a", "edge_nan_lane_b"})
      EXPECT_TRUE(names.count(n)) << n;
    if (cs.f.has_inf()) {
      EXPECT_TRUE(names.count("edge_inf_lane") && names.count("edge_inf_times_zero_lane"));
    }
    if (cs.f.fp8) {
      EXPECT_TRUE(names.count("edge_h200_issue10"));
    }
    EXPECT_EQ(names.count("edge_mx_scale_zero_operand"), cs.model == MmaModel::blackwell_mxfp8 ? 1u : 0u);
  }
}

// Issue 10's negative control, on the host: the edge families contain steps where the model (zero terms at
// -133) and the old -126 rule give different bits, for every instruction's format, so a probe run against
// a GPU that follows one of them tells the two apart. Per family, the count of such vectors.
TEST(ProbeModel, EdgeFamiliesSeparateTheOldZeroRule) {
  struct Case {
    const char* what;
    OperandFormat f;
    MmaModel model;
    int k;
  };
  for (const Case& cs : {Case{"bf16", OperandFormat::bf16(), MmaModel::hopper_bf16, 16},
                         Case{"hopper e4m3", OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::hopper_fp8, 32},
                         Case{"hopper e5m2", OperandFormat::fp8_of(Fp8Kind::e5m2), MmaModel::hopper_fp8, 32},
                         Case{"mx e4m3", OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::blackwell_mxfp8, 32},
                         Case{"mx e5m2", OperandFormat::fp8_of(Fp8Kind::e5m2), MmaModel::blackwell_mxfp8, 32}}) {
    MmaModelParams old{};
    ASSERT_TRUE(compare_model_params(cs.model, "old-zero-rule", old));
    const MmaModelParams now = mma_model_params(cs.model);
    std::map<std::string, int> differ;
    for (const auto& v : edge_vectors(cs.f, cs.k, cs.model, 1)) {
      const uint32_t a = model_step_with(cs.f, now, v.a.data(), v.b.data(), v.c, v.sa, v.sb);
      const uint32_t b = model_step_with(cs.f, old, v.a.data(), v.b.data(), v.c, v.sa, v.sb);
      differ[v.name] += a != b;
      // the shortcut of the probe's compare column: without a zero term the rules cannot differ
      if (!has_zero_term(cs.f, v.a.data(), v.b.data(), v.c, cs.k)) {
        EXPECT_EQ(a, b) << v.name;
      }
    }
    for (const char* n : {"edge_zero_row_c_small", "edge_zero_row_c_subnormal", "edge_zero_col_c_small",
                          "edge_zero_col_c_subnormal"})
      EXPECT_GT(differ[n], 0) << cs.what << " " << n;
    if (cs.f.fp8) {
      EXPECT_GT(differ["edge_h200_issue10"], 0) << cs.what;
    }
    if (cs.model == MmaModel::blackwell_mxfp8) {
      EXPECT_GT(differ["edge_mx_scale_zero_operand"], 0) << cs.what;
      EXPECT_GT(differ["edge_underflow_c_zero"], 0) << cs.what;
    }
    if (!cs.f.fp8) {
      EXPECT_GT(differ["edge_underflow_c_zero"], 0) << cs.what;
    }
    // Specials decide before any zero rule: NaN/inf lanes never separate the rules.
    EXPECT_EQ(differ["edge_nan_lane_a"] + differ["edge_nan_lane_b"] + differ["edge_inf_lane"], 0) << cs.what;
    std::string line;
    for (const auto& [name, n] : differ) line += " " + name + "=" + std::to_string(n);
    RecordProperty(std::string("old_rule_differs_") + cs.what, line);
  }
  // flat-126 (every zero term at -126): identical to the model for Hopper FP8 (no FP8 product or nonzero C
  // lies below 2^-126), told apart by the underflow family for bf16 and MX (products below 2^-126).
  for (const Case& cs : {Case{"bf16", OperandFormat::bf16(), MmaModel::hopper_bf16, 16},
                         Case{"hopper e4m3", OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::hopper_fp8, 32},
                         Case{"hopper e5m2", OperandFormat::fp8_of(Fp8Kind::e5m2), MmaModel::hopper_fp8, 32},
                         Case{"mx e4m3", OperandFormat::fp8_of(Fp8Kind::e4m3), MmaModel::blackwell_mxfp8, 32}}) {
    MmaModelParams flat{};
    ASSERT_TRUE(compare_model_params(cs.model, "flat-126", flat));
    const MmaModelParams now = mma_model_params(cs.model);
    std::map<std::string, int> differ;
    for (const auto& v : targeted_vectors(cs.f, cs.k, cs.model, 1))
      differ[v.name] += model_step_with(cs.f, now, v.a.data(), v.b.data(), v.c, v.sa, v.sb) !=
                        model_step_with(cs.f, flat, v.a.data(), v.b.data(), v.c, v.sa, v.sb);
    int total = 0;
    for (const auto& [name, n] : differ) total += n;
    if (cs.model == MmaModel::hopper_fp8) {
      EXPECT_EQ(total, 0) << cs.what;
    } else {
      EXPECT_GT(differ["edge_underflow_c_zero"], 0) << cs.what;
    }
  }
  MmaModelParams unused{};
  EXPECT_FALSE(compare_model_params(MmaModel::hopper_fp8, "none", unused));
  EXPECT_THROW(compare_model_params(MmaModel::hopper_fp8, "mmasim", unused), Error);
}

// The whole probe pipeline on the host (--model-as-device: the model stands in for the GPU): generation,
// tile placement (E8M0 scales of the targeted vectors included), per-family counting, the compare column of
// the summary and JSON. The model matches itself everywhere; the old rule must fail on the new families.
TEST(ProbeModel, ModelAsDeviceRunShowsTheNegativeControl) {
  for (const char* instr : {"wgmma.e5m2", "tcgen05.mxf8.e4m3"}) {
    ProbeMmaOptions o;
    o.instr = instr;
    o.cases = 288;
    o.model_as_device = true;
    const ProbeMmaReport rep = probe_mma(o);
    EXPECT_EQ(rep.total_mismatches(), 0) << instr;
    EXPECT_EQ(rep.compare_model, "old-zero-rule");
    std::map<std::string, ProbeFamilyResult> fam;
    for (const auto& f : rep.families) fam[f.family] = f;
    ASSERT_TRUE(fam.count("zero_rows")) << instr;
    EXPECT_GT(fam["zero_rows"].compare_mismatches, 0) << instr;
    EXPECT_GT(fam["targeted:edge_zero_row_c_subnormal"].compare_mismatches, 0) << instr;
    EXPECT_GT(fam["targeted:edge_h200_issue10"].compare_mismatches, 0) << instr;
    if (std::string(instr).rfind("tcgen05", 0) == 0) {
      EXPECT_GT(fam["targeted:edge_mx_scale_zero_operand"].compare_mismatches, 0) << instr;
    }
    EXPECT_GT(rep.total_compare_mismatches(), 0);
    EXPECT_NE(rep.summary().find("old-zero-rule"), std::string::npos);
    EXPECT_NE(rep.to_json().find("\"compare_mismatches\""), std::string::npos);
  }
  ProbeMmaOptions none;
  none.instr = "mma.sync.bf16";
  none.cases = 64;
  none.targeted = false;
  none.compare_model = "none";
  none.model_as_device = true;
  const ProbeMmaReport rep = probe_mma(none);
  EXPECT_EQ(rep.compare_model, "none");
  EXPECT_EQ(rep.total_compare_mismatches(), 0);
  EXPECT_EQ(rep.summary().find("old-zero-rule"), std::string::npos);
  ProbeMmaOptions bad = none;
  bad.compare_model = "nope";
  EXPECT_THROW(probe_mma(bad), Error);
}

}  // namespace
}  // namespace calico::gpu::probe

namespace calico {
namespace {

uint16_t h(const char* hex) { return static_cast<uint16_t>(std::stoul(hex, nullptr, 16)); }

// Regression (probe-mma on the H200, 2026-11-30, reports/probe-mma-2026-11-30.md): a zero result of
// mma.sync / wgmma bf16 is +0, also when every term is -0 and when a nonzero sum truncates to zero.
TEST(ProbeRegression, ZeroResultIsPositive) {
  uint16_t a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = 0x8000, b[i] = 0x3F80;  // targeted:zero_sign, case 421: (-0) * 1, c = -0
  EXPECT_EQ(f32_bits(mma_step_bf16(a, b, -0.0f)), 0x00000000u);
  for (int i = 0; i < 16; ++i) a[i] = 0x8000, b[i] = 0x0000;  // case 418: (-0) * (+0), c = -0
  EXPECT_EQ(f32_bits(mma_step_bf16(a, b, -0.0f)), 0x00000000u);
  // c_zero case 340 (0, 2): products near 2^-148 whose sum truncates to zero; the GPU wrote +0.
  const char* ra[16] = {"9a9c", "9ab9", "9a8c", "1a8c", "1ac8", "1ac3", "1a45", "9a90",
                        "9a1e", "9aaf", "9a60", "1ae9", "9aba", "1abb", "9a4c", "9a06"};
  const char* rb[16] = {"1a22", "9a34", "9a97", "1a34", "9a81", "1a47", "9a29", "1a43",
                        "1ae7", "9ae8", "9a07", "9a38", "1ac8", "9a31", "9ad1", "9ab3"};
  for (int i = 0; i < 16; ++i) a[i] = h(ra[i]), b[i] = h(rb[i]);
  EXPECT_EQ(f32_bits(mma_step_bf16(a, b, 0.0f)), 0x00000000u);
}

// Regression (test_numerics_gpu on the H200): NaN results of sigmoid/silu/silu_grad are the canonical
// 0x7FFFFFFF on host and device alike (the device wrote 0x7FFFFFFF, the host had 0x7FC00000 / 0xFFC00000).
TEST(ProbeRegression, SiluNaNIsCanonical) {
  EXPECT_EQ(f32_bits(calico_sigmoid(bits_f32(0x7FC00000u))), 0x7FFFFFFFu);
  EXPECT_EQ(f32_bits(calico_silu(bits_f32(0xFF800000u))), 0x7FFFFFFFu);
  EXPECT_EQ(f32_bits(calico_silu_grad(bits_f32(0x7F800000u))), 0x7FFFFFFFu);
}

// Regression (issue 9, UBSan): an exponent range entirely below the smallest subnormal (2^-149) shifted by a
// negative amount; it now clamps to 2^-149, whose only pattern is the smallest subnormal (+-0x00000001).
TEST(ProbeRegression, RandomF32BelowSubnormalRangeClamps) {
  using gpu::probe::Rng;
  using gpu::probe::random_f32;
  Rng rng(7, 8, 9);
  for (int i = 0; i < 1000; ++i) {
    const int hi = -150 - i % 100;
    EXPECT_EQ(random_f32(rng, hi - 20, hi) & 0x7FFFFFFFu, 0x00000001u) << hi;
  }
  for (int i = 0; i < 1000; ++i) {  // and above: clamped to 2^127 (exponent field 254)
    EXPECT_EQ((random_f32(rng, 130, 200) >> 23) & 0xFFu, 254u);
  }
}

}  // namespace
}  // namespace calico
