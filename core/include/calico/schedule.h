// The deterministic plan built from routing (DESIGN 2.3-2.4), shared by every backend and the simulator.
//
// The rows of expert e are the (token, k) pairs routed to e, sorted by ascending global token g (then k),
// padded with zero rows only at the end of the expert's segment. This order does not depend on R, the
// minibatch or anything else in RunConfig: it is what makes results partition-invariant.
#pragma once

#include <cstdint>
#include <vector>

#include "calico/spec.h"

namespace calico {

struct ExpertRow {
  int64_t token;  // global token id g = r*T + t
  int32_t k;      // slot in the token's top-k
};

struct ExpertSegment {
  int32_t expert;
  int32_t owner_rank;
  int64_t first_row;  // offset of this expert's segment in the owner rank's receive buffer (padded rows)
  int64_t rows;       // real rows
  int64_t padded_rows;  // rows rounded up to row_align
};

struct Schedule {
  int ranks = 0, experts = 0, experts_per_rank = 0, top_k = 0;
  int64_t tokens_per_rank = 0;
  int row_align = 1;  // expert segments padded to a multiple of this (the GEMM M tile)
  std::vector<std::vector<ExpertRow>> expert_rows;  // [E], canonical order
  std::vector<ExpertSegment> segments;              // [E]
  std::vector<int64_t> rank_rows;                   // [R] padded rows each rank receives
  std::vector<int64_t> rank_capacity;               // [R] rows reserved (>= rank_rows)
  // Traffic per (source rank, destination rank), row-major [R*R]; the diagonal is local.
  // dispatch_tokens[src*R + dst]: tokens of home rank src with at least one expert on dst (one copy per
  //   destination rank, whatever the number of its experts there); the backward pass sends d_out the same way.
  // combine_rows[src*R + dst]: (token, k) rows computed on owner rank src and returned to home rank dst; the
  //   backward pass returns d_x rows the same way. Sum over the matrix = tokens * K.
  std::vector<int64_t> dispatch_tokens;
  std::vector<int64_t> combine_rows;

  int owner_of_expert(int e) const { return e / experts_per_rank; }
  int home_rank_of_token(int64_t g) const { return static_cast<int>(g / tokens_per_rank); }
  int64_t tokens_per_expert(int e) const { return static_cast<int64_t>(expert_rows[e].size()); }
  // Bytes of one token row on the wire for a pass (bf16: 2*H; mxfp8: H + H/32 scale bytes).
  static int64_t row_bytes(const LayerSpec& spec, int hidden);
};

// Builds the schedule; throws calico::Error on capacity overflow, naming rank, expert, needed and capacity.
Schedule build_schedule(const LayerSpec& spec, const RunConfig& config, const Routing& routing, int row_align = 1);

}  // namespace calico
