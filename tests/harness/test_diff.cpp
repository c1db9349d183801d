// Diff tests: ULP distance, counts, first-mismatch location through the rank partition, tolerances, and
// whole-trace diffs (partition invariance across R; seeded faults found at the right place).
#include <gtest/gtest.h>

#include <cmath>

#include "calico/numerics.h"
#include "harness_test_util.h"

namespace calico::harness {
namespace {

Tensor f32_tensor(std::vector<float> v, std::vector<int64_t> shape) {
  return Tensor::from("out_f32", ElemType::f32, std::move(shape), v);
}

TEST(Diff, EqualTensorsAreEqual) {
  // Two tensors built separately (not one tensor diffed with itself, issue 9), and the negative control:
  // the same comparison sees a one-bit change in the last element.
  Tensor a = f32_tensor({1, 2, 3, 4}, {2, 2}), b = f32_tensor({1, 2, 3, 4}, {2, 2});
  TensorDiff d = compare_tensors(a, b, {}, {2});
  EXPECT_TRUE(d.equal());
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_EQ(d.elements, 4);
  Tensor c = f32_tensor({1, 2, 3, bits_f32(f32_bits(4.0f) ^ 1u)}, {2, 2});
  TensorDiff e = compare_tensors(a, c, {}, {2});
  EXPECT_FALSE(e.equal());
  EXPECT_EQ(e.mismatches, 1);
  EXPECT_EQ(e.elements, 4);
}

TEST(Diff, LowestBitFlipIsOneUlpAtTheRightPlace) {
  // 4 ranks x 2 rows x 3 columns; flip global row 5 (rank 2, row 1), column 2.
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = 0.5f + static_cast<float>(i);
  Tensor a = f32_tensor(v, {8, 3}), b = a;
  b.bytes[(5 * 3 + 2) * 4] ^= 1;
  TensorDiff d = compare_tensors(a, b, {}, {2, 2, 2, 2});
  EXPECT_FALSE(d.equal());
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.ulp_histogram[1], 1);
  EXPECT_EQ(d.first_rank, 2);
  EXPECT_EQ(d.first_index, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d.by_row.at(5), 1);
  EXPECT_EQ(d.by_column.at(2), 1);
  EXPECT_DOUBLE_EQ(d.max_abs, std::fabs(bits_f32(f32_bits(v[17]) ^ 1) - v[17]));
}

TEST(Diff, UlpDistanceCrossesZeroAndCountsSignedZeros) {
  // -min_subnormal vs +min_subnormal is 2 ULP (through -0/+0, which order the same); +0 vs -0 differ in bits
  // but are 0 ULP apart.
  Tensor a = f32_tensor({bits_f32(0x80000001u), 0.0f, 1.0f}, {3}), b = f32_tensor({bits_f32(1u), -0.0f, 2.0f}, {3});
  TensorDiff d = compare_tensors(a, b, {}, {3});
  EXPECT_EQ(d.mismatches, 3);
  EXPECT_EQ(d.ulp_histogram[0], 1);         // the signed zeros
  EXPECT_EQ(d.ulp_histogram[2], 1);         // 2 ULP: [2, 3]
  EXPECT_EQ(d.max_ulp, uint64_t{1} << 23);  // 1.0 -> 2.0 is one binade
  EXPECT_DOUBLE_EQ(d.max_rel, 2.0);         // -s vs +s: |2s| / |s|
}

TEST(Diff, Bf16AndNaN) {
  const uint16_t one = f32_to_bf16(1.0f);
  Tensor a = Tensor::from("out", ElemType::bf16, {3}, std::vector<uint16_t>{one, one, 0x7FC0});
  Tensor b =
      Tensor::from("out", ElemType::bf16, {3}, std::vector<uint16_t>{one, static_cast<uint16_t>(one + 3), 0x7FC1});
  TensorDiff d = compare_tensors(a, b, {}, {3});
  EXPECT_EQ(d.mismatches, 2);
  EXPECT_EQ(d.max_ulp, 3u);
  EXPECT_EQ(d.ulp_histogram[kUlpBins - 1], 1);  // NaN payloads differ
  EXPECT_EQ(d.first_index, (std::vector<int64_t>{1}));
}

TEST(Diff, Tolerances) {
  Tensor a = f32_tensor({1.0f, 2.0f}, {2}), b = a;
  b.bytes[0] ^= 3;  // 1.0 + 3 ULP
  EXPECT_FALSE(compare_tensors(a, b, Tolerance::parse("ulp:2"), {2}).passes());
  EXPECT_TRUE(compare_tensors(a, b, Tolerance::parse("ulp:3"), {2}).passes());
  EXPECT_TRUE(compare_tensors(a, b, Tolerance::parse("rel:1e-6"), {2}).passes());
  EXPECT_FALSE(compare_tensors(a, b, Tolerance::parse("rel:1e-8"), {2}).passes());
  EXPECT_FALSE(compare_tensors(a, b, Tolerance::parse("exact"), {2}).passes());
  EXPECT_FALSE(compare_tensors(a, b, Tolerance::parse("ulp:3"), {2}).equal());
  for (const char* bad : {"ulp", "ulp:-1", "ulp:1.5", "rel:x", "abs:1", "rel:nan"})
    EXPECT_THROW(Tolerance::parse(bad), Error) << bad;
}

TEST(Diff, ShapeOrTypeMismatchIsNotComparable) {
  Tensor a = f32_tensor({1, 2}, {2}), b = f32_tensor({1, 2}, {1, 2});
  TensorDiff d = compare_tensors(a, b, {}, {2});
  EXPECT_FALSE(d.comparable);
  EXPECT_FALSE(d.passes());
}

TEST(DiffTraces, ToyIsPartitionInvariantAcrossR) {
  const Trace r1 = testing::toy_trace(1), r2 = testing::toy_trace(2), r4 = testing::toy_trace(4);
  for (const Trace* t : {&r2, &r4}) {
    DiffReport rep = diff_traces(r1, *t);
    EXPECT_TRUE(rep.equal()) << format_diff(rep, true);
    int skipped = 0;
    for (const auto& d : rep.tensors) skipped += d.skipped;
    EXPECT_EQ(skipped, 2 * 3);  // d_ws_gate/up/down per run: partial sums, R differs
  }
  EXPECT_TRUE(diff_within(r4).equal());
  // Same R: the partial sums are compared too.
  DiffReport same = diff_traces(r2, testing::toy_trace(2));
  ASSERT_FALSE(same.tensors.empty());
  for (const auto& d : same.tensors) EXPECT_FALSE(d.skipped) << d.tensor;
  EXPECT_TRUE(same.equal());
}

TEST(DiffTraces, BitflipIsFoundAtRunRankTokenColumn) {
  // 16 global tokens over R=2: token 11 is rank 1, local token 3.
  const Trace t = testing::toy_trace(2, 3, "faulty-bitflip:inner=toy:run=2:tensor=out:token=11:column=5");
  DiffReport rep = diff_within(t);
  EXPECT_FALSE(rep.equal());
  int bad = 0;
  for (const auto& d : rep.tensors) {
    if (d.equal()) continue;
    ++bad;
    EXPECT_EQ(d.tensor, "out");
    EXPECT_EQ(d.mismatches, 1);
    EXPECT_EQ(d.max_ulp, 1u);
    EXPECT_EQ(d.location(), "run 2, rank 1, token 3, column 5");
  }
  EXPECT_EQ(bad, 1);
  // Against a clean R=1 trace the same element is found, located in B's (R=2) partition, and the other
  // way round in the R=1 partition.
  // Each loop must find exactly one differing tensor (a loop over nothing would assert nothing, issue 9).
  const Trace clean = testing::toy_trace(1, 3);
  int found_ab = 0, found_ba = 0;
  for (const auto& d : diff_traces(clean, t).tensors)
    if (!d.equal()) {
      ++found_ab;
      EXPECT_EQ(d.location(), "run 2, rank 1, token 3, column 5");
    }
  for (const auto& d : diff_traces(t, clean).tensors)
    if (!d.equal()) {
      ++found_ba;
      EXPECT_EQ(d.location(), "run 2, rank 0, token 11, column 5");
    }
  EXPECT_EQ(found_ab, 1);
  EXPECT_EQ(found_ba, 1);
}

TEST(DiffTraces, RankPartialReductionOrderShowsOnlyInDwDownAndOnlyForRAbove1) {
  const Trace clean = testing::toy_trace(1, 1);
  EXPECT_TRUE(diff_traces(clean, testing::toy_trace(1, 1, "faulty-order")).equal());  // R=1: canonical order
  DiffReport rep = diff_traces(clean, testing::toy_trace(4, 1, "faulty-order"));
  EXPECT_FALSE(rep.equal());
  int d_w_down = 0;
  for (const auto& d : rep.tensors) {
    if (d.tensor == "d_w_down") {
      ++d_w_down;
      EXPECT_GT(d.mismatches, 0);
      EXPECT_LE(d.max_ulp, 64u) << "a reordered fp32 sum differs in its last bits, not wildly";
    } else {
      EXPECT_TRUE(d.equal()) << d.tensor;
    }
  }
  EXPECT_GE(d_w_down, 1) << "d_w_down was not compared at all";
}

}  // namespace
}  // namespace calico::harness
