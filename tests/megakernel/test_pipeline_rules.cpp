// gemm/pipeline_rules.h against a step-by-step simulation of the stage ring's protocol (gemm/sm90_tile.cuh):
// the producer takes the stage of k-tile kt once k-tile kt - stages was released, gathers into it, and
// publishes k-tile kt - lag after gathering kt; the consumer waits for k-tile kt to be published, issues it,
// and only then releases k-tile kt - 1 (its batch completes behind the next one's issue). The simulation
// knows nothing of the rule; the rule must say "fits" exactly where the simulation finishes.
#include <gtest/gtest.h>

#include <algorithm>

#include "gemm/pipeline_rules.h"

namespace calico::gpu::mk {
namespace {

// True if the two sides get through k_tiles k-tiles of one tile, stepping whichever can move.
bool ring_finishes(int lag, int stages, int k_tiles) {
  int gathered = 0, published = 0;  // producer: k-tiles gathered (stage taken), published
  int issued = 0, released = 0;     // consumer: k-tiles issued, released
  for (;;) {
    bool moved = false;
    // producer: take the next stage (its previous k-tile released), or publish what lags behind
    if (gathered < k_tiles && gathered - stages < released) {
      ++gathered;
      moved = true;
    }
    if (published < gathered && (gathered - published > lag || gathered == k_tiles)) {
      ++published;
      moved = true;
    }
    // consumer: issue the next published k-tile, then release the one before it (or the last, at the end)
    if (issued < k_tiles && issued < published) {
      ++issued;
      moved = true;
    }
    if (released < issued - 1 || (issued == k_tiles && released < k_tiles)) {
      ++released;
      moved = true;
    }
    if (released == k_tiles) return true;
    if (!moved) return false;
  }
}

TEST(PipelineRules, GatherLagRuleIsWhereTheRingFinishes) {
  for (int stages = 2; stages <= 8; ++stages)
    for (int lag = 0; lag <= 8; ++lag)
      for (int k_tiles : {1, 2, 3, 5, 12, 40})
        if (k_tiles > lag + 1)  // a tile shorter than the lag publishes everything at its end
          EXPECT_EQ(ring_finishes(lag, stages, k_tiles), gather_lag_fits(lag, stages))
              << "stages " << stages << ", lag " << lag << ", k-tiles " << k_tiles;
}

TEST(PipelineRules, TheKernelsLagFitsTheKernelsRing) {
  EXPECT_TRUE(gather_lag_fits(2, 4));   // kGatherLag, kStages (also a static_assert in sm90_tile.cuh)
  EXPECT_FALSE(gather_lag_fits(3, 4));  // try/gather-lag3 (failed on the H200)
  EXPECT_FALSE(gather_lag_fits(2, 3));  // the strip-ring variant's pull passes (failed on the H200)
}

// Negative control: the rule this replaced ("lag < stages") disagrees with the simulation, so the sweep above
// can tell rules apart.
TEST(PipelineRules, TheOldRuleDisagreesWithTheSimulation) {
  int disagreements = 0;
  for (int stages = 2; stages <= 8; ++stages)
    for (int lag = 0; lag <= 8; ++lag) disagreements += ring_finishes(lag, stages, 40) != (lag < stages);
  EXPECT_GT(disagreements, 0);
}

}  // namespace
}  // namespace calico::gpu::mk
