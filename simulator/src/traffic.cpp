// Per-minibatch traffic matrices and expert row counts: from a Schedule, or generated from uniform routing
// for any R (the NVL72 studies use R that does not divide E; ownership is then floor(r*E/R) based).
#include <algorithm>

#include "calico/error.h"
#include "calico/simulator.h"

namespace calico::sim {

namespace {

std::vector<int> owners(int experts, int ranks) {
  std::vector<int> own(experts);
  for (int r = 0; r < ranks; ++r) {
    const int lo = static_cast<int>(int64_t(r) * experts / ranks), hi = static_cast<int>(int64_t(r + 1) * experts / ranks);
    for (int e = lo; e < hi; ++e) own[e] = r;
  }
  return own;
}

Traffic empty_traffic(int experts, int ranks, int64_t tokens_per_rank, int64_t minibatch_tokens) {
  require(ranks >= 1, "ranks must be >= 1, got {}", ranks);
  require(experts >= ranks, "experts (E={}) must be >= ranks, got R={}", experts, ranks);
  require(tokens_per_rank >= 1, "tokens per rank must be >= 1, got {}", tokens_per_rank);
  require(minibatch_tokens >= 1 && minibatch_tokens <= tokens_per_rank,
          "minibatch must be in [1, tokens per rank={}], got {}", tokens_per_rank, minibatch_tokens);
  Traffic t;
  t.ranks = ranks;
  t.experts = experts;
  t.tokens_per_rank = tokens_per_rank;
  t.minibatch_tokens = minibatch_tokens;
  t.minibatches = static_cast<int>((tokens_per_rank + minibatch_tokens - 1) / minibatch_tokens);
  t.expert_owner = owners(experts, ranks);
  const size_t m = t.minibatches;
  t.dispatch_tokens.assign(m * ranks * ranks, 0);
  t.combine_rows.assign(m * ranks * ranks, 0);
  t.expert_rows.assign(m * experts, 0);
  t.home_tokens.assign(m * ranks, 0);
  for (int mb = 0; mb < t.minibatches; ++mb)
    for (int r = 0; r < ranks; ++r)
      t.home_tokens[size_t(mb) * ranks + r] = std::min(minibatch_tokens, tokens_per_rank - mb * minibatch_tokens);
  return t;
}

// Accounts one token's top-k experts: one dispatch copy per distinct owner, one combine row per slot.
void add_token(Traffic& t, int mb, int home, const int32_t* experts, int k) {
  const size_t base = (size_t(mb) * t.ranks + home) * t.ranks;
  for (int j = 0; j < k; ++j) {
    const int e = experts[j], o = t.expert_owner[e];
    bool seen = false;
    for (int i = 0; i < j; ++i) seen |= t.expert_owner[experts[i]] == o;
    if (!seen) ++t.dispatch_tokens[base + o];
    ++t.combine_rows[(size_t(mb) * t.ranks + o) * t.ranks + home];
    ++t.expert_rows[size_t(mb) * t.experts + e];
  }
}

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Traffic traffic_from_schedule(const Schedule& s, int minibatch_tokens) {
  const int64_t mb = minibatch_tokens == 0 ? s.tokens_per_rank : minibatch_tokens;
  Traffic t = empty_traffic(s.experts, s.ranks, s.tokens_per_rank, mb);
  for (int e = 0; e < s.experts; ++e)
    require(t.expert_owner[e] == s.owner_of_expert(e), "schedule: expert {} owned by rank {}, expected {}", e,
            s.owner_of_expert(e), t.expert_owner[e]);
  // Gather each token's experts back from the canonical expert rows, then account token by token.
  const int64_t tokens = s.tokens_per_rank * s.ranks;
  std::vector<int32_t> topk(size_t(tokens) * s.top_k, -1);
  std::vector<int> filled(tokens, 0);
  for (int e = 0; e < s.experts; ++e)
    for (const auto& row : s.expert_rows[e]) {
      require(row.token >= 0 && row.token < tokens && row.k >= 0 && row.k < s.top_k,
              "schedule: expert {} has row (token {}, k {}) out of range", e, row.token, row.k);
      topk[size_t(row.token) * s.top_k + row.k] = e;
      ++filled[row.token];
    }
  for (int64_t g = 0; g < tokens; ++g) {
    const int home = static_cast<int>(g / s.tokens_per_rank);
    const int mbi = static_cast<int>((g % s.tokens_per_rank) / mb);
    // Tokens may route fewer than K rows in a hand-built schedule; compact the slots that exist.
    std::vector<int32_t> ex;
    for (int k = 0; k < s.top_k; ++k)
      if (topk[size_t(g) * s.top_k + k] >= 0) ex.push_back(topk[size_t(g) * s.top_k + k]);
    add_token(t, mbi, home, ex.data(), static_cast<int>(ex.size()));
  }
  return t;
}

Traffic traffic_uniform(const LayerSpec& spec, int ranks, int64_t tokens_per_rank, int64_t minibatch_tokens,
                        uint64_t seed) {
  Traffic t = empty_traffic(spec.experts, ranks, tokens_per_rank, minibatch_tokens);
  const int k = spec.top_k;
  require(k >= 1 && k <= spec.experts, "top_k must be in [1, E={}], got {}", spec.experts, k);
  std::vector<int32_t> chosen(k);
  for (int r = 0; r < ranks; ++r)
    for (int64_t tok = 0; tok < tokens_per_rank; ++tok) {
      const uint64_t g = uint64_t(r) * tokens_per_rank + tok;
      uint64_t ctr = 0;
      for (int j = 0; j < k;) {  // rejection sampling of K distinct experts; a function of (seed, g) only
        const auto e = static_cast<int32_t>(splitmix(seed ^ splitmix(g * 64 + ctr++)) % uint64_t(spec.experts));
        if (std::find(chosen.begin(), chosen.begin() + j, e) == chosen.begin() + j) chosen[j++] = e;
      }
      add_token(t, static_cast<int>(tok / minibatch_tokens), r, chosen.data(), k);
    }
  return t;
}

Traffic traffic_from_routing(const LayerSpec& spec, const Routing& routing, int ranks, int64_t tokens_per_rank,
                             int64_t minibatch_tokens) {
  require(routing.tokens == int64_t(ranks) * tokens_per_rank && routing.top_k == spec.top_k,
          "traffic: routing has {} tokens and K={}, the run needs R*T={} and K={}", routing.tokens, routing.top_k,
          int64_t(ranks) * tokens_per_rank, spec.top_k);
  Traffic t = empty_traffic(spec.experts, ranks, tokens_per_rank, minibatch_tokens);
  for (int64_t g = 0; g < routing.tokens; ++g) {
    const int home = static_cast<int>(g / tokens_per_rank);
    const int mb = static_cast<int>((g % tokens_per_rank) / minibatch_tokens);
    const int32_t* ex = routing.topk_experts.data() + g * routing.top_k;
    for (int k = 0; k < routing.top_k; ++k)
      require(ex[k] >= 0 && ex[k] < spec.experts, "traffic: token {} routes to expert {} (E={})", g, ex[k], spec.experts);
    add_token(t, mb, home, ex, routing.top_k);
  }
  return t;
}

}  // namespace calico::sim
