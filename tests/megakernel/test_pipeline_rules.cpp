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
        if (k_tiles > lag + 1) {  // a tile shorter than the lag publishes everything at its end
          EXPECT_EQ(ring_finishes(lag, stages, k_tiles), gather_lag_fits(lag, stages))
              << "stages " << stages << ", lag " << lag << ", k-tiles " << k_tiles;
        }
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

// A warpgroup skips its MMAs exactly when none of its 64 rows is real: counted row by row for tiles of up to
// four warpgroups and every number of real rows (0: a tile past its segment's last real row).
int real_rows_of_warpgroup(int wg, int rows) {
  int real = 0;
  for (int r = 64 * wg; r < 64 * wg + 64; ++r) real += r < rows;
  return real;
}

TEST(PipelineRules, AWarpgroupIsIdleExactlyWhenAllItsRowsArePadding) {
  for (int wg = 0; wg < 4; ++wg)
    for (int rows = 0; rows <= 256; ++rows)
      EXPECT_EQ(warpgroup_rows_all_padding(wg, rows), real_rows_of_warpgroup(wg, rows) == 0)
          << "warpgroup " << wg << ", " << rows << " real rows";
}

// Negative control: a rule one row too generous ("rows <= 64 wg + 1") skips a warpgroup whose first row is
// real, which the row count above catches.
TEST(PipelineRules, AnIdleRuleOneRowOffSkipsARealRow) {
  int dropped = 0;
  for (int wg = 0; wg < 4; ++wg)
    for (int rows = 0; rows <= 256; ++rows) dropped += (rows <= 64 * wg + 1) != (real_rows_of_warpgroup(wg, rows) == 0);
  EXPECT_EQ(dropped, 4);  // rows = 64 wg + 1: warpgroup wg's first row is real
}

}  // namespace
}  // namespace calico::gpu::mk
