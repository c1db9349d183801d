// build_schedule (DESIGN 2.3-2.4): the canonical order does not depend on R, padding sits only at segment
// ends, traffic matrices add up to counts computed here independently, capacity overflow is a named error.
#include <gtest/gtest.h>

#include "test_util.h"

#include <set>

#include "calico/core.h"

using namespace calico;

namespace {

LayerSpec tiny() { return load_preset("tiny"); }

RunConfig config_for(int ranks, int64_t total_tokens) {
  RunConfig c;
  c.ranks = ranks;
  c.tokens_per_rank = static_cast<int>(total_tokens / ranks);
  return c;
}

using calico::test_util::error_of;

}  // namespace

TEST(Schedule, CanonicalOrderIsIndependentOfRanks) {
  const LayerSpec spec = tiny();
  const Routing routing = make_routing(spec, 64, RoutingSource::parse("zipf:1.2"), 7);
  const Schedule s1 = build_schedule(spec, config_for(1, 64), routing);
  for (int R : {2, 4, 8}) {
    const Schedule s = build_schedule(spec, config_for(R, 64), routing);
    for (int e = 0; e < spec.experts; ++e) {
      ASSERT_EQ(s.expert_rows[e].size(), s1.expert_rows[e].size()) << "R=" << R << " e=" << e;
      for (size_t i = 0; i < s.expert_rows[e].size(); ++i) {
        EXPECT_EQ(s.expert_rows[e][i].token, s1.expert_rows[e][i].token);
        EXPECT_EQ(s.expert_rows[e][i].k, s1.expert_rows[e][i].k);
      }
    }
  }
  // The order is ascending token, and each row really routes to its expert.
  for (int e = 0; e < spec.experts; ++e) {
    for (size_t i = 0; i < s1.expert_rows[e].size(); ++i) {
      const ExpertRow& row = s1.expert_rows[e][i];
      EXPECT_EQ(routing.expert(row.token, row.k), e);
      if (i > 0) {
        EXPECT_LT(s1.expert_rows[e][i - 1].token, row.token);
      }
    }
  }
}

TEST(Schedule, PaddingOnlyAtSegmentEnds) {
  const LayerSpec spec = tiny();
  const Routing routing = make_routing(spec, 96, RoutingSource::parse("uniform"), 3);
  const Schedule s = build_schedule(spec, config_for(4, 96), routing, 16);
  std::vector<int64_t> next_row(4, 0);
  for (int e = 0; e < spec.experts; ++e) {
    const ExpertSegment& seg = s.segments[e];
    EXPECT_EQ(seg.owner_rank, e / (spec.experts / 4));
    EXPECT_EQ(seg.first_row, next_row[seg.owner_rank]) << "segments are back to back, no leading padding";
    EXPECT_EQ(seg.rows, s.tokens_per_expert(e));
    EXPECT_EQ(seg.padded_rows % 16, 0);
    EXPECT_GE(seg.padded_rows, seg.rows);
    EXPECT_LT(seg.padded_rows - seg.rows, 16);
    next_row[seg.owner_rank] += seg.padded_rows;
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s.rank_rows[r], next_row[r]);
    EXPECT_EQ(s.rank_capacity[r], s.rank_rows[r]) << "capacity 0 sizes to fit";
  }
}

TEST(Schedule, TrafficCountsAddUp) {
  const LayerSpec spec = tiny();
  const int R = 4, T = 40;
  const Routing routing = make_routing(spec, R * T, RoutingSource::parse("uniform"), 11);
  const Schedule s = build_schedule(spec, config_for(R, R * T), routing);
  // Independent count: distinct owner ranks per token, and (token, k) rows per (owner, home).
  std::vector<int64_t> dispatch(R * R, 0), combine(R * R, 0);
  for (int64_t g = 0; g < R * T; ++g) {
    std::set<int> owners;
    for (int k = 0; k < spec.top_k; ++k) {
      const int owner = routing.expert(g, k) / (spec.experts / R);
      owners.insert(owner);
      combine[owner * R + g / T] += 1;
    }
    for (int o : owners) dispatch[(g / T) * R + o] += 1;
  }
  EXPECT_EQ(s.dispatch_tokens, dispatch);
  EXPECT_EQ(s.combine_rows, combine);
  int64_t total = 0;
  for (auto v : s.combine_rows) total += v;
  EXPECT_EQ(total, int64_t{R} * T * spec.top_k);
  for (int home = 0; home < R; ++home) {
    int64_t back = 0;
    for (int src = 0; src < R; ++src) {
      back += s.combine_rows[src * R + home];
      EXPECT_LE(s.dispatch_tokens[home * R + src], T);
    }
    EXPECT_EQ(back, int64_t{T} * spec.top_k) << "every (token, k) row comes home once";
  }
  int64_t received = 0;
  for (int r = 0; r < R; ++r) received += s.rank_rows[r];
  EXPECT_EQ(received, total) << "row_align 1: no padding";
}

TEST(Schedule, SingleRankHasNoOffDiagonalTraffic) {
  const LayerSpec spec = tiny();
  const Routing routing = make_routing(spec, 32, RoutingSource::parse("uniform"), 5);
  const Schedule s = build_schedule(spec, config_for(1, 32), routing);
  ASSERT_EQ(s.dispatch_tokens.size(), 1u);
  EXPECT_EQ(s.dispatch_tokens[0], 32);
  EXPECT_EQ(s.combine_rows[0], 32 * spec.top_k);
  const Schedule s2 = build_schedule(spec, config_for(2, 32), routing);
  EXPECT_GT(s2.dispatch_tokens[1] + s2.dispatch_tokens[2], 0) << "uniform routing crosses ranks at R=2";
}

TEST(Schedule, CapacityOverflowNamesRankExpertNeededAndCapacity) {
  const LayerSpec spec = tiny();
  const Routing routing = make_routing(spec, 32, RoutingSource::parse("adversarial"), 1);
  RunConfig c = config_for(2, 32);
  c.capacity_factor = 1.0;  // 16*4 = 64 rows per rank; rank 0 receives all 128
  const std::string msg = error_of([&] { build_schedule(spec, c, routing); });
  EXPECT_NE(msg.find("capacity overflow on rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expert 2"), std::string::npos) << msg;  // experts 0,1 fill rows [0,64); expert 2 overflows
  EXPECT_NE(msg.find("needs 128 rows"), std::string::npos) << msg;
  EXPECT_NE(msg.find("capacity is 64 rows"), std::string::npos) << msg;
  c.capacity_factor = 2.0;
  EXPECT_NO_THROW(build_schedule(spec, c, routing));
}

TEST(Schedule, RejectsRoutingOfTheWrongSize) {
  const LayerSpec spec = tiny();
  const Routing routing = make_routing(spec, 32, RoutingSource::parse("uniform"), 1);
  const std::string msg = error_of([&] { build_schedule(spec, config_for(2, 64), routing); });
  EXPECT_NE(msg.find("routing has 32 tokens"), std::string::npos) << msg;
}
