// The combine tasks' index arithmetic (combine/combine.cuh), run on the host: every thread's share of every
// task, one thread after the other (the threads share nothing), must write every output chunk with the
// contract's chain (calico/reference.h: acc = shared row or +0; for k = 0..K-1: acc = fmaf(w_k, y_k, acc)
// forward, acc + d_x_k backward; bf16(acc)), for thread counts that do and do not divide the chunks
// (kCombineChunks chunks per thread and pass, the last pass partly past the end). Negative controls: a
// missing thread leaves chunks unwritten, and the chain in another order of k gives other bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "calico/numerics.h"
#include "combine/combine.cuh"

namespace calico::gpu::mk {
namespace {

constexpr uint16_t kUnwritten = 0x7FC1;  // a NaN pattern f32_to_bf16 never produces (it gives 0x7FFF for NaN)

struct Case {
  int T, K, H;
  bool weighted, with_shared;
  std::vector<uint16_t> rows, shared;
  std::vector<int> token_row;
  std::vector<float> weights;
};

Case make_case(int T, int K, int H, bool weighted, bool with_shared, uint32_t seed) {
  Case c{T, K, H, weighted, with_shared, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int R = T * K + 5;  // a few rows no token reads
  for (int i = 0; i < R * H; ++i) c.rows.push_back(f32_to_bf16(normal(rng)));
  if (with_shared)
    for (int i = 0; i < T * H; ++i) c.shared.push_back(f32_to_bf16(normal(rng)));
  std::vector<int> perm(R);
  for (int i = 0; i < R; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  c.token_row.assign(perm.begin(), perm.begin() + T * K);
  for (int i = 0; i < T * K; ++i) c.weights.push_back(std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));
  return c;
}

// The contract's chain, k in the order given.
std::vector<uint16_t> contract(const Case& c, bool reverse_k = false) {
  std::vector<uint16_t> out(static_cast<size_t>(c.T) * c.H);
  for (int t = 0; t < c.T; ++t)
    for (int h = 0; h < c.H; ++h) {
      float acc = c.with_shared ? bf16_to_f32(c.shared[t * c.H + h]) : 0.0f;
      for (int kk = 0; kk < c.K; ++kk) {
        const int k = reverse_k ? c.K - 1 - kk : kk;
        const float y = bf16_to_f32(c.rows[static_cast<size_t>(c.token_row[t * c.K + k]) * c.H + h]);
        acc = c.weighted ? f32_fma(c.weights[t * c.K + k], y, acc) : f32_add(acc, y);
      }
      out[t * c.H + h] = f32_to_bf16(acc);
    }
  return out;
}

// Rows whose sum depends on the order at bf16 precision: per token, k = 0: 2^24, k = 1: 1, k = 2: -2^24
// (in order, 2^24 + 1 rounds back to 2^24 and the sum is 0; in reverse, -2^24 + 1 is exact and the sum 1).
Case cancellation_case(int T, int H) {
  Case c = make_case(T, 3, H, /*weighted=*/false, /*with_shared=*/false, 5);
  const float value[3] = {16777216.0f, 1.0f, -16777216.0f};
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < 3; ++k)
      for (int h = 0; h < H; ++h) c.rows[static_cast<size_t>(c.token_row[t * 3 + k]) * H + h] = f32_to_bf16(value[k]);
  return c;
}

// The tasks of ct tokens, as the kernels walk them, with every thread of nthreads but skip_tid.
std::vector<uint16_t> combined(const Case& c, int ct, int nthreads, int skip_tid = -1) {
  std::vector<uint16_t> out(static_cast<size_t>(c.T) * c.H, kUnwritten);
  for (int t0 = 0; t0 < c.T; t0 += ct)
    for (int tid = 0; tid < nthreads; ++tid) {
      if (tid == skip_tid) continue;
      const uint16_t* shared = c.with_shared ? c.shared.data() : nullptr;
      if (c.weighted)
        combine_tokens<true>(c.rows.data(), c.token_row.data(), c.weights.data(), shared, out.data(), t0,
                             std::min(ct, c.T - t0), c.K, c.H, tid, nthreads);
      else
        combine_tokens<false>(c.rows.data(), c.token_row.data(), nullptr, shared, out.data(), t0,
                              std::min(ct, c.T - t0), c.K, c.H, tid, nthreads);
    }
  return out;
}

// "" or the first element that differs.
std::string first_difference(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, int H) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return "token " + std::to_string(i / H) + " column " + std::to_string(i % H) +
             (got[i] == kUnwritten ? ": not written" : ": bits differ");
  return "";
}

TEST(CombineTokens, EveryChunkIsTheContractsChainForAnyThreadCount) {
  for (int H : {8, 64, 2048})
    for (int K : {1, 2, 8})
      for (bool weighted : {true, false})
        for (bool with_shared : {false, true}) {
          const Case c = make_case(37, K, H, weighted, with_shared, static_cast<uint32_t>(H * 131 + K * 7 + weighted * 2 + with_shared));
          const std::vector<uint16_t> want = contract(c);
          for (int nthreads : {1, 3, 256, 384})
            for (int ct : {1, 16, 37}) {
              SCOPED_TRACE("H " + std::to_string(H) + " K " + std::to_string(K) + " weighted " + std::to_string(weighted) +
                           " shared " + std::to_string(with_shared) + " threads " + std::to_string(nthreads) +
                           " tokens per task " + std::to_string(ct));
              EXPECT_EQ(first_difference(combined(c, ct, nthreads), want, H), "");
            }
        }
}

TEST(CombineTokens, CheckCatchesMissingThreadsAndAnotherOrder) {
  const Case c = make_case(37, 8, 64, true, true, 11);
  const std::vector<uint16_t> want = contract(c);
  ASSERT_EQ(first_difference(combined(c, 16, 256), want, 64), "");
  // Thread 0 not run: its chunks stay unwritten.
  EXPECT_NE(first_difference(combined(c, 16, 256, /*skip_tid=*/0), want, 64), "");
  // The order of k: the cancellation rows sum to 0 in order, to 1 in reverse.
  const Case cancel = cancellation_case(37, 64);
  EXPECT_EQ(first_difference(combined(cancel, 16, 256), contract(cancel), 64), "");
  EXPECT_NE(first_difference(combined(cancel, 16, 256), contract(cancel, /*reverse_k=*/true), 64), "");
  EXPECT_EQ(combined(cancel, 16, 256)[0], f32_to_bf16(0.0f));
}

}  // namespace
}  // namespace calico::gpu::mk
