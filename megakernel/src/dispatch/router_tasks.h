// How the backward's router-gradient side tasks split the (t, k) pairs and lay their rows out in a stage
// (dispatch/router_stages.cuh): task m takes pairs [m P, m P + P), one per consumer thread; per 64-column
// k-tile, pair j's y row piece lands at row j of the stage's B region and token t0 + i's d_out piece at row i
// of its A region, rows kRouterRowStride bytes apart. Host and device (tests/megakernel/test_router_tasks.cpp
// checks the bounds for every K and task of a pass, and the rows' bank spread).
#pragma once

#include <cstdint>

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

constexpr uint32_t kRouterPieceBytes = 128;  // one row's 64 columns of a k-tile (kBK bf16)
// Why 16 bytes more than a piece: consumer thread j reads 16 bytes at row j, chunk q, for every chunk in
// turn (its chain's order); with 128-byte rows the 8 threads of a quarter-warp would hit the same 16-byte
// bank group 8 times, with 144 they hit 8 distinct groups (row j starts j groups further round).
constexpr uint32_t kRouterRowStride = kRouterPieceBytes + 16;
constexpr uint32_t kRouterDoutBytes = 128u * 64u * 2u;  // a stage's A region (kBM x kBK bf16)
constexpr uint32_t kRouterYBytes = 256u * 64u * 2u;     // a stage's B region (256 x kBK bf16)
constexpr int kRouterTokenRows = static_cast<int>(kRouterDoutBytes / kRouterRowStride);  // 113
constexpr int kRouterYRows = static_cast<int>(kRouterYBytes / kRouterRowStride);         // 227
constexpr int kRouterMaxPairs = 256;                                                      // consumer threads

// Pairs per task: kRouterTaskPairs (at most floor(223 / K) + 2 tokens, 112 at K = 2: tasks start at even
// pairs), half of it at K = 1 (one token per pair).
constexpr int kRouterTaskPairs = 224;
CALICO_HD constexpr int router_task_pairs(int K) { return K == 1 ? kRouterTaskPairs / 2 : kRouterTaskPairs; }

// Of a task's pairs, the first kRouterBulkPairs have their y pieces copied by cp.async.bulk, the others by
// 16-byte cp.async (dispatch/router_stages.cuh): measured on qwen3 (2026-12-03, cycles of forward +
// backward): 0 / 32 / 64 / 96 / 224 bulk pairs gave 12.69 / 12.67 / 12.66 / 12.59 / 12.95 Mcycles.
constexpr int kRouterBulkPairs = 96;
// cp.async rows per producer thread (128 threads, 8 per 128-byte piece): 8.
constexpr int kRouterCopyRowsPerThread = (kRouterTaskPairs - kRouterBulkPairs) / 16;
static_assert((kRouterTaskPairs - kRouterBulkPairs) % 16 == 0, "the cp.async rows are whole rounds of the producer's threads");

// Tokens spanned by pairs [p0, p0 + n) (n >= 1): t(p) = p / K.
CALICO_HD int router_task_tokens(int p0, int n, int K) { return (p0 + n - 1) / K - p0 / K + 1; }

// Bytes of row j's piece of k-tile kt: 128, the last k-tile's columns past H not copied (H % 8 == 0).
CALICO_HD uint32_t router_piece_bytes(int H, int kt) {
  const int left = H - kt * 64;
  return left >= 64 ? kRouterPieceBytes : 2u * static_cast<uint32_t>(left);
}

}  // namespace calico::gpu::mk
