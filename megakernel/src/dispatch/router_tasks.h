// How the backward's router-gradient side tasks split the (t, k) pairs (dispatch/router_stages.cuh): task m
// takes pairs [m P, m P + P), one per consumer thread, and its tokens' d_out rows must fit the 128-row A
// region of a stage. Host and device (tests/megakernel/test_router_tasks.cpp checks the bound for every K and
// task of a pass).
#pragma once

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

constexpr int kRouterTokenRows = 128;  // rows of a stage's A region (kBM)
constexpr int kRouterMaxPairs = 256;   // consumer threads of a compute CTA

// Pairs per task: 256, except K = 1 (256 pairs would be 256 tokens): 128. With K >= 2 a task spans at most
// floor(255 / K) + 2 tokens, and exactly 128 at K = 2 (tasks start at even pairs: token boundaries).
CALICO_HD constexpr int router_task_pairs(int K) { return K == 1 ? kRouterTokenRows : kRouterMaxPairs; }

// Tokens spanned by pairs [p0, p0 + n) (n >= 1): t(p) = p / K.
CALICO_HD int router_task_tokens(int p0, int n, int K) { return (p0 + n - 1) / K - p0 / K + 1; }

}  // namespace calico::gpu::mk
