// The forward's device schedule (megakernel/src/schedule/schedule.cu) against the canonical expert-major order
// computed here from its definition (DESIGN 2.3: the rows of expert e are its (t, k) pairs in ascending
// (t, k), segments padded to 128 rows, experts in order), on the families where a scan or a warp's ranking
// can go wrong: more experts than the segment kernel's threads, a ragged last chunk and last warp step,
// segments of 127 / 128 / 129 rows, empty experts, every row on one expert, a single token. Negative
// control: the comparison finds a routing that differs in two entries. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calico/megakernel.h"

namespace calico {
namespace {

constexpr int kRows = 128;  // rows of an m-tile

struct Routing {
  int T, K, E;
  std::vector<int> topk;
  std::vector<float> weights;  // weights[p] = p + 0.5: exact, distinct, so every row's weight names its (t, k)
};

Routing make_routing(int T, int K, int E, std::vector<int> topk) {
  std::vector<float> w(topk.size());
  for (size_t p = 0; p < w.size(); ++p) w[p] = static_cast<float>(p) + 0.5f;
  return {T, K, E, std::move(topk), std::move(w)};
}

// K distinct experts per token, drawn with weights rank^-skew (skew 0: uniform).
Routing random_routing(int T, int K, int E, double skew, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> p(E);
  for (int e = 0; e < E; ++e) p[e] = std::pow(e + 1.0, -skew);
  std::vector<int> topk;
  for (int t = 0; t < T; ++t) {
    std::vector<double> q = p;
    for (int k = 0; k < K; ++k) {
      std::discrete_distribution<int> pick(q.begin(), q.end());
      const int e = pick(rng);
      topk.push_back(e);
      q[e] = 0.0;
    }
  }
  return make_routing(T, K, E, std::move(topk));
}

// The canonical schedule, from its definition.
gpu::RoutingSchedule canonical(const Routing& r) {
  gpu::RoutingSchedule s;
  const int n = r.T * r.K;
  const int rows_cap = (r.T * r.K + r.E * (kRows - 1) + kRows - 1) / kRows * kRows;
  std::vector<std::vector<int>> of(r.E);
  for (int p = 0; p < n; ++p) of[r.topk[p]].push_back(p);  // ascending p = ascending (t, k)
  s.counts.resize(r.E);
  s.tile_first.resize(r.E + 1);
  s.token_row.assign(n, -1);
  s.row_token.assign(rows_cap, -1);
  s.row_weight.assign(rows_cap, 0.0f);
  int tiles = 0;
  for (int e = 0; e < r.E; ++e) {
    s.counts[e] = static_cast<int>(of[e].size());
    s.tile_first[e] = tiles;
    for (size_t j = 0; j < of[e].size(); ++j) {
      const int row = tiles * kRows + static_cast<int>(j), p = of[e][j];
      s.token_row[p] = row;
      s.row_token[row] = p / r.K;
      s.row_weight[row] = r.weights[p];
    }
    const int mine = (s.counts[e] + kRows - 1) / kRows;
    for (int m = 0; m < mine; ++m) s.tile_expert.push_back(e);
    tiles += mine;
  }
  s.tile_first[r.E] = tiles;
  s.mtiles = tiles;
  s.padded_rows = tiles * kRows;
  return s;
}

// "" when equal, else the first difference, named.
template <class T>
std::string first_difference(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return fmt::format("{}: {} entries, expected {}", what, got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return fmt::format("{}[{}] = {}, expected {}", what, i, got[i], want[i]);
  return "";
}
std::string compare(const gpu::RoutingSchedule& got, const gpu::RoutingSchedule& want) {
  if (got.padded_rows != want.padded_rows || got.mtiles != want.mtiles)
    return fmt::format("totals {} rows / {} m-tiles, expected {} / {}", got.padded_rows, got.mtiles,
                       want.padded_rows, want.mtiles);
  for (const std::string& d :
       {first_difference("counts", got.counts, want.counts), first_difference("tile_first", got.tile_first, want.tile_first),
        first_difference("tile_expert", got.tile_expert, want.tile_expert),
        first_difference("token_row", got.token_row, want.token_row),
        first_difference("row_token", got.row_token, want.row_token),
        first_difference("row_weight", got.row_weight, want.row_weight)})
    if (!d.empty()) return d;
  return "";
}

class ScheduleGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no GPU: " << gpu::device_description();
  }
  static void expect_canonical(const Routing& r) {
    SCOPED_TRACE(fmt::format("T={} K={} E={}", r.T, r.K, r.E));
    EXPECT_EQ(compare(gpu::schedule_on_device(r.topk, r.weights, r.T, r.K, r.E), canonical(r)), "");
  }
};

TEST_F(ScheduleGpu, UniformAndSkewedRoutings) {
  expect_canonical(random_routing(4096, 8, 128, 0.0, 1));   // qwen3's E, K: 16 chunks of 256 tokens
  expect_canonical(random_routing(3000, 6, 64, 1.2, 2));    // zipf: some experts with many m-tiles, some empty
  expect_canonical(random_routing(2048, 8, 256, 0.0, 3));   // deepseek-v3's E, K
}

TEST_F(ScheduleGpu, MoreExpertsThanSegmentThreadsAndRaggedChunks) {
  // 600 experts: each segment thread scans a run of two; 777 tokens x 3: the last chunk (9 tokens, 27 entries)
  // ends mid warp step
  expect_canonical(random_routing(777, 3, 600, 0.0, 4));
  expect_canonical(random_routing(1100, 5, 1030, 0.5, 5));
}

TEST_F(ScheduleGpu, SegmentsAtTheTileBoundariesAndEmptyExperts) {
  // expert 0: 128 rows, 1: 129, 2: 127, 3: none, 4: 1; interleaved so every warp step mixes experts
  std::vector<int> want = {128, 129, 127, 0, 1}, topk;
  for (int left = 385; left > 0;)
    for (int e = 0; e < 5; ++e)
      if (want[e] > 0) --want[e], topk.push_back(e), --left;
  expect_canonical(make_routing(static_cast<int>(topk.size()), 1, 5, topk));
}

TEST_F(ScheduleGpu, EveryRowOnOneExpertAndTinyShapes) {
  expect_canonical(make_routing(5000, 1, 8, std::vector<int>(5000, 7)));  // experts 0..6 empty, 40 m-tiles of 7
  expect_canonical(make_routing(1, 1, 1, {0}));
  expect_canonical(make_routing(5, 2, 3, {2, 0, 1, 2, 0, 1, 2, 1, 0, 2}));
}

TEST_F(ScheduleGpu, ComparisonSeesTwoSwappedEntries) {
  const Routing r = random_routing(1024, 4, 32, 0.0, 6);
  Routing swapped = r;
  size_t j = 1;
  while (swapped.topk[j] == swapped.topk[0]) ++j;
  std::swap(swapped.topk[0], swapped.topk[j]);  // the same counts, two rows moved
  const gpu::RoutingSchedule got = gpu::schedule_on_device(r.topk, r.weights, r.T, r.K, r.E);
  EXPECT_EQ(compare(got, canonical(r)), "");
  EXPECT_NE(compare(got, canonical(swapped)), "");
}

TEST(ScheduleInput, BadRoutingIsAnErrorNamingTheEntry) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no GPU: " << gpu::device_description();
  try {
    gpu::schedule_on_device({0, 3}, {1.0f, 1.0f}, 1, 2, 3);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("topk[1] = 3 is outside [0, 3)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace calico
