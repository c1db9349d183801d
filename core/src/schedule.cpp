// build_schedule: the canonical per-expert row order, the per-rank receive layout and the per-(source,
// destination) traffic of one MoE layer (DESIGN 2.3-2.4). Pure bookkeeping over the routing; no arithmetic
// on activations, so every backend and the simulator can share it.
#include "calico/schedule.h"

#include <cmath>

#include "calico/error.h"

namespace calico {

int64_t Schedule::row_bytes(const LayerSpec& spec, int hidden) {
  if (spec.dtype == DType::mxfp8) return static_cast<int64_t>(hidden) + hidden / kMxBlock;  // e4m3 + e8m0 scales
  return 2 * static_cast<int64_t>(hidden);
}

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Rows each rank may receive: ceil(factor * T * K), or exactly what the routing needs when factor == 0.
int64_t capacity_rows(const RunConfig& config, const LayerSpec& spec, int64_t needed) {
  if (config.capacity_factor == 0.0) return needed;
  const double rows = std::ceil(config.capacity_factor * static_cast<double>(config.tokens_per_rank) *
                                static_cast<double>(spec.top_k));
  return static_cast<int64_t>(rows);
}

}  // namespace

Schedule build_schedule(const LayerSpec& spec, const RunConfig& config, const Routing& routing, int row_align) {
  spec.validate();
  config.validate(spec);
  routing.validate(spec);
  require(routing.tokens == config.total_tokens(),
          "routing has {} tokens but the run needs ranks*tokens_per_rank = {}*{} = {}", routing.tokens,
          config.ranks, config.tokens_per_rank, config.total_tokens());
  require(row_align >= 1 && row_align <= 4096, "row_align must be in [1, 4096], got {}", row_align);

  Schedule s;
  s.ranks = config.ranks;
  s.experts = spec.experts;
  s.experts_per_rank = spec.experts / config.ranks;
  s.top_k = spec.top_k;
  s.tokens_per_rank = config.tokens_per_rank;
  s.row_align = row_align;
  const int R = s.ranks, E = s.experts, K = s.top_k;

  // Canonical order: scanning tokens in ascending g and slots in ascending k appends to each expert's list
  // in (g, k) order; a token names an expert at most once, so that is the sorted order of DESIGN 2.3.
  std::vector<int64_t> per_expert(E, 0);
  for (int64_t i = 0; i < routing.tokens * K; ++i) ++per_expert[routing.topk_experts[i]];
  s.expert_rows.resize(E);
  for (int e = 0; e < E; ++e) s.expert_rows[e].reserve(per_expert[e]);
  s.dispatch_tokens.assign(static_cast<size_t>(R) * R, 0);
  s.combine_rows.assign(static_cast<size_t>(R) * R, 0);
  std::vector<int64_t> last_token_to_rank(R, -1);  // dedups (token, destination) pairs
  for (int64_t g = 0; g < routing.tokens; ++g) {
    const int home = s.home_rank_of_token(g);
    for (int k = 0; k < K; ++k) {
      const int e = routing.expert(g, k);
      s.expert_rows[e].push_back({g, k});
      const int owner = s.owner_of_expert(e);
      s.combine_rows[static_cast<size_t>(owner) * R + home] += 1;
      if (last_token_to_rank[owner] != g) {
        last_token_to_rank[owner] = g;
        s.dispatch_tokens[static_cast<size_t>(home) * R + owner] += 1;
      }
    }
  }

  // Receive layout: on each owner rank, its experts' segments back to back in ascending expert id, each
  // padded with zero rows only at its end.
  s.segments.resize(E);
  s.rank_rows.assign(R, 0);
  for (int e = 0; e < E; ++e) {
    const int owner = s.owner_of_expert(e);
    const int64_t rows = static_cast<int64_t>(s.expert_rows[e].size());
    s.segments[e] = {e, owner, s.rank_rows[owner], rows, round_up(rows, row_align)};
    s.rank_rows[owner] += s.segments[e].padded_rows;
  }

  // Capacity: overflow is an error naming the first expert whose segment does not fit (DESIGN 2.4).
  s.rank_capacity.assign(R, 0);
  for (int r = 0; r < R; ++r) {
    s.rank_capacity[r] = capacity_rows(config, spec, s.rank_rows[r]);
    if (s.rank_rows[r] <= s.rank_capacity[r]) continue;
    for (int e = r * s.experts_per_rank; e < (r + 1) * s.experts_per_rank; ++e) {
      const ExpertSegment& seg = s.segments[e];
      if (seg.first_row + seg.padded_rows > s.rank_capacity[r])
        throw Error(fmt::format(
            "capacity overflow on rank {}: expert {} needs rows [{}, {}) of the receive buffer ({} routed rows, "
            "padded to {}), the rank needs {} rows in all, capacity is {} rows (capacity_factor={} * T={} * K={}); "
            "raise --capacity or use 0 to size the buffer to fit",
            r, e, seg.first_row, seg.first_row + seg.padded_rows, seg.rows, seg.padded_rows, s.rank_rows[r],
            s.rank_capacity[r], config.capacity_factor, config.tokens_per_rank, spec.top_k));
    }
  }
  return s;
}

}  // namespace calico
