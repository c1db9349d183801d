// The router-gradient side tasks' split of the (t, k) pairs and their stage layout (dispatch/router_tasks.h):
// every pair in one task, at most one pair per consumer thread, the pairs' y rows within the stage's B region
// and the tokens' d_out rows within its A region (router_stages.cuh copies rows t0 .. t0 + tokens - 1 there;
// one more would overwrite the next stage's region or be read as garbage), the consumers' reads spread over
// the banks, and the pieces covering each row. No GPU needed: the device computes the same functions.
#include <gtest/gtest.h>

#include <string>

#include "dispatch/router_tasks.h"

namespace calico::gpu::mk {
namespace {

// "" or the first problem of splitting the T * K pairs into tasks of `per_task` pairs.
std::string split_problem(int T, int K, int per_task) {
  const long long pairs = static_cast<long long>(T) * K;
  long long covered = 0;
  for (long long p0 = 0; p0 < pairs; p0 += per_task) {
    const int n = static_cast<int>(pairs - p0 < per_task ? pairs - p0 : per_task);
    const std::string at = "T " + std::to_string(T) + " K " + std::to_string(K) + " task at pair " + std::to_string(p0);
    if (n < 1 || n > kRouterMaxPairs || n > kRouterYRows) return at + ": " + std::to_string(n) + " pairs";
    const int tokens = router_task_tokens(static_cast<int>(p0), n, K);
    // Independently: count the distinct tokens p / K of the task's pairs (they are ascending).
    int distinct = 0, last = -1;
    for (long long p = p0; p < p0 + n; ++p)
      if (p / K != last) ++distinct, last = static_cast<int>(p / K);
    if (tokens != distinct) return at + ": router_task_tokens says " + std::to_string(tokens) + ", counted " + std::to_string(distinct);
    if (tokens > kRouterTokenRows) return at + ": " + std::to_string(tokens) + " tokens";
    covered += n;
  }
  return covered == pairs ? "" : "pairs not covered";
}

TEST(RouterTasks, EveryTaskFitsTheStageForEveryTopK) {
  for (int K = 1; K <= 32; ++K)
    for (int T : {1, 2, 3, 7, 64, 127, 129, 2048, 16383, 16384})
      EXPECT_EQ(split_problem(T, K, router_task_pairs(K)), "");
}

TEST(RouterTasks, CheckCatchesSplitsThatOverflow) {
  // 200 pairs per task at K = 1 are 200 tokens; one pair past the bound is caught too.
  EXPECT_NE(split_problem(1024, 1, 200).find("200 tokens"), std::string::npos);
  EXPECT_NE(split_problem(1024, 1, 114).find("114 tokens"), std::string::npos);
  // More pairs than consumer threads, or than y rows of the B region.
  EXPECT_NE(split_problem(1024, 8, 512).find("512 pairs"), std::string::npos);
  EXPECT_NE(split_problem(1024, 8, 228).find("228 pairs"), std::string::npos);
}

TEST(RouterTasks, RowsFitTheirRegions) {
  EXPECT_LE(static_cast<uint32_t>(kRouterYRows) * kRouterRowStride, kRouterYBytes);
  EXPECT_LE(static_cast<uint32_t>(kRouterTokenRows) * kRouterRowStride, kRouterDoutBytes);
  EXPECT_EQ(kRouterRowStride % 16, 0u);  // every row 16-byte aligned: cp.async.bulk's destination rule
}

// "" or the first quarter-warp of `stride`-byte rows whose 16-byte reads (thread j: row row_of(j), chunk q)
// share a bank group without reading the same address (a conflict; the same address is a broadcast).
template <class RowOf>
std::string bank_problem(uint32_t stride, RowOf&& row_of) {
  for (int q = 0; q < 8; ++q)
    for (int j0 = 0; j0 < kRouterMaxPairs; j0 += 8) {
      uint32_t seen[8];
      for (int g = 0; g < 8; ++g) seen[g] = ~0u;
      for (int j = j0; j < j0 + 8; ++j) {
        const uint32_t addr = static_cast<uint32_t>(row_of(j)) * stride + 16u * static_cast<uint32_t>(q);
        const uint32_t group = (addr / 16u) % 8u;
        if (seen[group] != ~0u && seen[group] != addr)
          return "threads " + std::to_string(j0) + "+ chunk " + std::to_string(q) + ": group " + std::to_string(group);
        seen[group] = addr;
      }
    }
  return "";
}

TEST(RouterTasks, ConsumerReadsSpreadOverTheBanks) {
  EXPECT_EQ(bank_problem(kRouterRowStride, [](int j) { return j; }), "");  // y: thread j reads row j
  for (int K = 1; K <= 32; ++K)                                             // d_out: its pair's token
    for (int p0 : {0, 224, 448, 4 * 224 + 0, 17 * 224})
      EXPECT_EQ(bank_problem(kRouterRowStride, [&](int j) { return (p0 + j) / K - p0 / K; }), "") << "K " << K;
  // Negative control: unpadded 128-byte rows put a quarter-warp's 8 rows in one group.
  EXPECT_NE(bank_problem(kRouterPieceBytes, [](int j) { return j; }), "");
}

TEST(RouterTasks, PiecesCoverEachRow) {
  for (int H : {8, 64, 72, 1000, 2048, 7168}) {
    uint32_t total = 0;
    for (int kt = 0; kt * 64 < H; ++kt) {
      const uint32_t b = router_piece_bytes(H, kt);
      EXPECT_TRUE(b > 0 && b <= kRouterPieceBytes && b % 16 == 0) << "H " << H << " k-tile " << kt << ": " << b;
      total += b;
    }
    EXPECT_EQ(total, 2u * static_cast<uint32_t>(H)) << "H " << H;
  }
}

}  // namespace
}  // namespace calico::gpu::mk
