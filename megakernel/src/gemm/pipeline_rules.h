// How far ahead of its publishes a gathering producer may run in the stage ring (gemm/sm90_tile.cuh,
// produce_tile). Host and device: tests/megakernel/test_pipeline_rules.cpp checks the rule against a
// step-by-step simulation of the producer and consumer protocol (no GPU needed).
//
// Why the 2: a consumer waiting for k-tile kt still holds the stage of kt - 1 (it releases a stage once the
// wgmma batch after it is issued, consume_tile), so only the stages of k-tiles <= kt - 2 are free. A producer
// that gathers `lag` k-tiles before publishing the oldest must own the stage of kt + lag to publish kt; that
// stage's previous k-tile, kt + lag - stages, must then be one of the free ones. A lag of stages - 1 (the rule
// this replaced) deadlocks, as the H200 runs that failed did: lag 3 of 4 stages (2026-12-01, try/gather-lag3) and
// lag 2 of 3 stages (2026-12-02, the strip-ring variant: its producers' free-stage waits timed out), pull modes.
#pragma once

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

CALICO_HD constexpr bool gather_lag_fits(int lag, int stages) { return lag >= 0 && lag + 2 <= stages; }

// Whether consumer warpgroup `wg` of a tile (64 rows each: rows [64 wg, 64 wg + 64)) holds no real row when
// the tile's first `rows` rows are the real ones (the rest padding, zeros): its MMAs could only add zero
// products, so it skips them (gemm/sm90_tile.cuh, idle_warpgroup). tests/megakernel/test_pipeline_rules.cpp
// checks it row by row.
CALICO_HD constexpr bool warpgroup_rows_all_padding(int wg, int rows) { return rows <= 64 * wg; }

}  // namespace calico::gpu::mk
