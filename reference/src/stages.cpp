// The rank-local stage functions of the reference layer and the buffer lists that define what travels
// between ranks (calico/reference.h). Each stage reads and writes plain row buffers, so an in-process driver
// and an MPI driver can run the same code.
#include <algorithm>
#include <cstring>

#include "calico/error.h"
#include "calico/numerics.h"
#include "calico/reference.h"
#include "ffn.h"

namespace calico::ref {

// Below this many elements a loop runs on one thread (see ffn.cpp); outputs are independent either way.
constexpr int64_t kParallelMin = 1 << 12;

std::vector<int64_t> dispatch_list(const Schedule& s, int src, int dst) {
  std::vector<int64_t> tokens;
  for (int e = dst * s.experts_per_rank; e < (dst + 1) * s.experts_per_rank; ++e)
    for (const ExpertRow& row : s.expert_rows[e])
      if (s.home_rank_of_token(row.token) == src) tokens.push_back(row.token);
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

std::vector<CombineEntry> combine_list(const Schedule& s, int src, int dst) {
  std::vector<CombineEntry> entries;
  for (int e = src * s.experts_per_rank; e < (src + 1) * s.experts_per_rank; ++e) {
    const auto& rows = s.expert_rows[e];
    for (size_t i = 0; i < rows.size(); ++i)
      if (s.home_rank_of_token(rows[i].token) == dst)
        entries.push_back({rows[i].token, rows[i].k, e, static_cast<int64_t>(i)});
  }
  std::sort(entries.begin(), entries.end(), [](const CombineEntry& a, const CombineEntry& b) {
    return a.token != b.token ? a.token < b.token : a.k < b.k;
  });
  return entries;
}

namespace {

// For each local expert row, the received dispatch row holding its token (from the token's home rank).
struct RowSource {
  int src;
  int64_t row;
};

std::vector<std::vector<RowSource>> locate_rows(const Schedule& s, int rank, const std::vector<RowBuffer>& received,
                                                int hidden) {
  std::vector<std::vector<int64_t>> lists(s.ranks);
  for (int src = 0; src < s.ranks; ++src) {
    lists[src] = dispatch_list(s, src, rank);
    require(static_cast<int64_t>(received[src].size()) == static_cast<int64_t>(lists[src].size()) * hidden,
            "dispatch buffer from rank {} to rank {} has {} values, the schedule says {} rows of H={}", src, rank,
            received[src].size(), lists[src].size(), hidden);
  }
  std::vector<std::vector<RowSource>> where(s.experts_per_rank);
  for (int le = 0; le < s.experts_per_rank; ++le) {
    for (const ExpertRow& row : s.expert_rows[rank * s.experts_per_rank + le]) {
      const int src = s.home_rank_of_token(row.token);
      const auto& l = lists[src];
      where[le].push_back({src, std::lower_bound(l.begin(), l.end(), row.token) - l.begin()});
    }
  }
  return where;
}

// Gathers the received rows of one expert into [n, H].
UninitVector<uint16_t> gather(const std::vector<RowSource>& where, const std::vector<RowBuffer>& received, int H) {
  UninitVector<uint16_t> X(where.size() * static_cast<size_t>(H));
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(where.size()) * H >= kParallelMin)
  for (int64_t i = 0; i < static_cast<int64_t>(where.size()); ++i)
    std::memcpy(&X[i * H], &received[where[i].src][where[i].row * H], sizeof(uint16_t) * H);
  return X;
}

// Packs per-expert result rows [n_e, H] into the R combine buffers of this owner rank.
std::vector<RowBuffer> pack_combine(const Schedule& s, int rank, const std::vector<UninitVector<uint16_t>>& rows,
                                    int H) {
  std::vector<RowBuffer> send(s.ranks);
  for (int dst = 0; dst < s.ranks; ++dst) {
    const auto entries = combine_list(s, rank, dst);
    send[dst].resize(entries.size() * static_cast<size_t>(H));
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(entries.size()) * H >= kParallelMin)
    for (int64_t j = 0; j < static_cast<int64_t>(entries.size()); ++j) {
      const auto& src = rows[entries[j].expert - rank * s.experts_per_rank];
      std::memcpy(&send[dst][j * H], &src[entries[j].expert_row * H], sizeof(uint16_t) * H);
    }
  }
  return send;
}

// For a home rank: pointer to the received row of every (local token t, slot k), [T*K].
std::vector<const uint16_t*> locate_combined(const Schedule& s, int rank, const std::vector<RowBuffer>& received,
                                             int H) {
  std::vector<const uint16_t*> slot(static_cast<size_t>(s.tokens_per_rank * s.top_k), nullptr);
  for (int src = 0; src < s.ranks; ++src) {
    const auto entries = combine_list(s, src, rank);
    require(static_cast<int64_t>(received[src].size()) == static_cast<int64_t>(entries.size()) * H,
            "combine buffer from rank {} to rank {} has {} values, the schedule says {} rows of H={}", src, rank,
            received[src].size(), entries.size(), H);
    for (size_t j = 0; j < entries.size(); ++j)
      slot[(entries[j].token - rank * s.tokens_per_rank) * s.top_k + entries[j].k] = &received[src][j * H];
  }
  return slot;
}

}  // namespace

std::vector<RowBuffer> dispatch_pack(const Schedule& s, int rank, int hidden, const uint16_t* x) {
  std::vector<RowBuffer> send(s.ranks);
  const int64_t H = hidden;
  for (int dst = 0; dst < s.ranks; ++dst) {
    const auto tokens = dispatch_list(s, rank, dst);
    send[dst].resize(tokens.size() * H);
    for (size_t i = 0; i < tokens.size(); ++i)
      std::memcpy(&send[dst][i * H], &x[(tokens[i] - rank * s.tokens_per_rank) * H], sizeof(uint16_t) * H);
  }
  return send;
}

std::vector<RowBuffer> expert_forward(const LayerSpec& spec, const Schedule& s, int rank,
                                      const std::vector<RowBuffer>& received, const ExpertWeights& w,
                                      std::vector<FfnSaved>& saved) {
  const int H = spec.hidden, I = spec.intermediate;
  const auto where = locate_rows(s, rank, received, H);
  saved.assign(s.experts_per_rank, FfnSaved{});
  std::vector<UninitVector<uint16_t>> y(s.experts_per_rank);
  std::vector<detail::FfnForwardTask> tasks(s.experts_per_rank);
  for (int le = 0; le < s.experts_per_rank; ++le) {  // all local experts in one batch (ffn.h)
    saved[le].x = gather(where[le], received, H);  // the saved X is the GEMM operand itself (no copy)
    const int64_t n = static_cast<int64_t>(where[le].size());
    y[le].resize(static_cast<size_t>(n * H));
    const size_t wo = static_cast<size_t>(le) * I * H;
    tasks[le] = {I, n, saved[le].x.data(), w.w_gate + wo, w.w_up + wo, w.w_down + wo, &saved[le], y[le].data()};
  }
  detail::ffn_forward_batch(spec, tasks);
  return pack_combine(s, rank, y, H);
}

RowBuffer shared_forward(const LayerSpec& spec, int64_t tokens, const uint16_t* x, const ExpertWeights& w,
                         FfnSaved& saved) {
  RowBuffer y(static_cast<size_t>(tokens * spec.hidden));
  detail::ffn_forward(spec, spec.shared_intermediate, tokens, x, w.ws_gate, w.ws_up, w.ws_down, saved, y.data());
  return y;
}

void combine(const LayerSpec& spec, const Schedule& s, const Routing& routing, int rank,
             const std::vector<RowBuffer>& received, const RowBuffer& y_shared, uint16_t* out) {
  const int H = spec.hidden, K = s.top_k;
  const auto slot = locate_combined(s, rank, received, H);
  const bool shared = !y_shared.empty();
#pragma omp parallel for schedule(static) if (s.tokens_per_rank * H >= kParallelMin)
  for (int64_t t = 0; t < s.tokens_per_rank; ++t) {
    const int64_t g = rank * s.tokens_per_rank + t;
    for (int c = 0; c < H; ++c) {
      float acc = shared ? bf16_to_f32(y_shared[t * H + c]) : 0.0f;
      for (int k = 0; k < K; ++k) acc = f32_fma(routing.weight(g, k), bf16_to_f32(slot[t * K + k][c]), acc);
      out[t * H + c] = f32_to_bf16(acc);
    }
  }
}

void router_grad(const LayerSpec& spec, const Schedule& s, int rank, const uint16_t* d_out,
                 const std::vector<RowBuffer>& received_y, float* d_router_weights) {
  const int H = spec.hidden, K = s.top_k;
  const auto slot = locate_combined(s, rank, received_y, H);
#pragma omp parallel for schedule(static) if (s.tokens_per_rank * H >= kParallelMin)
  for (int64_t t = 0; t < s.tokens_per_rank; ++t) {
    for (int k = 0; k < K; ++k) {
      float acc = 0.0f;
      for (int c = 0; c < H; ++c) acc = f32_fma(bf16_to_f32(d_out[t * H + c]), bf16_to_f32(slot[t * K + k][c]), acc);
      d_router_weights[t * K + k] = acc;
    }
  }
}

std::vector<RowBuffer> expert_backward(const LayerSpec& spec, const Schedule& s, const Routing& routing, int rank,
                                       const std::vector<RowBuffer>& received, const ExpertWeights& w,
                                       const std::vector<FfnSaved>& saved, const ExpertGrads& grads) {
  const int H = spec.hidden, I = spec.intermediate;
  const auto where = locate_rows(s, rank, received, H);
  std::vector<UninitVector<uint16_t>> dx(s.experts_per_rank), d_ys(s.experts_per_rank);
  std::vector<detail::FfnBackwardTask> tasks(s.experts_per_rank);
  for (int le = 0; le < s.experts_per_rank; ++le) {  // all local experts in one batch (ffn.h)
    const int e = rank * s.experts_per_rank + le;
    const auto d_out = gather(where[le], received, H);
    const int64_t n = static_cast<int64_t>(where[le].size());
    // d_y = bf16(w_k * d_out), fp32 multiply.
    UninitVector<uint16_t>& d_y = d_ys[le];
    d_y.resize(static_cast<size_t>(n * H));
#pragma omp parallel for schedule(static) if (n * H >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const float wk = routing.weight(s.expert_rows[e][i].token, s.expert_rows[e][i].k);
      for (int c = 0; c < H; ++c) d_y[i * H + c] = f32_to_bf16(wk * bf16_to_f32(d_out[i * H + c]));
    }
    dx[le].resize(static_cast<size_t>(n * H));
    const size_t wo = static_cast<size_t>(le) * I * H;
    tasks[le] = {I, &saved[le], d_y.data(), w.w_gate + wo, w.w_up + wo, w.w_down + wo, dx[le].data(),
                 grads.d_w_gate + wo, grads.d_w_up + wo, grads.d_w_down + wo};
  }
  detail::ffn_backward_batch(spec, tasks);
  return pack_combine(s, rank, dx, H);
}

RowBuffer shared_backward(const LayerSpec& spec, int64_t tokens, const uint16_t* d_out, const ExpertWeights& w,
                          const FfnSaved& saved, const ExpertGrads& grads) {
  RowBuffer dx(static_cast<size_t>(tokens * spec.hidden));
  detail::ffn_backward(spec, spec.shared_intermediate, saved, d_out, w.ws_gate, w.ws_up, w.ws_down, dx.data(),
                       grads.d_ws_gate, grads.d_ws_up, grads.d_ws_down);
  return dx;
}

void backward_combine(const LayerSpec& spec, const Schedule& s, int rank, const std::vector<RowBuffer>& received,
                      const RowBuffer& dx_shared, uint16_t* d_x) {
  const int H = spec.hidden, K = s.top_k;
  const auto slot = locate_combined(s, rank, received, H);
  const bool shared = !dx_shared.empty();
#pragma omp parallel for schedule(static) if (s.tokens_per_rank * H >= kParallelMin)
  for (int64_t t = 0; t < s.tokens_per_rank; ++t) {
    for (int c = 0; c < H; ++c) {
      float acc = shared ? bf16_to_f32(dx_shared[t * H + c]) : 0.0f;
      for (int k = 0; k < K; ++k) acc = acc + bf16_to_f32(slot[t * K + k][c]);
      d_x[t * H + c] = f32_to_bf16(acc);
    }
  }
}

}  // namespace calico::ref
