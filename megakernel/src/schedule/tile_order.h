// The order in which a pass walks the (m, n) output tiles of one expert's GEMM: host and device (the host
// tests check it; the walks decode with it).
//
// Why: tiles of the same expert and column n read the same weight columns. Walked m-tile by m-tile (n
// fastest), two of them start n_per_m tasks apart; at deepseek-v3 (16-28 columns, 112 k-tiles of 48 KB) the
// 132 CTAs stream ~90 MB through the 50 MB L2 in between, so every m-tile read the expert's weights from HBM
// again. Grouped: up to kGroupM m-tiles of an expert walk each column together (their tasks adjacent, so they
// start within a task or two of each other and the later reads hit L2), and a group's m-tile rows are reused
// across its columns kGroupM tasks apart.
//
// NOTE (bits): only which CTA runs a tile, and when, changes; every output element is still one chain
// computed by one task. NOTE (the walk): the order stays inside one GEMM's phase, so each task still waits
// only on tasks of earlier phases.
#pragma once

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

constexpr int kGroupM = 8;  // m-tiles per group: 8 x 128 rows of activations stay in L2 across a column

struct TileMN {
  int m = 0, n = 0;
};

// The tile at walk position j of the (m, n) tiles of m-tiles [first, first + count) and columns
// [0, n_per_m), which occupy positions [first * n_per_m, (first + count) * n_per_m): groups of `group` m-tiles
// (the last one shorter), inside a group column by column, m fastest.
CALICO_HD TileMN grouped_tile(int j, int first, int count, int n_per_m, int group = kGroupM) {
  const int local = j - first * n_per_m;
  const int g = local / (group * n_per_m);
  const int base = g * group;
  const int in_group = count - base < group ? count - base : group;
  const int r = local - base * n_per_m;
  return {first + base + r % in_group, r / in_group};
}

// The routed tile at walk position j in [0, m_tiles * n_per_m) of a GEMM over every expert's segment, experts
// in order: tile_expert[m-tile] and tile_first[E + 1] of the device schedule (moe/params.cuh). Position j
// lies in its expert's block, whose m-tiles include j / n_per_m (experts without rows have no block).
CALICO_HD TileMN routed_grouped_tile(int j, int n_per_m, const int* tile_expert, const int* tile_first) {
  const int e = tile_expert[j / n_per_m];
  const int first = tile_first[e];
  return grouped_tile(j, first, tile_first[e + 1] - first, n_per_m);
}

// A walk of n_main main tasks (GEMM tiles) with n_side side tasks (memory-bound work: the router gradient,
// the d_x combine) spread evenly over its positions [lead, n_main + n_side): a side task runs on a CTA while
// the others run GEMM tiles, so its HBM traffic overlaps their tensor-core time instead of following it.
// lead: positions that stay main tasks (a side task that must wait for the main tasks before the walk lets
// those finish first). Position i -> {side?, index among its kind}; every main index and every side index
// exactly once, in increasing order (host test). Requires 0 <= lead <= n_main.
struct WalkSlot {
  bool side = false;
  int index = 0;
};
CALICO_HD WalkSlot interleaved_slot(int i, int n_main, int n_side, int lead) {
  if (i < lead || n_side == 0) return {false, i};
  const long long span = static_cast<long long>(n_main) + n_side - lead, j = i - lead;
  const int before = static_cast<int>(j * n_side / span), after = static_cast<int>((j + 1) * n_side / span);
  if (after > before) return {true, before};
  return {false, i - before};
}

}  // namespace calico::gpu::mk
