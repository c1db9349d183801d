// The router-gradient side tasks' split of the (t, k) pairs (dispatch/router_tasks.h): every pair in one
// task, at most one pair per consumer thread, and the tokens of a task within the stage's 128 d_out rows
// (router_stages.cuh gathers rows t0 .. t0 + tokens - 1 into them; one more would overwrite the next stage's
// region or be read as garbage). No GPU needed: the device computes the same functions.
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
    if (n < 1 || n > kRouterMaxPairs) return at + ": " + std::to_string(n) + " pairs";
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
  // 256 pairs per task at K = 1 are 256 tokens; one pair past the bound is caught too.
  EXPECT_NE(split_problem(1024, 1, 256).find("256 tokens"), std::string::npos);
  EXPECT_NE(split_problem(1024, 1, 129).find("129 tokens"), std::string::npos);
  // More pairs than consumer threads.
  EXPECT_NE(split_problem(1024, 8, 512).find("512 pairs"), std::string::npos);
}

}  // namespace
}  // namespace calico::gpu::mk
